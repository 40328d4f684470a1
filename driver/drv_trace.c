/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Control-flow tracing (seed 004, sections 1-2): record which way the program went only
 * where the CFG cannot say it, and regenerate every block it ran offline
 * (report/qp_trace.c). The format is base/qpt_trace_format.h.
 *
 * trace-naive: every block records its BLOCK event (the baseline, and the oracle).
 *
 * trace: in every traced procedure each block with several ways out keeps its likeliest
 * way (loop depth, then a static branch prediction: silent_weight; or the counts of a
 * profile) silent: the "tree" edge. Every other way out records a CHORD event, except ways into blocks
 * that record a BLOCK event themselves (targets of jump tables and indirect jumps, where
 * no probe can go on the edge, and blocks entered from outside: landing pads). Between
 * two events the path is then unique: from a block, take the edge the next event names
 * when it leaves this block, else the tree edge. Calls: a direct call of a traced
 * procedure needs nothing (the callee is known, and a return is a return); a procedure
 * that may be entered otherwise (address taken, the entry point, no direct caller)
 * records ENTER at its entry, so that calls through pointers and callbacks name their
 * callee; a call of code that is not traced (a PLT stub, a library, a pointer), of a
 * procedure that may end in such code (a tail jump out), or of setjmp-like functions
 * records RETURNED after it, so that callbacks made meanwhile and a second return
 * (longjmp) are placed. Exceptions land on landing pads, which record BLOCK.
 *
 * Each event is a snippet (arch_snip_t): the thread's cursor and limit sit in two
 * words of glibc's thread control block (%fs:0x38 and %fs:0x40, tcbhead_t's
 * unused_vgetcpu_cache, which glibc never reads or writes on x86-64): the event id is
 * stored at the cursor and the cursor advances; a full (or absent) buffer calls the
 * runtime's refill (runtime/qprt.c), which writes it to the thread's trace file. The
 * flags are saved only where they are live (the probe's save_flags, from the graph's
 * liveness); the snippet compiler keeps every register it uses.
 */
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "driver/drv_trace_priv.h"
#include "patch/patch.h"
#include "base/qpt_trace_format.h"

/* Names the drivers answer to (drv_find); they place no counter themselves. */
static int
trace_place_none(drv_graph_t *g, drv_result_t *res, const char **why)
{
    (void)g;
    (void)res;
    (void)why;
    return 0;
}

const drv_ops_t drv_trace_ops = { "trace", QP_DRIVER_NAIVE, trace_place_none,
                                  DRV_TRACE_CHORDS, NULL };
const drv_ops_t drv_trace_naive_ops = { "trace-naive", QP_DRIVER_NAIVE, trace_place_none,
                                        DRV_TRACE_BLOCKS, NULL };

#define NONE QPT_TRACE_NONE

static int
add_event(drv_trace_t *t, uint32_t kind, uint32_t a, uint32_t *id)
{
    if (t->nevents >= QPT_TRACE_MAXEVENTS)
        return QP_ERANGE;
    QP_CHECK(cfg_vec_grow(
        (void **)&t->events, &t->events_cap, t->nevents + 1, sizeof(qpt_trace_event_t)));
    t->events[t->nevents] = (qpt_trace_event_t) { kind, a };
    *id = t->nevents++;
    return 0;
}

static int
add_point(drv_trace_t *t, uint64_t addr, int at, int save, int entry, uint32_t event)
{
    QP_CHECK(
        cfg_vec_grow((void **)&t->pts, &t->pts_cap, t->npts + 1, sizeof(trace_point_t)));
    t->pts[t->npts++] = (trace_point_t) { .addr = addr, .at = (uint8_t)at, .save = (uint8_t)save,
                                          .entry = (uint8_t)entry,
                                          .event = event };
    return 0;
}

/*
 * Block B (of the description) ends in a tail call through a pointer at ADDR (an
 * indirect jump of unknown target that leaves its procedure): make it record its target
 * first, when its operand can be read (a register, or memory
 * without a segment override), and say so (QPT_TB_JUMPVAL). The walk then follows it
 * into traced code without guessing from the next record.
 */
static int
add_jump_point(drv_trace_t *t, const cfg_prog_t *prog, qpt_trace_block_t *b, uint64_t addr)
{
    size_t avail = 0;
    const uint8_t *p = cfg_image_ptr(prog->img, addr, &avail);
    arch_ops_t ops;
    if (p == NULL || arch_decode_ops(p, avail, addr, &ops) < 0 || ops.op != ARCH_OP_JMP)
        return 0;
    const arch_opnd_t *o = &ops.src;
    if (!(o->kind == ARCH_OPND_REG && o->reg != ARCH_REG_SP && o->size == 8)
        && !(o->kind == ARCH_OPND_MEM && !o->seg && o->size == 8))
        return 0;
    QP_CHECK(cfg_vec_grow((void **)&t->jpts, &t->jpts_cap, t->njpts + 1, sizeof(jump_point_t)));
    t->jpts[t->njpts++] = (jump_point_t) { addr, *o };
    b->flags |= QPT_TB_JUMPVAL;
    return 0;
}

struct tproc;
static int interior_targets(const struct tproc *p);

static const char *const twice_names[] = { "setjmp", "_setjmp", "__sigsetjmp", "sigsetjmp",
                                           "vfork", "savectx", "getcontext", NULL };

/* The weight of keeping edge E silent: how often it runs (10 per loop level) times what a
 * probe on it would cost (a stub for a taken branch, a flags save). */
static double
edge_weight(const drv_graph_t *g, const drv_edge_t *e)
{
    const cfg_block_t *b = g->prog->blocks + g->first;
    uint32_t X = g->nblocks;
    unsigned df = e->from == X ? 0 : b[e->from].loop_depth;
    unsigned dt = e->to == X ? df : b[e->to].loop_depth;
    unsigned d = df < dt ? df : dt;
    double w = 1;
    int64_t c = -1;
    if (g->weights != NULL) /* --weights: the counts of an earlier run */
        c = drv_weights_get(g->weights, e->from == X ? 0 : b[e->from].start,
                            e->to == X ? 0 : b[e->to].start, e->kind);
    if (c >= 0)
        w = (double)c + 1;
    else
        for (unsigned i = 0; i < d && i < 30; i++)
            w *= 10;
    double cost = 1.0;
    if (e->place == DRV_PLACE_TAKEN)
        cost += 1.0;
    if (e->save_flags)
        cost += 3.0;
    return w * cost;
}

/* The probe-cost factor edge_weight put into its weight (to take it out again). */
static double
edge_cost(const drv_edge_t *e)
{
    double cost = 1.0;
    if (e->place == DRV_PLACE_TAKEN)
        cost += 1.0;
    if (e->save_flags)
        cost += 3.0;
    return cost;
}

#define FLAT_MAX 64 /* blocks looked at by flat_path */

/* Is there a way from block T back to block B (global indices, of G's procedure) within
 * FLAT_MAX blocks and through no jump table or indirect jump? */
