/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * One metric placed in a space (qm_insert's work for each of a set's metrics): its
 * timers, followed over tail calls; the inside(Q) state; a procedure's snippets; the
 * checks of its patterns; its call sites, for a metric per call site. The memory and the
 * order at an entry are qm_compile.c's (its header says how they go).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/qm_priv.h"

/*****************************************************************************
 * Timers over tail calls (seed 000, 4.3: a caller's time includes its tail callee)
 *
 * A tail call leaves the caller with its frame gone: the callee returns to the caller's
 * caller, with the stack pointer the caller's own return would have had. So at a timed
 * procedure's tail jump the outermost call (depth 1) does not stop: it keeps that stack
 * pointer in its row's fourth word; every return of the procedures the jump can end in
 * (the callee and what its direct tail calls reach) checks the word, and the one whose
 * stack pointer matches stops the call. A nested call (depth > 1) stops at the jump as
 * before: the outermost call covers its time. A tail call through a pointer, into
 * another module, or into code that cannot take snippets stops at the jump, as before,
 * and a note counts them.
 */

#define TAIL_MAX_PROCS 16 /* procedures a tail call may end in, at most, to be followed */

/* Bytes for WORDS counter words; one word when a metric has no rows (a procedure that
 * makes no calls, for a per-call-site count), so an empty table is a table, not a
 * refused allocation. */
static uint64_t
words_bytes(uint64_t words)
{
    return 8 * (words ? words : 1);
}

/* Add procedure Q (entered at ENTRY) to the set OUT[*N]; 0, 1 when it cannot be. */
static int
tail_add(qmc_ctx_t *c, uint64_t entry, uint32_t *out, size_t *n)
{
    qpt_point_t tp;
    if (qpt_insn_point(c->s, entry, &tp) != 0 || qpt_proc_entry(c->s, tp.proc) != entry)
        return 1;
    for (size_t k = 0; k < *n; k++)
        if (out[k] == tp.proc)
            return 0;
    if (*n == TAIL_MAX_PROCS)
        return 1;
    out[(*n)++] = tp.proc;
    return 0;
}

/* The procedures a tail jump to CALLEE can end in: CALLEE and those its direct tail
 * jumps reach, into OUT[*N]; 0, or 1 when one of them cannot be followed. */
static int
tail_closure(qmc_ctx_t *c, uint64_t callee, uint32_t *out, size_t *n)
{
    *n = 0;
    if (tail_add(c, callee, out, n) != 0)
        return 1;
    for (size_t k = 0; k < *n; k++) {
        /* A copy's exits take one snippet list: no check at its returns alone. */
        if (qpt_proc_runs_as_copy(c->s, out[k]) != 0)
            return 1;
        size_t nx = 0;
        qpt_point_t *ex = qmc_points_of(c, out[k], QPT_EXIT, &nx);
        if (ex == NULL)
            return 1;
        int bad = 0;
        for (size_t i = 0; !bad && i < nx; i++) {
            uint64_t to;
            int r = qpt_exit_tail(c->s, &ex[i], &to);
            bad = r < 0 || (r == 1 && (to == 0 || tail_add(c, to, out, n) != 0));
        }
        free(ex);
        if (bad)
            return 1;
    }
    return 0;
}

/* The stop of a pending call of row W at each return of procedure Q: 0, 1 when one
 * cannot be placed. */
static int
tail_checks(qmc_ctx_t *c, qm_metric_t *m, qpt_snippet_t *sn, uint64_t w, uint32_t q)
{
    for (size_t k = 0; k < c->nchk; k++)
        if (c->chk[k].w == w && c->chk[k].proc == q)
            return 0;
    size_t nx = 0;
    qpt_point_t *ex = qmc_points_of(c, q, QPT_EXIT, &nx);
    int rc = ex == NULL;
    for (size_t i = 0; rc == 0 && i < nx; i++) {
        if (qpt_exit_tail(c->s, &ex[i], NULL) != 0)
            continue; /* a tail jump within the set: its callee returns */
        qpt_expr_t now = m->kind == QM_WALL ? qpt_cycles(sn) : qpt_thread_cpu_ns(sn);
        /* The depth before the total, as at any stop (a reader outside the process may
         * see a stop's total late, never early). */
        qpt_expr_t stop
            = qpt_seq(sn, qpt_store_at(sn, qmc_tword(sn, m, w + 3), 8, qpt_const(sn, 0)),
                qpt_seq(sn, qpt_store_at(sn, qmc_tword(sn, m, w), 8, qpt_const(sn, 0)),
                    qpt_add_at(sn, qmc_tword(sn, m, w + 2),
                        qpt_op(sn, QPT_SUB, now, qmc_tload(sn, m, w + 1)), 0)));
        qpt_expr_t mine = qpt_op(sn, QPT_LAND,
            qpt_op(sn, QPT_EQ, qmc_tload(sn, m, w + 3), qpt_sp(sn)),
            qpt_op(sn, QPT_GT, qmc_tload(sn, m, w), qpt_const(sn, 0)));
        if (qmc_put(c, &ex[i], sn, qpt_if(sn, mine, stop, QPT_NONE), !m->append) != 0)
            rc = 1;
    }
    free(ex);
    if (rc == 0) {
        if (c->nchk == c->capchk) {
            size_t cap = c->capchk ? 2 * c->capchk : 16;
            struct tail_check *v = realloc(c->chk, cap * sizeof(*v));
            if (v == NULL)
                return QPT_ENOMEM;
            c->chk = v;
            c->capchk = cap;
        }
        c->chk[c->nchk++] = (struct tail_check) { w, q };
    }
    return rc;
}

