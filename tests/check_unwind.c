/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * editor/ed_unwind.c: unwind tables for relocated code. C++ programs with exceptions are
 * compiled at test time (g++ and clang++, -O0 and -O2, PIE and not); their .eh_frame is
 * rewritten for maps that shift the text uniformly, non-uniformly, partly, or with holes.
 * The new FDEs are checked by binutils' readelf (its CFA interpreter, on a small ELF file
 * holding the new .eh_frame), the LSDAs and the .eh_frame_hdr by a small decoder written
 * here independently of ed_unwind.c, and libgcc itself must find every new FDE once the
 * blob is mapped at its address and registered. Hand-made tables check every CFA opcode
 * and the exact bytes; mutated tables check that bad input is refused without a crash.
 * QP_UNWIND_EXTRA="/usr/bin/cmake ..." adds executables to check (slow).
 */
#include <check.h>
#include <elf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch/qp_err.h"
#include "cfg/cfg.h"
#include "editor/ed.h"

/*****************************************************************************
 * Test programs, compiled once before the suite runs
 */

static const char prog_src[] =
    "#include <cstdio>\n"
    "#include <new>\n"
    "#include <stdexcept>\n"
    "struct Guard {\n"
    "  int t; explicit Guard(int x) : t(x) {}\n"
    "  ~Guard() { std::printf(\"~%d\\n\", t); } };\n"
    "struct E1 { int v; };\n"
    "struct E2 : std::runtime_error { E2() : std::runtime_error(\"e2\") {} };\n"
    "__attribute__((noinline)) int leaf(int x) {\n"
    "  Guard g(x); if (x & 1) throw E1{x}; if (x & 2) throw E2(); return x; }\n"
    "__attribute__((noinline)) int spec(int x) throw(E1, std::bad_alloc) {\n"
    "  Guard g(x); return leaf(x); }\n"
    "__attribute__((noinline)) int mid(int x) {\n"
    "  Guard a(1);\n"
    "  try { return spec(x) + leaf(x + 4); } catch (const E2 &) { return -2; } }\n"
    "__attribute__((noinline)) int top(int x) {\n"
    "  try { return mid(x); } catch (E1 &e) { return e.v; } catch (...) { throw; } }\n"
    "__attribute__((noinline)) int vla(int n) {\n"
    "  char *p = (char *)__builtin_alloca(n); p[0] = (char)n;\n"
    "  try { return leaf(p[0]); } catch (...) { return 0; } }\n"
    "__attribute__((noinline)) int nothrow(int x) noexcept {\n"
    "  Guard g(x); return leaf(x); }\n"
    "int main(int argc, char **argv) {\n"
    "  (void)argv; int s = 0;\n"
    "  for (int i = 0; i < 8; i++) { try { s += top(i + argc); } catch (...) { s++; } }\n"
    "  s += vla(argc + 16); if (argc > 5) s += nothrow(argc);\n"
    "  std::printf(\"%d\\n\", s); return s & 1; }\n";

#define MAX_PROGS 16

static char tmpdir[64];
static char progs[MAX_PROGS][128];
static int nprogs;
static int nbuilt; /* progs[0 .. nbuilt) were compiled here, the rest come from outside */

/* Compile prog_src with every C++ compiler present in a few variants. */
static void
build_progs(void)
{
    static const struct {
        const char *cxx, *name, *flags;
    } v[] = {
        { "g++", "gcc-O2-pie", "-O2 -fPIE -pie" },
        { "g++", "gcc-O0-pie", "-O0 -fPIE -pie" },
        { "g++", "gcc-O2-nopie", "-O2 -fno-pie -no-pie" },
        { "g++", "gcc-O0-nopie", "-O0 -fno-pie -no-pie" },
        { "clang++", "clang-O2-pie", "-O2 -fPIE -pie" },
        { "clang++", "clang-O0-nopie", "-O0 -fno-pie -no-pie" },
    };
    char src[128], cmd[512];
    snprintf(src, sizeof(src), "%s/prog.cc", tmpdir);
    FILE *f = fopen(src, "w");
    if (f == NULL)
        return;
    fputs(prog_src, f);
    fclose(f);
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        snprintf(progs[nprogs], sizeof(progs[0]), "%s/%s", tmpdir, v[i].name);
        snprintf(cmd, sizeof(cmd),
                 "command -v %s >/dev/null 2>&1 && %s -std=gnu++14 -w %s -o %s %s",
                 v[i].cxx, v[i].cxx, v[i].flags, progs[nprogs], src);
        if (system(cmd) == 0)
            nprogs++;
    }
    nbuilt = nprogs;
    /* More executables to check, e.g. QP_UNWIND_EXTRA="/usr/bin/cmake /usr/bin/gdb". */
    const char *extra = getenv("QP_UNWIND_EXTRA");
    char list[1024];
    snprintf(list, sizeof(list), "%s", extra ? extra : "");
    for (char *save = NULL, *w = strtok_r(list, " ", &save); w && nprogs < MAX_PROGS;
         w = strtok_r(NULL, " ", &save))
        snprintf(progs[nprogs++], sizeof(progs[0]), "%s", w);
}

/*****************************************************************************
 * Maps
 */

enum { MAP_SHIFT, MAP_SPREAD, MAP_UPPER, MAP_HOLE };

typedef struct tmap {
    int kind;
    uint64_t lo, hi;           /* .text: [lo, hi] is mapped, hi included (an FDE end) */
    uint64_t mid;              /* MAP_UPPER: only [mid, hi] moves */
    uint64_t hole_lo, hole_hi; /* MAP_HOLE: [hole_lo, hole_hi) is not mapped */
    unsigned ncalls;           /* calls made */
} tmap_t;

#define SHIFT 0x100000u

static uint64_t
tmap_fn(void *arg, uint64_t old)
{
    tmap_t *m = arg;
    m->ncalls++;
    if (old < m->lo || old > m->hi)
        return 0;
    switch (m->kind) {
    case MAP_SPREAD: return old + SHIFT + 3 * ((old - m->lo) / 16);
    case MAP_UPPER: return old >= m->mid ? old + SHIFT : 0;
    case MAP_HOLE:
        if (old >= m->hole_lo && old < m->hole_hi)
            return 0;
        return old + SHIFT;
    default: return old + SHIFT;
    }
}

static const cfg_section_t *
section(const cfg_image_t *img, const char *name)
{
    for (size_t i = 0; i < img->nsections; i++)
        if (strcmp(img->sections[i].name, name) == 0)
            return &img->sections[i];
    return NULL;
}

static cfg_image_t *
open_prog(int i, tmap_t *m, int kind)
{
    cfg_image_t *img = NULL;
    ck_assert_int_eq(cfg_image_open_bfd(progs[i], &img), 0);
    const cfg_section_t *t = section(img, ".text");
    ck_assert_ptr_nonnull(t);
    memset(m, 0, sizeof(*m));
    m->kind = kind;
    m->lo = t->vma;
    m->hi = t->vma + t->size;
    m->mid = t->vma + t->size / 2;
    return img;
}

/* Where the blob goes: well above the image, within rel32 reach of it. */
static uint64_t
blob_addr(const cfg_image_t *img)
{
    uint64_t end = 0;
    for (size_t i = 0; i < img->nsections; i++)
        if (img->sections[i].vma + img->sections[i].size > end)
            end = img->sections[i].vma + img->sections[i].size;
    return ((end + 2 * SHIFT) & ~(uint64_t)0xfff) + 0x1000;
}

/*****************************************************************************
 * An independent decoder of .eh_frame records, LSDAs and .eh_frame_hdr
 */

typedef struct mem {
    const uint8_t *p; /* bytes */
    size_t n;         /* size */
    uint64_t addr;    /* their address */
} mem_t;

/* Memory the decoder may read: the blob and the image's sections. */
typedef struct view {
    mem_t blob;
    const cfg_image_t *img;
} view_t;

static const uint8_t *
view_ptr(const view_t *v, uint64_t addr, size_t *avail)
{
    if (addr >= v->blob.addr && addr - v->blob.addr < v->blob.n) {
        *avail = v->blob.n - (addr - v->blob.addr);
        return v->blob.p + (addr - v->blob.addr);
    }
    const uint8_t *p = cfg_image_ptr(v->img, addr, avail);
    ck_assert_msg(p != NULL, "address %#" PRIx64 " is in no section", addr);
    return p;
}

typedef struct tcur {
    const uint8_t *p;
    size_t n, i;
    uint64_t addr; /* address of p[0] */
} tcur_t;

static uint64_t
t_u(tcur_t *c, int n)
{
    ck_assert_uint_le(c->i + (size_t)n, c->n);
    uint64_t v = 0;
    for (int k = 0; k < n; k++)
        v |= (uint64_t)c->p[c->i + k] << (8 * k);
    c->i += (size_t)n;
    return v;
}

static uint64_t
t_uleb(tcur_t *c)
{
    uint64_t v = 0;
    for (int s = 0;; s += 7) {
        uint8_t b = (uint8_t)t_u(c, 1);
        if (s < 64)
            v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80))
            return v;
    }
}

static int64_t
t_sleb(tcur_t *c)
{
    uint64_t v = 0;
    int s = 0;
    uint8_t b;
    do {
        b = (uint8_t)t_u(c, 1);
        if (s < 64)
            v |= (uint64_t)(b & 0x7f) << s;
        s += 7;
    } while (b & 0x80);
    if (s < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << s;
    return (int64_t)v;
}

/* A DW_EH_PE_* pointer; pc-relative ones are resolved, a raw 0 is null. */
static uint64_t
t_ptr(tcur_t *c, uint8_t enc)
{
    uint64_t field = c->addr + c->i, v;
    switch (enc & 0x0f) {
    case 0x00: case 0x04: case 0x0c: v = t_u(c, 8); break;
    case 0x01: v = t_uleb(c); break;
    case 0x02: v = t_u(c, 2); break;
    case 0x03: v = t_u(c, 4); break;
    case 0x09: v = (uint64_t)t_sleb(c); break;
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)t_u(c, 2); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)t_u(c, 4); break;
    default: ck_abort_msg("encoding %#x", enc); return 0;
    }
    if ((enc & 0x70) == 0x10)
        v = v ? v + field : 0;
    else
        ck_assert_msg((enc & 0x70) == 0, "application %#x", enc & 0x70);
    return v;
}

static int
t_enc_size(uint8_t enc)
{
    switch (enc & 0x0f) {
    case 0x02: case 0x0a: return 2;
    case 0x03: case 0x0b: return 4;
    default: return 8;
    }
}

typedef struct tfde {
    uint64_t addr;           /* of the record */
    uint64_t begin, end;     /* code range */
    uint64_t lsda;           /* 0 for none */
    uint64_t pers;           /* personality pointer of its CIE (0 for none) */
    uint8_t pers_enc;
    uint64_t cie_addr;
} tfde_t;

