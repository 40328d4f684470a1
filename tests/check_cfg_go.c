/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Unit tests of what cfg/ knows of Go programs: the function table of .gopclntab
 * (cfg_gopcln.c) in its two layouts, hand-made, and refused when inconsistent, found
 * inside other data, its textStart from a relocation; the
 * runtime procedures whose calls return though their code does not, and the one that
 * never returns though its code may seem to (cfg_discover.c).
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "cfg/cfg_priv.h"

/*****************************************************************************
 * Hand-made tables: two functions, main.a at 0x401000 and runtime.mcall at 0x401040
 */

#define NAMES "main.a\0runtime.mcall" /* name offsets 0 and 7 */

static void
put(uint8_t *t, size_t off, uint64_t v, unsigned w)
{
    for (unsigned i = 0; i < w; i++)
        t[off + i] = (uint8_t)(v >> (8 * i));
}

/* Go 1.18 on (MAGIC 0xfffffff0 or 0xfffffff1): 32-bit offsets from textStart TEXT. */
static size_t
table_118(uint8_t *t, uint32_t magic, uint64_t text)
{
    memset(t, 0, 256);
    put(t, 0, magic, 4);
    t[6] = 1, t[7] = 8;
    put(t, 8, 2, 8);      /* nfunc */
    put(t, 24, text, 8);  /* textStart */
    put(t, 32, 72, 8);    /* funcnameOffset */
    put(t, 64, 96, 8);    /* pclnOffset */
    memcpy(t + 72, NAMES, sizeof(NAMES));
    put(t, 96, 0x00, 4), put(t, 100, 24, 4); /* (entry offset, _func offset) */
    put(t, 104, 0x40, 4), put(t, 108, 32, 4);
    put(t, 112, 0x80, 4);                    /* the end */
    put(t, 120, 0x00, 4), put(t, 124, 0, 4); /* _func: entry offset, name offset */
    put(t, 128, 0x40, 4), put(t, 132, 7, 4);
    return 136;
}

/* Go 1.16 and 1.17: 8-byte addresses, no textStart. */
static size_t
table_116(uint8_t *t)
{
    memset(t, 0, 256);
    put(t, 0, 0xfffffffa, 4);
    t[6] = 1, t[7] = 8;
    put(t, 8, 2, 8);     /* nfunc */
    put(t, 24, 64, 8);   /* funcnameOffset */
    put(t, 56, 88, 8);   /* pclnOffset */
    memcpy(t + 64, NAMES, sizeof(NAMES));
    put(t, 88, 0x401000, 8), put(t, 96, 48, 8);
    put(t, 104, 0x401040, 8), put(t, 112, 64, 8);
    put(t, 120, 0x401080, 8);
    put(t, 136, 0x401000, 8), put(t, 144, 0, 4);
    put(t, 152, 0x401040, 8), put(t, 160, 7, 4);
    return 168;
}

typedef struct got {
    int n;
    uint64_t entry[4];
    uint64_t end[4];
    char name[4][32];
} got_t;

static int
collect(void *arg, uint64_t entry, uint64_t end, const char *name)
{
    got_t *g = arg;
    if (g->n < 4) {
        g->entry[g->n] = entry;
        g->end[g->n] = end;
        strncpy(g->name[g->n], name, sizeof(g->name[0]) - 1);
    }
    g->n++;
    return 0;
}

static void
check_two(const got_t *g)
{
    ck_assert_int_eq(g->n, 2);
    ck_assert_uint_eq(g->entry[0], 0x401000);
    ck_assert_uint_eq(g->end[0], 0x401040);
    ck_assert_str_eq(g->name[0], "main.a");
    ck_assert_uint_eq(g->entry[1], 0x401040);
    ck_assert_uint_eq(g->end[1], 0x401080);
    ck_assert_str_eq(g->name[1], "runtime.mcall");
}

START_TEST(test_cfg_gopcln_118)
{
    uint8_t t[256];
    got_t g = { 0 };
    size_t n = table_118(t, 0xfffffff0, 0x401000);
    ck_assert_int_eq(cfg_gopcln_funcs(t, n, 0x555000, collect, &g), 0);
    check_two(&g);
    /* Go 1.20's magic; a PIE's textStart is 0 in the file (lld): its relocation's. */
    memset(&g, 0, sizeof(g));
    n = table_118(t, 0xfffffff1, 0);
    ck_assert_int_eq(cfg_gopcln_funcs(t, n, 0x401000, collect, &g), 0);
    check_two(&g);
    /* ... and without one, no name (not names counted from a guess). */
    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(cfg_gopcln_funcs(t, n, 0, collect, &g), 0);
    ck_assert_int_eq(g.n, 0);
}
END_TEST

/* A table inside .data.rel.ro (a cgo PIE's runtime.pclntab), after other data. */
START_TEST(test_cfg_gopcln_find)
{
    uint8_t buf[512];
    memset(buf, 0, sizeof(buf));
    put(buf, 8, 0xfffffff0, 4);  /* a magic alone, no header: passed over */
    put(buf, 40, 0xfffffff1, 4); /* a header, as far as the scan can tell */
    buf[47] = 8;
    size_t n = table_118(buf + 160, 0xfffffff1, 0);
    ck_assert_uint_eq(cfg_gopcln_find(buf, sizeof(buf), 0), 40);
    ck_assert_uint_eq(cfg_gopcln_find(buf, sizeof(buf), 41), 160);
    ck_assert_uint_eq(cfg_gopcln_find(buf, 160 + 71, 41), 160 + 71); /* cut short */
    ck_assert_uint_eq(cfg_gopcln_find(NULL, 16, 0), 16);
    got_t g = { 0 };
    ck_assert_int_eq(cfg_gopcln_funcs(buf + 160, n, 0x401000, collect, &g), 0);
    check_two(&g);
}
END_TEST