/* At exit EX (a tail jump to CALLEE) of a timed procedure: the checks at the returns it
 * can end in, then 1 when the exit is to keep the call pending; 0 when it stops there
 * (the checks not placed); < 0 on an error. */
static int
tail_follow(qmc_ctx_t *c, qm_metric_t *m, qpt_snippet_t *sn, uint64_t w, uint64_t callee,
            uint32_t p)
{
    uint32_t set[TAIL_MAX_PROCS];
    size_t n = 0;
    if (callee == 0 || tail_closure(c, callee, set, &n) != 0)
        return 0;
    size_t mark = c->ndone, cmark = c->nchk;
    for (size_t k = 0; k < n; k++) {
        int r = tail_checks(c, m, sn, w, set[k]);
        if (r < 0)
            return r;
        if (r == 1) {
            qmc_undo_to(c, mark);
            c->nchk = cmark;
            return 0;
        }
    }
    /* Which procedures' returns stop P's pending calls (qm_drop_refused). */
    struct qm_tail_pair *v = realloc(m->tail_pairs, (m->ntail_pairs + n) * sizeof(*v));
    if (v == NULL)
        return QPT_ENOMEM;
    m->tail_pairs = v;
    for (size_t k = 0; k < n; k++)
        v[m->ntail_pairs++] = (struct qm_tail_pair) { set[k], p };
    return 1;
}

/* The inside state at the entry and every exit of Q; 0, or 1 when Q cannot take it all
 * (then nothing of it stays, and a note says so). */
static int
place_inside(qmc_ctx_t *c, qm_metric_t *m, uint32_t q)
{
    size_t mark = c->ndone, ne = 0, nx = 0;
    qpt_point_t *en = qmc_points_of(c, q, QPT_ENTRY, &ne),
                *ex = qmc_points_of(c, q, QPT_EXIT, &nx);
    qmc_returns_only(c, ex, &nx);
    qpt_snippet_t *sn = qpt_snippet_create();
    int rc = en && ex && sn ? 0 : QPT_ENOMEM;
    /* No exit (a procedure that never returns) is fine: the return-address slot tells. */
    if (rc == 0 && ne != 1)
        rc = 1;
    if (rc == 0) {
        /* Entry: one more inside a live activation, else a new outermost one. */
        qpt_expr_t nested = qmc_inside_cond(sn, m);
        qpt_expr_t start = qpt_seq(sn,
            qpt_seq(sn, qpt_store_at(sn, qmc_tword(sn, m, 1), 8, qpt_sp(sn)),
                qpt_store_at(sn, qmc_tword(sn, m, 2), 8, qpt_load_at(sn, qpt_sp(sn), 8))),
            qpt_store_at(sn, qmc_tword(sn, m, 0), 8, qpt_const(sn, 1)));
        qpt_expr_t more = qpt_add_at(sn, qmc_tword(sn, m, 0), qpt_const(sn, 1), 0);
        if (qmc_put(c, &en[0], sn, qpt_if(sn, nested, more, start), 0) != 0)
            rc = 1;
    }
    size_t missed = 0;
    const char *miss = NULL;
    for (size_t i = 0; rc == 0 && i < nx; i++) {
        /* Exit: the outermost one ends it, an inner one takes one off. */
        qpt_expr_t outer = qpt_op(sn, QPT_UGE, qpt_sp(sn), qmc_tload(sn, m, 1));
        qpt_expr_t end = qpt_store_at(sn, qmc_tword(sn, m, 0), 8, qpt_const(sn, 0));
        qpt_expr_t less
            = qpt_if(sn, qpt_op(sn, QPT_GT, qmc_tload(sn, m, 0), qpt_const(sn, 0)),
                qpt_add_at(sn, qmc_tword(sn, m, 0), qpt_const(sn, -1), 0), QPT_NONE);
        if (qmc_put(c, &ex[i], sn, qpt_if(sn, outer, end, less), 0) != 0 && missed++ == 0)
            miss = qpt_error(c->s);
    }
    /* An exit that cannot be patched (live: a ret block under 5 bytes) is not needed for
     * the truth: the activation ends when its return-address slot is overwritten, which
     * the caller's next call does. Only a caller that grows its stack (alloca) before its
     * next call would be taken for still inside. Said in a note. */
    if (rc == 0 && missed > 0)
        qmc_notef(c,
            "%s: inside(%s): %zu exit%s of %s not patched (%s): its activations end when "
            "its caller calls again",
            m->name, m->inside, missed, missed == 1 ? "" : "s", qpt_proc_name(c->s, q),
            miss ? miss : "?");
    if (rc == 1) {
        qmc_undo_to(c, mark);
        qmc_notef(c,
            "%s: inside(%s): %s left out (%s): calls made inside it are not seen",
            m->name, m->inside, qpt_proc_name(c->s, q),
            ne != 1 ? "no entry to patch" : qpt_error(c->s));
    }
    qpt_snippet_destroy(sn);
    free(en);
    free(ex);
    return rc;
}

/* The metric's snippets at procedure P (row ROW); 0, or 1 when P is left out. */
/* A timer's start, for row word W (when COND holds, unless QPT_NONE): the outermost
 * activation stores its start; each one adds to the depth. */