static int
flat_path(const drv_graph_t *g, uint32_t t, uint32_t b)
{
    uint32_t seen[FLAT_MAX], nseen = 0;
    seen[nseen++] = t;
    for (uint32_t k = 0; k < nseen; k++) { /* breadth first: SEEN is the queue */
        const cfg_block_t *bv = &g->prog->blocks[seen[k]];
        for (uint32_t e = bv->succ; e < bv->succ + bv->nsucc; e++) {
            const cfg_edge_t *ce = &g->prog->edges[e];
            uint32_t w = ce->to;
            if (w == b)
                return 1;
            if (w == CFG_NONE || w < g->first || w >= g->first + g->nblocks
                || ce->kind == CFG_EDGE_TABLE || ce->kind == CFG_EDGE_INDIRECT)
                continue;
            int dup = 0;
            for (uint32_t j = 0; j < nseen && !dup; j++)
                dup = seen[j] == w;
            if (dup)
                continue;
            if (nseen == FLAT_MAX)
                return 0;
            seen[nseen++] = w;
        }
    }
    return 0;
}

/*
 * Is the backward branch of block I (local) to block T (global) a loop's: T a loop head
 * that dominates it, a loop head I jumping back into its (rotated) body, or a short way
 * from T back to I? A backward jump to code shared by several paths (an interpreter's
 * slow paths, laid out before the fast ones) is not: its fall-through is the likely way.
 */
static int
loop_branch(const drv_graph_t *g, uint32_t i, uint32_t t)
{
    const cfg_prog_t *prog = g->prog;
    uint32_t b = g->first + i;
    if (t == CFG_NONE || t == b)
        return t == b;
    if ((prog->blocks[t].is_loop_head && cfg_block_dominates(prog, t, b))
        || (prog->blocks[b].is_loop_head && cfg_block_dominates(prog, b, t)))
        return 1;
    return flat_path(g, t, b);
}

/* C library functions that never call the program back; defined below. */
static int leaf_plt(const cfg_prog_t *prog, uint64_t addr);

/* Does block I (local) of G end in a call of something else than a C library leaf? */
static int
calls_out(const drv_graph_t *g, uint32_t i)
{
    return (g->last_kind[i] == ARCH_KIND_CALL && !leaf_plt(g->prog, g->last_target[i]))
        || g->last_kind[i] == ARCH_KIND_CALL_IND;
}

/*
 * Ball and Larus's call heuristic, as a reachability: CALM[i] says whether block I can
 * reach a loop's back edge or a return through blocks that make no call. The way out of
 * a branch that reaches one so, against one that cannot without a call, is the likely
 * one (a fast path that goes round the loop against a slow one that calls for help).
 */
static int
calm_blocks(const drv_graph_t *g, uint8_t *calm)
{
    uint32_t X = g->nblocks;
    uint32_t *off = calloc(X + 2, sizeof(uint32_t)), *in = malloc((g->nedges + 1) * sizeof(uint32_t));
    uint32_t *queue = malloc((X + 1) * sizeof(uint32_t)), nq = 0;
    if (off == NULL || in == NULL || queue == NULL) {
        free(off);
        free(in);
        free(queue);
        return QP_ENOMEM;
    }
    memset(calm, 0, X + 1);
    for (uint32_t e = 0; e < g->nedges; e++) { /* each block's ways in, and the seeds */
        const drv_edge_t *ed = &g->edges[e];
        if (ed->from == X || calls_out(g, ed->from))
            continue;
        if (ed->to != X)
            off[ed->to + 1]++;
        else if (ed->kind == CFG_EDGE_RETURN && !calm[ed->from])
            calm[queue[nq++] = ed->from] = 1;
        if (ed->to != X && !calm[ed->from] && g->prog->blocks[g->first + ed->to].is_loop_head
            && cfg_block_dominates(g->prog, g->first + ed->to, g->first + ed->from))
            calm[queue[nq++] = ed->from] = 1;
    }
    for (uint32_t v = 0; v < X; v++)
        off[v + 1] += off[v];
    for (uint32_t e = 0; e < g->nedges; e++) {
        const drv_edge_t *ed = &g->edges[e];
        if (ed->from != X && ed->to != X && !calls_out(g, ed->from))
            in[off[ed->to]++] = ed->from;
    }
    for (uint32_t v = X; v > 0; v--) /* each off[v] moved to off[v + 1]: back */
        off[v] = off[v - 1];
    off[0] = 0;
    for (uint32_t k = 0; k < nq; k++) /* backwards through blocks that make no call */
        for (uint32_t j = off[queue[k]]; j < off[queue[k] + 1]; j++)
            if (!calm[in[j]])
                calm[queue[nq++] = in[j]] = 1;
    free(off);
    free(in);
    free(queue);
    return 0;
}

/*
 * How much keeping edge ED (out of block I) silent saves: how often it runs, estimated
 * from loop depth, and - between the ways out of one conditional branch - a static
 * prediction: a loop's branch back (loop_branch) is likely taken; else the way that goes
 * round a loop or returns without a call (CALM) against one that cannot; else the
 * compiler's layout: the way it falls through to. A record costs the same wherever it
 * goes, so unlike qp's spanning tree the cost of a probe only breaks ties.
 */
static double
silent_weight(const drv_graph_t *g, uint32_t i, const drv_edge_t *ed, const uint8_t *calm)
{
    double w = edge_weight(g, ed);
    const cfg_block_t *b = &g->prog->blocks[g->first + i];
    uint32_t X = g->nblocks;
    double like = 1.0;
    if (g->last_kind[i] == ARCH_KIND_JCC && ed->cfg_edge != CFG_NONE && g->weights == NULL) {
        const cfg_edge_t *ce = &g->prog->edges[ed->cfg_edge];
        int backward = g->last_target[i] != 0 && g->last_target[i] <= b->start;
        int taken = ce->kind == CFG_EDGE_TAKEN
            || (ed->to == X && ce->target == g->last_target[i]);
        uint32_t tt = CFG_NONE, other = NONE; /* the taken target; the other way's */
        for (uint32_t k = b->succ; k < b->succ + b->nsucc; k++) {
            uint32_t to = g->prog->edges[k].to;
            if (g->prog->edges[k].kind == CFG_EDGE_TAKEN)
                tt = to;
            if (k != ed->cfg_edge)
                other = to != CFG_NONE && to >= g->first && to < g->first + X ? to - g->first : X;
        }
        int loop = backward && loop_branch(g, i, tt);
        like = taken == loop ? 4.0 : 1.0;
        if (!loop && ed->to != X && other != NONE && other != X && calm[ed->to] != calm[other])
            like = calm[ed->to] ? 8.0 : 1.0;
    }
    double cost = ed->place == DRV_PLACE_TAKEN ? 1.01 : 1.0;
    return w / (ed->save_flags ? 1.02 : 1.0) * like * cost / (edge_cost(ed));
}

/* Per traced procedure, what the first pass found. */
typedef struct tproc {
    drv_graph_t g;
    uint32_t prog_proc;
    uint8_t *blockev;   /* per local block */
    uint32_t *tree;     /* per local block: graph edge index, or NONE */
    uint32_t first;     /* its first block in the description */
    uint32_t flags;     /* QPT_TP_* */
} tproc_t;

/* Does a block of P other than its entry record BLOCK (a jump table's or held label's
 * target, a landing pad, a block entered from another procedure)? */