/* Decode the FDE at ADDR (its CIE included). */
static tfde_t
t_fde(const view_t *v, uint64_t addr)
{
    tfde_t f = { .addr = addr };
    size_t avail;
    const uint8_t *p = view_ptr(v, addr, &avail);
    tcur_t c = { p, avail, 0, addr };
    uint64_t len = t_u(&c, 4);
    ck_assert_uint_ne(len, 0xffffffff);
    ck_assert_uint_le(len + 4, avail);
    c.n = (size_t)len + 4;
    uint64_t id_addr = addr + 4;
    uint32_t delta = (uint32_t)t_u(&c, 4);
    ck_assert_uint_ne(delta, 0);
    f.cie_addr = id_addr - delta;
    /* The CIE. */
    size_t cavail;
    const uint8_t *cp = view_ptr(v, f.cie_addr, &cavail);
    tcur_t k = { cp, cavail, 0, f.cie_addr };
    uint64_t clen = t_u(&k, 4);
    k.n = (size_t)clen + 4;
    ck_assert_uint_eq(t_u(&k, 4), 0);
    uint8_t ver = (uint8_t)t_u(&k, 1);
    const char *aug = (const char *)cp + k.i;
    k.i += strlen(aug) + 1;
    t_uleb(&k);
    t_sleb(&k);
    if (ver == 1)
        t_u(&k, 1);
    else
        t_uleb(&k);
    uint8_t fenc = 0, lenc = 0xff;
    f.pers_enc = 0xff;
    if (aug[0] == 'z') {
        t_uleb(&k);
        for (const char *a = aug + 1; *a; a++) {
            if (*a == 'R')
                fenc = (uint8_t)t_u(&k, 1);
            else if (*a == 'L')
                lenc = (uint8_t)t_u(&k, 1);
            else if (*a == 'P') {
                f.pers_enc = (uint8_t)t_u(&k, 1);
                f.pers = t_ptr(&k, f.pers_enc & 0x7f);
            }
        }
    }
    f.begin = t_ptr(&c, fenc);
    f.end = f.begin + t_ptr(&c, fenc & 0x0f);
    if (aug[0] == 'z') {
        t_uleb(&c);
        if (lenc != 0xff)
            f.lsda = t_ptr(&c, lenc);
    }
    return f;
}

static int
cmp_tfde(const void *a, const void *b)
{
    const tfde_t *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Every FDE of the records in M (up to a terminator). */
static size_t
t_fdes(const view_t *v, mem_t m, tfde_t **out)
{
    size_t n = 0, cap = 16, off = 0;
    *out = malloc(cap * sizeof(**out));
    while (off + 4 <= m.n) {
        tcur_t c = { m.p, m.n, off, m.addr };
        uint64_t len = t_u(&c, 4);
        if (len == 0)
            break;
        uint32_t id = (uint32_t)t_u(&c, 4);
        if (id != 0) {
            if (n == cap)
                *out = realloc(*out, (cap *= 2) * sizeof(**out));
            (*out)[n++] = t_fde(v, m.addr + off);
        }
        off += 4 + (size_t)len;
    }
    return n;
}

/* A call site of an LSDA, absolute, with its actions spelled out. */
typedef struct tcs {
    uint64_t start, end, lp;
    char acts[512]; /* "c<type>" catch, "s<types>" specification, "0" cleanup */
} tcs_t;

static size_t
t_lsda(const view_t *v, uint64_t addr, uint64_t fs, tcs_t *cs, size_t max)
{
    size_t avail;
    const uint8_t *p = view_ptr(v, addr, &avail);
    tcur_t c = { p, avail, 0, addr };
    uint64_t lpstart = fs;
    uint8_t lpenc = (uint8_t)t_u(&c, 1);
    if (lpenc != 0xff)
        lpstart = t_ptr(&c, lpenc);
    uint8_t ttenc = (uint8_t)t_u(&c, 1);
    uint64_t ttbase = 0;
    if (ttenc != 0xff) {
        uint64_t off = t_uleb(&c);
        ttbase = addr + c.i + off;
    }
    uint8_t csenc = (uint8_t)t_u(&c, 1);
    uint64_t cslen = t_uleb(&c);
    size_t csend = c.i + (size_t)cslen, n = 0;
    uint64_t acts = addr + csend;
    while (c.i < csend) {
        ck_assert_uint_lt(n, max);
        tcs_t *r = &cs[n++];
        uint64_t s = t_ptr(&c, csenc), l = t_ptr(&c, csenc), lp = t_ptr(&c, csenc);
        uint64_t a = t_uleb(&c);
        r->start = fs + s;
        r->end = fs + s + l;
        r->lp = lp ? lpstart + lp : 0;
        r->acts[0] = 0;
        for (uint64_t at = a ? acts + a - 1 : 0; at != 0;) {
            size_t av;
            const uint8_t *ap = view_ptr(v, at, &av);
            tcur_t ac = { ap, av, 0, at };
            int64_t filter = t_sleb(&ac);
            uint64_t dpos = at + ac.i;
            int64_t disp = t_sleb(&ac);
            char tmp[256];
            if (filter > 0) {
                size_t tav;
                uint64_t e = ttbase - (uint64_t)filter * (uint64_t)t_enc_size(ttenc);
                tcur_t tc = { view_ptr(v, e, &tav), 8, 0, e };
                snprintf(tmp, sizeof(tmp), "c%" PRIx64 ";", t_ptr(&tc, ttenc & 0x7f));
            } else if (filter < 0) {
                size_t sav;
                uint64_t sa = ttbase + (uint64_t)(-filter - 1);
                tcur_t sc = { view_ptr(v, sa, &sav), 64, 0, sa };
                strcpy(tmp, "s");
                for (uint64_t idx; (idx = t_uleb(&sc)) != 0;) {
                    size_t tav;
                    uint64_t e = ttbase - idx * (uint64_t)t_enc_size(ttenc);
                    tcur_t tc = { view_ptr(v, e, &tav), 8, 0, e };
                    snprintf(tmp + strlen(tmp), sizeof(tmp) - strlen(tmp), "%" PRIx64 ",",
                             t_ptr(&tc, ttenc & 0x7f));
                }
                strcat(tmp, ";");
            } else {
                strcpy(tmp, "0;");
            }
            ck_assert_uint_lt(strlen(r->acts) + strlen(tmp), sizeof(r->acts));
            strcat(r->acts, tmp);
            at = disp ? dpos + (uint64_t)disp : 0;
        }
    }
    return n;
}

/* Check the .eh_frame_hdr of OUT; returns its number of entries. */
static uint32_t
t_hdr(const view_t *v, const ed_unwind_out_t *out)
{
    ck_assert_uint_eq(out->hdr % 4, 0);
    ck_assert_uint_ge(out->hdr, out->eh_frame + out->eh_frame_size);
    size_t avail;
    const uint8_t *p = view_ptr(v, out->hdr, &avail);
    ck_assert_uint_ge(avail, out->hdr_size);
    tcur_t c = { p, out->hdr_size, 0, out->hdr };
    ck_assert_uint_eq(t_u(&c, 1), 1);
    ck_assert_uint_eq(t_u(&c, 1), 0x1b);
    ck_assert_uint_eq(t_u(&c, 1), 0x03);
    ck_assert_uint_eq(t_u(&c, 1), 0x3b);
    ck_assert_uint_eq(t_ptr(&c, 0x1b), out->eh_frame);
    uint32_t n = (uint32_t)t_u(&c, 4);
    ck_assert_uint_eq(out->hdr_size, 12 + 8 * (size_t)n);
    uint64_t prev = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t loc = out->hdr + (uint64_t)(int64_t)(int32_t)t_u(&c, 4);
        uint64_t fde = out->hdr + (uint64_t)(int64_t)(int32_t)t_u(&c, 4);
        ck_assert_msg(i == 0 || loc > prev, "table not sorted at %u", i);
        prev = loc;
        tfde_t f = t_fde(v, fde);
        ck_assert_uint_eq(f.begin, loc);
    }
    return n;
}

/* The terminator of the new .eh_frame and the layout of the blob. */
static void
t_layout(const ed_unwind_out_t *out, uint64_t at)
{
    ck_assert_uint_eq(out->eh_frame, at);
    ck_assert_uint_ge(out->eh_frame_size, 4);
    ck_assert_uint_le(out->eh_frame_size, out->size);
    uint32_t z;
    memcpy(&z, out->data + out->eh_frame_size - 4, 4);
    ck_assert_uint_eq(z, 0);
    ck_assert_uint_eq(out->hdr + out->hdr_size, at + out->size);
}

/*****************************************************************************
 * readelf's view of the CFA rows
 */

typedef struct rrow {
    uint64_t loc;
    char rules[512];
} rrow_t;

typedef struct rfde {
    uint64_t begin, end;
    char header[512];
    rrow_t *rows;
    size_t nrows;
} rfde_t;

typedef struct rdump {
    rfde_t *fdes;
    size_t n;
} rdump_t;

static void
rtrim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n'))
        s[--n] = 0;
}

/* Run readelf --debug-dump=frames-interp on PATH. */
static rdump_t
readelf_rows(const char *path)
{
    rdump_t d = { NULL, 0 };
    char cmd[256], line[512];
    snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp %s 2>&1", path);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t cap = 0;
    rfde_t *cur = NULL;
    int in_cie = 0;
    while (fgets(line, sizeof(line), f)) {
        char *pc = strstr(line, " FDE cie=");
        uint64_t b, e;
        if (pc && (pc = strstr(line, "pc="))
            && sscanf(pc, "pc=%" SCNx64 "..%" SCNx64, &b, &e) == 2) {
            if (d.n == cap)
                d.fdes = realloc(d.fdes, (cap = cap ? 2 * cap : 64) * sizeof(*d.fdes));
            cur = &d.fdes[d.n++];
            memset(cur, 0, sizeof(*cur));
            cur->begin = b;
            cur->end = e;
            in_cie = 0;
            continue;
        }
        if (strstr(line, " CIE")) {
            in_cie = 1;
            continue;
        }
        if (in_cie || cur == NULL)
            continue;
        rtrim(line);
        if (strncmp(line, "   LOC", 6) == 0) {
            snprintf(cur->header, sizeof(cur->header), "%s", line);
            continue;
        }
        uint64_t loc;
        int used = 0;
        if (strlen(line) > 17 && sscanf(line, "%16" SCNx64 "%n", &loc, &used) == 1
            && used == 16) {
            cur->rows = realloc(cur->rows, (cur->nrows + 1) * sizeof(*cur->rows));
            rrow_t *r = &cur->rows[cur->nrows++];
            r->loc = loc;
            snprintf(r->rules, sizeof(r->rules), "%s", line + 17);
        }
    }
    ck_assert_int_eq(pclose(f), 0);
    return d;
}

static void
rdump_free(rdump_t *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->fdes[i].rows);
    free(d->fdes);
}

