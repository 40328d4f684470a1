/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Running a driver over a program: one graph per relocated procedure, the driver's
 * counters turned into probes, exit hooks, and the description (qp_format.h) of what
 * each counter measures. Procedures that stay in place, or that a driver cannot
 * measure, are described too, with the reason, so that the report can say so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "driver/driver.h"
#include "base/qp_desc.h"
#include "base/qp_pool.h"

const drv_ops_t *
drv_find(const char *name)
{
    static const drv_ops_t *const all[] = { &drv_qp_ops, &drv_naive_ops, &drv_trace_ops,
                                            &drv_trace_naive_ops };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}

uint32_t
drv_alloc_counter(drv_result_t *res)
{
    return res->ncounters++;
}

/* A jump translated at run time at SITE, counting its misses into COUNTER. */
static int
push_xlate(drv_result_t *res, uint64_t site, uint32_t counter)
{
    /* Two arrays of one length: the capacity grows the same for both. */
    size_t cap_site = res->xlate_cap, cap_miss = res->xlate_cap;
    if (cfg_vec_grow((void **)&res->xlate_site, &cap_site, res->nxlate + 1, sizeof(uint64_t)) < 0
        || cfg_vec_grow((void **)&res->xlate_miss, &cap_miss, res->nxlate + 1,
                        sizeof(uint32_t)) < 0)
        return QP_ENOMEM;
    res->xlate_cap = cap_site;
    res->xlate_site[res->nxlate] = site;
    res->xlate_miss[res->nxlate++] = counter;
    return 0;
}

/* Room for N elements of size SZ in the empty array *V: an estimate made from the whole
 * program, since doubling an array of millions copies it and leaves the old copy behind
 * (grow still makes room past it). */
static int
reserve(void **v, size_t *cap, size_t n, size_t sz)
{
    if ((*v = malloc((n + 1) * sz)) == NULL)
        return QP_ENOMEM;
    *cap = n + 1;
    return 0;
}

static int
add_string(drv_result_t *res, const char *s, uint32_t *off)
{
    size_t len = strlen(s) + 1;
    if ((uint64_t)res->strtab_size + len > UINT32_MAX)
        return QP_ERANGE;
    if (res->strtab_size + len > res->strtab_cap) {
        size_t nc = res->strtab_cap ? res->strtab_cap : 4096;
        while (nc < res->strtab_size + len)
            nc *= 2;
        char *v = realloc(res->strtab, nc);
        if (v == NULL)
            return QP_ENOMEM;
        res->strtab = v;
        res->strtab_cap = (uint32_t)nc;
    }
    memcpy(res->strtab + res->strtab_size, s, len);
    *off = res->strtab_size;
    res->strtab_size += (uint32_t)len;
    return 0;
}

static int
add_probe(drv_result_t *res, uint64_t at, int where, int what, int save, uint32_t counter)
{
    QP_CHECK(cfg_vec_grow(
        (void **)&res->probes, &res->probes_cap, res->nprobes + 1, sizeof(ed_probe_t)));
    res->probes[res->nprobes++] = (ed_probe_t) { .addr = at, .at = (uint8_t)where,
                                                 .what = (uint8_t)what,
                                                 .save_flags = (uint8_t)save,
                                                 .counter = counter };
    return 0;
}

/* The ed_at_t of a counter on edge ED, or -1 when none can go there. */
static int
probe_at(const drv_edge_t *ed)
{
    return ed->place == DRV_PLACE_BEFORE ? ED_AT_BEFORE
        : ed->place == DRV_PLACE_AFTER   ? ED_AT_AFTER
        : ed->place == DRV_PLACE_TAKEN   ? ED_AT_TAKEN
                                         : -1;
}

/*
 * The probes of block I's counter where G counts it from an induction variable
 * (drv_ivloop.c): its register subtracted on every way into its loop and added on every
 * way out (the other way round for a step of -1), each where that edge's counter would
 * go (drv_iv_spots_ok checked that the register holds its value there).
 */
static int
add_iv_probes(drv_result_t *res, const drv_graph_t *g, uint32_t i)
{
    const drv_iv_loop_t *iv = &g->iv->v[g->iv->cand[i]];
    for (uint32_t e = 0; e < g->nedges; e++) {
        if (!drv_iv_edge_crosses(g, g->iv->forest, iv, e))
            continue;
        const drv_edge_t *ed = &g->edges[e];
        int entering = ed->to < g->nblocks && cfg_loop_contains(g->iv->forest, iv->loop, ed->to);
        int where = probe_at(ed);
        if (where < 0)
            return QP_EINVAL;
        int sub = entering == (iv->step > 0);
        QP_CHECK(add_probe(res, ed->at, where, ED_SNIP_COUNT_REG(iv->reg, sub),
                           drv_iv_save_flags(g, e), g->block_counter[i]));
    }
    return 0;
}

/* Functions that end the process: the frames below them never return. */
static const char *const exit_names[] = { "exit", "_exit", "_Exit", "quick_exit", NULL };
/* Functions that replace the program, unless they fail (and return): an exit dump before
 * the call, cancelled by a hook after it. */
static const char *const exec_names[] = { "execve", "execv", "execvp", "execvpe", "execl",
                                          "execlp", "execle", "fexecve", "execveat", NULL };
/* Functions that return twice (flow may not be conserved in their callers: counts
 * flagged approximate). vfork's child runs in the parent's memory, counters included. */
static const char *const setjmp_names[] = { "setjmp", "_setjmp", "__sigsetjmp", "sigsetjmp",
                                            "vfork", NULL };
/* Functions that leave frames behind without returning through them. */
static const char *const longjmp_names[] = { "longjmp", "_longjmp", "siglongjmp",
                                             "__longjmp_chk", NULL };
/* ... by unwinding: C++ exceptions, Go's panics (recovered in a frame further up, which
 * resumes at its deferreturn call; the frames between are abandoned). */
static const char *const throw_names[] = { "__cxa_throw", "__cxa_rethrow", "_Unwind_Resume",
                                           "_Unwind_RaiseException",
                                           "_Unwind_Resume_or_Rethrow", "runtime.gopanic",
                                           NULL };

/* What a call to NAME does that the report must know (QP_CALLF_*). */
static uint8_t
callee_flags(const char *name)
{
    uint8_t f = 0;
    if (drv_name_in(name, longjmp_names))
        f |= QP_CALLF_LONGJMP;
    /* ... libstdc++'s std::__throw_* helpers throw too */
    if (drv_name_in(name, throw_names) || (strncmp(name, "_ZSt", 4) == 0 && strstr(name, "__throw_")))
        f |= QP_CALLF_THROW;
    if (drv_name_in(name, exec_names))
        f |= QP_CALLF_EXEC;
    return f;
}

/* A mark of callee_marks besides QP_CALLF_*: a setjmp-like function. */
enum { CALLF_SETJMP = 1u << 7 };

/*
 * Per procedure of PROG, what a call to it does by its name: callee_flags and
 * CALLF_SETJMP. The names are compared once per procedure instead of at every call site
 * (cc1: 700,000 of them, a name compared with 25 others at each). A malloc'd byte per
 * procedure, or NULL when out of memory.
 */
static uint8_t *
callee_marks(const cfg_prog_t *prog)
{
    uint8_t *m = malloc((size_t)prog->nprocs + 1);
    for (uint32_t i = 0; m != NULL && i < prog->nprocs; i++)
        m[i] = callee_flags(prog->procs[i].name)
            | (drv_name_in(prog->procs[i].name, setjmp_names) ? CALLF_SETJMP : 0);
    return m;
}

/*
 * A Go program none of whose procedures is known to be resumed at its return address
 * (CFG_PROC_RESUMED: runtime.morestack, runtime.mcall, known by name only): its names
 * could not be read (no symbol table, and a .gopclntab older than Go 1.16, missing or
 * damaged). A prologue's call of morestack then looks like a call that never returns,
 * and the goroutine resumed after it, jumping back to the entry, like one more call:
 * no count of it is sure (QP_PROC_APPROX_RESUME).
 */
static int
go_resume_unnamed(const cfg_prog_t *prog)
{
    if (cfg_image_runtime(prog->img) != CFG_RUNTIME_GO)
        return 0;
    for (uint32_t i = 0; i < prog->nprocs; i++)
        if (prog->procs[i].flags & CFG_PROC_RESUMED)
            return 0;
    return 1;
}

