/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Tests of the ELF writer (elfw_write). main() compiles a small C program several ways
 * (PIE, non-PIE, static, static-pie, PIE with CET properties, PIE with --emit-relocs;
 * a variant whose toolchain fails is skipped), then each test rewrites those binaries
 * and checks the output: it runs and behaves as expected, readelf reads it without a
 * warning, the original segments' bytes are unchanged except where patched, and errors
 * leave nothing behind. The file structures are read back with glibc's <elf.h>, not
 * libelf, so that the checks do not share code with the writer.
 */
#include <check.h>
#include <elf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "editor/ed.h"
#include "editor/elfw.h"
#include "runtime/qprt.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define PAGE 4096ull

/* The test program: prints a line and exits with a known status. */
static const char prog_src[] = "#include <stdio.h>\n"
                               "static volatile int counter = 3;\n"
                               "int main(void) {\n"
                               "    counter += 4;\n"
                               "    puts(\"hello from elfw\");\n"
                               "    return counter;\n"
                               "}\n";
#define PROG_OUT "hello from elfw\n"
#define PROG_STATUS 7

/* One way to build the program. */
typedef struct variant {
    const char *name;  /* file name in the work directory */
    const char *flags; /* gcc flags */
    int ok;            /* 1 when it built and runs */
} variant_t;

static variant_t variants[] = {
    { "pie", "-O2 -pie -fPIE", 0 },
    { "nopie", "-O2 -no-pie -fno-PIE", 0 },
    { "static", "-O2 -static", 0 },
    { "static-pie", "-O2 -static-pie", 0 },
    /* Not in the generic loops: */
    { "cet", "-O2 -fcf-protection=full -Wl,-z,ibt,-z,shstk", 0 },
    { "emitrelocs", "-O2 -Wl,--emit-relocs", 0 },
};
#define NGENERIC 4
#define V_CET 4
#define V_EMITRELOCS 5

static char workdir[256];

/*****************************************************************************
 * Helpers: files, commands, ELF structures
 */

static void
path_of(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", workdir, name);
}

static uint8_t *
read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *p = NULL;
    size_t cap = 0, n = 0;

    if (f == NULL)
        return NULL;
    for (;;) {
        size_t got;
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            p = realloc(p, cap);
            ck_assert_ptr_nonnull(p);
        }
        got = fread(p + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    *len = n;
    return p;
}

static int
files_equal(const char *a, const char *b)
{
    size_t la, lb;
    uint8_t *pa = read_all(a, &la), *pb = read_all(b, &lb);
    int eq = pa != NULL && pb != NULL && la == lb && memcmp(pa, pb, la) == 0;

    free(pa);
    free(pb);
    return eq;
}

/* Run a shell command (printf-style); its exit status, or -1. */
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
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

/*
 * tests/progs/SRC compiled with CC -O2 into OUT for TEST: 1; 0, said on stderr, when CC
 * is not installed (TEST is skipped); a compiler that fails fails TEST.
 */
static int
compile_or_skip(const char *test, const char *cc, const char *src, const char *out)
{
    const char *srcdir = getenv("top_srcdir");
    if (sh("command -v %s >/dev/null 2>&1", cc) != 0) {
        fprintf(stderr, "check_elfw: %s skipped: no %s\n", test, cc);
        return 0;
    }
    ck_assert_msg(sh("%s -O2 -o '%s' '%s/tests/progs/%s'", cc, out, srcdir ? srcdir : ".",
                     src) == 0,
                  "%s: %s cannot compile tests/progs/%s", test, cc, src);
    return 1;
}

