/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A set's metrics in a space and out of it again: qm_insert and qm_remove, what they
 * give back (qm_take_back, qm_release, qm_forget), the states and the procedures of the
 * metrics placed, and the points a commit could not install (qm_drop_refused).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/qm_priv.h"

/* What qm_insert gave M, taken back (its insertions are removed by the caller): its
 * memory in the process, its handles, its procedures; M is parsed again. */
static void
unplace(const qm_set_t *set, qm_metric_t *m, qpt_space_t *s)
{
    s = qmc_space_of(set, m, s);
    if (m->var != 0)
        qpt_free(s, m->var); /* a process's memory: not kept for nothing */
    if (m->kvar != 0)
        qpt_free(s, m->kvar);
    m->var = m->kvar = 0;
    memset(&m->cpu, 0, sizeof(m->cpu));
    free(m->handles);
    m->handles = NULL;
    m->nhandles = 0;
    free(m->tail_pairs);
    m->tail_pairs = NULL;
    m->ntail_pairs = 0;
    for (size_t k = 0; k < m->nprocs; k++) {
        free(m->procs[k].name);
        free(m->procs[k].module);
    }
    free(m->procs);
    m->procs = NULL;
    m->nprocs = 0;
    m->state = QM_PARSED;
}

int
qm_insert(qm_set_t *set, qpt_space_t *s, qm_note_fn note, void *arg, char *why, size_t whylen)
{
    char dummy[8];
    if (why == NULL || whylen == 0) {
        why = dummy;
        whylen = sizeof(dummy);
    }
    why[0] = '\0';
    if (set == NULL || s == NULL)
        return QPT_EINVAL;
    qmc_ctx_t c = { .s = s,
        .note = note,
        .arg = arg,
        .why = why,
        .whylen = whylen,
        .set = set,
        .memo = set->memo,
        .cpu_said = &set->cpu_said };
    int rc = 0;
    /* The metrics parsed since the last call. Everything that can be wrong with their
     * text, before anything is inserted. */
    for (size_t i = 0; rc == 0 && i < set->n; i++)
        if (set->v[i].state == QM_PARSED) {
            qm_metric_t *m = &set->v[i];
            char lwhy[1024] = "";
            if ((c.s = qm_space(set, i, s, lwhy, sizeof(lwhy))) == NULL && set->hooks.lenient) {
                /* (a library not loaded, in a process that cannot load one) */
                if (set->hooks.nomatch != NULL)
                    set->hooks.nomatch(set->hooks.arg, i, m->pattern, NULL);
                qm_set_off(set, i);
            } else if (c.s == NULL)
                rc = qm_error_at(m->src, m->origin, m->pat_line, m->pat_col, why, whylen,
                                 "%s", lwhy);
            /* (A library glob's metric in one library: quietly out where it matches
             * nothing, as in most libraries.) */
            else if ((!set->hooks.lenient && m->instance_of == 0)
                || !qmc_matches_nothing(&c, m, &rc))
                rc = qmc_check_metric(&c, m);
        }
    size_t *mark = calloc(set->n + 1, sizeof(size_t));
    if (mark == NULL)
        rc = QPT_ENOMEM;
    for (size_t i = 0; rc == 0 && i < set->n; i++)
        if (set->v[i].state == QM_PARSED) {
            mark[i] = c.ndone;
            c.s = qmc_space_of(set, &set->v[i], s);
            rc = qmc_place_metric(&c, &set->v[i]);
        }
    for (size_t i = 0; rc == 0 && i < set->n; i++) {
        qm_metric_t *m = &set->v[i];
        if (m->state != QM_PARSED)
            continue;
        /* Its insertions: from its mark to the next placed metric's. */
        size_t to = c.ndone, n;
        for (size_t j = i + 1; j < set->n; j++)
            if (set->v[j].state == QM_PARSED) {
                to = mark[j];
                break;
            }
        n = to - mark[i];
        if ((m->handles = malloc((n + 1) * sizeof(qpt_handle_t))) == NULL) {
            rc = QPT_ENOMEM;
            break;
        }
        memcpy(m->handles, c.done + mark[i], n * sizeof(qpt_handle_t));
        m->nhandles = n;
    }
    if (rc < 0) {
        qmc_undo_to(&c, 0);
        for (size_t i = 0; i < set->n; i++) {
            if (set->v[i].state == QM_PARSED)
                unplace(set, &set->v[i], s);
        }
        if (why[0] == '\0')
            snprintf(why, whylen, "%s", qpt_strerror(rc));
    } else {
        for (size_t i = 0; i < set->n; i++)
            if (set->v[i].state == QM_PARSED)
                set->v[i].state = QM_ON;
        set->placed = 1;
    }
    free(mark);
    free(c.done);
    free(c.dspace);
    free(c.chk);
    free(c.last_named);
    return rc;
}