static int
interior_targets(const tproc_t *p)
{
    for (uint32_t j = 1; j < p->g.nblocks; j++)
        if (p->blockev[j])
            return 1;
    return 0;
}

/* C library functions that never call the program back (no callbacks, no hooks): a call
 * of one through the PLT needs no RETURNED, and a tail jump to one is a return. */
static const char *const leaf_names[] = {
    "memcpy", "memmove", "memset", "memcmp", "memchr", "memrchr", "rawmemchr", "bcmp",
    "strlen", "strnlen", "strcmp", "strncmp", "strcasecmp", "strncasecmp", "strcpy",
    "strncpy", "stpcpy", "stpncpy", "strcat", "strncat", "strchr", "strrchr", "strstr",
    "strspn", "strcspn", "strpbrk", "wcslen", "__memcpy_chk", "__memmove_chk",
    "__memset_chk", "__strcpy_chk", "__strcat_chk", "__stpcpy_chk", "__strncpy_chk",
    "malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc",
    "malloc_usable_size", "__errno_location", "__ctype_b_loc", "__ctype_tolower_loc",
    "__ctype_toupper_loc", "tolower", "toupper", "abs", "labs", "llabs", "sqrt", "exp",
    "log", "log10", "pow", "floor", "ceil", "fmod", "sin", "cos", "tan", "atan", "atan2",
    "ldexp", "frexp", "modf", "fabs", "trunc", "round", "clock_gettime", "gettimeofday",
    "time", "getpid", "read", "write", "pthread_mutex_lock", "pthread_mutex_unlock",
    "pthread_mutex_trylock", "pthread_self", NULL,
};

/* Is ADDR the PLT stub of a function of leaf_names? */
static int
leaf_plt(const cfg_prog_t *prog, uint64_t addr)
{
    const cfg_proc_t *p = cfg_proc_entered_at(prog, addr);
    return p != NULL && (p->flags & CFG_PROC_PLT) && drv_name_in(p->name, leaf_names);
}

/* The target of graph edge ED when it is a tail call (direct or known), else 0. */
static uint64_t
tail_target(const drv_graph_t *g, const drv_edge_t *ed)
{
    return ed->kind == CFG_EDGE_TAILCALL && ed->cfg_edge != CFG_NONE
        ? g->prog->edges[ed->cfg_edge].target : 0;
}

/* Does the silent path stop on entering local block T (it records, or a call there
 * makes the callee record before anything else of this procedure can)? */
static int
stops_at(const tproc_t *p, uint32_t t)
{
    const drv_graph_t *g = &p->g;
    if (p->blockev[t] || g->last_kind[t] == ARCH_KIND_CALL_IND)
        return 1;
    /* a call of a C library leaf records nothing (leaf_plt) */
    return g->last_kind[t] == ARCH_KIND_CALL && !leaf_plt(g->prog, g->last_target[t]);
}

/* Where the silent path goes from node V (a block, or X = nblocks: the entry, unless
 * ENTER records it), or NONE when a record is needed there. */
static uint32_t
silent_next(const tproc_t *p, uint32_t v, int enter)
{
    const drv_graph_t *g = &p->g;
    uint32_t X = g->nblocks, t;
    if (v == X)
        t = enter ? NONE : 0;
    else if (p->tree[v] == NONE)
        return NONE;
    else {
        const drv_edge_t *ed = &g->edges[p->tree[v]];
        if (ed->to == X) {
            /* A tail call's callee records - unless it is a C library leaf, which
             * records nothing and returns for this activation (QPT_TE_RETURN). */
            return ed->kind == CFG_EDGE_RETURN || leaf_plt(g->prog, tail_target(g, ed)) ? X : NONE;
        }
        t = ed->to;
    }
    return t == NONE || stops_at(p, t) ? NONE : t;
}

/*
 * Every cycle of silent edges gets a record (Ball and Larus: a cycle without an
 * instrumented edge cannot be regenerated), the cycle through X too (an activation that
 * records nothing could not be told from the next one): the cheapest tree edge of each
 * cycle becomes a chord (its block then has no silent way out). 0, or DRV_NOT_MEASURED
 * when a cycle has no edge a probe can go on.
 */
static int
break_cycles(tproc_t *p, int enter)
{
    drv_graph_t *g = &p->g;
    uint32_t X = g->nblocks, n = X + 1;
    uint32_t *mark = calloc(n, sizeof(uint32_t)), *path = malloc(n * sizeof(uint32_t));
    int rc = mark && path ? 0 : QP_ENOMEM;
    for (uint32_t s0 = 0; rc == 0 && s0 < n; s0++) {
        if (mark[s0])
            continue;
        uint32_t len = 0, v = s0;
        while (v != NONE && !mark[v]) {
            mark[v] = s0 + 1;
            path[len++] = v;
            v = silent_next(p, v, enter);
        }
        if (v == NONE || mark[v] != s0 + 1)
            continue; /* ends, or joins a path already looked at */
        uint32_t best = NONE;
        double bw = 1e308;
        for (uint32_t k = len; k-- > 0;) {
            uint32_t b = path[k];
            if (b != X) {
                const drv_edge_t *ed = &g->edges[p->tree[b]];
                double w = edge_weight(g, ed);
                if (ed->place != DRV_PLACE_NONE && w < bw) {
                    bw = w;
                    best = b;
                }
            }
            if (b == v)
                break;
        }
        if (best == NONE) {
            g->why = "a cycle of edges that no probe can go on";
            rc = DRV_NOT_MEASURED;
        } else
            p->tree[best] = NONE;
    }
    free(mark);
    free(path);
    return rc;
}

/*
 * Paths back into an activation of the same procedure: a recursive procedure's
 * activation can return (silently) into another activation of it - its caller, or a
 * caller further down through other procedures of its recursion - which goes on from
 * the call's return site. If that path can reach a block silently, a record made there
 * would not say which activation made it. So no silent path may lead from the return
 * site of a call of a recursive procedure (RECURSIVE, by program procedure; NULL: every
 * direct call) to X: the cheapest edge of each becomes a chord. 0 or DRV_NOT_MEASURED.
 */
/* Of the blocks PATH[0..LEN-1] (each with a silent way out), the one whose silent edge
 * is the cheapest that a probe can go on, or NONE. */
static uint32_t
cheapest_tree_edge(const tproc_t *p, const uint32_t *path, uint32_t len)
{
    uint32_t best = NONE;
    double bw = 1e308;
    for (uint32_t k = 0; k < len; k++) {
        const drv_edge_t *ed = &p->g.edges[p->tree[path[k]]];
        double w = edge_weight(&p->g, ed);
        if (ed->place != DRV_PLACE_NONE && w < bw) {
            bw = w;
            best = path[k];
        }
    }
    return best;
}

