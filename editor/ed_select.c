/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The relocation plan's first part (ed_layout.c has the rest): which procedures move -
 * those the analysis vouches for and whose redirects fit - and which stay, with why.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/qp_pool.h"
#include "base/qp_search.h"
#include "editor/ed.h"

#include "editor/ed_layout_priv.h"

/*****************************************************************************
 * Which procedures move
 */

static const char *
owned_reason(ed_plan_t *plan, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A reason made from FMT, kept until the plan is destroyed. */
static const char *
owned_reason(ed_plan_t *plan, const char *fmt, ...)
{
    char buf[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    char *d = malloc(strlen(buf) + 1);
    char **v = realloc(plan->owned, (plan->nowned + 1) * sizeof(char *));
    if (d == NULL || v == NULL) {
        free(d);
        if (v != NULL)
            plan->owned = v;
        return "out of memory";
    }
    strcpy(d, buf);
    plan->owned = v;
    plan->owned[plan->nowned++] = d;
    return d;
}

/* The end of the old extent (main part or fragment) of P that holds ADDR. */
static uint64_t
extent_end(const cfg_prog_t *prog, uint32_t pi, uint64_t addr)
{
    const cfg_proc_t *p = &prog->procs[pi];
    if (addr >= p->start && addr < p->end)
        return p->end;
    /* A cold fragment of P: procedures are sorted by entry, extents are disjoint. */
    size_t lo = 0, hi = prog->nprocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (prog->procs[mid].entry <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0) {
        const cfg_proc_t *f = &prog->procs[lo - 1];
        if (f->parent == pi && (f->flags & CFG_PROC_FRAGMENT) && addr < f->end)
            return f->end;
    }
    return addr; /* not inside: no room */
}

/* Does block B end in an indirect jump whose targets are unknown? */
int
edl_block_unresolved(const cfg_prog_t *prog, const cfg_block_t *b)
{
    for (uint32_t e = 0; e < b->nsucc; e++)
        if (cfg_block_succ(prog, b, e)->kind == CFG_EDGE_UNRESOLVED)
            return 1;
    return 0;
}

/* The instruction that ends block B (decoded into *IN), or NULL. */
static const uint8_t *
last_insn(const cfg_prog_t *prog, const cfg_block_t *b, arch_insn_t *in)
{
    for (uint64_t a = b->start; a < b->end;) {
        const uint8_t *bytes = cfg_image_ptr(prog->img, a, NULL);
        if (bytes == NULL || cfg_image_decode(prog->img, a, 0, in) < 0)
            return NULL;
        if (a + in->len >= b->end)
            return bytes;
        a += in->len;
    }
    return NULL;
}

/* Can the unknown-target jump ending block B be translated at run time (its operand
 * re-encoded as a push)? */
static int
translatable(const cfg_prog_t *prog, const cfg_block_t *b)
{
    arch_insn_t in;
    uint8_t scratch[ARCH_MAX_RELOC];
    const uint8_t *bytes = last_insn(prog, b, &in);
    const arch_isa_t *isa = cfg_image_isa(prog->img);
    return bytes != NULL && in.kind == ARCH_KIND_JMP_IND && isa->emit_jmp_xlate != NULL
        && isa->emit_jmp_xlate(bytes, &in, in.addr, in.addr + 0x1000, 0, scratch,
                               sizeof(scratch)) > 0;
}

/*
 * The end of the padding after END (the end of a procedure's extent): alignment nops,
 * int3 or zero bytes up to the next procedure, which nothing runs (a jump there, or an
 * address taken, would have made a block or a procedure of it). A redirect may spill
 * into it. END itself when what follows is not all padding.
 */
static uint64_t
padding_end(const cfg_prog_t *prog, uint64_t end)
{
    size_t lo = 0, hi = prog->nprocs;
    while (lo < hi) { /* the first procedure with its entry at END or after */
        size_t mid = lo + (hi - lo) / 2;
        if (prog->procs[mid].entry < end)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t avail = 0;
    const uint8_t *bytes = cfg_image_ptr(prog->img, end, &avail);
    uint64_t next = lo < prog->nprocs ? prog->procs[lo].start : end + avail;
    if (lo < prog->nprocs && prog->procs[lo].entry < next)
        next = prog->procs[lo].entry;
    if (bytes == NULL || next <= end || next - end > avail || next - end > 4096
        || !cfg_image_isa(prog->img)->is_padding(bytes, next - end))
        return end;
    return next;
}

/* Note that the redirect at ADDR of procedure OWNER is not written. */
static int
push_dropped(ed_plan_t *plan, uint64_t addr, uint32_t owner)
{
    /* Two arrays of one length: the capacity grows the same for both. */
    size_t cap_addr = plan->dropped_cap, cap_owner = plan->dropped_cap;
    if (cfg_vec_grow((void **)&plan->dropped, &cap_addr, plan->ndropped + 1, sizeof(uint64_t)) < 0
        || cfg_vec_grow((void **)&plan->dropped_owner, &cap_owner, plan->ndropped + 1,
                        sizeof(uint32_t)) < 0)
        return QP_ENOMEM;
    plan->dropped_cap = cap_addr;
    size_t k = plan->ndropped++; /* kept sorted: mostly appended in address order */
    while (k > 0 && plan->dropped[k - 1] > addr) {
        plan->dropped[k] = plan->dropped[k - 1];
        plan->dropped_owner[k] = plan->dropped_owner[k - 1];
        k--;
    }
    plan->dropped[k] = addr;
    plan->dropped_owner[k] = owner;
    return 0;
}

static int branch_target_only(const ed_plan_t *plan, uint32_t pi);
static int cases_retargeted(const ed_plan_t *plan, const cfg_block_t *bl, uint32_t pi);

/*
 * May the redirect at ADDR of procedure PI be left out? Its entry: when only direct
 * branches reach it (branch_target_only). An interior entry: when it is no case of a
 * table that keeps its old entries and no address-taken label (then only direct jumps
 * of other procedures reach it, the reason it has a redirect).
 */
static int
pad_optional(const ed_plan_t *plan, uint32_t pi, uint64_t addr)
{
    const cfg_prog_t *prog = plan->prog;
    if (addr == prog->procs[pi].entry)
        return branch_target_only(plan, pi);
    uint32_t b = cfg_block_at(prog, addr);
    if (b == CFG_NONE || prog->blocks[b].start != addr)
        return 0;
    const cfg_block_t *bl = &prog->blocks[b];
    for (uint32_t k = 0; k < bl->npred; k++) {
        const cfg_edge_t *ed = &prog->edges[prog->preds[bl->pred + k]];
        if (ed->kind == CFG_EDGE_INDIRECT)
            return 0;
        if (ed->kind == CFG_EDGE_TABLE
            && (ed->from == CFG_NONE || !cases_retargeted(plan, &prog->blocks[ed->from], pi)))
            return 0;
    }
    return 1;
}

/*
 * May procedure PI move without a redirect at its entry (too short for one)? Only if
 * nothing but direct calls and jumps reaches its entry: no symbol (other modules, or a
 * debugger), no taken address, not the program's entry or an init function, not a
 * jump-table case. Whether those calls and jumps all move is settled at the end.
 */
static int
branch_target_only(const ed_plan_t *plan, uint32_t pi)
{
    const cfg_prog_t *prog = plan->prog;
    const cfg_proc_t *p = &prog->procs[pi];
    const uint32_t direct = CFG_SRC_CALL | CFG_SRC_TAILCALL | CFG_SRC_EH_FRAME;
    if ((p->sources & ~direct) != 0 || (p->flags & CFG_PROC_FRAGMENT) || p->nblocks == 0)
        return 0;
    /* A jump-table case or address-taken label has an incoming edge of that kind. */
    return !cfg_block_indirect_target(prog, p->block);
}

/* The owner of the redirect dropped at ADDR (plan->dropped), or CFG_NONE. */
uint32_t
edl_dropped_at(const ed_plan_t *plan, uint64_t addr)
{
    size_t k = cfg_u64_lower_bound(plan->dropped, plan->ndropped, addr);
    return k < plan->ndropped && plan->dropped[k] == addr ? plan->dropped_owner[k] : CFG_NONE;
}

/*
 * A procedure that moves without some of its redirects (plan->dropped) stays after all
 * when code that stays reaches one of them by a direct call or jump (which would land on
 * old, unredirected bytes). Returns whether anything changed.
 */
static int
settle_unpadded(ed_plan_t *plan)
{
    const cfg_prog_t *prog = plan->prog;
    int changed = 0;
    for (uint32_t b = 0; plan->ndropped > 0 && b < prog->nblocks; b++) {
        const cfg_block_t *bl = &prog->blocks[b];
        uint32_t from = cfg_proc_owner(prog, bl->proc);
        if (from != CFG_NONE && plan->reason[from] == NULL)
            continue; /* moves: its branches go through the map */
        uint64_t target = bl->call_target;
        for (uint32_t e = 0; e <= bl->nsucc; e++) {
            if (e < bl->nsucc) {
                const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
                if (ed->kind != CFG_EDGE_TAILCALL || ed->target == 0)
                    continue;
                target = ed->target;
            }
            uint32_t o = target != 0 ? edl_dropped_at(plan, target) : CFG_NONE;
            if (o == CFG_NONE || o == from || plan->reason[o] != NULL)
                continue;
            plan->reason[o] = owned_reason(plan,
                "no room for a redirect jump at 0x%llx, and code that stays jumps there",
                (unsigned long long)target);
            changed = 1;
        }
    }
    return changed;
}

/* Append X to the growable array *V (*N used, *CAP allocated). */
int
edl_push_u64(uint64_t **v, size_t *n, size_t *cap, uint64_t x)
{
    if (*n == *cap) {
        uint64_t *nv = realloc(*v, (*cap ? *cap * 2 : 16) * sizeof(uint64_t));
        if (nv == NULL)
            return QP_ENOMEM;
        *v = nv;
        *cap = *cap ? *cap * 2 : 16;
    }
    (*v)[(*n)++] = x;
    return 0;
}

/* The procedure that owns the code at ADDR (a fragment's parent), or CFG_NONE. */
uint32_t
edl_owner_at(const cfg_prog_t *prog, uint64_t addr)
{
    const cfg_proc_t *p = cfg_proc_at(prog, addr);
    return p != NULL ? cfg_proc_owner(prog, (uint32_t)(p - prog->procs)) : CFG_NONE;
}

/* A jump table's key (its jump or its first entry's address) and its index, for sorting. */
typedef struct table_key {
    uint64_t key;
    uint32_t t;
} table_key_t;

static int
cmp_table_key(const void *a, const void *b)
{
    const table_key_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* The end of jump table TB's entries. */
static uint64_t
table_end(const cfg_table_t *tb)
{
    return tb->addr + (uint64_t)tb->nentries * tb->entry_size;
}

/*
 * plan->table_by_jump and plan->table_alone: edl_collect_pads asks, for every block
 * that ends in a table jump of every procedure, three times a rewrite, which tables
 * that block uses and whether another table shares their bytes; a scan of all the
 * tables each time was quadratic (cc1: 3,060 tables, 1.7 G instructions).
 */
int
edl_index_tables(ed_plan_t *plan)
{
    const cfg_prog_t *prog = plan->prog;
    uint32_t n = prog->ntables;
    table_key_t *k = malloc((n + 1) * sizeof(*k));
    plan->table_by_jump = malloc((n + 1) * sizeof(uint32_t));
    plan->table_alone = malloc(n + 1);
    if (k == NULL || plan->table_by_jump == NULL || plan->table_alone == NULL) {
        free(k);
        return QP_ENOMEM;
    }
    for (uint32_t t = 0; t < n; t++)
        k[t] = (table_key_t) { prog->tables[t].jump, t };
    qsort(k, n, sizeof(*k), cmp_table_key);
    for (uint32_t i = 0; i < n; i++)
        plan->table_by_jump[i] = k[i].t;
    /*
     * Tables T and U share bytes when U.addr < end(T) and T.addr < end(U). In order of
     * their first entry, an earlier U does when the largest end before T passes T.addr
     * (U.addr <= T.addr < end(T): T is not empty, edl_table_sure asks no other), a
     * later one when it starts before end(T) and is not empty at T.addr itself.
     */
    for (uint32_t t = 0; t < n; t++)
        k[t] = (table_key_t) { prog->tables[t].addr, t };
    qsort(k, n, sizeof(*k), cmp_table_key);
    uint64_t most = 0; /* the largest end of the tables before, in this order */
    for (uint32_t i = 0; i < n; i++) {
        const cfg_table_t *tb = &prog->tables[k[i].t];
        uint64_t end = table_end(tb);
        int alone = i == 0 || most <= tb->addr;
        for (uint32_t j = i + 1; alone && j < n && k[j].key < end; j++) {
            const cfg_table_t *o = &prog->tables[k[j].t];
            alone = !(o->addr > tb->addr || table_end(o) > tb->addr);
        }
        plan->table_alone[k[i].t] = (uint8_t)alone;
        most = end > most ? end : most;
    }
    free(k);
    return 0;
}

/*
 * Will jump table T be retargeted to the new code whenever procedure PI moves
 * (retarget_tables)? Then its cases need no redirect: nothing else reads it. Its bound
 * is proven, its entries can be rewritten without a dynamic relocation, no other table
 * shares its bytes, and its jump is PI's.
 */
int
edl_table_sure(const ed_plan_t *plan, uint32_t t, uint32_t pi)
{
    const cfg_prog_t *prog = plan->prog;
    const cfg_table_t *tb = &prog->tables[t];
    int pie = (prog->img->flags & CFG_IMG_PIE) != 0;
    /* (AArch64's tables count words from an adr's base: ed_anchor.c moves it where
     * the final layout lets the entries reach, which is known only after the redirects
     * are chosen: their cases keep them.) */
    if (plan->opts.keep_tables || !tb->bounded || tb->nentries == 0 || tb->shift != 0 || tb->zext
        || !(tb->relative ? tb->entry_size == 4 : tb->entry_size == 8 && !pie))
        return 0;
    /* (another table over the same bytes: retarget_tables skips both) */
    return plan->table_alone[t] && edl_owner_at(prog, tb->jump) == pi;
}

/* The jump of the table at position I of plan->table_by_jump (qp_bucket_key_fn). */
static uint64_t
table_jump_at(const void *ctx, size_t i)
{
    const ed_plan_t *plan = ctx;
    return plan->prog->tables[plan->table_by_jump[i]].jump;
}

size_t
edl_tables_from(const ed_plan_t *plan, uint64_t addr)
{
    return qp_lower_bound_fn(plan->prog->ntables, table_jump_at, plan, addr);
}

/* Does the table jump ending block BL of procedure PI use only sure tables? */
static int
cases_retargeted(const ed_plan_t *plan, const cfg_block_t *bl, uint32_t pi)
{
    const cfg_prog_t *prog = plan->prog;
    const uint32_t *by = plan->table_by_jump;
    int found = 0;
    for (size_t i = edl_tables_from(plan, bl->start); i < prog->ntables && prog->tables[by[i]].jump < bl->end; i++) {
        if (!edl_table_sure(plan, by[i], pi))
            return 0;
        found = 1;
    }
    return found;
}

/* Old addresses of P that need a redirect: entry, indirect targets, interior entries.
 * The cases of a table retargeted whenever P moves need none. */
int
edl_collect_pads(const ed_plan_t *plan, uint32_t pi, uint64_t **out, size_t *n, uint32_t *nind)
{
    const cfg_prog_t *prog = plan->prog;
    const uint64_t *xt = plan->xt;
    size_t nxt = plan->nxt;
    const cfg_proc_t *p = &prog->procs[pi];
    size_t cap = 16, k = 0;
    uint64_t *v = malloc(cap * sizeof(uint64_t));
    if (v == NULL)
        return QP_ENOMEM;
    v[k++] = p->entry;
    *nind = 0;
    uint64_t first = UINT64_MAX, last = 0; /* the lowest and highest block start */
    for (uint32_t b = p->block; b < p->block + p->nblocks; b++) {
        const cfg_block_t *bl = &prog->blocks[b];
        first = bl->start < first ? bl->start : first;
        last = bl->start > last ? bl->start : last;
        int sure = -1; /* decided at the block's first table edge */
        for (uint32_t e = 0; e < bl->nsucc; e++) {
            const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
            if ((ed->kind != CFG_EDGE_TABLE && ed->kind != CFG_EDGE_INDIRECT) || ed->to == CFG_NONE)
                continue;
            if (ed->kind == CFG_EDGE_TABLE && sure < 0)
                sure = cases_retargeted(plan, bl, pi);
            if (ed->kind == CFG_EDGE_TABLE && sure > 0)
                continue;
            if (edl_push_u64(&v, &k, &cap, prog->blocks[ed->to].start) < 0) {
                free(v);
                return QP_ENOMEM;
            }
        }
    }
    /* Interior entries: blocks that other procedures jump to directly (a direct jump
     * from moved code is retargeted through the map, but one from code that stays
     * needs the redirect), and blocks whose address the program holds. Most
     * procedures have none: only those between its lowest and highest block start are
     * searched. */
    size_t x0 = cfg_u64_lower_bound(xt, nxt, first);
    size_t nx = x0 < nxt && xt[x0] <= last ? cfg_u64_lower_bound(xt, nxt, last + 1) - x0 : 0;
    for (uint32_t b = p->block; nx > 0 && b < p->block + p->nblocks; b++) {
        uint64_t st = prog->blocks[b].start;
        if (st == p->entry || !cfg_u64_contains(xt + x0, nx, st))
            continue;
        if (edl_push_u64(&v, &k, &cap, st) < 0) {
            free(v);
            return QP_ENOMEM;
        }
    }
    qsort(v, k, sizeof(uint64_t), cfg_u64_cmp);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || v[u - 1] != v[i])
            v[u++] = v[i];
    *nind = (uint32_t)(u - 1);
    *out = v;
    *n = u;
    return 0;
}

/*
 * Every procedure's redirects at once (edl_pads_all), on the pool: edl_collect_pads is
 * a function of the program and of the plan's tables alone, and was called once per
 * procedure on the main thread by each of its users (cc1: 0.19 G instructions each).
 * Parts of PADS_GRAIN procedures, each into its own vector, joined in procedure order.
 */
#define PADS_GRAIN 512

typedef struct pads_part {
    uint64_t *v;            /* its procedures' redirects, in procedure order */
    size_t n, cap;
} pads_part_t;

typedef struct pads_job {
    const ed_plan_t *plan;
    edl_pads_t *out;        /* off[pi + 1]: procedure pi's count, until joined */
    pads_part_t *parts;
} pads_job_t;

/* qp_task_fn: the redirects of procedures [K, K + 1) * PADS_GRAIN (pads_job_t ARG). */
static int
pads_part(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    const pads_job_t *j = arg;
    const cfg_prog_t *prog = j->plan->prog;
    pads_part_t *c = &j->parts[k];
    size_t hi = (k + 1) * PADS_GRAIN < prog->nprocs ? (k + 1) * PADS_GRAIN : prog->nprocs;
    for (size_t pi = k * PADS_GRAIN; pi < hi; pi++) {
        if (prog->procs[pi].flags & CFG_PROC_FRAGMENT)
            continue; /* (a fragment's are its parent's) */
        uint64_t *pads;
        size_t n;
        uint32_t nind;
        QP_CHECK(edl_collect_pads(j->plan, (uint32_t)pi, &pads, &n, &nind));
        int rc = cfg_vec_grow((void **)&c->v, &c->cap, c->n + n, sizeof(uint64_t));
        if (rc == 0) {
            memcpy(c->v + c->n, pads, n * sizeof(uint64_t));
            c->n += n;
            j->out->off[pi + 1] = n;
            j->out->nind[pi] = nind;
        }
        free(pads);
        QP_CHECK(rc);
    }
    return 0;
}

int
edl_pads_all(const ed_plan_t *plan, edl_pads_t *out)
{
    const cfg_prog_t *prog = plan->prog;
    size_t nparts = (prog->nprocs + PADS_GRAIN - 1) / PADS_GRAIN;
    memset(out, 0, sizeof(*out));
    out->off = calloc((size_t)prog->nprocs + 1, sizeof(size_t));
    out->nind = calloc((size_t)prog->nprocs + 1, sizeof(uint32_t));
    pads_part_t *parts = calloc(nparts + 1, sizeof(pads_part_t));
    int rc = out->off != NULL && out->nind != NULL && parts != NULL ? 0 : QP_ENOMEM;
    pads_job_t job = { plan, out, parts };
    if (rc == 0)
        rc = qp_parallel_for(plan->opts.threads, nparts, 1, pads_part, &job, NULL);
    size_t total = 0;
    for (size_t k = 0; rc == 0 && k < nparts; k++)
        total += parts[k].n;
    if (rc == 0 && (out->v = malloc((total + 1) * sizeof(uint64_t))) == NULL)
        rc = QP_ENOMEM;
    for (size_t k = 0, at = 0; k < nparts; k++) {
        if (rc == 0 && parts[k].n > 0)
            memcpy(out->v + at, parts[k].v, parts[k].n * sizeof(uint64_t));
        at += parts[k].n;
        free(parts[k].v);
    }
    free(parts);
    for (uint32_t pi = 0; rc == 0 && pi < prog->nprocs; pi++)
        out->off[pi + 1] += out->off[pi];
    if (rc < 0)
        edl_pads_free(out);
    return rc;
}

void
edl_pads_free(edl_pads_t *p)
{
    free(p->v);
    free(p->off);
    free(p->nind);
    memset(p, 0, sizeof(*p));
}

/* Does ADDR lie inside one of the redirects PADS (sorted), after its first byte? */
static int
under_pad(const ed_plan_t *plan, const uint64_t *pads, size_t npads, uint64_t addr)
{
    /* The last redirect at or before ADDR: the only one that may cover it. */
    size_t k = cfg_u64_lower_bound(pads, npads, addr + 1);
    return k > 0 && pads[k - 1] < addr && addr < pads[k - 1] + PAD_LEN(plan);
}

/*
 * The first place where procedure PI's old code may be entered that lies inside one of
 * its redirects PADS (sorted), after the redirect's first byte, or 0. Entered at a
 * redirect's start, the old code jumps to the new; a few bytes further it runs the
 * middle of the redirect's jump. Such places: every block, when PI has a jump
 * translated at run time (XLATED: a target that is no procedure's entry, the translation
 * table's keys, runs the old code; chromium 156: a 2-byte `xor %ebx,%ebx` case falling
 * into another case); the addresses the program holds inside PI's blocks, not at their
 * start (MID, sorted: entered there, the old code runs; *HELD set for those).
 */
static uint64_t
landing_under_pad(const ed_plan_t *plan, uint32_t pi, const uint64_t *pads, size_t npads,
    int xlated, const uint64_t *mid, size_t nmid, int *held)
{
    const cfg_prog_t *prog = plan->prog;
    const cfg_proc_t *p = &prog->procs[pi];
    uint64_t first = 0;
    for (uint32_t b = p->block; b < p->block + p->nblocks; b++) {
        const cfg_block_t *bl = &prog->blocks[b];
        if (xlated && under_pad(plan, pads, npads, bl->start)
            && (first == 0 || bl->start < first)) {
            first = bl->start;
            *held = 0;
        }
        size_t k = cfg_u64_lower_bound(mid, nmid, bl->start);
        for (; k < nmid && mid[k] < bl->end; k++)
            if (under_pad(plan, pads, npads, mid[k]) && (first == 0 || mid[k] < first)) {
                first = mid[k];
                *held = 1;
            }
    }
    return first;
}

/*
 * The addresses the program holds (a relocated word, a rip-relative operand) inside a
 * block, not at its start, sorted and unique into *OUT (*N): entered there, the old code
 * runs (ed_layout.c's count_held_inside reports them).
 */
/* cfg_held_select: a relocated word or a rip-relative operand inside a block. */
static int
held_mid_block(const cfg_prog_t *prog, const cfg_held_t *h)
{
    if (h->src != CFG_HELD_RELOC && h->src != CFG_HELD_RIPREL)
        return 0;
    uint32_t bi = cfg_block_at(prog, h->addr);
    return bi != CFG_NONE && prog->blocks[bi].start != h->addr;
}

int
edl_held_mid_block(const cfg_prog_t *prog, uint64_t **out, size_t *n)
{
    return cfg_held_select(prog, held_mid_block, out, n);
}

/* Set the reason of procedure PI unless it has one already. */
static void
leave(ed_plan_t *plan, uint32_t pi, const char *why)
{
    if (pi < plan->prog->nprocs && plan->reason[pi] == NULL)
        plan->reason[pi] = why;
}

/* The lowest start and the highest end of P's blocks (fragments included). */
static void
proc_span(const cfg_prog_t *prog, uint32_t pi, uint64_t *lo, uint64_t *hi)
{
    const cfg_proc_t *p = &prog->procs[pi];
    *lo = UINT64_MAX;
    *hi = 0;
    for (uint32_t b = p->block; b < p->block + p->nblocks; b++) {
        *lo = prog->blocks[b].start < *lo ? prog->blocks[b].start : *lo;
        *hi = prog->blocks[b].end > *hi ? prog->blocks[b].end : *hi;
    }
}

/*
 * Can the procedures FIRST..LAST, which own the blocks of the FDE over [LO, HI) in that
 * order, share one new FDE? Layout puts procedures in index order, each with its blocks
 * (fragments included) in address order, so their code in the FDE is one contiguous run
 * in address order if no other procedure comes between them and none has code on the
 * wrong side of the range: the first none above it, the last none below it, the others
 * none outside it. (glibc's asm puts FDE starts in the padding before a symbol; stripped
 * files have procedures split at interior call targets.)
 */
static int
group_fits(
    const cfg_prog_t *prog, uint32_t first, uint32_t last, uint64_t lo, uint64_t hi)
{
    for (uint32_t pi = first; pi <= last; pi++) {
        if (prog->procs[pi].flags & CFG_PROC_FRAGMENT)
            continue;
        uint64_t plo, phi;
        proc_span(prog, pi, &plo, &phi);
        if (plo == UINT64_MAX)
            return 0; /* no code there: perhaps not an owner at all */
        if ((pi != first && plo < lo) || (pi != last && phi > hi))
            return 0;
    }
    return 1;
}

/* Where insn_boundary_from decoded to: the next call may go on from there. */
typedef struct boundary_cursor {
    const cfg_block_t *bl; /* the block decoded last, or NULL */
    uint64_t a;            /* an instruction of it, reached from its start ... */
    uint32_t k;            /* ... as its K-th */
    size_t from;           /* the last answer of blocks_from_near */
} boundary_cursor_t;

/* The most blocks blocks_from_near steps over before it searches. */
#define NEAR_STEPS 8

/*
 * cfg_blocks_from(PROG, X) (the first of the N blocks BY, in address order, that starts
 * at or above X), found by stepping on from *FROM, its answer for a lower address, when
 * that is near, else by the search; *FROM gets the answer. The FDEs come mostly in
 * address order and their locations in rising order: cc1's 444,000 searches, each a
 * cache miss a step, cost 0.14 G instructions on the main thread.
 */
static size_t
blocks_from_near(const cfg_prog_t *prog, const uint32_t *by, size_t n, uint64_t x,
                 size_t *from)
{
    size_t i = *from;
    if (i <= n && (i == 0 || prog->blocks[by[i - 1]].start < x)) {
        for (unsigned s = 0; s < NEAR_STEPS && i < n && prog->blocks[by[i]].start < x;
             s++)
            i++;
        if (i == n || prog->blocks[by[i]].start >= x)
            return *from = i;
    }
    return *from = cfg_blocks_from(prog, x);
}

/*
 * Is X an instruction boundary of the decoded code: the start of an instruction of the
 * block that starts last below X, when that block reaches over X? (A landing pad is a
 * root of the CFG, so a block starts there whatever; the block before tells whether that
 * cuts an instruction.) An address in no block (the end of a block, bytes not decoded)
 * contradicts nothing. Decoding goes on from *CUR when X is in its block at or after it
 * (an FDE's locations come in rising order: decoding the block from its start for each
 * cost cc1 0.38 G instructions on the main thread).
 */
static int
insn_boundary_from(const cfg_prog_t *prog, uint64_t x, boundary_cursor_t *cur)
{
    size_t n;
    const uint32_t *by = cfg_blocks_by_addr(prog, &n);
    size_t lo = blocks_from_near(prog, by, n, x, &cur->from);
    if (lo == 0 || prog->blocks[by[lo - 1]].end <= x)
        return 1;
    const cfg_block_t *bl = &prog->blocks[by[lo - 1]];
    uint64_t a = bl->start;
    uint32_t k = 0;
    if (cur->bl == bl && cur->a <= x) {
        a = cur->a;
        k = cur->k;
    }
    for (; k < bl->ninsns && a < x; k++) {
        arch_insn_t in;
        if (cfg_image_decode(prog->img, a, bl->end, &in) < 0)
            return 0;
        if (a + in.len <= x) /* (the cursor stays at or before X) */
            *cur = (boundary_cursor_t) { bl, a + in.len, k + 1, cur->from };
        a += in.len;
    }
    return a == x;
}

/* insn_boundary_from without a cursor. */
static int
insn_boundary(const cfg_prog_t *prog, uint64_t x)
{
    boundary_cursor_t cur = { NULL, 0, 0, 0 };
    return insn_boundary_from(prog, x, &cur);
}

/* ARG's (the plan's) landing pads: PAD kept for ed_inplace_create. */
static int
keep_pad(void *arg, uint64_t func, uint64_t pad)
{
    (void)func;
    ed_plan_t *plan = arg;
    QP_CHECK(cfg_vec_grow((void **)&plan->pads, &plan->cappads, plan->npads + 1,
                          sizeof(uint64_t)));
    plan->pads[plan->npads++] = pad;
    return 0;
}

/*
 * The unwind entry of moved code is rewritten from the old one (ed_unwind.c), which
 * works when the FDE's code moves as one contiguous run in address order: then the new
 * FDE covers exactly that run. So the owners of an FDE's code (a cold fragment counts as
 * its parent) stay in place when its tables cannot be rewritten at all or disagree with
 * .eh_frame_hdr (fi->defect), when it covers code of several procedures that layout would
 * not keep together in order, when a location its CFA program or LSDA names (a rule
 * change, a call-site start or end) lies outside it or inside an instruction (the rewrite
 * would move it to another instruction), or when a landing pad its LSDA names is not a
 * block of an owner (only the unwinder goes there, so the CFG must know it). Owners that
 * can share it are recorded as a group: they move together or not at all (settled in
 * settle_groups).
 */
static int
check_fde(void *arg, const ed_fde_info_t *fi)
{
    ed_plan_t *plan = arg;
    const cfg_prog_t *prog = plan->prog;
    if (fi->hi <= fi->lo)
        return 0;
    size_t n;
    const uint32_t *by = cfg_blocks_by_addr(prog, &n);
    /* The first block that starts at or above lo, then back over any that reach it. */
    size_t lo = cfg_blocks_from(prog, fi->lo), from = lo; /* (its locations' start) */
    while (lo > 0 && prog->blocks[by[lo - 1]].end > fi->lo)
        lo--;
    /* Owners in address order: each once, in increasing index order, else no run. */
    uint32_t first = CFG_NONE, last = CFG_NONE;
    int in_order = 1;
    size_t k0 = lo;
    for (size_t k = k0; k < n && prog->blocks[by[k]].start < fi->hi; k++) {
        uint32_t p = prog->blocks[by[k]].proc;
        if (first == CFG_NONE)
            first = p;
        else if (p < last)
            in_order = 0;
        last = p;
    }
    if (first == CFG_NONE)
        return 0; /* none of its code is in a block: nothing there moves */
    /* Tables that cannot be read or do not agree: where the unwinder lands (landing
     * pads) is unknown, so no jump may be patched in there either. */
    for (size_t k = k0; (fi->defect != NULL || fi->err < 0) && k < n
                        && prog->blocks[by[k]].start < fi->hi; k++)
        plan->copied[prog->blocks[by[k]].proc] = EDL_COPIED_UNWIND;
    const char *why = NULL;
    unsigned long long flo = fi->lo, fhi = fi->hi;
    if (fi->defect != NULL)
        why = owned_reason(plan, "its unwind entry (FDE of 0x%llx-0x%llx) %s", flo, fhi,
            fi->defect);
    else if (fi->err < 0)
        why = owned_reason(plan,
            "its unwind entry (FDE of 0x%llx-0x%llx) cannot be "
            "rewritten: %s",
            flo, fhi, qp_strerror(fi->err));
    else if (first != last
        && (!in_order || !group_fits(prog, first, last, fi->lo, fi->hi)))
        why = owned_reason(plan,
            "its unwind entry (FDE of 0x%llx-0x%llx) covers code of "
            "other procedures that is not laid out with it",
            flo, fhi);
    for (size_t i = 0; why == NULL && i < plan->opts.nstay; i++)
        if (plan->opts.stay[i].lo == fi->lo && plan->opts.stay[i].hi == fi->hi)
            why = owned_reason(plan,
                "its unwind entry (FDE of 0x%llx-0x%llx) could not be "
                "rewritten for the new code: %s",
                flo, fhi, qp_strerror(plan->opts.stay[i].err));
    boundary_cursor_t cur = { NULL, 0, 0, from };
    for (size_t i = 0; why == NULL && i < fi->nlocs; i++) {
        static const char *const what[] = { "a CFA rule change", "a call-site start",
            "a call-site end" };
        const ed_code_loc_t *l = &fi->locs[i];
        const char *w = what[l->kind <= ED_LOC_CS_END ? l->kind : 0];
        if (l->addr < fi->lo || l->addr > fi->hi)
            why = owned_reason(plan,
                "its unwind entry (FDE of 0x%llx-0x%llx) puts %s at 0x%llx, outside it",
                flo, fhi, w, (unsigned long long)l->addr);
        else if (!insn_boundary_from(prog, l->addr, &cur))
            why = owned_reason(plan,
                "its unwind entry (FDE of 0x%llx-0x%llx) puts %s at 0x%llx, inside an "
                "instruction",
                flo, fhi, w, (unsigned long long)l->addr);
    }
    for (size_t i = 0; why == NULL && i < fi->npads; i++) {
        uint32_t b = cfg_block_at(prog, fi->pads[i]);
        if (b == CFG_NONE || prog->blocks[b].start != fi->pads[i]
            || prog->blocks[b].proc < first || prog->blocks[b].proc > last)
            why = owned_reason(plan, "exception landing pad 0x%llx not analysed",
                (unsigned long long)fi->pads[i]);
        else if (!insn_boundary(prog, fi->pads[i]))
            why = owned_reason(plan,
                "its unwind entry (FDE of 0x%llx-0x%llx) puts a landing pad at 0x%llx, "
                "inside an instruction",
                flo, fhi, (unsigned long long)fi->pads[i]);
    }
    if (why != NULL) {
        for (size_t k = k0; k < n && prog->blocks[by[k]].start < fi->hi; k++)
            leave(plan, prog->blocks[by[k]].proc, why);
        return 0;
    }
    if (first != last) {
        uint64_t *v = plan->groups;
        if (plan->ngroups + 2 > plan->capgroups) {
            size_t cap = plan->capgroups ? plan->capgroups * 2 : 16;
            if ((v = realloc(plan->groups, cap * sizeof(uint64_t))) == NULL)
                return QP_ENOMEM;
            plan->groups = v;
            plan->capgroups = cap;
        }
        v[plan->ngroups++] = first;
        v[plan->ngroups++] = last;
    }
    return 0;
}

/* Procedures that share an FDE move together: one that stays keeps the others. */
static void
settle_groups(ed_plan_t *plan)
{
    const cfg_prog_t *prog = plan->prog;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t g = 0; g + 1 < plan->ngroups; g += 2) {
            uint32_t first = (uint32_t)plan->groups[g],
                     last = (uint32_t)plan->groups[g + 1];
            uint32_t stays = CFG_NONE;
            for (uint32_t pi = first; pi <= last && stays == CFG_NONE; pi++)
                if (!(prog->procs[pi].flags & CFG_PROC_FRAGMENT)
                    && plan->reason[pi] != NULL)
                    stays = pi;
            if (stays == CFG_NONE)
                continue;
            for (uint32_t pi = first; pi <= last; pi++) {
                if ((prog->procs[pi].flags & CFG_PROC_FRAGMENT)
                    || plan->reason[pi] != NULL)
                    continue;
                plan->reason[pi] = owned_reason(plan,
                    "shares its unwind entry with %s, "
                    "which stays in place",
                    prog->procs[stays].name);
                changed = 1;
            }
        }
    }
}

/* Where code may enter a procedure in its interior (cfg_interior_entries), sorted. */
static int
collect_jump_targets(ed_plan_t *plan)
{
    return cfg_interior_entries(plan->prog, &plan->xt, &plan->nxt);
}

/* Testing aid: is NAME one of the procedures the caller asked to leave in place
 * (ed_opts_t.leave, from QPT_LEAVE in qpt-rewrite)? */
static int
cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int
leave_by_request(const ed_plan_t *plan, const char *name)
{
    return plan->nleave > 0
        && bsearch(&name, plan->leave, plan->nleave, sizeof(char *), cmp_name) != NULL;
}

/* Sort the names of opts.leave (a bisection may name hundreds of thousands). */
int
edl_sort_leave(ed_plan_t *plan)
{
    if (plan->opts.nleave == 0)
        return 0;
    plan->leave = malloc(plan->opts.nleave * sizeof(char *));
    if (plan->leave == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < plan->opts.nleave; i++)
        if (plan->opts.leave[i] != NULL)
            plan->leave[plan->nleave++] = plan->opts.leave[i];
    qsort(plan->leave, plan->nleave, sizeof(char *), cmp_name);
    return 0;
}

/*
 * cfg_held_select: a pointer the loader relocates in a word of data (a vtable's slot, a
 * table of callbacks), not an address that code forms with a lea. A word of .got counts
 * as well: the address of a function taken through the GOT (chromium 156: the 853
 * procedures only .got words hold all start on a 16-byte boundary, 694 setting up a
 * frame).
 */
static int
held_in_data(const cfg_prog_t *prog, const cfg_held_t *h)
{
    if (h->src != CFG_HELD_RELOC)
        return 0;
    const cfg_reloc_t *r = cfg_image_reloc_at(prog->img, h->at);
    const cfg_section_t *s = cfg_image_section_at(prog->img, h->at);
    return r != NULL && (r->kind == CFG_RELOC_RELATIVE || r->kind == CFG_RELOC_ABS64)
        && s != NULL && !(s->flags & CFG_SEC_CODE);
}

/* The index of the procedure (not a fragment) whose entry is ADDR, or CFG_NONE. */
static uint32_t
proc_entered_at(const cfg_prog_t *prog, uint64_t addr)
{
    const cfg_proc_t *t = cfg_proc_entered_at(prog, addr);
    return t != NULL ? (uint32_t)(t - prog->procs) : CFG_NONE;
}

/*
 * Does procedure I start like a function and call or jump directly to the entries of two
 * distinct procedures vouched for in V (itself aside)? Bytes of data that decode as code
 * hit a procedure's exact entry with a call's 32-bit displacement now and then; twice,
 * with two different entries, is past chance. That proves code, not an entry: a piece of
 * a function whose start is unknown, cut off where a jump lands (chromium's GPU process
 * crashed when such pieces moved), is not one; an address held or unreached code on a
 * 16-byte boundary, not a jump's target, is taken for one.
 */
static int
calls_vouched(const cfg_prog_t *prog, const uint8_t *v, uint32_t i)
{
    const cfg_proc_t *p = &prog->procs[i];
    uint32_t first = CFG_NONE;
    if ((p->sources & CFG_SRC_TAILCALL) || !(p->sources & (CFG_SRC_ADDR | CFG_SRC_GAP))
        || p->entry % 16 != 0)
        return 0;
    for (uint32_t b = p->block; b < p->block + p->nblocks; b++) {
        const cfg_block_t *bl = &prog->blocks[b];
        for (uint32_t e = 0; e <= bl->nsucc; e++) {
            uint64_t to = bl->call_target;
            if (e < bl->nsucc) {
                const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
                if (ed->kind != CFG_EDGE_TAILCALL)
                    continue;
                to = ed->target;
            }
            uint32_t t = proc_entered_at(prog, to);
            if (t == CFG_NONE || t == i || !v[t] || t == first)
                continue;
            if (first != CFG_NONE)
                return 1;
            first = t;
        }
    }
    return 0;
}

/* Vouch for what the procedures in WORK[0..N) jump to (tail calls), and on (V). */
static void
vouch_tail_calls(const cfg_prog_t *prog, uint8_t *v, uint32_t *work, size_t n)
{
    while (n > 0) {
        const cfg_proc_t *p = &prog->procs[work[--n]];
        for (uint32_t b = p->block; b < p->block + p->nblocks; b++)
            for (uint32_t e = 0; e < prog->blocks[b].nsucc; e++) {
                const cfg_edge_t *ed = cfg_block_succ(prog, &prog->blocks[b], e);
                uint32_t t = ed->kind == CFG_EDGE_TAILCALL ? proc_entered_at(prog, ed->target)
                                                           : CFG_NONE;
                if (t == CFG_NONE || v[t])
                    continue;
                v[t] = 1;
                work[n++] = t;
            }
    }
}

/*
 * Bytes that decode but that nothing vouches for may be data in .text (a string behind
 * a lea, as in BoringSSL's FIPS module): the entry redirect would overwrite them. A
 * procedure is vouched for by a symbol, an FDE, a direct call, the ELF entry or
 * init/fini tables, a pointer to its entry in a relocated word of data (a vtable's
 * slot: data in .text is reached by lea), a tail call from a procedure vouched for, or
 * direct calls and jumps of its own to two procedures vouched for (code that C++
 * reaches through vtables and callbacks, in a stripped file with no unwind tables),
 * or a start as a compiled function's (cfg_proc_starts_like_function); a lea's address
 * or unreached bytes that decode are not enough.
 */
uint8_t *
edl_vouched_procs(const cfg_prog_t *prog)
{
    const uint32_t weak = CFG_SRC_GAP | CFG_SRC_ADDR | CFG_SRC_TAILCALL;
    uint8_t *v = calloc(prog->nprocs + 1, 1);
    uint32_t *work = malloc((prog->nprocs + 1) * sizeof(uint32_t));
    size_t n = 0, nheld = 0;
    uint64_t *held = NULL;
    if (v == NULL || work == NULL || cfg_held_select(prog, held_in_data, &held, &nheld) < 0) {
        free(v);
        free(work);
        free(held);
        return NULL;
    }
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        size_t k = qp_lower_bound_u64(held, nheld, sizeof(uint64_t), 0, p->entry);
        if ((p->sources & ~weak) || (p->flags & CFG_PROC_FRAGMENT)
            || (k < nheld && held[k] == p->entry) || cfg_proc_starts_like_function(prog, p)) {
            v[i] = 1;
            work[n++] = i;
        }
    }
    free(held);
    /* Callers of vouched code vouch for their own tail calls, and so on to a fixpoint. */
    while (n > 0) {
        vouch_tail_calls(prog, v, work, n);
        n = 0;
        for (uint32_t i = 0; i < prog->nprocs; i++)
            if (!v[i] && calls_vouched(prog, v, i))
                work[n++] = i;
        for (size_t k = 0; k < n; k++)
            v[work[k]] = 1;
    }
    free(work);
    return v;
}