static qpt_expr_t
timer_start(qpt_snippet_t *sn, const qm_metric_t *m, uint64_t w, qpt_expr_t cond)
{
    qpt_expr_t now = m->kind == QM_WALL ? qpt_cycles(sn) : qpt_thread_cpu_ns(sn);
    /* START is stored before the depth leaves 0 (and the depth before the total at a
     * stop): a reader outside the process that sees the timer active has its start; it
     * may see a stop's total late, never early. */
    qpt_expr_t set = qpt_store_at(sn, qmc_tword(sn, m, w + 1), 8, now);
    if (m->kind == QM_CPU) {
        /* The thread's id, once a thread (a system call: not on every call). */
        uint64_t tid = m->base - 1;
        qpt_expr_t keep
            = qpt_if(sn, qpt_op(sn, QPT_EQ, qmc_tload(sn, m, tid), qpt_const(sn, 0)),
                qpt_store_at(sn, qmc_tword(sn, m, tid), 8, qpt_thread_id(sn)), QPT_NONE);
        set = qpt_seq(sn, keep, set);
    }
    qpt_expr_t first = qpt_if(
        sn, qpt_op(sn, QPT_EQ, qmc_tload(sn, m, w), qpt_const(sn, 0)), set, QPT_NONE);
    qpt_expr_t start
        = qpt_seq(sn, first, qpt_add_at(sn, qmc_tword(sn, m, w), qpt_const(sn, 1), 0));
    return cond != QPT_NONE ? qpt_if(sn, cond, start, QPT_NONE) : start;
}

/* A timer's stop, for row word W: one activation less; the outermost adds its time. */
static qpt_expr_t
timer_stop(qpt_snippet_t *sn, const qm_metric_t *m, uint64_t w)
{
    qpt_expr_t now = m->kind == QM_WALL ? qpt_cycles(sn) : qpt_thread_cpu_ns(sn);
    qpt_expr_t total = qpt_add_at(sn, qmc_tword(sn, m, w + 2),
                                  qpt_op(sn, QPT_SUB, now, qmc_tload(sn, m, w + 1)), 0);
    qpt_expr_t last = qpt_if(
        sn, qpt_op(sn, QPT_EQ, qmc_tload(sn, m, w), qpt_const(sn, 0)), total, QPT_NONE);
    return qpt_if(sn, qpt_op(sn, QPT_GT, qmc_tload(sn, m, w), qpt_const(sn, 0)),
        qpt_seq(sn, qpt_add_at(sn, qmc_tword(sn, m, w), qpt_const(sn, -1), 0), last),
        QPT_NONE);
}

static int
place_proc(qmc_ctx_t *c, qm_metric_t *m, uint32_t p, uint64_t row)
{
    size_t mark = c->ndone, ne = 0, nx = 0;
    /* A count that reads retval is made at the returns (its "entry" points, here). */
    qpt_point_t *en = qmc_points_of(c, p, qmc_at_returns(m) ? QPT_EXIT : QPT_ENTRY, &ne),
                *ex = NULL;
    if (qmc_at_returns(m))
        qmc_returns_only(c, en, &ne);
    qpt_snippet_t *sn = qpt_snippet_create();
    int timer = m->kind == QM_WALL || m->kind == QM_CPU, rc = en && sn ? 0 : QPT_ENOMEM;
    if (rc == 0 && timer && (ex = qmc_points_of(c, p, QPT_EXIT, &nx)) == NULL)
        rc = QPT_ENOMEM;
    const char *why = NULL;
    char fwhy[320];
    if (rc == 0 && qmc_resolve_metric_fields(c, p, m, fwhy, sizeof(fwhy)))
        rc = 1, why = fwhy;
    if (rc == 0 && (qmc_at_returns(m) ? ne == 0 : ne != 1))
        rc = 1, why = qmc_at_returns(m) ? "no return to patch" : "no entry to patch";
    /* A shared timer (dyn --time) counts the calls of a procedure with no exit (it never
     * returns, or leaves only by jumps elsewhere) at its entry, with no time, as dyn did
     * before it ran on this engine: said in one note a metric. */
    int untimed = rc == 0 && timer && m->shared && nx == 0;
    c->untimed_last = 0;
    if (rc == 0 && timer && nx == 0 && !untimed)
        rc = 1, why = "no exit to patch";
    qpt_expr_t cond = QPT_NONE;
    if (rc == 0 && m->where != NULL)
        cond = qmc_compile_expr(c, sn, m->where);
    if (rc == 0 && m->inside != NULL)
        cond = cond == QPT_NONE ? qmc_inside_cond(sn, m)
                                : qpt_op(sn, QPT_LAND, cond, qmc_inside_cond(sn, m));
    uint64_t w = m->base + qmc_row_words(m) * row;
    size_t cmark = c->nchk, unfollowed = 0;
    /* P's exits differ (pending at tail jumps, stops at returns): not in a copy. */
    int may_follow = timer && !m->shared && qpt_proc_runs_as_copy(c->s, p) == 0;
    if (rc == 0 && untimed) {
        qpt_expr_t inc = qpt_add_to(sn, m->var + 8 * w + 24, qpt_const(sn, 1),
                                    c->set == NULL || !c->set->hooks.plain);
        if (cond != QPT_NONE)
            inc = qpt_if(sn, cond, inc, QPT_NONE);
        if (qmc_put(c, &en[0], sn, inc, !m->append) != 0)
            rc = 1, why = qpt_error(c->s);
        if (rc == 0 && c->untimed++ == 0)
            snprintf(c->untimed_first, sizeof(c->untimed_first), "%s", qpt_proc_name(c->s, p));
        c->untimed_last = rc == 0;
    } else if (rc == 0 && timer) {
        /* Exits first: a timer that could not stop must not start. */
        for (size_t i = 0; rc == 0 && i < nx; i++) {
            uint64_t callee = 0;
            int follow = 0;
            if (qpt_exit_tail(c->s, &ex[i], &callee) == 1) {
                if (may_follow && (follow = tail_follow(c, m, sn, w, callee, p)) < 0) {
                    rc = follow;
                    break;
                }
                unfollowed += !follow;
            }
            if (follow) {
                /* The outermost call stays pending until its callee returns (the stack
                 * pointer kept); a nested one stops here, covered by the outermost. */
                qpt_expr_t depth = qmc_tload(sn, m, w);
                qpt_expr_t pend = qpt_if(sn, qpt_op(sn, QPT_EQ, depth, qpt_const(sn, 1)),
                    qpt_store_at(sn, qmc_tword(sn, m, w + 3), 8, qpt_sp(sn)),
                    qpt_if(sn, qpt_op(sn, QPT_GT, depth, qpt_const(sn, 1)),
                        qpt_add_at(sn, qmc_tword(sn, m, w), qpt_const(sn, -1), 0),
                        QPT_NONE));
                if (qmc_put(c, &ex[i], sn, pend, !m->append) != 0)
                    rc = 1, why = qpt_error(c->s);
                continue;
            }
            qpt_expr_t stop = m->shared ? qpt_timer_stop(sn, m->var + 8 * w)
                                        : timer_stop(sn, m, w);
            if (qmc_put(c, &ex[i], sn, stop, !m->append) != 0)
                rc = 1, why = qpt_error(c->s);
        }
        /* A shared timer's fourth word counts the calls (dyn --time's calls column). */
        qpt_expr_t start = !m->shared ? timer_start(sn, m, w, cond)
                           : qpt_seq(sn, qpt_timer_start(sn, m->var + 8 * w),
                                     qpt_add_to(sn, m->var + 8 * w + 24, qpt_const(sn, 1),
                                                c->set == NULL || !c->set->hooks.plain));
        if (m->shared && cond != QPT_NONE)
            start = qpt_if(sn, cond, start, QPT_NONE);
        if (rc == 0 && qmc_put(c, &en[0], sn, start, !m->append) != 0)
            rc = 1, why = qpt_error(c->s);
    } else if (rc == 0) {
        qpt_expr_t inc = m->focus == QM_PER_VALUE
            ? qpt_add_at(sn, qpt_key_var(sn, m->kvar, 8, qmc_compile_expr(c, sn, m->key)),
                         qpt_const(sn, 1), 1)
            : qmc_tally(c, sn, m, w);
        if (cond != QPT_NONE)
            inc = qpt_if(sn, cond, inc, QPT_NONE);
        for (size_t i = 0; rc == 0 && i < (qmc_at_returns(m) ? ne : 1); i++)
            if (qmc_put(c, &en[i], sn, inc, !m->append) != 0)
                rc = 1, why = qpt_error(c->s);
    }
    if (rc == 1) {
        qmc_undo_to(c, mark);
        c->nchk = cmark;
        qmc_refusal(c, m, "not measured", qpt_proc_name(c->s, p), why ? why : "?");
    } else if (rc == 0)
        c->tail_unfollowed += unfollowed;
    qpt_snippet_destroy(sn);
    free(en);
    free(ex);
    return rc;
}