static int
break_returns(tproc_t *p, const cfg_prog_t *prog, const uint8_t *recursive)
{
    drv_graph_t *g = &p->g;
    uint32_t X = g->nblocks;
    uint32_t *path = malloc((X + 1) * sizeof(uint32_t)), *seen = calloc(X + 1, sizeof(uint32_t));
    int rc = path && seen ? 0 : QP_ENOMEM;
    for (uint32_t c = 0; rc == 0 && c < X; c++) {
        if (g->last_kind[c] != ARCH_KIND_CALL || p->tree[c] == NONE)
            continue;
        const cfg_proc_t *cp = g->last_target[c] ? cfg_proc_at(prog, g->last_target[c]) : NULL;
        if (cp == NULL || cp->entry != g->last_target[c]
            || (recursive != NULL && !recursive[cp - prog->procs]))
            continue;
        const drv_edge_t *ce = &g->edges[p->tree[c]];
        if (ce->to == X || stops_at(p, ce->to))
            continue;
        /* Follow the silent path from the return site (c + 1 stamps this walk). */
        uint32_t len = 0, v = ce->to;
        while (v != NONE && v != X && seen[v] != c + 1) {
            seen[v] = c + 1;
            path[len++] = v;
            v = silent_next(p, v, 1);
        }
        if (v != X)
            continue;
        uint32_t best = cheapest_tree_edge(p, path, len);
        if (best == NONE) {
            g->why = "a return path that no probe can mark";
            rc = DRV_NOT_MEASURED;
        } else
            p->tree[best] = NONE;
    }
    free(path);
    free(seen);
    return rc;
}

/*
 * A recursive procedure that does not record ENTER: every silent way from its entry to a
 * call (or tail jump) of a recursive procedure (RECURSIVE, by program procedure) makes a
 * record of its own first - else the walk could go down the recursion without end, or
 * take an activation's first record for a deeper one's. Calls of other procedures are
 * gone through (their records are theirs). The cheapest edge of each such way becomes a
 * chord. 0, or 1 when a way has none a probe can go on (the procedure then records
 * ENTER).
 */
static int
break_recursion(tproc_t *p, const uint8_t *recursive)
{
    drv_graph_t *g = &p->g;
    const cfg_prog_t *prog = g->prog;
    uint32_t X = g->nblocks;
    uint32_t *path = malloc((X + 1) * sizeof(uint32_t));
    if (path == NULL)
        return QP_ENOMEM;
    for (;;) {
        uint32_t len = 0, v = 0;
        int found = 0;
        for (uint32_t steps = 0; steps <= X && !found; steps++) {
            if (p->blockev[v] || g->last_kind[v] == ARCH_KIND_CALL_IND)
                break; /* it records (BLOCK, RETURNED) */
            if (g->last_kind[v] == ARCH_KIND_CALL) {
                const cfg_proc_t *cp = g->last_target[v] ? cfg_proc_at(prog, g->last_target[v]) : NULL;
                if (cp == NULL || cp->entry != g->last_target[v]
                    || ((cp->flags & CFG_PROC_PLT) && !leaf_plt(prog, g->last_target[v])))
                    break; /* RETURNED after it */
                if (recursive[cp - prog->procs]) {
                    found = 1;
                    break;
                }
            }
            path[len++] = v;
            if (p->tree[v] == NONE)
                break;
            const drv_edge_t *ed = &g->edges[p->tree[v]];
            if (ed->to == X) {
                uint64_t target = tail_target(g, ed);
                const cfg_proc_t *cp = target ? cfg_proc_at(prog, target) : NULL;
                found = cp != NULL && cp->entry == target && recursive[cp - prog->procs];
                break;
            }
            v = ed->to;
        }
        if (!found)
            break;
        uint32_t best = cheapest_tree_edge(p, path, len);
        if (best == NONE) {
            free(path);
            return 1;
        }
        p->tree[best] = NONE;
    }
    free(path);
    return 0;
}

/*
 * Which blocks record BLOCK, each block's tree edge, and the cycles broken (ENTER: the
 * procedure records its entry). 0, or DRV_NOT_MEASURED when the procedure cannot be
 * traced (its entry would record BLOCK, a block has two ways out that no probe can tell
 * apart, a cycle no probe can break).
 */
static int
classify(tproc_t *p, int naive, int enter, const uint8_t *recursive, const uint64_t *pads,
         size_t npads)
{
    drv_graph_t *g = &p->g;
    uint32_t X = g->nblocks;
    free(p->blockev);
    free(p->tree);
    p->blockev = calloc(g->nblocks + 1, 1);
    p->tree = malloc((g->nblocks + 1) * sizeof(uint32_t));
    if (p->blockev == NULL || p->tree == NULL)
        return QP_ENOMEM;
    for (uint32_t e = 0; e < g->nedges; e++) {
        const drv_edge_t *ed = &g->edges[e];
        if (ed->to == X)
            continue;
        if (ed->kind == QP_EDGE_ROOT || (ed->from != X && ed->place == DRV_PLACE_NONE)
            || ed->kind == CFG_EDGE_TABLE || ed->kind == CFG_EDGE_INDIRECT)
            p->blockev[ed->to] = 1;
    }
    /* Landing pads: only the unwinder goes there (a CFG may see a way in all the same:
     * the fall-through after a call of __cxa_throw). */
    for (uint32_t i = 1; i < g->nblocks; i++)
        if (cfg_u64_contains(pads, npads, g->prog->blocks[g->first + i].start))
            p->blockev[i] = 2;
    if (p->blockev[0]) {
        g->why = "its entry is also the target of a jump table or entered from outside";
        return DRV_NOT_MEASURED;
    }
    uint8_t *calm = malloc(g->nblocks + 1);
    if (calm == NULL)
        return QP_ENOMEM;
    if (calm_blocks(g, calm) < 0) {
        free(calm);
        return QP_ENOMEM;
    }
    for (uint32_t i = 0; i < g->nblocks; i++) {
        uint32_t best = NONE, unplaceable = 0, to_blockev_np = 0;
        double bw = -1;
        for (uint32_t e = 0; e < g->nedges; e++) {
            const drv_edge_t *ed = &g->edges[e];
            if (ed->from != i)
                continue;
            if (ed->to != X && p->blockev[ed->to]) {
                to_blockev_np += ed->place == DRV_PLACE_NONE;
                continue;
            }
            /* an edge no probe can go on must be the silent one */
            double w = ed->place == DRV_PLACE_NONE ? 1e300 : silent_weight(g, i, ed, calm);
            unplaceable += ed->place == DRV_PLACE_NONE;
            if (w > bw) {
                bw = w;
                best = e;
            }
        }
        /* A block with ways into blocks that record BLOCK that no probe can mark (a
         * table) has no silent way: its other ways record (a silent one could lead to
         * another way into the same block, and the BLOCK record would not tell). */
        if (to_blockev_np > 0) {
            if (unplaceable > 0) {
                g->why = "a block jumps through a table and elsewhere without a probe";
                free(calm);
                return DRV_NOT_MEASURED;
            }
            best = NONE;
        }
        if (unplaceable > 1) {
            g->why = "a block has two ways out that no probe can tell apart";
            free(calm);
            return DRV_NOT_MEASURED;
        }
        p->tree[i] = best;
    }
    free(calm);
    QP_CHECK(break_cycles(p, enter));
    QP_CHECK(break_returns(p, g->prog, recursive));
    if (naive) /* the same procedures as the tracer, every block recording */
        for (uint32_t i = 0; i < g->nblocks; i++)
            p->blockev[i] |= 1;
    return 0;
}

