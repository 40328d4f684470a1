/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * cfg/ end to end: CFGs of hand-assembled code, and of tests/known/known.c compiled at
 * test time by every C compiler present (gcc, clang) at -O0 and -O2, PIE and non-PIE,
 * whose functions have a known shape.
 */
#include <check.h>
#include <dirent.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check_fds.h"
#include "cfg/cfg.h"
#include "cfg/cfg_priv.h"

static const cfg_edge_t *
find_edge(const cfg_prog_t *prog, const cfg_block_t *b, int kind)
{
    for (uint32_t i = 0; i < b->nsucc; i++)
        if (cfg_block_succ(prog, b, i)->kind == kind)
            return cfg_block_succ(prog, b, i);
    return NULL;
}

static cfg_prog_t *
build_bytes(const uint8_t *code, size_t n, cfg_image_t **img)
{
    ck_assert_int_eq(cfg_image_from_bytes(code, n, 0x1000, img), 0);
    cfg_prog_t *prog = NULL;
    ck_assert_int_eq(cfg_prog_build(*img, NULL, &prog), 0);
    return prog;
}

/*****************************************************************************
 * Hand-assembled code
 */

START_TEST(test_cfg_loop_blocks)
{
    /* xor eax,eax; L: inc eax; cmp eax,10; jne L; ret */
    static const uint8_t code[] = { 0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x0a, 0x75, 0xf9, 0xc3 };
    cfg_image_t *img;
    cfg_prog_t *prog = build_bytes(code, sizeof(code), &img);
    ck_assert_uint_eq(prog->nprocs, 1);
    const cfg_proc_t *p = &prog->procs[0];
    ck_assert_ptr_null(p->unsafe);
    ck_assert_uint_eq(p->nblocks, 3);
    ck_assert_uint_eq(p->nloops, 1);
    const cfg_block_t *entry = &prog->blocks[p->block];
    ck_assert_uint_eq(entry->start, 0x1000);
    ck_assert_ptr_nonnull(find_edge(prog, entry, CFG_EDGE_FALL));
    uint32_t body = cfg_block_at(prog, 0x1002);
    ck_assert_uint_ne(body, CFG_NONE);
    ck_assert_uint_eq(prog->blocks[body].loop_depth, 1);
    ck_assert(prog->blocks[body].is_loop_head);
    const cfg_edge_t *back = find_edge(prog, &prog->blocks[body], CFG_EDGE_TAKEN);
    ck_assert_ptr_nonnull(back);
    ck_assert_uint_eq(back->to, body);
    uint32_t tail = cfg_block_at(prog, 0x1009);
    ck_assert_ptr_nonnull(find_edge(prog, &prog->blocks[tail], CFG_EDGE_RETURN));
    ck_assert_uint_eq(prog->blocks[tail].loop_depth, 0);
    ck_assert_uint_eq(prog->stats.block_bytes, sizeof(code));
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

/* cfg_block_at by its buckets of 256 bytes (cfg_build.c index_blocks): every address of
 * blocks that span several buckets, and around them, finds what a scan of the blocks
 * finds. */
START_TEST(test_cfg_block_at_buckets)
{
    /* xor eax,eax; L: mov eax,eax x 300; inc eax; cmp eax,10; jne L (rel32);
     * mov eax,eax x 200; ret */
    uint8_t code[2 + 600 + 2 + 3 + 6 + 400 + 1], *c = code;
    *c++ = 0x31, *c++ = 0xc0;
    for (int i = 0; i < 300; i++)
        *c++ = 0x89, *c++ = 0xc0;
    *c++ = 0xff, *c++ = 0xc0, *c++ = 0x83, *c++ = 0xf8, *c++ = 0x0a;
    int32_t rel = 0x1002 - (int32_t)(0x1000 + (c - code) + 6);
    *c++ = 0x0f, *c++ = 0x85;
    memcpy(c, &rel, 4);
    c += 4;
    for (int i = 0; i < 200; i++)
        *c++ = 0x89, *c++ = 0xc0;
    *c++ = 0xc3;
    ck_assert_uint_eq((size_t)(c - code), sizeof(code));
    cfg_image_t *img;
    cfg_prog_t *prog = build_bytes(code, sizeof(code), &img);
    ck_assert_uint_eq(prog->nblocks, 3);
    for (uint64_t a = 0xf00; a < 0x1000 + sizeof(code) + 0x300; a++) {
        uint32_t want = CFG_NONE;
        for (uint32_t k = 0; k < prog->nblocks; k++)
            if (prog->blocks[k].start <= a && a < prog->blocks[k].end)
                want = k;
        ck_assert_uint_eq(cfg_block_at(prog, a), want);
    }
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

/* The loop nesting forest (cfg_loop_forest) of two nested loops: the outer one with two
 * back edges, the inner one a block that loops to itself. */
START_TEST(test_cfg_loop_forest)
{
    static const uint8_t code[] = {
        0x31, 0xc9,       /* 1000: xor ecx,ecx */
        0x31, 0xd2,       /* 1002: O: xor edx,edx */
        0xff, 0xc2,       /* 1004: I: inc edx */
        0x83, 0xfa, 0x05, /* 1006: cmp edx,5 */
        0x75, 0xf9,       /* 1009: jne I */
        0xff, 0xc1,       /* 100b: inc ecx */
        0xf6, 0xc1, 0x01, /* 100d: test cl,1 */
        0x74, 0xf0,       /* 1010: je O */
        0x83, 0xf9, 0x0a, /* 1012: cmp ecx,10 */
        0x75, 0xeb,       /* 1015: jne O */
        0xc3,             /* 1017: ret */
    };
    cfg_image_t *img;
    cfg_prog_t *prog = build_bytes(code, sizeof(code), &img);
    ck_assert_uint_eq(prog->nprocs, 1);
    const cfg_proc_t *p = &prog->procs[0];
    cfg_loop_forest_t *f = NULL;
    ck_assert_int_eq(cfg_loop_forest(prog, 0, &f), 0);
    ck_assert_uint_eq(f->nloops, p->nloops);
    ck_assert_uint_eq(f->nloops, 2);
    ck_assert(!f->irreducible);
    uint32_t outer = cfg_block_at(prog, 0x1002), inner = cfg_block_at(prog, 0x1004);
    uint32_t mid = cfg_block_at(prog, 0x100b), tail = cfg_block_at(prog, 0x1012);
    uint32_t ret = cfg_block_at(prog, 0x1017);
    ck_assert_uint_eq(f->loops[0].header, outer); /* the enclosing loop first */
    ck_assert_uint_eq(f->loops[0].parent, CFG_NONE);
    ck_assert_uint_eq(f->loops[0].depth, 1);
    ck_assert_uint_eq(f->loops[0].nblocks, 4);
    ck_assert_uint_eq(f->loops[0].nback, 2);
    ck_assert_uint_eq(f->loops[1].header, inner);
    ck_assert_uint_eq(f->loops[1].parent, 0);
    ck_assert_uint_eq(f->loops[1].depth, 2);
    ck_assert_uint_eq(f->loops[1].nblocks, 1);
    ck_assert_uint_eq(f->loops[1].nback, 1);
    ck_assert_uint_eq(f->nback_edges, 3);
    for (uint32_t k = 0; k < 2; k++) {
        const cfg_edge_t *e = &prog->edges[f->back_edges[f->loops[0].back + k]];
        ck_assert(e->to == outer && (e->from == mid || e->from == tail));
    }
    const cfg_edge_t *self = &prog->edges[f->back_edges[f->loops[1].back]];
    ck_assert(self->from == inner && self->to == inner);
    uint32_t b0 = p->block;
    ck_assert_uint_eq(f->inner[inner - b0], 1);
    ck_assert_uint_eq(f->inner[mid - b0], 0);
    ck_assert_uint_eq(f->inner[ret - b0], CFG_NONE);
    ck_assert(cfg_loop_contains(f, 0, inner - b0) && cfg_loop_contains(f, 0, tail - b0));
    ck_assert(!cfg_loop_contains(f, 1, outer - b0) && !cfg_loop_contains(f, 0, ret - b0));
    ck_assert(!cfg_loop_contains(f, 2, inner - b0) && !cfg_loop_contains(f, 0, p->nblocks));
    for (uint32_t k = 0; k < p->nblocks; k++)
        ck_assert(f->reachable[k]);
    /* The build's own per-block figures agree. */
    ck_assert_uint_eq(prog->blocks[inner].loop_depth, 2);
    ck_assert_uint_eq(prog->blocks[tail].loop_depth, 1);
    ck_assert_uint_eq(prog->blocks[inner].idom, outer);
    cfg_loop_forest_destroy(f);
    ck_assert_int_eq(cfg_loop_forest(prog, 1, &f), QP_EINVAL);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

START_TEST(test_cfg_overlap_is_unsafe)
{
    /* je +3 (into the mov); mov eax,0xc3c3c3c3; ret */
    static const uint8_t code[] = { 0x74, 0x03, 0xb8, 0xc3, 0xc3, 0xc3, 0xc3, 0xc3 };
    cfg_image_t *img;
    cfg_prog_t *prog = build_bytes(code, sizeof(code), &img);
    ck_assert_uint_ge(prog->nprocs, 1);
    ck_assert_ptr_nonnull(prog->procs[0].unsafe);
    ck_assert_uint_eq(prog->stats.nunsafe, 1);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

START_TEST(test_cfg_invalid_is_unsafe)
{
    /* test edi,edi; je +1; ret; then 0x06 (invalid in 64-bit mode) */
    static const uint8_t code[] = { 0x85, 0xff, 0x74, 0x01, 0xc3, 0x06 };
    cfg_image_t *img;
    cfg_prog_t *prog = build_bytes(code, sizeof(code), &img);
    ck_assert_ptr_nonnull(prog->procs[0].unsafe);
    ck_assert_ptr_nonnull(strstr(prog->procs[0].unsafe, "invalid instruction"));
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

START_TEST(test_cfg_padding_not_code)
{
    /* ret; 15 bytes of multi-byte nop and int3 padding */
    static const uint8_t code[] = { 0xc3, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00,
                                    0x00, 0x00, 0x0f, 0x1f, 0x00, 0xcc, 0xcc };
    cfg_image_t *img;
    cfg_prog_t *prog = build_bytes(code, sizeof(code), &img);
    ck_assert_uint_eq(prog->nprocs, 1);
    ck_assert_uint_eq(prog->stats.block_bytes, 1);
    ck_assert_uint_eq(prog->stats.padding_bytes, sizeof(code) - 1);
    ck_assert_uint_eq(prog->stats.data_bytes, 0);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

/*****************************************************************************
 * Compiled code of known shape
 */

static const char *const variants[][2] = {
    { "gcc", "-O0 -fPIE -pie" }, { "gcc", "-O2 -fPIE -pie" },   { "gcc", "-O2 -fno-pie -no-pie" },
    { "clang", "-O0 -fPIE -pie" }, { "clang", "-O2 -fPIE -pie" }, { "clang", "-O2 -fno-pie -no-pie" },
    { "gcc", "-O2 -static" },
};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

/* Compile known.c in variant I into a temporary file; NULL when the compiler is missing. */
static char *
compile_known(size_t i)
{
    const char *srcdir = getenv("top_srcdir");
    char cmd[1024], *out = malloc(64);
    snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", variants[i][0]);
    if (system(cmd) != 0) {
        free(out);
        return NULL;
    }
    snprintf(out, 64, "/tmp/qpt-known-%d-%zu", (int)getpid(), i);
    snprintf(cmd, sizeof(cmd), "%s %s -g -o %s %s/tests/known/known.c", variants[i][0],
             variants[i][1], out, srcdir ? srcdir : ".");
    ck_assert_msg(system(cmd) == 0, "compile failed: %s", cmd);
    return out;
}

static const cfg_proc_t *
proc(const cfg_prog_t *prog, const char *name, const char *variant)
{
    const cfg_proc_t *p = cfg_proc_by_name(prog, name);
    ck_assert_msg(p != NULL, "%s: no procedure %s", variant, name);
    ck_assert_msg(p->unsafe == NULL, "%s: %s unsafe: %s", variant, name, p->unsafe);
    return p;
}

static uint32_t
count_kind(const cfg_prog_t *prog, const cfg_proc_t *p, int kind)
{
    uint32_t n = 0;
    for (uint32_t k = p->block; k < p->block + p->nblocks; k++)
        for (uint32_t e = 0; e < prog->blocks[k].nsucc; e++)
            n += cfg_block_succ(prog, &prog->blocks[k], e)->kind == kind;
    return n;
}

static uint16_t
max_depth(const cfg_prog_t *prog, const cfg_proc_t *p)
{
    uint16_t d = 0;
    for (uint32_t k = p->block; k < p->block + p->nblocks; k++)
        if (prog->blocks[k].loop_depth > d)
            d = prog->blocks[k].loop_depth;
    return d;
}

START_TEST(test_cfg_known_shapes)
{
    char *path = compile_known((size_t)_i);
    if (path == NULL)
        return; /* compiler not installed */
    char variant[128];
    snprintf(variant, sizeof(variant), "%s %s", variants[_i][0], variants[_i][1]);
    cfg_image_t *img = NULL;
    ck_assert_int_eq(cfg_image_open_bfd(path, &img), 0);
    cfg_prog_t *prog = NULL;
    ck_assert_int_eq(cfg_prog_build(img, NULL, &prog), 0);

    const cfg_proc_t *p = proc(prog, "straight", variant);
    ck_assert_msg(p->nloops == 0 && count_kind(prog, p, CFG_EDGE_RETURN) == 1, "%s: straight",
                  variant);
    p = proc(prog, "count_loop", variant);
    ck_assert_msg(p->nloops == 1 && max_depth(prog, p) == 1, "%s: count_loop loops %u depth %u",
                  variant, p->nloops, max_depth(prog, p));
    p = proc(prog, "nested_loops", variant);
    ck_assert_msg(p->nloops == 2 && max_depth(prog, p) == 2, "%s: nested_loops loops %u depth %u",
                  variant, p->nloops, max_depth(prog, p));
    /* Every case label is a jump-table edge. */
    p = proc(prog, "sw10", variant);
    ck_assert_msg(p->ntables == 1, "%s: sw10 has %u tables", variant, p->ntables);
    ck_assert_msg(count_kind(prog, p, CFG_EDGE_TABLE) >= 10, "%s: sw10 has %u table edges",
                  variant, count_kind(prog, p, CFG_EDGE_TABLE));
    ck_assert_msg(count_kind(prog, p, CFG_EDGE_UNRESOLVED) == 0, "%s: sw10 unresolved", variant);
    /* Declared and proven noreturn procedures; the call to die() has no fall-through. */
    p = proc(prog, "die", variant);
    ck_assert_msg(p->flags & CFG_PROC_NORETURN, "%s: die returns?", variant);
    p = proc(prog, "die_quietly", variant);
    ck_assert_msg(p->flags & CFG_PROC_NORETURN, "%s: die_quietly returns?", variant);
    p = proc(prog, "check_positive", variant);
    ck_assert_msg(count_kind(prog, p, CFG_EDGE_NORETURN) + count_kind(prog, p, CFG_EDGE_TAILCALL) >= 1,
                  "%s: check_positive", variant);
    p = proc(prog, "main", variant);
    ck_assert_msg(!(p->flags & CFG_PROC_NORETURN), "%s: main noreturn?", variant);
    /* Complete coverage of the text, nothing unsafe. */
    const cfg_stats_t *st = &prog->stats;
    double cov = 100.0 * (double)(st->block_bytes + st->padding_bytes + st->dead_bytes)
        / (double)st->text_bytes;
    ck_assert_msg(cov >= 99.0, "%s: coverage %.2f%%", variant, cov);
    /* Static glibc skips lock prefixes when single-threaded (je 1f; lock; 1: cmpxchg):
     * those few procedures are unsafe, with that reason; nothing else is. */
    for (uint32_t i = 0; i < prog->nprocs; i++)
        ck_assert_msg(prog->procs[i].unsafe == NULL
                          || (strstr(variant, "-static") != NULL
                              && strstr(prog->procs[i].unsafe, "lock prefix") != NULL),
                      "%s: %s unsafe: %s", variant, prog->procs[i].name, prog->procs[i].unsafe);
    ck_assert_msg(st->nunsafe <= 8, "%s: %u unsafe procedures", variant, st->nunsafe);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
    unlink(path);
    free(path);
}
END_TEST

/* The init and fini arrays' functions are read through their relocations, found by a
 * binary search: right only once the relocations are sorted. lld with -z nocombreloc
 * writes them unsorted and leaves the arrays' words 0 in the file: the old code missed
 * the constructor there. ld -z nocombreloc writes them unsorted too but also writes the
 * words, and lld alone sorts them: those two links pass either way. */
static const char *const ctor_links[] = {
    "gcc -O2 -fPIE -pie -Wl,-z,nocombreloc",
    "clang -O2 -fPIE -pie -fuse-ld=lld",
    "clang -O2 -fPIE -pie -fuse-ld=lld -Wl,-z,nocombreloc",
};

static int
has_init_func(const cfg_image_t *img, const char *name)
{
    uint64_t addr = 0;
    for (size_t i = 0; i < img->nsymbols; i++)
        if (strcmp(img->symbols[i].name, name) == 0)
            addr = img->symbols[i].addr;
    ck_assert_msg(addr != 0, "no symbol %s", name);
    for (size_t i = 0; i < img->ninit_funcs; i++)
        if (img->init_funcs[i] == addr)
            return 1;
    return 0;
}

/* tests/known/ctor.c linked with LINK (a compiler and its options) into OUT (OUTLEN
 * bytes; TAG and I make it unique): 1, or 0 when LINK cannot link here (said on stderr). */
static int
link_ctor(const char *link, const char *tag, int i, char *out, size_t outlen)
{
    const char *srcdir = getenv("top_srcdir");
    char cmd[1024];
    /* A link of an empty program tells whether this compiler and linker are installed
     * (setup.sh installs both). */
    snprintf(cmd, sizeof(cmd),
             "echo 'int main(void) { return 0; }' | %s -x c - -o /dev/null >/dev/null 2>&1",
             link);
    if (system(cmd) != 0) {
        fprintf(stderr, "skipped: %s cannot link\n", link);
        return 0;
    }
    snprintf(out, outlen, "/tmp/qpt-%s-%d-%d", tag, (int)getpid(), i);
    snprintf(cmd, sizeof(cmd), "%s -o %s %s/tests/known/ctor.c", link, out,
             srcdir ? srcdir : ".");
    ck_assert_msg(system(cmd) == 0, "link failed: %s", cmd);
    return 1;
}

START_TEST(test_cfg_init_funcs_unsorted_relocs)
{
    char out[64];
    if (!link_ctor(ctor_links[_i], "ctor", _i, out, sizeof(out)))
        return;
    cfg_image_t *img = NULL;
    ck_assert_int_eq(cfg_image_open_bfd(out, &img), 0);
    ck_assert_msg(has_init_func(img, "known_ctor"), "%s: the constructor is not an init function",
                  ctor_links[_i]);
    ck_assert_msg(has_init_func(img, "known_dtor"), "%s: the destructor is not an init function",
                  ctor_links[_i]);
    for (size_t i = 1; i < img->ninit_funcs; i++)
        ck_assert(img->init_funcs[i - 1] <= img->init_funcs[i]);
    cfg_image_destroy(img);
    unlink(out);
}
END_TEST

/* CFG_OPEN_HUGE_PAGES changes only how the relocations' array is allocated (qp's report
 * asks for it, the rewriter does not): the same relocations either way, on a program with
 * more than 8 MB of them (chromium's 44 MB: base/qp_huge.h's threshold) when one is
 * installed, and on this test. */
START_TEST(test_cfg_huge_pages_same_relocs)
{
    const char *paths[] = { "/usr/lib/chromium/chromium", "/proc/self/exe" };
    for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
        if (access(paths[p], R_OK) != 0)
            continue;
        cfg_image_t *plain = NULL, *huge = NULL;
        ck_assert_int_eq(cfg_image_open_bfd_flags(paths[p], &plain, NULL, 0, 0), 0);
        ck_assert_int_eq(cfg_image_open_bfd_flags(paths[p], &huge, NULL, 0,
                                                  CFG_OPEN_HUGE_PAGES), 0);
        ck_assert_uint_eq(plain->nrelocs, huge->nrelocs);
        for (size_t i = 0; i < plain->nrelocs; i++) {
            const cfg_reloc_t *a = &plain->relocs[i], *b = &huge->relocs[i];
            ck_assert(a->where == b->where && a->value == b->value
                      && a->addend_at == b->addend_at && a->kind == b->kind
                      && (a->sym == NULL) == (b->sym == NULL)
                      && (a->sym == NULL || strcmp(a->sym, b->sym) == 0));
        }
        cfg_image_destroy(plain);
        cfg_image_destroy(huge);
    }
}
END_TEST

/* Every mapping of a file the image reads is known to cfg_mapped_at (a tool's SIGBUS
 * handler ends in one line when the file is truncated meanwhile): libdw's own mapping for
 * the DWARF types (cfg_arg_field) as well as the reader's. */
START_TEST(test_cfg_dwarf_mapping_known)
{
    char src[64], exe[64], cmd[256];
    snprintf(src, sizeof(src), "/tmp/qpt-dwmap-%d.c", (int)getpid());
    snprintf(exe, sizeof(exe), "/tmp/qpt-dwmap-%d", (int)getpid());
    FILE *f = fopen(src, "w");
    ck_assert_ptr_nonnull(f);
    fputs("struct s { long len; };\n"
          "__attribute__((noinline)) long get(struct s *p) { return p->len; }\n"
          "int main(void) { struct s v = { 3 }; return (int)get(&v) - 3; }\n", f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "gcc -g -O1 -o %s %s", exe, src);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
    cfg_image_t *img = NULL;
    ck_assert_int_eq(cfg_image_open_bfd(exe, &img), 0);
    const cfg_symbol_t *get = NULL;
    for (size_t i = 0; i < img->nsymbols && get == NULL; i++)
        if (strcmp(img->symbols[i].name, "get") == 0)
            get = &img->symbols[i];
    ck_assert_ptr_nonnull(get);
    cfg_field_t field;
    char why[256];
    ck_assert_int_eq(cfg_arg_field(img, get->addr, "get", 0, "->len", &field, why, sizeof(why)),
                     0);
    FILE *maps = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(maps);
    char line[1024];
    int nmaps = 0;
    while (fgets(line, sizeof(line), maps) != NULL) {
        unsigned long lo;
        char *path = strchr(line, '/');
        if (path == NULL || sscanf(line, "%lx-", &lo) != 1)
            continue;
        path[strcspn(path, "\n")] = '\0';
        if (strcmp(path, exe) != 0)
            continue;
        nmaps++;
        ck_assert_msg(cfg_mapped_at((const void *)lo) != NULL,
                      "the mapping of %s at %#lx is unknown to cfg_mapped_at", exe, lo);
    }
    fclose(maps);
    ck_assert_int_ge(nmaps, 2); /* the reader's and libdw's */
    cfg_image_destroy(img);
    ck_assert_ptr_null(cfg_mapped_at((const void *)get)); /* (not a mapping) */
    unlink(exe);
    unlink(src);
}
END_TEST

START_TEST(test_cfg_lookups)
{
    char *path = compile_known(1);
    if (path == NULL)
        return;
    cfg_image_t *img = NULL;
    cfg_prog_t *prog = NULL;
    ck_assert_int_eq(cfg_image_open_bfd(path, &img), 0);
    ck_assert_int_eq(cfg_prog_build(img, NULL, &prog), 0);
    const cfg_proc_t *p = cfg_proc_by_name(prog, "sw10");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_eq(cfg_proc_at(prog, p->entry), p);
    uint32_t b = cfg_block_at(prog, p->entry);
    ck_assert_uint_eq(b, p->block);
    ck_assert_ptr_null(cfg_proc_by_name(prog, "no_such_function"));
    ck_assert_uint_eq(cfg_block_at(prog, 0), CFG_NONE);
    /* cfg_interior_entries: one sorted answer per program, lent, not copied. */
    const uint64_t *xt, *xt2;
    size_t nxt, nxt2;
    ck_assert_int_eq(cfg_interior_entries(prog, &xt, &nxt), 0);
    ck_assert_int_eq(cfg_interior_entries(prog, &xt2, &nxt2), 0);
    ck_assert_ptr_eq(xt, xt2);
    ck_assert_uint_eq(nxt, nxt2);
    for (size_t i = 1; i < nxt; i++)
        ck_assert_uint_lt(xt[i - 1], xt[i]);
    ck_assert_int_eq(cfg_interior_entries(NULL, &xt, &nxt), QP_EINVAL);
    ck_assert_int_eq(cfg_interior_entries(prog, NULL, &nxt), QP_EINVAL);
    /* cfg_held_addrs_view: the same answer as cfg_held_addrs' copy, lent. */
    const cfg_held_t *hv, *hv2;
    cfg_held_t *hc;
    size_t nhv, nhv2, nhc;
    ck_assert_int_eq(cfg_held_addrs_view(prog, &hv, &nhv), 0);
    ck_assert_int_eq(cfg_held_addrs_view(prog, &hv2, &nhv2), 0);
    ck_assert_ptr_eq(hv, hv2);
    ck_assert_uint_eq(nhv, nhv2);
    ck_assert_uint_gt(nhv, 0);
    ck_assert_int_eq(cfg_held_addrs(prog, &hc, &nhc), 0);
    ck_assert_uint_eq(nhc, nhv);
    ck_assert(hc != hv && memcmp(hc, hv, nhv * sizeof(*hv)) == 0);
    free(hc);
    ck_assert_int_eq(cfg_held_addrs_view(NULL, &hv, &nhv), QP_EINVAL);
    ck_assert_int_eq(cfg_held_addrs_view(prog, NULL, &nhv), QP_EINVAL);
    ck_assert(img->flags & CFG_IMG_PIE);
    ck_assert(img->flags & CFG_IMG_SYMTAB);
    ck_assert_uint_gt(img->build_id_len, 0);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
    unlink(path);
    free(path);
}
END_TEST

/* PATH opened twice: *IMG with its CFG built (*PROG), *FRESH never analysed (what a
 * reading gives before the analysis touches the image). */
static void
open_built_and_fresh(const char *path, cfg_image_t **img, cfg_prog_t **prog,
                     cfg_image_t **fresh)
{
    ck_assert_int_eq(cfg_image_open_bfd(path, img), 0);
    ck_assert_int_eq(cfg_image_open_bfd(path, fresh), 0);
    ck_assert_int_eq(cfg_prog_build(*img, NULL, prog), 0);
}

/* cfg_image_release_file: the descriptor and the mapping let go; the loaded bytes the
 * same as a fresh reading's (copies), the names and a source file name given before
 * still there, source lines and unloaded sections no longer; twice is harmless. */
START_TEST(test_cfg_release_file)
{
    char *path = compile_known(1);
    if (path == NULL)
        return;
    cfg_image_t *img = NULL, *fresh = NULL;
    cfg_prog_t *prog = NULL;
    open_built_and_fresh(path, &img, &prog, &fresh);
    const cfg_proc_t *p = cfg_proc_by_name(prog, "sw10");
    ck_assert_ptr_nonnull(p);
    const char *file;
    unsigned line;
    ck_assert_int_eq(cfg_image_line(img, p->entry, &file, &line), 0);
    char *file_copy = strdup(file);
    size_t avail;
    const uint8_t *before = cfg_image_ptr(img, p->entry, &avail);
    ck_assert_ptr_nonnull(before);
    ck_assert_ptr_nonnull(cfg_mapped_at(before));
    ck_assert_ptr_nonnull(cfg_image_section_named(img, ".comment"));
    int fds = open_fds();
    ck_assert_int_eq(cfg_image_release_file(img), 0);
    ck_assert_int_eq(open_fds(), fds - 1);
    /* The mapping stays (no copy: a library's loaded size per load cycle), the bytes
     * where they were. */
    ck_assert_ptr_nonnull(cfg_mapped_at(before));
    ck_assert_ptr_eq(cfg_image_ptr(img, p->entry, &avail), before);
    for (size_t i = 0; i < img->nsections; i++) {
        const cfg_section_t *s = &img->sections[i], *f = &fresh->sections[i];
        ck_assert_str_eq(s->name, f->name);
        ck_assert(s->size == f->size && (s->bytes == NULL) == (f->bytes == NULL));
        ck_assert(s->bytes == NULL || s->size == 0 || memcmp(s->bytes, f->bytes, s->size) == 0);
    }
    ck_assert_ptr_nonnull(cfg_image_section_named(img, ".comment"));
    ck_assert_str_eq(file, file_copy);
    ck_assert_str_eq(p->name, "sw10");
    ck_assert_ptr_eq(cfg_proc_by_name(prog, "sw10"), p);
    arch_insn_t in;
    ck_assert_int_eq(cfg_image_decode(img, p->entry, 0, &in), 0);
    ck_assert_int_eq(cfg_image_line(img, p->entry, &file, &line), QP_ENOTFOUND);
    ck_assert_int_eq(cfg_image_release_file(img), 0);
    ck_assert_int_eq(cfg_image_release_file(NULL), 0);
    free(file_copy);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
    cfg_image_destroy(fresh);
    unlink(path);
    free(path);
}
END_TEST

/* cfg_held_addrs of a program that is not position independent, with a table of
 * function pointers bigger than a piece of the data scan (cfg_held.c: 64 KiB): every
 * word of it, once, in cmp_held's order (address, source, place), the same with 1 and 3
 * threads. */
START_TEST(test_cfg_held_data_pieces)
{
    const char *cc = "gcc";
    char cmd[1024], src[64], out[64];
    snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", cc);
    if (system(cmd) != 0)
        return;
    snprintf(src, sizeof(src), "/tmp/qpt-held-%d.c", (int)getpid());
    snprintf(out, sizeof(out), "/tmp/qpt-held-%d", (int)getpid());
    FILE *f = fopen(src, "w");
    ck_assert_ptr_nonnull(f);
    fputs("int f0(int x) { return x + 1; }\nint f1(int x) { return x * 3; }\n"
          "int f2(int x) { return x - 7; }\n#define T4(a, b, c, d) a, b, c, d\n"
          "#define T12 T4(f0, f1, f2, f0), T4(f1, f2, f0, f1), T4(f2, f0, f1, f2)\n"
          "#define T48 T12, T12, T12, T12\n#define T480 T48, T48, T48, T48, T48, T48, "
          "T48, T48, T48, T48\nint (*const tab[])(int) = { T480, T480, T480, T480, T480, "
          "T480, T480, T480, T480, T480, T480, T480, T480, T480, T480, T480, T480, T480, "
          "T480, T480, T480, T480, T480, T480, T480 };\n"
          "int main(int argc, char **argv) { (void)argv; return tab[argc](argc); }\n", f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "%s -O2 -fno-pie -no-pie -o %s %s", cc, out, src);
    ck_assert_msg(system(cmd) == 0, "compile failed: %s", cmd);
    const size_t ntab = 25 * 480; /* 96000 bytes: two pieces */
    const cfg_held_t *h[2];
    size_t nh[2];
    cfg_image_t *img[2];
    cfg_prog_t *prog[2];
    for (int t = 0; t < 2; t++) {
        cfg_opts_t o = { 0 };
        o.threads = t == 0 ? 1 : 3;
        ck_assert_int_eq(cfg_image_open_bfd(out, &img[t]), 0);
        ck_assert(!(img[t]->flags & CFG_IMG_PIE));
        ck_assert_int_eq(cfg_prog_build(img[t], &o, &prog[t]), 0);
        ck_assert_int_eq(cfg_held_addrs_view(prog[t], &h[t], &nh[t]), 0);
        uint64_t f0 = cfg_proc_by_name(prog[t], "f0")->entry;
        uint64_t f1 = cfg_proc_by_name(prog[t], "f1")->entry;
        uint64_t f2 = cfg_proc_by_name(prog[t], "f2")->entry;
        size_t words = 0;
        for (size_t i = 0; i < nh[t]; i++) {
            if (i > 0) { /* strictly after its predecessor in (addr, src, at) */
                const cfg_held_t *x = &h[t][i - 1], *y = &h[t][i];
                ck_assert(x->addr < y->addr
                          || (x->addr == y->addr
                              && (x->src < y->src || (x->src == y->src && x->at < y->at))));
            }
            words += h[t][i].src == CFG_HELD_DATA
                && (h[t][i].addr == f0 || h[t][i].addr == f1 || h[t][i].addr == f2);
        }
        ck_assert_uint_eq(words, ntab);
    }
    ck_assert_uint_eq(nh[0], nh[1]);
    for (size_t i = 0; i < nh[0]; i++) /* (field by field: the padding is no answer) */
        ck_assert(h[0][i].addr == h[1][i].addr && h[0][i].at == h[1][i].at
                  && h[0][i].src == h[1][i].src);
    for (int t = 0; t < 2; t++) {
        cfg_prog_destroy(prog[t]);
        cfg_image_destroy(img[t]);
    }
    unlink(out);
    unlink(src);
}
END_TEST

/* The two decodings of ADDR (limit LIMIT) agree: rc and every field. */
static void
same_decode(const cfg_image_t *a, const cfg_image_t *b, uint64_t addr, uint64_t limit)
{
    arch_insn_t x, y;
    memset(&x, 0, sizeof(x));
    memset(&y, 0, sizeof(y));
    int ra = cfg_image_decode(a, addr, limit, &x), rb = cfg_image_decode(b, addr, limit, &y);
    ck_assert_msg(ra == rb, "0x%llx: rc %d, frozen %d", (unsigned long long)addr, ra, rb);
    if (ra == 0)
        ck_assert_msg(x.addr == y.addr && x.target == y.target && x.len == y.len
                          && x.kind == y.kind && x.rel_off == y.rel_off
                          && x.rel_size == y.rel_size && x.flags == y.flags
                          && x.flags_read == y.flags_read && x.flags_written == y.flags_written,
                      "0x%llx: decoded differently once frozen", (unsigned long long)addr);
}

START_TEST(test_cfg_decode_frozen)
{
    /* The analysis freezes the decode cache (less memory, read only): what it kept, and
     * what it did not (every other byte offset), decodes as on an image never frozen,
     * also when a limit cuts an instruction short. */
    char *path = compile_known(1);
    if (path == NULL)
        return;
    cfg_image_t *img = NULL, *fresh = NULL;
    cfg_prog_t *prog = NULL;
    open_built_and_fresh(path, &img, &prog, &fresh);
    cfg_image_decode_freeze(img, 2); /* (again: nothing changes) */
    size_t ninsns = 0;
    for (uint32_t i = 0; i < prog->nblocks; i++) {
        const cfg_block_t *b = &prog->blocks[i];
        for (uint64_t a = b->start; a < b->end; ninsns++) {
            arch_insn_t in;
            ck_assert_int_eq(cfg_image_decode(img, a, 0, &in), 0);
            same_decode(fresh, img, a, 0);
            same_decode(fresh, img, a, a + in.len - 1);
            a += in.len;
        }
    }
    ck_assert_uint_gt(ninsns, 100);
    const cfg_section_t *text = cfg_image_section_named(img, ".text");
    ck_assert_ptr_nonnull(text);
    for (uint64_t a = text->vma; a < text->vma + text->size; a++)
        same_decode(fresh, img, a, 0);
    cfg_image_decode_done(img);
    same_decode(fresh, img, prog->procs[0].entry, 0);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
    cfg_image_destroy(fresh);
    unlink(path);
    free(path);
}
END_TEST

/* cfg_opts_t.on_note: count the builder's notes in ARG (an int). */
static void
count_note(void *arg, const char *line)
{
    (*(int *)arg)++;
    fprintf(stderr, "check_cfg: %s\n", line);
}

START_TEST(test_cfg_kept_runs_checked)
{
    /* The gap sweeps keep the runs of blocks from one sweep to the next, taking again
     * only where procedures changed (cfg_build.c's collect_spans): on real programs,
     * every sweep's kept runs are those of a walk of every procedure, on one thread and
     * on three. */
    const char *paths[] = { "/usr/bin/bash", "/usr/bin/python3.11",
                            "/usr/lib/gcc/x86_64-linux-gnu/12/cc1" };
    int built = 0;
    for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++) {
        cfg_image_t *img = NULL;
        if (access(paths[k], R_OK) != 0 || cfg_image_open_bfd(paths[k], &img) != 0)
            continue;
        for (unsigned threads = 1; threads <= 3; threads += 2) {
            cfg_opts_t o = { 0 };
            o.threads = threads;
            o.check_incremental = 1;
            o.on_note = count_note;
            int notes = 0;
            o.cb_arg = &notes;
            cfg_prog_t *prog = NULL;
            ck_assert_msg(cfg_prog_build(img, &o, &prog) == 0, "%s, %u threads: %d notes",
                          paths[k], threads, notes);
            ck_assert_int_eq(notes, 0);
            cfg_prog_destroy(prog);
            built++;
        }
        cfg_image_destroy(img);
    }
    ck_assert_msg(built > 0, "no real program to build (bash, python3.11, cc1)");
}
END_TEST

START_TEST(test_cfg_decode_frozen_pieces)
{
    /* Frozen on several threads, a section of several pieces (bash's .text: 256 KiB
     * each) keeps every instruction the cache took - each start of the serial decode
     * before the freeze, and no other - and decodes at every byte as an image never
     * frozen. */
    const char *path = "/usr/bin/bash";
    cfg_image_t *img = NULL, *fresh = NULL;
    if (access(path, R_OK) != 0 || cfg_image_open_bfd(path, &img) != 0)
        return;
    ck_assert_int_eq(cfg_image_open_bfd(path, &fresh), 0);
    const cfg_section_t *text = cfg_image_section_named(img, ".text");
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_gt(text->size, 2 << 18); /* three pieces or more */
    /* Every instruction of a linear sweep in the cache, and one at every 7th byte: the
     * starts decoded, a bit a byte. */
    uint8_t *decoded = calloc(text->size, 1);
    ck_assert_ptr_nonnull(decoded);
    for (uint64_t a = text->vma; a < text->vma + text->size;) {
        arch_insn_t in;
        int ok = cfg_image_decode(img, a, 0, &in) == 0;
        decoded[a - text->vma] |= ok;
        a += ok ? in.len : 1;
    }
    for (uint64_t a = text->vma; a < text->vma + text->size; a += 7) {
        arch_insn_t in;
        decoded[a - text->vma] |= cfg_image_decode(img, a, 0, &in) == 0;
    }
    size_t nstarts = 0, nkept = 0, last_piece = 0;
    for (uint64_t off = 0; off < text->size; off++) {
        ck_assert_int_eq(cfg_image_decode_kept(img, text->vma + off), decoded[off]);
        nstarts += decoded[off];
    }
    cfg_image_decode_freeze(img, 3);
    for (uint64_t off = 0; off < text->size; off++) {
        int kept = cfg_image_decode_kept(img, text->vma + off);
        ck_assert_msg(kept == decoded[off], "0x%llx: %s after the freeze",
                      (unsigned long long)(text->vma + off), kept ? "kept" : "not kept");
        nkept += kept;
        if (kept && off >= ((text->size - 1) & ~(uint64_t)((64 << 12) - 1)))
            last_piece++;
    }
    ck_assert_uint_eq(nkept, nstarts);
    ck_assert_uint_gt(nstarts, text->size / 8);
    ck_assert_uint_gt(last_piece, 0); /* the last, shorter piece too */
    for (uint64_t a = text->vma; a < text->vma + text->size; a++)
        same_decode(fresh, img, a, 0);
    free(decoded);
    cfg_image_destroy(img);
    cfg_image_destroy(fresh);
}
END_TEST

START_TEST(test_cfg_flatten_threads)
{
    /* The program's arrays, made per procedure on the pool (cfg_build.c's flatten, the
     * block order by address), are the same on three threads as on one: blocks, edges,
     * predecessors, procedures' ranges and the blocks by address. */
    const char *path = "/usr/bin/bash";
    cfg_image_t *img1 = NULL, *img3 = NULL;
    cfg_prog_t *p1 = NULL, *p3 = NULL;
    if (access(path, R_OK) != 0 || cfg_image_open_bfd(path, &img1) != 0)
        return;
    ck_assert_int_eq(cfg_image_open_bfd(path, &img3), 0);
    cfg_opts_t o1 = { 0 }, o3 = { 0 };
    o1.threads = 1;
    o3.threads = 3;
    ck_assert_int_eq(cfg_prog_build(img1, &o1, &p1), 0);
    ck_assert_int_eq(cfg_prog_build(img3, &o3, &p3), 0);
    ck_assert_uint_gt(p1->nprocs, 1000);
    ck_assert_uint_eq(p1->nprocs, p3->nprocs);
    ck_assert_uint_eq(p1->nblocks, p3->nblocks);
    ck_assert_uint_eq(p1->nedges, p3->nedges);
    ck_assert_uint_eq(p1->ntables, p3->ntables);
    for (uint32_t i = 0; i < p1->nprocs; i++)
        ck_assert(p1->procs[i].entry == p3->procs[i].entry
                  && p1->procs[i].block == p3->procs[i].block
                  && p1->procs[i].nblocks == p3->procs[i].nblocks
                  && p1->procs[i].parent == p3->procs[i].parent);
    for (uint32_t k = 0; k < p1->nblocks; k++) {
        const cfg_block_t *a = &p1->blocks[k], *b = &p3->blocks[k];
        ck_assert(a->start == b->start && a->end == b->end && a->proc == b->proc
                  && a->succ == b->succ && a->nsucc == b->nsucc && a->pred == b->pred
                  && a->npred == b->npred);
        for (uint32_t j = 0; j < a->npred; j++) {
            uint32_t e = p1->preds[a->pred + j];
            ck_assert_uint_eq(e, p3->preds[b->pred + j]);
            ck_assert_uint_eq(p1->edges[e].to, k);
            ck_assert(j == 0 || p1->preds[a->pred + j - 1] < e);
        }
    }
    for (uint32_t e = 0; e < p1->nedges; e++)
        ck_assert(p1->edges[e].from == p3->edges[e].from && p1->edges[e].to == p3->edges[e].to
                  && p1->edges[e].target == p3->edges[e].target
                  && p1->edges[e].kind == p3->edges[e].kind);
    size_t n1, n3;
    const uint32_t *by1 = cfg_blocks_by_addr(p1, &n1), *by3 = cfg_blocks_by_addr(p3, &n3);
    ck_assert_uint_eq(n1, n3);
    ck_assert(memcmp(by1, by3, n1 * sizeof(*by1)) == 0);
    for (size_t i = 1; i < n1; i++)
        ck_assert_uint_le(p1->blocks[by1[i - 1]].start, p1->blocks[by1[i]].start);
    cfg_prog_destroy(p1);
    cfg_prog_destroy(p3);
    cfg_image_destroy(img1);
    cfg_image_destroy(img3);
}
END_TEST

START_TEST(test_cfg_vec_trim)
{
    /* An array reserved for the worst case gives back what it did not take, keeping its
     * elements (and one spare); one already that small, or none, stays as it is. */
    uint32_t *v = NULL;
    size_t cap = 0;
    ck_assert_int_eq(cfg_vec_grow((void **)&v, &cap, 1000, sizeof(uint32_t)), 0);
    ck_assert_uint_ge(cap, 1000);
    for (uint32_t i = 0; i < 10; i++)
        v[i] = i * 7;
    cfg_vec_trim((void **)&v, &cap, 10, sizeof(uint32_t));
    ck_assert_uint_eq(cap, 11);
    for (uint32_t i = 0; i < 10; i++)
        ck_assert_uint_eq(v[i], i * 7);
    cfg_vec_trim((void **)&v, &cap, 10, sizeof(uint32_t));
    ck_assert_uint_eq(cap, 11);
    ck_assert_int_eq(cfg_vec_grow((void **)&v, &cap, 12, sizeof(uint32_t)), 0);
    ck_assert_uint_ge(cap, 12);
    ck_assert_uint_eq(v[9], 63);
    free(v);
    uint32_t *none = NULL;
    size_t nocap = 0;
    cfg_vec_trim((void **)&none, &nocap, 0, sizeof(uint32_t));
    ck_assert_ptr_null(none);
    ck_assert_uint_eq(nocap, 0);
}
END_TEST

/* What cfg_prog_build told its on_phase callback. */
typedef struct phases {
    char seen[32][16]; /* the phases, in order */
    size_t n;          /* how many */
    size_t nprocs;     /* procedures at the last one */
} phases_t;

static void
on_phase(void *arg, const char *phase, size_t nprocs)
{
    phases_t *ph = arg;
    if (ph->n < 32)
        snprintf(ph->seen[ph->n++], sizeof(ph->seen[0]), "%s", phase);
    ph->nprocs = nprocs;
}

START_TEST(test_cfg_phases_callback)
{
    /* cfg/ never prints: its phases go to the caller's callback (QP_DEBUG in the tools). */
    static const uint8_t code[] = { 0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x0a, 0x75, 0xf9, 0xc3 };
    phases_t ph = { 0 };
    cfg_opts_t o = { 0 };
    o.on_phase = on_phase;
    o.cb_arg = &ph;
    cfg_image_t *img;
    cfg_prog_t *prog = NULL;
    ck_assert_int_eq(cfg_image_from_bytes(code, sizeof(code), 0x1000, &img), 0);
    ck_assert_int_eq(cfg_prog_build(img, &o, &prog), 0);
    ck_assert_uint_ge(ph.n, 6);
    ck_assert_str_eq(ph.seen[0], "start");
    ck_assert_str_eq(ph.seen[1], "discovered");
    ck_assert_str_eq(ph.seen[ph.n - 1], "stats");
    ck_assert_uint_eq(ph.nprocs, prog->nprocs);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

/* The PLT forms of GNU ld and lld: lazy, -z now, IBT (.plt.sec), non-PIE, static (with
 * an .iplt and no dynamic symbols: no stubs named). */
static const char *const plt_links[] = {
    "gcc -O2",
    "gcc -O2 -no-pie",
    "gcc -O2 -Wl,-z,now",
    "gcc -O2 -fcf-protection -Wl,-z,ibtplt",
    "gcc -O2 -no-pie -fcf-protection -Wl,-z,ibtplt",
    "gcc -O2 -fcf-protection -Wl,-z,ibtplt,-z,now",
    "gcc -O2 -fno-plt",
    "gcc -O2 -static",
    "gcc -O2 -static-pie",
    "clang -O2 -fuse-ld=lld",
    "clang -O2 -fuse-ld=lld -Wl,-z,now",
    "clang -O2 -fuse-ld=lld -fcf-protection -Wl,-z,force-ibt",
    "clang -O2 -fuse-ld=lld -no-pie -fcf-protection -Wl,-z,force-ibt",
};

/* cfg_bfd_plt_check of PATH is 0 (the same symbols, ours and BFD's); the number of PLT
 * symbols. */
static unsigned long
plt_same_as_bfd(const char *path)
{
    char why[512] = "";
    int rc = cfg_bfd_plt_check(path, why, sizeof(why));
    ck_assert_msg(rc == 0, "%s: %d: %s", path, rc, why);
    return strtoul(why, NULL, 10);
}

START_TEST(test_cfg_plt_names_as_bfd_links)
{
    /* x86-64's PLT stubs are named by cfg_bfd.c, no longer by BFD's synthetic symbols:
     * the same names at the same addresses, for every form of PLT. */
    char out[64];
    if (!link_ctor(plt_links[_i], "plt", _i, out, sizeof(out)))
        return;
    unsigned long n = plt_same_as_bfd(out);
    ck_assert_msg(n > 0 || strstr(plt_links[_i], "-static") != NULL,
                  "%s: no PLT symbol (printf@plt)", plt_links[_i]);
    unlink(out);
}
END_TEST

START_TEST(test_cfg_plt_names_as_bfd_system)
{
    const char *paths[] = { "/usr/bin/ls", "/usr/bin/bash", "/usr/bin/python3.11",
                            "/usr/lib/gcc/x86_64-linux-gnu/12/cc1",
                            "/usr/lib/x86_64-linux-gnu/libc.so.6",
                            "/usr/lib/x86_64-linux-gnu/libstdc++.so.6" };
    unsigned long named = 0;
    for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++)
        if (access(paths[k], R_OK) == 0)
            named += plt_same_as_bfd(paths[k]);
    ck_assert_msg(named > 0, "no PLT symbol compared (ls, bash, python3.11, cc1, libc)");
}
END_TEST

START_TEST(test_cfg_symbol_relocs)
{
    /* qp's flat report opens its executable without the relative relocations: the
     * others are those of a full open, in the same order (bash: a PIE with thousands
     * of relative relocations besides its GOT slots' ones). */
    const char *path = "/usr/bin/bash";
    cfg_image_t *full = NULL, *lean = NULL;
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "skipped: no %s\n", path);
        return;
    }
    ck_assert_int_eq(cfg_image_open_bfd_analysis(path, &full, NULL, 0), 0);
    ck_assert_int_eq(cfg_image_open_bfd_flags(path, &lean, NULL, 0,
                                              CFG_OPEN_ANY_ISA | CFG_OPEN_SYMBOL_RELOCS), 0);
    size_t k = 0, relative = 0;
    for (size_t i = 0; i < full->nrelocs; i++) {
        const cfg_reloc_t *a = &full->relocs[i];
        if (a->kind == CFG_RELOC_RELATIVE) {
            relative++;
            continue;
        }
        ck_assert_uint_lt(k, lean->nrelocs);
        const cfg_reloc_t *b = &lean->relocs[k++];
        ck_assert(a->where == b->where && a->value == b->value && a->kind == b->kind
                  && a->addend_at == b->addend_at);
        ck_assert(a->sym == b->sym || (a->sym && b->sym && strcmp(a->sym, b->sym) == 0));
    }
    ck_assert_uint_eq(k, lean->nrelocs);
    ck_assert_uint_gt(relative, 1000);
    ck_assert_uint_gt(k, 100);
    ck_assert_uint_gt(full->ninit_funcs, 0);
    ck_assert_uint_eq(lean->ninit_funcs, 0);
    cfg_image_destroy(full);
    cfg_image_destroy(lean);
}
END_TEST

START_TEST(test_cfg_plt_left_to_bfd)
{
    /* A file whose dynamic relocations BFD reads otherwise than we do (ls with its
     * .rela.plt not allocated: BFD reads it, read_relocs does not) has its PLT stubs
     * named by BFD's synthetic symbols. */
    const char *path = "/usr/bin/ls";
    char out[64], why[512] = "";
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "skipped: no %s\n", path);
        return;
    }
    static uint8_t buf[1 << 22];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    ck_assert(n > sizeof(Elf64_Ehdr) && n < sizeof(buf));
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
    Elf64_Shdr *sh = (Elf64_Shdr *)(buf + eh->e_shoff);
    const char *names = (const char *)buf + sh[eh->e_shstrndx].sh_offset;
    int patched = 0;
    for (size_t i = 0; i < eh->e_shnum; i++)
        if (strcmp(names + sh[i].sh_name, ".rela.plt") == 0) {
            sh[i].sh_flags &= ~(uint64_t)SHF_ALLOC;
            patched = 1;
        }
    ck_assert(patched);
    snprintf(out, sizeof(out), "/tmp/qpt-pltbfd-%d", (int)getpid());
    f = fopen(out, "wb");
    ck_assert(f != NULL && fwrite(buf, 1, n, f) == n);
    fclose(f);
    ck_assert_int_eq(cfg_bfd_plt_check(out, why, sizeof(why)), 2);
    ck_assert_msg(strtoul(why, NULL, 10) > 50, "%s", why);
    unlink(out);
}
END_TEST