/* Run a shell command and capture its stdout (and stderr with 2>&1 in CMD). */
static int
capture(char *out, size_t outlen, const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    FILE *p;
    size_t n = 0;
    int st;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    while (n + 1 < outlen) {
        size_t got = fread(out + n, 1, outlen - 1 - n, p);
        if (got == 0)
            break;
        n += got;
    }
    out[n] = '\0';
    while (fgetc(p) != EOF)
        ;
    st = pclose(p);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

/* Run PATH; its stdout goes into OUT and its exit status is returned. */
static int
run_prog(const char *path, char *out, size_t outlen)
{
    return capture(out, outlen, "'%s'", path);
}

/*
 * readelf shows every table of OUT without a warning or an error and, when elfutils'
 * linter is installed, it finds nothing in OUT that it does not find in IN. Known
 * elflint quirk: a writable segment holding only NOBITS sections is "writable but
 * contains no writable sections" (it counts PROGBITS ones only). With EH_MOVED, the
 * PT_GNU_EH_FRAME that no longer matches the old .eh_frame_hdr section is expected.
 */
static void
assert_clean(const char *in, const char *out, int eh_moved)
{
    static char rep[1 << 20], ref[1 << 20];
    char *line, *save = NULL;
    int st = capture(rep, sizeof(rep), "readelf -W -h -l -S -s -n -d -r '%s' 2>&1", out);

    ck_assert_msg(st == 0, "readelf failed on %s", out);
    ck_assert_msg(strstr(rep, "Warning") == NULL && strstr(rep, "warning") == NULL
            && strstr(rep, "Error") == NULL,
        "readelf complains about %s:\n%s", out, rep);
    if (sh("command -v eu-elflint >/dev/null 2>&1") != 0)
        return;
    capture(ref, sizeof(ref), "eu-elflint --gnu-ld '%s' 2>&1", in);
    capture(rep, sizeof(rep), "eu-elflint --gnu-ld '%s' 2>&1", out);
    for (line = strtok_r(rep, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (strcmp(line, "No errors") == 0 || strstr(ref, line) != NULL
            || strstr(line, "is writable but contains no writable sections") != NULL)
            continue;
        if (eh_moved && strstr(line, "call frame search table") != NULL)
            continue;
        ck_abort_msg("eu-elflint complains about %s: %s", out, line);
    }
}

typedef struct elf_file {
    uint8_t *p;         /* the bytes */
    size_t len;         /* their number */
    Elf64_Ehdr eh;      /* the ELF header */
    Elf64_Phdr ph[128]; /* the program headers */
    size_t phnum;       /* their number */
} elf_file_t;

static void
elf_load(elf_file_t *f, const char *path)
{
    size_t i;

    memset(f, 0, sizeof(*f));
    f->p = read_all(path, &f->len);
    ck_assert_msg(f->p != NULL, "cannot read %s", path);
    ck_assert_uint_ge(f->len, sizeof(Elf64_Ehdr));
    memcpy(&f->eh, f->p, sizeof(f->eh));
    ck_assert_int_eq(memcmp(f->eh.e_ident, ELFMAG, SELFMAG), 0);
    ck_assert_uint_eq(f->eh.e_phentsize, sizeof(Elf64_Phdr));
    f->phnum = f->eh.e_phnum;
    ck_assert_uint_le(f->phnum, NELEM(f->ph));
    ck_assert_uint_le(f->eh.e_phoff + f->phnum * sizeof(Elf64_Phdr), f->len);
    for (i = 0; i < f->phnum; i++)
        memcpy(
            &f->ph[i], f->p + f->eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof(f->ph[i]));
}

static void
elf_free(elf_file_t *f)
{
    free(f->p);
    f->p = NULL;
}

/* The first new region's address: the end of the highest PT_LOAD, page-aligned. */
static uint64_t
first_free_vaddr(const elf_file_t *f)
{
    uint64_t end = 0;
    size_t i;

    for (i = 0; i < f->phnum; i++)
        if (f->ph[i].p_type == PT_LOAD && f->ph[i].p_vaddr + f->ph[i].p_memsz > end)
            end = f->ph[i].p_vaddr + f->ph[i].p_memsz;
    return (end + PAGE - 1) & ~(PAGE - 1);
}

static const Elf64_Phdr *
find_phdr(const elf_file_t *f, uint32_t type, uint64_t vaddr, int any_vaddr)
{
    size_t i;

    for (i = 0; i < f->phnum; i++)
        if (f->ph[i].p_type == type && (any_vaddr || f->ph[i].p_vaddr == vaddr))
            return &f->ph[i];
    return NULL;
}

/* The file offset of VADDR through the PT_LOAD that holds its bytes. */
static uint64_t
vaddr_to_off(const elf_file_t *f, uint64_t vaddr)
{
    size_t i;

    for (i = 0; i < f->phnum; i++) {
        const Elf64_Phdr *p = &f->ph[i];
        if (p->p_type == PT_LOAD && vaddr >= p->p_vaddr
            && vaddr < p->p_vaddr + p->p_filesz)
            return p->p_offset + (vaddr - p->p_vaddr);
    }
    ck_abort_msg("no PT_LOAD holds %#llx", (unsigned long long)vaddr);
    return 0;
}

/* Does the table have a PT_NOTE that PT_GNU_PROPERTY repeats, or a PT_NULL entry? */
static int
has_free_slot(const elf_file_t *f)
{
    const Elf64_Phdr *prop = find_phdr(f, PT_GNU_PROPERTY, 0, 1);
    size_t i;

    for (i = 0; i < f->phnum; i++) {
        if (f->ph[i].p_type == PT_NULL)
            return 1;
        if (prop != NULL && f->ph[i].p_type == PT_NOTE
            && f->ph[i].p_offset == prop->p_offset && f->ph[i].p_filesz == prop->p_filesz)
            return 1;
    }
    return 0;
}

/*
 * Every original PT_LOAD's file bytes are the same in OUT, except the ranges
 * [skip_off[i], skip_off[i] + skip_len[i]), the ELF header (e_phoff, e_phnum, e_shoff,
 * e_shnum may change; the rest is compared) and the program header table when it
 * stayed in place (its old entries are compared in assert_old_phdrs_kept).
 */
static void
assert_loads_kept(const elf_file_t *in, const elf_file_t *out, const uint64_t *skip_off,
    const uint64_t *skip_len, size_t nskip)
{
    Elf64_Ehdr a = in->eh, b2 = out->eh;
    uint64_t phlo = in->eh.e_phoff, phhi = phlo + in->phnum * sizeof(Elf64_Phdr);
    size_t i, k;
    uint64_t b;

    a.e_phoff = b2.e_phoff = a.e_phnum = b2.e_phnum = 0;
    a.e_shoff = b2.e_shoff = a.e_shnum = b2.e_shnum = 0;
    ck_assert_int_eq(memcmp(&a, &b2, sizeof(a)), 0);
    if (out->eh.e_phoff != in->eh.e_phoff)
        phlo = phhi = 0; /* moved: the old table bytes must stay */

    for (i = 0; i < in->phnum; i++) {
        const Elf64_Phdr *p = &in->ph[i];
        if (p->p_type != PT_LOAD)
            continue;
        ck_assert_ptr_nonnull(find_phdr(out, PT_LOAD, p->p_vaddr, 0));
        ck_assert_uint_le(p->p_offset + p->p_filesz, out->len);
        /* One assertion per segment: Check records every passing assertion. */
        for (b = p->p_offset; b < p->p_offset + p->p_filesz; b++) {
            int skipped = b < sizeof(Elf64_Ehdr) || (b >= phlo && b < phhi);
            for (k = 0; k < nskip; k++)
                if (b >= skip_off[k] && b < skip_off[k] + skip_len[k])
                    skipped = 1;
            if (!skipped && in->p[b] != out->p[b])
                break;
        }
        ck_assert_msg(b == p->p_offset + p->p_filesz, "byte at offset %#llx changed",
            (unsigned long long)b);
    }
}

/* Every program header of IN is in OUT unchanged, except PT_PHDR when the table moved. */
static void
assert_old_phdrs_kept(const elf_file_t *in, const elf_file_t *out)
{
    size_t i, j;

    for (i = 0; i < in->phnum; i++) {
        const Elf64_Phdr *p = &in->ph[i];
        int found = 0;
        if (p->p_type == PT_NULL
            || (p->p_type == PT_PHDR && out->eh.e_phoff != in->eh.e_phoff)
            || p->p_type == PT_NOTE || p->p_type == PT_GNU_EH_FRAME)
            continue;
        for (j = 0; j < out->phnum && !found; j++) {
            const Elf64_Phdr *q = &out->ph[j];
            found = memcmp(p, q, sizeof(*p)) == 0;
            /* The first PT_LOAD may grow over the moved table put in its page's rest. */
            if (!found && p->p_type == PT_LOAD && q->p_type == PT_LOAD
                && q->p_offset == p->p_offset && q->p_vaddr == p->p_vaddr
                && q->p_flags == p->p_flags && q->p_align == p->p_align
                && p->p_filesz == p->p_memsz && q->p_filesz == q->p_memsz
                && out->eh.e_phoff >= p->p_offset + p->p_filesz
                && q->p_offset + q->p_filesz
                    == out->eh.e_phoff + out->phnum * sizeof(Elf64_Phdr))
                found = 1;
        }
        ck_assert_msg(found, "program header %zu (type %#x) lost", i, p->p_type);
    }
}

/*
 * The structural rules: PT_PHDR first and equal to the table, PT_INTERP before the
 * loads, loads sorted without sharing pages, offsets congruent to addresses, and the
 * table inside a PT_LOAD.
 */
static void
assert_phdrs_sane(const elf_file_t *f)
{
    uint64_t prev_end = 0, phsize = f->phnum * sizeof(Elf64_Phdr);
    int seen_load = 0, table_loaded = 0;
    size_t i;

    for (i = 0; i < f->phnum; i++) {
        const Elf64_Phdr *p = &f->ph[i];
        if (p->p_type == PT_PHDR) {
            ck_assert_uint_eq(i, 0);
            ck_assert_uint_eq(p->p_offset, f->eh.e_phoff);
            ck_assert_uint_eq(p->p_filesz, phsize);
        }
        if (p->p_type == PT_INTERP)
            ck_assert(!seen_load);
        if (p->p_type != PT_LOAD)
            continue;
        seen_load = 1;
        ck_assert_uint_eq(p->p_offset % PAGE, p->p_vaddr % PAGE);
        ck_assert_uint_ge(p->p_vaddr & ~(PAGE - 1), prev_end);
        prev_end = (p->p_vaddr + p->p_memsz + PAGE - 1) & ~(PAGE - 1);
        ck_assert_uint_le(p->p_offset + p->p_filesz, f->len);
        if (f->eh.e_phoff >= p->p_offset
            && f->eh.e_phoff + phsize <= p->p_offset + p->p_filesz) {
            const Elf64_Phdr *ph = find_phdr(f, PT_PHDR, 0, 1);
            table_loaded = 1;
            if (ph != NULL)
                ck_assert_uint_eq(
                    ph->p_vaddr, p->p_vaddr + (f->eh.e_phoff - p->p_offset));
        }
    }
    ck_assert_msg(table_loaded, "no PT_LOAD holds the program header table");
}

/* The address of symbol NAME in PATH, from nm; 0 when missing. *TYPE gets nm's letter. */
static uint64_t
nm_lookup(const char *path, const char *name, char *type)
{
    static char out[1 << 20];
    char *line, *save = NULL;

    ck_assert_int_eq(capture(out, sizeof(out), "nm -P '%s' 2>&1", path), 0);
    for (line = strtok_r(out, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char n[256], t;
        unsigned long long v;
        if (sscanf(line, "%255s %c %llx", n, &t, &v) == 3 && strcmp(n, name) == 0) {
            if (type != NULL)
                *type = t;
            return v;
        }
    }
    return 0;
}

/* Nothing named *.tmp* is left in the work directory. */
static void
assert_no_leftovers(void)
{
    DIR *d = opendir(workdir);
    struct dirent *e;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL)
        ck_assert_msg(strstr(e->d_name, ".tmp") == NULL, "leftover %s", e->d_name);
    closedir(d);
}

/* ERR is one non-empty line. */
static void
assert_one_line(const char *err)
{
    ck_assert_msg(err[0] != '\0', "empty error message");
    ck_assert_msg(strchr(err, '\n') == NULL, "multi-line error message: %s", err);
}

static void
assert_runs_like_input(const char *in, const char *out)
{
    char a[4096], b[4096];
    int sa = run_prog(in, a, sizeof(a));
    int sb = run_prog(out, b, sizeof(b));

    ck_assert_int_eq(sa, PROG_STATUS);
    ck_assert_str_eq(a, PROG_OUT);
    ck_assert_int_eq(sb, sa);
    ck_assert_str_eq(b, a);
}

/*****************************************************************************
 * Requests that succeed
 */

START_TEST(test_elfw_identity)
{
    size_t v;

    for (v = 0; v < NGENERIC + 2; v++) {
        char in[512], out[512], err[512];
        elfw_request_t req;
        elf_file_t fi, fo;

        if (!variants[v].ok)
            continue;
        path_of(in, sizeof(in), variants[v].name);
        path_of(out, sizeof(out), "identity.out");
        memset(&req, 0, sizeof(req));
        req.input = in;
        req.output = out;
        ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s: %s", in, err);
        assert_runs_like_input(in, out);
        assert_clean(in, out, 0);
        elf_load(&fi, in);
        elf_load(&fo, out);
        assert_loads_kept(&fi, &fo, NULL, NULL, 0);
        /* Nothing asked, nothing changed: the very same bytes. */
        ck_assert_msg(files_equal(in, out), "%s: identity output differs", in);
        elf_free(&fi);
        elf_free(&fo);
        unlink(out);
    }
}
END_TEST

START_TEST(test_elfw_regions)
{
    static const uint8_t code[16] = { 0xc3, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
        0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc };
    static const uint8_t data[] = "qpt read-only data";
    size_t v;

    for (v = 0; v < NGENERIC; v++) {
        char in[512], out[512], err[512], dis[1 << 16];
        elfw_region_t rg[2];
        elfw_request_t req;
        elf_file_t fi, fo;
        const Elf64_Phdr *p;
        uint64_t base;

        if (!variants[v].ok)
            continue;
        path_of(in, sizeof(in), variants[v].name);
        path_of(out, sizeof(out), "regions.out");
        elf_load(&fi, in);
        base = first_free_vaddr(&fi);
        memset(rg, 0, sizeof(rg));
        rg[0] = (elfw_region_t) { ".qpt.text", base, code, sizeof(code),
            ED_PROT_R | ED_PROT_X, 16, 0 };
        rg[1] = (elfw_region_t) { ".qpt.rodata", base + 0x2000, data, sizeof(data),
            ED_PROT_R, 8, 0 };
        memset(&req, 0, sizeof(req));
        req.input = in;
        req.output = out;
        req.regions = rg;
        req.nregions = 2;
        ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s: %s", in, err);
        assert_runs_like_input(in, out);
        assert_clean(in, out, 0);
        elf_load(&fo, out);
        assert_phdrs_sane(&fo);
        assert_old_phdrs_kept(&fi, &fo);
        assert_loads_kept(&fi, &fo, NULL, NULL, 0);

        p = find_phdr(&fo, PT_LOAD, base, 0);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq(p->p_flags, PF_R | PF_X);
        ck_assert_uint_eq(p->p_filesz, sizeof(code));
        ck_assert_int_eq(memcmp(fo.p + p->p_offset, code, sizeof(code)), 0);
        p = find_phdr(&fo, PT_LOAD, base + 0x2000, 0);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq(p->p_flags, PF_R);
        ck_assert_int_eq(memcmp(fo.p + p->p_offset, data, sizeof(data)), 0);

        ck_assert_int_eq(
            capture(dis, sizeof(dis), "objdump -d -j .qpt.text '%s' 2>&1", out), 0);
        ck_assert_msg(strstr(dis, "ret") != NULL, "objdump:\n%s", dis);
        elf_free(&fi);
        elf_free(&fo);
        unlink(out);
    }
}
END_TEST

/* The redirect payload: write(1, "patched\n", 8); exit_group(42). */
static const uint8_t payload[] = {
    0xbf, 0x01, 0x00, 0x00, 0x00,             /* mov $1,%edi */
    0x48, 0x8d, 0x35, 0x18, 0x00, 0x00, 0x00, /* lea msg(%rip),%rsi (msg at 36) */
    0xba, 0x08, 0x00, 0x00, 0x00,             /* mov $8,%edx */
    0xb8, 0x01, 0x00, 0x00, 0x00,             /* mov $1,%eax */
    0x0f, 0x05,                               /* syscall */
    0xbf, 0x2a, 0x00, 0x00, 0x00,             /* mov $42,%edi */
    0xb8, 0xe7, 0x00, 0x00, 0x00,             /* mov $231,%eax */
    0x0f, 0x05,                               /* syscall */
    'p', 'a', 't', 'c', 'h', 'e', 'd', '\n',  /* msg */
};
#define PAYLOAD_CODE 36

/* Fill REQ to redirect main of IN to a new region with the payload. */
static void
redirect_request(elfw_request_t *req, const elf_file_t *fi, const char *in,
    const char *out, elfw_region_t *rg, elfw_patch_t *pt, uint8_t jmp[5],
    elfw_symbol_t *sym)
{
    uint64_t main_addr = nm_lookup(in, "main", NULL);
    uint64_t base = first_free_vaddr(fi);
    int32_t rel;

    ck_assert_msg(main_addr != 0, "no main in %s", in);
    rel = (int32_t)(base - (main_addr + 5));
    jmp[0] = 0xe9;
    memcpy(jmp + 1, &rel, 4);
    *rg = (elfw_region_t) { ".qpt.text", base, payload, sizeof(payload),
        ED_PROT_R | ED_PROT_X, 16, 0 };
    *pt = (elfw_patch_t) { main_addr, jmp, 5 };
    *sym = (elfw_symbol_t) { "main", base, PAYLOAD_CODE, 0 };
    memset(req, 0, sizeof(*req));
    req->input = in;
    req->output = out;
    req->regions = rg;
    req->nregions = 1;
    req->patches = pt;
    req->npatches = 1;
    req->symbols = sym;
    req->nsymbols = 1;
}

START_TEST(test_elfw_redirect_main)
{
    size_t v;

    for (v = 0; v < NGENERIC; v++) {
        char in[512], out[512], err[512], buf[4096];
        elfw_region_t rg;
        elfw_patch_t pt;
        elfw_symbol_t sym;
        uint8_t jmp[5];
        elfw_request_t req;
        elf_file_t fi, fo;
        uint64_t main_old, skip_off, skip_len = 5;
        char type = 0;

        if (!variants[v].ok)
            continue;
        path_of(in, sizeof(in), variants[v].name);
        path_of(out, sizeof(out), "redirect.out");
        elf_load(&fi, in);
        redirect_request(&req, &fi, in, out, &rg, &pt, jmp, &sym);
        main_old = pt.vaddr;
        ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s: %s", in, err);

        ck_assert_int_eq(run_prog(out, buf, sizeof(buf)), 42);
        ck_assert_str_eq(buf, "patched\n");
        assert_clean(in, out, 0);
        elf_load(&fo, out);
        assert_phdrs_sane(&fo);
        skip_off = vaddr_to_off(&fi, main_old);
        assert_loads_kept(&fi, &fo, &skip_off, &skip_len, 1);
        ck_assert_int_eq(memcmp(fo.p + skip_off, jmp, 5), 0);
        /* One new segment fits in the reused PT_NOTE entry: the table stays. */
        if (has_free_slot(&fi)) {
            ck_assert_uint_eq(fo.eh.e_phoff, fi.eh.e_phoff);
            ck_assert_uint_eq(fo.phnum, fi.phnum);
        }
        /* main now names the new code, for nm and gdb. */
        ck_assert_uint_eq(nm_lookup(out, "main", &type), rg.vaddr);
        ck_assert_int_eq(type, 'T');
        if (sh("command -v gdb >/dev/null 2>&1") == 0) {
            capture(buf, sizeof(buf), "gdb -nx -batch -ex 'info symbol %#llx' '%s' 2>&1",
                (unsigned long long)rg.vaddr, out);
            ck_assert_msg(
                strstr(buf, "main in section .qpt.text") != NULL, "gdb: %s", buf);
        }
        elf_free(&fi);
        elf_free(&fo);
        unlink(out);
    }
}
END_TEST

START_TEST(test_elfw_phdr_move)
{
    static const uint8_t ret[] = { 0xc3 };
    static const uint8_t ro[] = "ro";
    size_t v;

    for (v = 0; v < NGENERIC; v++) {
        char in[512], out[512], err[512];
        elfw_region_t rg[3];
        elfw_request_t req;
        elf_file_t fi, fo;
        const Elf64_Phdr *p;
        uint64_t base;
        size_t i, nload_in = 0, nload_out = 0;

        if (!variants[v].ok)
            continue;
        path_of(in, sizeof(in), variants[v].name);
        path_of(out, sizeof(out), "move.out");
        elf_load(&fi, in);
        base = first_free_vaddr(&fi);
        rg[0] = (elfw_region_t) { ".qpt.text", base + 0x1000, ret, 1,
            ED_PROT_R | ED_PROT_X, 1, 0 };
        rg[1] = (elfw_region_t) { ".qpt.rodata", base + 0x3000, ro, sizeof(ro), ED_PROT_R,
            1, 0 };
        rg[2] = (elfw_region_t) { ".qpt.bss", base + 0x5000, NULL, 0x3000,
            ED_PROT_R | ED_PROT_W, 64, 0 };
        memset(&req, 0, sizeof(req));
        req.input = in;
        req.output = out;
        req.regions = rg;
        req.nregions = 3;
        int far = -1;
        req.phdr_far = &far;
        ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s: %s", in, err);
        ck_assert_int_eq(far, 0); /* where every kernel finds it (checked below) */
        assert_runs_like_input(in, out);
        assert_clean(in, out, 0);
        elf_load(&fo, out);
        assert_phdrs_sane(&fo);
        assert_old_phdrs_kept(&fi, &fo);
        assert_loads_kept(&fi, &fo, NULL, NULL, 0);

        /* Three regions never fit in the free entries: the table moved, into the rest of
         * the first PT_LOAD's last page (which grows over it; the load meant for the table
         * is left PT_NULL), or else to the end in a PT_LOAD of its own. Either way its
         * address is the first load's less that one's offset plus e_phoff (AT_PHDR as
         * Linux before 5.18 and valgrind compute it). */
        for (i = 0; i < fi.phnum; i++)
            nload_in += fi.ph[i].p_type == PT_LOAD;
        for (i = 0; i < fo.phnum; i++)
            nload_out += fo.ph[i].p_type == PT_LOAD;
        if (fo.eh.e_phoff >= fi.len)
            ck_assert_uint_eq(nload_out, nload_in + 4);
        else
            ck_assert_uint_eq(nload_out, nload_in + 3);
        {
            const Elf64_Phdr *first = find_phdr(&fo, PT_LOAD, 0, 1);
            const Elf64_Phdr *ph = find_phdr(&fo, PT_PHDR, 0, 1);
            ck_assert_ptr_nonnull(first);
            if (ph != NULL)
                ck_assert_uint_eq(ph->p_vaddr,
                                  first->p_vaddr - first->p_offset + fo.eh.e_phoff);
        }
        ck_assert_uint_eq(fo.phnum, fi.phnum + 4);
        p = find_phdr(&fo, PT_LOAD, base + 0x5000, 0);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq(p->p_flags, PF_R | PF_W);
        ck_assert_uint_eq(p->p_filesz, 0);
        ck_assert_uint_eq(p->p_memsz, 0x3000);
        /* The original table bytes are still there, unchanged. */
        ck_assert_int_eq(memcmp(fo.p + fi.eh.e_phoff, fi.p + fi.eh.e_phoff,
                             fi.phnum * sizeof(Elf64_Phdr)),
            0);
        elf_free(&fo);

        /* A region of 64 MiB of zeros last: phdr_far says whether the table is where
         * Linux before 5.18 looks (here it fits in the first page: 0 on every variant). */
        rg[2].size = 64u << 20;
        far = -1;
        ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s: %s", in, err);
        elf_load(&fo, out);
        {
            const Elf64_Phdr *first = find_phdr(&fo, PT_LOAD, 0, 1);
            const Elf64_Phdr *ph = find_phdr(&fo, PT_PHDR, 0, 1);
            ck_assert_ptr_nonnull(first);
            if (ph != NULL)
                ck_assert_int_eq(far, ph->p_vaddr
                        != first->p_vaddr - first->p_offset + fo.eh.e_phoff);
            else
                ck_assert_int_eq(far, 0);
        }
        elf_free(&fi);
        elf_free(&fo);
        unlink(out);
    }
}
END_TEST

START_TEST(test_elfw_symbol_add)
{
    static const uint8_t code[] = { 0xc3, 0xc3 };
    size_t v;

    for (v = 0; v < NGENERIC; v++) {
        char in[512], out[512], stripped[512], err[512];
        elfw_region_t rg;
        elfw_symbol_t sy[2];
        elfw_request_t req;
        elf_file_t fi;
        uint64_t base;
        char type = 0;
        int pass;

        if (!variants[v].ok)
            continue;
        path_of(in, sizeof(in), variants[v].name);
        path_of(out, sizeof(out), "symadd.out");
        path_of(stripped, sizeof(stripped), "symadd.stripped");
        ck_assert_int_eq(sh("strip -o '%s' '%s'", stripped, in), 0);
        elf_load(&fi, in);
        base = first_free_vaddr(&fi);
        elf_free(&fi);
        rg = (elfw_region_t) { ".qpt.text", base, code, sizeof(code),
            ED_PROT_R | ED_PROT_X, 1, 0 };
        sy[0] = (elfw_symbol_t) { "qpt_added_one", base, 1, 0 };
        sy[1] = (elfw_symbol_t) { "qpt_added_two", base + 1, 1, 0 };
        /* Pass 0 on the binary with .symtab, pass 1 on the stripped one. */
        for (pass = 0; pass < 2; pass++) {
            memset(&req, 0, sizeof(req));
            req.input = pass == 0 ? in : stripped;
            req.output = out;
            req.regions = &rg;
            req.nregions = 1;
            req.symbols = sy;
            req.nsymbols = 2;
            ck_assert_msg(
                elfw_write(&req, err, sizeof(err)) == 0, "%s: %s", req.input, err);
            assert_runs_like_input(in, out);
            assert_clean(req.input, out, 0);
            ck_assert_uint_eq(nm_lookup(out, "qpt_added_one", &type), base);
            ck_assert_int_eq(type, 't');
            ck_assert_uint_eq(nm_lookup(out, "qpt_added_two", &type), base + 1);
            ck_assert_int_eq(type, 't');
            if (pass == 0)
                ck_assert_uint_eq(
                    nm_lookup(out, "main", NULL), nm_lookup(in, "main", NULL));
            unlink(out);
        }
        unlink(stripped);
    }
}
END_TEST

/* Relocations against .symtab (ld --emit-relocs) follow the symbols they name. */
START_TEST(test_elfw_symbol_add_emit_relocs)
{
    static const uint8_t code[] = { 0xc3 };
    char in[512], out[512], err[512];
    static char before[1 << 20], after[1 << 20];
    elfw_region_t rg;
    elfw_symbol_t sy;
    elfw_request_t req;
    elf_file_t fi;
    uint64_t base;

    if (!variants[V_EMITRELOCS].ok)
        return;
    path_of(in, sizeof(in), variants[V_EMITRELOCS].name);
    path_of(out, sizeof(out), "emitrelocs.out");
    elf_load(&fi, in);
    base = first_free_vaddr(&fi);
    elf_free(&fi);
    rg = (elfw_region_t) { ".qpt.text", base, code, sizeof(code), ED_PROT_R | ED_PROT_X,
        1, 0 };
    sy = (elfw_symbol_t) { "qpt_added", base, 1, 0 };
    memset(&req, 0, sizeof(req));
    req.input = in;
    req.output = out;
    req.regions = &rg;
    req.nregions = 1;
    req.symbols = &sy;
    req.nsymbols = 1;
    ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s", err);
    assert_runs_like_input(in, out);
    assert_clean(in, out, 0);
    /* Same relocations naming the same symbols; only the r_info column may differ. */
    ck_assert_int_eq(
        capture(before, sizeof(before), "readelf -rW '%s' | awk '{$2=\"\"; print}'", in),
        0);
    ck_assert_int_eq(
        capture(after, sizeof(after), "readelf -rW '%s' | awk '{$2=\"\"; print}'", out),
        0);
    ck_assert_msg(strstr(before, ".rela.text") != NULL, "no .rela.text in %s", in);
    ck_assert_str_eq(before, after);
    unlink(out);
}
END_TEST

START_TEST(test_elfw_clear_cet)
{
    char in[512], out[512], err[512];
    static char notes[1 << 16];
    elfw_request_t req;
    elf_file_t fi, fo;
    const Elf64_Phdr *p;
    uint64_t skip_len;

    if (!variants[V_CET].ok)
        return;
    path_of(in, sizeof(in), variants[V_CET].name);
    path_of(out, sizeof(out), "cet.out");
    ck_assert_int_eq(capture(notes, sizeof(notes), "readelf -n '%s'", in), 0);
    ck_assert_msg(strstr(notes, "IBT") != NULL && strstr(notes, "SHSTK") != NULL,
        "the CET build has no IBT/SHSTK property:\n%s", notes);
    memset(&req, 0, sizeof(req));
    req.input = in;
    req.output = out;
    req.clear_cet = 1;
    ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s", err);
    assert_runs_like_input(in, out);
    assert_clean(in, out, 0);
    ck_assert_int_eq(capture(notes, sizeof(notes), "readelf -n '%s'", out), 0);
    ck_assert_msg(strstr(notes, "IBT") == NULL && strstr(notes, "SHSTK") == NULL,
        "IBT/SHSTK still listed:\n%s", notes);
    ck_assert_msg(
        strstr(notes, "x86 ISA needed") != NULL, "other properties lost:\n%s", notes);
    /* Only the note's bytes changed. */
    elf_load(&fi, in);
    elf_load(&fo, out);
    p = find_phdr(&fi, PT_GNU_PROPERTY, 0, 1);
    ck_assert_ptr_nonnull(p);
    skip_len = p->p_filesz;
    assert_loads_kept(&fi, &fo, &p->p_offset, &skip_len, 1);
    ck_assert_uint_eq(fo.len, fi.len);
    elf_free(&fi);
    elf_free(&fo);
    unlink(out);
}
END_TEST

/* Non-alloc sections: one replaced (and resized), one added; loaded ones refused. */
START_TEST(test_elfw_sections)
{
    size_t v;

    for (v = 0; v < NGENERIC; v++) {
        char in[512], out[512], err[512];
        static char text[1 << 16];
        static const uint8_t comment[] = "qpt test comment, longer than the old one\0";
        static const uint8_t added[] = { 1, 2, 3, 4, 5 };
        elfw_section_t secs[2] = {
            { ".comment", comment, sizeof(comment) },
            { ".debug_qpt_test", added, sizeof(added) },
        };
        elfw_request_t req;
        elf_file_t fi, fo;

        if (!variants[v].ok)
            continue;
        path_of(in, sizeof(in), variants[v].name);
        path_of(out, sizeof(out), "sections.out");
        memset(&req, 0, sizeof(req));
        req.input = in;
        req.output = out;
        req.sections = secs;
        req.nsections = 2;
        ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s: %s", in, err);
        assert_runs_like_input(in, out);
        assert_clean(in, out, 0);
        elf_load(&fi, in);
        elf_load(&fo, out);
        assert_loads_kept(&fi, &fo, NULL, NULL, 0);
        elf_free(&fi);
        elf_free(&fo);
        ck_assert_int_eq(capture(text, sizeof(text), "readelf -p .comment '%s'", out), 0);
        ck_assert_msg(strstr(text, "qpt test comment") != NULL, "%s: .comment:\n%s", in, text);
        ck_assert_int_eq(
            capture(text, sizeof(text), "readelf -x .debug_qpt_test '%s'", out), 0);
        ck_assert_msg(strstr(text, "01020304 05") != NULL, "%s: new section:\n%s", in, text);
        /* A loaded section is not replaced. */
        secs[0].name = ".text";
        req.nsections = 1;
        ck_assert_int_eq(elfw_write(&req, err, sizeof(err)), QP_EINVAL);
        unlink(out);
    }
}
END_TEST

START_TEST(test_elfw_eh_frame_hdr)
{
    char in[512], out[512], err[512];
    uint8_t blob[16];
    elfw_region_t rg;
    elfw_request_t req;
    elf_file_t fi, fo;
    const Elf64_Phdr *p, *old;
    uint64_t base, eh_frame;
    int32_t ptr;
    uint32_t zero = 0;

    path_of(in, sizeof(in), variants[0].name);
    path_of(out, sizeof(out), "ehframe.out");
    elf_load(&fi, in);
    base = first_free_vaddr(&fi);
    old = find_phdr(&fi, PT_GNU_EH_FRAME, 0, 1);
    ck_assert_ptr_nonnull(old);
    ck_assert_uint_eq(fi.p[old->p_offset + 1], 0x1b); /* eh_frame_ptr: pcrel sdata4 */
    memcpy(&ptr, fi.p + old->p_offset + 4, 4);
    eh_frame = old->p_vaddr + 4 + (int64_t)ptr;
    /* At blob + 4, a well-formed .eh_frame_hdr with an empty table: the old .eh_frame. */
    memset(blob, 0, sizeof(blob));
    blob[4] = 1;
    blob[5] = 0x1b;
    blob[6] = 0x03;
    blob[7] = 0x3b;
    ptr = (int32_t)(eh_frame - (base + 8));
    memcpy(blob + 8, &ptr, 4);
    memcpy(blob + 12, &zero, 4);
    rg = (elfw_region_t) { ".qpt.eh", base, blob, sizeof(blob), ED_PROT_R, 4, 0 };
    memset(&req, 0, sizeof(req));
    req.input = in;
    req.output = out;
    req.regions = &rg;
    req.nregions = 1;
    req.eh_frame_hdr = base + 4;
    req.eh_frame_hdr_size = 12;
    ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s", err);
    assert_runs_like_input(in, out);
    assert_clean(in, out, 1);
    elf_load(&fo, out);
    p = find_phdr(&fo, PT_GNU_EH_FRAME, 0, 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(p->p_vaddr, base + 4);
    ck_assert_uint_eq(p->p_paddr, base + 4);
    ck_assert_uint_eq(p->p_memsz, 12);
    ck_assert_uint_eq(p->p_filesz, 12);
    ck_assert_uint_eq(p->p_offset, vaddr_to_off(&fo, base + 4));
    ck_assert_int_eq(memcmp(fo.p + p->p_offset, blob + 4, 12), 0);
    ck_assert_uint_eq(fo.phnum, fi.phnum);
    elf_free(&fi);
    elf_free(&fo);
    unlink(out);
}
END_TEST

/* The same request twice gives the same bytes, with the input's mode. */
START_TEST(test_elfw_deterministic)
{
    static const uint8_t ro[] = "some data";
    size_t v;

    for (v = 0; v < NGENERIC; v++) {
        char in[512], src[512], out1[512], out2[512], err[512];
        elfw_region_t rg[3];
        elfw_patch_t pt;
        elfw_symbol_t sy[2];
        uint8_t jmp[5];
        elfw_request_t req;
        elf_file_t fi;
        struct stat st;

        if (!variants[v].ok)
            continue;
        path_of(src, sizeof(src), variants[v].name);
        path_of(in, sizeof(in), "det.in");
        path_of(out1, sizeof(out1), "det.out1");
        path_of(out2, sizeof(out2), "det.out2");
        ck_assert_int_eq(sh("cp '%s' '%s' && chmod 0751 '%s'", src, in, in), 0);
        elf_load(&fi, in);
        redirect_request(&req, &fi, in, out1, &rg[0], &pt, jmp, &sy[0]);
        rg[1] = (elfw_region_t) { ".qpt.rodata", rg[0].vaddr + 0x1000, ro, sizeof(ro),
            ED_PROT_R, 1, 0 };
        rg[2] = (elfw_region_t) { ".qpt.bss", rg[0].vaddr + 0x2000, NULL, 100,
            ED_PROT_R | ED_PROT_W, 8, 0 };
        sy[1] = (elfw_symbol_t) { "qpt_table", rg[1].vaddr, sizeof(ro), 1 };
        req.nregions = 3;
        req.nsymbols = 2;
        req.clear_cet = 1;
        ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s", err);
        req.output = out2;
        ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s", err);
        ck_assert_msg(files_equal(out1, out2), "%s: two runs differ", src);
        ck_assert_int_eq(stat(out1, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0751);
        ck_assert_int_eq(sh("'%s' >/dev/null", out1), 42);
        assert_clean(in, out1, 0);
        /* Writing over an existing output replaces it. */
        ck_assert_msg(elfw_write(&req, err, sizeof(err)) == 0, "%s", err);
        ck_assert_msg(files_equal(out1, out2), "%s: rewrite differs", src);
        elf_free(&fi);
        unlink(in);
        unlink(out1);
        unlink(out2);
        assert_no_leftovers();
    }
}
END_TEST

/*****************************************************************************
 * Requests that fail: a non-zero code, one line, nothing left, input unchanged
 */

static void
expect_failure(elfw_request_t *req, int want_rc, const char *want_text)
{
    char err[512];
    size_t len0 = 0, len1 = 0;
    uint8_t *before = read_all(req->input, &len0), *after;
    struct stat st;
    int out_existed = stat(req->output, &st) == 0;
    int rc;

    memset(err, 'x', sizeof(err));
    rc = elfw_write(req, err, sizeof(err));
    ck_assert_msg(rc == want_rc, "%s -> %s: rc %d (%s), want %d", req->input, req->output,
        rc, err, want_rc);
    assert_one_line(err);
    if (want_text != NULL)
        ck_assert_msg(
            strstr(err, want_text) != NULL, "message '%s' lacks '%s'", err, want_text);
    assert_no_leftovers();
    if (!out_existed)
        ck_assert_msg(stat(req->output, &st) != 0, "%s was created", req->output);
    after = read_all(req->input, &len1);
    ck_assert_int_eq(before == NULL, after == NULL);
    if (before != NULL) {
        ck_assert_uint_eq(len0, len1);
        ck_assert_int_eq(memcmp(before, after, len0), 0);
    }
    free(before);
    free(after);
}

/* What the description of test_elfw_rewrite_unwind_fail_described did. */
typedef struct described {
    int calls;   /* how many times it was asked */
    int rc;      /* what it returns: 0 (a description) or a failure */
} described_t;

/* elfw_instr_t.describe for that test: a few bytes, or ARG's failure. */
static int
describe_stub(void *arg, const ed_plan_t *plan, uint64_t counters, uint8_t **desc,
              size_t *len, uint64_t *id)
{
    (void)plan;
    (void)counters;
    described_t *d = arg;
    __atomic_fetch_add(&d->calls, 1, __ATOMIC_SEQ_CST);
    if (d->rc < 0)
        return d->rc;
    *desc = calloc(1, 64);
    *len = 64;
    *id = 42;
    return *desc != NULL ? 0 : QP_ENOMEM;
}

/* The threads of this process (/proc/self/task). */
static int
count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/*
 * The measurement description is made beside the unwind tables (on a thread of its own
 * with two --threads). When the tables fail (eh_asm's asm_big in stretch mode, as in
 * test_elfw_rewrite_names_failed_fde), the rewrite fails with their error, whether the
 * description was made or failed too; nothing is written, no thread is left behind; on
 * one thread, which builds the tables first, the description is not made at all.
 */
START_TEST(test_elfw_rewrite_unwind_fail_described)
{
    char in[512], out[512], err[512];
    path_of(in, sizeof(in), "eh_asm");
    path_of(out, sizeof(out), "eh_asm.out");
    const char *name = "test_elfw_rewrite_unwind_fail_described";
    if (!compile_or_skip(name, "g++", "eh_asm.cc", in))
        return;
    cfg_image_t *img = NULL;
    cfg_prog_t *prog = NULL;
    ck_assert_int_eq(cfg_image_open_bfd(in, &img), 0);
    ck_assert_int_eq(cfg_prog_build(img, NULL, &prog), 0);
    unlink(out);
    int threads0 = count_threads();
    for (unsigned threads = 1; threads <= 2; threads++)
        for (int describe_rc = 0; describe_rc >= QP_EBUG; describe_rc += QP_EBUG) {
            ed_opts_t eo = { 0 };
            eo.stretch = 1;
            ed_plan_t *plan = NULL;
            ck_assert_int_eq(ed_plan_create(prog, &eo, &plan), 0);
            described_t d = { 0, describe_rc };
            elfw_instr_t instr = { .ncounters = 1, .describe = describe_stub, .arg = &d };
            elfw_rewrite_opts_t wo = { 0 };
            wo.threads = threads;
            elfw_rewrite_stats_t st;
            int rc
                = elfw_rewrite(prog, plan, &instr, in, out, &wo, &st, err, sizeof(err));
            ck_assert_msg(rc == QP_ERANGE, "threads %u: %d %s", threads, rc, err);
            ck_assert_msg(strstr(err, "cannot be rewritten") != NULL, "threads %u: %s",
                          threads, err);
            assert_one_line(err);
            ck_assert_uint_ne(st.unwind_fail.lo, 0);
            ck_assert_int_ne(access(out, F_OK), 0);
            assert_no_leftovers();
            ck_assert_int_eq(count_threads(), threads0);
            if (threads == 1)
                ck_assert_int_eq(d.calls, 0);
            else
                ck_assert_int_le(d.calls, 1);
            ed_plan_destroy(plan);
        }
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

/*
 * elfw_rewrite names an FDE of moved code whose tables the new layout cannot hold (in
 * tests/progs/eh_asm.cc, asm_big's LSDA has 2-byte call-site fields, which overflow in
 * stretch mode); a plan made with it in ed_opts_t.stay keeps that code in place, and the
 * rewrite then behaves like the input.
 */
START_TEST(test_elfw_rewrite_names_failed_fde)
{
    char in[512], out[512], err[512], want[8192], got[8192];
    path_of(in, sizeof(in), "eh_asm");
    path_of(out, sizeof(out), "eh_asm.out");
    if (!compile_or_skip("test_elfw_rewrite_names_failed_fde", "g++", "eh_asm.cc", in))
        return;
    cfg_image_t *img = NULL;
    cfg_prog_t *prog = NULL;
    ed_plan_t *plan = NULL;
    ck_assert_int_eq(cfg_image_open_bfd(in, &img), 0);
    ck_assert_int_eq(cfg_prog_build(img, NULL, &prog), 0);
    const cfg_proc_t *big = cfg_proc_by_name(prog, "asm_big");
    ck_assert_ptr_nonnull(big);
    uint32_t bi = (uint32_t)(big - prog->procs);
    ed_opts_t eo = { 0 };
    eo.stretch = 1;
    ck_assert_int_eq(ed_plan_create(prog, &eo, &plan), 0);
    ck_assert_ptr_null(ed_plan_left_reason(plan, bi));
    elfw_rewrite_stats_t st;
    int rc = elfw_rewrite(prog, plan, NULL, in, out, NULL, &st, err, sizeof(err));
    ck_assert_int_eq(rc, QP_ERANGE);
    ck_assert_msg(strstr(err, "cannot be rewritten") != NULL, "%s", err);
    ck_assert_uint_eq(st.unwind_fail.lo, big->entry);
    ck_assert_int_eq(st.unwind_fail.err, QP_ERANGE);
    ck_assert_int_ne(access(out, F_OK), 0);
    ed_plan_destroy(plan);

    ed_fde_fail_t stay = st.unwind_fail;
    eo.stay = &stay;
    eo.nstay = 1;
    ck_assert_int_eq(ed_plan_create(prog, &eo, &plan), 0);
    const char *why = ed_plan_left_reason(plan, bi);
    ck_assert_msg(why != NULL && strstr(why, "could not be rewritten for the new code"),
        "asm_big: %s", why ? why : "moves");
    rc = elfw_rewrite(prog, plan, NULL, in, out, NULL, &st, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(run_prog(in, want, sizeof(want)), 0);
    ck_assert_int_eq(run_prog(out, got, sizeof(got)), 0);
    ck_assert_str_eq(got, want);
    ed_plan_destroy(plan);

    /* ed_opts_t.leave (qpt-rewrite's QPT_LEAVE) keeps the procedures it names in place. */
    const char *const leave[] = { "no_such_procedure", "asm_big" };
    ed_opts_t lo = { 0 };
    lo.leave = leave;
    lo.nleave = 2;
    ck_assert_int_eq(ed_plan_create(prog, &lo, &plan), 0);
    why = ed_plan_left_reason(plan, bi);
    ck_assert_msg(why != NULL && strstr(why, "QPT_LEAVE"), "asm_big: %s", why ? why : "moves");
    ed_plan_destroy(plan);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
    unlink(out);
}
END_TEST

/* The new address a `jmp rel32` (E9) or `jcc rel32` (0F 8x) at AT in IM goes to. */
static uint64_t
rel32_target(ed_image_t *im, uint64_t at)
{
    uint8_t b[6];
    ck_assert_int_eq(ed_image_ops.read(im, at, b, sizeof(b)), 0);
    int n = b[0] == 0xe9 ? 1 : 2;
    ck_assert_msg(b[0] == 0xe9 || (b[0] == 0x0f && (b[1] & 0xf0) == 0x80),
        "no rel32 jump at %#llx: %02x %02x", (unsigned long long)at, b[0], b[1]);
    int32_t d;
    memcpy(&d, b + n, 4);
    return at + (uint64_t)n + 4 + (uint64_t)(int64_t)d;
}

/* Count the run of pieces of one procedure (ed_plan_pieces). */
static int
count_piece(void *arg, uint64_t old, uint64_t olen, uint64_t new_, uint64_t nlen)
{
    (void)old;
    (void)olen;
    (void)nlen;
    *(int *)arg += new_ != 0;
    return 0;
}

/* tests/progs/fall_stub.c built for TEST into *IMG, *PROG and its procedure
 * fall_free_loop into *PF: 1, or 0 when gcc cannot build it (skipped). */
static int
fall_stub_prog(const char *test, cfg_image_t **img, cfg_prog_t **prog, const cfg_proc_t **pf)
{
    char in[512];
    path_of(in, sizeof(in), "fall_stub");
    if (!compile_or_skip(test, "gcc", "fall_stub.c", in))
        return 0;
    ck_assert_int_eq(cfg_image_open_bfd(in, img), 0);
    ck_assert_int_eq(cfg_prog_build(*img, NULL, prog), 0);
    *pf = cfg_proc_by_name(*prog, "fall_free_loop");
    ck_assert_ptr_nonnull(*pf);
    return 1;
}

/*
 * A taken-edge stub asked to fall into its target (ED_PROBE_FALL_IN) goes just before
 * the target block and has no jmp back: where nothing falls into the loop head
 * (fall_free_loop, entered by a jump to its test), and where the block before falls into
 * it (fall_jump_loop: that block then jumps over the stub). The branch goes to the stub;
 * the unwind state of the head begins at the stub (ed_plan_map_state); each procedure
 * stays one piece of new code.
 */
START_TEST(test_elfw_fall_stub)
{
    cfg_image_t *img = NULL;
    cfg_prog_t *prog = NULL;
    ed_plan_t *plan = NULL;
    const cfg_proc_t *pf = NULL;
    if (!fall_stub_prog("test_elfw_fall_stub", &img, &prog, &pf))
        return;
    const cfg_proc_t *pj = cfg_proc_by_name(prog, "fall_jump_loop");
    ck_assert_ptr_nonnull(pj);
    /* xorl; jmp 2f; 1: addq (head); 2: subq; jns 1b -- pushq; xorl; movq; 1: addq (head);
     * subq; jg 1b */
    uint64_t fhead = pf->entry + 4, fjcc = fhead + 7, jhead = pj->entry + 6, jjcc = jhead + 7;
    ck_assert_uint_eq(*cfg_image_ptr(img, fjcc, NULL), 0x79);
    ck_assert_uint_eq(*cfg_image_ptr(img, jjcc, NULL), 0x7f);
    uint32_t fi = (uint32_t)(pf - prog->procs), ji = (uint32_t)(pj - prog->procs);
    ck_assert_int_eq(ed_block_fall_free(prog, fi, cfg_block_at(prog, fhead)), 1);
    ck_assert_int_eq(ed_block_fall_free(prog, ji, cfg_block_at(prog, jhead)), 2);
    ck_assert_int_eq(ed_block_fall_free(prog, fi, cfg_block_at(prog, pf->entry)), 0);
    ck_assert_int_eq(ed_plan_create(prog, NULL, &plan), 0);
    ck_assert_ptr_null(ed_plan_left_reason(plan, fi));
    ck_assert_ptr_null(ed_plan_left_reason(plan, ji));
    ed_probe_t pr[2] = {
        { .addr = fjcc, .at = ED_AT_TAKEN, .what = ED_SNIP_COUNT, .flags = ED_PROBE_FALL_IN },
        { .addr = jjcc, .at = ED_AT_TAKEN, .what = ED_SNIP_COUNT, .flags = ED_PROBE_FALL_IN,
          .counter = 1 },
    };
    ck_assert_int_eq(ed_plan_set_probes(plan, pr, 2), 0);
    ed_plan_set_runtime(plan, pf->entry, 0, 0, 0, 0); /* any address in reach: never run */
    ed_image_t *im = NULL;
    ck_assert_int_eq(ed_image_create(img, &im), 0);
    ck_assert_int_eq(ed_plan_apply(plan, &ed_image_ops, im), 0);
    ck_assert_uint_eq(ed_plan_stats(plan)->nstubs, 2);
    ck_assert_uint_eq(ed_plan_stats(plan)->nstubs_fall, 2);
    /* fall_free_loop: jns -> stub (an increment) -> the head. */
    uint64_t land = ed_plan_map(plan, fhead), stub = ed_plan_map_state(plan, fhead);
    ck_assert_uint_gt(land, stub);
    ck_assert_uint_le(land - stub, 16);
    ck_assert_uint_eq(rel32_target(im, ed_plan_insn_new(plan, fjcc, NULL)), stub);
    uint64_t after_jmp = 0;
    ed_plan_insn_new(plan, fhead - 2, &after_jmp); /* the jmp 2f before the head */
    ck_assert_uint_eq(after_jmp, stub);
    /* fall_jump_loop: the block before jumps over the stub; jg -> stub -> the head. */
    land = ed_plan_map(plan, jhead);
    stub = ed_plan_map_state(plan, jhead);
    ck_assert_uint_gt(land, stub);
    ck_assert_uint_eq(rel32_target(im, ed_plan_insn_new(plan, jjcc, NULL)), stub);
    uint64_t after_mov = 0;
    ed_plan_insn_new(plan, jhead - 3, &after_mov);
    ck_assert_uint_eq(rel32_target(im, after_mov), land);
    ck_assert_uint_eq(after_mov + 5, stub);
    /* Each procedure is one run of new code, stub included. */
    int npieces = 0;
    ck_assert_int_eq(ed_plan_pieces(plan, pf->start, pf->end, count_piece, &npieces), 0);
    ck_assert_int_eq(npieces, 1);
    npieces = 0;
    ck_assert_int_eq(ed_plan_pieces(plan, pj->start, pj->end, count_piece, &npieces), 0);
    ck_assert_int_eq(npieces, 1);
    ed_image_destroy(im);
    ed_plan_destroy(plan);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

/*
 * Counter probes that add or subtract a register (ED_SNIP_COUNT_REG: a loop counted from
 * its induction variable, doc/qp.md), switchable: each is `ds add|sub %REG,COUNTER(%rip)`
 * at one of the plan's lock sites, before a block and in a taken edge's stub alike.
 */
START_TEST(test_elfw_count_reg)
{
    cfg_image_t *img = NULL;
    cfg_prog_t *prog = NULL;
    ed_plan_t *plan = NULL;
    const cfg_proc_t *pf = NULL;
    if (!fall_stub_prog("test_elfw_count_reg", &img, &prog, &pf))
        return;
    uint64_t fhead = pf->entry + 4, fjcc = fhead + 7; /* as test_elfw_fall_stub */
    const uint8_t rdi = 8, r9 = 10;                  /* arch/'s numbers */
    ck_assert_int_eq(ed_plan_create(prog, NULL, &plan), 0);
    ed_plan_set_inc_mode(plan, ARCH_INC_SWITCH);
    ed_probe_t pr[2] = {
        { .addr = fhead, .at = ED_AT_BEFORE, .what = ED_SNIP_COUNT_REG(rdi, 1), .counter = 2 },
        { .addr = fjcc, .at = ED_AT_TAKEN, .what = ED_SNIP_COUNT_REG(r9, 0), .counter = 3 },
    };
    ck_assert_int_eq(ed_plan_set_probes(plan, pr, 2), 0);
    uint64_t counters = pf->entry; /* any address in reach: never run */
    ed_plan_set_runtime(plan, counters, 0, 0, 0, 0);
    ed_image_t *im = NULL;
    ck_assert_int_eq(ed_image_create(img, &im), 0);
    ck_assert_int_eq(ed_plan_apply(plan, &ed_image_ops, im), 0);
    size_t n = 0;
    const uint64_t *sites = ed_plan_lock_sites(plan, &n);
    ck_assert_uint_eq(n, 2);
    int seen_sub = 0, seen_add = 0;
    for (size_t k = 0; k < n; k++) {
        uint8_t b[8];
        arch_ops_t ops;
        ck_assert_int_eq(ed_image_ops.read(im, sites[k], b, sizeof(b)), 0);
        ck_assert_uint_eq(b[0], ARCH_INC_PLAIN_BYTE);
        ck_assert_int_eq(arch_decode_ops(b, sizeof(b), sites[k], &ops), 0);
        ck_assert_int_eq(ops.dst.kind, ARCH_OPND_MEM);
        ck_assert_int_eq(ops.src.kind, ARCH_OPND_REG);
        if (ops.op == ARCH_OP_SUB) {
            seen_sub++;
            ck_assert_int_eq(ops.src.reg, rdi);
            ck_assert_uint_eq((uint64_t)ops.dst.disp, counters + 8 * 2);
        } else {
            seen_add++;
            ck_assert_int_eq(ops.op, ARCH_OP_ADD);
            ck_assert_int_eq(ops.src.reg, r9);
            ck_assert_uint_eq((uint64_t)ops.dst.disp, counters + 8 * 3);
        }
    }
    ck_assert_int_eq(seen_sub, 1);
    ck_assert_int_eq(seen_add, 1);
    uint8_t reg;
    int sub;
    ck_assert(!ed_snip_count_reg(ED_SNIP_COUNT, &reg, &sub));
    ck_assert(!ed_snip_count_reg(ED_SNIP_CODE, &reg, &sub));
    ck_assert(ed_snip_count_reg(ED_SNIP_COUNT_REG(16, 1), &reg, &sub) && reg == 16 && sub == 1);
    ed_image_destroy(im);
    ed_plan_destroy(plan);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

/*
 * The space's own bytes of new memory (qp_space_ops_t.bytes: ed_plan_apply emits the
 * relocated code there instead of copying it in): a region from alloc_near shows zeros
 * and what writes put there; a range past its end, and the input's own bytes (written
 * as patches), have none.
 */
START_TEST(test_elfw_image_bytes)
{
    /* The pie variant: main() runs no test without it. */
    ck_assert_msg(variants[0].ok, "the %s variant was not built", variants[0].name);
    char in[512];
    path_of(in, sizeof(in), variants[0].name);
    cfg_image_t *img = NULL;
    ed_image_t *im = NULL;
    ck_assert_int_eq(cfg_image_open_bfd(in, &img), 0);
    ck_assert_int_eq(ed_image_create(img, &im), 0);
    uint64_t at = 0;
    ck_assert_int_eq(ed_image_ops.alloc_near(im, img->entry, img->entry + 1, 64,
                                             ED_PROT_R | ED_PROT_X, &at), 0);
    uint8_t *p = ed_image_ops.bytes(im, at, 64);
    ck_assert_ptr_nonnull(p);
    static const uint8_t zero[64], b[3] = { 1, 2, 3 };
    ck_assert_mem_eq(p, zero, sizeof(zero));
    ck_assert_int_eq(ed_image_ops.write(im, at + 8, b, sizeof(b)), 0);
    ck_assert_ptr_eq(ed_image_ops.bytes(im, at + 8, sizeof(b)), p + 8);
    ck_assert_mem_eq(p + 8, b, sizeof(b));
    ck_assert_ptr_null(ed_image_ops.bytes(im, at + 60, 8));
    ck_assert_ptr_null(ed_image_ops.bytes(im, img->entry, 1));
    ed_image_destroy(im);
    cfg_image_destroy(img);
}
END_TEST

START_TEST(test_elfw_errors)
{
    static const uint8_t ret[] = { 0xc3 };
    static const uint8_t nop5[] = { 0x90, 0x90, 0x90, 0x90, 0x90 };
    char in[512], out[512], other[512], dir[512];
    elfw_request_t req;
    elfw_region_t rg;
    elfw_patch_t pt;
    elf_file_t fi;
    uint64_t base;
    FILE *f;

    path_of(in, sizeof(in), "err.in");
    ck_assert_int_eq(sh("cp '%s/%s' '%s'", workdir, variants[0].name, in), 0);
    elf_load(&fi, in);
    base = first_free_vaddr(&fi);
    path_of(out, sizeof(out), "err.out");
    memset(&req, 0, sizeof(req));
    req.input = in;
    req.output = out;

    /* The output is the input: same path, hard link, symbolic link. */
    req.output = in;
    expect_failure(&req, QP_EINVAL, "input");
    path_of(other, sizeof(other), "err.hardlink");
    ck_assert_int_eq(link(in, other), 0);
    req.output = other;
    expect_failure(&req, QP_EINVAL, "input");
    unlink(other);
    path_of(other, sizeof(other), "err.symlink");
    ck_assert_int_eq(symlink(in, other), 0);
    expect_failure(&req, QP_EINVAL, "input");
    unlink(other);

    /* An unwritable or missing directory. */
    if (geteuid() != 0) {
        path_of(dir, sizeof(dir), "err.ro");
        ck_assert_int_eq(mkdir(dir, 0555), 0);
        path_of(other, sizeof(other), "err.ro/out");
        req.output = other;
        expect_failure(&req, QP_EIO, "cannot write");
        rmdir(dir);
    }
    req.output = "/proc/qpt-elfw-cannot-write-here";
    expect_failure(&req, QP_EIO, "cannot write");
    path_of(other, sizeof(other), "no-such-dir/out");
    req.output = other;
    expect_failure(&req, QP_EIO, "cannot write");
    /* A directory as output. */
    path_of(dir, sizeof(dir), "err.dir");
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    req.output = dir;
    expect_failure(&req, QP_EDIR, NULL);
    rmdir(dir);
    req.output = out;

    /* A missing input, a directory, a file that is not ELF. */
    path_of(other, sizeof(other), "no-such-input");
    req.input = other;
    expect_failure(&req, QP_EIO, "no-such-input");
    req.input = workdir;
    expect_failure(&req, QP_EDIR, NULL);
    path_of(other, sizeof(other), "err.txt");
    f = fopen(other, "w");
    ck_assert_ptr_nonnull(f);
    fputs("#!/bin/sh\necho this is not ELF\n", f);
    fclose(f);
    req.input = other;
    expect_failure(&req, QP_ENOTELF, "not an ELF file");
    /* An empty file, and an ELF file cut short inside its section headers. */
    f = fopen(other, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    expect_failure(&req, QP_ENOTELF, "not an ELF file");
    ck_assert_int_eq(
        sh("head -c %llu '%s' > '%s'", (unsigned long long)(fi.len - 100), in, other), 0);
    expect_failure(&req, QP_EFORMAT, NULL);
    /* An ELF file that is not an executable. */
    path_of(dir, sizeof(dir), "err.o");
    ck_assert_int_eq(sh("cd '%s' && gcc -c -x c -o err.o - </dev/null", workdir), 0);
    req.input = dir;
    expect_failure(&req, QP_ENOTEXEC, NULL);
    unlink(dir);
    unlink(other);
    req.input = in;

    /* Bad requests: W+X, a region inside the old image, a patch outside the sections. */
    rg = (elfw_region_t) { ".qpt.wx", base, ret, 1, ED_PROT_R | ED_PROT_W | ED_PROT_X,
        1, 0 };
    req.regions = &rg;
    req.nregions = 1;
    expect_failure(&req, QP_EINVAL, "writable and executable");
    rg.prot = ED_PROT_R | ED_PROT_X;
    rg.vaddr = base - PAGE;
    expect_failure(&req, QP_EINVAL, NULL);
    rg.vaddr = base;
    pt = (elfw_patch_t) { base - 8, nop5, sizeof(nop5) }; /* in no section */
    req.patches = &pt;
    req.npatches = 1;
    expect_failure(&req, QP_EINVAL, "patch");
    pt.vaddr = 1; /* the ELF header: loaded, but in no section */
    expect_failure(&req, QP_EINVAL, "patch");
    req.npatches = 0;
    req.eh_frame_hdr = base + 0x100000;
    req.eh_frame_hdr_size = 8;
    expect_failure(&req, QP_EINVAL, "eh_frame_hdr");
    req.eh_frame_hdr = 0;

    /* Each failure left no output; a good request still works afterwards. */
    ck_assert_int_eq(elfw_write(&req, other, sizeof(other)), 0);
    ck_assert_int_eq(sh("'%s' >/dev/null", out), PROG_STATUS);
    unlink(out);
    ck_assert_int_eq(elfw_write(NULL, other, sizeof(other)), QP_EINVAL);
    elf_free(&fi);
    unlink(in);
}
END_TEST

/*****************************************************************************
 * The suite
 */

/* The runtime a program carries, by machine: x86-64's two; AArch64's counting one, when
 * it was built, else a refusal that says why; tracing on AArch64 and other machines
 * refused. */
START_TEST(test_elfw_runtime_blob)
{
    size_t size = 1;
    char why[160] = "";
    ck_assert_ptr_eq(elfw_runtime_blob(ARCH_EM_X86_64, 0, &size, why, sizeof why),
                     qprt_blob_plain);
    ck_assert_uint_eq(size, qprt_blob_plain_size);
    ck_assert_ptr_eq(elfw_runtime_blob(ARCH_EM_X86_64, 1, &size, why, sizeof why), qprt_blob);
    ck_assert_uint_eq(size, qprt_blob_size);
    const unsigned char *a = elfw_runtime_blob(ARCH_EM_AARCH64, 0, &size, why, sizeof why);
    if (qprt_blob_a64_size > 0) {
        ck_assert_ptr_eq(a, qprt_blob_a64);
        ck_assert_uint_eq(size, qprt_blob_a64_size);
        ck_assert(memcmp(a, QPRT_MAGIC, 8) == 0);
    } else {
        ck_assert_ptr_null(a);
        ck_assert_uint_eq(size, 0);
        ck_assert_str_eq(why, "the AArch64 runtime was not built (configure found no "
                              "aarch64-linux-gnu-gcc)");
    }
    ck_assert_ptr_null(elfw_runtime_blob(ARCH_EM_AARCH64, 1, &size, why, sizeof why));
    ck_assert_str_eq(why, "control-flow tracing is x86-64 only (the AArch64 runtime has none)");
    ck_assert_ptr_null(elfw_runtime_blob(40, 0, &size, NULL, 0));
    ck_assert_uint_eq(size, 0);
}
END_TEST

static Suite *
elfw_suite(void)
{
    Suite *s = suite_create("elfw");
    TCase *tc;

    tc = tcase_create("write");
    tcase_add_test(tc, test_elfw_identity);
    tcase_add_test(tc, test_elfw_regions);
    tcase_add_test(tc, test_elfw_redirect_main);
    tcase_add_test(tc, test_elfw_phdr_move);
    tcase_add_test(tc, test_elfw_eh_frame_hdr);
    tcase_add_test(tc, test_elfw_deterministic);
    tcase_add_test(tc, test_elfw_sections);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);

    tc = tcase_create("symbols");
    tcase_add_test(tc, test_elfw_symbol_add);
    tcase_add_test(tc, test_elfw_symbol_add_emit_relocs);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);

    tc = tcase_create("cet");
    tcase_add_test(tc, test_elfw_clear_cet);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("runtime");
    tcase_add_test(tc, test_elfw_runtime_blob);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_elfw_errors);
    tcase_add_test(tc, test_elfw_rewrite_names_failed_fde);
    tcase_add_test(tc, test_elfw_rewrite_unwind_fail_described);
    tcase_add_test(tc, test_elfw_fall_stub);
    tcase_add_test(tc, test_elfw_count_reg);
    tcase_add_test(tc, test_elfw_image_bytes);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

/* Build the variants; one that does not build or run is skipped by the tests. */
static int
build_variants(void)
{
    char src[512];
    size_t v;
    FILE *f;

    path_of(src, sizeof(src), "prog.c");
    f = fopen(src, "w");
    if (f == NULL)
        return -1;
    fputs(prog_src, f);
    fclose(f);
    for (v = 0; v < NELEM(variants); v++) {
        char out[512];
        path_of(out, sizeof(out), variants[v].name);
        if (sh("gcc %s -o '%s' '%s' >/dev/null 2>&1", variants[v].flags, out, src) != 0
            || sh("'%s' >/dev/null 2>&1", out) != PROG_STATUS) {
            fprintf(stderr, "check_elfw: skipping the %s variant (does not build)\n",
                variants[v].name);
            continue;
        }
        variants[v].ok = 1;
    }
    return variants[0].ok ? 0 : -1;
}

int
main(void)
{
    const char *tmp = getenv("TMPDIR");
    SRunner *sr;
    int failed;

    snprintf(workdir, sizeof(workdir), "%s/check_elfw.XXXXXX",
        tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(workdir) == NULL) {
        perror("check_elfw: mkdtemp");
        return 99;
    }
    if (build_variants() != 0) {
        fprintf(stderr, "check_elfw: cannot build the test program with gcc: skipped\n");
        sh("rm -rf '%s'", workdir);
        return 77;
    }
    sr = srunner_create(elfw_suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    sh("rm -rf '%s'", workdir);
    return failed == 0 ? 0 : 1;
}
