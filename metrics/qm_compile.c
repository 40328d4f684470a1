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
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/qm_priv.h"

#define MAX_PER_THREAD (32u << 20) /* bytes of per-thread memory for one metric */

typedef struct ctx {
    qpt_space_t *s;       /* the space of the metric placed (qm_space) */
    qm_note_fn note;
    void *arg;
    char *why;
    size_t whylen;
    qpt_handle_t *done;   /* insertions made by this call (taken back on failure) */
    qpt_space_t **dspace; /* ... and the space of each */
    size_t ndone, capdone;
    /* Timers: the returns of tail callees that end a row's pending call, by (row word,
     * procedure), each placed once a metric; the tail calls not followed. */
    struct tail_check {
        uint64_t w;
        uint32_t proc;
    } *chk;
    size_t nchk, capchk;
    size_t tail_unfollowed;
    /* Shared timers: the procedures with no exit, counted but not timed (the last one
     * placed was: untimed_last), and how many in the metric, the first one's name. */
    int untimed_last;
    size_t untimed;
    char untimed_first[128];
    const qm_set_t *set;  /* the set placed (its front end's hooks) */
    int *cpu_said;        /* the set's cpu_said (NULL: no note) */
    qm_memo_t *memo;      /* the procedures matched by name, kept (or NULL) */
    uint32_t *last_named; /* ... without one: the last names_procs array */
} ctx_t;

/*****************************************************************************
 * Shared libraries: a pattern LIB:PROC whose LIB has ".so" in it
 */

/* The ':' of PATTERN after a module that names a shared library, or NULL (a plain name,
 * or a source file's MODULE:PROC). C++'s '::' belongs to the name. */
static const char *
lib_sep(const char *pattern)
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
static int
list_in_one_space(const char *pattern)
{
    const char *sep = lib_sep(pattern);
    size_t llen = sep ? (size_t)(sep - pattern) : 0;
    for (const char *p = strchr(pattern, '\n'); p != NULL; p = strchr(p, '\n')) {
        p++;
        char one[1024];
        snprintf(one, sizeof(one), "%.*s", (int)strcspn(p, "\n"), p);
        const char *s2 = lib_sep(one);
        if ((s2 == NULL) != (sep == NULL)
            || (sep != NULL && ((size_t)(s2 - one) != llen || strncmp(one, pattern, llen) != 0)))
            return 0;
    }
    return 1;
}

/* PATTERN as its space's procedures are named (a library's without "LIB:"). */
static const char *
proc_pattern(const char *pattern)
{
    const char *sep = lib_sep(pattern);
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
    const char *pattern = set->v[i].pattern, *sep = lib_sep(pattern);
    if (sep == NULL)
        return s;
    snprintf(lib, sizeof(lib), "%.*s", (int)(sep - pattern), pattern);
    qpt_space_t *l = NULL;
    return qpt_library(s, lib, &l, why, whylen) == 0 ? l : NULL;
}

int
qm_is_library(const qm_set_t *set, size_t i)
{
    return set != NULL && i < set->n && lib_sep(set->v[i].pattern) != NULL;
}

/* The space of M (once placed its library's space is open: never NULL then). */
static qpt_space_t *
space_of(const qm_set_t *set, const qm_metric_t *m, qpt_space_t *s)
{
    qpt_space_t *l = qm_space(set, (size_t)(m - set->v), s, NULL, 0);
    return l != NULL ? l : s;
}

static void
notef(ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
notef(ctx_t *c, const char *fmt, ...)
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
static void
refusal(ctx_t *c, const qm_metric_t *m, const char *what, const char *proc, const char *why)
{
    char full[600];
    const char *lname = qpt_library_name(c->s);
    if (lname != NULL && lib_sep(m->pattern) != NULL && strchr(proc, ':') == NULL) {
        snprintf(full, sizeof(full), "%s:%s", lname, proc); /* as its row is named */
        proc = full;
    }
    if (c->set != NULL && c->set->hooks.refused != NULL)
        c->set->hooks.refused(c->set->hooks.arg, (size_t)(m - c->set->v), proc, why);
    else
        notef(c, "%s: %s %s: %s", m->name, proc, what, why);
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
};

static const uint32_t *
named_procs(ctx_t *c, const char *pattern, size_t *n)
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
    if (memo != NULL)
        free(memo->v);
    free(memo);
}

/* How matching() takes procedures that cannot take snippets: told in notes; taken all
 * the same (the callees of a timer per call site, timed at their sites). */
enum { MATCH_NOTE = 1, MATCH_ANY = 2 };

/* The procedures matching PATTERN that can take snippets (with MATCH_ANY: every one);
 * *N of them (malloc'ed). The ones refused are told in notes with MATCH_NOTE. A list's
 * patterns each. */
