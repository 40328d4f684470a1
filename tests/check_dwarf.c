/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * editor/ed_dwarf.c: DWARF for relocated code. tests/known/known.c is compiled at test
 * time with debug information (gcc DWARF 5 at -O0 and -O2, gcc DWARF 4, clang DWARF 5);
 * its DWARF is rewritten for maps that move the whole text by a constant, or only the
 * procedures below one function, and the output file (elfw_write) is read back with
 * binutils' readelf: it must decode without a warning, and its line table must be the
 * input's with exactly the moved rows at their new addresses.
 */
#include <check.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cfg/cfg.h"
#include "editor/ed.h"
#include "editor/elfw.h"

#define SHIFT 0x100000u

typedef struct variant {
    const char *name; /* file name in the work directory */
    const char *cmd;  /* compiler and flags */
    int ok;           /* 1 when it built */
} variant_t;

static variant_t variants[] = {
    { "gcc-O0", "gcc -g -O0", 0 },
    { "gcc-O2", "gcc -g -O2", 0 },
    { "gcc-dwarf4", "gcc -gdwarf-4 -O2", 0 },
    { "clang-O1", "clang -g -O1", 0 },
};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

static char workdir[256];

/*****************************************************************************
 * Helpers
 */

static void
path_of(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", workdir, name);
}

static int
sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    int st;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    st = system(cmd);
    return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

