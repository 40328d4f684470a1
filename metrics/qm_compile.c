/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Metrics into snippets of libqpt's public API, the same for a file and a process.
 *
 * Memory. A metric that needs no per-thread state (a count per procedure or in total,
 * without inside) has one word a row, added to with a locked add. The others have a
 * per-thread variable (qpt_alloc_per_thread), its block: [depth, sp] when constrained by
 * inside(Q), then a word a row (counts), two (values) or four (timers: depth, start,
 * total, the stack pointer of a pending tail call); their
 * adds are plain (each thread its own block) and read back summed over the threads.
 *
 * inside(Q). Each thread keeps the depth of its activations of the procedures matching
 * Q, and the stack pointer and return address of the outermost one. An exit at the
 * outermost stack pointer ends it, an inner exit takes one off. A longjmp or an exception
 * out of Q skips the exits: the activation is taken for gone when the outermost one's
 * return-address slot no longer holds its return address (the caller's later calls
 * overwrite it) or the stack pointer is at or above that slot; an entry then starts
 * anew. A point is inside when an activation is live and the stack pointer is below its
 * slot. (A longjmp out of Q followed by a call through the very same call site to
 * another procedure would look like Q still active: not seen in practice.)
 *
 * Order at a procedure's entry: a metric's own snippets are prepended, the inside state
 * appended, so that `count calls(f) inside(f)` counts the calls made while f is already
 * active (recursion).
 *
 * The parts: this file names a metric's space and procedures (shared libraries) and
 * compiles its expressions and its words; qm_place.c places one metric, qm_insert.c
 * puts a set in and takes it out again (what they share: qm_priv.h, qmc_).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/qm_priv.h"

/*****************************************************************************
 * Shared libraries: a pattern LIB:PROC whose LIB has ".so" in it
 */

/* The ':' of PATTERN after a module that names a shared library, or NULL (a plain name,
 * or a source file's MODULE:PROC). C++'s '::' belongs to the name. */
const char *
qmc_lib_sep(const char *pattern)
{
    const char *colon = pattern ? strchr(pattern, ':') : NULL;
    while (colon != NULL && colon[1] == ':')
        colon = strchr(colon + 2, ':');
    const char *nl = pattern ? strchr(pattern, '\n') : NULL; /* a list: its first pattern */
    if (colon == NULL || colon == pattern || (nl != NULL && colon > nl))
        return NULL;
    for (const char *c = pattern; c + 3 <= colon; c++)
        if (strncmp(c, ".so", 3) == 0)
            return colon;
    return NULL;
}

/* Do the patterns of a list (PATTERN, '\n' between them) all name the same shared
 * library, or all the executable? (A metric is measured in one space.) */
int
qmc_list_in_one_space(const char *pattern)
{
    const char *sep = qmc_lib_sep(pattern);
    size_t llen = sep ? (size_t)(sep - pattern) : 0;
    for (const char *p = strchr(pattern, '\n'); p != NULL; p = strchr(p, '\n')) {
        p++;
        char one[1024];
        snprintf(one, sizeof(one), "%.*s", (int)strcspn(p, "\n"), p);
        const char *s2 = qmc_lib_sep(one);
        if ((s2 == NULL) != (sep == NULL)
            || (sep != NULL && ((size_t)(s2 - one) != llen || strncmp(one, pattern, llen) != 0)))
            return 0;
    }
    return 1;
}

/* PATTERN as its space's procedures are named (a library's without "LIB:"). */
const char *
qmc_proc_pattern(const char *pattern)
{
    const char *sep = qmc_lib_sep(pattern);
    return sep != NULL ? sep + 1 : pattern;
}