/* The trace procedure of program procedure I, or NONE. */
static uint32_t
traced(const uint32_t *of, uint32_t i)
{
    return i == CFG_NONE ? NONE : of[i];
}

static uint32_t
proc_entry_index(const cfg_prog_t *prog, const uint32_t *of, uint64_t addr)
{
    const cfg_proc_t *cp = addr ? cfg_proc_at(prog, addr) : NULL;
    if (cp == NULL || cp->entry != addr)
        return NONE;
    return traced(of, (uint32_t)(cp - prog->procs));
}

/* The description's index of the block at ADDR of a traced procedure that records
 * BLOCK (a jump from another procedure can land there), or NONE. */
static uint32_t
block_into(const cfg_prog_t *prog, const uint32_t *of, const tproc_t *all, uint64_t addr)
{
    const cfg_proc_t *cp = addr ? cfg_proc_at(prog, addr) : NULL;
    if (cp == NULL)
        return NONE;
    uint32_t owner = cfg_proc_owner(prog, (uint32_t)(cp - prog->procs));
    uint32_t q = owner == CFG_NONE ? NONE : of[owner];
    if (q == NONE)
        return NONE;
    const drv_graph_t *g = &all[q].g;
    for (uint32_t i = 0; i < g->nblocks; i++)
        if (prog->blocks[g->first + i].start == addr)
            return all[q].blockev[i] ? all[q].first + i : NONE;
    return NONE;
}

/* May procedure P be entered other than by a direct call from traced code (TAKEN: the
 * sorted code addresses held as values)? */
static int
needs_enter(const cfg_prog_t *prog, const cfg_proc_t *p, const uint64_t *taken, size_t ntaken)
{
    if (p->sources & (CFG_SRC_ADDR | CFG_SRC_ENTRY | CFG_SRC_INIT | CFG_SRC_GAP
                      | CFG_SRC_SECTION))
        return 1;
    if (cfg_u64_contains(taken, ntaken, p->entry))
        return 1;
    if (!(p->sources & (CFG_SRC_CALL | CFG_SRC_TAILCALL)))
        return 1;
    if (prog->img->flags & CFG_IMG_SHLIB)
        return 1; /* any exported function may be called from outside */
    return strcmp(p->name, "main") == 0;
}

/*
 * Traced procedures that code not traced calls or jumps to directly (a procedure the
 * rewrite left in place calling a traced one; OF[i] NONE: procedure I is not traced)
 * record ENTER, as their callers record nothing.
 */
static void
mark_untraced_callees(drv_trace_t *t, const cfg_prog_t *prog, const uint32_t *of)
{
    for (uint32_t b = 0; b < prog->nblocks; b++) {
        const cfg_block_t *bl = &prog->blocks[b];
        uint32_t owner = bl->proc;
        if (owner < prog->nprocs && (prog->procs[owner].flags & CFG_PROC_FRAGMENT))
            owner = prog->procs[owner].parent;
        if (owner >= prog->nprocs || of[owner] != NONE
            || (prog->procs[owner].flags & CFG_PROC_PLT))
            continue;
        for (uint32_t e = bl->succ; e <= bl->succ + bl->nsucc; e++) {
            uint64_t to = e == bl->succ + bl->nsucc ? bl->call_target
                        : prog->edges[e].kind == CFG_EDGE_TAILCALL ? prog->edges[e].target : 0;
            uint32_t q = proc_entry_index(prog, of, to);
            if (q != NONE)
                t->procs[q].flags |= QPT_TP_ENTER;
        }
    }
}

/*
 * The code that is not traced, so that qp trace can say which of it the traced code
 * called: the PLT stubs and the procedures left in place (OF[i] NONE: not traced;
 * fragments go with their procedure).
 */
static int
list_outside(drv_trace_t *t, const cfg_prog_t *prog, const uint32_t *of)
{
    size_t bytes = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < prog->nprocs; i++)
        if (of[i] == NONE && !(prog->procs[i].flags & CFG_PROC_FRAGMENT)) {
            n++;
            bytes += strlen(prog->procs[i].name) + 1;
        }
    t->outs = calloc((size_t)n + 1, sizeof(qpt_trace_out_t));
    t->out_names = malloc(bytes + 1);
    t->out_of = malloc(((size_t)prog->nprocs + 1) * sizeof(uint32_t));
    if (t->outs == NULL || t->out_names == NULL || t->out_of == NULL || bytes > UINT32_MAX)
        return t->outs && t->out_names && t->out_of ? QP_ERANGE : QP_ENOMEM;
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        t->out_of[i] = NONE;
        if (of[i] != NONE || (p->flags & CFG_PROC_FRAGMENT))
            continue;
        size_t len = strlen(p->name) + 1;
        memcpy(t->out_names + t->out_nbytes, p->name, len);
        t->outs[t->nouts] = (qpt_trace_out_t) { p->entry, (uint32_t)t->out_nbytes,
                                                (p->flags & CFG_PROC_PLT) ? QPT_TO_PLT : QPT_TO_LEFT };
        t->out_of[i] = t->nouts++;
        t->out_nbytes += len;
    }
    return 0;
}

/*
 * The entry of OUTS for the indirect call at AT when it reads a GOT slot of a shared
 * library's function (`call *__libc_start_main@GOTPCREL(%rip)`): not a pointer to
 * traced code. NONE otherwise (a name of the program's own code: a pointer).
 */
static int
got_callee(drv_trace_t *t, const cfg_prog_t *prog, uint64_t at, uint32_t *out)
{
    *out = NONE;
    size_t avail = 0;
    const uint8_t *p = cfg_image_ptr(prog->img, at, &avail);
    arch_insn_t in;
    const char *name = NULL;
    if ((prog->img->flags & CFG_IMG_DYNAMIC) && p != NULL && arch_decode(p, avail, at, &in) == 0)
        name = cfg_callee_name(prog, &in);
    if (name == NULL)
        return 0;
    for (uint32_t i = 0; i < prog->nprocs; i++)
        if (strcmp(prog->procs[i].name, name) == 0)
            return 0;
    for (uint32_t i = 0; i < t->nouts; i++)
        if (t->outs[i].kind == QPT_TO_GOT && strcmp(t->out_names + t->outs[i].name, name) == 0) {
            *out = i;
            return 0;
        }
    size_t len = strlen(name) + 1;
    if (t->out_nbytes + len > UINT32_MAX)
        return QP_ERANGE;
    qpt_trace_out_t *v = realloc(t->outs, ((size_t)t->nouts + 1) * sizeof(*v));
    if (v != NULL)
        t->outs = v;
    char *s = realloc(t->out_names, t->out_nbytes + len);
    if (s != NULL)
        t->out_names = s;
    if (v == NULL || s == NULL)
        return QP_ENOMEM;
    memcpy(s + t->out_nbytes, name, len);
    v[t->nouts] = (qpt_trace_out_t) { 0, (uint32_t)t->out_nbytes, QPT_TO_GOT };
    t->out_nbytes += len;
    *out = t->nouts++;
    return 0;
}

