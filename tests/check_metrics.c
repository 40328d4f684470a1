/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The metric language: syntax errors with line, column and caret; names checked against
 * the program before anything is inserted; ground truth on tests/qpt/metric_prog (see
 * its comment for the counts) in a rewritten file and in a live process: counts, inside
 * (with recursion and a longjmp out), where on arguments and program variables, per
 * thread, total, timers; the layout saved and read back.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "include/qpt/qpt_metrics.h"
#include "metrics/qm_priv.h"

#define PROG "tests/qpt/metric_prog"

static const char *metrics_text =
    "# every kind of constraint\n"
    "metric all = count calls(leaf) total;\n"
    "metric in_outer = count calls(leaf) inside(outer) total;\n"
    "metric in_guarded = count calls(leaf) inside(guarded) total;\n"
    "metric recursive = count calls(rec) inside(rec);\n"
    "metric big = count calls(leaf) where arg1 > 1 total;\n"
    "metric after_first = count calls(leaf) where sink > 0 total;\n"
    "metric per_thread = count calls(leaf) per thread;\n"
    "metric per_proc = count calls(inner) where arg1 == 3 || arg1 == 5;\n"
    "metric wall = time wall(outer);\n"
    "metric cpu = time cpu(outer) total;\n"
    "metric by_arg = count calls(leaf) per arg1;\n"
    "metric by_value = count calls(leaf) per value(arg1 % 2) where arg1 < 50 inside(outer);\n"
    "metric ret_pos = count calls(outer) where retval > 0 total;\n"
    "metric ret_neg = count calls(outer) where retval < 0 total;\n"
    "metric sites = count calls(leaf) per call site;\n";

/* Values by metric name (and focus, for several rows). */
static uint64_t
value(const qm_set_t *set, const qm_row_t *rows, size_t n, const char *metric, const char *focus)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(qm_name(set, rows[i].metric), metric) == 0
            && (focus == NULL || strcmp(rows[i].focus, focus) == 0))
            return rows[i].value;
    ck_abort_msg("no row %s %s", metric, focus ? focus : "");
    return 0;
}

static void
check_truth(const qm_set_t *set, const qm_row_t *rows, size_t n)
{
    ck_assert_uint_eq(value(set, rows, n, "all", "total"), 51);
    ck_assert_uint_eq(value(set, rows, n, "in_outer", "total"), 12 + 30);
    ck_assert_uint_eq(value(set, rows, n, "in_guarded", "total"), 1);
    ck_assert_uint_eq(value(set, rows, n, "recursive", "rec"), 3);
    ck_assert_uint_eq(value(set, rows, n, "big", "total"), 3 + 4 + 1 + 1 + 10);
    ck_assert_uint_eq(value(set, rows, n, "after_first", "total"), 49);
    ck_assert_uint_eq(value(set, rows, n, "per_proc", "inner"), 4 + 1 + 10); /* 3: 4 + 1..4 */
    /* Per thread: main 21, and 3, 6, 9, 12. */
    int seen[5] = { 0 }, threads = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(qm_name(set, rows[i].metric), "per_thread") == 0) {
            threads++;
            uint64_t v = rows[i].value;
            ck_assert_msg(v == 21 || (v % 3 == 0 && v >= 3 && v <= 12), "a thread: %llu",
                          (unsigned long long)v);
            seen[v == 21 ? 0 : v / 3]++;
        }
    ck_assert_int_eq(threads, 5);
    for (int k = 0; k < 5; k++)
        ck_assert_int_eq(seen[k], 1);
    /* Per value of the argument: 0 and 1 16 times, 2 15 times, 3, 4, 50 and 100 once. */
    static const struct {
        const char *focus;
        uint64_t n;
    } by_arg[] = { { "arg1=0", 16 }, { "arg1=1", 16 }, { "arg1=2", 15 }, { "arg1=3", 1 },
                   { "arg1=4", 1 },  { "arg1=50", 1 },  { "arg1=100", 1 } };
    int nby = 0;
    for (size_t i = 0; i < n; i++)
        nby += strcmp(qm_name(set, rows[i].metric), "by_arg") == 0;
    ck_assert_int_eq(nby, 7);
    for (size_t i = 0; i < sizeof(by_arg) / sizeof(by_arg[0]); i++)
        ck_assert_uint_eq(value(set, rows, n, "by_arg", by_arg[i].focus), by_arg[i].n);
    /* Inside outer (12 + 30: arguments 0, 1, 2 each 4 + 10 times), by parity. */
    ck_assert_uint_eq(value(set, rows, n, "by_value", "arg1 % 2=0"), 28);
    ck_assert_uint_eq(value(set, rows, n, "by_value", "arg1 % 2=1"), 14);
    /* Per call site: inner's call 49 times, escape's once, rec's tail call among the
     * calls of no site. */
    uint64_t in_inner = 0, in_escape = 0;
    int nsites = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(qm_name(set, rows[i].metric), "sites") != 0)
            continue;
        nsites++;
        if (strncmp(rows[i].focus, "inner+0x", 8) == 0 && strstr(rows[i].focus, " -> leaf"))
            in_inner = rows[i].value;
        else if (strncmp(rows[i].focus, "escape+0x", 9) == 0)
            in_escape = rows[i].value;
    }
    ck_assert_int_eq(nsites, 3);
    ck_assert_uint_eq(in_inner, 49);
    ck_assert_uint_eq(in_escape, 1);
    ck_assert_uint_eq(value(set, rows, n, "sites", "other calls (through pointers, tail calls)"), 1);
    /* At the returns: outer returns sink * 3 + 1 > 0, in main and 4 threads. */
    ck_assert_uint_eq(value(set, rows, n, "ret_pos", "total"), 5);
    ck_assert_uint_eq(value(set, rows, n, "ret_neg", "total"), 0);
    uint64_t wall = value(set, rows, n, "wall", "outer"), cpu = value(set, rows, n, "cpu", "total");
    ck_assert_uint_gt(wall, 0);
    ck_assert_uint_lt(wall, 10000000000ull);
    ck_assert_uint_gt(cpu, 0);
    ck_assert_uint_lt(cpu, 10000000000ull);
}