/* Write a minimal ELF file whose only section is .eh_frame: N bytes of P at ADDR. */
static void
write_ehframe_elf(const char *path, const uint8_t *p, size_t n, uint64_t addr)
{
    static const char shstr[] = "\0.eh_frame\0.shstrtab";
    Elf64_Ehdr eh;
    Elf64_Shdr sh[3];
    memset(&eh, 0, sizeof(eh));
    memset(sh, 0, sizeof(sh));
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_EXEC;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_ehsize = sizeof(eh);
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = 3;
    eh.e_shstrndx = 2;
    size_t stroff = sizeof(eh) + n;
    eh.e_shoff = (stroff + sizeof(shstr) + 7) & ~(size_t)7;
    sh[1].sh_name = 1;
    sh[1].sh_type = SHT_PROGBITS;
    sh[1].sh_flags = SHF_ALLOC;
    sh[1].sh_addr = addr;
    sh[1].sh_offset = sizeof(eh);
    sh[1].sh_size = n;
    sh[1].sh_addralign = 8;
    sh[2].sh_name = 11;
    sh[2].sh_type = SHT_STRTAB;
    sh[2].sh_offset = stroff;
    sh[2].sh_size = sizeof(shstr);
    sh[2].sh_addralign = 1;
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(&eh, sizeof(eh), 1, f);
    fwrite(p, 1, n, f);
    fwrite(shstr, 1, sizeof(shstr), f);
    for (size_t i = stroff + sizeof(shstr); i < eh.e_shoff; i++)
        fputc(0, f);
    fwrite(sh, sizeof(sh), 1, f);
    fclose(f);
}

static int
cmp_rfde(const void *a, const void *b)
{
    const rfde_t *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* The FDE starting at BEGIN in D (sorted by cmp_rfde), or NULL. */
static const rfde_t *
rfind(const rdump_t *d, uint64_t begin)
{
    rfde_t key = { .begin = begin };
    return d->n ? bsearch(&key, d->fdes, d->n, sizeof(*d->fdes), cmp_rfde) : NULL;
}

/*
 * readelf's rows of every new FDE equal those of the old FDE it came from, at mapped
 * locations. Returns the number of FDEs compared.
 */
static size_t
compare_rows(const char *prog, const ed_unwind_out_t *out, tmap_t *m, int all)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/new-ehframe.%d", tmpdir, (int)getpid());
    write_ehframe_elf(path, out->data, out->eh_frame_size, out->eh_frame);
    rdump_t nd = readelf_rows(path);
    rdump_t od = readelf_rows(prog);
    unlink(path);
    if (nd.n)
        qsort(nd.fdes, nd.n, sizeof(*nd.fdes), cmp_rfde);
    size_t compared = 0;
    for (size_t i = 0; i < od.n; i++) {
        const rfde_t *o = &od.fdes[i];
        uint64_t nb = tmap_fn(m, o->begin);
        if (nb == 0 && !all)
            continue;
        if (nb == 0) { /* ED_UNWIND_ALL: copied where it is */
            const rfde_t *n = rfind(&nd, o->begin);
            ck_assert_msg(n != NULL, "%s: no copy of FDE %#" PRIx64, prog, o->begin);
            ck_assert_uint_eq(n->end, o->end);
            ck_assert_str_eq(n->header, o->header);
            ck_assert_uint_eq(n->nrows, o->nrows);
            for (size_t r = 0; r < o->nrows; r++) {
                ck_assert_uint_eq(n->rows[r].loc, o->rows[r].loc);
                ck_assert_str_eq(n->rows[r].rules, o->rows[r].rules);
            }
            compared++;
            continue;
        }
        const rfde_t *n = rfind(&nd, nb);
        ck_assert_msg(n != NULL, "%s: no new FDE for %#" PRIx64, prog, o->begin);
        ck_assert_uint_eq(n->end, tmap_fn(m, o->end));
        ck_assert_str_eq(n->header, o->header);
        ck_assert_uint_eq(n->nrows, o->nrows);
        for (size_t r = 0; r < o->nrows; r++) {
            uint64_t want = tmap_fn(m, o->rows[r].loc);
            if (m->kind == MAP_HOLE && want == 0) /* the next mapped location */
                want = m->hole_hi + SHIFT;
            ck_assert_msg(n->rows[r].loc == want,
                          "%s: FDE %#" PRIx64 " row %zu at %#" PRIx64 ", want %#" PRIx64,
                          prog, o->begin, r, n->rows[r].loc, want);
            ck_assert_str_eq(n->rows[r].rules, o->rows[r].rules);
        }
        compared++;
    }
    ck_assert_uint_eq(compared, nd.n);
    rdump_free(&nd);
    rdump_free(&od);
    return compared;
}

/*
 * The LSDA of every new FDE says what the old one said, at mapped locations: call-site
 * ranges, landing pads, and the types of every action chain. Returns LSDAs compared.
 */
static size_t
compare_lsdas(const cfg_image_t *img, const ed_unwind_out_t *out, tmap_t *m)
{
    const cfg_section_t *eh = section(img, ".eh_frame");
    view_t v = { { out->data, out->size, out->eh_frame }, img };
    tfde_t *olds, *news;
    size_t no = t_fdes(&v, (mem_t) { eh->bytes, eh->size, eh->vma }, &olds);
    mem_t blob = { out->data, out->eh_frame_size, out->eh_frame };
    size_t nn = t_fdes(&v, blob, &news);
    enum { MAXCS = 8192 };
    tcs_t *ocs = malloc(MAXCS * sizeof(*ocs)), *ncs = malloc(MAXCS * sizeof(*ncs));
    if (nn)
        qsort(news, nn, sizeof(*news), cmp_tfde);
    size_t compared = 0;
    for (size_t i = 0; i < no; i++) {
        uint64_t nb = tmap_fn(m, olds[i].begin);
        if (nb == 0)
            continue;
        tfde_t key = { .begin = nb };
        const tfde_t *nf = nn ? bsearch(&key, news, nn, sizeof(*news), cmp_tfde) : NULL;
        ck_assert_ptr_nonnull(nf);
        /* The personality still reaches the same slot. */
        ck_assert_uint_eq(nf->pers_enc, olds[i].pers_enc);
        ck_assert_uint_eq(nf->pers, olds[i].pers);
        ck_assert_uint_eq(!!nf->lsda, !!olds[i].lsda);
        if (olds[i].lsda == 0)
            continue;
        ck_assert(nf->lsda >= out->eh_frame + out->eh_frame_size && nf->lsda < out->hdr);
        size_t a = t_lsda(&v, olds[i].lsda, olds[i].begin, ocs, MAXCS);
        size_t b = t_lsda(&v, nf->lsda, nf->begin, ncs, MAXCS);
        ck_assert_uint_eq(a, b);
        for (size_t k = 0; k < a; k++) {
            ck_assert_uint_eq(ncs[k].start, tmap_fn(m, ocs[k].start));
            ck_assert_uint_eq(ncs[k].end, tmap_fn(m, ocs[k].end));
            ck_assert_uint_eq(ncs[k].lp, ocs[k].lp ? tmap_fn(m, ocs[k].lp) : 0);
            ck_assert_str_eq(ncs[k].acts, ocs[k].acts);
        }
        compared++;
    }
    free(ocs);
    free(ncs);
    free(olds);
    free(news);
    return compared;
}

/*****************************************************************************
 * Real programs
 */

static void
check_prog(int i, int kind)
{
    tmap_t m;
    cfg_image_t *img = open_prog(i, &m, kind);
    uint64_t at = blob_addr(img);
    ed_unwind_out_t out;
    ck_assert_int_eq(ed_unwind_build(img, tmap_fn, &m, at, &out), 0);
    ck_assert_uint_eq(out.nfde_failed, 0);
    ck_assert_uint_gt(out.nfde_moved, 3);
    ck_assert_uint_gt(out.nlsda_moved, 0);
    t_layout(&out, at);
    size_t rows = compare_rows(progs[i], &out, &m, 0);
    ck_assert_uint_eq(rows, out.nfde_moved);
    size_t lsdas = compare_lsdas(img, &out, &m);
    ck_assert_uint_gt(lsdas, 0);
    view_t v = { { out.data, out.size, out.eh_frame }, img };
    t_hdr(&v, &out);
    free(out.data);
    cfg_image_destroy(img);
}

START_TEST(test_unwind_shift_keeps_rows)
{
    ck_assert_int_gt(nprogs, 0);
    check_prog(_i, MAP_SHIFT);
}
END_TEST

START_TEST(test_unwind_spread_maps_every_location)
{
    check_prog(_i, MAP_SPREAD);
}
END_TEST

START_TEST(test_unwind_hdr_mixes_old_and_new)
{
    tmap_t m;
    cfg_image_t *img = open_prog(_i, &m, MAP_UPPER);
    const cfg_section_t *eh = section(img, ".eh_frame");
    uint64_t at = blob_addr(img);
    ed_unwind_out_t out;
    ck_assert_int_eq(ed_unwind_build(img, tmap_fn, &m, at, &out), 0);
    t_layout(&out, at);
    view_t v = { { out.data, out.size, out.eh_frame }, img };
    tfde_t *olds;
    size_t no = t_fdes(&v, (mem_t) { eh->bytes, eh->size, eh->vma }, &olds);
    uint32_t moved = 0, kept = 0;
    for (size_t k = 0; k < no; k++) {
        if (olds[k].begin == 0)
            continue;
        if (tmap_fn(&m, olds[k].begin))
            moved++;
        else
            kept++;
    }
    ck_assert_uint_gt(moved, 0);
    ck_assert_uint_gt(kept, 0);
    ck_assert_uint_eq(out.nfde_moved, moved);
    ck_assert_uint_eq(t_hdr(&v, &out), moved + kept);
    /* No old FDE of moved code is listed; every unmoved one is, at its old address. */
    tcur_t c = { out.data + (out.hdr - at), out.hdr_size, 12, out.hdr };
    for (uint32_t k = 0; k < moved + kept; k++) {
        uint64_t loc = out.hdr + (uint64_t)(int64_t)(int32_t)t_u(&c, 4);
        uint64_t fde = out.hdr + (uint64_t)(int64_t)(int32_t)t_u(&c, 4);
        int in_blob = fde >= at && fde < at + out.eh_frame_size;
        int in_old = fde >= eh->vma && fde < eh->vma + eh->size;
        ck_assert(in_blob != in_old);
        if (in_old)
            ck_assert_uint_eq(tmap_fn(&m, loc), 0);
    }
    free(olds);
    free(out.data);
    cfg_image_destroy(img);
}
END_TEST

/* libgcc's FDE lookup (unwind-dw2-fde.h, not installed). */
struct dwarf_eh_bases {
    void *tbase;
    void *dbase;
    void *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);
extern void __register_frame_info(const void *begin, void *ob);
extern void *__deregister_frame_info(const void *begin);