qpt_space_t *
qm_space(const qm_set_t *set, size_t i, qpt_space_t *s, char *why, size_t whylen)
{
    char dummy[8], lib[256];
    if (why == NULL || whylen == 0) {
        why = dummy;
        whylen = sizeof(dummy);
    }
    if (set == NULL || i >= set->n || s == NULL)
        return NULL;
    const char *pattern = set->v[i].pattern, *sep = qmc_lib_sep(pattern);
    if (sep == NULL)
        return s;
    snprintf(lib, sizeof(lib), "%.*s", (int)(sep - pattern), pattern);
    qpt_space_t *l = NULL;
    return qpt_library(s, lib, &l, why, whylen) == 0 ? l : NULL;
}

int
qm_is_library(const qm_set_t *set, size_t i)
{
    return set != NULL && i < set->n && qmc_lib_sep(set->v[i].pattern) != NULL;
}

/* The space of M (once placed its library's space is open: never NULL then). */
qpt_space_t *
qmc_space_of(const qm_set_t *set, const qm_metric_t *m, qpt_space_t *s)
{
    qpt_space_t *l = qm_space(set, (size_t)(m - set->v), s, NULL, 0);
    return l != NULL ? l : s;
}

void
qmc_notef(qmc_ctx_t *c, const char *fmt, ...)
{
    if (c->note == NULL)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    c->note(c->arg, buf);
}

/* Procedure PROC (a name or a call site's label) left out of metric M because of WHY:
 * told to the front end's hook, or a note "M: PROC WHAT: WHY". */
void
qmc_refusal(qmc_ctx_t *c, const qm_metric_t *m, const char *what, const char *proc,
    const char *why)
{
    char full[600];
    const char *lname = qpt_library_name(c->s);
    if (lname != NULL && qmc_lib_sep(m->pattern) != NULL && strchr(proc, ':') == NULL) {
        snprintf(full, sizeof(full), "%s:%s", lname, proc); /* as its row is named */
        proc = full;
    }
    if (c->set != NULL && c->set->hooks.refused != NULL)
        c->set->hooks.refused(c->set->hooks.arg, (size_t)(m - c->set->v), proc, why);
    else
        qmc_notef(c, "%s: %s %s: %s", m->name, proc, what, why);
}

/*
 * The procedures whose name matches PATTERN (by its own name, or an alias at its entry:
 * malloc for __libc_malloc), in order, into *N: a scan of every procedure's names. While
 * a live placement lasts (qm_memo_begin), each scan is kept for the next look at the
 * same pattern in the same space: the placement looks twice (the cost counters' procedures,
 * then the metric's), and the search's first look is made before the process stops. The
 * array belongs to the memo, or to C (freed at the next call without one).
 */
struct qm_memo {
    struct memo_entry {
        const qpt_space_t *s;
        char *pattern;
        int lenient;
        uint32_t *v;
        size_t n;
    } *v;
    size_t n;
    struct match_entry { /* qmc_matching's results without notes */
        const qpt_space_t *s;
        char *pattern;
        int lenient, flags;
        uint32_t *v;
        size_t n, nref;
        const char **refused; /* the names of the NREF refused (their notes), or NULL:
                               * found again for the notes (a list) */
        uint32_t *ref;        /* ... their procedures */
    } *m;
    size_t nm;
    struct sites_entry { /* a per-call-site metric's sites (qm_place.c's call_sites) */
        const qpt_space_t *s;
        const qm_metric_t *metric;
        struct site *v;
        size_t n;
    } *st;
    size_t nst;
    size_t scans; /* scans of the procedures' names made (qm_memo_scans) */
};

size_t
qm_memo_scans(const qm_memo_t *memo)
{
    return memo != NULL ? memo->scans : 0;
}

struct site *
qmc_memo_sites(qmc_ctx_t *c, const qm_metric_t *m, size_t *n)
{
    for (size_t k = 0; c->memo != NULL && k < c->memo->nst; k++)
        if (c->memo->st[k].s == c->s && c->memo->st[k].metric == m) {
            *n = c->memo->st[k].n;
            return c->memo->st[k].v;
        }
    return NULL;
}