static char notes[4096];
static void
on_note(void *arg, const char *note)
{
    (void)arg;
    strncat(notes, note, sizeof(notes) - strlen(notes) - 2);
    strcat(notes, "\n");
}

/* Syntax errors: where and what. */
START_TEST(test_metrics_syntax)
{
    static const struct {
        const char *text;
        const char *want; /* in the message */
        const char *where;
    } bad[] = {
        { "metric a = count calls(f)", "expected 'inside', 'where', 'per', 'total' or ';'", "t:1:26:" },
        { "metric a = count callz(f);", "expected 'calls'", "t:1:18:" },
        { "metric a = time (f);", "expected 'wall' or 'cpu'", "t:1:17:" },
        { "metric a = count calls();", "an empty pattern", "t:1:24:" },
        { "metric a = count calls(f) where arg1 > ;", "expected a number", "t:1:40:" },
        { "metric a = count calls(f) where (arg1 > 1;", "expected ')'", "t:1:42:" },
        { "metric a = count calls(f);\nmetric a = count calls(g);", "defined twice", "t:2:1:" },
        { "metric a = count calls(f) per process;", "expected 'procedure', 'module', 'call site'", "t:1:31:" },
        { "metric a = time wall(f) per arg1;", "a row per value is for counts", "t:1:29:" },
        { "metric a = time wall(f) post;", "'post' is for counts", "t:1:25:" },
        { "metric a = count calls(f) per value(arg1;", "expected ')'", "t:1:41:" },
        { "metric a = count calls(f) per procedure per module;", "a second focus: only", "t:1:45:" },
        { "metric a = count calls(f) per procedure per thread per thread;", "a second focus", "t:1:52:" },
        { "metric a = count calls(f) per call site per thread;", "a second focus: only", "t:1:41:" },
        { "metric a = sum(arg1) count(f);", "expected 'calls' after the value", "t:1:22:" },
        { "metric a = avg(arg1 calls(f);", "expected ')'", "t:1:21:" },
        { "metric a = max(arg1) calls(f) per call site;", "for counts, sums and timers", "t:1:35:" },
        { "metric a = count calls(f) unit bytes;", "expected the unit in double quotes", "t:1:32:" },
        { "metric a = count calls(f) unit \"\";", "an empty unit", "t:1:32:" },
        { "list l = { f, };", "expected a pattern, found '}'", "t:1:15:" },
        { "list l = f;", "expected '{'", "t:1:10:" },
        { "list arg1 = { f };", "'arg1' is a name of the language", "t:1:6:" },
        { "constraint c = arg1 >;", "expected a number", "t:1:22:" },
        { "constraint c = 1; list c = { f };", "'c' is defined twice", "t:1:24:" },
        { "list l = { f }; metric a = count calls(g) where l;", "a list of procedures, not a value", "t:1:49:" },
        { "metric a = count calls(f) where arg1[;", "expected a number", "t:1:38:" },
        { "metric a = count calls(f) where load4(arg1;", "expected ')'", "t:1:43:" },
        { "metric a = count calls(f) where **************************************************arg1;", "nested deeper than 48", "t:1:"},
        { "metric a = count calls(f) total where arg1 > 1 per arg1;", "a second focus", "t:1:48:" },
        { "metric a = count calls(f) per arg1 per arg2;", "a second focus", "t:1:36:" },
        { "metric a = count calls(f) per value(arg1) total;", "a second focus", "t:1:43:" },
        { "metrik a = count calls(f);", "expected 'metric'", "t:1:1:" },
        { "metric 9 = count calls(f);", "expected the metric's name", "t:1:8:" },
        { "metric a = count calls(f) where 12ab > 1;", "a malformed number", "t:1:33:" },
        { "", "no metric", "t:" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char why[512];
        qm_set_t *set = NULL;
        ck_assert_int_eq(qm_parse(bad[i].text, "t", 0, &set, why, sizeof(why)), QPT_EINVAL);
        ck_assert_ptr_null(set);
        ck_assert_msg(strstr(why, bad[i].want) != NULL && strncmp(why, bad[i].where,
                                                                  strlen(bad[i].where)) == 0,
                      "%s: %s", bad[i].text, why);
    }
    /* The caret under the column. */
    char why[512];
    qm_set_t *set = NULL;
    ck_assert_int_eq(qm_parse("metric a =\n  count calls(f) wher x;", "m.qm", 0, &set, why,
                              sizeof(why)), QPT_EINVAL);
    ck_assert_str_eq(why, "m.qm:2:18: expected 'inside', 'where', 'per', 'total' or ';', found "
                          "'wher'\n      count calls(f) wher x;\n                     ^");
    /* One-liners, and precedence. */
    ck_assert_int_eq(qm_parse("count calls(lua_*) inside(luaV_execute) where arg1 + 2 * 3 == 7 "
                              "|| !arg2", "-e", 1, &set, why, sizeof(why)), 0);
    ck_assert_uint_eq(qm_count(set), 1);
    ck_assert_str_eq(qm_name(set, 0), "count calls(lua_*) inside(luaV_execute) where arg1 + 2 * "
                                      "3 == 7 || !arg2");
    /* A C++ signature: its parentheses balanced belong to the pattern. */
    ck_assert_int_eq(qm_parse("count calls(geo::norm(int, int))", "-e", 1, &set, why,
                              sizeof(why)), 0);
    ck_assert_str_eq(qm_name(set, 1), "count calls(geo::norm(int, int))");
    qm_set_t *bad1 = NULL;
    ck_assert_int_eq(qm_parse("count calls(f(int)", "-e", 1, &bad1, why, sizeof(why)),
                     QPT_EINVAL);
    qm_free(bad1);
    qm_free(set);
    set = NULL;
    ck_assert_int_eq(qm_parse("count calls(lua_*) inside(luaV_execute) where arg1 + 2 * 3 == 7 "
                              "|| !arg2", "-e", 1, &set, why, sizeof(why)), 0);
    ck_assert_int_eq(qm_parse(metrics_text, "m", 0, &set, why, sizeof(why)), 0);
    ck_assert_uint_eq(qm_count(set), 16);
    /* A list and a constraint, defined once and used by two metrics each; memory reads. */
    ck_assert_int_eq(qm_parse("list l = { f, g* , h };\nconstraint big = arg3 > 4096 && *(arg1 + 8) != 0;\n"
                              "metric l1 = count calls(l) where big;\n"
                              "metric l2 = sum(arg3) calls(l) where big || arg2[2] == load1(arg2) "
                              "per procedure per thread unit \"bytes\";",
                              "d", 0, &set, why, sizeof(why)), 0);
    ck_assert_uint_eq(qm_count(set), 18);
    /* A failed text adds nothing. */
    ck_assert_int_eq(qm_parse("metric z = count calls(f); metric", "m2", 0, &set, why, sizeof(why)),
                     QPT_EINVAL);
    ck_assert_uint_eq(qm_count(set), 18);
    /* ... and the definitions of a failed text neither. */
    ck_assert_int_eq(qm_parse("list z = { f }; metric", "m3", 0, &set, why, sizeof(why)),
                     QPT_EINVAL);
    ck_assert_int_eq(qm_parse("metric y = count calls(z);", "m4", 0, &set, why, sizeof(why)), 0);
    ck_assert_uint_eq(qm_count(set), 19);
    qm_free(set);
}
END_TEST

/* Names are checked before anything is inserted: the program is written unchanged. */
START_TEST(test_metrics_names)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        { "count calls(no_such_*)", "-e:1:13: no procedure matches 'no_such_*'" },
        { "count calls(leaf) inside(nothing)", "-e:1:26: no procedure matches 'nothing'" },
        { "count calls(leaf) where nosuchvar > 1", "-e:1:25: no variable 'nosuchvar'" },
        { "count calls(outer) where retval > arg1", "-e:1:35: an argument with retval" },
        { "time wall(outer) where retval > 1", "-e:1:24: retval is for counts" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char why[512];
        qpt_space_t *s = NULL;
        qm_set_t *set = NULL;
        ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
        ck_assert_int_eq(qm_parse("count calls(leaf)", "-e", 1, &set, why, sizeof(why)), 0);
        ck_assert_int_eq(qm_parse(bad[i].text, "-e", 1, &set, why, sizeof(why)), 0);
        ck_assert_int_lt(qm_insert(set, s, NULL, NULL, why, sizeof(why)), 0);
        ck_assert_msg(strncmp(why, bad[i].want, strlen(bad[i].want)) == 0, "%s", why);
        qm_free(set);
        qpt_close(s);
    }
}
END_TEST