START_TEST(test_unwind_libgcc_finds_new_fdes)
{
    /*
     * Place the blob at its address in this process and register its .eh_frame with
     * libgcc, as crtbegin does for static programs: the real unwinder must then find
     * every new FDE for every new code address it covers.
     */
    tmap_t m;
    cfg_image_t *img = open_prog(_i, &m, MAP_SPREAD);
    uint64_t at = blob_addr(img);
    ed_unwind_out_t out;
    ck_assert_int_eq(ed_unwind_build(img, tmap_fn, &m, at, &out), 0);
    size_t len = (out.size + 0xfff) & ~(size_t)0xfff;
    void *p = mmap((void *)(uintptr_t)at, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    ck_assert_msg(p == (void *)(uintptr_t)at, "cannot map %#" PRIx64, at);
    memcpy(p, out.data, out.size);
    static uint64_t object[32]; /* libgcc's struct object */
    __register_frame_info(p, object);
    view_t v = { { out.data, out.size, at }, img };
    tfde_t *news;
    size_t nn = t_fdes(&v, (mem_t) { out.data, out.eh_frame_size, at }, &news);
    ck_assert_uint_eq(nn, out.nfde_moved);
    for (size_t k = 0; k < nn; k++) {
        if (news[k].end == news[k].begin)
            continue;
        uint64_t b0 = news[k].begin, e0 = news[k].end;
        uint64_t pcs[3] = { b0, b0 + (e0 - b0) / 2, e0 - 1 };
        for (int j = 0; j < 3; j++) {
            struct dwarf_eh_bases b;
            const void *f = _Unwind_Find_FDE((void *)(uintptr_t)pcs[j], &b);
            ck_assert_msg(f == (const void *)(uintptr_t)news[k].addr,
                          "pc %#" PRIx64 ": FDE %p, want %#" PRIx64, pcs[j], f,
                          news[k].addr);
            ck_assert_ptr_eq(b.func, (void *)(uintptr_t)news[k].begin);
        }
    }
    ck_assert_ptr_eq(__deregister_frame_info(p), object);
    munmap(p, len);
    free(news);
    free(out.data);
    cfg_image_destroy(img);
}
END_TEST

typedef struct pads {
    uint64_t *v; /* (function, pad) pairs */
    size_t n, cap;
} pads_t;

static int
pad_add(void *arg, uint64_t func, uint64_t pad)
{
    pads_t *p = arg;
    if (p->n + 2 > p->cap)
        p->v = realloc(p->v, (p->cap = p->cap ? 2 * p->cap : 64) * sizeof(*p->v));
    p->v[p->n++] = func;
    p->v[p->n++] = pad;
    return 0;
}

static int
stop_at_first(void *arg, uint64_t func, uint64_t pad)
{
    (void)func;
    (void)pad;
    ++*(int *)arg;
    return QP_ENOTFOUND;
}

static int pads_as_alone(const cfg_image_t *img);

START_TEST(test_unwind_landing_pads_listed)
{
    tmap_t m;
    cfg_image_t *img = open_prog(_i, &m, MAP_SHIFT);
    const cfg_section_t *eh = section(img, ".eh_frame");
    pads_t got = { NULL, 0, 0 }, want = { NULL, 0, 0 };
    ck_assert_int_eq(ed_unwind_landing_pads(img, pad_add, &got), 0);
    view_t v = { { NULL, 0, 0 }, img };
    tfde_t *olds;
    size_t no = t_fdes(&v, (mem_t) { eh->bytes, eh->size, eh->vma }, &olds);
    tcs_t *cs = malloc(8192 * sizeof(*cs));
    for (size_t k = 0; k < no; k++) {
        if (olds[k].lsda == 0 || olds[k].begin == 0)
            continue;
        size_t n = t_lsda(&v, olds[k].lsda, olds[k].begin, cs, 8192);
        for (size_t j = 0; j < n; j++)
            if (cs[j].lp)
                pad_add(&want, olds[k].begin, cs[j].lp);
    }
    ck_assert_uint_gt(want.n, 0);
    ck_assert_uint_eq(got.n, want.n);
    ck_assert_mem_eq(got.v, want.v, want.n * sizeof(uint64_t));
    int calls = 0;
    ck_assert_int_eq(ed_unwind_landing_pads(img, stop_at_first, &calls), QP_ENOTFOUND);
    ck_assert_int_eq(calls, 1);
    ck_assert_int_eq(pads_as_alone(img), 0);
    free(cs);
    free(olds);
    free(got.v);
    free(want.v);
    cfg_image_destroy(img);
}
END_TEST

START_TEST(test_unwind_size_independent_of_address)
{
    /* The editor sizes the blob at address 0, then builds it where it goes. */
    tmap_t m;
    cfg_image_t *img = open_prog(_i, &m, MAP_SPREAD);
    uint64_t at = blob_addr(img);
    uint64_t ats[4] = { 0, at, at + 8, at + 0x123458 };
    ed_unwind_out_t out[4];
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(ed_unwind_build(img, tmap_fn, &m, ats[k], &out[k]), 0);
        ck_assert_uint_eq(out[k].size, out[0].size);
        ck_assert_uint_eq(out[k].eh_frame_size, out[0].eh_frame_size);
        ck_assert_uint_eq(out[k].hdr - ats[k], out[0].hdr - ats[0]);
        ck_assert_uint_eq(out[k].nfde_moved, out[0].nfde_moved);
    }
    for (int k = 0; k < 4; k++)
        free(out[k].data);
    cfg_image_destroy(img);
}
END_TEST

/* Builds one after another from one read of the old tables (ed_unwind_build_old, the
 * rewrite's sizing and final builds) give each the bytes and counts it gives alone, the
 * flags and addresses changing between them. Fails when a build leaves state for the
 * next (FDEs marked kept, CIEs placed in the blob before, LSDAs, table entries). */
START_TEST(test_unwind_builds_from_one_read)
{
    tmap_t m;
    cfg_image_t *img = open_prog(_i, &m, MAP_SPREAD);
    uint64_t at = blob_addr(img);
    const uint64_t ats[4] = { 0, at, at + 8, 0 };
    const uint32_t flags[4] = { ED_UNWIND_ALL, 0, ED_UNWIND_ALL, 0 };
    ed_unwind_map_t um = { tmap_fn, NULL, NULL, NULL, &m };
    ed_unwind_old_t *old = NULL;
    ck_assert_int_eq(ed_unwind_old_read(img, &old), 0);
    for (int k = 0; k < 4; k++) {
        ed_unwind_out_t got, want;
        ck_assert_int_eq(ed_unwind_build_old(old, &um, ats[k], 0, flags[k], &got), 0);
        ck_assert_int_eq(ed_unwind_build_ex(img, &um, ats[k], flags[k], &want), 0);
        ck_assert_uint_gt(want.size, 0);
        ck_assert_uint_eq(got.size, want.size);
        ck_assert_msg(
            memcmp(got.data, want.data, want.size) == 0, "build %d: other bytes", k);
        ck_assert_uint_eq(got.eh_frame_size, want.eh_frame_size);
        ck_assert_uint_eq(got.nfde_moved, want.nfde_moved);
        ck_assert_uint_eq(got.nfde_old, want.nfde_old);
        ck_assert_uint_eq(got.nlsda_moved, want.nlsda_moved);
        ck_assert_uint_eq(got.nold_refs, want.nold_refs);
        free(got.data);
        free(want.data);
    }
    ed_unwind_old_free(old);
    cfg_image_destroy(img);
}
END_TEST

START_TEST(test_unwind_all_copies_every_fde)
{
    /* ED_UNWIND_ALL: the blob's .eh_frame part replaces the old section completely. */
    tmap_t m;
    cfg_image_t *img = open_prog(_i, &m, MAP_UPPER);
    const cfg_section_t *eh = section(img, ".eh_frame");
    uint64_t at = blob_addr(img);
    ed_unwind_out_t out, part;
    ed_unwind_map_t um = { tmap_fn, NULL, NULL, NULL, &m };
    ck_assert_int_eq(ed_unwind_build_ex(img, &um, at, ED_UNWIND_ALL, &out), 0);
    ck_assert_int_eq(ed_unwind_build(img, tmap_fn, &m, at, &part), 0);
    ck_assert_uint_eq(out.nfde_old, 0);
    ck_assert_uint_gt(part.nfde_old, 0);
    ck_assert_uint_eq(out.nfde_moved, part.nfde_moved);
    ck_assert_uint_eq(out.nlsda_moved, part.nlsda_moved);
    t_layout(&out, at);
    view_t v = { { out.data, out.size, at }, img };
    tfde_t *olds, *news;
    size_t no = t_fdes(&v, (mem_t) { eh->bytes, eh->size, eh->vma }, &olds);
    size_t nn = t_fdes(&v, (mem_t) { out.data, out.eh_frame_size, at }, &news);
    size_t live = 0;
    for (size_t k = 0; k < no; k++)
        live += olds[k].begin != 0;
    ck_assert_uint_eq(nn, live);
    ck_assert_uint_eq(t_hdr(&v, &out), live);
    /* Every entry of the search table points into the blob; copies keep their LSDAs. */
    tcur_t c = { out.data + (out.hdr - at), out.hdr_size, 12, out.hdr };
    for (size_t k = 0; k < live; k++) {
        t_u(&c, 4);
        uint64_t fde = out.hdr + (uint64_t)(int64_t)(int32_t)t_u(&c, 4);
        ck_assert(fde >= at && fde < at + out.eh_frame_size);
    }
    for (size_t k = 0, j = 0; k < no; k++) {
        if (olds[k].begin == 0)
            continue;
        const tfde_t *nf = &news[j++]; /* same order */
        ck_assert_uint_eq(nf->pers, olds[k].pers);
        if (tmap_fn(&m, olds[k].begin) == 0) {
            ck_assert_uint_eq(nf->begin, olds[k].begin);
            ck_assert_uint_eq(nf->end, olds[k].end);
            ck_assert_uint_eq(nf->lsda, olds[k].lsda);
        } else {
            ck_assert_uint_eq(nf->begin, tmap_fn(&m, olds[k].begin));
        }
    }
    compare_rows(progs[_i], &out, &m, 1);
    free(olds);
    free(news);
    free(out.data);
    free(part.data);
    cfg_image_destroy(img);
}
END_TEST

START_TEST(test_unwind_hole_takes_next_location)
{
    /* Unmap three bytes at the second row of a function with several rows. */
    tmap_t m;
    cfg_image_t *img = open_prog(0, &m, MAP_SHIFT);
    rdump_t od = readelf_rows(progs[0]);
    const rfde_t *pick = NULL;
    for (size_t k = 0; k < od.n && pick == NULL; k++)
        if (od.fdes[k].nrows >= 3 && od.fdes[k].rows[2].loc - od.fdes[k].rows[1].loc > 3
            && od.fdes[k].begin >= m.lo)
            pick = &od.fdes[k];
    ck_assert_ptr_nonnull(pick);
    m.kind = MAP_HOLE;
    m.hole_lo = pick->rows[1].loc;
    m.hole_hi = pick->rows[1].loc + 3;
    uint64_t at = blob_addr(img);
    ed_unwind_out_t out;
    ck_assert_int_eq(ed_unwind_build(img, tmap_fn, &m, at, &out), 0);
    compare_rows(progs[0], &out, &m, 0);
    rdump_free(&od);
    free(out.data);
    cfg_image_destroy(img);
}
END_TEST

/*****************************************************************************
 * Hand-made tables: every CFA opcode, exact bytes, LSDA details
 */

#define SYN_VMA 0x300000u   /* the synthetic .eh_frame section */
#define SYN_CODE 0x401000u  /* the code its first FDE covers */
#define SYN_NEW 0x801000u   /* where it goes: new = SYN_NEW + 2 * (old - SYN_CODE) */
#define SYN_SLOT 0x350000u  /* the personality's GOT-like slot */
#define SYN_TYPE 0x360000u  /* a type_info reference */