/* Bit 4 of leaving_procs' marks: counts that rest on guessed computed-goto targets. */
enum { LEAVE_GUESS = 4 };

/*
 * The procedures that may be left by a longjmp (bit 1) or an exception (bit 2) without
 * returning: those that call longjmp-like functions or throw, and, transitively, every
 * procedure that calls one of them directly or by a tail call (their frames are
 * abandoned too, so flow conservation may not hold there) - or through a pointer, when
 * a procedure whose address is taken is one of them (a callback that throws), or in a
 * shared library (the pointer may lead into another module). Also LEAVE_GUESS on the
 * procedures with computed gotos (drv_by_calls hands it down to those counted by their
 * calls there). A malloc'd byte per procedure, or NULL when out of memory.
 */
static uint8_t *
leaving_procs(const cfg_prog_t *prog, const drv_entries_t *entries, const uint8_t *marks)
{
    uint32_t n = prog->nprocs;
    uint8_t *leave = calloc(n + 1, 1);
    uint32_t *first = calloc(n + 2, sizeof(uint32_t)), *queue = malloc((n + 1) * sizeof(uint32_t));
    uint32_t *callers = NULL, *fill = NULL, ncalls = 0;
    uint32_t *pairs = NULL; /* the calls and tail calls: caller, callee, in edge order */
    size_t pairs_cap = 0;
    uint8_t *indirect = calloc(n + 1, 1); /* makes calls or tail calls through pointers */
    if (leave == NULL || first == NULL || queue == NULL || indirect == NULL)
        goto fail;
    /* One pass over the edges: calls through pointers, computed gotos, and the calls
     * between procedures (counted by callee for the callers' CSR below), the callers of
     * longjmp-like functions and of those that throw marked. */
    for (uint32_t e = 0; e < prog->nedges; e++) {
        const cfg_edge_t *ed = &prog->edges[e];
        const cfg_block_t *b = &prog->blocks[ed->from];
        int ind = ((ed->kind == CFG_EDGE_CALLRET || ed->kind == CFG_EDGE_NORETURN)
                      && b->last_kind == ARCH_KIND_CALL_IND)
            || (ed->kind == CFG_EDGE_TAILCALL && ed->target == 0)
            || ed->kind == CFG_EDGE_UNRESOLVED;
        uint32_t caller = cfg_proc_owner(prog, b->proc);
        if (caller == CFG_NONE)
            continue;
        if (ind)
            indirect[caller] = 1;
        if (ed->kind == CFG_EDGE_INDIRECT)
            leave[caller] |= LEAVE_GUESS;
        uint64_t t = ed->kind == CFG_EDGE_CALLRET || ed->kind == CFG_EDGE_NORETURN
            ? b->call_target : ed->kind == CFG_EDGE_TAILCALL ? ed->target : 0;
        uint32_t callee = drv_entered(entries, t);
        if (callee == CFG_NONE)
            continue;
        if (cfg_vec_grow((void **)&pairs, &pairs_cap, 2 * ((size_t)ncalls + 1),
                         sizeof(uint32_t)) < 0)
            goto fail;
        pairs[2 * ncalls] = caller;
        pairs[2 * ncalls + 1] = callee;
        ncalls++;
        first[callee + 1]++;
        if (marks[callee] & QP_CALLF_LONGJMP)
            leave[caller] |= 1;
        if (marks[callee] & QP_CALLF_THROW)
            leave[caller] |= 2;
    }
    /* A shared library's calls through pointers (its PLT stubs among them) may go into
     * other modules: a callback of the program that throws or longjmps abandons the
     * library's frames, and the library sees no throw of its own (qp looks at whether
     * one happened anywhere in the process). */
    if (prog->img->flags & CFG_IMG_SHLIB)
        for (uint32_t c = 0; c < n; c++)
            if (indirect[c])
                leave[c] |= 3;
    /* In Go any instruction may panic without a call (a nil dereference, a division by
     * zero: the signal handler makes the goroutine call runtime.sigpanic there): a
     * panic recovered further up abandons whichever frame it happened in. */
    if (cfg_image_runtime(prog->img) == CFG_RUNTIME_GO)
        for (uint32_t c = 0; c < n; c++)
            leave[c] |= 2;
    /* Callers by callee (CSR), from the counts of the pass above. */
    for (uint32_t c = 0; c < n; c++)
        first[c + 1] += first[c];
    if ((callers = malloc((ncalls + 1) * sizeof(uint32_t))) == NULL
        || (fill = malloc((n + 1) * sizeof(uint32_t))) == NULL)
        goto fail;
    memcpy(fill, first, n * sizeof(uint32_t));
    for (uint32_t k = 0; k < ncalls; k++)
        callers[fill[pairs[2 * k + 1]]++] = pairs[2 * k];
    free(fill);
    free(pairs);
    fill = pairs = NULL;
    /* Up the call graph from the procedures that leave, one kind at a time; when one
     * whose address is taken leaves, so may every procedure that calls through a
     * pointer (and their callers in turn). */
    for (uint8_t bit = 1; bit <= 2; bit <<= 1) {
        uint32_t qh = 0, qt = 0;
        int spread = 0;
        for (uint32_t p = 0; p < n; p++)
            if (leave[p] & bit)
                queue[qt++] = p;
        while (qh < qt) {
            uint32_t p = queue[qh++];
            if (!spread && (prog->procs[p].sources & CFG_SRC_ADDR)) {
                spread = 1; /* a callback that leaves: callers through pointers too */
                for (uint32_t c = 0; c < n; c++)
                    if (indirect[c] && !(leave[c] & bit)) {
                        leave[c] |= bit;
                        queue[qt++] = c;
                    }
            }
            for (uint32_t k = first[p]; k < first[p + 1]; k++) {
                uint32_t c = callers[k];
                if (!(leave[c] & bit)) {
                    leave[c] |= bit;
                    queue[qt++] = c;
                }
            }
        }
    }
    free(first);
    free(queue);
    free(callers);
    free(indirect);
    return leave;
fail:
    free(leave);
    free(first);
    free(queue);
    free(callers);
    free(fill);
    free(pairs);
    free(indirect);
    return NULL;
}


/* Decode the instruction at ADDR. */
static int
decode_at(const cfg_prog_t *prog, uint64_t addr, arch_insn_t *in)
{
    return cfg_image_decode(prog->img, addr, 0, in);
}

/* Does procedure P make a system call (ends the process itself, like _exit)? */
static int
has_syscall(const cfg_prog_t *prog, const cfg_proc_t *p)
{
    for (uint32_t k = 0; k < p->nblocks; k++) {
        const cfg_block_t *b = &prog->blocks[p->block + k];
        for (uint64_t a = b->start; a < b->end;) {
            arch_insn_t in;
            if (decode_at(prog, a, &in) < 0)
                return 1;
            if (in.kind == ARCH_KIND_SYSCALL)
                return 1;
            a += in.len;
        }
    }
    return 0;
}

/* The string-table offset of procedure P's name: one copy, shared by its description
 * and the call sites that name it (res->callee_names). */
static int
proc_name(drv_result_t *res, const cfg_prog_t *prog, const cfg_proc_t *p, uint32_t *off)
{
    uint32_t i = (uint32_t)(p - prog->procs);
    if (res->callee_names[i] == 0)
        QP_CHECK(add_string(res, p->name, &res->callee_names[i]));
    *off = res->callee_names[i];
    return 0;
}

/* The string-table offset of REASON: one copy of each of the last reasons written. */
static int
reason_string(drv_result_t *res, const char *reason, uint32_t *off)
{
    uint32_t n = res->nreasons < 8 ? res->nreasons : 8;
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(res->strtab + res->reasons[i], reason) == 0) {
            *off = res->reasons[i];
            return 0;
        }
    QP_CHECK(add_string(res, reason, off));
    res->reasons[res->nreasons++ % 8] = *off;
    return 0;
}