int
qmc_memo_keep_sites(qmc_ctx_t *c, const qm_metric_t *m, struct site *v, size_t n)
{
    qm_memo_t *memo = c->memo;
    struct sites_entry *w = realloc(memo->st, (memo->nst + 1) * sizeof(*w));
    if (w == NULL) {
        free(v);
        return QPT_ENOMEM;
    }
    memo->st = w;
    memo->st[memo->nst++] = (struct sites_entry) { c->s, m, v, n };
    return 0;
}

static const uint32_t *
named_procs(qmc_ctx_t *c, const char *pattern, size_t *n)
{
    int lenient = c->set != NULL && c->set->hooks.lenient;
    qm_memo_t *memo = c->memo;
    for (size_t k = 0; memo != NULL && k < memo->n; k++)
        if (memo->v[k].s == c->s && memo->v[k].lenient == lenient
            && strcmp(memo->v[k].pattern, pattern) == 0) {
            *n = memo->v[k].n;
            return memo->v[k].v;
        }
    uint32_t np = qpt_nprocs(c->s);
    uint32_t *v = malloc((np + 1) * sizeof(uint32_t));
    if (v == NULL)
        return NULL;
    *n = 0;
    for (uint32_t i = 0; i < np; i++) {
        const char *name = qpt_proc_match_name(c->s, i, pattern);
        if (qpt_proc_name(c->s, i) == NULL || name == NULL)
            continue;
        /* A lenient set's (dyn --count's) PLT stub is matched by its own name, never by
         * the symbol of the function it calls (malloc@plt is not `malloc`). */
        size_t len = strlen(qpt_proc_name(c->s, i));
        if (lenient && name != qpt_proc_name(c->s, i) && len > 4
            && strcmp(qpt_proc_name(c->s, i) + len - 4, "@plt") == 0)
            continue;
        v[(*n)++] = i;
    }
    struct memo_entry *e = memo != NULL ? realloc(memo->v, (memo->n + 1) * sizeof(*e)) : NULL;
    char *copy = e != NULL ? strdup(pattern) : NULL;
    if (e != NULL)
        memo->v = e;
    if (copy == NULL) {
        free(c->last_named);
        return c->last_named = v;
    }
    memo->v[memo->n++] = (struct memo_entry) { c->s, copy, lenient, v, *n };
    return v;
}

qm_memo_t *
qm_memo_new(void)
{
    return calloc(1, sizeof(qm_memo_t));
}

void
qm_memo_free(qm_memo_t *memo)
{
    for (size_t k = 0; memo != NULL && k < memo->n; k++) {
        free(memo->v[k].pattern);
        free(memo->v[k].v);
    }
    for (size_t k = 0; memo != NULL && k < memo->nm; k++) {
        free(memo->m[k].pattern);
        free(memo->m[k].v);
        free(memo->m[k].refused);
        free(memo->m[k].ref);
    }
    for (size_t k = 0; memo != NULL && k < memo->nst; k++)
        free(memo->st[k].v);
    if (memo != NULL) {
        free(memo->v);
        free(memo->m);
        free(memo->st);
    }
    free(memo);
}

static uint32_t *match_scan(qmc_ctx_t *c, const qm_metric_t *m, const char *pattern,
    size_t *n, size_t *nrefused, int flags, uint32_t *ref, const char **refused);

/* The procedures matching PATTERN that can take snippets (with QMC_MATCH_ANY: every one);
 * *N of them (malloc'ed). The ones refused are told in notes with QMC_MATCH_NOTE. A
 * list's patterns each. While a live placement lasts (C's memo), the result without
 * notes is kept for the next look at the same pattern with the same flags (the checks,
 * the call sites and the placement look three or four times; qm_memo_warm looks first,
 * before the process stops); with notes it is the same when none was refused. */