/* The entry of OUTS for a direct call of TARGET (CP: the procedure there), or NONE. */
static uint32_t
outside_of(const drv_trace_t *t, const cfg_prog_t *prog, const cfg_proc_t *cp, uint64_t target)
{
    if (cp == NULL || cp->entry != target || t->out_of == NULL)
        return NONE;
    return t->out_of[cp - prog->procs];
}

/* The description of procedure K's blocks and edges, and its events' points. */
static int
describe_proc(drv_trace_t *t, tproc_t *tp, uint32_t k, const uint32_t *of, const tproc_t *all)
{
    drv_graph_t *g = &tp->g;
    const cfg_prog_t *prog = g->prog;
    uint32_t X = g->nblocks;
    qpt_trace_proc_t *d = &t->procs[k];
    if (d->flags & QPT_TP_ENTER) {
        QP_CHECK(add_event(t, QPT_TV_ENTER, k, &d->enter_event));
        QP_CHECK(add_point(t, prog->procs[tp->prog_proc].entry, ED_AT_BEFORE, 0, 1,
                           d->enter_event));
    }
    for (uint32_t i = 0; i < g->nblocks; i++) {
        const cfg_block_t *cb = &prog->blocks[g->first + i];
        uint32_t gb = tp->first + i;
        QP_CHECK(cfg_vec_grow((void **)&t->blocks, &t->blocks_cap, t->nblocks + 1,
            sizeof(qpt_trace_block_t)));
        qpt_trace_block_t *b = &t->blocks[t->nblocks++];
        memset(b, 0, sizeof(*b));
        b->start = cb->start;
        b->proc = k;
        b->edge = t->nedges;
        b->tree = NONE;
        b->callee = NONE;
        b->block_event = NONE;
        b->ret_event = NONE;
        if (tp->blockev[i]) {
            b->flags |= QPT_TB_BLOCKEV;
            QP_CHECK(add_event(t, QPT_TV_BLOCK, gb, &b->block_event));
            QP_CHECK(add_point(t, g->block_at[i], ED_AT_BEFORE, g->block_save[i], 0,
                               b->block_event));
        }
        for (uint32_t e = 0; e < g->nedges; e++)
            if (g->edges[e].kind == QP_EDGE_ROOT && g->edges[e].to == i)
                b->flags |= QPT_TB_ROOT;
        if (tp->blockev[i] & 2)
            b->flags |= QPT_TB_ROOT;
        /* The call it ends with. */
        const cfg_proc_t *cp = g->last_target[i] ? cfg_proc_at(prog, g->last_target[i]) : NULL;
        if (g->last_kind[i] == ARCH_KIND_CALL && g->last_target[i] != 0) {
            uint32_t q = proc_entry_index(prog, of, g->last_target[i]);
            int twice = cp != NULL && cp->entry == g->last_target[i] && drv_name_in(cp->name, twice_names);
            if (twice)
                b->flags |= QPT_TB_SETJMP;
            if (q == NONE && leaf_plt(prog, g->last_target[i])) {
                b->flags |= QPT_TB_LEAFCALL; /* b->call stays QPT_TC_NONE */
                b->callee = outside_of(t, prog, cp, g->last_target[i]);
            } else if (q == NONE) {
                b->call = QPT_TC_OUTSIDE;
                b->callee = outside_of(t, prog, cp, g->last_target[i]);
                /* A static program's PLT jumps through its GOT to its own code (IFUNC) */
                if (cp != NULL && (cp->flags & CFG_PROC_PLT) && !(prog->img->flags & CFG_IMG_DYNAMIC))
                    b->flags |= QPT_TB_CALLPTR;
            }
            else {
                b->callee = q;
                b->call = twice || (t->procs[q].flags & QPT_TP_UNCLEAN) ? QPT_TC_DIRECT_RET
                                                                        : QPT_TC_DIRECT;
            }
        } else if (g->last_kind[i] == ARCH_KIND_CALL_IND) {
            b->call = QPT_TC_OUTSIDE;
            QP_CHECK(got_callee(t, prog, g->last[i], &b->callee));
            if (b->callee == NONE)
                b->flags |= QPT_TB_CALLPTR;
        }
        if (!t->naive && (b->call == QPT_TC_OUTSIDE || b->call == QPT_TC_DIRECT_RET)) {
            QP_CHECK(add_event(t, QPT_TV_RETURNED, gb, &b->ret_event));
            QP_CHECK(add_point(t, g->last[i], ED_AT_AFTER, 0, 0, b->ret_event));
        }
        /* Its ways out. */
        for (uint32_t e = 0; e < g->nedges; e++) {
            const drv_edge_t *ed = &g->edges[e];
            if (ed->from != i)
                continue;
            QP_CHECK(cfg_vec_grow((void **)&t->edges, &t->edges_cap, t->nedges + 1,
                sizeof(qpt_trace_edge_t)));
            qpt_trace_edge_t *te = &t->edges[t->nedges];
            te->from = gb;
            te->to = NONE;
            te->event = NONE;
            if (ed->to != X) {
                te->kind = QPT_TE_BLOCK;
                te->to = tp->first + ed->to;
            } else if (ed->kind == CFG_EDGE_RETURN) {
                te->kind = QPT_TE_RETURN;
            } else if (ed->kind == CFG_EDGE_TAILCALL) {
                uint64_t target = tail_target(g, ed);
                uint32_t q = proc_entry_index(prog, of, target), into = NONE;
                if (q == NONE)
                    into = block_into(prog, of, all, target);
                te->kind = q != NONE ? QPT_TE_TAIL : into != NONE ? QPT_TE_TAIL_INTO : QPT_TE_OUT;
                te->to = q != NONE ? q : into;
                if (te->kind == QPT_TE_OUT && leaf_plt(prog, target)) {
                    te->kind = QPT_TE_RETURN; /* it returns for us */
                    te->to = NONE;
                }
            } else if (ed->kind == CFG_EDGE_NORETURN) {
                te->kind = QPT_TE_NORETURN;
            } else {
                te->kind = QPT_TE_OUT; /* unresolved */
            }
            /* A tail call through a pointer: its target, an entry that may record
             * nothing, or code not traced that calls traced code. (Not a jump of a
             * procedure with labels the program holds or other blocks entered from
             * afar: a computed goto, whose targets record BLOCK; a record at each would
             * cost more than the blocks.) */
            if (te->kind == QPT_TE_OUT && !t->naive && g->last_kind[i] == ARCH_KIND_JMP_IND
                && (ed->kind == CFG_EDGE_TAILCALL || !interior_targets(tp))
                && !(b->flags & QPT_TB_JUMPVAL))
                QP_CHECK(add_jump_point(t, prog, b, g->last[i]));
            /* With a silent way out, every other way records; without, the ways into
             * blocks that record BLOCK need nothing more. */
            int chord = tp->tree[i] != NONE || ed->to == X || !tp->blockev[ed->to];
            if (e == tp->tree[i])
                b->tree = t->nedges;
            else if (!t->naive && chord) {
                if (ed->place == DRV_PLACE_NONE)
                    return QP_EINVAL; /* classify made it the tree edge */
                QP_CHECK(add_event(t, QPT_TV_CHORD, t->nedges, &te->event));
                int at = ed->place == DRV_PLACE_BEFORE ? ED_AT_BEFORE
                    : ed->place == DRV_PLACE_AFTER     ? ED_AT_AFTER
                                                       : ED_AT_TAKEN;
                QP_CHECK(add_point(t, ed->at, at, ed->save_flags, 0, te->event));
            }
            t->nedges++;
            b->nedges++;
        }
    }
    /* Chords recorded in their target block, before its first instruction. */
    for (uint32_t e = 0; !t->naive && e < g->nedges; e++) {
        const drv_edge_t *ed = &g->edges[e];
        if (ed->from == X || ed->to == X || ed->place != DRV_PLACE_BEFORE || e == tp->tree[ed->from])
            continue;
        const cfg_block_t *cb = &prog->blocks[g->first + ed->to];
        if (ed->at >= cb->start && ed->at < cb->end)
            t->blocks[tp->first + ed->to].flags |= QPT_TB_CHORD_IN;
    }
    return 0;
}