static uint32_t *
matching(ctx_t *c, const qm_metric_t *m, const char *pattern, size_t *n, size_t *nrefused,
         int flags)
{
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
            uint32_t *w = matching(c, m, one, &k, &kref, flags);
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
    pattern = proc_pattern(pattern);
    size_t nnamed;
    const uint32_t *named = named_procs(c, pattern, &nnamed);
    if (named == NULL) {
        free(v);
        return NULL;
    }
    for (size_t k = 0; k < nnamed; k++) {
        uint32_t i = named[k];
        const char *name = qpt_proc_match_name(c->s, i, pattern);
        const char *no = (flags & MATCH_ANY) ? NULL : qpt_proc_refusal(c->s, i);
        qpt_cfg_t cfg;
        /* A lenient set's glob (dyn --all, --count 'lib_*') leaves cold fragments out
         * unsaid: their calls are their parents'. */
        if (no != NULL && c->set != NULL && c->set->hooks.lenient
            && strpbrk(pattern, "*?[") != NULL && qpt_proc_cfg(c->s, i, &cfg) == QPT_EUNSUPP)
            continue;
        if (no != NULL) {
            (*nrefused)++;
            if (flags & MATCH_NOTE)
                refusal(c, m, "left out", name, no);
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
                const char *no = (flags & MATCH_ANY) ? NULL : qpt_proc_refusal(c->s, i);
                if (no != NULL) {
                    (*nrefused)++;
                    if (flags & MATCH_NOTE)
                        refusal(c, m, "left out", qpt_proc_name(c->s, i), no);
                } else
                    v[(*n)++] = i;
                break;
            }
    }
    return v;
}

static int
remember(ctx_t *c, qpt_handle_t h)
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
static int
put(ctx_t *c, const qpt_point_t *pt, qpt_snippet_t *sn, qpt_expr_t e, int first)
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
static int
uses(const qm_expr_t *e, int op, const qm_expr_t **at)
{
    if (e == NULL)
        return 0;
    if (e->op == op) {
        *at = e;
        return 1;
    }
    return uses(e->a, op, at) || uses(e->b, op, at);
}

/* Is M counted at its procedures' returns (its condition or value reads retval)? */
static int
at_returns(const qm_metric_t *m)
{
    const qm_expr_t *at;
    return m->post || uses(m->where, QE_RET, &at) || uses(m->key, QE_RET, &at)
           || uses(m->value, QE_RET, &at);
}

/* Resolve the fields (argN->f) of E for procedure P from its DWARF types: 0, or 1 with
 * the reason in WHY. */
static int
resolve_fields(ctx_t *c, uint32_t p, qm_expr_t *e, char *why, size_t whylen)
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
static int
resolve_metric_fields(ctx_t *c, uint32_t p, qm_metric_t *m, char *why, size_t whylen)
{
    return resolve_fields(c, p, m->where, why, whylen) || resolve_fields(c, p, m->key, why, whylen)
           || resolve_fields(c, p, m->value, why, whylen);
}

/* Check the names of E (before anything is inserted). */
static int
check_expr(ctx_t *c, const qm_metric_t *m, const qm_expr_t *e)
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
    QM_CHECK(check_expr(c, m, e->a));
    return check_expr(c, m, e->b);
}

/* E as a snippet node of SN. */
static qpt_expr_t
compile_expr(ctx_t *c, qpt_snippet_t *sn, const qm_expr_t *e)
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
        return qpt_load_safe(sn, compile_expr(c, sn, e->a), (int)e->num);
    case QE_NEG: return qpt_op(sn, QPT_SUB, qpt_const(sn, 0), compile_expr(c, sn, e->a));
    case QE_NOT: return qpt_not(sn, compile_expr(c, sn, e->a));
    default:
        return qpt_op(sn, (qpt_op_t)ops[e->op], compile_expr(c, sn, e->a),
                      compile_expr(c, sn, e->b));
    }
}

/*****************************************************************************
 * Metrics
 */

/* The address of word K of the calling thread's block of M. */
static qpt_expr_t
tword(qpt_snippet_t *sn, const qm_metric_t *m, uint64_t k)
{
    return qpt_op(sn, QPT_ADD, qpt_thread_var(sn, m->var, m->stride),
                  qpt_const(sn, (int64_t)(8 * k)));
}

static qpt_expr_t
tload(qpt_snippet_t *sn, const qm_metric_t *m, uint64_t k)
{
    return qpt_load_at(sn, tword(sn, m, k), 8);
}

/* Is the outermost activation of M's inside procedures (state: words 0 depth, 1 its
 * stack pointer, 2 its return address) live? */
static qpt_expr_t
live_activation(qpt_snippet_t *sn, const qm_metric_t *m)
{
    qpt_expr_t depth = qpt_op(sn, QPT_GT, tload(sn, m, 0), qpt_const(sn, 0));
    qpt_expr_t slot = qpt_op(sn, QPT_EQ, qpt_load_at(sn, tload(sn, m, 1), 8), tload(sn, m, 2));
    return qpt_op(sn, QPT_LAND, depth, slot);
}

/* The inside condition of M: a live activation, and the point below its slot. */
static qpt_expr_t
inside_cond(qpt_snippet_t *sn, const qm_metric_t *m)
{
    return qpt_op(sn, QPT_LAND, qpt_op(sn, QPT_ULT, qpt_sp(sn), tload(sn, m, 1)),
                  live_activation(sn, m));
}