/* The states a live session following its process moves a metric through: waiting
 * (left by qm_insert), placed, forgotten (its image gone: waiting again), refused. */
START_TEST(test_metrics_waiting)
{
    char why[512], lib[64];
    qpt_space_t *s = NULL;
    qm_set_t *set = NULL;
    ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(qm_parse("count calls(leaf)", "-e", 1, &set, why, sizeof(why)), 0);
    ck_assert_int_eq(qm_parse("count calls(libx.so.1:f)", "-e", 1, &set, why, sizeof(why)),
                     0);
    ck_assert_int_eq(qm_library_of(set, 0, lib, sizeof(lib)), -1);
    ck_assert_int_eq(qm_library_of(set, 1, lib, sizeof(lib)), 0);
    ck_assert_str_eq(lib, "libx.so.1");
    /* Waiting: qm_insert leaves it (a file has no libraries: it would be an error). */
    ck_assert_int_eq(qm_wait(set, 1, 1), 0);
    ck_assert_int_eq(qm_wait(set, 1, 1), QPT_EINVAL);
    ck_assert_int_eq(qm_insert(set, s, NULL, NULL, why, sizeof(why)), 0);
    ck_assert_int_eq(qm_state(set, 0), QM_ON);
    ck_assert_int_eq(qm_state(set, 1), QM_WAITING);
    /* Its image gone: forgotten, then placed again by the next qm_insert. */
    ck_assert_int_eq(qm_forget(set, 0), 0);
    ck_assert_int_eq(qm_state(set, 0), QM_WAITING);
    ck_assert_int_eq(qm_forget(set, 0), QPT_EINVAL);
    ck_assert_int_eq(qm_wait(set, 0, 0), 0);
    ck_assert_int_eq(qm_insert(set, s, NULL, NULL, why, sizeof(why)), 0);
    ck_assert_int_eq(qm_state(set, 0), QM_ON);
    /* Refused without having been in: out, its number kept. */
    ck_assert_int_eq(qm_set_off(set, 1), 0);
    ck_assert_int_eq(qm_state(set, 1), QM_OFF);
    ck_assert_int_eq(qm_set_off(set, 0), QPT_EINVAL);
    ck_assert_int_eq(qm_count(set), 2);
    qm_free(set);
    qpt_close(s);
}
END_TEST