/* Describe procedure P with no blocks: not measured, for REASON. */
static int
describe_unmeasured(drv_result_t *res, const cfg_prog_t *prog, const cfg_proc_t *p,
                    const char *prefix, const char *why)
{
    QP_CHECK(cfg_vec_grow(
        (void **)&res->procs, &res->procs_cap, res->nprocs + 1, sizeof(qp_desc_proc_t)));
    qp_desc_proc_t *d = &res->procs[res->nprocs];
    memset(d, 0, sizeof(*d));
    char buf[512];
    snprintf(buf, sizeof(buf), "%s%s", prefix, why);
    QP_CHECK(proc_name(res, prog, p, &d->name));
    QP_CHECK(reason_string(res, buf, &d->reason));
    d->entry = p->entry;
    d->block = res->nblocks;
    d->edge = res->nedges;
    res->nprocs++;
    return 0;
}

/* The measured procedure of graph G: its probes, exit hooks and description. */
/* The fork and thread-start sites of procedure P, which gets no hooks (not measured). */
static void
count_unseen_sites(drv_result_t *res, const cfg_prog_t *prog, const cfg_proc_t *p,
                   const drv_prog_info_t *info)
{
    for (uint32_t k = 0; k < p->nblocks; k++) {
        const cfg_block_t *b = &prog->blocks[p->block + k];
        arch_insn_t prev = { 0 }, in;
        for (uint64_t a = b->start; a < b->end; a += in.len, prev = in) {
            if (decode_at(prog, a, &in) < 0)
                break;
            int kind = drv_site_kind(prog, a > b->start ? &prev : NULL, &in, info);
            res->nfork_unseen += (kind & DRV_SITE_FORK) != 0;
            res->nthread_unseen += (kind & DRV_SITE_THREAD) != 0;
        }
    }
}

/* A call site to TARGET, the entry of procedure CP (drv_entered's answer for it). */
static int
add_call_to(drv_result_t *res, uint64_t target, uint32_t cp, uint32_t block,
            uint32_t edge, uint8_t kind, const cfg_prog_t *prog)
{
    QP_CHECK(cfg_vec_grow((void **)&res->calls, &res->calls_site_cap, res->ncalls + 1,
        sizeof(qp_desc_call_t)));
    qp_desc_call_t c = { .target = target, .block = block, .edge = edge, .kind = kind };
    if (cp != CFG_NONE) {
        c.flags = res->callee_marks[cp] & ~CALLF_SETJMP;
        QP_CHECK(proc_name(res, prog, &prog->procs[cp], &c.name));
    }
    res->calls[res->ncalls++] = c;
    return 0;
}

static int
add_call(drv_result_t *res, uint64_t target, uint32_t block, uint32_t edge, uint8_t kind,
         const cfg_prog_t *prog)
{
    return add_call_to(res, target, drv_entered(&res->entries, target), block, edge, kind,
                       prog);
}

static int
cmp_call(const void *a, const void *b)
{
    const qp_desc_call_t *x = a, *y = b;
    if (x->block != y->block)
        return x->block < y->block ? -1 : 1;
    return x->edge < y->edge ? -1 : x->edge > y->edge;
}

/*
 * Procedures that will be measured and whose counts are exact by themselves, their entry
 * edge's count given (drv_by_calls): into SOLID (a byte per procedure). The same tests as
 * drv_graph_build's refusals and describe_measured's approximation flags, but for
 * computed gotos (CFG_EDGE_INDIRECT: every address-taken label of the procedure a
 * target): their counts are exact unless a jump goes elsewhere, which C does not allow;
 * the procedures counted by calls made there inherit the mark (LEAVE_GUESS) that says so.
 * Callees are looked up in ENTRIES.
 */
static void
solid_procs(const cfg_prog_t *prog, const ed_plan_t *plan, const drv_entries_t *entries,
            const uint8_t *marks, uint8_t *solid)
{
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        int ok = !(p->flags & (CFG_PROC_FRAGMENT | CFG_PROC_PLT)) && p->nblocks > 0
            && ed_plan_left_reason(plan, i) == NULL
            && !(drv_name_in(p->name, exit_names) && has_syscall(prog, p));
        for (uint32_t k = 0; ok && k < p->nblocks; k++) {
            const cfg_block_t *b = &prog->blocks[p->block + k];
            if (k > 0 && b->npred == 0)
                ok = 0; /* a landing pad, or code reached from outside only */
            for (uint32_t j = 0; ok && j < b->nsucc; j++) {
                const cfg_edge_t *ed = cfg_block_succ(prog, b, j);
                ok = ed->kind != CFG_EDGE_UNRESOLVED
                    && (ed->to == CFG_NONE
                        || (ed->to >= p->block && ed->to < p->block + p->nblocks));
            }
            uint32_t cp = b->last_kind == ARCH_KIND_CALL
                ? drv_entered(entries, b->call_target) : CFG_NONE;
            if (ok && cp != CFG_NONE)
                ok = !(marks[cp] & (CALLF_SETJMP | QP_CALLF_LONGJMP | QP_CALLF_THROW));
        }
        solid[i] = (uint8_t)ok;
    }
}

/*
 * The description's blocks and edges of measured graph G, its blocks from BLOCKS[BLOCK]
 * and its edges from EDGES[EDGE] (its qp_desc_proc_t's block and edge). They depend on
 * G and those two alone: describe_measured leaves them to the pool when it can
 * (prep_one, before it frees the graph; chromium: 13.6 million blocks and 19.7 million
 * edges, whose stores were most of describe_measured's time on the main thread).
 */
static void
store_graph(qp_desc_block_t *blocks, qp_desc_edge_t *edges, const drv_graph_t *g,
            uint32_t block, uint32_t edge)
{
    const cfg_prog_t *prog = g->prog;
    uint32_t X = g->nblocks;
    for (uint32_t i = 0; i < g->nblocks; i++) {
        const cfg_block_t *b = &prog->blocks[g->first + i];
        blocks[block + i] = (qp_desc_block_t) {
            .start = b->start, .size = (uint32_t)(b->end - b->start), .ninsns = b->ninsns,
            .counter = g->block_counter[i],
        };
    }
    for (uint32_t e = 0; e < g->nedges; e++) {
        const drv_edge_t *ed = &g->edges[e];
        /* ret_addr holds the call's old address until drv_result_finish maps it. */
        edges[edge + e] = (qp_desc_edge_t) {
            .from = ed->from == X ? QP_VIRT : block + ed->from,
            .to = ed->to == X ? QP_VIRT : block + ed->to,
            .counter = ed->counter, .kind = ed->kind,
            .ret_addr = ed->kind == CFG_EDGE_CALLRET ? g->last[ed->from] : 0,
        };
    }
}

/*
 * The measured procedure of graph G: its probes, exit hooks, call sites and description,
 * the description's blocks and edges stored by store_graph here, or (DEFER) left to the
 * pool (prep_release). Room for every graph's must have been reserved (run_pass): the
 * arrays never move while a deferred store may be pending.
 */