uint32_t *
qmc_matching(qmc_ctx_t *c, const qm_metric_t *m, const char *pattern, size_t *n,
    size_t *nrefused, int flags)
{
    qm_memo_t *memo = c->memo;
    if (memo == NULL)
        return match_scan(c, m, pattern, n, nrefused, flags, NULL, NULL);
    int lenient = c->set != NULL && c->set->hooks.lenient, quiet = flags & ~QMC_MATCH_NOTE;
    const struct match_entry *e = NULL;
    for (size_t k = 0; e == NULL && k < memo->nm; k++)
        if (memo->m[k].s == c->s && memo->m[k].lenient == lenient
            && memo->m[k].flags == quiet && strcmp(memo->m[k].pattern, pattern) == 0)
            e = &memo->m[k];
    if (e == NULL) {
        uint32_t np = qpt_nprocs(c->s);
        struct match_entry ne = { c->s, strdup(pattern), lenient, quiet, NULL, 0, 0,
            strchr(pattern, '\n') == NULL ? malloc((np + 1) * sizeof(char *)) : NULL,
            malloc((np + 1) * sizeof(uint32_t)) };
        struct match_entry *w = NULL;
        /* The scan first: a list's scan adds its patterns' entries to the memo, so the
         * memo grows for this entry only after it. */
        if (ne.pattern == NULL || ne.ref == NULL
            || (ne.v = match_scan(c, m, pattern, &ne.n, &ne.nref, quiet, ne.ref, ne.refused))
                == NULL
            || (w = realloc(memo->m, (memo->nm + 1) * sizeof(*w))) == NULL) {
            free(ne.pattern);
            free(ne.ref);
            free(ne.refused);
            free(ne.v);
            return NULL;
        }
        memo->m = w;
        memo->m[memo->nm] = ne;
        e = &memo->m[memo->nm++];
    }
    if ((flags & QMC_MATCH_NOTE) && e->nref > 0 && e->refused == NULL)
        return match_scan(c, m, pattern, n, nrefused, flags, NULL, NULL); /* (its notes) */
    for (size_t k = 0; (flags & QMC_MATCH_NOTE) && k < e->nref; k++)
        qmc_refusal(c, m, "left out", e->refused[k], qpt_proc_refusal(c->s, e->ref[k]));
    uint32_t *v = malloc((e->n + 1) * sizeof(uint32_t));
    if (v == NULL)
        return NULL;
    memcpy(v, e->v, e->n * sizeof(uint32_t));
    *n = e->n;
    *nrefused = e->nref;
    return v;
}

/* qmc_matching, each time a scan; the refused (not a list's) and their names into REF
 * and REFUSED (may be NULL; room for every procedure). */