/* Is M a timer per call site (timed at the sites: its procedures need not take
 * snippets, a PLT stub's calls are timed)? */
static int
site_timer(const qm_metric_t *m)
{
    return m->focus == QM_PER_SITE && (m->kind == QM_WALL || m->kind == QM_CPU);
}

/* The name of PROC in metric M's rows: the one its pattern (or one of its list's)
 * matches it by, an alias at its entry included; its own otherwise. */
static const char *
proc_label(qmc_ctx_t *c, const qm_metric_t *m, uint32_t proc)
{
    char one[1024];
    for (const char *p = m->pattern; *p;) {
        size_t len = strcspn(p, "\n");
        snprintf(one, sizeof(one), "%.*s", (int)len, p);
        p += len + (p[len] == '\n');
        const char *name = qpt_proc_match_name(c->s, proc, qmc_proc_pattern(one));
        if (name != NULL)
            return name;
    }
    return qpt_proc_name(c->s, proc);
}

/* Does PATTERN (written at LINE:COL of M) match a procedure that can take snippets? */
static int
check_pattern(qmc_ctx_t *c, const qm_metric_t *m, const char *pattern, unsigned line,
    unsigned col, int flags)
{
    size_t n, nref;
    uint32_t *v = qmc_matching(c, m, pattern, &n, &nref, flags);
    if (v == NULL)
        return QPT_ENOMEM;
    free(v);
    if (n > 0)
        return 0;
    /* A list's patterns shown "a, b" (they are joined by '\n'). */
    char shown[512];
    size_t k = 0;
    for (const char *p = pattern; *p && k + 3 < sizeof(shown); p++) {
        if (*p == '\n')
            shown[k++] = ',', shown[k++] = ' ';
        else
            shown[k++] = *p;
    }
    shown[k] = '\0';
    return qm_error_at(m->src, m->origin, line, col, c->why, c->whylen,
                       nref ? "every procedure matching '%s' is left out (see qpt-rewrite "
                              "-v): none can take snippets"
                            : "no procedure matches '%s'",
                       shown);
}

/*
 * A lenient set's metric M (its space in C) whose pattern (its from() pattern, which
 * chooses its call sites, when it has one) no procedure that can take snippets matches:
 * its refusals and (none at all) its pattern told to the hooks, and it is out. 1 then
 * (*RC: 0, or QPT_ENOMEM), else 0 (it is checked as usual).
 */
int
qmc_matches_nothing(qmc_ctx_t *c, qm_metric_t *m, int *rc)
{
    size_t n, nref;
    const char *pattern = m->from != NULL ? m->from : m->pattern;
    int any = m->from != NULL ? QMC_MATCH_ANY : 0;
    uint32_t *v = qmc_matching(c, m, pattern, &n, &nref, any);
    *rc = 0;
    if (v == NULL) {
        *rc = QPT_ENOMEM;
        return 1;
    }
    free(v);
    if (n > 0)
        return 0;
    if (nref > 0
        && (v = qmc_matching(c, m, pattern, &n, &nref, any | QMC_MATCH_NOTE)) != NULL)
        free(v);
    else if (nref == 0 && c->set->hooks.nomatch != NULL && m->instance_of == 0)
        c->set->hooks.nomatch(c->set->hooks.arg, (size_t)(m - c->set->v), pattern, c->s);
    qm_set_off((qm_set_t *)c->set, (size_t)(m - c->set->v));
    return 1;
}