/* Procedures that may end in code that is not traced, to a fixpoint over tail calls. */
static void
mark_unclean(drv_trace_t *t, tproc_t *tps, const cfg_prog_t *prog, const uint32_t *of)
{
    for (uint32_t k = 0; k < t->nprocs; k++) {
        const drv_graph_t *g = &tps[k].g;
        for (uint32_t e = 0; e < g->nedges; e++) {
            const drv_edge_t *ed = &g->edges[e];
            if (ed->to != g->nblocks || ed->from == g->nblocks)
                continue;
            if (ed->kind == CFG_EDGE_UNRESOLVED)
                t->procs[k].flags |= QPT_TP_UNCLEAN;
            if (ed->kind == CFG_EDGE_TAILCALL) {
                uint64_t target = ed->cfg_edge != CFG_NONE ? prog->edges[ed->cfg_edge].target : 0;
                if (proc_entry_index(prog, of, target) == NONE
                    && block_into(prog, of, tps, target) == NONE && !leaf_plt(prog, target))
                    t->procs[k].flags |= QPT_TP_UNCLEAN;
            }
        }
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t k = 0; k < t->nprocs; k++) {
            if (t->procs[k].flags & QPT_TP_UNCLEAN)
                continue;
            const drv_graph_t *g = &tps[k].g;
            for (uint32_t e = 0; e < g->nedges; e++) {
                const drv_edge_t *ed = &g->edges[e];
                if (ed->kind != CFG_EDGE_TAILCALL || ed->to != g->nblocks || ed->cfg_edge == CFG_NONE)
                    continue;
                uint32_t q = proc_entry_index(prog, of, prog->edges[ed->cfg_edge].target);
                if (q != NONE && (t->procs[q].flags & QPT_TP_UNCLEAN)) {
                    t->procs[k].flags |= QPT_TP_UNCLEAN;
                    changed = 1;
                    break;
                }
            }
        }
    }
}

/*
 * A procedure that may call itself (directly or through others) without recording its
 * entry could be entered again before its activation records anything: the next record
 * would not say which activation made it. Such procedures (those on a cycle of direct
 * calls and tail calls among procedures that do not record ENTER) are RECURSIVE: each
 * records before it calls a recursive procedure (break_recursion; ENTER where no edge
 * can), and no silent way leads from the return site of such a call to a return
 * (break_returns).
 */
static int
mark_recursive(drv_trace_t *t, tproc_t *tps, const cfg_prog_t *prog, const uint32_t *of)
{
    uint32_t n = t->nprocs;
    size_t nadj = 0, cap = 0;
    uint32_t *adj = NULL; /* callee lists, procedure after procedure */
    uint32_t *first = calloc(n + 2, sizeof(uint32_t));
    uint32_t *stamp = calloc(n + 1, sizeof(uint32_t)), *stack = NULL;
    uint8_t *rec = calloc(n + 1, 1);
    int rc = first && stamp && rec ? 0 : QP_ENOMEM;
    for (uint32_t k = 0; rc == 0 && k < n; k++) {
        const drv_graph_t *g = &tps[k].g;
        first[k] = (uint32_t)nadj;
        for (uint32_t i = 0; rc == 0 && i < g->nblocks + g->nedges; i++) {
            uint32_t q = NONE;
            if (i < g->nblocks) {
                if (g->last_kind[i] == ARCH_KIND_CALL)
                    q = proc_entry_index(prog, of, g->last_target[i]);
            } else {
                const drv_edge_t *ed = &g->edges[i - g->nblocks];
                q = proc_entry_index(prog, of, tail_target(g, ed));
            }
            if (q == NONE || (t->procs[q].flags & QPT_TP_ENTER))
                continue;
            if ((rc = cfg_vec_grow((void **)&adj, &cap, nadj + 1, sizeof(uint32_t))) == 0)
                adj[nadj++] = q;
        }
    }
    first[n] = (uint32_t)nadj;
    if (rc == 0 && (stack = malloc((nadj + 1) * sizeof(uint32_t))) == NULL)
        rc = QP_ENOMEM;
    /* Can K reach itself? (a search per procedure: stamps mark what it saw) */
    for (uint32_t k = 0; rc == 0 && k < n; k++) {
        size_t sp = 0;
        stack[sp++] = k;
        while (sp > 0 && !rec[k]) {
            uint32_t v = stack[--sp];
            for (uint32_t j = first[v]; j < first[v + 1]; j++) {
                if (adj[j] == k)
                    rec[k] = 1;
                if (stamp[adj[j]] != k + 1) {
                    stamp[adj[j]] = k + 1;
                    stack[sp++] = adj[j];
                }
            }
        }
    }
    for (uint32_t k = 0; rc == 0 && k < n; k++)
        if (rec[k])
            t->procs[k].flags |= QPT_TP_RECURSIVE;
    free(first);
    free(adj);
    free(stamp);
    free(stack);
    free(rec);
    return rc;
}

/* Is P a signal restorer (glibc's __restore_rt: mov $15,%rax; syscall)? */
static int
is_restorer(const cfg_prog_t *prog, const cfg_proc_t *p)
{
    static const uint8_t code[] = { 0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05 };
    size_t avail = 0;
    const uint8_t *b = cfg_image_ptr(prog->img, p->entry, &avail);
    return b != NULL && avail >= sizeof(code) && memcmp(b, code, sizeof(code)) == 0;
}

/* Was program procedure I measured by drv_run (RES)? */
static int
was_measured(const drv_result_t *res, const cfg_proc_t *p)
{
    /* res->procs follow prog->procs' order: find by entry (binary search would need
     * sorted entries; they are in program order, which is by entry). */
    uint32_t lo = 0, hi = res->nprocs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (res->procs[mid].entry < p->entry)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < res->nprocs && res->procs[lo].entry == p->entry
        && (res->procs[lo].flags & QP_PROC_MEASURED);
}

void
drv_trace_free(drv_trace_t *t)
{
    if (t == NULL)
        return;
    free(t->procs);
    free(t->blocks);
    free(t->edges);
    free(t->events);
    free(t->pts);
    free(t->ifirst);
    free(t->ilen);
    free(t->inew);
    free(t->mblocks);
    free(t->mrefs);
    free(t->marefs);
    free(t->mpts);
    free(t->jpts);
    free(t->nodes);
    free(t->snips);
    free(t->outs);
    free(t->out_names);
    free(t->out_of);
    free(t);
}