/* Do the bytes just before ADDR hold trap padding (two ud2, or four int3)? */
static int
trap_padding_before(const cfg_image_t *img, uint64_t addr)
{
    size_t avail;
    const uint8_t *p = addr >= 4 ? cfg_image_ptr(img, addr - 4, &avail) : NULL;
    if (p == NULL || avail < 4)
        return 0;
    static const uint8_t ud2x2[] = { 0x0f, 0x0b, 0x0f, 0x0b }, int3x4[] = { 0xcc, 0xcc, 0xcc, 0xcc };
    return memcmp(p, ud2x2, 4) == 0 || memcmp(p, int3x4, 4) == 0;
}

/*
 * Code the program uses as data. A code address the program takes that points at a trap
 * (ud2, int3) rather than at code ends a range whose bounds the program holds; the range
 * starts after the trap padding before it. Valgrind's tools hand the page of such a range
 * (their "trampoline stuff") to the program they run, whose translation of it must find
 * the original instructions, not a redirect. Every procedure in the range stays.
 */
static void
leave_code_ranges(ed_plan_t *plan)
{
    const cfg_prog_t *prog = plan->prog;
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        arch_insn_t in;
        if (!(p->sources & CFG_SRC_ADDR) || cfg_image_decode(prog->img, p->entry, 0, &in) < 0
            || in.kind != ARCH_KIND_HALT)
            continue;
        uint32_t first = i;
        int found = 0;
        for (uint32_t j = i; j-- > 0 && i - j <= 256 && p->entry - prog->procs[j].entry <= 65536;) {
            first = j;
            if (trap_padding_before(prog->img, prog->procs[j].entry)) {
                found = 1;
                break;
            }
        }
        for (uint32_t k = first; found && k < i; k++)
            plan->copied[k] = EDL_COPIED_RANGE;
        for (uint32_t k = first; found && k < i; k++)
            if (plan->reason[k] == NULL)
                plan->reason[k] = owned_reason(plan, "in a range of code that ends at a taken "
                                                     "address (0x%llx): the program may copy "
                                                     "or hand out that code",
                                               (unsigned long long)p->entry);
    }
}