static int
read_profile(void *arg, uint64_t addr, uint64_t *w, size_t n)
{
    char why[256];
    return qpt_profile_read(arg, addr, w, n, why, sizeof(why));
}

START_TEST(test_metrics_file)
{
    char why[512];
    qpt_space_t *s = NULL;
    qm_set_t *set = NULL;
    ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(qm_parse(metrics_text, "m", 0, &set, why, sizeof(why)), 0);
    notes[0] = '\0';
    ck_assert_msg(qm_insert(set, s, on_note, NULL, why, sizeof(why)) == 0, "%s\nnotes:\n%s", why,
                  notes);
    ck_assert_int_eq(qm_layout_attach(set, s, why, sizeof(why)), 0);
    /* A tool's own note: a bad name refused, a second of a name replaces the first. */
    ck_assert_int_eq(qpt_note_set(s, "bad name", "x"), QPT_EINVAL);
    ck_assert_int_eq(qpt_note_set(s, "", "x"), QPT_EINVAL);
    ck_assert_int_eq(qpt_note_set(s, "mine", "first"), 0);
    ck_assert_int_eq(qpt_note_set(s, "mine", "second\nline"), 0);
    ck_assert_msg(qpt_write(s, "tests/qpt/metric_prog.inst") == 0, "%s", qpt_error(s));
    uint64_t id = qpt_written_id(s), nid = 0;
    ck_assert_uint_ne(id, 0);
    char *text = NULL;
    ck_assert_int_eq(qpt_note_read("tests/qpt/metric_prog.inst", "mine", &text, &nid, why,
                                   sizeof(why)), 0);
    ck_assert_str_eq(text, "second\nline");
    ck_assert_uint_eq(nid, id);
    free(text);
    ck_assert_int_eq(qpt_note_read("tests/qpt/metric_prog.inst", "other", &text, NULL, why,
                                   sizeof(why)), QPT_ENOTFOUND);
    ck_assert_ptr_null(text);
    qpt_close(s);
    unlink("tests/qpt/metric_prog.inst.qp");
    ck_assert_int_eq(system("tests/qpt/metric_prog.inst > tests/qpt/metric.out && "
                            "grep -qx 203 tests/qpt/metric.out"), 0);
    qm_row_t *rows;
    size_t n;
    ck_assert_msg(qm_results(set, read_profile, "tests/qpt/metric_prog.inst.qp", qm_cycles_per_ns(),
                             &rows, &n, why, sizeof(why)) == 0, "%s", why);
    check_truth(set, rows, n);
    free(rows);
    qm_free(set);
    /* The layout read back from the program, and from the program its profile names,
     * gives the same table, with the rewrite's id. */
    for (int from_profile = 0; from_profile < 2; from_profile++) {
        set = NULL;
        ck_assert_msg((from_profile ? qm_layout_of_profile("tests/qpt/metric_prog.inst.qp", &set,
                                                           why, sizeof(why))
                                    : qm_layout_load("tests/qpt/metric_prog.inst", &set, why,
                                                     sizeof(why))) == 0, "%s", why);
        uint64_t pid_;
        ck_assert_int_eq(qpt_profile_id("tests/qpt/metric_prog.inst.qp", &pid_, why, sizeof(why)),
                         0);
        ck_assert_uint_eq(qm_layout_id(set), id);
        ck_assert_uint_eq(pid_, id);
        ck_assert_int_eq(qm_results(set, read_profile, "tests/qpt/metric_prog.inst.qp",
                                    qm_cycles_per_ns(), &rows, &n, why, sizeof(why)), 0);
        check_truth(set, rows, n);
        free(rows);
        qm_free(set);
    }
    /* A program without the note: said so. */
    set = NULL;
    ck_assert_int_eq(qm_layout_load(PROG, &set, why, sizeof(why)) < 0, 1);
    /* A damaged layout is refused with its line. */
    FILE *f = fopen("tests/qpt/bad.qpm", "w");
    fputs("qpt-metrics-layout 1\nmetric 1 1 0 7ff000000000 8 0 99999999999\n", f);
    fclose(f);
    set = NULL;
    ck_assert_int_eq(qm_layout_load("tests/qpt/bad.qpm", &set, why, sizeof(why)), QPT_EFORMAT);
    ck_assert_msg(strstr(why, "bad.qpm:2:") != NULL, "%s", why);
    unlink("tests/qpt/bad.qpm");
}
END_TEST