/* Run a shell command and capture its output (*OUT, malloc'ed). Its exit status. */
static int
capture(char **out, const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    size_t n = 0, cap = 1 << 16;
    int st;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    *out = malloc(cap);
    ck_assert_ptr_nonnull(*out);
    for (;;) {
        if (n + 1 == cap) {
            *out = realloc(*out, cap *= 2);
            ck_assert_ptr_nonnull(*out);
        }
        size_t got = fread(*out + n, 1, cap - 1 - n, p);
        if (got == 0)
            break;
        n += got;
    }
    (*out)[n] = '\0';
    st = pclose(p);
    return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

/*****************************************************************************
 * Test maps: [lo, hi) moves by SHIFT, the rest stays
 */

typedef struct tmap {
    uint64_t lo, hi; /* the moved range */
} tmap_t;

static uint64_t
tmap_map(void *arg, uint64_t old)
{
    const tmap_t *m = arg;
    return old >= m->lo && old < m->hi ? old + SHIFT : 0;
}

static uint64_t
tmap_ret(void *arg, uint64_t old)
{
    const tmap_t *m = arg;
    return old > m->lo && old <= m->hi ? old + SHIFT : 0;
}

static int
tmap_pieces(void *arg, uint64_t lo, uint64_t hi, ed_piece_fn fn, void *fnarg)
{
    const tmap_t *m = arg;
    while (lo < hi) {
        if (lo >= m->lo && lo < m->hi) {
            uint64_t e = hi < m->hi ? hi : m->hi;
            int rc = fn(fnarg, lo, e - lo, lo + SHIFT, e - lo);
            if (rc < 0)
                return rc;
            lo = e;
        } else {
            uint64_t e = lo < m->lo && hi > m->lo ? m->lo : hi;
            int rc = fn(fnarg, lo, e - lo, 0, e - lo);
            if (rc < 0)
                return rc;
            lo = e;
        }
    }
    return 0;
}

/* A row of a decoded line table. */
typedef struct lrow {
    unsigned line;
    uint64_t addr;
} lrow_t;

static int
cmp_lrow(const void *a, const void *b)
{
    const lrow_t *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

/* The rows (not the ends of sequences) of PATH's line tables, by readelf; when M is not
 * NULL, each row in M's range also once more, SHIFT higher (the rewriter keeps the old
 * rows, since the old code stays in the file, and adds rows for the moved copy). */
static lrow_t *
decoded_rows(const char *path, const tmap_t *m, size_t *n)
{
    char *text, *save = NULL;
    size_t cap = 256;
    lrow_t *v = malloc(cap * sizeof(*v));
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(
        capture(&text, "readelf --debug-dump=decodedline '%s' 2>&1", path), 0);
    *n = 0;
    for (char *l = strtok_r(text, "\n", &save); l != NULL;
         l = strtok_r(NULL, "\n", &save)) {
        char file[256];
        unsigned line;
        unsigned long long addr;
        if (sscanf(l, "%255s %u 0x%llx", file, &line, &addr) != 3)
            continue;
        if (*n + 2 > cap)
            ck_assert_ptr_nonnull(v = realloc(v, (cap *= 2) * sizeof(*v)));
        v[*n].line = line;
        v[*n].addr = addr;
        (*n)++;
        if (m != NULL && addr >= m->lo && addr < m->hi) {
            v[*n].line = line;
            v[*n].addr = addr + SHIFT;
            (*n)++;
        }
    }
    free(text);
    qsort(v, *n, sizeof(*v), cmp_lrow);
    return v;
}

/* The address of the symbol NAME in IMG. */
static uint64_t
sym_addr(const cfg_image_t *img, const char *name)
{
    for (size_t i = 0; i < img->nsymbols; i++)
        if (strcmp(img->symbols[i].name, name) == 0)
            return img->symbols[i].addr;
    ck_abort_msg("no symbol %s", name);
    return 0;
}

/* Rewrite variant V's DWARF for M (NULL: all of .text), write it and check the result. */
static void
check_map(const variant_t *v, int partial)
{
    char in[512], out[512], err[512];
    cfg_image_t *img = NULL;
    tmap_t m = { 0, 0 };
    ed_dwarf_out_t dw;

    path_of(in, sizeof(in), v->name);
    path_of(out, sizeof(out), "out");
    ck_assert_int_eq(cfg_image_open_bfd(in, &img), 0);
    for (size_t i = 0; i < img->nsections; i++)
        if (strcmp(img->sections[i].name, ".text") == 0) {
            m.lo = img->sections[i].vma;
            m.hi = m.lo + img->sections[i].size;
        }
    ck_assert_uint_ne(m.hi, 0);
    if (partial)
        m.hi = sym_addr(img, "count_loop"); /* straight and what precedes it move */
    ed_dwarf_map_t dm = { tmap_map, tmap_ret, tmap_pieces, &m };
    ck_assert_int_eq(ed_dwarf_build(img, &dm, &dw), 0);
    ck_assert_msg(dw.nline_rows_moved > 0 && dw.ndie_moved > 0 && dw.ncu_moved == 1,
        "%s: %llu rows, %u DIEs, %u CUs moved", v->name,
        (unsigned long long)dw.nline_rows_moved, dw.ndie_moved, dw.ncu_moved);
    ck_assert_uint_eq(dw.ndie_addrx + dw.nunits_skipped + dw.ncompressed, 0);

    elfw_section_t secs[ED_DWARF_MAXSEC];
    for (size_t i = 0; i < dw.nsecs; i++)
        secs[i] = (elfw_section_t) { dw.secs[i].name, dw.secs[i].data, dw.secs[i].size };
    elfw_request_t req;
    memset(&req, 0, sizeof(req));
    req.input = in;
    req.output = out;
    req.sections = secs;
    req.nsections = dw.nsecs;
    ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s: %s", v->name, err);
    ed_dwarf_out_free(&dw);
    cfg_image_destroy(img);

    /* readelf decodes everything without a word on stderr. */
    char *text;
    ck_assert_int_eq(
        capture(&text,
            "readelf --debug-dump=line,info,aranges,ranges '%s' 2>&1 >/dev/null", out),
        0);
    ck_assert_msg(text[0] == '\0', "%s: readelf:\n%s", v->name, text);
    free(text);

    /* The same rows, and the moved ones again SHIFT higher. */
    size_t ni, no;
    lrow_t *ri = decoded_rows(in, &m, &ni);
    lrow_t *ro = decoded_rows(out, NULL, &no);
    ck_assert_msg(ni == no && ni > 0, "%s: %zu rows in, %zu out", v->name, ni, no);
    for (size_t i = 0; i < ni; i++)
        ck_assert_msg(ri[i].line == ro[i].line && ri[i].addr == ro[i].addr,
            "%s: row %zu: line %u at 0x%llx expected, line %u at 0x%llx", v->name, i,
            ri[i].line, (unsigned long long)ri[i].addr, ro[i].line,
            (unsigned long long)ro[i].addr);
    free(ri);
    free(ro);
    unlink(out);
}

/*****************************************************************************
 * Tests
 */

START_TEST(test_dwarf_shift_all)
{
    for (size_t v = 0; v < NVARIANTS; v++)
        if (variants[v].ok)
            check_map(&variants[v], 0);
}
END_TEST

START_TEST(test_dwarf_shift_part)
{
    for (size_t v = 0; v < NVARIANTS; v++)
        if (variants[v].ok)
            check_map(&variants[v], 1);
}
END_TEST

START_TEST(test_dwarf_errors)
{
    ed_dwarf_out_t dw;
    tmap_t m = { 0, 0 };
    ed_dwarf_map_t dm = { tmap_map, tmap_ret, tmap_pieces, &m };
    ck_assert_int_eq(ed_dwarf_build(NULL, &dm, &dw), QP_EINVAL);
    /* An image without debug information changes nothing. */
    static const uint8_t code[] = { 0xc3 };
    cfg_image_t *img;
    ck_assert_int_eq(cfg_image_from_bytes(code, sizeof(code), 0x1000, &img), 0);
    ck_assert_int_eq(ed_dwarf_build(img, NULL, &dw), QP_EINVAL);
    ck_assert_int_eq(ed_dwarf_build(img, &dm, &dw), 0);
    ck_assert_uint_eq(dw.nsecs, 0);
    cfg_image_destroy(img);
}
END_TEST

static Suite *
dwarf_suite(void)
{
    Suite *s = suite_create("dwarf");
    TCase *tc = tcase_create("rewrite");
    tcase_add_test(tc, test_dwarf_shift_all);
    tcase_add_test(tc, test_dwarf_shift_part);
    tcase_add_test(tc, test_dwarf_errors);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    const char *tmp = getenv("TMPDIR");
    const char *src = getenv("top_srcdir");
    int built = 0;

    snprintf(workdir, sizeof(workdir), "%s/check_dwarf.XXXXXX",
        tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(workdir) == NULL) {
        perror("check_dwarf: mkdtemp");
        return 99;
    }
    for (size_t v = 0; v < NVARIANTS; v++) {
        char out[512];
        path_of(out, sizeof(out), variants[v].name);
        variants[v].ok = sh("%s -o '%s' '%s/tests/known/known.c' 2>/dev/null",
                             variants[v].cmd, out, src != NULL ? src : ".")
            == 0;
        built += variants[v].ok;
    }
    if (built == 0) {
        fprintf(stderr, "check_dwarf: cannot compile tests/known/known.c: skipped\n");
        sh("rm -rf '%s'", workdir);
        return 77;
    }
    SRunner *sr = srunner_create(dwarf_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    sh("rm -rf '%s'", workdir);
    return failed == 0 ? 0 : 1;
}