/* Check metric M against the program: its procedures, its inside procedures, its names. */
int
qmc_check_metric(qmc_ctx_t *c, qm_metric_t *m)
{
    const char *lsep = qmc_lib_sep(m->pattern), *isep = qmc_lib_sep(m->inside);
    size_t llen = lsep ? (size_t)(lsep - m->pattern) : 0;
    if (m->inside != NULL && (lsep != NULL || isep != NULL)
        && (lsep == NULL || isep == NULL || (size_t)(isep - m->inside) != llen
            || strncmp(m->pattern, m->inside, llen) != 0))
        return qm_error_at(m->src, m->origin, m->in_line, m->in_col, c->why, c->whylen,
                           "inside() names procedures of the same shared library as the "
                           "metric's (LIB:PROC in both), or of the executable in both");
    if (!qmc_list_in_one_space(m->pattern)
        || (m->inside != NULL && !qmc_list_in_one_space(m->inside)))
        return qm_error_at(m->src, m->origin,
            m->inside != NULL && qmc_list_in_one_space(m->pattern) ? m->in_line
                                                                   : m->pat_line,
            m->inside != NULL && qmc_list_in_one_space(m->pattern) ? m->in_col
                                                                   : m->pat_col,
            c->why, c->whylen,
            "a list's procedures are all of one shared library (LIB:PROC in "
            "each) or all of the executable");
    if (lsep != NULL && m->focus == QM_PER_SITE && m->from == NULL)
        return qm_error_at(m->src, m->origin, m->pat_line, m->pat_col, c->why, c->whylen,
                           "per call site: not for a shared library's procedures (their "
                           "callers are elsewhere; from(LIB:F) names sites inside one)");
    if (m->from != NULL) {
        const char *fsep = qmc_lib_sep(m->from);
        if ((fsep == NULL) != (lsep == NULL)
            || (fsep != NULL && (fsep - m->from != lsep - m->pattern
                                 || strncmp(m->from, m->pattern, (size_t)(fsep - m->from)) != 0)))
            return qm_error_at(m->src, m->origin, m->from_line, m->from_col, c->why, c->whylen,
                               "from() names procedures of the same shared library as the "
                               "metric's (LIB:PROC in both), or of the executable in both");
        QM_CHECK(check_pattern(c, m, m->from, m->from_line, m->from_col, QMC_MATCH_ANY));
    }
    QM_CHECK(check_pattern(c, m, m->pattern, m->pat_line, m->pat_col,
                           site_timer(m) || m->from != NULL ? QMC_MATCH_ANY : 0));
    if (m->inside != NULL)
        QM_CHECK(check_pattern(c, m, m->inside, m->in_line, m->in_col, 0));
    QM_CHECK(qmc_check_expr(c, m, m->key));
    QM_CHECK(qmc_check_expr(c, m, m->value));
    /* retval: counted at the returns, where the arguments are gone. */
    const qm_expr_t *r = NULL, *a;
    if (qmc_uses(m->where, QE_RET, &r) || qmc_uses(m->key, QE_RET, &r)
        || qmc_uses(m->value, QE_RET, &r)) {
        if (m->kind == QM_WALL || m->kind == QM_CPU)
            return qm_error_at(QM_SRC(m, r), QM_ORIGIN(m, r), r->line, r->col, c->why, c->whylen,
                               "retval is for counts (a timer starts before there is one)");
        if (m->focus == QM_PER_SITE)
            return qm_error_at(QM_SRC(m, r), QM_ORIGIN(m, r), r->line, r->col, c->why, c->whylen,
                               "retval with 'per call site': the sites are counted at the "
                               "calls, before there is one");
        if (qmc_uses(m->where, QE_ARG, &a) || qmc_uses(m->key, QE_ARG, &a)
            || qmc_uses(m->value, QE_ARG, &a))
            return qm_error_at(QM_SRC(m, a), QM_ORIGIN(m, a), a->line, a->col, c->why, c->whylen,
                               "an argument with retval: a count that reads retval is made at "
                               "the returns, where the arguments are gone");
    } else if (m->post
        && (qmc_uses(m->where, QE_ARG, &a) || qmc_uses(m->key, QE_ARG, &a)
            || qmc_uses(m->value, QE_ARG, &a)))
        return qm_error_at(QM_SRC(m, a), QM_ORIGIN(m, a), a->line, a->col, c->why, c->whylen,
                           "an argument with 'post': the count is made at the returns, where "
                           "the arguments are gone");
    return qmc_check_expr(c, m, m->where);
}

/* A direct call of a procedure of a per-call-site metric. */
typedef struct site {
    qpt_point_t pt;  /* the call's QPT_CALL point */
    uint32_t callee; /* the procedure called (its arguments' DWARF types) */
    char label[160]; /* caller+0xOFF -> callee */
} site_t;

/*
 * The direct calls of PROCS[N] from every procedure that can take snippets
 * (foreach call site, in MDL's terms): *NS of them (malloc'ed). Calls through pointers
 * have no callee to match, and are not among them.
 */
typedef struct entry {
    uint64_t addr;
    uint32_t proc;
} entry_t;

static int
cmp_entry(const void *a, const void *b)
{
    uint64_t x = ((const entry_t *)a)->addr, y = ((const entry_t *)b)->addr;
    return x < y ? -1 : x > y;
}