static int
describe_measured(drv_result_t *res, const drv_graph_t *g, const uint64_t *exits, size_t nexits,
                  const uint8_t *leave, int inplace, int defer)
{
    const cfg_prog_t *prog = g->prog;
    const cfg_proc_t *p = &prog->procs[g->proc];
    uint32_t X = g->nblocks;
    QP_CHECK(cfg_vec_grow(
        (void **)&res->procs, &res->procs_cap, res->nprocs + 1, sizeof(qp_desc_proc_t)));
    qp_desc_proc_t *d = &res->procs[res->nprocs];
    memset(d, 0, sizeof(*d));
    QP_CHECK(proc_name(res, prog, p, &d->name));
    d->flags = QP_PROC_MEASURED | (g->entry_by_calls ? QP_PROC_BY_CALLS : 0);
    res->nby_calls += g->entry_by_calls;
    /* May be left by a longjmp or an exception below it: its frame would be abandoned
     * (qp looks at whether one happened). */
    if (leave[g->proc] & 1)
        d->flags |= QP_PROC_LEAVE_JMP;
    if (leave[g->proc] & 2)
        d->flags |= QP_PROC_LEAVE_EH;
    if (leave[g->proc] & LEAVE_GUESS)
        d->flags |= QP_PROC_APPROX_IND; /* its own guess, or its callers' (by calls) */
    if (res->resume_unnamed)
        d->flags |= QP_PROC_APPROX_RESUME;
    d->entry = p->entry;
    d->block = res->nblocks;
    d->nblocks = g->nblocks;
    d->edge = res->nedges;
    d->nedges = g->nedges;

    /* Probes: the fork hooks (they run before the counters at their place), one per
     * counted edge or block, an exit hook before each call to exit(). */
    /* (In place: block counters only, which need no hook to be exact; the fork and
     * thread sites are counted unseen by the caller.) */
    for (uint32_t k = 0; !inplace && k < g->nfork_after; k++)
        QP_CHECK(add_probe(res, g->fork_after[k], ED_AT_AFTER, ED_SNIP_FORK_HOOK, 0, 0));
    res->nfork_hooks += inplace ? 0 : g->nfork_after;
    for (uint32_t k = 0; !inplace && k < g->nthread_before; k++)
        QP_CHECK(add_probe(res, g->thread_before[k], ED_AT_BEFORE, ED_SNIP_THREAD_HOOK, 0, 0));
    res->nthread_hooks += inplace ? 0 : g->nthread_before;
    /* A library's own pthread_create: every thread of the process starts there (the
     * runtime then acts for every module: QPRT_F_WATCHER). */
    if (!inplace && (prog->img->flags & CFG_IMG_SHLIB) && strncmp(p->name, "pthread_create", 14) == 0
        && (p->name[14] == '\0' || p->name[14] == '@')) {
        QP_CHECK(add_probe(res, p->entry, ED_AT_BEFORE, ED_SNIP_THREAD_HOOK, 0, 0));
        res->nthread_hooks++;
        res->watcher = 1;
    }
    for (uint32_t e = 0; e < g->nedges; e++) {
        const drv_edge_t *ed = &g->edges[e];
        if (ed->counter == QP_NOCOUNTER)
            continue;
        int where = probe_at(ed);
        if (where < 0)
            return QP_EINVAL; /* a driver counted an edge that cannot carry a counter */
        QP_CHECK(add_probe(res, ed->at, where, ED_SNIP_COUNT, ed->save_flags, ed->counter));
        if (where == ED_AT_TAKEN && (ed->fall_in & DRV_FALL_CHOSEN))
            res->probes[res->nprobes - 1].flags |= ED_PROBE_FALL_IN;
    }
    /* Its blocks and edges go into the room run_pass reserved for every graph's. Never
     * grown here, deferred or not: the pool may still be storing an earlier graph's
     * into these arrays, which must not move (run_pass reserves enough: never). */
    if ((size_t)res->nblocks + g->nblocks > res->blocks_cap
        || (size_t)res->nedges + g->nedges > res->edges_cap)
        return QP_ERANGE;
    for (uint32_t i = 0; i < g->nblocks; i++) {
        if (g->block_counter[i] != QP_NOCOUNTER && !inplace && g->iv != NULL
            && g->iv->cand[i] != UINT32_MAX) {
            QP_CHECK(add_iv_probes(res, g, i));
            res->niv_counted++;
        } else if (g->block_counter[i] != QP_NOCOUNTER) {
            QP_CHECK(add_probe(res, g->block_at[i], ED_AT_BEFORE, ED_SNIP_COUNT,
                               g->block_save[i], g->block_counter[i]));
            if (inplace)
                res->probes[res->nprobes - 1].flags |= ED_PROBE_INPLACE;
        }
        uint64_t callee = 0;
        if (g->last_kind[i] == ARCH_KIND_CALL || g->last_kind[i] == ARCH_KIND_JMP)
            callee = g->last_target[i];
        uint32_t cp = g->callee[i]; /* (looked up where the graph was built) */
        uint8_t cf = cp != CFG_NONE ? res->callee_marks[cp] : 0;
        int exec = g->last_kind[i] == ARCH_KIND_CALL && (cf & QP_CALLF_EXEC);
        if (!inplace && ((callee != 0 && cfg_u64_contains(exits, nexits, callee)) || exec)) {
            QP_CHECK(add_probe(res, g->last[i], ED_AT_BEFORE, ED_SNIP_EXIT_HOOK, 0, 0));
            d->flags |= QP_PROC_EXIT_SITE;
            res->nexit_hooks++;
        }
        if (exec && !inplace)
            QP_CHECK(add_probe(res, g->last[i], ED_AT_AFTER, ED_SNIP_EXEC_HOOK, 0, 0));
        if (cf & (CALLF_SETJMP | QP_CALLF_LONGJMP))
            d->flags |= QP_PROC_APPROX_JMP;
        if (cf & QP_CALLF_THROW)
            d->flags |= QP_PROC_APPROX_EH;

        /* (A direct call to 0, an undefined weak function in a static program, is
         * never made: no site. CP is the callee of a direct call: looked up once.) */
        if (g->last_kind[i] == ARCH_KIND_CALL && g->last_target[i] != 0)
            QP_CHECK(add_call_to(res, g->last_target[i], cp, d->block + i, QP_VIRT,
                                 QP_CALL_DIRECT, prog));
        else if (g->last_kind[i] == ARCH_KIND_CALL_IND)
            QP_CHECK(add_call_to(res, 0, CFG_NONE, d->block + i, QP_VIRT,
                                 QP_CALL_INDIRECT, prog));
    }
    res->nblocks += g->nblocks;
    uint32_t first_call = res->ncalls;
    for (uint32_t e = 0; e < g->nedges; e++) {
        const drv_edge_t *ed = &g->edges[e];
        if (ed->kind == CFG_EDGE_INDIRECT)
            d->flags |= QP_PROC_APPROX_IND;
        if (ed->kind == CFG_EDGE_UNRESOLVED && ed->from != X && !inplace) {
            /* Translated at run time (ed_plan_set_xlate_miss): a tail call through a
             * pointer, unless the procedure's miss counter says otherwise. */
            d->flags |= QP_PROC_XLATE;
            if (d->miss == 0)
                d->miss = drv_alloc_counter(res) + 1;
            QP_CHECK(push_xlate(res, g->last[ed->from], d->miss - 1));
            QP_CHECK(add_call(res, 0, d->block + ed->from, d->edge + e, QP_CALL_TAIL_INDIRECT,
                              prog));
        }
        /* A tail call; not the way on after a call that ends the procedure (the call is
         * the site, the procedure that follows is no callee). */
        if (ed->kind == CFG_EDGE_TAILCALL && ed->from != X
            && g->last_kind[ed->from] != ARCH_KIND_CALL && g->last_kind[ed->from] != ARCH_KIND_CALL_IND) {
            uint64_t t = ed->cfg_edge != CFG_NONE ? prog->edges[ed->cfg_edge].target : 0;
            QP_CHECK(add_call(res, t, d->block + ed->from, d->edge + e,
                              t != 0 ? QP_CALL_TAIL : QP_CALL_TAIL_INDIRECT, prog));
        }
        if (ed->kind == QP_EDGE_ROOT && g->prog->blocks[g->first + ed->to].npred == 0)
            d->flags |= QP_PROC_APPROX_EH; /* a landing pad (or code only reached from
                                             * outside): a throw may leave flow unbalanced */
    }
    res->nedges += g->nedges;
    if (!defer)
        store_graph(res->blocks, res->edges, g, d->block, d->edge);
    /* The procedure's sites in block order (calls first: they come from the blocks);
     * most have no site on an edge and are strictly in order already: not sorted. */
    uint32_t first = first_call;
    while (first > 0 && res->calls[first - 1].block >= d->block)
        first--;
    uint32_t in_order = first;
    while (in_order + 1 < res->ncalls
           && cmp_call(&res->calls[in_order], &res->calls[in_order + 1]) < 0)
        in_order++;
    if (in_order + 1 < res->ncalls)
        qsort(res->calls + first, res->ncalls - first, sizeof(qp_desc_call_t), cmp_call);
    res->nedges_total += g->nedges;
    res->nprocs++;
    return 0;
}

/*
 * Procedure I's graph into *G (drv_graph_build's answer), and the procedures its
 * blocks' direct calls and jumps enter, looked up in ENTRIES (G->callee): on the thread
 * that builds it, not in describe_measured's serial step (chromium: 13.6 million
 * blocks, a lookup in a 24 MB hash each).
 */
static int
build_graph(const cfg_prog_t *prog, uint32_t i, const drv_prog_info_t *info,
            const drv_entries_t *entries, drv_graph_t *g)
{
    int rc = drv_graph_build(prog, i, info, g);
    for (uint32_t k = 0; rc == 0 && k < g->nblocks; k++)
        g->callee[k] = g->last_kind[k] == ARCH_KIND_CALL || g->last_kind[k] == ARCH_KIND_JMP
            ? drv_entered(entries, g->last_target[k]) : CFG_NONE;
    return rc;
}