/*
 * V8's embedded builtins (ed_v8_builtins): V8 finds them by offset from the start of
 * their block and recognises their pcs by its bounds; every procedure in it stays, and
 * stays unmeasured: V8 may run a copy of the block (EDL_COPIED_V8, see ed_v8.c).
 */
static void
leave_v8_builtins(ed_plan_t *plan)
{
    const cfg_prog_t *prog = plan->prog;
    uint64_t lo, hi;
    if (ed_v8_builtins(prog->img, &lo, &hi) != 1)
        return;
    const char *why = NULL;
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        if (p->entry >= lo && p->entry < hi)
            plan->copied[i] = EDL_COPIED_V8; /* (short builtin calls) */
        if (p->entry < lo || p->entry >= hi || (p->flags & CFG_PROC_FRAGMENT)
            || plan->reason[i] != NULL)
            continue;
        if (why == NULL)
            why = owned_reason(plan, "one of V8's embedded builtins [0x%llx, 0x%llx): V8 "
                                     "finds them by their offsets in that block",
                               (unsigned long long)lo, (unsigned long long)hi);
        plan->reason[i] = why;
    }
}

/*
 * Why each procedure left in place cannot be patched there either (plan->unfit): code
 * that may be data, code whose CFG may miss where control enters (an unsafe procedure, an
 * indirect jump of unknown targets), PLT stubs, and bytes shared with moved code.
 */