typedef struct sbuf {
    uint8_t b[1024];
    size_t n;
} sbuf_t;

static void
s_put(sbuf_t *s, const uint8_t *p, size_t n)
{
    ck_assert_uint_le(s->n + n, sizeof(s->b));
    memcpy(s->b + s->n, p, n);
    s->n += n;
}

#define S_BYTES(s, ...)                                                                  \
    do {                                                                                 \
        static const uint8_t b_[] = { __VA_ARGS__ };                                     \
        s_put((s), b_, sizeof(b_));                                                      \
    } while (0)

static void
s_u32(sbuf_t *s, uint32_t v)
{
    uint8_t t[4];
    for (int i = 0; i < 4; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    s_put(s, t, 4);
}

static void
s_set32(sbuf_t *s, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        s->b[at + i] = (uint8_t)(v >> (8 * i));
}

/* A pc-relative sdata4 to TARGET, for a section at BASE. */
static void
s_pcrel(sbuf_t *s, uint64_t base, uint64_t target)
{
    s_u32(s, (uint32_t)(target - (base + s->n)));
}

static void
s_pad(sbuf_t *s, size_t rec, size_t align)
{
    while ((s->n - rec) % align)
        S_BYTES(s, 0);
    s_set32(s, rec, (uint32_t)(s->n - rec - 4));
}

static uint64_t
syn_map(void *arg, uint64_t old)
{
    (void)arg;
    if (old >= SYN_CODE && old <= SYN_CODE + 0x200)
        return SYN_NEW + 2 * (old - SYN_CODE);
    return 0;
}

/* syn_map, except the end of the first FDE is unknown. */
static uint64_t
syn_map_noend(void *arg, uint64_t old)
{
    return old == SYN_CODE + 0x200 ? 0 : syn_map(arg, old);
}

static uint64_t
syn_map_end(void *arg, uint64_t old)
{
    (void)arg;
    return old == SYN_CODE + 0x200 ? SYN_NEW + 0x3f0 : 0;
}

/*
 * .eh_frame with: a "zR" CIE; FDE 1 over [SYN_CODE, +0x200) using every CFA opcode;
 * FDE 2 with an unknown opcode (moves, fails); FDE 3 at 0x500000 (does not move); a
 * "zPLR" CIE with FDE 4 over [SYN_CODE + 0x1c0, SYN_CODE + 0x200) and its LSDA after the
 * terminator. FDE_OFF[0..3] get the FDEs' section offsets, FDE_OFF[4] the LSDA's.
 */
static void
syn_tables(sbuf_t *s, size_t *fde_off)
{
    s->n = 0;
    /* CIE 0 */
    size_t cie = s->n;
    s_u32(s, 0);
    S_BYTES(s, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 0x10, 1, 0x1b, 0x0c, 0x07, 0x08, 0x90,
            0x01);
    s_pad(s, cie, 8);
    /* FDE 1 */
    size_t f1 = fde_off[0] = s->n;
    s_u32(s, 0);
    s_u32(s, (uint32_t)(s->n - cie));
    s_pcrel(s, SYN_VMA, SYN_CODE);
    s_u32(s, 0x200);
    S_BYTES(s, 0);                                   /* augmentation length */
    S_BYTES(s, 0x41, 0x0e, 0x10, 0x86, 0x02);        /* adv 1; cfa_offset 16; offset r6 */
    S_BYTES(s, 0x02, 0x40, 0x0d, 0x06);              /* adv1 0x40; def_cfa_register r6 */
    S_BYTES(s, 0x03, 0x00, 0x01, 0xc6);              /* adv2 0x100; restore r6 */
    S_BYTES(s, 0x04, 0x10, 0, 0, 0);                 /* adv4 0x10 */
    S_BYTES(s, 0x05, 3, 2, 0x06, 3, 0x07, 15, 0x08, 14, 0x09, 3, 4, 0x0a, 0x0b);
    S_BYTES(s, 0x0c, 7, 8, 0x0f, 2, 0x77, 8, 0x10, 3, 2, 0x76, 0x10);
    S_BYTES(s, 0x11, 3, 0x7e, 0x12, 7, 0x7f, 0x13, 0x7e, 0x14, 3, 1, 0x15, 3, 0x7f);
    S_BYTES(s, 0x16, 3, 1, 0x30, 0x2e, 0x10, 0x2f, 3, 2, 0x2d);
    S_BYTES(s, 0x01);                                /* set_loc SYN_CODE + 0x180 */
    s_pcrel(s, SYN_VMA, SYN_CODE + 0x180);
    S_BYTES(s, 0x4a, 0x0e, 0x08);                    /* adv 10; def_cfa_offset 8 */
    s_pad(s, f1, 8);
    /* FDE 2: unknown opcode 0x3f */
    size_t f2 = fde_off[1] = s->n;
    s_u32(s, 0);
    s_u32(s, (uint32_t)(s->n - cie));
    s_pcrel(s, SYN_VMA, SYN_CODE + 0x100);
    s_u32(s, 0x10);
    S_BYTES(s, 0, 0x41, 0x3f);
    s_pad(s, f2, 8);
    /* FDE 3: does not move */
    size_t f3 = fde_off[2] = s->n;
    s_u32(s, 0);
    s_u32(s, (uint32_t)(s->n - cie));
    s_pcrel(s, SYN_VMA, 0x500000);
    s_u32(s, 0x20);
    S_BYTES(s, 0, 0x44, 0x0e, 0x10);
    s_pad(s, f3, 8);
    /* CIE 1: zPLR, personality indirect|pcrel|sdata4 */
    size_t cie1 = s->n;
    s_u32(s, 0);
    S_BYTES(s, 0, 0, 0, 0, 1, 'z', 'P', 'L', 'R', 0, 1, 0x78, 0x10, 7, 0x9b);
    s_pcrel(s, SYN_VMA, SYN_SLOT);
    S_BYTES(s, 0x1b, 0x1b, 0x0c, 0x07, 0x08, 0x90, 0x01);
    s_pad(s, cie1, 8);
    /* FDE 4 over [SYN_CODE + 0x1c0, SYN_CODE + 0x200) with an LSDA */
    size_t f4 = fde_off[3] = s->n;
    s_u32(s, 0);
    s_u32(s, (uint32_t)(s->n - cie1));
    s_pcrel(s, SYN_VMA, SYN_CODE + 0x1c0);
    s_u32(s, 0x40);
    S_BYTES(s, 4);
    size_t lsda_field = s->n;
    s_u32(s, 0); /* patched below */
    S_BYTES(s, 0x48, 0x0e, 0x10);
    s_pad(s, f4, 8);
    s_u32(s, 0); /* terminator */
    /* The LSDA, 4-aligned. */
    while (s->n % 4)
        S_BYTES(s, 0);
    size_t lsda = fde_off[4] = s->n;
    s_set32(s, lsda_field, (uint32_t)(lsda - lsda_field));
    S_BYTES(s, 0xff, 0x9b, 0);            /* LPStart omit, TType; TTBase patched below */
    S_BYTES(s, 0x01, 12);                 /* call sites: uleb128, 12 bytes */
    S_BYTES(s, 0x04, 0x05, 0x20, 0x01);   /* [fs+4, +5) lp fs+0x20, action 1 */
    S_BYTES(s, 0x10, 0x08, 0x00, 0x00);   /* [fs+0x10, +8) no lp */
    S_BYTES(s, 0x18, 0x28, 0x30, 0x03);   /* [fs+0x18, +0x28) lp fs+0x30, action 3 */
    /* Actions: 0: (filter 2, end); 2: (filter -1, next = 0) */
    S_BYTES(s, 0x02, 0x00, 0x7f, 0x7d);
    /* Type table at a 4-aligned address: entry 2 (null: catch all), entry 1. */
    while ((SYN_VMA + s->n) % 4)
        S_BYTES(s, 0);
    s_u32(s, 0);
    s_pcrel(s, SYN_VMA, SYN_TYPE);
    size_t ttbase = s->n;
    S_BYTES(s, 0x01, 0x00); /* specification list: type 1 */
    /* The TTBase offset (the byte after "0xff 0x9b"). */
    s->b[lsda + 2] = (uint8_t)(ttbase - (lsda + 3));
}

static cfg_image_t *
syn_image(const sbuf_t *s)
{
    cfg_image_t *img = NULL;
    ck_assert_int_eq(cfg_image_from_bytes(s->b, s->n, SYN_VMA, &img), 0);
    img->sections[0].name = ".eh_frame";
    img->sections[0].flags = CFG_SEC_ALLOC | CFG_SEC_LOAD;
    return img;
}

START_TEST(test_unwind_every_opcode_exact_bytes)
{
    sbuf_t s;
    size_t off[5];
    syn_tables(&s, off);
    cfg_image_t *img = syn_image(&s);
    const uint64_t at = 0x900000;
    ed_unwind_out_t out;
    ck_assert_int_eq(ed_unwind_build(img, syn_map, NULL, at, &out), 0);
    ck_assert_uint_eq(out.nfde_moved, 2);
    ck_assert_uint_eq(out.nfde_failed, 1);
    ck_assert_uint_eq(out.nlsda_moved, 1);
    t_layout(&out, at);

    /* Expected: CIE 0 verbatim, then FDE 1 with the advances scaled by two. */
    sbuf_t e;
    e.n = 0;
    s_put(&e, s.b, 24);
    size_t f = e.n;
    s_u32(&e, 0);
    s_u32(&e, 28);
    s_pcrel(&e, at, SYN_NEW);
    s_u32(&e, 0x400);
    S_BYTES(&e, 0);
    S_BYTES(&e, 0x42, 0x0e, 0x10, 0x86, 0x02);
    S_BYTES(&e, 0x02, 0x80, 0x0d, 0x06);
    S_BYTES(&e, 0x03, 0x00, 0x02, 0xc6);
    S_BYTES(&e, 0x60);
    S_BYTES(&e, 0x05, 3, 2, 0x06, 3, 0x07, 15, 0x08, 14, 0x09, 3, 4, 0x0a, 0x0b);
    S_BYTES(&e, 0x0c, 7, 8, 0x0f, 2, 0x77, 8, 0x10, 3, 2, 0x76, 0x10);
    S_BYTES(&e, 0x11, 3, 0x7e, 0x12, 7, 0x7f, 0x13, 0x7e, 0x14, 3, 1, 0x15, 3, 0x7f);
    S_BYTES(&e, 0x16, 3, 1, 0x30, 0x2e, 0x10, 0x2f, 3, 2, 0x2d);
    S_BYTES(&e, 0x02, 0x5e);                    /* set_loc became adv1 0x5e */
    S_BYTES(&e, 0x54, 0x0e, 0x08);              /* adv 20 */
    s_pad(&e, f, 8);
    ck_assert_uint_ge(out.eh_frame_size, e.n);
    ck_assert_mem_eq(out.data, e.b, e.n);

    /* CIE 1 copied with the personality re-encoded to reach the same slot. */
    view_t v = { { out.data, out.size, out.eh_frame }, img };
    tfde_t *news;
    size_t nn = t_fdes(&v, (mem_t) { out.data, out.eh_frame_size, at }, &news);
    ck_assert_uint_eq(nn, 2);
    ck_assert_uint_eq(news[0].begin, SYN_NEW);
    ck_assert_uint_eq(news[0].end, SYN_NEW + 0x400);
    ck_assert_uint_eq(news[1].begin, SYN_NEW + 0x380);
    ck_assert_uint_eq(news[1].end, SYN_NEW + 0x400);
    ck_assert_uint_eq(news[1].pers, SYN_SLOT);
    ck_assert_uint_ge(news[1].cie_addr, at);

    /* The LSDA: call sites mapped, actions and types (null kept) the same. */
    tcs_t ocs[8], ncs[8];
    size_t a = t_lsda(&v, SYN_VMA + off[4], SYN_CODE + 0x1c0, ocs, 8);
    size_t b = t_lsda(&v, news[1].lsda, SYN_NEW + 0x380, ncs, 8);
    ck_assert_uint_eq(a, 3);
    ck_assert_uint_eq(b, 3);
    ck_assert_str_eq(ocs[0].acts, "c0;");
    ck_assert_str_eq(ocs[2].acts, "s360000,;c0;");
    for (size_t k = 0; k < 3; k++) {
        ck_assert_uint_eq(ncs[k].start, syn_map(NULL, ocs[k].start));
        ck_assert_uint_eq(ncs[k].end, syn_map(NULL, ocs[k].end));
        ck_assert_uint_eq(ncs[k].lp, ocs[k].lp ? syn_map(NULL, ocs[k].lp) : 0);
        ck_assert_str_eq(ncs[k].acts, ocs[k].acts);
    }
    ck_assert_uint_eq(news[1].lsda % 4, 0);

    /* The hdr: old FDE 2 (failed) and FDE 3 (unmoved) at their old places, two new. */
    ck_assert_uint_eq(t_hdr(&v, &out), 4);
    tcur_t c = { out.data + (out.hdr - at), out.hdr_size, 12, out.hdr };
    uint64_t want[4][2] = {
        { SYN_CODE + 0x100, SYN_VMA + off[1] },
        { 0x500000, SYN_VMA + off[2] },
        { SYN_NEW, at + 24 },
        { SYN_NEW + 0x380, news[1].addr },
    };
    for (int k = 0; k < 4; k++) {
        ck_assert_uint_eq(out.hdr + (uint64_t)(int64_t)(int32_t)t_u(&c, 4), want[k][0]);
        ck_assert_uint_eq(out.hdr + (uint64_t)(int64_t)(int32_t)t_u(&c, 4), want[k][1]);
    }
    free(news);
    free(out.data);
    cfg_image_destroy(img);
}
END_TEST

START_TEST(test_unwind_end_without_mapping)
{
    sbuf_t s;
    size_t off[5];
    syn_tables(&s, off);
    cfg_image_t *img = syn_image(&s);
    const uint64_t at = 0x900000;
    ed_unwind_out_t out;
    view_t v = { { NULL, 0, at }, img };
    tfde_t *news;

    /* map() knows no end: one byte past the slot of the last mapped location. */
    ck_assert_int_eq(ed_unwind_build(img, syn_map_noend, NULL, at, &out), 0);
    v.blob = (mem_t) { out.data, out.size, at };
    ck_assert_uint_eq(t_fdes(&v, (mem_t) { out.data, out.eh_frame_size, at }, &news), 2);
    ck_assert_uint_eq(news[0].end, syn_map(NULL, SYN_CODE + 0x1ff) + 1);
    free(news);
    free(out.data);

    /* map_end() gives it. */
    ed_unwind_map_t um = { syn_map_noend, syn_map_end, NULL, NULL, NULL };
    int rc = ed_unwind_build_ex(img, &um, at, 0, &out);
    ck_assert_int_eq(rc, 0);
    v.blob = (mem_t) { out.data, out.size, at };
    ck_assert_uint_eq(t_fdes(&v, (mem_t) { out.data, out.eh_frame_size, at }, &news), 2);
    ck_assert_uint_eq(news[0].end, SYN_NEW + 0x3f0);
    ck_assert_uint_eq(news[1].end, SYN_NEW + 0x3f0);
    free(news);
    free(out.data);
    cfg_image_destroy(img);
}
END_TEST

static uint64_t
syn_map_nolp(void *arg, uint64_t old)
{
    return old == SYN_CODE + 0x1c0 + 0x30 ? 0 : syn_map(arg, old);
}

START_TEST(test_unwind_unrelocated_landing_pad_fails)
{
    sbuf_t s;
    size_t off[5];
    syn_tables(&s, off);
    cfg_image_t *img = syn_image(&s);
    ed_unwind_out_t out;
    ck_assert_int_eq(ed_unwind_build(img, syn_map_nolp, NULL, 0x900000, &out), 0);
    ck_assert_uint_eq(out.nfde_moved, 1);
    ck_assert_uint_eq(out.nfde_failed, 2);
    ck_assert_uint_eq(out.nlsda_moved, 0);
    view_t v = { { out.data, out.size, 0x900000 }, img };
    ck_assert_uint_eq(t_hdr(&v, &out), 4); /* the failed FDE keeps its old entry */
    free(out.data);
    cfg_image_destroy(img);
}
END_TEST

START_TEST(test_unwind_no_ehframe_is_empty)
{
    static const uint8_t code[] = { 0xc3 };
    cfg_image_t *img = NULL;
    ck_assert_int_eq(cfg_image_from_bytes(code, sizeof(code), 0x1000, &img), 0);
    ed_unwind_out_t out;
    ck_assert_int_eq(ed_unwind_build(img, syn_map, NULL, 0x900000, &out), 0);
    ck_assert_uint_eq(out.size, 0);
    ck_assert_ptr_null(out.data);
    ck_assert_int_eq(ed_unwind_build(NULL, syn_map, NULL, 0, &out), QP_EINVAL);
    ck_assert_int_eq(ed_unwind_build(img, NULL, NULL, 0, &out), QP_EINVAL);
    ck_assert_int_eq(ed_unwind_build(img, syn_map, NULL, 0, NULL), QP_EINVAL);
    cfg_image_destroy(img);
}
END_TEST

/*****************************************************************************
 * Holes: bytes of an FDE's range that do not move (a nop before a landing pad, padding)
 */

#define H_CODE 0x402000u /* FDE A over [H_CODE, +0x40), FDE B over [+0x40, +0x80) */
#define H_END (H_CODE + 0x80)
#define H_NEW 0x802000u /* moved bytes go here, three new bytes each, holes dropped */

/* How the hole map behaves: contiguous, split (A's second run elsewhere), overlapping
 * (B's new code starts inside A's). */
enum { H_PLAIN, H_SPLIT, H_OVERLAP };

/* The bytes that do not move: the nop before A's landing pad, padding in A. */
static int
h_hole(uint64_t x)
{
    return x == H_CODE || (x >= H_CODE + 0x30 && x < H_CODE + 0x38);
}

/* The new address of the moved byte at X (or of the next one when X is a hole). */
static uint64_t
h_new(int kind, uint64_t x)
{
    uint64_t rank = 0;
    for (uint64_t y = H_CODE; y < x; y++)
        rank += !h_hole(y);
    uint64_t v = H_NEW + 3 * rank;
    if (kind == H_SPLIT && x >= H_CODE + 0x38 && x < H_CODE + 0x40)
        v += 0x1000;
    if (kind == H_OVERLAP && x >= H_CODE + 0x40)
        v -= 6;
    return v;
}

static uint64_t
h_map(void *arg, uint64_t x)
{
    if (x < H_CODE || x > H_END)
        return 0;
    return h_new(*(int *)arg, x);
}

static uint64_t
h_map_insn(void *arg, uint64_t x)
{
    return x >= H_END || h_hole(x) ? 0 : h_map(arg, x);
}

static uint64_t
h_map_end(void *arg, uint64_t x)
{
    if (x <= H_CODE || x > H_END || h_hole(x - 1))
        return 0;
    return h_new(*(int *)arg, x - 1) + 3;
}

static int
h_pieces(void *arg, uint64_t lo, uint64_t hi, ed_piece_fn fn, void *fnarg)
{
    for (uint64_t x = lo; x < hi;) {
        if (x < H_CODE || x >= H_END || h_hole(x)) {
            QP_CHECK(fn(fnarg, x, 1, 0, 1));
            x++;
            continue;
        }
        uint64_t e = x + 1;
        while (
            e < hi && e < H_END && !h_hole(e) && h_map_insn(arg, e) == h_map_end(arg, e))
            e++;
        QP_CHECK(fn(fnarg, x, e - x, h_map(arg, x), h_map_end(arg, e) - h_map(arg, x)));
        x = e;
    }
    return 0;
}

/*
 * A "zPLR" CIE; FDE A over [H_CODE, +0x40) and FDE B over [H_CODE + 0x40, +0x40), both
 * with the same LSDA: call sites [fs+8, +8) with the landing pad fs+1, [fs+0x2c, +6)
 * (ending in A's padding) and [fs+0x34, +2) (all padding in A) without one. OFF gets the
 * offsets of A, B and the LSDA.
 */
static void
h_tables(sbuf_t *s, size_t *off)
{
    s->n = 0;
    size_t cie = s->n;
    s_u32(s, 0);
    S_BYTES(s, 0, 0, 0, 0, 1, 'z', 'P', 'L', 'R', 0, 1, 0x78, 0x10, 7, 0x9b);
    s_pcrel(s, SYN_VMA, SYN_SLOT);
    S_BYTES(s, 0x1b, 0x1b, 0x0c, 0x07, 0x08, 0x90, 0x01);
    s_pad(s, cie, 8);
    size_t field[2];
    for (int k = 0; k < 2; k++) {
        size_t f = off[k] = s->n;
        s_u32(s, 0);
        s_u32(s, (uint32_t)(s->n - cie));
        s_pcrel(s, SYN_VMA, H_CODE + 0x40u * (unsigned)k);
        s_u32(s, 0x40);
        S_BYTES(s, 4);
        field[k] = s->n;
        s_u32(s, 0);
        S_BYTES(s, 0x41, 0x0e, 0x10, 0x48, 0x0e, 0x08); /* adv 1; cfa 16; adv 8; cfa 8 */
        s_pad(s, f, 8);
    }
    s_u32(s, 0);
    while (s->n % 4)
        S_BYTES(s, 0);
    size_t lsda = off[2] = s->n;
    for (int k = 0; k < 2; k++)
        s_set32(s, field[k], (uint32_t)(lsda - field[k]));
    S_BYTES(s, 0xff, 0xff, 0x01, 12);   /* no LPStart, no types, uleb128 call sites */
    S_BYTES(s, 0x08, 0x08, 0x01, 0x00); /* [fs+8, +8) lp fs+1, cleanup */
    S_BYTES(s, 0x2c, 0x06, 0x00, 0x00); /* [fs+0x2c, +6) into the padding */
    S_BYTES(s, 0x34, 0x02, 0x00, 0x00); /* [fs+0x34, +2) padding only */
}

START_TEST(test_unwind_pad_at_new_start_gets_lpstart)
{
    sbuf_t s;
    size_t off[3];
    h_tables(&s, off);
    cfg_image_t *img = syn_image(&s);
    const uint64_t at = 0x900000;
    int kind = H_PLAIN;
    ed_unwind_map_t um = { h_map, h_map_end, h_map_insn, h_pieces, &kind };
    ed_unwind_out_t out;
    ck_assert_int_eq(ed_unwind_build_ex(img, &um, at, ED_UNWIND_STRICT, &out), 0);
    ck_assert_uint_eq(out.nfde_moved, 2);
    ck_assert_uint_eq(out.nfde_failed, 0);
    ck_assert_uint_eq(out.nlsda_moved, 2); /* one per FDE: offsets are fs-relative */
    t_layout(&out, at);
    view_t v = { { out.data, out.size, at }, img };
    tfde_t *news;
    ck_assert_uint_eq(t_fdes(&v, (mem_t) { out.data, out.eh_frame_size, at }, &news), 2);
    /* A: exactly its moved bytes, not the nop before them. */
    ck_assert_uint_eq(news[0].begin, h_new(kind, H_CODE + 1));
    ck_assert_uint_eq(news[0].begin, H_NEW);
    ck_assert_uint_eq(news[0].end, h_new(kind, H_CODE + 0x40));
    ck_assert_uint_eq(news[1].begin, news[0].end);
    ck_assert_uint_eq(news[1].end, h_new(kind, H_END - 1) + 3);
    ck_assert_uint_ne(news[0].lsda, news[1].lsda);

    /* A's landing pad is its new start: an explicit LPStart keeps its offset positive. */
    size_t avail;
    const uint8_t *l = view_ptr(&v, news[0].lsda, &avail);
    ck_assert_uint_eq(l[0], 0x1b);
    tcs_t cs[4];
    ck_assert_uint_eq(t_lsda(&v, news[0].lsda, news[0].begin, cs, 4), 3);
    ck_assert_uint_eq(cs[0].lp, H_NEW);
    ck_assert_uint_eq(cs[0].start, h_new(kind, H_CODE + 8));
    ck_assert_uint_eq(cs[0].end, h_new(kind, H_CODE + 0x10));
    /* Call sites ending in (or lying in) padding end where the moved code before it does.
     */
    ck_assert_uint_eq(cs[1].start, h_new(kind, H_CODE + 0x2c));
    ck_assert_uint_eq(cs[1].end, h_new(kind, H_CODE + 0x2f) + 3);
    ck_assert_uint_eq(cs[2].start, cs[2].end);
    ck_assert_uint_eq(cs[1].lp, 0);
    /* B's copy of the shared LSDA, for B's start: no LPStart needed. */
    l = view_ptr(&v, news[1].lsda, &avail);
    ck_assert_uint_eq(l[0], 0xff);
    ck_assert_uint_eq(t_lsda(&v, news[1].lsda, news[1].begin, cs, 4), 3);
    ck_assert_uint_eq(cs[0].lp, h_new(kind, H_CODE + 0x41));
    ck_assert_uint_eq(cs[0].start, h_new(kind, H_CODE + 0x48));
    free(news);
    free(out.data);
    cfg_image_destroy(img);
}
END_TEST

START_TEST(test_unwind_strict_split_and_overlap)
{
    sbuf_t s;
    size_t off[3];
    h_tables(&s, off);
    cfg_image_t *img = syn_image(&s);
    ed_unwind_out_t out;
    /* A's moved code in two places: no FDE can describe it. */
    int kind = H_SPLIT;
    ed_unwind_map_t um = { h_map, h_map_end, h_map_insn, h_pieces, &kind };
    ck_assert_int_eq(
        ed_unwind_build_ex(img, &um, 0x900000, ED_UNWIND_STRICT, &out), QP_ERANGE);
    ck_assert_ptr_null(out.data);
    ck_assert_uint_eq(out.fail_lo, H_CODE);
    ck_assert_uint_eq(out.fail_hi, H_CODE + 0x40);
    /* Without ED_UNWIND_STRICT it is only counted (and the moved code has no FDE). */
    ck_assert_int_eq(ed_unwind_build_ex(img, &um, 0x900000, 0, &out), 0);
    ck_assert_uint_eq(out.nfde_failed, 1);
    ck_assert_uint_eq(out.nfde_moved, 1);
    free(out.data);
    /* B's new code would start inside A's: the search table would pick B there. */
    kind = H_OVERLAP;
    ck_assert_int_eq(
        ed_unwind_build_ex(img, &um, 0x900000, ED_UNWIND_STRICT, &out), QP_ERANGE);
    ck_assert_uint_eq(out.fail_lo, H_CODE + 0x40);
    ck_assert_uint_eq(out.fail_hi, H_CODE + 0x80);
    /* A landing pad in padding is no relocated instruction. */
    kind = H_PLAIN;
    ed_unwind_map_t nopad = { h_map, h_map_end, h_map_insn, h_pieces, &kind };
    s.b[off[2] + 6] = 0x00; /* the first call site's landing pad becomes fs+0: the nop */
    cfg_image_destroy(img);
    img = syn_image(&s);
    ck_assert_int_eq(
        ed_unwind_build_ex(img, &nopad, 0x900000, ED_UNWIND_STRICT, &out), 0);
    free(out.data);         /* lp 0 is "no landing pad": nothing to map */
    s.b[off[2] + 6] = 0x31; /* fs+0x31: padding */
    cfg_image_destroy(img);
    img = syn_image(&s);
    ck_assert_int_eq(
        ed_unwind_build_ex(img, &nopad, 0x900000, ED_UNWIND_STRICT, &out), QP_ERANGE);
    ck_assert_uint_eq(out.fail_lo, H_CODE);
    cfg_image_destroy(img);
}
END_TEST

typedef struct fde_seen {
    ed_fde_info_t f[8];
    uint64_t pads[8][4];
    size_t n;
} fde_seen_t;

static int
fde_seen(void *arg, const ed_fde_info_t *fi)
{
    fde_seen_t *s = arg;
    ck_assert_uint_lt(s->n, 8);
    ck_assert_uint_le(fi->npads, 4);
    s->f[s->n] = *fi;
    if (fi->npads > 0)
        memcpy(s->pads[s->n], fi->pads, fi->npads * sizeof(uint64_t));
    s->n++;
    return 0;
}

START_TEST(test_unwind_fdes_say_what_cannot_move)
{
    sbuf_t s;
    size_t off[5];
    syn_tables(&s, off);
    cfg_image_t *img = syn_image(&s);
    fde_seen_t seen = { 0 };
    ck_assert_int_eq(ed_unwind_fdes(img, fde_seen, &seen), 0);
    ck_assert_uint_eq(seen.n, 4);
    ck_assert_uint_eq(seen.f[0].lo, SYN_CODE);
    ck_assert_uint_eq(seen.f[0].hi, SYN_CODE + 0x200);
    ck_assert_int_eq(seen.f[0].err, 0);
    ck_assert_uint_eq(seen.f[1].lo, SYN_CODE + 0x100); /* the unknown opcode */
    ck_assert_int_eq(seen.f[1].err, QP_EFORMAT);
    ck_assert_int_eq(seen.f[2].err, 0);
    ck_assert_int_eq(seen.f[3].err, 0);
    ck_assert_uint_eq(seen.f[3].npads, 2);
    ck_assert_uint_eq(seen.pads[3][0], SYN_CODE + 0x1c0 + 0x20);
    ck_assert_uint_eq(seen.pads[3][1], SYN_CODE + 0x1c0 + 0x30);
    /* A landing pad at the FDE's start is representable: an LPStart is made for it. */
    h_tables(&s, off);
    cfg_image_destroy(img);
    img = syn_image(&s);
    memset(&seen, 0, sizeof(seen));
    ck_assert_int_eq(ed_unwind_fdes(img, fde_seen, &seen), 0);
    ck_assert_uint_eq(seen.n, 2);
    ck_assert_int_eq(seen.f[0].err, 0);
    ck_assert_uint_eq(seen.pads[0][0], H_CODE + 1);
    ck_assert_uint_eq(seen.pads[1][0], H_CODE + 0x41);
    /* A CIE with a code alignment factor other than 1 cannot follow moved code. */
    s.b[14] = 4;
    cfg_image_destroy(img);
    img = syn_image(&s);
    memset(&seen, 0, sizeof(seen));
    ck_assert_int_eq(ed_unwind_fdes(img, fde_seen, &seen), 0);
    ck_assert_int_eq(seen.f[0].err, QP_EUNSUPP);
    cfg_image_destroy(img);
}
END_TEST

/*****************************************************************************
 * The plan's view: tests/progs/eh_asm.cc, hand-written FDEs over several procedures
 */

/* The reason procedure NAME stays in place (NULL: it moves). */
static const char *
left_reason(const cfg_prog_t *prog, const ed_plan_t *plan, const char *name)
{
    const cfg_proc_t *p = cfg_proc_by_name(prog, name);
    ck_assert_msg(p != NULL, "no procedure %s", name);
    return ed_plan_left_reason(plan, (uint32_t)(p - prog->procs));
}

static void
assert_reason(const char *why, const char *name, const char *want)
{
    ck_assert_msg(want == NULL ? why == NULL : why != NULL && strstr(why, want) != NULL,
        "%s: left in place because \"%s\", expected \"%s\"", name,
        why ? why : "(it moves)", want ? want : "(it moves)");
}

START_TEST(test_unwind_plan_fde_groups)
{
    const char *srcdir = getenv("top_srcdir");
    char exe[160], cmd[600];
    snprintf(exe, sizeof(exe), "%s/eh_asm", tmpdir);
    snprintf(cmd, sizeof(cmd),
        "command -v g++ >/dev/null 2>&1 && g++ -O2 -fPIE -pie -o %s "
        "%s/tests/progs/eh_asm.cc",
        exe, srcdir ? srcdir : ".");
    if (system(cmd) != 0)
        return; /* no g++: the corpus would not have it either */
    cfg_image_t *img = NULL;
    cfg_prog_t *prog = NULL;
    ed_plan_t *plan = NULL;
    ck_assert_int_eq(cfg_image_open_bfd(exe, &img), 0);
    ck_assert_int_eq(cfg_prog_build(img, NULL, &prog), 0);
    ck_assert_int_eq(ed_plan_create(prog, NULL, &plan), 0);
    /* Two procedures under one FDE that layout keeps together move together. */
    assert_reason(left_reason(prog, plan, "asm_pair_a"), "asm_pair_a", NULL);
    assert_reason(left_reason(prog, plan, "asm_pair_b"), "asm_pair_b", NULL);
    /* An FDE that starts in padding: the padding's procedure moves with the symbol's. */
    const cfg_proc_t *padded = cfg_proc_by_name(prog, "asm_padded");
    ck_assert_ptr_nonnull(padded);
    ck_assert_ptr_null(ed_plan_left_reason(plan, (uint32_t)(padded - prog->procs)));
    const cfg_proc_t *padding = cfg_proc_at(prog, padded->entry - 12);
    ck_assert_ptr_nonnull(padding);
    ck_assert_ptr_ne(padding, padded);
    ck_assert_ptr_null(ed_plan_left_reason(plan, (uint32_t)(padding - prog->procs)));
    /* One that cannot move keeps the other in place. */
    assert_reason(left_reason(prog, plan, "asm_mix_y"), "asm_mix_y", "middle of an instruction");
    /* glibc's jump over a lock prefix moves (to the locked instruction). */
    assert_reason(left_reason(prog, plan, "asm_lockskip"), "asm_lockskip", NULL);
    assert_reason(left_reason(prog, plan, "asm_mix_x"), "asm_mix_x",
        "shares its unwind entry with asm_mix_y");
    /* A fragment outside the FDE would be laid out between its two procedures. */
    assert_reason(left_reason(prog, plan, "asm_split_a"), "asm_split_a",
        "covers code of other procedures");
    assert_reason(left_reason(prog, plan, "asm_split_b"), "asm_split_b",
        "covers code of other procedures");
    /* The landing pad after a nop in a cold fragment moves, with an explicit LPStart. */
    assert_reason(left_reason(prog, plan, "asm_catch"), "asm_catch", NULL);
    const cfg_proc_t *cold = cfg_proc_by_name(prog, "asm_catch.cold");
    ck_assert_ptr_nonnull(cold);
    ck_assert_uint_ne(cold->flags & CFG_PROC_FRAGMENT, 0);

    ed_image_t *im = NULL;
    ck_assert_int_eq(ed_image_create(img, &im), 0);
    ck_assert_int_eq(ed_plan_apply(plan, &ed_image_ops, im), 0);
    ed_unwind_map_t um
        = { ed_plan_map, ed_plan_map_end, ed_plan_map_insn, ed_plan_pieces, plan };
    uint64_t at = blob_addr(img);
    ed_unwind_out_t out;
    ck_assert_int_eq(
        ed_unwind_build_ex(img, &um, at, ED_UNWIND_ALL | ED_UNWIND_STRICT, &out), 0);
    view_t v = { { out.data, out.size, at }, img };
    tfde_t *news;
    size_t nn = t_fdes(&v, (mem_t) { out.data, out.eh_frame_size, at }, &news);
    /* The new FDE of the fragment starts at its first moved instruction: the pad. */
    uint64_t pad = ed_plan_map(plan, cold->start); /* the nop does not move */
    ck_assert_uint_ne(pad, 0);
    ck_assert_uint_eq(ed_plan_map_insn(plan, cold->start), 0);
    size_t k = 0;
    while (k < nn && news[k].begin != pad)
        k++;
    ck_assert_msg(k < nn, "no new FDE starts at the landing pad %#" PRIx64, pad);
    ck_assert_uint_ne(news[k].lsda, 0);
    size_t avail;
    ck_assert_uint_eq(view_ptr(&v, news[k].lsda, &avail)[0], 0x1b);
    tcs_t cs[4];
    ck_assert_uint_eq(t_lsda(&v, news[k].lsda, news[k].begin, cs, 4), 1);
    ck_assert_uint_eq(cs[0].lp, pad);
    /* The pair's new FDE covers both procedures' new code, in one piece. */
    const cfg_proc_t *pa = cfg_proc_by_name(prog, "asm_pair_a");
    const cfg_proc_t *pb = cfg_proc_by_name(prog, "asm_pair_b");
    uint64_t na = ed_plan_map(plan, pa->entry), nb = ed_plan_map(plan, pb->entry);
    for (k = 0; k < nn && news[k].begin != na; k++)
        ;
    ck_assert_uint_lt(k, nn);
    ck_assert_uint_gt(nb, na);
    ck_assert_uint_gt(news[k].end, nb);
    free(news);
    free(out.data);
    ed_image_destroy(im);
    ed_plan_destroy(plan);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

/*****************************************************************************
 * Bad input: truncated and mutated tables (run under ASan and UBSan)
 */

static int
fde_any(void *arg, const ed_fde_info_t *fi)
{
    ck_assert_uint_le(fi->lo, fi->hi);
    ck_assert(fi->npads == 0 || fi->pads != NULL);
    (*(size_t *)arg)++;
    return 0;
}

/* The FDEs' walk with the landing pads (the plan's one read) says what
 * ed_unwind_landing_pads says of IMG: the same pads in the same order, the same answer
 * (unless the tables could not be read at all). Returns the walk's answer. */
static int
pads_as_alone(const cfg_image_t *img)
{
    pads_t alone = { NULL, 0, 0 }, with = { NULL, 0, 0 };
    int rc = ed_unwind_landing_pads(img, pad_add, &alone);
    size_t nfde = 0;
    int pads_rc = 2;
    int frc = ed_unwind_fdes_pads(img, fde_any, &nfde, pad_add, &with, &pads_rc);
    ck_assert_int_eq(pads_rc, frc < 0 ? frc : rc);
    ck_assert_uint_eq(with.n, alone.n);
    if (alone.n > 0)
        ck_assert_mem_eq(with.v, alone.v, alone.n * sizeof(uint64_t));
    free(alone.v);
    free(with.v);
    return frc;
}

/* Whatever the bytes, the result is an error or a blob whose hdr is consistent; the
 * plan's scan of the same tables does not fail on them either (it reports them), and
 * finds the landing pads that a read of its own finds. */
static void
build_sane(const cfg_image_t *img, tmap_t *m, uint64_t at)
{
    int frc = pads_as_alone(img);
    ck_assert(frc == 0 || frc == QP_EFORMAT);
    ed_unwind_out_t out;
    int rc = ed_unwind_build(img, tmap_fn, m, at, &out);
    if (rc < 0) {
        ck_assert_ptr_null(out.data);
        return;
    }
    if (out.size > 0) {
        t_layout(&out, at);
        ck_assert_uint_eq(out.hdr % 4, 0);
        ck_assert_uint_eq((out.hdr_size - 12) % 8, 0);
    }
    free(out.data);
}

static uint32_t
lcg(uint64_t *st)
{
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*st >> 33);
}

START_TEST(test_unwind_truncated_tables)
{
    tmap_t m;
    cfg_image_t *img = open_prog(0, &m, MAP_SHIFT);
    cfg_section_t *eh = (cfg_section_t *)section(img, ".eh_frame");
    const uint8_t *orig = eh->bytes;
    uint64_t size = eh->size, at = blob_addr(img);
    for (uint64_t n = 1; n < size; n += (n < 64 ? 1 : 7)) {
        uint8_t *copy = malloc(n); /* exactly n bytes: ASan sees any overread */
        memcpy(copy, orig, n);
        eh->bytes = copy;
        eh->size = n;
        build_sane(img, &m, at);
        free(copy);
    }
    eh->bytes = orig;
    eh->size = size;
    cfg_image_destroy(img);
}
END_TEST

START_TEST(test_unwind_mutated_tables)
{
    const char *names[] = { ".eh_frame", ".gcc_except_table" };
    uint64_t st = 0x5eed + (uint64_t)_i;
    for (int p = 0; p < nbuilt; p++) {
        tmap_t m;
        cfg_image_t *img = open_prog(p, &m, _i ? MAP_SPREAD : MAP_SHIFT);
        uint64_t at = blob_addr(img);
        for (int w = 0; w < 2; w++) {
            cfg_section_t *sec = (cfg_section_t *)section(img, names[w]);
            if (sec == NULL)
                continue;
            const uint8_t *orig = sec->bytes;
            size_t n = (size_t)sec->size;
            uint8_t *copy = malloc(n);
            for (int it = 0; it < 150; it++) {
                memcpy(copy, orig, n);
                int flips = 1 + (int)(lcg(&st) % 4);
                for (int k = 0; k < flips; k++) {
                    size_t at_byte = lcg(&st) % n;
                    uint32_t r = lcg(&st);
                    if (r & 1)
                        copy[at_byte] = (uint8_t)(r >> 8);
                    else
                        copy[at_byte] ^= (uint8_t)(1u << (r >> 8) % 8);
                }
                sec->bytes = copy;
                build_sane(img, &m, at);
            }
            sec->bytes = orig;
            free(copy);
        }
        cfg_image_destroy(img);
    }
}
END_TEST

START_TEST(test_unwind_mutated_synthetic)
{
    sbuf_t s;
    size_t off[5];
    syn_tables(&s, off);
    uint64_t st = 42;
    for (int it = 0; it < 3000; it++) {
        sbuf_t c = s;
        int flips = 1 + (int)(lcg(&st) % 3);
        for (int k = 0; k < flips; k++)
            c.b[lcg(&st) % c.n] = (uint8_t)lcg(&st);
        cfg_image_t *img = syn_image(&c);
        ed_unwind_out_t out;
        int frc = pads_as_alone(img);
        ck_assert(frc == 0 || frc == QP_EFORMAT);
        int rc = ed_unwind_build(img, syn_map, NULL, 0x900000, &out);
        if (rc == 0 && out.size) {
            t_layout(&out, 0x900000);
            free(out.data);
        }
        ck_assert_int_le(rc, 0);
        cfg_image_destroy(img);
    }
}
END_TEST

/*****************************************************************************
 * The suite
 */

static Suite *
unwind_suite(void)
{
    Suite *s = suite_create("unwind");
    TCase *tc = tcase_create("programs");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_unwind_shift_keeps_rows, 0, nprogs ? nprogs : 1);
    tcase_add_loop_test(tc, test_unwind_spread_maps_every_location, 0, nprogs);
    tcase_add_loop_test(tc, test_unwind_hdr_mixes_old_and_new, 0, nprogs);
    tcase_add_loop_test(tc, test_unwind_libgcc_finds_new_fdes, 0, nbuilt);
    tcase_add_loop_test(tc, test_unwind_landing_pads_listed, 0, nprogs);
    tcase_add_loop_test(tc, test_unwind_size_independent_of_address, 0, nprogs);
    tcase_add_loop_test(tc, test_unwind_builds_from_one_read, 0, nprogs);
    tcase_add_loop_test(tc, test_unwind_all_copies_every_fde, 0, nprogs);
    if (nprogs)
        tcase_add_test(tc, test_unwind_hole_takes_next_location);
    suite_add_tcase(s, tc);

    tc = tcase_create("synthetic");
    tcase_add_test(tc, test_unwind_every_opcode_exact_bytes);
    tcase_add_test(tc, test_unwind_end_without_mapping);
    tcase_add_test(tc, test_unwind_unrelocated_landing_pad_fails);
    tcase_add_test(tc, test_unwind_no_ehframe_is_empty);
    tcase_add_test(tc, test_unwind_pad_at_new_start_gets_lpstart);
    tcase_add_test(tc, test_unwind_strict_split_and_overlap);
    tcase_add_test(tc, test_unwind_fdes_say_what_cannot_move);
    tcase_add_test(tc, test_unwind_plan_fde_groups);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad_input");
    tcase_set_timeout(tc, 300);
    if (nprogs)
        tcase_add_test(tc, test_unwind_truncated_tables);
    tcase_add_loop_test(tc, test_unwind_mutated_tables, 0, 2);
    tcase_add_test(tc, test_unwind_mutated_synthetic);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_unwind.XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        return 99;
    build_progs();
    SRunner *sr = srunner_create(unwind_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        failed++;
    return failed ? 1 : 0;
}