/*****************************************************************************
 * Procedures left in place, measured where they are (editor/ed_inplace.c)
 */

/* Count procedure P, left in place and not measured, under reason WHY. */
static int
note_ip_why(drv_result_t *res, const cfg_prog_t *prog, const cfg_proc_t *p, const char *why)
{
    uint64_t bytes = 0;
    for (uint32_t k = 0; k < p->nblocks; k++)
        bytes += prog->blocks[p->block + k].end - prog->blocks[p->block + k].start;
    const char *addr = strstr(why, " 0x");
    uint32_t keylen = (uint32_t)(addr != NULL ? (size_t)(addr - why) : strlen(why));
    for (size_t i = 0; i < res->nip_why; i++)
        if (res->ip_why[i].keylen == keylen && strncmp(res->ip_why[i].why, why, keylen) == 0) {
            res->ip_why[i].nprocs++;
            res->ip_why[i].bytes += bytes;
            return 0;
        }
    QP_CHECK(cfg_vec_grow((void **)&res->ip_why, &res->ip_why_cap, res->nip_why + 1,
                          sizeof(drv_ip_why_t)));
    res->ip_why[res->nip_why++] = (drv_ip_why_t) { why, keylen, 1, bytes };
    return 0;
}

/*
 * Measure procedure I, left in place, with a counter in every block that can take a
 * jump (the naive way: the qp spanning tree needs every block measurable, and a block
 * count needs nothing else to be exact). Its counter goes at the block's spot with dead
 * flags, else at its start, else at any of its instructions (saving the flags). 0 when
 * measured, DRV_NOT_MEASURED (counted in res->ip_why), QP_E*.
 */
static int
measure_in_place(drv_result_t *res, const cfg_prog_t *prog, const ed_plan_t *plan,
                 const ed_inplace_t *ip, uint32_t i, const drv_prog_info_t *info,
                 const uint64_t *exits, size_t nexits, const uint8_t *leave)
{
    const cfg_proc_t *p = &prog->procs[i];
    const char *unfit = ed_plan_inplace_unfit(plan, i);
    if (unfit != NULL) {
        QP_CHECK(note_ip_why(res, prog, p, unfit));
        return DRV_NOT_MEASURED;
    }
    drv_graph_t g;
    int rc = build_graph(prog, i, info, &res->entries, &g);
    if (rc < 0)
        return rc;
    if (rc == DRV_NOT_MEASURED) {
        QP_CHECK(note_ip_why(res, prog, p, g.why != NULL ? g.why : "?"));
        return DRV_NOT_MEASURED;
    }
    uint32_t c0 = res->ncounters, nok = 0, why[ED_IP_NREASONS] = { 0 };
    uint64_t why_bytes[ED_IP_NREASONS] = { 0 }, bytes = 0;
    for (uint32_t k = 0; k < g.nblocks && rc >= 0; k++) {
        const cfg_block_t *b = &prog->blocks[g.first + k];
        uint64_t at = g.block_at[k];
        int save = g.block_save[k];
        uint32_t len, span;
        rc = ed_inplace_fit(ip, g.first + k, at, &len, &span);
        if (rc > 0 && at != b->start) {
            at = b->start;
            save = (g.live_in[k] & g.clobbers) != 0;
            rc = ed_inplace_fit(ip, g.first + k, at, &len, &span);
        }
        arch_insn_t in;
        for (uint64_t a = b->start; rc > 0 && a < b->end; a += in.len) {
            if (decode_at(prog, a, &in) < 0)
                break;
            int r = ed_inplace_fit(ip, g.first + k, a, &len, &span);
            if (r <= 0) {
                rc = r;
                at = a;
                save = r == 0 ? drv_graph_save_at(&g, k, a) : 1;
            }
        }
        if (rc > 0) {
            why[rc]++;
            why_bytes[rc] += b->end - b->start;
            rc = 0;
            continue;
        }
        if (rc < 0)
            break;
        g.block_at[k] = at;
        g.block_save[k] = (uint8_t)save;
        g.block_counter[k] = drv_alloc_counter(res);
        bytes += b->end - b->start;
        nok++;
    }
    if (rc == 0 && nok == 0) {
        res->ncounters = c0;
        rc = note_ip_why(res, prog, p, "no block can take a jump");
        drv_graph_free(&g);
        return rc < 0 ? rc : DRV_NOT_MEASURED;
    }
    g.entry_by_calls = 0;
    uint32_t nblocks = g.nblocks;
    if (rc == 0)
        rc = describe_measured(res, &g, exits, nexits, leave, 1, 0);
    drv_graph_free(&g);
    if (rc < 0)
        return rc;
    for (int r = 1; r < ED_IP_NREASONS; r++) {
        res->nip_block_why[r] += why[r];
        res->ip_block_why_bytes[r] += why_bytes[r];
    }
    res->ninplace++;
    res->ninplace_partial += nok < nblocks;
    res->nip_points += nok;
    res->ip_bytes += bytes;
    return 0;
}

int
drv_run(const drv_ops_t *drv, const cfg_prog_t *prog, const ed_plan_t *plan,
        const drv_weights_t *weights, drv_result_t *res)
{
    return drv_run_progress(drv, prog, plan, weights, res, NULL, NULL);
}

/* run_pass's answer when a procedure that drv_by_calls counted on was not measured after
 * all: run again without counting by calls. */
#define DRV_AGAIN 2

/* Solid procedures and those counted by their calls (qp only; else none), into the
 * malloc'd *SOLID and *BY_CALLS. */
static int
plan_by_calls(const drv_ops_t *drv, const cfg_prog_t *prog, const ed_plan_t *plan,
              int by_calls_ok, const drv_entries_t *entries, const uint8_t *marks,
              uint8_t *leave, uint8_t **solid, uint8_t **by_calls)
{
    *solid = calloc(prog->nprocs + 1, 1);
    *by_calls = calloc(prog->nprocs + 1, 1);
    if (*solid == NULL || *by_calls == NULL)
        return QP_ENOMEM;
    if (drv->kind != QP_DRIVER_QP || !by_calls_ok || !(prog->img->flags & CFG_IMG_PIE))
        return 0; /* (drv_by_calls: position-independent images only) */
    solid_procs(prog, plan, entries, marks, *solid);
    return drv_by_calls(prog, entries, *solid, leave, *by_calls);
}

/*
 * The graphs of the procedures, made ahead on a pool of threads a batch at a time (the
 * graph and drv_ops_t.prepare depend on the procedure alone, so any thread may make
 * them); run_pass takes them in procedure order and does the rest (counter numbers,
 * probes, the description) on its own thread, as without threads: the same result.
 */
#define PREP_BATCH 1024

typedef struct prep_item {
    drv_graph_t g;
    int rc;      /* drv_graph_build's (or prepare's) answer */
    int made;    /* G was made and not taken yet */
    int spent;   /* G is one run_pass is done with, which the next prep_one of the item
                  * frees (on the pool: cc1 0.03 s of the serial step) */
    int store;   /* ... and whose description's blocks and edges it stores first, at
                  * BLOCK and EDGE (describe_measured deferred them) */
    uint32_t block, edge;
} prep_item_t;

typedef struct prep {
    const drv_ops_t *drv;
    const cfg_prog_t *prog;
    const ed_plan_t *plan;
    const drv_prog_info_t *info;
    const drv_weights_t *weights;
    const uint8_t *by_calls;
    uint8_t iv_loops;       /* drv_result_t.iv_loops */
    drv_entries_t entries;  /* drv_result_t.entries (a copy: the workers read it while
                             * the taker writes the result) */
    qp_desc_block_t *blocks;/* drv_result_t.blocks and edges, reserved for every graph: */
    qp_desc_edge_t *edges;  /* the spent graphs' are stored there (prep_release) */
    unsigned threads;
    uint32_t lo, hi;     /* the batch: procedures [lo, hi) */
    prep_item_t *items;  /* PREP_BATCH of them, or NULL (no threads: made when taken) */
} prep_t;

/* The spent graph of IT, of P, freed, its description's blocks and edges stored first
 * when deferred. */
static void
prep_release(prep_t *p, prep_item_t *it)
{
    if (it->store)
        store_graph(p->blocks, p->edges, &it->g, it->block, it->edge);
    drv_graph_free(&it->g);
    it->spent = it->store = 0;
}