/*
 * A live placement looks each pattern up and finds the call sites before the process
 * stops (qm_memo_warm, as dyn's does): the placement itself, made in the stop, scans no
 * procedure's names again, a lenient set's (dyn --count, --calls-from) too (the names
 * matched before the stop were once kept for a set that is not lenient, and the stop
 * scanned them all again, "*" of calls(*) per call site three times).
 */
START_TEST(test_metrics_memo)
{
    static const char *text = "metric a = count calls(leaf);\n"
                              "metric b = count calls(*) per call site;\n"
                              "metric c = time wall(outer) inside(outer);\n";
    char why[512];
    for (int lenient = 0; lenient < 2; lenient++) {
        qpt_space_t *s = NULL;
        qm_set_t *set = NULL;
        ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
        ck_assert_int_eq(qm_parse(text, "m", 0, &set, why, sizeof(why)), 0);
        qm_hooks_t h = { NULL, NULL, NULL, lenient, 0, NULL };
        qm_set_hooks(set, &h);
        qm_memo_t *memo = qm_memo_new();
        ck_assert_ptr_nonnull(memo);
        set->memo = memo;
        for (size_t i = 0; i < qm_count(set); i++)
            qm_memo_warm(set, i, s);
        size_t before = qm_memo_scans(memo);
        ck_assert_uint_gt(before, 0);
        notes[0] = '\0';
        ck_assert_msg(qm_insert(set, s, on_note, NULL, why, sizeof(why)) == 0, "%s", why);
        ck_assert_msg(qm_memo_scans(memo) == before, "lenient %d: %zu scans in the placement",
                      lenient, qm_memo_scans(memo) - before);
        set->memo = NULL;
        qm_memo_free(memo);
        qm_free(set);
        qpt_close(s);
    }
}
END_TEST

/* Metrics placed one batch at a time, a failed batch forgotten, one taken out: only the
 * metric in gives rows, exact (leaf: 51 calls). */
START_TEST(test_metrics_batches)
{
    char why[512];
    qpt_space_t *s = NULL;
    ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
    qm_set_t *set = qm_new();
    ck_assert_ptr_nonnull(set);
    ck_assert_int_eq(qm_parse("count calls(inner) total", "-e", 1, &set, why, sizeof(why)), 0);
    ck_assert_int_eq(qm_insert(set, s, NULL, NULL, why, sizeof(why)), 0);
    ck_assert_int_eq(qm_state(set, 0), QM_ON);
    /* A batch with an unknown name: nothing of it goes in, and it is forgotten. */
    ck_assert_int_eq(qm_parse("count calls(leaf) total", "-e", 1, &set, why, sizeof(why)), 0);
    ck_assert_int_eq(qm_parse("count calls(no_such)", "-e", 1, &set, why, sizeof(why)), 0);
    ck_assert_int_lt(qm_insert(set, s, NULL, NULL, why, sizeof(why)), 0);
    ck_assert_int_eq(qm_state(set, 1), QM_PARSED);
    qm_drop_parsed(set);
    ck_assert_uint_eq(qm_count(set), 1);
    ck_assert_int_eq(qm_parse("count calls(leaf) total", "-e", 1, &set, why, sizeof(why)), 0);
    ck_assert_int_eq(qm_insert(set, s, NULL, NULL, why, sizeof(why)), 0);
    ck_assert_int_eq(qm_remove(set, 0, s, why, sizeof(why)), 0);
    ck_assert_int_eq(qm_state(set, 0), QM_OFF);
    ck_assert_int_eq(qm_remove(set, 0, s, why, sizeof(why)), QPT_EINVAL);
    ck_assert_msg(strstr(why, "not in the program") != NULL, "%s", why);
    ck_assert_msg(qpt_write(s, "tests/qpt/batch.inst") == 0, "%s", qpt_error(s));
    qpt_close(s);
    unlink("tests/qpt/batch.inst.qp");
    ck_assert_int_eq(system("tests/qpt/batch.inst > tests/qpt/metric.out && "
                            "grep -qx 203 tests/qpt/metric.out"), 0);
    qm_row_t *rows;
    size_t n;
    ck_assert_msg(qm_results(set, read_profile, "tests/qpt/batch.inst.qp", qm_cycles_per_ns(),
                             &rows, &n, why, sizeof(why)) == 0, "%s", why);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(rows[0].metric, 1);
    ck_assert_uint_eq(rows[0].value, 51);
    free(rows);
    qm_free(set);
}
END_TEST