static Suite *
cfg_suite(void)
{
    Suite *s = suite_create("cfg");
    TCase *tc = tcase_create("bytes");
    tcase_add_test(tc, test_cfg_loop_blocks);
    tcase_add_test(tc, test_cfg_block_at_buckets);
    tcase_add_test(tc, test_cfg_loop_forest);
    tcase_add_test(tc, test_cfg_overlap_is_unsafe);
    tcase_add_test(tc, test_cfg_invalid_is_unsafe);
    tcase_add_test(tc, test_cfg_padding_not_code);
    tcase_add_test(tc, test_cfg_phases_callback);
    tcase_add_test(tc, test_cfg_vec_trim);
    suite_add_tcase(s, tc);
    tc = tcase_create("compiled");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_cfg_known_shapes, 0, (int)NVARIANTS);
    tcase_add_test(tc, test_cfg_lookups);
    tcase_add_test(tc, test_cfg_release_file);
    tcase_add_test(tc, test_cfg_held_data_pieces);
    tcase_add_loop_test(tc, test_cfg_init_funcs_unsorted_relocs, 0,
                        (int)(sizeof(ctor_links) / sizeof(ctor_links[0])));
    tcase_add_test(tc, test_cfg_decode_frozen);
    tcase_add_test(tc, test_cfg_decode_frozen_pieces);
    tcase_add_test(tc, test_cfg_kept_runs_checked);
    tcase_add_test(tc, test_cfg_flatten_threads);
    tcase_add_test(tc, test_cfg_huge_pages_same_relocs);
    tcase_add_test(tc, test_cfg_dwarf_mapping_known);
    tcase_add_loop_test(tc, test_cfg_plt_names_as_bfd_links, 0,
                        (int)(sizeof(plt_links) / sizeof(plt_links[0])));
    tcase_add_test(tc, test_cfg_plt_names_as_bfd_system);
    tcase_add_test(tc, test_cfg_plt_left_to_bfd);
    tcase_add_test(tc, test_cfg_symbol_relocs);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(cfg_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