/* qp_task_fn: the graph of procedure P->lo + K, when run_pass will want it. */
static int
prep_one(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    prep_t *p = arg;
    prep_item_t *it = &p->items[k];
    uint32_t i = p->lo + (uint32_t)k;
    if (it->spent)
        prep_release(p, it);
    if ((p->prog->procs[i].flags & (CFG_PROC_FRAGMENT | CFG_PROC_PLT))
        || ed_plan_left_reason(p->plan, i) != NULL)
        return 0;
    it->rc = build_graph(p->prog, i, p->info, &p->entries, &it->g);
    it->g.weights = p->weights; /* (as run_pass sets them: prepare may read them) */
    it->g.iv_loops = p->iv_loops;
    it->g.entry_by_calls = p->by_calls[i];
    if (it->rc == 0 && p->drv->prepare != NULL && (it->rc = p->drv->prepare(&it->g)) < 0)
        drv_graph_free(&it->g);
    it->made = 1;
    return 0; /* errors are the taker's, in procedure order */
}

/* Free the graphs of P's batch that were not taken, and (SPENT) those given back. */
static void
prep_drop(prep_t *p, int spent)
{
    for (uint32_t k = 0; p->items != NULL && k < PREP_BATCH; k++) {
        prep_item_t *it = &p->items[k];
        if (it->made && it->rc == 0)
            drv_graph_free(&it->g);
        else if (spent && it->spent)
            prep_release(p, it);
        it->made = 0;
    }
}

/* The item of P that procedure I's graph will be given back to, or NULL (freed then). */
static prep_item_t *
prep_keeper(prep_t *p, uint32_t i)
{
    prep_item_t *it = p->items != NULL && i >= p->lo && i < p->hi ? &p->items[i - p->lo] : NULL;
    return it == NULL || it->made || it->spent ? NULL : it;
}

/* Procedure I's graph G, described: freed, or given back to its item in P for the
 * pool to free (prep_keeper). */
static void
prep_give_back(prep_t *p, uint32_t i, drv_graph_t *g)
{
    prep_item_t *it = prep_keeper(p, i);
    if (it == NULL) {
        drv_graph_free(g);
        return;
    }
    it->g = *g;
    it->spent = 1;
}

/* Procedure I's graph into *G (as drv_graph_build, whose answer it returns): made ahead
 * in P's batch, or here. */
static int
prep_take(prep_t *p, uint32_t i, drv_graph_t *g)
{
    prep_item_t *it = p->items != NULL && i >= p->lo && i < p->hi ? &p->items[i - p->lo] : NULL;
    if (it == NULL || !it->made) /* (not foreseen by prep_one: made here) */
        return build_graph(p->prog, i, p->info, &p->entries, g);
    *g = it->g;
    it->made = 0;
    return it->rc;
}

/* P's batch: procedures [LO, min(LO + PREP_BATCH, nprocs)), its graphs not made yet. */
static void
prep_reset(prep_t *p, uint32_t lo)
{
    prep_drop(p, 0);
    p->lo = lo;
    p->hi = p->prog->nprocs - lo > PREP_BATCH ? lo + PREP_BATCH : p->prog->nprocs;
    for (uint32_t k = 0; p->items != NULL && k < PREP_BATCH; k++) {
        prep_item_t *it = &p->items[k];
        if (it->spent && k >= p->hi - p->lo) /* (no prep_one of it in this batch) */
            prep_release(p, it);
        if (!it->spent) /* (a spent graph stays for prep_one to free) */
            memset(it, 0, sizeof(*it));
    }
}

/* What run_pass's steps over the procedures share. */
typedef struct pass {
    const drv_ops_t *drv;
    const cfg_prog_t *prog;
    const ed_plan_t *plan;
    const drv_weights_t *weights;
    drv_result_t *res;
    void (*on_progress)(void *arg, size_t done, size_t total);
    void *arg;
    int want_ip;                 /* the procedures left in place are measured there ... */
    ed_inplace_t *ip;            /* ... through this (made by make_inplace); or NULL */
    const drv_prog_info_t *info;
    const uint64_t *exits;       /* the entries of exit and its kin, sorted */
    size_t nexits;
    const uint8_t *leave, *solid, *by_calls; /* per procedure (run_pass) */
    prep_t *prep;                /* the batch of graphs made ahead, taken from */
    uint32_t lo, hi;             /* the procedures of the next step_range */
    int rc;                      /* step_range's answer: 0, DRV_AGAIN or QP_E* */
} pass_t;

/* Procedure I measured and described into C->res: 0, DRV_AGAIN or QP_E*. */
static int
pass_proc(pass_t *c, uint32_t i)
{
    const cfg_prog_t *prog = c->prog;
    drv_result_t *res = c->res;
    const cfg_proc_t *p = &prog->procs[i];
    if (c->on_progress != NULL && (i & 1023) == 0)
        c->on_progress(c->arg, i, prog->nprocs);
    if (p->flags & (CFG_PROC_FRAGMENT | CFG_PROC_PLT))
        return 0;
    const char *left = ed_plan_left_reason(c->plan, i);
    if (left != NULL && c->ip != NULL) {
        int rc = measure_in_place(res, prog, c->plan, c->ip, i, c->info, c->exits, c->nexits,
                                  c->leave);
        if (rc == 0) {
            res->nmeasured++;
            count_unseen_sites(res, prog, p, c->info); /* (in place: no hooks) */
            return 0;
        }
        if (rc < 0)
            return rc;
    }
    if (left != NULL) {
        count_unseen_sites(res, prog, p, c->info);
        return describe_unmeasured(res, prog, p, "left in place: ", left);
    }
    if (drv_name_in(p->name, exit_names) && has_syscall(prog, p)) {
        /* It ends the process from inside: its flow never leaves, so neither
         * counters on its edges nor flow conservation can account for it. */
        res->nunmeasured++;
        return describe_unmeasured(res, prog, p, "not measured: ", "ends the process from inside");
    }
    drv_graph_t g;
    int rc = prep_take(c->prep, i, &g);
    const char *why = g.why;
    g.weights = c->weights;
    g.iv_loops = res->iv_loops;
    g.entry_by_calls = c->by_calls[i];
    if (rc == 0) {
        uint32_t c0 = res->ncounters;
        rc = c->drv->place(&g, res, &why);
        /* (Kept for the pool: its blocks and edges are stored there, before it is freed.) */
        prep_item_t *keep = prep_keeper(c->prep, i);
        uint32_t block = res->nblocks, edge = res->nedges;
        if (rc == DRV_NOT_MEASURED)
            res->ncounters = c0; /* nothing of it is used */
        else if (rc == 0)
            rc = describe_measured(res, &g, c->exits, c->nexits, c->leave, 0, keep != NULL);
        if (rc == 0 && keep != NULL) {
            keep->store = 1;
            keep->block = block;
            keep->edge = edge;
        }
        prep_give_back(c->prep, i, &g);
    }
    if (rc == DRV_NOT_MEASURED && c->solid[i])
        return DRV_AGAIN; /* its callees may count on its counts */
    if (rc == DRV_NOT_MEASURED) {
        res->nunmeasured++;
        count_unseen_sites(res, prog, p, c->info);
        return describe_unmeasured(res, prog, p, "not measured: ", why ? why : "?");
    }
    if (rc == 0)
        res->nmeasured++;
    return rc;
}

/* The procedures [C->lo, C->hi) in order into C->rc (qp_parallel_for_beside's serial
 * step). */
static void
step_range(void *arg)
{
    pass_t *c = arg;
    for (uint32_t i = c->lo; c->rc == 0 && i < c->hi; i++)
        c->rc = pass_proc(c, i);
}

/* C->ip when C->want_ip, its answer in C->rc (beside the first batch's graphs: they
 * need it not). */
static void
make_inplace(void *arg)
{
    pass_t *c = arg;
    if (c->want_ip)
        c->rc = ed_inplace_create(c->prog, c->plan, &c->ip);
}

/*
 * Every procedure in order, with THREADS threads: while the caller's thread takes a
 * batch of graphs (PREP[k % 2]), the others make the next (PREP[(k + 1) % 2]). Without
 * threads, each graph is made when taken.
 */
