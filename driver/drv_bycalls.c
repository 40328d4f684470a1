/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Counting calls where they are made (QP_PROC_BY_CALLS). qp must know how often each
 * procedure was called, and the cycle through X (entry ... return) costs each procedure
 * a counter that runs once per call. But when every way into a procedure P is a direct
 * call or tail call made in another measured procedure, P's calls are the sum of those
 * sites' counts, which the callers' own counters already give: P's entry edge needs no
 * counter (drv_qp.c), and the report solves the callers first (qp_flow_entries).
 *
 * P qualifies when nothing else can reach its entry: a position-independent image (every
 * code address the program holds is a relocation or a rip-relative lea, so an address
 * taken is seen: CFG_SRC_ADDR), P found only by symbols, .eh_frame, calls and jumps
 * (not the ELF entry, an init function, a gap, an address taken), not exported, no
 * jumps into its interior, and every edge of the program that reaches its entry a
 * direct call or a tail call (not the fall-through of a call that did not end the
 * procedure) from a SOLID procedure (measured, exact apart from its own entry: see
 * drv_run.c; computed gotos allowed). The dependencies must be acyclic: the procedures
 * of every call-graph cycle among candidates keep their own counter. A caller that a
 * longjmp or an exception may leave, or whose computed gotos' targets are a guess,
 * passes that on (LEAVE bits): counts derived from its counts are approximate when its
 * are.
 */
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"

/* Is a global .dynsym symbol defined at ADDR (the procedure may be called from other
 * modules)? */