static uint32_t *
match_scan(qmc_ctx_t *c, const qm_metric_t *m, const char *pattern, size_t *n,
    size_t *nrefused, int flags, uint32_t *ref, const char **refused)
{
    if (c->memo != NULL)
        c->memo->scans++;
    if (strchr(pattern, '\n') != NULL) {
        /* A list: the union of its patterns', in procedure order, without repeats. */
        uint32_t np = qpt_nprocs(c->s);
        uint32_t *v = malloc((np + 1) * sizeof(uint32_t));
        char *seen = calloc(np + 1, 1);
        *n = *nrefused = 0;
        char one[1024];
        for (const char *p = pattern; v != NULL && seen != NULL && *p;) {
            size_t len = strcspn(p, "\n"), k, kref;
            snprintf(one, sizeof(one), "%.*s", (int)len, p);
            p += len + (p[len] == '\n');
            uint32_t *w = qmc_matching(c, m, one, &k, &kref, flags);
            if (w == NULL) {
                free(v);
                v = NULL;
                break;
            }
            *nrefused += kref;
            for (size_t j = 0; j < k; j++)
                seen[w[j]] = 1;
            free(w);
        }
        for (uint32_t i = 0; v != NULL && seen != NULL && i < np; i++)
            if (seen[i])
                v[(*n)++] = i;
        if (seen == NULL) {
            free(v);
            v = NULL;
        }
        free(seen);
        return v;
    }
    uint32_t np = qpt_nprocs(c->s);
    uint32_t *v = malloc((np + 1) * sizeof(uint32_t));
    *n = *nrefused = 0;
    if (v == NULL)
        return NULL;
    /* NAME or MODULE:NAME (qpt_proc_match: modules are source files); a library's
     * procedures by their names in its space. */
    pattern = qmc_proc_pattern(pattern);
    size_t nnamed;
    const uint32_t *named = named_procs(c, pattern, &nnamed);
    if (named == NULL) {
        free(v);
        return NULL;
    }
    for (size_t k = 0; k < nnamed; k++) {
        uint32_t i = named[k];
        const char *name = qpt_proc_match_name(c->s, i, pattern);
        const char *no = (flags & QMC_MATCH_ANY) ? NULL : qpt_proc_refusal(c->s, i);
        qpt_cfg_t cfg;
        /* A lenient set's glob (dyn --all, --count 'lib_*') leaves cold fragments out
         * unsaid: their calls are their parents'. */
        if (no != NULL && c->set != NULL && c->set->hooks.lenient
            && strpbrk(pattern, "*?[") != NULL && qpt_proc_cfg(c->s, i, &cfg) == QPT_EUNSUPP)
            continue;
        if (no != NULL) {
            if (ref != NULL && refused != NULL) {
                ref[*nrefused] = i;
                refused[*nrefused] = name;
            }
            (*nrefused)++;
            if (flags & QMC_MATCH_NOTE)
                qmc_refusal(c, m, "left out", name, no);
            continue;
        }
        v[(*n)++] = i;
    }
    /* A plain name that no procedure is called by may be another name of one (a weak
     * alias: pthread_mutex_lock for ___pthread_mutex_lock): the symbol's procedure. */
    uint64_t a, size;
    if (*n == 0 && *nrefused == 0 && strpbrk(pattern, "*?[") == NULL
        && (c->set == NULL || !c->set->hooks.lenient)
        && qpt_symbol(c->s, pattern, &a, &size) == 0) {
        for (uint32_t i = 0; i < np; i++)
            if (qpt_proc_entry(c->s, i) == a) {
                const char *no
                    = (flags & QMC_MATCH_ANY) ? NULL : qpt_proc_refusal(c->s, i);
                if (no != NULL) {
                    if (ref != NULL && refused != NULL) {
                        ref[*nrefused] = i;
                        refused[*nrefused] = qpt_proc_name(c->s, i);
                    }
                    (*nrefused)++;
                    if (flags & QMC_MATCH_NOTE)
                        qmc_refusal(c, m, "left out", qpt_proc_name(c->s, i), no);
                } else
                    v[(*n)++] = i;
                break;
            }
    }
    return v;
}

static int
remember(qmc_ctx_t *c, qpt_handle_t h)
{
    if (c->ndone == c->capdone) {
        size_t cap = c->capdone ? 2 * c->capdone : 64;
        qpt_handle_t *v = realloc(c->done, cap * sizeof(*v));
        if (v == NULL)
            return QPT_ENOMEM;
        c->done = v;
        qpt_space_t **w = realloc(c->dspace, cap * sizeof(*w));
        if (w == NULL)
            return QPT_ENOMEM;
        c->dspace = w;
        c->capdone = cap;
    }
    c->dspace[c->ndone] = c->s;
    c->done[c->ndone++] = h;
    return 0;
}

/* Insert E at PT (FIRST: before the others there); 0, or the refusal (a note's matter). */
int
qmc_put(qmc_ctx_t *c, const qpt_point_t *pt, qpt_snippet_t *sn, qpt_expr_t e, int first)
{
    qpt_handle_t h;
    int rc = first ? qpt_insert_first(c->s, pt, sn, e, &h) : qpt_insert(c->s, pt, sn, e, &h);
    if (rc == 0)
        QM_CHECK(remember(c, h));
    return rc;
}

/*****************************************************************************
 * Expressions
 */

/* Does E read OP (QE_ARG, QE_RET)? The first such node into *AT. */
int
qmc_uses(const qm_expr_t *e, int op, const qm_expr_t **at)
{
    if (e == NULL)
        return 0;
    if (e->op == op) {
        *at = e;
        return 1;
    }
    return qmc_uses(e->a, op, at) || qmc_uses(e->b, op, at);
}