void
qm_memo_warm(qm_set_t *set, size_t i, qpt_space_t *s)
{
    char lwhy[8];
    if (set->memo == NULL || (s = qm_space(set, i, s, lwhy, sizeof(lwhy))) == NULL)
        return;
    qmc_ctx_t c = { .s = s, .set = set, .memo = set->memo };
    qmc_memo_warm(&c, &set->v[i]);
    free(c.last_named);
}

int
qm_metric_procs(const qm_set_t *set, size_t i, qpt_space_t *s, uint32_t **procs, size_t *n)
{
    if (set == NULL || s == NULL || procs == NULL || n == NULL || i >= set->n)
        return QPT_EINVAL;
    const qm_metric_t *m = &set->v[i];
    char lwhy[8];
    if ((s = qm_space(set, i, s, lwhy, sizeof(lwhy))) == NULL)
        return QPT_ENOTFOUND;
    qmc_ctx_t c = { .s = s, .memo = set->memo };
    size_t np, nq = 0, nref;
    uint32_t *p = qmc_matching(&c, m, m->pattern, &np, &nref, 0), *q = NULL;
    if (p != NULL && m->inside != NULL)
        q = qmc_matching(&c, m, m->inside, &nq, &nref, 0);
    uint32_t *v = malloc((np + nq + 1) * sizeof(uint32_t));
    free(c.last_named);
    if (p == NULL || (m->inside != NULL && q == NULL) || v == NULL) {
        free(p);
        free(q);
        free(v);
        return QPT_ENOMEM;
    }
    /* Both lists are in procedure order: merged, without repeats. */
    size_t a = 0, b = 0, k = 0;
    while (a < np || b < nq) {
        uint32_t x = b >= nq || (a < np && p[a] <= q[b]) ? p[a] : q[b];
        v[k++] = x;
        while (a < np && p[a] == x)
            a++;
        while (b < nq && q[b] == x)
            b++;
    }
    free(p);
    free(q);
    *procs = v;
    *n = k;
    return 0;
}

int
qm_metric_predict(const qm_set_t *set, size_t i, qpt_space_t *s,
                  uint64_t (*calls)(void *arg, uint64_t entry), void *arg, double cpn,
                  double *ns, uint64_t *ncalls, size_t *ncalled)
{
    if (set == NULL || s == NULL || calls == NULL || ns == NULL || ncalls == NULL
        || ncalled == NULL || cpn <= 0)
        return QPT_EINVAL;
    uint32_t *procs;
    size_t n;
    QM_CHECK(qm_metric_procs(set, i, s, &procs, &n));
    double *cycles = calloc(n + 1, sizeof(double));
    if (cycles == NULL) {
        free(procs);
        return QPT_ENOMEM;
    }
    int rc = qm_metric_cost(set, i, s, procs, n, cycles);
    *ns = 0;
    *ncalls = 0;
    *ncalled = 0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        uint64_t c
            = calls(arg, qpt_proc_entry(qmc_space_of(set, &set->v[i], s), procs[k]));
        *ns += (double)c * cycles[k] / cpn;
        *ncalls += c;
        *ncalled += c > 0;
    }
    free(cycles);
    free(procs);
    return rc;
}

int
qm_take_back(qm_set_t *set, size_t i, qpt_space_t *s)
{
    if (set == NULL || i >= set->n || set->v[i].state != QM_ON)
        return QPT_EINVAL;
    qm_metric_t *m = &set->v[i];
    for (size_t k = 0; k < m->nhandles; k++)
        qpt_remove(qmc_space_of(set, m, s), m->handles[k]);
    unplace(set, m, s);
    return 0;
}