static int
exported(const cfg_image_t *img, uint64_t addr)
{
    size_t lo = 0, hi = img->nsymbols;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (img->symbols[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < img->nsymbols && img->symbols[lo].addr == addr; lo++)
        if (img->symbols[lo].src == CFG_SYMSRC_DYNSYM && img->symbols[lo].global)
            return 1;
    return 0;
}

/* May procedure I be counted by its calls, as far as it alone says? */
static int
candidate(const cfg_prog_t *prog, const uint8_t *solid, uint32_t i)
{
    const cfg_proc_t *p = &prog->procs[i];
    const uint32_t known = CFG_SRC_SYMBOL | CFG_SRC_EH_FRAME | CFG_SRC_CALL | CFG_SRC_TAILCALL;
    /* Called or jumped to from somewhere (else it would be entered by unseen ways). */
    return solid[i] && (p->sources & ~known) == 0
        && (p->sources & (CFG_SRC_CALL | CFG_SRC_TAILCALL)) && !(p->flags & CFG_PROC_MULTI_ENTRY)
        && !exported(prog->img, p->entry);
}

/* Candidates whose address the program holds (drv_addr_taken). */
static int
drop_taken(const cfg_prog_t *prog, const drv_entries_t *entries, uint8_t *cand)
{
    uint64_t *taken;
    size_t n;
    QP_CHECK(drv_addr_taken(prog, &taken, &n));
    for (size_t i = 0; i < n; i++) {
        uint32_t p = drv_entered(entries, taken[i]);
        if (p != CFG_NONE)
            cand[p] = 0;
    }
    free(taken);
    return 0;
}

/* Call-graph edges caller -> callee among the program's procedures. */
typedef struct dep {
    uint32_t caller, callee;
} dep_t;

static int
push_dep(dep_t **v, size_t *n, size_t *cap, uint32_t caller, uint32_t callee)
{
    QP_CHECK(cfg_vec_grow((void **)v, cap, *n + 1, sizeof(dep_t)));
    (*v)[(*n)++] = (dep_t) { caller, callee };
    return 0;
}

/*
 * Every reference to a candidate's entry: direct calls and tail calls become DEPS (from
 * solid callers; anything else disqualifies the candidate, in CAND). The entries are
 * looked up in ENTRIES' hash, one or two a program edge (chromium: as costly as the search of
 * the blocks was, the cache misses of either; one table for the driver's lookups).
 */
static int
collect_deps(const cfg_prog_t *prog, const drv_entries_t *entries, const uint8_t *solid,
             uint8_t *cand, dep_t **deps, size_t *ndeps, size_t *cap)
{
    for (uint32_t bi = 0; bi < prog->nblocks; bi++) {
        const cfg_block_t *b = &prog->blocks[bi];
        uint32_t caller = cfg_proc_owner(prog, b->proc);
        int call = b->last_kind == ARCH_KIND_CALL || b->last_kind == ARCH_KIND_CALL_IND;
        if (b->last_kind == ARCH_KIND_CALL && b->call_target != 0) {
            uint32_t p = drv_entered(entries, b->call_target);
            if (p != CFG_NONE && cand[p]) {
                if (caller == CFG_NONE || !solid[caller] || caller == p)
                    cand[p] = 0;
                else
                    QP_CHECK(push_dep(deps, ndeps, cap, caller, p));
            }
        }
        for (uint32_t k = 0; k < b->nsucc; k++) {
            const cfg_edge_t *ed = cfg_block_succ(prog, b, k);
            if (call && (ed->kind == CFG_EDGE_CALLRET || ed->kind == CFG_EDGE_NORETURN))
                continue; /* the call, seen above; the way on stays inside */
            uint64_t at[2] = { ed->target, ed->to != CFG_NONE ? prog->blocks[ed->to].start : 0 };
            /* (Most edges land at their block's start: the second lookup would answer
             * as the first, and what follows does the same for both then.) */
            for (int j = 0; j < 2 - (at[1] == at[0]); j++) {
                uint32_t p = drv_entered(entries, at[j]);
                if (p == CFG_NONE || !cand[p] || (p == caller && ed->to != CFG_NONE))
                    continue; /* a jump inside P to its own entry block is P's business */
                if (j == 0 && ed->kind == CFG_EDGE_TAILCALL && !call && caller != CFG_NONE
                    && solid[caller] && caller != p && ed->to == CFG_NONE)
                    QP_CHECK(push_dep(deps, ndeps, cap, caller, p));
                else
                    cand[p] = 0; /* entered some other way */
            }
        }
    }
    return 0;
}

static int
cmp_dep(const void *a, const void *b)
{
    const dep_t *x = a, *y = b;
    if (x->caller != y->caller)
        return x->caller < y->caller ? -1 : 1;
    return x->callee < y->callee ? -1 : x->callee > y->callee;
}

/*
 * Tarjan's strongly connected components over the candidates (edges DEPS sorted by
 * caller, FIRST[c] the first of caller c's), iteratively: COMP[v] = the component of
 * candidate v, numbered from 0, or UINT32_MAX for a component of one procedure (and for
 * those not candidates). Returns the number of components of more than one. SCRATCH:
 * 5 * (N + 1) uint32_t, ON: N + 1 bytes.
 */
static uint32_t
cyclic_components(uint32_t n, const dep_t *deps, const uint32_t *first, const uint8_t *cand,
                  uint32_t *comp, uint32_t *scratch, uint8_t *on)
{
    uint32_t *index = scratch, *low = index + n + 1, *stack = low + n + 1;
    uint32_t *call = stack + n + 1, *next = call + n + 1;
    uint32_t counter = 0, sp = 0, ncomp = 0;
    for (uint32_t v = 0; v < n; v++) {
        index[v] = comp[v] = UINT32_MAX;
        on[v] = 0;
    }
    for (uint32_t root = 0; root < n; root++) {
        if (!cand[root] || index[root] != UINT32_MAX)
            continue;
        uint32_t depth = 0;
        call[depth++] = root;
        index[root] = low[root] = counter++;
        next[root] = first[root];
        stack[sp++] = root;
        on[root] = 1;
        while (depth > 0) {
            uint32_t v = call[depth - 1];
            if (next[v] < first[v + 1]) {
                uint32_t w = deps[next[v]++].callee;
                if (!cand[w])
                    continue;
                if (index[w] == UINT32_MAX) {
                    index[w] = low[w] = counter++;
                    next[w] = first[w];
                    stack[sp++] = w;
                    on[w] = 1;
                    call[depth++] = w;
                } else if (on[w] && index[w] < low[v])
                    low[v] = index[w];
                continue;
            }
            depth--;
            if (depth > 0 && low[v] < low[call[depth - 1]])
                low[call[depth - 1]] = low[v];
            if (low[v] == index[v]) {
                int single = stack[sp - 1] == v;
                uint32_t w;
                do {
                    w = stack[--sp];
                    on[w] = 0;
                    if (!single)
                        comp[w] = ncomp;
                } while (w != v);
                ncomp += !single;
            }
        }
    }
    return ncomp;
}

/*
 * Make the dependencies among candidates acyclic (DEPS sorted by caller, FIRST[c] the
 * first of caller c's): while some call-graph cycle joins candidates, the candidate of
 * each such component with the most calls in and out inside it (in x out; then the
 * lowest index) loses CAND and keeps its own counter. Dropping the hub of a recursion (an
 * interpreter's execute loop) rather than every procedure on it leaves the others
 * counted by their calls. After BREAK_ROUNDS rounds, every candidate still on a cycle
 * loses CAND. A candidate on no cycle stays on none as candidates drop out, so each
 * round after the first walks only the last round's components (LIVE): chromium's 16
 * rounds walked all its candidates' calls each.
 */
enum { BREAK_ROUNDS = 16 };

static int
break_cycles(uint32_t n, const dep_t *deps, const uint32_t *first, uint8_t *cand)
{
    uint32_t *comp = malloc((n + 1) * sizeof(uint32_t));
    uint32_t *scratch = malloc(5 * (size_t)(n + 1) * sizeof(uint32_t));
    uint64_t *in = calloc(n + 1, sizeof(uint64_t)), *out = calloc(n + 1, sizeof(uint64_t));
    uint32_t *pick = malloc((n + 1) * sizeof(uint32_t));
    uint8_t *on = malloc(n + 1), *live = malloc(n + 1);
    int rc = 0;
    if (!comp || !scratch || !in || !out || !pick || !on || !live) {
        rc = QP_ENOMEM;
        goto out;
    }
    memcpy(live, cand, n);
    uint32_t ncomp;
    for (int round = 0; (ncomp = cyclic_components(n, deps, first, live, comp, scratch, on)) > 0;
         round++) {
        if (round == BREAK_ROUNDS) { /* a big program's big cycles: as before, all out */
            for (uint32_t v = 0; v < n; v++)
                if (comp[v] != UINT32_MAX)
                    cand[v] = 0;
            break;
        }
        for (uint32_t v = 0; v < n; v++) {
            live[v] = comp[v] != UINT32_MAX; /* (comp: candidates only) */
            in[v] = out[v] = 0;
        }
        for (uint32_t c = 0; c < n; c++)
            for (uint32_t k = first[c]; live[c] && k < first[c + 1]; k++) {
                uint32_t e = deps[k].callee;
                if (live[e] && comp[c] == comp[e]) {
                    out[c]++;
                    in[e]++;
                }
            }
        for (uint32_t k = 0; k < ncomp; k++)
            pick[k] = UINT32_MAX;
        for (uint32_t v = 0; v < n; v++) {
            uint32_t k = comp[v];
            if (k == UINT32_MAX)
                continue;
            if (pick[k] == UINT32_MAX || in[v] * out[v] > in[pick[k]] * out[pick[k]])
                pick[k] = v;
        }
        for (uint32_t k = 0; k < ncomp; k++)
            cand[pick[k]] = live[pick[k]] = 0;
    }
out:
    free(comp);
    free(scratch);
    free(in);
    free(out);
    free(pick);
    free(on);
    free(live);
    return rc;
}

/* LEAVE bits down the (acyclic) dependencies: callers first (Kahn's order). */
static int
pass_leave(uint32_t n, const dep_t *deps, size_t ndeps, const uint32_t *first,
           const uint8_t *cand, uint8_t *leave)
{
    uint32_t *pending = calloc(n + 1, sizeof(uint32_t)), *queue = malloc((n + 1) * sizeof(uint32_t));
    if (pending == NULL || queue == NULL) {
        free(pending);
        free(queue);
        return QP_ENOMEM;
    }
    for (size_t k = 0; k < ndeps; k++)
        if (cand[deps[k].caller] && cand[deps[k].callee])
            pending[deps[k].callee]++;
    /* First what non-candidates hand down, then the candidates in order. */
    for (size_t k = 0; k < ndeps; k++)
        if (!cand[deps[k].caller] && cand[deps[k].callee])
            leave[deps[k].callee] |= leave[deps[k].caller];
    uint32_t qh = 0, qt = 0;
    for (uint32_t v = 0; v < n; v++)
        if (cand[v] && pending[v] == 0)
            queue[qt++] = v;
    while (qh < qt) {
        uint32_t v = queue[qh++];
        for (uint32_t k = first[v]; k < first[v + 1]; k++) {
            uint32_t w = deps[k].callee;
            if (!cand[w])
                continue;
            leave[w] |= leave[v];
            if (--pending[w] == 0)
                queue[qt++] = w;
        }
    }
    free(pending);
    free(queue);
    return 0;
}

int
drv_by_calls(const cfg_prog_t *prog, const drv_entries_t *entries, const uint8_t *solid,
             uint8_t *leave, uint8_t *by_calls)
{
    uint32_t n = prog->nprocs;
    memset(by_calls, 0, n);
    if (!(prog->img->flags & CFG_IMG_PIE))
        return 0; /* absolute code addresses may hide in immediates: no way to tell */
    for (uint32_t i = 0; i < n; i++)
        by_calls[i] = (uint8_t)candidate(prog, solid, i);
    QP_CHECK(drop_taken(prog, entries, by_calls));
    dep_t *deps = NULL;
    size_t ndeps = 0, cap = 0;
    uint32_t *first = calloc(n + 2, sizeof(uint32_t));
    int rc = first == NULL ? QP_ENOMEM
                           : collect_deps(prog, entries, solid, by_calls, &deps, &ndeps, &cap);
    if (rc == 0) {
        if (ndeps > 0)
            qsort(deps, ndeps, sizeof(dep_t), cmp_dep);
        for (size_t k = 0; k < ndeps; k++)
            first[deps[k].caller + 1]++;
        for (uint32_t v = 0; v < n; v++)
            first[v + 1] += first[v];
        rc = break_cycles(n, deps, first, by_calls);
    }
    if (rc == 0)
        rc = pass_leave(n, deps, ndeps, first, by_calls, leave);
    free(deps);
    free(first);
    if (rc < 0)
        memset(by_calls, 0, n);
    return rc;
}