/*
 * Counts in a live process go into per-CPU words (qpt_alloc_per_cpu: BYTES a CPU, in
 * M->cpu): exact under threads without a locked add. 1 when they do; 0 when they stay
 * in shared words, locked (not a count in shared words, a file, plain adds asked for,
 * or the process cannot have per-CPU words). Which of the two is said once a set (the
 * reason with it).
 */
static int
per_cpu(ctx_t *c, qm_metric_t *m, uint64_t bytes)
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
        notef(c, "counts with locked adds, not per CPU: %s", qpt_error(c->s));
    }
    return 0;
}

/* Words a row of M takes in a block (QM_ROW_WORDS). */
static uint64_t
row_words(const qm_metric_t *m)
{
    return QM_ROW_WORDS(m->kind);
}

/*
 * What a call adds to the row at word W of M: a count's 1 (a locked add on a shared word,
 * or a plain one in the thread's block); a value's [calls, acc] pair in the thread's
 * block (plain: the block is the thread's own, so max and min need no compare-and-swap
 * and are exact under threads; qm_results merges the threads' pairs).
 */
static qpt_expr_t
tally(ctx_t *c, qpt_snippet_t *sn, const qm_metric_t *m, uint64_t w)
{
    if (!QM_IS_VALUED(m->kind) && m->cpu.ncpu > 0)
        return qpt_add_to_cpu(sn, &m->cpu, 8 * w, qpt_const(sn, 1));
    if (!QM_IS_VALUED(m->kind))
        return m->per_thread ? qpt_add_at(sn, tword(sn, m, w), qpt_const(sn, 1), 0)
                             : qpt_add_to(sn, m->var + 8 * w, qpt_const(sn, 1),
                                          c->set == NULL || !c->set->hooks.plain);
    qpt_expr_t v = compile_expr(c, sn, m->value), acc;
    if (m->kind == QM_SUM || m->kind == QM_AVG)
        acc = qpt_add_at(sn, tword(sn, m, w + 1), v, 0);
    else {
        /* the first value, or one beyond the kept one (signed) */
        qpt_expr_t first = qpt_op(sn, QPT_EQ, tload(sn, m, w), qpt_const(sn, 0));
        qpt_expr_t beyond = qpt_op(sn, m->kind == QM_MAX ? QPT_GT : QPT_LT, v, tload(sn, m, w + 1));
        acc = qpt_if(sn, qpt_op(sn, QPT_LOR, first, beyond),
                     qpt_store_at(sn, tword(sn, m, w + 1), 8, v), QPT_NONE);
    }
    return qpt_seq(sn, acc, qpt_add_at(sn, tword(sn, m, w), qpt_const(sn, 1), 0));
}

/* The points of KIND of procedure P (malloc'ed), *N. */
static qpt_point_t *
points_of(ctx_t *c, uint32_t p, uint32_t kind, size_t *n)
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
static void
returns_only(ctx_t *c, qpt_point_t *v, size_t *n)
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
static void
undo_to(ctx_t *c, size_t mark)
{
    while (c->ndone > mark) {
        c->ndone--;
        qpt_remove(c->dspace[c->ndone], c->done[c->ndone]);
    }
}

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