static int
pass_all(pass_t *c, prep_t *prep, unsigned threads)
{
    uint32_t n = c->prog->nprocs;
    if (threads <= 1 || prep[0].items == NULL) {
        make_inplace(c);
        if (c->rc != 0)
            return c->rc;
        c->prep = &prep[0];
        c->lo = 0;
        c->hi = n;
        step_range(c);
        return c->rc;
    }
    prep_reset(&prep[0], 0);
    QP_CHECK(qp_parallel_for_beside(threads, prep[0].hi - prep[0].lo, 8, prep_one, &prep[0],
                                    make_inplace, c));
    for (uint32_t k = 0; c->rc == 0 && prep[k % 2].lo < n; k++) {
        prep_t *cur = &prep[k % 2], *next = &prep[(k + 1) % 2];
        c->prep = cur;
        c->lo = cur->lo;
        c->hi = cur->hi;
        if (cur->hi < n) {
            prep_reset(next, cur->hi);
            QP_CHECK(qp_parallel_for_beside(threads, next->hi - next->lo, 8, prep_one, next,
                                            step_range, c));
        } else {
            step_range(c);
            prep_drop(next, 1);
            next->lo = next->hi = n; /* the last batch */
        }
    }
    return c->rc;
}

/*
 * The pages of the result's arrays that describing will write, faulted in on the pool
 * while the main thread makes the pass's tables (setup_pass): describe_measured took
 * them a page fault at a time on the main thread (cc1: 0.05-0.07 s; the planned phase's
 * trimmed heap gives them back). As far as the procedures to measure can use them:
 * their blocks, their edges and a virtual one a block, counters about as many as edges
 * beyond blocks (not every reserved page: chromium's worst case is gigabytes). Only
 * speed: MADV_POPULATE_WRITE changes no byte; without it, nothing happens.
 */
static void
populate(void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    long ps = sysconf(_SC_PAGESIZE);
    uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t e = ((uintptr_t)p + len) & ~(page - 1);
    if (e > a) /* (a failure: the pages fault later, as before) */
        (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)len;
#endif
}

/* The pages of PROG's result RES, its reserved arrays (their pointers are not changed),
 * for the procedures PLAN relocates. */
static void
populate_result(const cfg_prog_t *prog, const ed_plan_t *plan, drv_result_t *res)
{
    size_t nb = 0, ne = 0;
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        if ((p->flags & (CFG_PROC_FRAGMENT | CFG_PROC_PLT))
            || ed_plan_left_reason(plan, i) != NULL)
            continue;
        nb += p->nblocks;
        ne += (size_t)p->nblocks + 1;
        for (uint32_t b = p->block; b < p->block + p->nblocks; b++)
            ne += prog->blocks[b].nsucc;
    }
    size_t np = ne - nb;
    nb = nb < res->blocks_cap ? nb : res->blocks_cap;
    ne = ne < res->edges_cap ? ne : res->edges_cap;
    np = np < res->probes_cap ? np : res->probes_cap;
    populate(res->procs, res->procs_cap * sizeof(qp_desc_proc_t));
    populate(res->blocks, nb * sizeof(qp_desc_block_t));
    populate(res->edges, ne * sizeof(qp_desc_edge_t));
    populate(res->probes, np * sizeof(ed_probe_t));
}

/* What run_pass makes before the procedures: on the main thread (setup_pass), and on
 * the pool beside it (setup_item). */
typedef struct pass_setup {
    const drv_ops_t *drv;
    const cfg_prog_t *prog;
    const ed_plan_t *plan;
    drv_result_t *res;
    int by_calls_ok;
    int rc;                        /* 0 or QP_E* */
    const uint64_t *xt;            /* the interior entries, nxt */
    size_t nxt;
    uint64_t *forkers, *starters;  /* drv_forkers, drv_starters (setup_item) */
    size_t nforkers, nstarters;
    int taken;                     /* a starter's address is taken */
    uint8_t *leave, *solid, *by_calls; /* per procedure */
} pass_setup_t;

/* The items of setup_item: the result's pages faulted in (only with threads), the
 * fork and thread starters' sets (each a pass over the program's edges; they read the
 * program and the entries' hash alone, neither the lazy caches setup_pass fills). */
enum { SETUP_POPULATE, SETUP_FORKERS, SETUP_STARTERS, SETUP_ITEMS };

/* qp_task_fn: item K of the pass_setup_t ARG (SETUP_*). */
static int
setup_item(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    pass_setup_t *s = arg;
    const drv_entries_t *entries = &s->res->entries;
    if (k == SETUP_POPULATE)
        populate_result(s->prog, s->plan, s->res);
    else if (k == SETUP_FORKERS)
        return drv_forkers(s->prog, entries, &s->forkers, &s->nforkers);
    else if (k == SETUP_STARTERS)
        return drv_starters(s->prog, entries, &s->starters, &s->nstarters, &s->taken);
    return 0;
}

/* The pass_setup_t ARG's tables but setup_item's (qp_parallel_for_beside's serial
 * step). */
static void
setup_pass(void *arg)
{
    pass_setup_t *s = arg;
    /* Also fills the program's caches of held addresses and interior entries, which
     * ed_inplace_create reads beside the pool's workers later (filled lazily, they
     * must not be filled there). */
    s->rc = cfg_interior_entries(s->prog, &s->xt, &s->nxt);
    const uint8_t *marks = s->res->callee_marks;
    if (s->rc == 0)
        s->leave = leaving_procs(s->prog, &s->res->entries, marks);
    if (s->rc == 0 && s->leave == NULL)
        s->rc = QP_ENOMEM;
    if (s->rc == 0)
        s->rc = plan_by_calls(s->drv, s->prog, s->plan, s->by_calls_ok, &s->res->entries,
                              marks, s->leave, &s->solid, &s->by_calls);
}

static int
run_pass(const drv_ops_t *drv, const cfg_prog_t *prog, const ed_plan_t *plan,
         const drv_weights_t *weights, drv_result_t *res,
         void (*on_progress)(void *arg, size_t done, size_t total), void *arg, int by_calls_ok,
         unsigned threads)
{
    uint8_t iv_loops = res->iv_loops; /* (the caller's) */
    memset(res, 0, sizeof(*res));
    res->iv_loops = iv_loops;
    res->driver = drv->kind;
    res->resume_unnamed = go_resume_unnamed(prog);
    uint32_t off;
    /* Blocks at most the program's; probes: its edges plus a virtual edge or a block
     * counter per block; edges: every graph's (the pool stores them into the array,
     * which must not move: each graph's are at most its blocks' successors, a
     * virtual edge for a block without any, and a root edge a block). Pages not
     * written are not taken. */
    size_t nedges = (size_t)prog->nedges + prog->nblocks;
    if (reserve((void **)&res->procs, &res->procs_cap, prog->nprocs, sizeof(qp_desc_proc_t)) < 0
        || reserve((void **)&res->blocks, &res->blocks_cap, prog->nblocks,
                   sizeof(qp_desc_block_t)) < 0
        || reserve((void **)&res->edges, &res->edges_cap, nedges + prog->nblocks,
                   sizeof(qp_desc_edge_t)) < 0
        || reserve((void **)&res->probes, &res->probes_cap, nedges, sizeof(ed_probe_t)) < 0) {
        drv_result_free(res);
        return QP_ENOMEM;
    }
    QP_CHECK(add_string(res, "", &off));
    res->callee_names = calloc(prog->nprocs + 1, sizeof(uint32_t));
    res->callee_marks = callee_marks(prog);
    if (res->callee_names == NULL || res->callee_marks == NULL
        || drv_entries_build(prog, &res->entries) < 0) {
        drv_result_free(res);
        return QP_ENOMEM;
    }
    pass_setup_t su = { drv, prog, plan, res, by_calls_ok, 0, NULL, 0, NULL, NULL, 0, 0,
                        0, NULL, NULL, NULL };
    int rc = 0; /* (the lowest item's error: the same for any number of threads) */
    if (threads > 1)
        rc = qp_parallel_for_beside(threads, SETUP_ITEMS, 1, setup_item, &su, setup_pass, &su);
    else {
        setup_pass(&su);
        for (size_t k = SETUP_FORKERS; rc == 0 && k < SETUP_ITEMS; k++)
            rc = setup_item(&su, 0, k);
    }
    if (su.rc != 0)
        rc = su.rc;
    uint64_t *exits = NULL, *forkers = su.forkers, *starters = su.starters;
    size_t nexits = 0;
    res->nthread_unseen = su.taken != 0; /* called through a pointer: no hook sees it */
    drv_prog_info_t info = { su.xt, su.nxt, forkers, su.nforkers, starters, su.nstarters,
                             0, cfg_image_runtime(prog->img) != CFG_RUNTIME_C };
    if (rc == 0 && (exits = malloc((prog->nprocs + 1) * sizeof(uint64_t))) == NULL)
        rc = QP_ENOMEM;
    uint8_t *leave = su.leave, *solid = su.solid, *by_calls = su.by_calls;
    /* Counting drivers measure procedures left in place where they are. */
    int want_ip = (drv == &drv_qp_ops || drv == &drv_naive_ops)
        && ed_plan_stats(plan)->nleft > 0;
    for (uint32_t i = 0; rc == 0 && i < prog->nprocs; i++)
        if (drv_name_in(prog->procs[i].name, exit_names))
            exits[nexits++] = prog->procs[i].entry; /* procs are sorted by entry */
    prep_t prep[2];
    for (int b = 0; b < 2; b++) {
        prep[b] = (prep_t) { drv, prog, plan, &info, weights, by_calls, res->iv_loops,
                             res->entries, res->blocks, res->edges, threads, 0, 0, NULL };
        if (rc == 0 && threads > 1
            && (prep[b].items = calloc(PREP_BATCH, sizeof(prep_item_t))) == NULL)
            rc = QP_ENOMEM;
    }
    pass_t pass = { drv, prog, plan, weights, res, on_progress, arg, want_ip, NULL, &info,
                    exits, nexits, leave, solid, by_calls, NULL, 0, 0, 0 };
    if (rc == 0)
        rc = pass_all(&pass, prep, threads);
    for (int b = 0; b < 2; b++) {
        prep_drop(&prep[b], 1);
        free(prep[b].items);
    }
    /* Read only while describing: not held through the layout (chromium: 25 MB). */
    drv_entries_free(&res->entries);
    if (rc == 0)
        res->inplace = pass.ip; /* for the plan, which would make it again */
    else
        ed_inplace_destroy(pass.ip);
    free(exits);
    free(leave);
    free(solid);
    free(by_calls);
    free(forkers);
    free(starters);
    if (rc < 0 || rc == DRV_AGAIN)
        drv_result_free(res);
    return rc;
}