/* The sites of metric M (PROCS, N: the procedures its pattern matches): the calls of
 * those procedures, or with from(F) the calls made inside the procedures matching F, to
 * them, or through a pointer (callee UINT32_MAX, "*indirect"). */
static site_t *
call_sites(
    qmc_ctx_t *c, const qm_metric_t *m, const uint32_t *procs, size_t n, size_t *ns)
{
    size_t cap = 16, nfrom = 0, nfref;
    site_t *v = malloc(cap * sizeof(site_t));
    /* The procedures by entry (a PLT stub has no instruction points to find it by). */
    entry_t *ent = malloc((n ? n : 1) * sizeof(entry_t));
    uint32_t *from = m->from != NULL
        ? qmc_matching(c, m, m->from, &nfrom, &nfref, QMC_MATCH_ANY)
        : NULL;
    *ns = 0;
    if (ent == NULL || (m->from != NULL && from == NULL)) {
        free(v);
        free(ent);
        free(from);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        ent[i] = (entry_t) { qpt_proc_entry(c->s, procs[i]), procs[i] };
    qsort(ent, n, sizeof(entry_t), cmp_entry);
    for (uint32_t j = 0; v != NULL && j < (from != NULL ? nfrom : qpt_nprocs(c->s)); j++) {
        uint32_t q = from != NULL ? from[j] : j;
        if (qpt_proc_refusal(c->s, q) != NULL)
            continue;
        size_t np = 0;
        qpt_point_t *pts = qmc_points_of(c, q, QPT_CALL, &np);
        for (size_t k = 0; pts != NULL && k < np; k++) {
            entry_t key = { qpt_point_callee(c->s, &pts[k]), 0 };
            const entry_t *hit = key.addr ? bsearch(&key, ent, n, sizeof(entry_t), cmp_entry) : NULL;
            if (hit == NULL && (from == NULL || key.addr != 0))
                continue;
            uint32_t target = hit != NULL ? hit->proc : UINT32_MAX;
            if (*ns == cap) {
                site_t *w = realloc(v, 2 * cap * sizeof(site_t));
                if (w == NULL)
                    break;
                v = w;
                cap *= 2;
            }
            site_t *s = &v[(*ns)++];
            s->pt = pts[k];
            s->callee = target;
            snprintf(s->label, sizeof(s->label), "%.60s+0x%llx -> %.60s", qpt_proc_name(c->s, q),
                     (unsigned long long)(pts[k].addr - qpt_proc_entry(c->s, q)),
                     target != UINT32_MAX ? qpt_proc_name(c->s, target) : "*indirect");
        }
        free(pts);
    }
    free(ent);
    free(from);
    return v;
}

/* call_sites of M (its procedures PROCS, N), kept in C's memo while a live placement
 * lasts (qmc_memo_warm finds them before the process stops): a copy (malloc'ed). */
static site_t *
metric_sites(
    qmc_ctx_t *c, const qm_metric_t *m, const uint32_t *procs, size_t n, size_t *ns)
{
    const site_t *kept = qmc_memo_sites(c, m, ns);
    site_t *v;
    if (kept != NULL) {
        if ((v = malloc((*ns + 1) * sizeof(site_t))) != NULL)
            memcpy(v, kept, *ns * sizeof(site_t));
        return v;
    }
    if ((v = call_sites(c, m, procs, n, ns)) == NULL || c->memo == NULL)
        return v;
    site_t *copy = malloc((*ns + 1) * sizeof(site_t));
    if (copy != NULL) {
        memcpy(copy, v, *ns * sizeof(site_t));
        qmc_memo_keep_sites(c, m, copy, *ns); /* (not kept: found again) */
    }
    return v;
}

/* The procedures M's patterns match, looked up as its checks and its placement look them
 * up (qmc_matching's flags but the notes), so that C's memo has them: made before the
 * process stops, the stop only finds them. */
void
qmc_memo_warm(qmc_ctx_t *c, const qm_metric_t *m)
{
    size_t n, nref;
    int any = m->from != NULL || site_timer(m) ? QMC_MATCH_ANY : 0;
    free(qmc_matching(c, m, m->pattern, &n, &nref, any));
    if (any && m->from == NULL) /* (qmc_matches_nothing's look) */
        free(qmc_matching(c, m, m->pattern, &n, &nref, 0));
    if (m->from != NULL)
        free(qmc_matching(c, m, m->from, &n, &nref, QMC_MATCH_ANY));
    if (m->inside != NULL)
        free(qmc_matching(c, m, m->inside, &n, &nref, 0));
    if (m->focus == QM_PER_SITE) {
        uint32_t *procs = qmc_matching(c, m, m->pattern, &n, &nref, any);
        size_t ns;
        if (procs != NULL)
            free(metric_sites(c, m, procs, n, &ns));
        free(procs);
    }
}

/* The metric's count at call site S (row ROW); 0, or 1 when it cannot go there. */
static int
place_site(qmc_ctx_t *c, qm_metric_t *m, const site_t *s, uint64_t row)
{
    char fwhy[320];
    const qm_expr_t *f;
    if (s->callee == UINT32_MAX
        && (qmc_uses(m->where, QE_FIELD, &f) || qmc_uses(m->key, QE_FIELD, &f)
            || qmc_uses(m->value, QE_FIELD, &f))) {
        qmc_refusal(c, m, "not measured", s->label,
            "a call through a pointer: no callee whose "
            "types tell the fields");
        return 1;
    }
    if (s->callee != UINT32_MAX
        && qmc_resolve_metric_fields(c, s->callee, m, fwhy, sizeof(fwhy))) {
        qmc_refusal(c, m, "not measured", s->label, fwhy);
        return 1;
    }
    qpt_snippet_t *sn = qpt_snippet_create();
    if (sn == NULL)
        return QPT_ENOMEM;
    qpt_expr_t cond = QPT_NONE;
    if (m->where != NULL)
        cond = qmc_compile_expr(c, sn, m->where); /* the call's arguments */
    if (m->inside != NULL)
        cond = cond == QPT_NONE ? qmc_inside_cond(sn, m)
                                : qpt_op(sn, QPT_LAND, cond, qmc_inside_cond(sn, m));
    uint64_t w = m->base + qmc_row_words(m) * row;
    int rc;
    if (m->kind == QM_WALL || m->kind == QM_CPU) {
        /* A timer from the call to its return: stopped after the call first (a timer
         * that could not stop must not start). */
        qpt_point_t after = s->pt;
        after.kind = QPT_AFTER_CALL;
        size_t mark = c->ndone;
        rc = qmc_put(c, &after, sn, timer_stop(sn, m, w), !m->append) != 0
             || qmc_put(c, &s->pt, sn, timer_start(sn, m, w, cond), !m->append) != 0;
        if (rc)
            qmc_undo_to(c, mark);
    } else {
        qpt_expr_t inc = qmc_tally(c, sn, m, w);
        if (cond != QPT_NONE)
            inc = qpt_if(sn, cond, inc, QPT_NONE);
        rc = qmc_put(c, &s->pt, sn, inc, !m->append) != 0;
    }
    if (rc == 1)
        qmc_refusal(c, m, "not measured", s->label, qpt_error(c->s));
    qpt_snippet_destroy(sn);
    return rc;
}

int
qmc_place_metric(qmc_ctx_t *c, qm_metric_t *m)
{
    size_t n, nref, nsites = 0;
    uint32_t *procs = qmc_matching(c, m, m->pattern, &n, &nref,
        m->from != NULL ? QMC_MATCH_ANY
                        : QMC_MATCH_NOTE | (site_timer(m) ? QMC_MATCH_ANY : 0));
    site_t *sites = NULL;
    int timer = m->kind == QM_WALL || m->kind == QM_CPU;
    if (procs == NULL)
        return QPT_ENOMEM;
    int rc = 0;
    if (m->focus == QM_PER_SITE) {
        /* foreach call site: the rows are the direct calls of the procedures. */
        if ((sites = metric_sites(c, m, procs, n, &nsites)) == NULL)
            rc = QPT_ENOMEM;
        else if (timer && nsites == 0)
            rc = qm_error_at(m->src, m->origin, m->pat_line, m->pat_col, c->why, c->whylen,
                             "no direct call of a procedure matching '%s' to time (a timer "
                             "per call site times the calls)", m->pattern);
        /* ... and for counts and sums one more: every call, at the procedures' entries,
         * for the calls that have no site (through pointers, tail calls): that row, less
         * the sites'. (Timers have none: a time less the sites' is not the others' time
         * under recursion.) */
        n = nsites + (!timer && m->from == NULL); /* (from(): the sites are all) */
    }
    /* Per value: the counts are a keyed variable (kvar); the thread's block holds only
     * the inside state. */
    int by_proc = m->focus == QM_PER_PROC || m->focus == QM_PER_MODULE || m->focus == QM_PER_SITE;
    size_t rows = by_proc ? n : m->focus == QM_PER_VALUE ? 0 : 1;
    uint64_t wpr = qmc_row_words(m);
    /* (A shared timer's words are the process's: no per-thread block.) */
    m->per_thread = (m->kind != QM_COUNT && !m->shared) || m->inside != NULL
                    || m->focus == QM_PER_THREAD || m->by_thread;
    /* (A file's layout does not keep from(): read back, its last site would be taken
     * for the row of the calls without one.) */
    if (rc == 0 && m->from != NULL && !qpt_is_live(c->s))
        rc = qm_error_at(m->src, m->origin, m->from_line, m->from_col, c->why, c->whylen,
                         "from() is for a live process (dyn), not a file, for now");
    if (rc == 0 && m->shared && !qpt_is_live(c->s))
        rc = qm_error_at(m->src, m->origin, m->shared_line, m->shared_col, c->why, c->whylen,
                         "'shared' timers are for a live process (dyn), not a file");
    /* A CPU timer's block starts with the thread's kernel id (after the inside state):
     * a reader outside the process finds the running part of an active call with it. */
    m->base = (m->inside != NULL ? 3 : 0) + (m->kind == QM_CPU ? 1 : 0);
    m->stride = 8 * (m->base + rows * wpr);
    m->procs = calloc(n + 1, sizeof(qm_proc_t));
    if (m->procs == NULL)
        rc = QPT_ENOMEM;
    /* A library's rows are named LIB:PROC, as dyn --count names them. */
    const char *lsep = qmc_lib_sep(m->pattern);
    int llen = lsep ? (int)(lsep - m->pattern) : 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        /* (the line table is read only for per module: libc's takes 0.1 s) */
        const char *mod = sites || m->focus != QM_PER_MODULE ? NULL
                                                               : qpt_proc_module(c->s, procs[i]);
        const char *label = !sites ? proc_label(c, m, procs[i])
                            : i < nsites ? sites[i].label
                                         : "other calls (through pointers, tail calls)";
        char full[512], lib[256];
        /* (named by the library's file as mapped: libqv.so.0.8.6 for libqv.so.0) */
        const char *lname = qpt_library_name(c->s);
        if (lsep != NULL && lname != NULL) {
            snprintf(full, sizeof(full), "%s:%s", lname, label);
            label = full;
            snprintf(lib, sizeof(lib), "%s", lname);
        } else if (lsep != NULL) {
            snprintf(full, sizeof(full), "%.*s:%s", llen, m->pattern, label);
            label = full;
            snprintf(lib, sizeof(lib), "%.*s", llen, m->pattern);
            if (mod == NULL) /* no source file known: per module, the library */
                mod = lib;
        }
        m->procs[i].index = sites ? UINT32_MAX : procs[i];
        if ((m->procs[i].name = strdup(label)) == NULL
            || (m->focus == QM_PER_MODULE
                && (m->procs[i].module = strdup(mod ? mod : "?")) == NULL))
            rc = QPT_ENOMEM;
        m->nprocs = i + 1;
    }
    if (rc == 0 && m->focus == QM_PER_VALUE
        && (rc = qpt_alloc_per_thread(c->s, 8, &m->kvar)) < 0)
        snprintf(c->why, c->whylen, "%s: %s", m->name, qpt_error(c->s));
    if (rc == 0 && m->focus == QM_PER_VALUE && !m->per_thread) {
        /* nothing per thread */
    } else if (rc == 0 && m->per_thread) {
        if (m->stride > 65536 || QPT_PER_THREAD_SIZE(m->stride) > QMC_MAX_PER_THREAD)
            rc = qm_error_at(m->src, m->origin, m->pat_line, m->pat_col, c->why, c->whylen,
                             "%zu procedures match '%s': %llu bytes of state a thread is too "
                             "much for a per-thread metric (narrow the pattern, or use 'total')",
                             n, m->pattern, (unsigned long long)m->stride);
        else if ((rc = qpt_alloc_per_thread(c->s, m->stride, &m->var)) < 0)
            snprintf(c->why, c->whylen, "%s: %s", m->name, qpt_error(c->s));
    } else if (rc == 0 && qmc_per_cpu(c, m, words_bytes(rows * wpr))) {
        m->var = m->cpu.addr;
    } else if (rc == 0 && (rc = qpt_alloc(c->s, words_bytes(rows * wpr), &m->var)) < 0)
        snprintf(c->why, c->whylen, "%s: %s", m->name, qpt_error(c->s));
    /* The inside state first: the metric's own snippets then go before it. */
    if (rc == 0 && m->inside != NULL) {
        size_t nq, nqref, kept = 0;
        uint32_t *qs = qmc_matching(c, m, m->inside, &nq, &nqref, QMC_MATCH_NOTE);
        if (qs == NULL)
            rc = QPT_ENOMEM;
        for (size_t i = 0; rc == 0 && i < nq; i++) {
            int r = place_inside(c, m, qs[i]);
            if (r < 0)
                rc = r;
            kept += r == 0;
        }
        free(qs);
        if (rc == 0 && kept == 0)
            rc = qm_error_at(m->src, m->origin, m->in_line, m->in_col, c->why, c->whylen,
                             "no procedure matching '%s' can be followed (see the notes)",
                             m->inside);
    }
    size_t measured = 0;
    for (size_t i = 0; rc == 0 && i < (sites ? nsites : n); i++) {
        int r = sites ? place_site(c, m, &sites[i], i) : place_proc(c, m, procs[i], by_proc ? i : 0);
        if (r < 0)
            rc = r;
        m->procs[i].measured = r == 0;
        m->procs[i].untimed = r == 0 && !sites && c->untimed_last;
        measured += r == 0;
    }
    if (sites != NULL && rc == 0 && !timer && m->from == NULL) {
        /* Every call of the procedures, in the last row: all of their entries must take
         * it, or the row says "not measured". (from(): the sites are all the rows; no
         * such row, nor a snippet at every entry the pattern names.) */
        size_t nprocs_all = 0, kept = 0;
        uint32_t *all = qmc_matching(c, m, m->pattern, &nprocs_all, &nref, 0);
        for (size_t k = 0; all != NULL && rc == 0 && k < nprocs_all; k++) {
            int r = place_proc(c, m, all[k], nsites);
            if (r < 0)
                rc = r;
            kept += r == 0;
        }
        m->procs[nsites].measured = all != NULL && kept == nprocs_all;
        free(all);
    }
    if (rc == 0 && measured == 0 && !c->set->hooks.lenient)
        rc = qm_error_at(m->src, m->origin, m->pat_line, m->pat_col, c->why, c->whylen,
                         "no procedure matching '%s' can be measured (see the notes)",
                         m->pattern);
    /* A process's timers: the calls under way when they go in are taken up after the
     * commit (qm_catch_up). */
    m->catch_up = rc == 0 && qpt_is_live(c->s) && (m->kind == QM_WALL || m->kind == QM_CPU)
                  && m->inside == NULL && sites == NULL;
    /* (A shared timer stops at every tail call: said in qpt-metrics(5), not each time.) */
    if (rc == 0 && c->tail_unfollowed > 0 && !m->shared)
        qmc_notef(c,
            "%s: %zu tail call%s end%s the caller's time at the jump (the callee is "
            "reached through a pointer, is in another module, or cannot take snippets)",
            m->name, c->tail_unfollowed, c->tail_unfollowed == 1 ? "" : "s",
            c->tail_unfollowed == 1 ? "s" : "");
    c->tail_unfollowed = 0;
    if (rc == 0 && c->untimed > 0)
        qmc_notef(c,
            "%s: %zu procedure%s with no exit to patch (%s%s: never returning, or "
            "leaving "
            "only by jumps elsewhere): %s calls counted, not timed (0 ms)",
            m->name, c->untimed, c->untimed == 1 ? "" : "s", c->untimed_first,
            c->untimed > 1 ? ", ..." : "", c->untimed == 1 ? "its" : "their");
    c->untimed = 0;
    c->untimed_last = 0;
    c->nchk = 0;
    free(procs);
    free(sites);
    return rc;
}