const char edl_unfit_a64[] = "patching in place is x86-64 only so far";

int
edl_decide_unfit(ed_plan_t *plan, const uint8_t *vouched)
{
    const cfg_prog_t *prog = plan->prog;
    plan->unfit = calloc(prog->nprocs + 1, sizeof(char *));
    if (plan->unfit == NULL)
        return QP_ENOMEM;
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        const char **u = &plan->unfit[i];
        if (plan->reason[i] == NULL)
            continue;
        if (p->flags & CFG_PROC_FRAGMENT)
            *u = "a fragment: measured with its parent or not at all";
        else if (plan->copied[i] == EDL_COPIED_RANGE)
            *u = "the program may copy its code (a code range it hands out)";
        else if (plan->copied[i] == EDL_COPIED_V8) /* ed_v8.c: node 20 runs a copy */
            *u = "one of V8's embedded builtins: V8 may run a copy of them, remapped near "
                 "its JIT code, where a jump to a trampoline would land elsewhere";
        else if (plan->copied[i] == EDL_COPIED_UNWIND)
            *u = "its unwind tables cannot be read or disagree (where the unwinder lands "
                 "is unknown)";
        else if (p->unsafe != NULL)
            *u = p->unsafe;
        else if (p->flags & CFG_PROC_PLT)
            *u = "PLT stub";
        else if (!vouched[i])
            *u = "may be data";
        else if (p->nblocks == 0 || prog->blocks[p->block].start != p->entry)
            *u = "no code decoded at its entry";
        else if (plan->isa != arch_isa_host()) /* TODO(#34): patch/pt_inplace.c on AArch64 */
            *u = edl_unfit_a64;
        for (uint32_t b = p->block; *u == NULL && b < p->block + p->nblocks; b++) {
            const cfg_block_t *bl = &prog->blocks[b];
            if (edl_block_unresolved(prog, bl))
                *u = "an indirect jump of unknown targets (control may enter anywhere)";
            for (uint64_t a = bl->start; *u == NULL && a < bl->end; a++)
                if (edl_seg_at(plan, a, NULL) != NULL)
                    *u = "its bytes are shared with moved code";
        }
    }
    return 0;
}