int
qm_metric_cost(const qm_set_t *set, size_t i, qpt_space_t *s, const uint32_t *procs,
               size_t nprocs, double *cycles)
{
    if (set == NULL || i >= set->n || set->v[i].state != QM_ON || cycles == NULL)
        return QPT_EINVAL;
    const qm_metric_t *m = &set->v[i];
    s = qmc_space_of(set, m, s);
    for (size_t k = 0; k < nprocs; k++)
        cycles[k] = 0;
    for (size_t k = 0; k < m->nhandles; k++) {
        qpt_point_t pt;
        double c;
        QM_CHECK(qpt_insertion_point(s, m->handles[k], &pt));
        QM_CHECK(qpt_cost_cycles(s, m->handles[k], &c));
        /* The procedure's slot (procs sorted). */
        size_t lo = 0, hi = nprocs;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (procs[mid] < pt.proc)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < nprocs && procs[lo] == pt.proc)
            cycles[lo] += c; /* an exit's snippet runs once a call too */
    }
    return 0;
}

int
qm_remove(qm_set_t *set, size_t i, qpt_space_t *s, char *why, size_t whylen)
{
    if (set == NULL || s == NULL || i >= set->n)
        return QPT_EINVAL;
    qm_metric_t *m = &set->v[i];
    if (m->state != QM_ON) {
        if (why != NULL && whylen > 0)
            snprintf(why, whylen, "%s: not in the program", m->name);
        return QPT_EINVAL;
    }
    s = qmc_space_of(set, m, s);
    for (size_t k = 0; k < m->nhandles; k++) {
        int rc = qpt_remove(s, m->handles[k]);
        if (rc < 0) {
            if (why != NULL && whylen > 0)
                snprintf(why, whylen, "%s: %s", m->name, qpt_error(s));
            return rc;
        }
    }
    m->state = QM_OFF;
    free(m->handles);
    m->handles = NULL;
    m->nhandles = 0;
    free(m->tail_pairs);
    m->tail_pairs = NULL;
    m->ntail_pairs = 0;
    return 0;
}

void
qm_release(qm_set_t *set, qpt_space_t *s)
{
    for (size_t i = 0; set != NULL && i < set->n; i++) {
        qm_metric_t *m = &set->v[i];
        qpt_space_t *ms = m->state == QM_OFF ? qmc_space_of(set, m, s) : s;
        if (m->state == QM_OFF && m->var != 0 && qpt_free(ms, m->var) == 0)
            m->var = 0;
        if (m->state == QM_OFF && m->kvar != 0 && qpt_free(ms, m->kvar) == 0)
            m->kvar = 0;
    }
}

int
qm_state(const qm_set_t *set, size_t i)
{
    return set != NULL && i < set->n ? set->v[i].state : -1;
}

int
qm_wait(qm_set_t *set, size_t i, int wait)
{
    if (set == NULL || i >= set->n
        || set->v[i].state != (wait ? QM_PARSED : QM_WAITING))
        return QPT_EINVAL;
    set->v[i].state = wait ? QM_WAITING : QM_PARSED;
    return 0;
}

int
qm_set_off(qm_set_t *set, size_t i)
{
    if (set == NULL || i >= set->n
        || (set->v[i].state != QM_PARSED && set->v[i].state != QM_WAITING))
        return QPT_EINVAL;
    set->v[i].state = QM_OFF;
    return 0;
}

int
qm_forget(qm_set_t *set, size_t i)
{
    if (set == NULL || i >= set->n
        || (set->v[i].state != QM_ON && set->v[i].state != QM_OFF))
        return QPT_EINVAL;
    qm_metric_t *m = &set->v[i];
    int off = m->state == QM_OFF;
    /* Nothing to free in the process: its memory went with the image (qpt_free would
     * free an address the new image may use). */
    m->var = m->kvar = 0;
    for (size_t k = 0; k < m->nprocs; k++) {
        free(m->procs[k].name);
        free(m->procs[k].module);
    }
    free(m->procs);
    free(m->handles);
    free(m->tail_pairs);
    m->procs = NULL;
    m->handles = NULL;
    m->tail_pairs = NULL;
    m->nprocs = m->nhandles = m->ntail_pairs = 0;
    m->state = off ? QM_OFF : QM_WAITING;
    return 0;
}

int
qm_library_of(const qm_set_t *set, size_t i, char *buf, size_t len)
{
    const char *sep = set != NULL && i < set->n ? qmc_lib_sep(set->v[i].pattern) : NULL;
    if (sep == NULL || buf == NULL || len == 0)
        return -1;
    snprintf(buf, len, "%.*s", (int)(sep - set->v[i].pattern), set->v[i].pattern);
    return 0;
}

size_t
qm_instance_of(const qm_set_t *set, size_t i)
{
    return set != NULL && i < set->n && set->v[i].instance_of > 0 ? set->v[i].instance_of - 1
                                                                    : i;
}