int
drv_run_threads(const drv_ops_t *drv, const cfg_prog_t *prog, const ed_plan_t *plan,
                const drv_weights_t *weights, drv_result_t *res,
                void (*on_progress)(void *arg, size_t done, size_t total), void *arg,
                unsigned threads)
{
    int rc = run_pass(drv, prog, plan, weights, res, on_progress, arg, 1, threads);
    if (rc == DRV_AGAIN)
        rc = run_pass(drv, prog, plan, weights, res, on_progress, arg, 0, threads);
    res->workers = threads;
    /* The arrays were reserved for the worst case (every edge a probe): what they did
     * not take serves the plan's slots (chromium: hundreds of MB). */
    cfg_vec_trim((void **)&res->probes, &res->probes_cap, res->nprobes, sizeof(ed_probe_t));
    cfg_vec_trim((void **)&res->procs, &res->procs_cap, res->nprocs, sizeof(qp_desc_proc_t));
    cfg_vec_trim((void **)&res->blocks, &res->blocks_cap, res->nblocks,
                 sizeof(qp_desc_block_t));
    cfg_vec_trim((void **)&res->edges, &res->edges_cap, res->nedges, sizeof(qp_desc_edge_t));
    return rc;
}

int
drv_run_progress(const drv_ops_t *drv, const cfg_prog_t *prog, const ed_plan_t *plan,
                 const drv_weights_t *weights, drv_result_t *res,
                 void (*on_progress)(void *arg, size_t done, size_t total), void *arg)
{
    return drv_run_threads(drv, prog, plan, weights, res, on_progress, arg, 1);
}

/* The new addresses of drv_result_finish, on the pool: each element's from the plan
 * alone, into that element. */
typedef struct finish_job {
    drv_result_t *res;
    const ed_plan_t *plan;
} finish_job_t;

#define FINISH_GRAIN 4096

/* qp_task_fn: elements [K, K + 1) * FINISH_GRAIN of the procedures, then the blocks,
 * then (not mapped yet) the edges' return addresses, counted as one sequence. */
static int
finish_part(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    const finish_job_t *j = arg;
    drv_result_t *res = j->res;
    void *plan = (void *)j->plan;
    size_t np = res->nprocs, nb = res->nblocks, ne = res->ret_mapped ? 0 : res->nedges;
    size_t lo = k * FINISH_GRAIN, hi = lo + FINISH_GRAIN;
    hi = hi < np + nb + ne ? hi : np + nb + ne;
    for (size_t i = lo; i < hi; i++) {
        if (i < np) {
            if (res->procs[i].flags & QP_PROC_MEASURED)
                res->procs[i].new_entry = ed_plan_map(plan, res->procs[i].entry);
        } else if (i < np + nb)
            res->blocks[i - np].new_start = ed_plan_map(plan, res->blocks[i - np].start);
        else {
            qp_desc_edge_t *e = &res->edges[i - np - nb];
            uint64_t call = e->ret_addr, after = 0; /* the old address so far */
            e->ret_addr = 0;
            if (call != 0 && ed_plan_insn_new(plan, call, &after) != 0)
                e->ret_addr = after;
        }
    }
    return 0;
}

void
drv_result_finish(drv_result_t *res, const ed_plan_t *plan, uint64_t counters_vaddr)
{
    (void)counters_vaddr;
    size_t n = (size_t)res->nprocs + res->nblocks + (res->ret_mapped ? 0 : res->nedges);
    finish_job_t job = { res, plan };
    qp_parallel_for(res->workers, (n + FINISH_GRAIN - 1) / FINISH_GRAIN, 1, finish_part, &job,
                    NULL); /* (finish_part fails never) */
    res->ret_mapped = 1;
}

void
drv_result_free(drv_result_t *res)
{
    free(res->probes);
    free(res->procs);
    free(res->blocks);
    free(res->edges);
    free(res->calls);
    free(res->callee_names);
    free(res->callee_marks);
    free(res->ind);
    free(res->ind_nodes);
    free(res->ind_snips);
    free(res->strtab);
    free(res->xlate_site);
    free(res->xlate_miss);
    free(res->ip_why);
    drv_entries_free(&res->entries);
    ed_inplace_destroy(res->inplace);
    memset(res, 0, sizeof(*res));
}

int
drv_describe(drv_result_t *res, const ed_plan_t *plan, uint64_t counters, uint8_t **buf,
             size_t *len, uint64_t *id)
{
    drv_result_finish(res, plan, counters);
    qp_desc_t d;
    memset(&d, 0, sizeof(d));
    d.hdr.driver = res->driver;
    d.hdr.counters_vaddr = counters;
    d.hdr.ncounters = res->ncounters;
    d.hdr.flags = (res->atomic ? QP_DESC_ATOMIC : 0) | (res->pie ? QP_DESC_PIE : 0)
        | (res->threads ? QP_DESC_THREADS : 0) | (res->nfork_unseen ? QP_DESC_FORK_UNSEEN : 0);
    d.hdr.nprocs = res->nprocs;
    d.hdr.nblocks = res->nblocks;
    d.hdr.nedges = res->nedges;
    d.hdr.ncalls = res->ncalls;
    d.calls = res->calls;
    d.hdr.strtab_size = res->strtab_size;
    d.procs = res->procs;
    d.blocks = res->blocks;
    d.edges = res->edges;
    d.strtab = res->strtab;
    /* What each procedure gives when it did not run, so that qp need not decode it
     * (qp_desc_serialize_threads, validated once: the summaries are not validated). */
    int rc = qp_desc_validate(&d, NULL, 0) < 0 ? QP_EINVAL : 0;
    if (rc == 0 && res->summarize != NULL)
        rc = res->summarize(&d, res->workers);
    if (rc == 0)
        rc = qp_desc_encode_threads(&d, QP_FORMAT_VERSION, res->workers, buf, len);
    free(d.zero);
    free(d.zero_entry);
    QP_CHECK(rc);
    *id = ((const qp_desc_hdr_t *)*buf)->id;
    return 0;
}