/* Per thread with 8 threads (tests/qpt/thr_prog: thread i calls tick 1,000 (i + 1)
 * times, all at once): a row each, exact; and the same metric total (a locked add). */
START_TEST(test_metrics_eight_threads)
{
    char why[512];
    qpt_space_t *s = NULL;
    qm_set_t *set = NULL;
    ck_assert_msg(qpt_open("tests/qpt/thr_prog", &s, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(qm_parse("metric t = count calls(tick) per thread;\n"
                              "metric all = count calls(tick) total;\n", "m", 0, &set, why,
                              sizeof(why)), 0);
    ck_assert_msg(qm_insert(set, s, NULL, NULL, why, sizeof(why)) == 0, "%s", why);
    ck_assert_msg(qpt_write(s, "tests/qpt/thr8.inst") == 0, "%s", qpt_error(s));
    qpt_close(s);
    unlink("tests/qpt/thr8.inst.qp");
    ck_assert_int_eq(system("tests/qpt/thr8.inst > tests/qpt/thr.out"), 0);
    qm_row_t *rows;
    size_t n;
    ck_assert_msg(qm_results(set, read_profile, "tests/qpt/thr8.inst.qp", qm_cycles_per_ns(),
                             &rows, &n, why, sizeof(why)) == 0, "%s", why);
    int seen[9] = { 0 }, threads = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(qm_name(set, rows[i].metric), "t") == 0) {
            uint64_t v = rows[i].value;
            ck_assert_msg(v % 1000 == 0 && v >= 1000 && v <= 8000, "a thread: %llu",
                          (unsigned long long)v);
            seen[v / 1000]++;
            threads++;
        }
    ck_assert_int_eq(threads, 8);
    for (int k = 1; k <= 8; k++)
        ck_assert_int_eq(seen[k], 1);
    ck_assert_uint_eq(value(set, rows, n, "all", "total"), 36000);
    free(rows);
    qm_free(set);
}
END_TEST

/* Modules (source files, from DWARF): MODULE:PROC patterns and per module rows, in a
 * file, the layout read back, and live: mod_a.c's fa 3 calls, mod_b.c's fb1 and fb2
 * 5 and 7. */
static const char *mod_text =
    "metric by_mod = count calls(mod_*.c:f*) per module;\n"
    "metric in_b = count calls(mod_b.c:*);\n"
    "metric b_total = count calls(*/mod_b.c:fb*) total;\n";

static void
check_modules(const qm_set_t *set, const qm_row_t *rows, size_t n)
{
    int a = 0, b = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(qm_name(set, rows[i].metric), "by_mod") == 0) {
            const char *f = rows[i].focus;
            size_t l = strlen(f);
            if (l > 7 && strcmp(f + l - 7, "mod_a.c") == 0) {
                a++;
                ck_assert_uint_eq(rows[i].value, 3);
            } else if (l > 7 && strcmp(f + l - 7, "mod_b.c") == 0) {
                b++;
                ck_assert_uint_eq(rows[i].value, 12);
            } else
                ck_abort_msg("a module row %s", f);
        }
    ck_assert_int_eq(a, 1);
    ck_assert_int_eq(b, 1);
    ck_assert_uint_eq(value(set, rows, n, "in_b", "fb1"), 5);
    ck_assert_uint_eq(value(set, rows, n, "in_b", "fb2"), 7);
    ck_assert_uint_eq(value(set, rows, n, "b_total", "total"), 12);
}