/* The textStart word's relocation: its addend (R_X86_64_RELATIVE), in any order. */
START_TEST(test_cfg_gopcln_text_loaded)
{
    cfg_reloc_t r[3] = {
        { .where = 0x5000, .value = 0x1234, .kind = CFG_RELOC_RELATIVE },
        { .where = 0x4018, .value = 0x3f920, .kind = CFG_RELOC_RELATIVE },
        { .where = 0x6018, .value = 0x777, .kind = CFG_RELOC_ABS64, .sym = "runtime.text" },
    };
    cfg_image_t img;
    memset(&img, 0, sizeof(img));
    img.relocs = r;
    img.nrelocs = 3;
    ck_assert_uint_eq(cfg_gopcln_text_loaded(&img, 0x4000), 0x3f920);
    ck_assert_uint_eq(cfg_gopcln_text_loaded(&img, 0x5000), 0); /* not the word's */
    ck_assert_uint_eq(cfg_gopcln_text_loaded(&img, 0x6000), 0); /* not RELATIVE */
    ck_assert_uint_eq(cfg_gopcln_text_loaded(NULL, 0x4000), 0);
}
END_TEST

START_TEST(test_cfg_gopcln_116)
{
    uint8_t t[256];
    got_t g = { 0 };
    size_t n = table_116(t);
    ck_assert_int_eq(cfg_gopcln_funcs(t, n, 0x555000, collect, &g), 0);
    check_two(&g);
}
END_TEST

START_TEST(test_cfg_gopcln_refused)
{
    uint8_t t[256];
    got_t g = { 0 };
    /* A _func that disagrees with the table: no name at all, not the first one. */
    size_t n = table_118(t, 0xfffffff0, 0x401000);
    put(t, 128, 0x44, 4);
    ck_assert_int_eq(cfg_gopcln_funcs(t, n, 0x401000, collect, &g), 0);
    ck_assert_int_eq(g.n, 0);
    /* A name without its NUL inside the table; a table cut short; another magic. */
    n = table_118(t, 0xfffffff0, 0x401000);
    ck_assert_int_eq(cfg_gopcln_funcs(t, 80, 0x401000, collect, &g), 0);
    put(t, 132, 200, 4);
    ck_assert_int_eq(cfg_gopcln_funcs(t, n, 0x401000, collect, &g), 0);
    n = table_118(t, 0xfffffffb, 0x401000); /* Go 1.2 to 1.15 */
    ck_assert_int_eq(cfg_gopcln_funcs(t, n, 0x401000, collect, &g), 0);
    ck_assert_int_eq(g.n, 0);
    ck_assert_int_eq(cfg_gopcln_funcs(NULL, 0, 0, collect, &g), QP_EINVAL);
}
END_TEST

/*****************************************************************************
 * Procedures whose calls return by their name
 */

START_TEST(test_cfg_go_resumed_names)
{
    ck_assert(cfg_name_is_resumed("runtime.mcall"));
    ck_assert(cfg_name_is_resumed("runtime.morestack"));
    ck_assert(cfg_name_is_resumed("runtime.morestack.abi0"));
    ck_assert(cfg_name_is_resumed("runtime.morestack_noctxt.abi0"));
    ck_assert(!cfg_name_is_resumed("runtime.morestackc"));
    ck_assert(!cfg_name_is_resumed("runtime.mcall.abi0x"));
    ck_assert(!cfg_name_is_resumed("runtime.gogo"));
    ck_assert(!cfg_name_is_resumed(".abi0"));
    ck_assert(!cfg_name_is_resumed(NULL));
}
END_TEST

/* A panic never returns to its caller: recovered, it resumes the frame that deferred
 * the recovery, at its deferreturn call. */
START_TEST(test_cfg_go_gopanic_noreturn)
{
    ck_assert(cfg_name_is_noreturn("runtime.gopanic"));
    ck_assert(!cfg_name_is_noreturn("runtime.gopanicx"));
    ck_assert(!cfg_name_is_noreturn("runtime.gorecover"));
    ck_assert(!cfg_name_is_noreturn("runtime.deferreturn"));
}
END_TEST

static Suite *
cfg_go_suite(void)
{
    Suite *s = suite_create("cfg_go");
    TCase *tc = tcase_create("gopclntab");
    tcase_add_test(tc, test_cfg_gopcln_118);
    tcase_add_test(tc, test_cfg_gopcln_116);
    tcase_add_test(tc, test_cfg_gopcln_refused);
    tcase_add_test(tc, test_cfg_gopcln_find);
    tcase_add_test(tc, test_cfg_gopcln_text_loaded);
    suite_add_tcase(s, tc);
    tc = tcase_create("resumed");
    tcase_add_test(tc, test_cfg_go_resumed_names);
    tcase_add_test(tc, test_cfg_go_gopanic_noreturn);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(cfg_go_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