/* Is M counted at its procedures' returns (its condition or value reads retval)? */
int
qmc_at_returns(const qm_metric_t *m)
{
    const qm_expr_t *at;
    return m->post || qmc_uses(m->where, QE_RET, &at) || qmc_uses(m->key, QE_RET, &at)
           || qmc_uses(m->value, QE_RET, &at);
}

/* Resolve the fields (argN->f) of E for procedure P from its DWARF types: 0, or 1 with
 * the reason in WHY. */
static int
resolve_fields(qmc_ctx_t *c, uint32_t p, qm_expr_t *e, char *why, size_t whylen)
{
    if (e == NULL)
        return 0;
    if (e->op == QE_FIELD) {
        char r[200];
        if (qpt_arg_field(c->s, p, (int)e->num, e->name, &e->field, r, sizeof(r)) != 0) {
            snprintf(why, whylen, "arg%d%s: %s", (int)e->num + 1, e->name, r);
            return 1;
        }
        return 0;
    }
    return resolve_fields(c, p, e->a, why, whylen) || resolve_fields(c, p, e->b, why, whylen);
}

/* ... of every expression of M. */
int
qmc_resolve_metric_fields(
    qmc_ctx_t *c, uint32_t p, qm_metric_t *m, char *why, size_t whylen)
{
    return resolve_fields(c, p, m->where, why, whylen) || resolve_fields(c, p, m->key, why, whylen)
           || resolve_fields(c, p, m->value, why, whylen);
}

/* Check the names of E (before anything is inserted). */
int
qmc_check_expr(qmc_ctx_t *c, const qm_metric_t *m, const qm_expr_t *e)
{
    if (e == NULL)
        return 0;
    if (e->op == QE_VAR) {
        uint64_t a, size;
        int64_t off;
        if (qpt_symbol(c->s, e->name, &a, &size) == 0 || qpt_tls_offset(c->s, e->name, &off) == 0)
            return 0;
        return qm_error_at(QM_SRC(m, e), QM_ORIGIN(m, e), e->line, e->col, c->why, c->whylen,
                           "no variable '%s' in the program (a stripped program has only its "
                           "dynamic symbols)", e->name);
    }
    QM_CHECK(qmc_check_expr(c, m, e->a));
    return qmc_check_expr(c, m, e->b);
}

/* E as a snippet node of SN. */
qpt_expr_t
qmc_compile_expr(qmc_ctx_t *c, qpt_snippet_t *sn, const qm_expr_t *e)
{
    static const int ops[] = {
        [QE_ADD] = QPT_ADD, [QE_SUB] = QPT_SUB, [QE_MUL] = QPT_MUL, [QE_DIV] = QPT_DIV,
        [QE_MOD] = QPT_MOD, [QE_SHL] = QPT_SHL, [QE_SHR] = QPT_SHR, [QE_AND] = QPT_AND,
        [QE_OR] = QPT_OR,   [QE_XOR] = QPT_XOR, [QE_EQ] = QPT_EQ,   [QE_NE] = QPT_NE,
        [QE_LT] = QPT_LT,   [QE_LE] = QPT_LE,   [QE_GT] = QPT_GT,   [QE_GE] = QPT_GE,
        [QE_LAND] = QPT_LAND, [QE_LOR] = QPT_LOR,
    };
    switch (e->op) {
    case QE_NUM: return qpt_const(sn, e->num);
    case QE_ARG: return qpt_arg(sn, (int)e->num);
    case QE_FIELD: return qpt_field_value(sn, qpt_arg(sn, (int)e->num), &e->field);
    case QE_RET: return qpt_retval(sn);
    case QE_TID: return qpt_thread_id(sn);
    case QE_VAR: {
        uint64_t a, size = 8;
        int64_t off;
        if (qpt_symbol(c->s, e->name, &a, &size) == 0) {
            int sz = size == 1 || size == 2 || size == 4 ? (int)size : 8;
            return qpt_load(sn, a, sz);
        }
        if (qpt_tls_offset(c->s, e->name, &off) == 0)
            return qpt_load_at(sn, qpt_tls_addr(sn, off), 8);
        return QPT_NONE;
    }
    case QE_LOAD:
        /* *E, E[I], loadN(E): read by the kernel, 0 where it cannot be (never a fault) */
        return qpt_load_safe(sn, qmc_compile_expr(c, sn, e->a), (int)e->num);
    case QE_NEG:
        return qpt_op(sn, QPT_SUB, qpt_const(sn, 0), qmc_compile_expr(c, sn, e->a));
    case QE_NOT: return qpt_not(sn, qmc_compile_expr(c, sn, e->a));
    default:
        return qpt_op(sn, (qpt_op_t)ops[e->op], qmc_compile_expr(c, sn, e->a),
                      qmc_compile_expr(c, sn, e->b));
    }
}