typedef struct pads {
    uint64_t *v;
    size_t n, cap;
} pads_t;

static int
on_pad(void *arg, uint64_t func, uint64_t pad)
{
    (void)func;
    pads_t *p = arg;
    QP_CHECK(cfg_vec_grow((void **)&p->v, &p->cap, p->n + 1, sizeof(uint64_t)));
    p->v[p->n++] = pad;
    return 0;
}

/* The lengths of the instructions of every block of T (qp trace insns). */
static int
plan_insns(drv_trace_t *t, const cfg_prog_t *prog)
{
    size_t cap = 0;
    t->ifirst = calloc((size_t)t->nblocks + 1, sizeof(uint32_t));
    if (t->ifirst == NULL)
        return QP_ENOMEM;
    for (uint32_t b = 0; b < t->nblocks; b++) {
        uint32_t cb = cfg_block_at(prog, t->blocks[b].start);
        if (cb == CFG_NONE)
            return QP_EINVAL;
        const cfg_block_t *c = &prog->blocks[cb];
        t->ifirst[b] = t->ninsns;
        for (uint64_t a = c->start; a < c->end;) {
            size_t avail = 0;
            const uint8_t *p = cfg_image_ptr(prog->img, a, &avail);
            arch_insn_t in;
            if (p == NULL || arch_decode(p, avail, a, &in) < 0 || in.len == 0)
                return QP_EINVAL;
            QP_CHECK(cfg_vec_grow((void **)&t->ilen, &cap, (size_t)t->ninsns + 1, 1));
            t->ilen[t->ninsns++] = (uint8_t)in.len;
            a += in.len;
        }
    }
    t->ifirst[t->nblocks] = t->ninsns;
    return 0;
}

int
drv_trace_plan(const cfg_prog_t *prog, const drv_result_t *res, int naive,
               const drv_weights_t *weights, drv_trace_t **out, uint32_t *ntraced)
{
    drv_trace_t *t = calloc(1, sizeof(*t));
    uint32_t *of = malloc((prog->nprocs + 1) * sizeof(uint32_t));
    tproc_t *tps = calloc(prog->nprocs + 1, sizeof(tproc_t));
    int rc = t && of && tps ? 0 : QP_ENOMEM;
    if (rc == 0) {
        t->naive = naive;
        t->procs = calloc(prog->nprocs + 1, sizeof(qpt_trace_proc_t));
        rc = t->procs ? 0 : QP_ENOMEM;
    }
    /* A record compares its cursor with the limit: CF changes too (a counter's
     * increment keeps it), so a record before a lone `jae` saves the flags. */
    drv_prog_info_t info = { .clobbers = ARCH_FLAGS_STATUS };
    if (rc == 0)
        rc = cfg_interior_entries(prog, &info.xt, &info.nxt);
    uint64_t *taken = NULL;
    size_t ntaken = 0;
    pads_t pv = { NULL, 0, 0 };
    if (rc == 0 && ed_unwind_landing_pads(prog->img, on_pad, &pv) == QP_ENOMEM)
        rc = QP_ENOMEM;
    if (rc == 0)
        qsort(pv.v, pv.n, sizeof(uint64_t), cfg_u64_cmp);
    const uint64_t *pads = pv.v;
    size_t npads = pv.n;
    if (rc == 0 && !naive)
        rc = drv_addr_taken(prog, &taken, &ntaken);
    for (uint32_t i = 0; rc == 0 && i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        of[i] = NONE;
        if ((p->flags & (CFG_PROC_FRAGMENT | CFG_PROC_PLT)) || !was_measured(res, p))
            continue;
        if (is_restorer(prog, p)) { /* not traced: handlers return to it (sigreturn) */
            t->restorer = p->entry;
            continue;
        }
        tproc_t *tp = &tps[t->nprocs];
        int r = drv_graph_build(prog, i, &info, &tp->g);
        tp->g.weights = weights;
        if (r == 0)
            r = classify(tp, naive, 0, NULL, pads, npads); /* the most cycles: eligibility */
        if (r == DRV_NOT_MEASURED) {
            drv_graph_free(&tp->g);
            free(tp->blockev);
            free(tp->tree);
            memset(tp, 0, sizeof(*tp));
            continue;
        }
        if (r < 0) {
            rc = r;
            break;
        }
        tp->prog_proc = i;
        of[i] = t->nprocs;
        qpt_trace_proc_t *d = &t->procs[t->nprocs];
        d->entry = p->entry;
        d->nblocks = tp->g.nblocks;
        d->enter_event = NONE;
        d->flags = QPT_TP_TRACED | (!naive && needs_enter(prog, p, taken, ntaken) ? QPT_TP_ENTER : 0);
        t->nprocs++;
    }
    if (rc == 0 && !naive)
        mark_untraced_callees(t, prog, of);
    if (rc == 0)
        mark_unclean(t, tps, prog, of);
    if (rc == 0 && !naive)
        rc = mark_recursive(t, tps, prog, of);
    uint8_t *recursive = calloc(prog->nprocs + 1, 1);
    if (rc == 0 && recursive == NULL)
        rc = QP_ENOMEM;
    for (uint32_t k = 0; rc == 0 && k < t->nprocs; k++)
        recursive[tps[k].prog_proc] = (t->procs[k].flags & QPT_TP_RECURSIVE) != 0;
    for (uint32_t k = 0; rc == 0 && !naive && k < t->nprocs; k++) {
        uint32_t *flags = &t->procs[k].flags;
        if ((rc = classify(&tps[k], naive, (*flags & QPT_TP_ENTER) != 0, recursive, pads,
                           npads)) > 0)
            rc = QP_EINVAL; /* fewer cycles than before: cannot fail */
        if (rc == 0 && (*flags & QPT_TP_RECURSIVE) && !(*flags & QPT_TP_ENTER)
            && (rc = break_recursion(&tps[k], recursive)) > 0) {
            *flags |= QPT_TP_ENTER; /* no edge can record before its recursive call */
            if ((rc = classify(&tps[k], naive, 1, recursive, pads, npads)) > 0)
                rc = QP_EINVAL;
        }
    }
    free(recursive);
    uint32_t nb = 0;
    for (uint32_t k = 0; rc == 0 && k < t->nprocs; k++) {
        tps[k].first = nb;
        t->procs[k].block = nb;
        nb += tps[k].g.nblocks;
    }
    if (rc == 0)
        rc = list_outside(t, prog, of);
    for (uint32_t k = 0; rc == 0 && k < t->nprocs; k++)
        rc = describe_proc(t, &tps[k], k, of, tps);
    for (uint32_t k = 0; tps && k < t->nprocs; k++) {
        drv_graph_free(&tps[k].g);
        free(tps[k].blockev);
        free(tps[k].tree);
    }
    free(tps);
    free(of);
    free(taken);
    free(pv.v);
    if (rc == 0)
        rc = plan_insns(t, prog);
    if (rc < 0) {
        drv_trace_free(t);
        return rc;
    }
    *ntraced = t->nprocs;
    *out = t;
    return 0;
}