void
qm_drop_parsed(qm_set_t *set)
{
    while (set != NULL && set->n > 0 && set->v[set->n - 1].state == QM_PARSED)
        qm_metric_free(&set->v[--set->n]);
}

/*****************************************************************************
 * A point the commit could not install (qpt_commit_refused)
 */

/* Take procedure P out of metric M (in space SP): its insertions, its row measured no
 * more, a note; then the procedures whose pending tail calls P's returns were to stop. */
static void
drop_proc(const qm_set_t *set, qm_metric_t *m, qpt_space_t *sp, uint32_t p, qm_note_fn note,
          void *arg, const char *why, int depth)
{
    size_t k = 0;
    for (size_t i = 0; i < m->nhandles; i++) {
        qpt_point_t pt;
        if (qpt_insertion_point(sp, m->handles[i], &pt) == 0 && pt.proc == p)
            qpt_remove(sp, m->handles[i]);
        else
            m->handles[k++] = m->handles[i];
    }
    m->nhandles = k;
    for (size_t i = 0; i < m->nprocs; i++)
        if (m->procs[i].index == p && m->procs[i].measured) {
            m->procs[i].measured = 0;
            char full[600];
            const char *pname = qpt_proc_name(sp, p);
            if (qpt_library_name(sp) != NULL) {
                snprintf(full, sizeof(full), "%s:%s", qpt_library_name(sp), pname);
                pname = full;
            }
            if (set->hooks.refused != NULL)
                set->hooks.refused(set->hooks.arg, (size_t)(m - set->v), pname, why);
            else if (note != NULL) {
                char line[700];
                snprintf(line, sizeof(line), "%s: %s not measured: %s", m->name,
                         qpt_proc_name(sp, p), why);
                note(arg, line);
            }
        }
    for (size_t i = 0; depth < 16 && i < m->ntail_pairs; i++)
        if (m->tail_pairs[i].at == p && m->tail_pairs[i].from != p) {
            uint32_t from = m->tail_pairs[i].from;
            m->tail_pairs[i].at = m->tail_pairs[i].from = UINT32_MAX;
            char w2[300];
            snprintf(w2, sizeof(w2), "its tail callee %s could not be measured",
                     qpt_proc_name(sp, p));
            drop_proc(set, m, sp, from, note, arg, w2, depth + 1);
        }
}

int
qm_drop_refused(qm_set_t *set, qpt_space_t *s, qpt_space_t *space, qpt_handle_t h,
                qm_note_fn note, void *arg, const char *why)
{
    qpt_point_t pt;
    if (set == NULL || qpt_insertion_point(space, h, &pt) != 0)
        return QPT_ENOTFOUND;
    /* Every metric with insertions in that procedure leaves it (the point is shared by
     * all of them); an insertion of no metric is a cost counter (qm_costs_drop). */
    int owned = 0, dropped = 0;
    for (size_t i = 0; i < set->n; i++) {
        qm_metric_t *m = &set->v[i];
        if (m->state != QM_ON || qmc_space_of(set, m, s) != space)
            continue;
        int here = 0;
        for (size_t k = 0; k < m->nhandles && !here; k++) {
            qpt_point_t q;
            owned |= m->handles[k] == h;
            here = qpt_insertion_point(space, m->handles[k], &q) == 0 && q.proc == pt.proc;
        }
        for (size_t k = 0; k < m->nhandles && !owned; k++)
            owned = m->handles[k] == h;
        if (here) {
            drop_proc(set, m, space, pt.proc, note, arg, why, 0);
            dropped = 1;
        }
    }
    (void)owned;
    return dropped ? 0 : QPT_ENOTFOUND;
}

void
qm_set_hooks(qm_set_t *set, const qm_hooks_t *hooks)
{
    if (set == NULL)
        return;
    if (hooks != NULL)
        set->hooks = *hooks;
    else
        memset(&set->hooks, 0, sizeof(set->hooks));
}

int
qm_measured(const qm_set_t *set, size_t i, const char ***names, size_t *n)
{
    if (set == NULL || i >= set->n || names == NULL || n == NULL)
        return QPT_EINVAL;
    const qm_metric_t *m = &set->v[i];
    *n = 0;
    if ((*names = malloc((m->nprocs + 1) * sizeof(const char *))) == NULL)
        return QPT_ENOMEM;
    for (size_t k = 0; m->state == QM_ON && k < m->nprocs; k++)
        if (m->procs[k].measured)
            (*names)[(*n)++] = m->procs[k].name;
    return 0;
}