/*****************************************************************************
 * Metrics
 */

/* The address of word K of the calling thread's block of M. */
qpt_expr_t
qmc_tword(qpt_snippet_t *sn, const qm_metric_t *m, uint64_t k)
{
    return qpt_op(sn, QPT_ADD, qpt_thread_var(sn, m->var, m->stride),
                  qpt_const(sn, (int64_t)(8 * k)));
}

qpt_expr_t
qmc_tload(qpt_snippet_t *sn, const qm_metric_t *m, uint64_t k)
{
    return qpt_load_at(sn, qmc_tword(sn, m, k), 8);
}

/* Is the outermost activation of M's inside procedures (state: words 0 depth, 1 its
 * stack pointer, 2 its return address) live? */
static qpt_expr_t
live_activation(qpt_snippet_t *sn, const qm_metric_t *m)
{
    qpt_expr_t depth = qpt_op(sn, QPT_GT, qmc_tload(sn, m, 0), qpt_const(sn, 0));
    qpt_expr_t slot = qpt_op(
        sn, QPT_EQ, qpt_load_at(sn, qmc_tload(sn, m, 1), 8), qmc_tload(sn, m, 2));
    return qpt_op(sn, QPT_LAND, depth, slot);
}

/* The inside condition of M: a live activation, and the point below its slot. */
qpt_expr_t
qmc_inside_cond(qpt_snippet_t *sn, const qm_metric_t *m)
{
    return qpt_op(sn, QPT_LAND, qpt_op(sn, QPT_ULT, qpt_sp(sn), qmc_tload(sn, m, 1)),
                  live_activation(sn, m));
}

/*
 * Counts in a live process go into per-CPU words (qpt_alloc_per_cpu: BYTES a CPU, in
 * M->cpu): exact under threads without a locked add. 1 when they do; 0 when they stay
 * in shared words, locked (not a count in shared words, a file, plain adds asked for,
 * or the process cannot have per-CPU words). Which of the two is said once a set (the
 * reason with it).
 */
int
qmc_per_cpu(qmc_ctx_t *c, qm_metric_t *m, uint64_t bytes)
{
    memset(&m->cpu, 0, sizeof(m->cpu));
    if (m->kind != QM_COUNT || m->per_thread || m->focus == QM_PER_VALUE
        || !qpt_is_live(c->s) || (c->set != NULL && c->set->hooks.plain))
        return 0;
    if (qpt_alloc_per_cpu(c->s, bytes, &m->cpu) == 0) {
        if (c->cpu_said != NULL && !*c->cpu_said && c->set->hooks.detail != NULL) {
            char line[128];
            snprintf(line, sizeof(line), "counts per CPU (rseq): %u copies, summed when "
                     "read", m->cpu.ncpu);
            c->set->hooks.detail(c->set->hooks.arg, line);
        }
        if (c->cpu_said != NULL)
            *c->cpu_said = 1;
        return 1;
    }
    memset(&m->cpu, 0, sizeof(m->cpu));
    if (c->cpu_said != NULL && !*c->cpu_said) {
        *c->cpu_said = 1;
        qmc_notef(c, "counts with locked adds, not per CPU: %s", qpt_error(c->s));
    }
    return 0;
}