int
edl_decide(ed_plan_t *plan, uint8_t **vouched_out)
{
    *vouched_out = NULL;
    const cfg_prog_t *prog = plan->prog;
    QP_CHECK(collect_jump_targets(plan));
    plan->copied = calloc(prog->nprocs + 1, 1);
    if (plan->copied == NULL)
        return QP_ENOMEM;
    uint64_t *mid;
    size_t nmid;
    QP_CHECK(edl_held_mid_block(prog, &mid, &nmid));
    uint8_t *vouched = edl_vouched_procs(prog);
    edl_pads_t all;
    int arc = vouched != NULL ? edl_pads_all(plan, &all) : QP_ENOMEM;
    if (arc < 0) {
        free(vouched);
        free(mid);
        return arc;
    }
    leave_v8_builtins(plan);
    for (uint32_t i = 0; plan->opts.all_in_place != NULL && i < prog->nprocs; i++)
        if (!(prog->procs[i].flags & CFG_PROC_FRAGMENT))
            plan->reason[i] = plan->opts.all_in_place;
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        const char **r = &plan->reason[i];
        if ((p->flags & CFG_PROC_FRAGMENT) || *r != NULL)
            continue; /* a fragment is decided with its parent below */
        if (p->unsafe != NULL) {
            *r = p->unsafe;
            continue;
        }
        if (p->flags & CFG_PROC_PLT) {
            *r = "PLT stub";
            continue;
        }
        if (!vouched[i]) {
            *r = "found only as unreached bytes, a taken address or a jump target: may be data";
            continue;
        }
        if (leave_by_request(plan, p->name)) {
            *r = "named in QPT_LEAVE";
            continue;
        }
        if (p->nblocks == 0 || prog->blocks[p->block].start != p->entry) {
            *r = "no code decoded at its entry";
            continue;
        }
        uint64_t unresolved = 0;
        int xlated = 0; /* a jump translated at run time: a miss runs the old code */
        for (uint32_t b = p->block; b < p->block + p->nblocks && !unresolved; b++)
            if (edl_block_unresolved(prog, &prog->blocks[b])) {
                if (!translatable(prog, &prog->blocks[b]))
                    unresolved = prog->blocks[b].end;
                xlated = 1;
            }
        if (unresolved) {
            *r = owned_reason(plan, "indirect jump with unknown targets before 0x%llx",
                (unsigned long long)unresolved);
            continue;
        }
        uint64_t *pads = all.v + all.off[i]; /* (its own: dropped ones are moved out) */
        size_t npads = all.off[i + 1] - all.off[i];
        /* A redirect that does not fit: drop the next one, or this one, when only direct
         * branches reach it (settle_unpadded checks that they all move). */
        for (size_t k = 0; k < npads && *r == NULL;) {
            uint64_t room = k + 1 < npads ? pads[k + 1] : extent_end(prog, i, pads[k]);
            uint64_t lim = extent_end(prog, i, pads[k]);
            if (room > lim)
                room = lim;
            if (room == lim && room < pads[k] + PAD_LEN(plan)) /* short last piece: padding after? */
                room = padding_end(prog, lim);
            if (room >= pads[k] + PAD_LEN(plan)) {
                k++;
                continue;
            }
            size_t drop = k + 1 < npads && pads[k + 1] < lim && pad_optional(plan, i, pads[k + 1])
                ? k + 1
                : pad_optional(plan, i, pads[k]) ? k : npads;
            if (drop == npads || push_dropped(plan, pads[drop], i) < 0) {
                *r = owned_reason(plan, "no room for a redirect jump at 0x%llx",
                    (unsigned long long)pads[k]);
                break;
            }
            memmove(pads + drop, pads + drop + 1, (npads - drop - 1) * sizeof(uint64_t));
            npads--;
        }
        int held = 0;
        uint64_t covered = *r == NULL
            ? landing_under_pad(plan, i, pads, npads, xlated, mid, nmid, &held) : 0;
        if (covered != 0 && held)
            *r = owned_reason(plan,
                "a redirect would cover 0x%llx, an address the program holds, where the "
                "old code runs",
                (unsigned long long)covered);
        else if (covered != 0)
            *r = owned_reason(plan,
                "a redirect would cover the block at 0x%llx, where a jump translated at "
                "run time may land in the old code",
                (unsigned long long)covered);
    }
    edl_pads_free(&all);
    *vouched_out = vouched; /* (the unfit reasons read it too) */
    free(mid);
    leave_code_ranges(plan);
    /* Moved code must get an unwind entry that says what the old one said. */
    int rc = ed_unwind_fdes_pads(prog->img, check_fde, plan, keep_pad, plan,
        &plan->pads_rc);
    if (rc == QP_ENOMEM)
        return rc;
    do {
        settle_groups(plan);
        for (uint32_t i = 0; i < prog->nprocs; i++) {
            const cfg_proc_t *p = &prog->procs[i];
            if ((p->flags & CFG_PROC_FRAGMENT) && p->parent != CFG_NONE)
                plan->reason[i] = plan->reason[p->parent] ? "its parent stays in place" : NULL;
            else if (p->flags & CFG_PROC_FRAGMENT)
                plan->reason[i] = "cold fragment without parent";
        }
    } while (settle_unpadded(plan));
    return 0;
}