/* Add procedure Q (entered at ENTRY) to the set OUT[*N]; 0, 1 when it cannot be. */
static int
tail_add(ctx_t *c, uint64_t entry, uint32_t *out, size_t *n)
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
tail_closure(ctx_t *c, uint64_t callee, uint32_t *out, size_t *n)
{
    *n = 0;
    if (tail_add(c, callee, out, n) != 0)
        return 1;
    for (size_t k = 0; k < *n; k++) {
        /* A copy's exits take one snippet list: no check at its returns alone. */
        if (qpt_proc_runs_as_copy(c->s, out[k]) != 0)
            return 1;
        size_t nx = 0;
        qpt_point_t *ex = points_of(c, out[k], QPT_EXIT, &nx);
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
tail_checks(ctx_t *c, qm_metric_t *m, qpt_snippet_t *sn, uint64_t w, uint32_t q)
{
    for (size_t k = 0; k < c->nchk; k++)
        if (c->chk[k].w == w && c->chk[k].proc == q)
            return 0;
    size_t nx = 0;
    qpt_point_t *ex = points_of(c, q, QPT_EXIT, &nx);
    int rc = ex == NULL;
    for (size_t i = 0; rc == 0 && i < nx; i++) {
        if (qpt_exit_tail(c->s, &ex[i], NULL) != 0)
            continue; /* a tail jump within the set: its callee returns */
        qpt_expr_t now = m->kind == QM_WALL ? qpt_cycles(sn) : qpt_thread_cpu_ns(sn);
        /* The depth before the total, as at any stop (a reader outside the process may
         * see a stop's total late, never early). */
        qpt_expr_t stop = qpt_seq(
            sn, qpt_store_at(sn, tword(sn, m, w + 3), 8, qpt_const(sn, 0)),
            qpt_seq(sn, qpt_store_at(sn, tword(sn, m, w), 8, qpt_const(sn, 0)),
                    qpt_add_at(sn, tword(sn, m, w + 2), qpt_op(sn, QPT_SUB, now, tload(sn, m, w + 1)),
                               0)));
        qpt_expr_t mine = qpt_op(sn, QPT_LAND, qpt_op(sn, QPT_EQ, tload(sn, m, w + 3), qpt_sp(sn)),
                                 qpt_op(sn, QPT_GT, tload(sn, m, w), qpt_const(sn, 0)));
        if (put(c, &ex[i], sn, qpt_if(sn, mine, stop, QPT_NONE), !m->append) != 0)
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
tail_follow(ctx_t *c, qm_metric_t *m, qpt_snippet_t *sn, uint64_t w, uint64_t callee,
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
            undo_to(c, mark);
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
place_inside(ctx_t *c, qm_metric_t *m, uint32_t q)
{
    size_t mark = c->ndone, ne = 0, nx = 0;
    qpt_point_t *en = points_of(c, q, QPT_ENTRY, &ne), *ex = points_of(c, q, QPT_EXIT, &nx);
    returns_only(c, ex, &nx);
    qpt_snippet_t *sn = qpt_snippet_create();
    int rc = en && ex && sn ? 0 : QPT_ENOMEM;
    /* No exit (a procedure that never returns) is fine: the return-address slot tells. */
    if (rc == 0 && ne != 1)
        rc = 1;
    if (rc == 0) {
        /* Entry: one more inside a live activation, else a new outermost one. */
        qpt_expr_t nested = inside_cond(sn, m);
        qpt_expr_t start = qpt_seq(
            sn,
            qpt_seq(sn, qpt_store_at(sn, tword(sn, m, 1), 8, qpt_sp(sn)),
                    qpt_store_at(sn, tword(sn, m, 2), 8, qpt_load_at(sn, qpt_sp(sn), 8))),
            qpt_store_at(sn, tword(sn, m, 0), 8, qpt_const(sn, 1)));
        qpt_expr_t more = qpt_add_at(sn, tword(sn, m, 0), qpt_const(sn, 1), 0);
        if (put(c, &en[0], sn, qpt_if(sn, nested, more, start), 0) != 0)
            rc = 1;
    }
    size_t missed = 0;
    const char *miss = NULL;
    for (size_t i = 0; rc == 0 && i < nx; i++) {
        /* Exit: the outermost one ends it, an inner one takes one off. */
        qpt_expr_t outer = qpt_op(sn, QPT_UGE, qpt_sp(sn), tload(sn, m, 1));
        qpt_expr_t end = qpt_store_at(sn, tword(sn, m, 0), 8, qpt_const(sn, 0));
        qpt_expr_t less = qpt_if(sn, qpt_op(sn, QPT_GT, tload(sn, m, 0), qpt_const(sn, 0)),
                                 qpt_add_at(sn, tword(sn, m, 0), qpt_const(sn, -1), 0), QPT_NONE);
        if (put(c, &ex[i], sn, qpt_if(sn, outer, end, less), 0) != 0 && missed++ == 0)
            miss = qpt_error(c->s);
    }
    /* An exit that cannot be patched (live: a ret block under 5 bytes) is not needed for
     * the truth: the activation ends when its return-address slot is overwritten, which
     * the caller's next call does. Only a caller that grows its stack (alloca) before its
     * next call would be taken for still inside. Said in a note. */
    if (rc == 0 && missed > 0)
        notef(c, "%s: inside(%s): %zu exit%s of %s not patched (%s): its activations end when "
              "its caller calls again", m->name, m->inside, missed, missed == 1 ? "" : "s",
              qpt_proc_name(c->s, q), miss ? miss : "?");
    if (rc == 1) {
        undo_to(c, mark);
        notef(c, "%s: inside(%s): %s left out (%s): calls made inside it are not seen",
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
    qpt_expr_t set = qpt_store_at(sn, tword(sn, m, w + 1), 8, now);
    if (m->kind == QM_CPU) {
        /* The thread's id, once a thread (a system call: not on every call). */
        uint64_t tid = m->base - 1;
        qpt_expr_t keep = qpt_if(sn, qpt_op(sn, QPT_EQ, tload(sn, m, tid), qpt_const(sn, 0)),
                                 qpt_store_at(sn, tword(sn, m, tid), 8, qpt_thread_id(sn)),
                                 QPT_NONE);
        set = qpt_seq(sn, keep, set);
    }
    qpt_expr_t first = qpt_if(sn, qpt_op(sn, QPT_EQ, tload(sn, m, w), qpt_const(sn, 0)), set,
                              QPT_NONE);
    qpt_expr_t start = qpt_seq(sn, first, qpt_add_at(sn, tword(sn, m, w), qpt_const(sn, 1), 0));
    return cond != QPT_NONE ? qpt_if(sn, cond, start, QPT_NONE) : start;
}

/* A timer's stop, for row word W: one activation less; the outermost adds its time. */
static qpt_expr_t
timer_stop(qpt_snippet_t *sn, const qm_metric_t *m, uint64_t w)
{
    qpt_expr_t now = m->kind == QM_WALL ? qpt_cycles(sn) : qpt_thread_cpu_ns(sn);
    qpt_expr_t total = qpt_add_at(sn, tword(sn, m, w + 2),
                                  qpt_op(sn, QPT_SUB, now, tload(sn, m, w + 1)), 0);
    qpt_expr_t last = qpt_if(sn, qpt_op(sn, QPT_EQ, tload(sn, m, w), qpt_const(sn, 0)), total,
                             QPT_NONE);
    return qpt_if(sn, qpt_op(sn, QPT_GT, tload(sn, m, w), qpt_const(sn, 0)),
                  qpt_seq(sn, qpt_add_at(sn, tword(sn, m, w), qpt_const(sn, -1), 0), last),
                  QPT_NONE);
}

static int
place_proc(ctx_t *c, qm_metric_t *m, uint32_t p, uint64_t row)
{
    size_t mark = c->ndone, ne = 0, nx = 0;
    /* A count that reads retval is made at the returns (its "entry" points, here). */
    qpt_point_t *en = points_of(c, p, at_returns(m) ? QPT_EXIT : QPT_ENTRY, &ne), *ex = NULL;
    if (at_returns(m))
        returns_only(c, en, &ne);
    qpt_snippet_t *sn = qpt_snippet_create();
    int timer = m->kind == QM_WALL || m->kind == QM_CPU, rc = en && sn ? 0 : QPT_ENOMEM;
    if (rc == 0 && timer && (ex = points_of(c, p, QPT_EXIT, &nx)) == NULL)
        rc = QPT_ENOMEM;
    const char *why = NULL;
    char fwhy[320];
    if (rc == 0 && resolve_metric_fields(c, p, m, fwhy, sizeof(fwhy)))
        rc = 1, why = fwhy;
    if (rc == 0 && (at_returns(m) ? ne == 0 : ne != 1))
        rc = 1, why = at_returns(m) ? "no return to patch" : "no entry to patch";
    /* A shared timer (dyn --time) counts the calls of a procedure with no exit (it never
     * returns, or leaves only by jumps elsewhere) at its entry, with no time, as dyn did
     * before it ran on this engine: said in one note a metric. */
    int untimed = rc == 0 && timer && m->shared && nx == 0;
    c->untimed_last = 0;
    if (rc == 0 && timer && nx == 0 && !untimed)
        rc = 1, why = "no exit to patch";
    qpt_expr_t cond = QPT_NONE;
    if (rc == 0 && m->where != NULL)
        cond = compile_expr(c, sn, m->where);
    if (rc == 0 && m->inside != NULL)
        cond = cond == QPT_NONE ? inside_cond(sn, m) : qpt_op(sn, QPT_LAND, cond, inside_cond(sn, m));
    uint64_t w = m->base + row_words(m) * row;
    size_t cmark = c->nchk, unfollowed = 0;
    /* P's exits differ (pending at tail jumps, stops at returns): not in a copy. */
    int may_follow = timer && !m->shared && qpt_proc_runs_as_copy(c->s, p) == 0;
    if (rc == 0 && untimed) {
        qpt_expr_t inc = qpt_add_to(sn, m->var + 8 * w + 24, qpt_const(sn, 1),
                                    c->set == NULL || !c->set->hooks.plain);
        if (cond != QPT_NONE)
            inc = qpt_if(sn, cond, inc, QPT_NONE);
        if (put(c, &en[0], sn, inc, !m->append) != 0)
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
                qpt_expr_t depth = tload(sn, m, w);
                qpt_expr_t pend = qpt_if(
                    sn, qpt_op(sn, QPT_EQ, depth, qpt_const(sn, 1)),
                    qpt_store_at(sn, tword(sn, m, w + 3), 8, qpt_sp(sn)),
                    qpt_if(sn, qpt_op(sn, QPT_GT, depth, qpt_const(sn, 1)),
                           qpt_add_at(sn, tword(sn, m, w), qpt_const(sn, -1), 0), QPT_NONE));
                if (put(c, &ex[i], sn, pend, !m->append) != 0)
                    rc = 1, why = qpt_error(c->s);
                continue;
            }
            qpt_expr_t stop = m->shared ? qpt_timer_stop(sn, m->var + 8 * w)
                                        : timer_stop(sn, m, w);
            if (put(c, &ex[i], sn, stop, !m->append) != 0)
                rc = 1, why = qpt_error(c->s);
        }
        /* A shared timer's fourth word counts the calls (dyn --time's calls column). */
        qpt_expr_t start = !m->shared ? timer_start(sn, m, w, cond)
                           : qpt_seq(sn, qpt_timer_start(sn, m->var + 8 * w),
                                     qpt_add_to(sn, m->var + 8 * w + 24, qpt_const(sn, 1),
                                                c->set == NULL || !c->set->hooks.plain));
        if (m->shared && cond != QPT_NONE)
            start = qpt_if(sn, cond, start, QPT_NONE);
        if (rc == 0 && put(c, &en[0], sn, start, !m->append) != 0)
            rc = 1, why = qpt_error(c->s);
    } else if (rc == 0) {
        qpt_expr_t inc = m->focus == QM_PER_VALUE
            ? qpt_add_at(sn, qpt_key_var(sn, m->kvar, 8, compile_expr(c, sn, m->key)),
                         qpt_const(sn, 1), 1)
            : tally(c, sn, m, w);
        if (cond != QPT_NONE)
            inc = qpt_if(sn, cond, inc, QPT_NONE);
        for (size_t i = 0; rc == 0 && i < (at_returns(m) ? ne : 1); i++)
            if (put(c, &en[i], sn, inc, !m->append) != 0)
                rc = 1, why = qpt_error(c->s);
    }
    if (rc == 1) {
        undo_to(c, mark);
        c->nchk = cmark;
        refusal(c, m, "not measured", qpt_proc_name(c->s, p), why ? why : "?");
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
proc_label(ctx_t *c, const qm_metric_t *m, uint32_t proc)
{
    char one[1024];
    for (const char *p = m->pattern; *p;) {
        size_t len = strcspn(p, "\n");
        snprintf(one, sizeof(one), "%.*s", (int)len, p);
        p += len + (p[len] == '\n');
        const char *name = qpt_proc_match_name(c->s, proc, proc_pattern(one));
        if (name != NULL)
            return name;
    }
    return qpt_proc_name(c->s, proc);
}

/* Does PATTERN (written at LINE:COL of M) match a procedure that can take snippets? */
static int
check_pattern(ctx_t *c, const qm_metric_t *m, const char *pattern, unsigned line, unsigned col,
              int flags)
{
    size_t n, nref;
    uint32_t *v = matching(c, m, pattern, &n, &nref, flags);
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
static int
matches_nothing(ctx_t *c, qm_metric_t *m, int *rc)
{
    size_t n, nref;
    const char *pattern = m->from != NULL ? m->from : m->pattern;
    int any = m->from != NULL ? MATCH_ANY : 0;
    uint32_t *v = matching(c, m, pattern, &n, &nref, any);
    *rc = 0;
    if (v == NULL) {
        *rc = QPT_ENOMEM;
        return 1;
    }
    free(v);
    if (n > 0)
        return 0;
    if (nref > 0 && (v = matching(c, m, pattern, &n, &nref, any | MATCH_NOTE)) != NULL)
        free(v);
    else if (nref == 0 && c->set->hooks.nomatch != NULL && m->instance_of == 0)
        c->set->hooks.nomatch(c->set->hooks.arg, (size_t)(m - c->set->v), pattern, c->s);
    qm_set_off((qm_set_t *)c->set, (size_t)(m - c->set->v));
    return 1;
}

/* Check metric M against the program: its procedures, its inside procedures, its names. */
static int
check_metric(ctx_t *c, qm_metric_t *m)
{
    const char *lsep = lib_sep(m->pattern), *isep = lib_sep(m->inside);
    size_t llen = lsep ? (size_t)(lsep - m->pattern) : 0;
    if (m->inside != NULL && (lsep != NULL || isep != NULL)
        && (lsep == NULL || isep == NULL || (size_t)(isep - m->inside) != llen
            || strncmp(m->pattern, m->inside, llen) != 0))
        return qm_error_at(m->src, m->origin, m->in_line, m->in_col, c->why, c->whylen,
                           "inside() names procedures of the same shared library as the "
                           "metric's (LIB:PROC in both), or of the executable in both");
    if (!list_in_one_space(m->pattern) || (m->inside != NULL && !list_in_one_space(m->inside)))
        return qm_error_at(m->src, m->origin, m->inside != NULL && list_in_one_space(m->pattern)
                                                  ? m->in_line : m->pat_line,
                           m->inside != NULL && list_in_one_space(m->pattern) ? m->in_col
                                                                             : m->pat_col,
                           c->why, c->whylen,
                           "a list's procedures are all of one shared library (LIB:PROC in "
                           "each) or all of the executable");
    if (lsep != NULL && m->focus == QM_PER_SITE && m->from == NULL)
        return qm_error_at(m->src, m->origin, m->pat_line, m->pat_col, c->why, c->whylen,
                           "per call site: not for a shared library's procedures (their "
                           "callers are elsewhere; from(LIB:F) names sites inside one)");
    if (m->from != NULL) {
        const char *fsep = lib_sep(m->from);
        if ((fsep == NULL) != (lsep == NULL)
            || (fsep != NULL && (fsep - m->from != lsep - m->pattern
                                 || strncmp(m->from, m->pattern, (size_t)(fsep - m->from)) != 0)))
            return qm_error_at(m->src, m->origin, m->from_line, m->from_col, c->why, c->whylen,
                               "from() names procedures of the same shared library as the "
                               "metric's (LIB:PROC in both), or of the executable in both");
        QM_CHECK(check_pattern(c, m, m->from, m->from_line, m->from_col, MATCH_ANY));
    }
    QM_CHECK(check_pattern(c, m, m->pattern, m->pat_line, m->pat_col,
                           site_timer(m) || m->from != NULL ? MATCH_ANY : 0));
    if (m->inside != NULL)
        QM_CHECK(check_pattern(c, m, m->inside, m->in_line, m->in_col, 0));
    QM_CHECK(check_expr(c, m, m->key));
    QM_CHECK(check_expr(c, m, m->value));
    /* retval: counted at the returns, where the arguments are gone. */
    const qm_expr_t *r = NULL, *a;
    if (uses(m->where, QE_RET, &r) || uses(m->key, QE_RET, &r) || uses(m->value, QE_RET, &r)) {
        if (m->kind == QM_WALL || m->kind == QM_CPU)
            return qm_error_at(QM_SRC(m, r), QM_ORIGIN(m, r), r->line, r->col, c->why, c->whylen,
                               "retval is for counts (a timer starts before there is one)");
        if (m->focus == QM_PER_SITE)
            return qm_error_at(QM_SRC(m, r), QM_ORIGIN(m, r), r->line, r->col, c->why, c->whylen,
                               "retval with 'per call site': the sites are counted at the "
                               "calls, before there is one");
        if (uses(m->where, QE_ARG, &a) || uses(m->key, QE_ARG, &a) || uses(m->value, QE_ARG, &a))
            return qm_error_at(QM_SRC(m, a), QM_ORIGIN(m, a), a->line, a->col, c->why, c->whylen,
                               "an argument with retval: a count that reads retval is made at "
                               "the returns, where the arguments are gone");
    } else if (m->post && (uses(m->where, QE_ARG, &a) || uses(m->key, QE_ARG, &a)
                           || uses(m->value, QE_ARG, &a)))
        return qm_error_at(QM_SRC(m, a), QM_ORIGIN(m, a), a->line, a->col, c->why, c->whylen,
                           "an argument with 'post': the count is made at the returns, where "
                           "the arguments are gone");
    return check_expr(c, m, m->where);
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
call_sites(ctx_t *c, const qm_metric_t *m, const uint32_t *procs, size_t n, size_t *ns)
{
    size_t cap = 16, nfrom = 0, nfref;
    site_t *v = malloc(cap * sizeof(site_t));
    /* The procedures by entry (a PLT stub has no instruction points to find it by). */
    entry_t *ent = malloc((n ? n : 1) * sizeof(entry_t));
    uint32_t *from = m->from != NULL ? matching(c, m, m->from, &nfrom, &nfref, MATCH_ANY) : NULL;
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
        qpt_point_t *pts = points_of(c, q, QPT_CALL, &np);
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

/* The metric's count at call site S (row ROW); 0, or 1 when it cannot go there. */
static int
place_site(ctx_t *c, qm_metric_t *m, const site_t *s, uint64_t row)
{
    char fwhy[320];
    const qm_expr_t *f;
    if (s->callee == UINT32_MAX
        && (uses(m->where, QE_FIELD, &f) || uses(m->key, QE_FIELD, &f)
            || uses(m->value, QE_FIELD, &f))) {
        refusal(c, m, "not measured", s->label, "a call through a pointer: no callee whose "
                "types tell the fields");
        return 1;
    }
    if (s->callee != UINT32_MAX && resolve_metric_fields(c, s->callee, m, fwhy, sizeof(fwhy))) {
        refusal(c, m, "not measured", s->label, fwhy);
        return 1;
    }
    qpt_snippet_t *sn = qpt_snippet_create();
    if (sn == NULL)
        return QPT_ENOMEM;
    qpt_expr_t cond = QPT_NONE;
    if (m->where != NULL)
        cond = compile_expr(c, sn, m->where); /* the call's arguments */
    if (m->inside != NULL)
        cond = cond == QPT_NONE ? inside_cond(sn, m) : qpt_op(sn, QPT_LAND, cond, inside_cond(sn, m));
    uint64_t w = m->base + row_words(m) * row;
    int rc;
    if (m->kind == QM_WALL || m->kind == QM_CPU) {
        /* A timer from the call to its return: stopped after the call first (a timer
         * that could not stop must not start). */
        qpt_point_t after = s->pt;
        after.kind = QPT_AFTER_CALL;
        size_t mark = c->ndone;
        rc = put(c, &after, sn, timer_stop(sn, m, w), !m->append) != 0
             || put(c, &s->pt, sn, timer_start(sn, m, w, cond), !m->append) != 0;
        if (rc)
            undo_to(c, mark);
    } else {
        qpt_expr_t inc = tally(c, sn, m, w);
        if (cond != QPT_NONE)
            inc = qpt_if(sn, cond, inc, QPT_NONE);
        rc = put(c, &s->pt, sn, inc, !m->append) != 0;
    }
    if (rc == 1)
        refusal(c, m, "not measured", s->label, qpt_error(c->s));
    qpt_snippet_destroy(sn);
    return rc;
}

static int
place_metric(ctx_t *c, qm_metric_t *m)
{
    size_t n, nref, nsites = 0;
    uint32_t *procs = matching(c, m, m->pattern, &n, &nref,
                               m->from != NULL ? MATCH_ANY
                                               : MATCH_NOTE | (site_timer(m) ? MATCH_ANY : 0));
    site_t *sites = NULL;
    int timer = m->kind == QM_WALL || m->kind == QM_CPU;
    if (procs == NULL)
        return QPT_ENOMEM;
    int rc = 0;
    if (m->focus == QM_PER_SITE) {
        /* foreach call site: the rows are the direct calls of the procedures. */
        if ((sites = call_sites(c, m, procs, n, &nsites)) == NULL)
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
    uint64_t wpr = row_words(m);
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
    const char *lsep = lib_sep(m->pattern);
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
        if (m->stride > 65536 || QPT_PER_THREAD_SIZE(m->stride) > MAX_PER_THREAD)
            rc = qm_error_at(m->src, m->origin, m->pat_line, m->pat_col, c->why, c->whylen,
                             "%zu procedures match '%s': %llu bytes of state a thread is too "
                             "much for a per-thread metric (narrow the pattern, or use 'total')",
                             n, m->pattern, (unsigned long long)m->stride);
        else if ((rc = qpt_alloc_per_thread(c->s, m->stride, &m->var)) < 0)
            snprintf(c->why, c->whylen, "%s: %s", m->name, qpt_error(c->s));
    } else if (rc == 0 && per_cpu(c, m, 8 * rows * wpr)) {
        m->var = m->cpu.addr;
    } else if (rc == 0 && (rc = qpt_alloc(c->s, 8 * rows * wpr, &m->var)) < 0)
        snprintf(c->why, c->whylen, "%s: %s", m->name, qpt_error(c->s));
    /* The inside state first: the metric's own snippets then go before it. */
    if (rc == 0 && m->inside != NULL) {
        size_t nq, nqref, kept = 0;
        uint32_t *qs = matching(c, m, m->inside, &nq, &nqref, MATCH_NOTE);
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
        uint32_t *all = matching(c, m, m->pattern, &nprocs_all, &nref, 0);
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
        notef(c, "%s: %zu tail call%s end%s the caller's time at the jump (the callee is "
              "reached through a pointer, is in another module, or cannot take snippets)",
              m->name, c->tail_unfollowed, c->tail_unfollowed == 1 ? "" : "s",
              c->tail_unfollowed == 1 ? "s" : "");
    c->tail_unfollowed = 0;
    if (rc == 0 && c->untimed > 0)
        notef(c, "%s: %zu procedure%s with no exit to patch (%s%s: never returning, or leaving "
              "only by jumps elsewhere): %s calls counted, not timed (0 ms)", m->name,
              c->untimed, c->untimed == 1 ? "" : "s", c->untimed_first,
              c->untimed > 1 ? ", ..." : "", c->untimed == 1 ? "its" : "their");
    c->untimed = 0;
    c->untimed_last = 0;
    c->nchk = 0;
    free(procs);
    free(sites);
    return rc;
}

/* What qm_insert gave M, taken back (its insertions are removed by the caller): its
 * memory in the process, its handles, its procedures; M is parsed again. */
static void
unplace(const qm_set_t *set, qm_metric_t *m, qpt_space_t *s)
{
    s = space_of(set, m, s);
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
    ctx_t c = { .s = s, .note = note, .arg = arg, .why = why, .whylen = whylen, .set = set,
                .memo = set->memo, .cpu_said = &set->cpu_said };
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
            else if ((!set->hooks.lenient && m->instance_of == 0) || !matches_nothing(&c, m, &rc))
                rc = check_metric(&c, m);
        }
    size_t *mark = calloc(set->n + 1, sizeof(size_t));
    if (mark == NULL)
        rc = QPT_ENOMEM;
    for (size_t i = 0; rc == 0 && i < set->n; i++)
        if (set->v[i].state == QM_PARSED) {
            mark[i] = c.ndone;
            c.s = space_of(set, &set->v[i], s);
            rc = place_metric(&c, &set->v[i]);
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
        undo_to(&c, 0);
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

int
qm_metric_procs(const qm_set_t *set, size_t i, qpt_space_t *s, uint32_t **procs, size_t *n)
{
    if (set == NULL || s == NULL || procs == NULL || n == NULL || i >= set->n)
        return QPT_EINVAL;
    const qm_metric_t *m = &set->v[i];
    char lwhy[8];
    if ((s = qm_space(set, i, s, lwhy, sizeof(lwhy))) == NULL)
        return QPT_ENOTFOUND;
    ctx_t c = { .s = s, .memo = set->memo };
    size_t np, nq = 0, nref;
    uint32_t *p = matching(&c, m, m->pattern, &np, &nref, 0), *q = NULL;
    if (p != NULL && m->inside != NULL)
        q = matching(&c, m, m->inside, &nq, &nref, 0);
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
        uint64_t c = calls(arg, qpt_proc_entry(space_of(set, &set->v[i], s), procs[k]));
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
        qpt_remove(space_of(set, m, s), m->handles[k]);
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
    s = space_of(set, m, s);
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
    s = space_of(set, m, s);
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
        qpt_space_t *ms = m->state == QM_OFF ? space_of(set, m, s) : s;
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
    const char *sep = set != NULL && i < set->n ? lib_sep(set->v[i].pattern) : NULL;
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
        if (m->state != QM_ON || space_of(set, m, s) != space)
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