START_TEST(test_metrics_modules)
{
    char why[512];
    qpt_space_t *s = NULL;
    qm_set_t *set = NULL;
    ck_assert_msg(qpt_open("tests/qpt/mod_prog", &s, why, sizeof(why)) == 0, "%s", why);
    uint32_t fa;
    ck_assert_int_eq(qpt_proc_find(s, "fa", &fa), 0);
    ck_assert_ptr_nonnull(strstr(qpt_proc_module(s, fa), "mod_a.c"));
    ck_assert_int_eq(qm_parse(mod_text, "m", 0, &set, why, sizeof(why)), 0);
    ck_assert_msg(qm_insert(set, s, NULL, NULL, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(qm_layout_attach(set, s, why, sizeof(why)), 0);
    ck_assert_msg(qpt_write(s, "tests/qpt/mod.inst") == 0, "%s", qpt_error(s));
    qpt_close(s);
    unlink("tests/qpt/mod.inst.qp");
    ck_assert_int_eq(system("tests/qpt/mod.inst > tests/qpt/metric.out"), 0);
    qm_row_t *rows;
    size_t n;
    ck_assert_msg(qm_results(set, read_profile, "tests/qpt/mod.inst.qp", 1, &rows, &n, why,
                             sizeof(why)) == 0, "%s", why);
    check_modules(set, rows, n);
    free(rows);
    qm_free(set);
    set = NULL;
    ck_assert_msg(qm_layout_of_profile("tests/qpt/mod.inst.qp", &set, why, sizeof(why)) == 0,
                  "%s", why);
    ck_assert_int_eq(qm_results(set, read_profile, "tests/qpt/mod.inst.qp", 1, &rows, &n, why,
                                sizeof(why)), 0);
    check_modules(set, rows, n);
    free(rows);
    qm_free(set);
    /* No such module. */
    set = NULL;
    ck_assert_msg(qpt_open("tests/qpt/mod_prog", &s, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(qm_parse("count calls(nosuch.c:*)", "-e", 1, &set, why, sizeof(why)), 0);
    ck_assert_int_lt(qm_insert(set, s, NULL, NULL, why, sizeof(why)), 0);
    ck_assert_msg(strstr(why, "no procedure matches 'nosuch.c:*'") != NULL, "%s", why);
    qm_free(set);
    qpt_close(s);
}
END_TEST

#ifdef ENABLE_DYNAMIC_TESTS
static int
read_live(void *arg, uint64_t addr, uint64_t *w, size_t n)
{
    return qpt_read_memory(arg, addr, w, 8 * n);
}

START_TEST(test_metrics_live)
{
    char why[512];
    char *argv[] = { PROG, NULL };
    qpt_space_t *s = NULL;
    qm_set_t *set = NULL;
    int rc = qpt_spawn(argv, &s, why, sizeof(why));
    if (rc == QPT_EIO && strstr(why, "ermission") != NULL)
        return;
    ck_assert_msg(rc == 0, "%s", why);
    ck_assert_int_eq(qm_parse(metrics_text, "m", 0, &set, why, sizeof(why)), 0);
    notes[0] = '\0';
    ck_assert_msg(qm_insert(set, s, on_note, NULL, why, sizeof(why)) == 0, "%s\nnotes:\n%s", why,
                  notes);
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    ck_assert_int_eq(qpt_run(s), 0);
    int st;
    while (qpt_ended(s, &st) == 0) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    qm_row_t *rows;
    size_t n;
    ck_assert_msg(qm_results(set, read_live, s, qm_cycles_per_ns(), &rows, &n, why, sizeof(why))
                  == 0, "%s", why);
    /* Live, rec's tail call is patched as its exit too (issue 29): nothing to say, and
     * the counts exact. */
    ck_assert_msg(strstr(notes, "inside(rec)") == NULL, "notes: %s", notes);
    check_truth(set, rows, n);
    free(rows);
    qm_free(set);
    qpt_close(s);
}
END_TEST
#endif

/*****************************************************************************
 * Timers read while running: qm_results_running over words made up here (a process's
 * memory as a sampler sees it), this process standing for the one measured.
 */

typedef struct fake_mem {
    uint64_t base[3]; /* the variables' addresses */
    uint64_t *w[3];   /* their words */
    size_t n[3];      /* how many */
    size_t churn[3];  /* a word each read adds 1 to (a busy thread), or 0 */
} fake_mem_t;

static int
read_fake(void *arg, uint64_t addr, uint64_t *words, size_t nwords)
{
    fake_mem_t *m = arg;
    for (int v = 0; v < 3; v++)
        if (addr >= m->base[v] && (addr - m->base[v]) / 8 + nwords <= m->n[v]) {
            if (m->churn[v])
                m->w[v][m->churn[v]] += 1;
            memcpy(words, m->w[v] + (addr - m->base[v]) / 8, 8 * nwords);
            return 0;
        }
    return QPT_EIO;
}

static uint64_t
tsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

/* An active wall timer adds the cycles since its start, an active CPU timer its thread's
 * CPU time since its start (/proc schedstat of the thread id in its block); an inactive
 * one, a block that keeps changing, or PID 0, add nothing; a value read lower than at
 * the last sample is kept at the last. */
START_TEST(test_metrics_running)
{
    static const char layout[] = "qpt-metrics-layout 1\n"
                                 "metric 2 1 1 1000 32 0 1\nname time wall(f)\nproc 1 f\n"
                                 "metric 3 1 1 9000000 40 1 1\nname time cpu(f)\nproc 1 f\n"
                                 "metric 2 1 1 20000000 64 0 2\nname time wall(*)\n"
                                 "proc 1 long\nproc 1 short\n"
                                 "end\n";
    char why[256];
    FILE *f = fmemopen((void *)layout, sizeof(layout) - 1, "r");
    ck_assert_ptr_nonnull(f);
    qm_set_t *set = NULL;
    ck_assert_msg(qm_layout_read(f, "fake.qpm", &set, why, sizeof(why)) == 0, "%s", why);
    fclose(f);
    fake_mem_t m = { { 0x1000, 0x9000000, 0x20000000 }, { NULL }, { 0 }, { 0 } };
    for (int v = 0; v < 3; v++) {
        m.n[v] = QPT_PER_THREAD_SIZE(v == 0 ? 32 : v == 1 ? 40 : 64) / 8;
        m.w[v] = calloc(m.n[v], 8);
        ck_assert_ptr_nonnull(m.w[v]);
    }
    /* Wall: thread 0 inside since 1e9 cycles ago (total 500), thread 1 out (total 700). */
    uint64_t *wall = m.w[0] + QPT_MAX_THREADS;
    m.w[0][0] = 0x7f0000001000;
    m.w[0][1] = 0x7f0000002000;
    wall[0] = 1, wall[1] = tsc() - 1000000000ull, wall[2] = 500;
    wall[4] = 0, wall[5] = tsc() - 5000000000ull, wall[6] = 700; /* 4 words a row */
    /* CPU: this thread (its id), inside since half its CPU time so far (total 40). */
    volatile uint64_t spin = 0;
    for (int i = 0; i < 3000000; i++)
        spin += (uint64_t)i;
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    uint64_t cpu0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint64_t *cpu = m.w[1] + QPT_MAX_THREADS;
    m.w[1][0] = 0x7f0000001000;
    cpu[0] = (uint64_t)syscall(SYS_gettid), cpu[1] = 1, cpu[2] = cpu0 / 2, cpu[3] = 40;
    /* Two procedures timed in one thread: a long call inside since 1e9 cycles ago, and
     * short ones it makes all the time (their words change at every read). */
    uint64_t *two = m.w[2] + QPT_MAX_THREADS;
    m.w[2][0] = 0x7f0000001000;
    two[0] = 1, two[1] = tsc() - 1000000000ull, two[2] = 10;
    two[4] = 0, two[5] = tsc(), two[6] = 20;
    m.churn[2] = QPT_MAX_THREADS + 5;

    qm_row_t *rows;
    size_t n;
    ck_assert_int_eq(qm_results_running(set, read_fake, &m, 1.0, 0, &rows, &n, why, sizeof(why)), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_uint_eq(rows[0].value, 1200); /* PID 0: the totals only */
    ck_assert_uint_eq(rows[1].value, 40);
    free(rows);

    ck_assert_int_eq(qm_results_running(set, read_fake, &m, 1.0, (int)getpid(), &rows, &n, why,
                                        sizeof(why)), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_uint_ge(rows[0].value, 1200 + 1000000000ull);
    ck_assert_uint_lt(rows[0].value, 1200 + 1000000000ull + 100000000000ull);
    ck_assert_uint_ge(rows[1].value, 40 + cpu0 - cpu0 / 2);
    ck_assert_uint_lt(rows[1].value, 40 + cpu0 - cpu0 / 2 + 60000000000ull);
    ck_assert_uint_ge(rows[2].value, 10 + 1000000000ull); /* the short calls do not hide it */
    ck_assert_uint_lt(rows[2].value, 10 + 1000000000ull + 100000000000ull);
    qm_row_t *prev = rows;
    size_t nprev = n;

    /* A thread starting and stopping all the time: its running part left out, and the
     * value shown no lower than the last sample's. */
    m.churn[0] = QPT_MAX_THREADS + 1;
    ck_assert_int_eq(qm_results_running(set, read_fake, &m, 1.0, (int)getpid(), &rows, &n, why,
                                        sizeof(why)), 0);
    ck_assert_uint_eq(rows[0].value, 1200);
    qm_rows_keep_larger(rows, n, prev, nprev);
    ck_assert_uint_eq(rows[0].value, prev[0].value);
    free(rows);
    m.churn[0] = 0;

    /* The thread gone (an id no task has): the CPU timer's total only. */
    cpu[0] = 0x7ffffffe;
    ck_assert_int_eq(qm_results_running(set, read_fake, &m, 1.0, (int)getpid(), &rows, &n, why,
                                        sizeof(why)), 0);
    ck_assert_uint_eq(rows[1].value, 40);
    free(rows);
    free(prev);
    for (int v = 0; v < 3; v++)
        free(m.w[v]);
    qm_free(set);
}
END_TEST

static Suite *
metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_metrics_syntax);
    tcase_add_test(tc, test_metrics_names);
    tcase_add_test(tc, test_metrics_waiting);
    tcase_add_test(tc, test_metrics_file);
    tcase_add_test(tc, test_metrics_memo);
    tcase_add_test(tc, test_metrics_running);
    tcase_add_test(tc, test_metrics_batches);
    tcase_add_test(tc, test_metrics_eight_threads);
    tcase_add_test(tc, test_metrics_modules);
#ifdef ENABLE_DYNAMIC_TESTS
    tcase_add_test(tc, test_metrics_live);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(metrics_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