/* Words a row of M takes in a block (QM_ROW_WORDS). */
uint64_t
qmc_row_words(const qm_metric_t *m)
{
    return QM_ROW_WORDS(m->kind);
}

/*
 * What a call adds to the row at word W of M: a count's 1 (a locked add on a shared word,
 * or a plain one in the thread's block); a value's [calls, acc] pair in the thread's
 * block (plain: the block is the thread's own, so max and min need no compare-and-swap
 * and are exact under threads; qm_results merges the threads' pairs).
 */
qpt_expr_t
qmc_tally(qmc_ctx_t *c, qpt_snippet_t *sn, const qm_metric_t *m, uint64_t w)
{
    if (!QM_IS_VALUED(m->kind) && m->cpu.ncpu > 0)
        return qpt_add_to_cpu(sn, &m->cpu, 8 * w, qpt_const(sn, 1));
    if (!QM_IS_VALUED(m->kind))
        return m->per_thread ? qpt_add_at(sn, qmc_tword(sn, m, w), qpt_const(sn, 1), 0)
                             : qpt_add_to(sn, m->var + 8 * w, qpt_const(sn, 1),
                                          c->set == NULL || !c->set->hooks.plain);
    qpt_expr_t v = qmc_compile_expr(c, sn, m->value), acc;
    if (m->kind == QM_SUM || m->kind == QM_AVG)
        acc = qpt_add_at(sn, qmc_tword(sn, m, w + 1), v, 0);
    else {
        /* the first value, or one beyond the kept one (signed) */
        qpt_expr_t first = qpt_op(sn, QPT_EQ, qmc_tload(sn, m, w), qpt_const(sn, 0));
        qpt_expr_t beyond
            = qpt_op(sn, m->kind == QM_MAX ? QPT_GT : QPT_LT, v, qmc_tload(sn, m, w + 1));
        acc = qpt_if(sn, qpt_op(sn, QPT_LOR, first, beyond),
                     qpt_store_at(sn, qmc_tword(sn, m, w + 1), 8, v), QPT_NONE);
    }
    return qpt_seq(sn, acc, qpt_add_at(sn, qmc_tword(sn, m, w), qpt_const(sn, 1), 0));
}

/* The points of KIND of procedure P (malloc'ed), *N. */
qpt_point_t *
qmc_points_of(qmc_ctx_t *c, uint32_t p, uint32_t kind, size_t *n)
{
    size_t k = 0;
    *n = 0;
    if (qpt_points(c->s, p, kind, NULL, 0, &k) < 0)
        return NULL;
    qpt_point_t *v = calloc(k + 1, sizeof(*v));
    if (v != NULL && qpt_points(c->s, p, kind, v, k, n) < 0) {
        free(v);
        return NULL;
    }
    return v;
}

/*
 * The returns among the exit points V (*N of them, kept in order): a live exit may be a
 * call that never returns (qpt_points), where no return value is set and nothing
 * returned; a count made "post" or reading retval leaves those out, and so does
 * inside(), whose activation goes on in the callee until it leaves (a longjmp).
 */
void
qmc_returns_only(qmc_ctx_t *c, qpt_point_t *v, size_t *n)
{
    size_t k = 0;
    for (size_t i = 0; v != NULL && i < *n; i++) {
        qpt_point_t call = v[i];
        call.kind = QPT_CALL;
        if (qpt_point_callee(c->s, &call) == 0)
            v[k++] = v[i];
    }
    *n = k;
}

/* Take back the insertions made since MARK. */
void
qmc_undo_to(qmc_ctx_t *c, size_t mark)
{
    while (c->ndone > mark) {
        c->ndone--;
        qpt_remove(c->dspace[c->ndone], c->done[c->ndone]);
    }
}

