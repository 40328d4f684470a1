/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Procedure discovery: where procedures start, what they are called, and how far each
 * may extend. Sources, strongest first: function symbols, PLT entries, .eh_frame FDEs,
 * the entry point, init/fini arrays, IFUNC resolvers, code addresses held in relocated
 * data. Call targets and gap code are added later by cfg_build.c (seed 3.6).
 */
#include <stddef.h>
#include <stdio.h>

#include "cfg/cfg_priv.h"

/*****************************************************************************
 * Procedures that never return, by name
 */

static const char *const noreturn_names[] = {
    "exit", "_exit", "_Exit", "abort", "quick_exit", "__stack_chk_fail",
    "__stack_chk_fail_local", "__assert_fail", "__assert_perror_fail", "__assert_rtn",
    "longjmp", "_longjmp", "siglongjmp", "__longjmp_chk", "__libc_longjmp",
    "__libc_siglongjmp", "__cxa_throw", "__cxa_rethrow", "__cxa_bad_cast",
    "__cxa_bad_typeid", "__cxa_throw_bad_array_new_length", "__cxa_call_unexpected",
    "__cxa_pure_virtual", "__cxa_deleted_virtual", "_Unwind_Resume", "_ZSt9terminatev",
    "__fortify_fail", "__chk_fail", "err", "errx", "verr", "verrx", "pthread_exit",
    "__pthread_exit", "__libc_fatal", "__libc_start_main", "__libc_start_call_main",
    "__libc_message", "__malloc_assert", "_dl_signal_error", "_dl_fatal_printf",
    "_gfortran_stop_string", "_gfortran_error_stop_string", "_gfortran_error_stop_numeric",
    "_gfortran_runtime_error", "_gfortran_runtime_error_at", "_gfortran_os_error",
    "_gfortran_os_error_at", "_gfortran_generate_error", "__ubsan_handle_builtin_unreachable",
    "__ubsan_handle_missing_return", "_ZSt17rethrow_exceptionNSt15__exception_ptr13exception_ptrE",
    "__cxa_end_cleanup", "_exit_group", "exit_group", "__gnat_raise_exception",
    "__gnat_rcheck_CE_Explicit_Raise", "g_assertion_message_expr", "g_error",
    "runtime.gopanic", /* Go: a recovered panic resumes the frame that deferred the
                        * recovery, at its deferreturn call, not the caller */
};

int
cfg_name_is_noreturn(const char *name)
{
    char buf[256];
    if (name == NULL)
        return 0;
    size_t n = strcspn(name, "@");
    if (n >= sizeof(buf))
        return 0;
    memcpy(buf, name, n);
    buf[n] = '\0';
    /* libstdc++'s std::__throw_* helpers: _ZSt<len>__throw_... */
    if (strncmp(buf, "_ZSt", 4) == 0 && strstr(buf, "__throw_") != NULL)
        return 1;
    /* (The first byte first: each new procedure's name is looked up.) */
    for (size_t i = 0; i < sizeof(noreturn_names) / sizeof(noreturn_names[0]); i++)
        if (noreturn_names[i][0] == buf[0] && strcmp(buf, noreturn_names[i]) == 0)
            return 1;
    return 0;
}

/*
 * Go's runtime procedures that a goroutine leaves through the scheduler and comes back
 * from at their return address: they save it in the goroutine's g.sched, and gogo
 * resumes there once the stack was grown (morestack, called by every prologue that
 * finds the stack short or a preemption requested) or the goroutine runs again (mcall:
 * Gosched, gopark, asynchronous preemption). No return is in their code, yet their
 * calls return: taken for calls that never do, the code after them (the prologue's
 * jump back to the entry) would be left out and flow would count that re-entry as a
 * call. (Dots cannot be in a C name: no other language's procedure has these names.)
 */
static const char *const resumed_names[] = {
    "runtime.mcall", "runtime.morestack", "runtime.morestack_noctxt",
};

int
cfg_name_is_resumed(const char *name)
{
    if (name == NULL)
        return 0;
    size_t n = strlen(name);
    if (n > 5 && strcmp(name + n - 5, ".abi0") == 0)
        n -= 5; /* the assembly (ABI0) body's symbol */
    for (size_t i = 0; i < sizeof(resumed_names) / sizeof(resumed_names[0]); i++)
        if (strlen(resumed_names[i]) == n && strncmp(name, resumed_names[i], n) == 0)
            return 1;
    return 0;
}

/*****************************************************************************
 * Candidates
 */

typedef struct cand {
    uint64_t addr;      /* entry */
    uint64_t hint_end;  /* end from symbol size or FDE */
    uint32_t sources;   /* CFG_SRC_* */
} cand_t;

typedef CFG_VEC(cand_t) cand_vec_t;

static int
add_cand(cand_vec_t *v, const cfg_image_t *img, uint64_t addr, uint64_t hint_end, uint32_t src)
{
    if (!cfg_image_is_code(img, addr))
        return 0;
    return CFG_VEC_PUSH(*v, ((cand_t) { addr, hint_end > addr ? hint_end : 0, src }));
}

static int
cmp_cand(const void *a, const void *b)
{
    const cand_t *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

typedef struct fde_ctx {
    cand_vec_t *v;
    const cfg_image_t *img;
    cfg_builder_t *b;
    const uint64_t *hdr; /* .eh_frame_hdr's table: (FDE, start) pairs by FDE, or NULL */
    size_t nhdr;
} fde_ctx_t;

static int
on_landing_pad(void *arg, uint64_t lp)
{
    cfg_builder_t *b = arg;
    return CFG_VEC_PUSH(b->landing_pads, lp);
}

static int
on_fde(void *arg, const cfg_fde_t *fde)
{
    fde_ctx_t *c = arg;
    /*
     * The unwinder takes the start from .eh_frame_hdr's table, when it has one: an FDE
     * that says otherwise names no procedure start and no landing pad for sure (the
     * editor leaves its code in place, ed_unwind.c).
     */
    size_t lo = 0, hi = c->nhdr;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->hdr[2 * mid] < fde->addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < c->nhdr && c->hdr[2 * lo] == fde->addr && c->hdr[2 * lo + 1] != fde->start)
        return 0;
    if (fde->lsda) {
        /* Landing pads are entered by the unwinder: roots of the CFG traversal. */
        size_t avail;
        const uint8_t *p = cfg_image_ptr(c->img, fde->lsda, &avail);
        if (p != NULL && cfg_lsda_walk(p, avail, fde->lsda, fde->start, on_landing_pad, c->b)
                == QP_ENOMEM)
            return QP_ENOMEM;
    }
    uint64_t start = fde->signal ? fde->start + 1 : fde->start;
    return add_cand(c->v, c->img, start, fde->end, CFG_SRC_EH_FRAME);
}

/* Is NAME "<parent>.cold" or "<parent>.cold.N"? Returns the parent's length or 0. */
static size_t
cold_parent_len(const char *name)
{
    const char *c = strstr(name, ".cold");
    if (c == NULL || c == name)
        return 0;
    const char *t = c + 5;
    if (*t == '.')
        for (t++; *t >= '0' && *t <= '9'; t++)
            ;
    return *t == '\0' ? (size_t)(c - name) : 0;
}

/* The GOT slot the x86-64 PLT stub at P jumps through, or 0. */
static uint64_t
plt_slot(const cfg_image_t *img, uint64_t p)
{
    size_t avail;
    const uint8_t *c = cfg_image_ptr(img, p, &avail);
    uint64_t slot;
    return c != NULL && arch_plt_slot(c, avail, p, &slot) > 0 ? slot : 0;
}

static int
cmp_plt_held(const void *a, const void *b)
{
    const cfg_plt_held_t *x = a, *y = b;
    if (x->held != y->held)
        return x->held < y->held ? -1 : 1;
    return x->sym < y->sym ? -1 : x->sym > y->sym;
}

/* B->plt_held: the word each PLT symbol's GOT slot holds, by word, then symbol. */
static int
collect_plt_held(cfg_builder_t *b)
{
    b->plt_held_done = 1;
    for (size_t i = 0; i < b->img->nsymbols; i++) {
        const cfg_symbol_t *s = &b->img->symbols[i];
        uint64_t slot;
        size_t avail;
        const uint8_t *w;
        if (s->src != CFG_SYMSRC_PLT || (slot = plt_slot(b->img, s->addr)) == 0
            || (w = cfg_image_ptr(b->img, slot, &avail)) == NULL || avail < 8)
            continue;
        uint64_t held = 0;
        for (int k = 7; k >= 0; k--)
            held = held << 8 | w[k];
        QP_CHECK(CFG_VEC_PUSH(b->plt_held, ((cfg_plt_held_t) { held, (uint32_t)i })));
    }
    if (b->plt_held.n > 1)
        qsort(b->plt_held.v, b->plt_held.n, sizeof(cfg_plt_held_t), cmp_plt_held);
    return 0;
}

/*
 * A name for code in a .plt section without a symbol: the lazy-binding half of a PLT
 * entry (push N; jmp PLT0 - where the entry's GOT slot points until the symbol is bound)
 * is "NAME@plt.lazy" after the first stub (in symbol order) whose slot holds its address;
 * the first entry, which calls the dynamic linker's resolver, is ".plt". *NAME is NULL
 * when neither. Returns 0 or QP_ENOMEM. The slots' words are read once (B->plt_held):
 * hundreds of lazy halves each looked through every symbol.
 */
static int
plt_name(cfg_builder_t *b, uint64_t addr, char *buf, size_t cap, const char **name /*OUT*/)
{
    *name = NULL;
    const cfg_section_t *sec = cfg_image_section_at(b->img, addr);
    if (sec == NULL || strcmp(sec->name, ".plt") != 0)
        return 0;
    if (addr == sec->vma) {
        *name = ".plt";
        return 0;
    }
    if (!b->plt_held_done) {
        int rc = collect_plt_held(b);
        if (rc < 0) {
            b->plt_held_done = 0;
            CFG_VEC_FREE(b->plt_held);
            return rc;
        }
    }
    size_t lo = qp_lower_bound_u64(b->plt_held.v, b->plt_held.n, sizeof(*b->plt_held.v),
                                   offsetof(cfg_plt_held_t, held), addr);
    if (lo < b->plt_held.n && b->plt_held.v[lo].held == addr) {
        snprintf(buf, cap, "%s.lazy", b->img->symbols[b->plt_held.v[lo].sym].name);
        *name = buf;
    }
    return 0;
}

static const char *
make_name(cfg_builder_t *b, uint64_t addr)
{
    const cfg_symbol_t *s = cfg_image_symbol_at(b->img, addr);
    if (s != NULL)
        return s->name;
    char buf[256];
    const char *name;
    if (plt_name(b, addr, buf, sizeof(buf), &name) < 0)
        return NULL;
    if (name == NULL) {
        snprintf(buf, sizeof(buf), "sub_%llx", (unsigned long long)addr);
        name = buf;
    }
    char *d = cfg_strdup(name);
    if (d == NULL || CFG_VEC_PUSH(b->strings, d) < 0) {
        free(d);
        return NULL;
    }
    return d;
}

/* A new procedure at ADDR in *BP (not yet in any array). */
static int
init_proc(cfg_builder_t *b, uint64_t addr, uint64_t hint_end, uint32_t sources, cfg_bproc_t *bp_out)
{
    cfg_bproc_t bp;
    memset(&bp, 0, sizeof(bp));
    bp.p.entry = bp.p.start = addr;
    bp.p.sources = sources;
    bp.p.parent = CFG_NONE;
    bp.hint_end = hint_end;
    bp.p.name = make_name(b, addr);
    if (bp.p.name == NULL)
        return QP_ENOMEM;
    /* Also the unnamed halves of lazy-binding PLT entries (push n; jmp .plt). */
    const cfg_section_t *sec = cfg_image_section_at(b->img, addr);
    if ((sources & CFG_SRC_PLT) || (sec != NULL && strncmp(sec->name, ".plt", 4) == 0))
        bp.p.flags |= CFG_PROC_PLT;
    if (cfg_name_is_noreturn(bp.p.name)) {
        bp.p.flags |= CFG_PROC_NORETURN;
        bp.name_noreturn = 1;
    }
    if (cfg_name_is_resumed(bp.p.name))
        bp.p.flags |= CFG_PROC_RESUMED;
    *bp_out = bp;
    if (CFG_VEC_PUSH(b->unbuilt, addr) < 0) /* not built yet */
        b->unbuilt_lost = 1;
    return 0;
}

void
cfg_mark_unbuilt(cfg_builder_t *b, cfg_bproc_t *bp)
{
    bp->built = 0;
    if (CFG_VEC_PUSH(b->unbuilt, bp->p.entry) < 0)
        b->unbuilt_lost = 1;
}

void
cfg_mark_nr_dirty(cfg_builder_t *b, cfg_bproc_t *bp)
{
    bp->nr_dirty = 1;
    if (CFG_VEC_PUSH(b->nr_dirty, bp->p.entry) < 0)
        b->nr_dirty_lost = 1;
}

int
cfg_list_fragments(cfg_builder_t *b)
{
    b->frags.n = 0;
    for (size_t i = 0; i < b->procs.n; i++)
        if (cfg_bproc_walk_head(b, i)->p.flags & CFG_PROC_FRAGMENT)
            QP_CHECK(CFG_VEC_PUSH(b->frags, cfg_bproc_at(b, i)->p.entry));
    return 0;
}

void
cfg_bproc_free(cfg_bproc_t *bp)
{
    CFG_VEC_FREE(bp->ranges);
    CFG_VEC_FREE(bp->blocks);
    CFG_VEC_FREE(bp->edges);
    CFG_VEC_FREE(bp->tables);
    CFG_VEC_FREE(bp->extra_entries);
    CFG_VEC_FREE(bp->covered);
    CFG_VEC_FREE(bp->noret_sites);
}

/*****************************************************************************
 * The pool of procedures, and their order by entry
 */

int
cfg_bpool_add(cfg_builder_t *b, const cfg_bproc_t *bp, uint32_t *id)
{
    cfg_bpool_t *pl = &b->pool;
    const size_t per = (size_t)1 << CFG_POOL_SHIFT;
    if (pl->n == UINT32_MAX)
        return QP_ENOMEM; /* (CFG_NONE is no id) */
    if ((pl->n >> CFG_POOL_SHIFT) == pl->nchunk) {
        QP_CHECK(cfg_vec_grow((void **)&pl->chunk, &pl->cap, pl->nchunk + 1,
                              sizeof(*pl->chunk)));
        /* Each chunk is mapped as it is needed and never moves: no copy of the
         * procedures made so far, nor their pages faulted in again. */
        pl->chunk[pl->nchunk] = malloc(per * sizeof(cfg_bproc_t));
        if (pl->chunk[pl->nchunk] == NULL)
            return QP_ENOMEM;
        pl->nchunk++;
    }
    *id = pl->n++;
    *cfg_bproc_id(b, *id) = *bp;
    return 0;
}

int
cfg_procs_insert(cfg_builder_t *b, size_t at, const cfg_bproc_t *bp)
{
    uint32_t id;
    QP_CHECK(CFG_VEC_GROW(b->procs));
    QP_CHECK(CFG_VEC_GROW(b->entry));
    QP_CHECK(cfg_bpool_add(b, bp, &id));
    memmove(b->procs.v + at + 1, b->procs.v + at, (b->procs.n - at) * sizeof(uint32_t));
    memmove(b->entry.v + at + 1, b->entry.v + at, (b->entry.n - at) * sizeof(uint64_t));
    b->procs.v[at] = id;
    b->entry.v[at] = bp->p.entry;
    cfg_spans_dirty(b, bp);
    b->procs.n++;
    b->entry.n++;
    b->procs_ver++;
    return 0;
}

void
cfg_bpool_free(cfg_builder_t *b)
{
    cfg_bpool_t *pl = &b->pool;
    /* Dropped procedures' slots were freed already: freeing them again frees nothing. */
    for (uint32_t id = 0; id < pl->n; id++)
        cfg_bproc_free(cfg_bproc_id(b, id));
    for (size_t c = 0; c < pl->nchunk; c++)
        free(pl->chunk[c]);
    free(pl->chunk);
    memset(pl, 0, sizeof(*pl));
    CFG_VEC_FREE(b->procs);
    CFG_VEC_FREE(b->entry);
}

static int
new_proc(cfg_builder_t *b, uint64_t addr, uint64_t hint_end, uint32_t sources)
{
    cfg_bproc_t bp;
    QP_CHECK(init_proc(b, addr, hint_end, sources, &bp));
    return cfg_procs_insert(b, b->procs.n, &bp);
}

/*****************************************************************************
 * Procedures kept aside during a gap sweep
 */

/* Entries are added to a small sorted buffer, merged into the main sorted array when
 * full: a few hundred moved per addition instead of the whole array. */
#define SIDE_BUF 256

typedef struct cfg_side {
    CFG_VEC(uint32_t) procs;      /* their ids in the pool, in the order found */
    uint64_t *keys;               /* entries of most of them, sorted */
    uint32_t *idx;                /* index in procs of each key */
    size_t n, cap;                /* keys held; allocated */
    uint64_t bkeys[SIDE_BUF];     /* entries of the last few, sorted */
    uint32_t bidx[SIDE_BUF];      /* their indices in procs */
    size_t nb;                    /* how many in the buffer */
} cfg_side_t;

/* Merge the buffer into the main array. */
static int
side_flush(cfg_side_t *s)
{
    if (s->nb == 0)
        return 0;
    if (s->n + s->nb > s->cap) {
        size_t cap = 2 * (s->n + s->nb);
        uint64_t *k = realloc(s->keys, cap * sizeof(uint64_t));
        if (k == NULL)
            return QP_ENOMEM;
        s->keys = k;
        uint32_t *x = realloc(s->idx, cap * sizeof(uint32_t));
        if (x == NULL)
            return QP_ENOMEM;
        s->idx = x;
        s->cap = cap;
    }
    size_t i = s->n, k = s->nb, o = s->n + s->nb;
    while (k > 0) {
        if (i > 0 && s->keys[i - 1] > s->bkeys[k - 1]) {
            o--, i--;
            s->keys[o] = s->keys[i];
            s->idx[o] = s->idx[i];
        } else {
            o--, k--;
            s->keys[o] = s->bkeys[k];
            s->idx[o] = s->bidx[k];
        }
    }
    s->n += s->nb;
    s->nb = 0;
    return 0;
}

static int
side_insert(cfg_side_t *s, uint64_t key, uint32_t idx)
{
    if (s->nb == SIDE_BUF)
        QP_CHECK(side_flush(s));
    size_t at = cfg_u64_lower_bound(s->bkeys, s->nb, key);
    memmove(s->bkeys + at + 1, s->bkeys + at, (s->nb - at) * sizeof(uint64_t));
    memmove(s->bidx + at + 1, s->bidx + at, (s->nb - at) * sizeof(uint32_t));
    s->bkeys[at] = key;
    s->bidx[at] = idx;
    s->nb++;
    return 0;
}

/* The greatest entry <= ADDR kept aside: 1 and its index in *IDX, or 0. */
static int
side_pred(const cfg_side_t *s, uint64_t addr, uint64_t *key, uint32_t *idx)
{
    int found = 0;
    size_t a = cfg_u64_lower_bound(s->keys, s->n, addr + 1);
    if (a > 0) {
        *key = s->keys[a - 1];
        *idx = s->idx[a - 1];
        found = 1;
    }
    size_t c = cfg_u64_lower_bound(s->bkeys, s->nb, addr + 1);
    if (c > 0 && (!found || s->bkeys[c - 1] > *key)) {
        *key = s->bkeys[c - 1];
        *idx = s->bidx[c - 1];
        found = 1;
    }
    return found;
}

/* The least entry > ADDR kept aside, or UINT64_MAX. */
static uint64_t
side_succ(const cfg_side_t *s, uint64_t addr)
{
    uint64_t r = UINT64_MAX;
    size_t a = cfg_u64_lower_bound(s->keys, s->n, addr + 1);
    if (a < s->n)
        r = s->keys[a];
    size_t c = cfg_u64_lower_bound(s->bkeys, s->nb, addr + 1);
    if (c < s->nb && s->bkeys[c] < r)
        r = s->bkeys[c];
    return r;
}

#define FIND_BUCKET_SHIFT 12

/* The entry at position I of B's procedures (qp_bucket_key_fn). */
static uint64_t
find_index_key(const void *ctx, size_t i)
{
    return ((const cfg_builder_t *)ctx)->entry.v[i];
}

/* Number of procedures in b->procs whose entry is <= ADDR: within ADDR's bucket when the
 * buckets are current (a search of them all missed the cache a step: python3.11's
 * attach spent 7% of its time in cfg_discover_find), else a search of all entries. */
static size_t
procs_upto(const cfg_builder_t *b, uint64_t addr)
{
    const cfg_find_index_t *fx = b->find;
    if (fx != NULL && fx->built && fx->ver == b->procs_ver)
        return qp_buckets_upto(&fx->buckets, b->entry.v, b->entry.n, addr);
    if (addr == UINT64_MAX) /* addr + 1 would wrap to 0: every entry is <= it */
        return b->entry.n;
    return cfg_u64_lower_bound(b->entry.v, b->entry.n, addr + 1);
}

/* Build the buckets over the entries as they are now (none without memory: the plain
 * search then). */
static void
find_index_build(const cfg_builder_t *b, cfg_find_index_t *fx)
{
    fx->buckets.n = 0;
    if (b->entry.n > 0)
        (void)qp_buckets_build(&fx->buckets, b->entry.v[0], FIND_BUCKET_SHIFT, b->entry.n,
                               find_index_key, b);
    fx->built = 1;
    fx->ver = b->procs_ver;
}

cfg_bproc_t *
cfg_discover_proc(const cfg_builder_t *b, uint32_t i)
{
    if (i < b->procs.n)
        return cfg_bproc_at(b, i);
    return cfg_bproc_id(b, b->side->procs.v[i - b->procs.n]);
}

/*
 * Procedures in b->procs have their extent computed by cfg_discover_extents (ends only
 * shrink as procedures are added, so the nearest entry kept aside is the only change);
 * those kept aside hold in p.end their bound by the section, the gap, or the extent
 * they were built with.
 */
uint64_t
cfg_discover_end(const cfg_builder_t *b, uint32_t i)
{
    const cfg_bproc_t *bp = cfg_discover_proc(b, i);
    uint64_t end = bp->p.end;
    if (b->side == NULL)
        return end;
    uint64_t next = side_succ(b->side, bp->p.entry);
    if (i >= b->procs.n) {
        size_t k = procs_upto(b, bp->p.entry);
        if (k < b->procs.n && b->entry.v[k] < next)
            next = b->entry.v[k];
    }
    return next < end ? next : end;
}

int
cfg_discover_sweep_begin(cfg_builder_t *b)
{
    b->side = calloc(1, sizeof(cfg_side_t));
    return b->side == NULL ? QP_ENOMEM : 0;
}

/* Add the entries at B->new_entries aside (cfg_discover_add_new during a sweep). */
static int
side_add_new(cfg_builder_t *b, cand_t *c, size_t m)
{
    cfg_side_t *s = b->side;
    int added = 0;
    for (size_t i = 0; i < m;) {
        cand_t x = c[i++];
        for (; i < m && c[i].addr == x.addr; i++)
            x.sources |= c[i].sources;
        size_t k = procs_upto(b, x.addr);
        if (k > 0 && b->entry.v[k - 1] == x.addr) {
            cfg_bproc_at(b, k - 1)->p.sources |= x.sources;
            continue;
        }
        uint64_t key;
        uint32_t si;
        if (side_pred(s, x.addr, &key, &si) && key == x.addr) {
            cfg_bproc_id(b, s->procs.v[si])->p.sources |= x.sources;
            continue;
        }
        cfg_bproc_t bp;
        QP_CHECK(init_proc(b, x.addr, 0, x.sources, &bp));
        const cfg_section_t *sec = cfg_image_section_at(b->img, x.addr);
        bp.p.end = sec ? sec->vma + sec->size : x.addr + 1;
        uint32_t id;
        QP_CHECK(CFG_VEC_GROW(s->procs));
        QP_CHECK(cfg_bpool_add(b, &bp, &id));
        s->procs.v[s->procs.n++] = id;
        QP_CHECK(side_insert(s, x.addr, (uint32_t)(s->procs.n - 1)));
        added++;
    }
    return added;
}

static void set_extent(cfg_builder_t *b, size_t i);

/*
 * Merge the procedures IDS[0..NA) of the pool (their entries ENT, sorted; in no array
 * yet) into the sorted b->procs and b->entry: only ids and entries move. Then the
 * extents that changed are set: the new
 * ones' and their predecessors' (ends depend on the next entry; the others' neither
 * changed nor did what else bounds them). 0 or QP_ENOMEM (b->procs unchanged).
 */
static int
merge_new(cfg_builder_t *b, const uint64_t *ent, const uint32_t *ids, size_t na)
{
    size_t n0 = b->procs.n;
    if (na == 0)
        return 0;
    size_t *pos = malloc(na * sizeof(size_t)); /* where the new ones went */
    if (pos == NULL || CFG_VEC_FIT(b->procs, n0 + na) < 0
        || CFG_VEC_FIT(b->entry, n0 + na) < 0) {
        free(pos);
        return QP_ENOMEM;
    }
    /* From the end: the old ones above the first new one each move once, in order
     * (a search for each new one missed the cache a step). */
    size_t i = n0, k = na, o = n0 + na;
    while (k > 0) {
        if (i > 0 && b->entry.v[i - 1] > ent[k - 1]) {
            b->procs.v[--o] = b->procs.v[--i];
            b->entry.v[o] = b->entry.v[i];
        } else {
            b->procs.v[--o] = ids[--k];
            b->entry.v[o] = ent[k];
            pos[k] = o;
        }
    }
    b->procs.n = b->entry.n = n0 + na;
    b->procs_ver++;
    b->gen++;
    for (k = 0; k < na; k++) {
        if (pos[k] > 0)
            set_extent(b, pos[k] - 1);
        set_extent(b, pos[k]);
        cfg_spans_dirty(b, cfg_bproc_at(b, pos[k]));
    }
    free(pos);
    return 0;
}

/* Merge the procedures kept aside into b->procs. */
static int
side_merge(cfg_builder_t *b, cfg_side_t *s)
{
    size_t m = s->procs.n;
    QP_CHECK(side_flush(s));
    uint32_t *ids = malloc(m * sizeof(uint32_t));
    if (ids == NULL)
        return QP_ENOMEM;
    for (size_t k = 0; k < m; k++)
        ids[k] = s->procs.v[s->idx[k]];
    int rc = merge_new(b, s->keys, ids, m);
    free(ids);
    if (rc == 0)
        s->procs.n = 0;
    return rc;
}

int
cfg_discover_sweep_end(cfg_builder_t *b)
{
    cfg_side_t *s = b->side;
    if (s == NULL)
        return 0;
    b->side = NULL;
    int rc = s->procs.n ? side_merge(b, s) : 0;
    CFG_VEC_FREE(s->procs); /* (when the merge failed, the pool frees them) */
    free(s->keys);
    free(s->idx);
    free(s);
    return rc;
}


/*
 * The lookup index: buckets over b->entry, which every change of the procedures keeps
 * up to date (a merge of the compact arrays when a round adds a few procedures to
 * 670,000), built again at the first lookup after a change, or when it is frozen.
 */
void
cfg_discover_freeze(cfg_builder_t *b, int frozen)
{
    cfg_find_index_t *fx = b->find;
    if (fx == NULL)
        return;
    if (frozen && (!fx->built || fx->ver != b->procs_ver))
        find_index_build(b, fx);
    fx->frozen = frozen;
}

uint32_t
cfg_discover_find(const cfg_builder_t *b, uint64_t addr)
{
    cfg_find_index_t *fx = b->find;
    if (fx != NULL && !fx->frozen && (!fx->built || fx->ver != b->procs_ver))
        find_index_build(b, fx);
    size_t lo = procs_upto(b, addr);
    if (b->side != NULL && b->side->procs.n > 0) {
        /* The nearest entry below in either array, then its extent as it is now. */
        uint64_t key;
        uint32_t si, i;
        if (side_pred(b->side, addr, &key, &si) && (lo == 0 || key > b->entry.v[lo - 1]))
            i = (uint32_t)(b->procs.n + si);
        else if (lo == 0)
            return CFG_NONE;
        else
            i = (uint32_t)(lo - 1);
        return addr < cfg_discover_end(b, i) ? i : CFG_NONE;
    }
    if (lo == 0)
        return CFG_NONE;
    return addr < cfg_bproc_at(b, lo - 1)->p.end ? (uint32_t)(lo - 1) : CFG_NONE;
}

/* The end of procedure I's extent in b->procs: its section's end, the next entry, or
 * the end its symbol, FDE or gap gave, whichever comes first. */
static uint64_t
extent_end(const cfg_builder_t *b, size_t i)
{
    const cfg_bproc_t *bp = cfg_bproc_at(b, i);
    const cfg_section_t *s = cfg_image_section_at(b->img, bp->p.entry);
    uint64_t end = s ? s->vma + s->size : bp->p.entry + 1;
    if (i + 1 < b->procs.n && b->entry.v[i + 1] < end)
        end = b->entry.v[i + 1];
    if (bp->hint_end > bp->p.entry && bp->hint_end < end)
        end = bp->hint_end;
    if (bp->limit_end > bp->p.entry && bp->limit_end < end)
        end = bp->limit_end;
    return end;
}

/* Set procedure I's extent (a changed one is to be built again). */
static void
set_extent(cfg_builder_t *b, size_t i)
{
    cfg_bproc_t *bp = cfg_bproc_at(b, i);
    uint64_t end = extent_end(b, i);
    if (end != bp->p.end) {
        cfg_mark_unbuilt(b, bp);
        cfg_mark_nr_dirty(b, bp); /* calls into its old extent may go elsewhere now */
    }
    if (end != bp->p.end || bp->p.start != bp->p.entry)
        cfg_spans_dirty(b, bp);
    bp->p.start = bp->p.entry;
    bp->p.end = end;
}

int
cfg_procs_drop(cfg_builder_t *b, int (*drop)(void *arg, const cfg_bproc_t *bp), void *arg)
{
    cfg_u64_vec_t before = { 0 }; /* indices of those before dropped ones */
    size_t k = 0;
    int rc = 0, lost = 0;
    for (size_t i = 0; i < b->procs.n; i++) {
        cfg_bproc_t *bp = cfg_bproc_walk(b, i);
        int d = rc == 0 ? drop(arg, bp) : 0;
        if (d > 0) {
            cfg_spans_cut(b, bp);
            cfg_bproc_free(bp);
            if (k > 0 && (before.n == 0 || before.v[before.n - 1] != k - 1))
                lost |= CFG_VEC_PUSH(before, k - 1) < 0;
            continue;
        }
        if (d < 0)
            rc = d;
        b->entry.v[k] = b->entry.v[i];
        b->procs.v[k++] = b->procs.v[i];
    }
    size_t dropped = b->procs.n - k;
    b->procs.n = b->entry.n = k;
    if (dropped > 0) {
        b->procs_ver++;
        if (lost)
            cfg_discover_extents(b);
        else {
            b->gen++;
            for (size_t j = 0; j < before.n; j++)
                set_extent(b, before.v[j]);
        }
    }
    CFG_VEC_FREE(before);
    return rc < 0 ? rc : (int)dropped;
}

void
cfg_discover_extents(cfg_builder_t *b)
{
    b->gen++;
    for (size_t i = 0; i < b->procs.n; i++)
        set_extent(b, i);
}

int
cfg_discover_add_new(cfg_builder_t *b)
{
    size_t m = b->new_entries.n;
    if (m == 0)
        return 0;
    cand_t *c = malloc(m * sizeof(cand_t));
    if (c == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < m; i++)
        c[i] = (cand_t) { b->new_entries.v[i], 0, b->new_srcs.v[i] };
    qsort(c, m, sizeof(cand_t), cmp_cand);
    b->new_entries.n = 0;
    b->new_srcs.n = 0;
    if (b->side != NULL) {
        int r = side_add_new(b, c, m);
        free(c);
        return r;
    }
    size_t n0 = b->procs.n, na = 0;
    uint64_t *ent = malloc(m * sizeof(uint64_t)); /* the new ones' entries, */
    uint32_t *ids = malloc(m * sizeof(uint32_t)); /* ... and ids in the pool */
    int rc = ent != NULL && ids != NULL ? 0 : QP_ENOMEM;
    for (size_t i = 0; i < m && rc == 0;) {
        cand_t x = c[i++];
        for (; i < m && c[i].addr == x.addr; i++)
            x.sources |= c[i].sources;
        size_t lo = x.addr > 0 ? procs_upto(b, x.addr - 1) : 0;
        if (lo < n0 && b->entry.v[lo] == x.addr) {
            cfg_bproc_at(b, lo)->p.sources |= x.sources;
            continue;
        }
        cfg_bproc_t bp;
        if ((rc = init_proc(b, x.addr, 0, x.sources, &bp)) == 0
            && (rc = cfg_bpool_add(b, &bp, &ids[na])) == 0)
            ent[na++] = x.addr;
    }
    free(c);
    if (rc == 0)
        rc = merge_new(b, ent, ids, na);
    free(ent);
    free(ids);
    return rc < 0 ? rc : (int)na;
}

/*****************************************************************************
 * Discovery
 */

static int
collect_candidates(cfg_builder_t *b, cand_vec_t *v)
{
    const cfg_image_t *img = b->img;
    for (size_t i = 0; i < img->nsymbols; i++) {
        const cfg_symbol_t *s = &img->symbols[i];
        if (s->kind != CFG_SYM_FUNC && s->kind != CFG_SYM_IFUNC)
            continue;
        uint32_t src = s->src == CFG_SYMSRC_PLT ? CFG_SRC_PLT : CFG_SRC_SYMBOL;
        QP_CHECK(add_cand(v, img, s->addr, s->size ? s->addr + s->size : 0, src));
    }
    for (size_t i = 0; i < img->nsections; i++) {
        const cfg_section_t *s = &img->sections[i];
        if (strcmp(s->name, ".eh_frame") == 0 && s->bytes != NULL) {
            fde_ctx_t c = { v, img, b, NULL, 0 };
            uint64_t *hdr = NULL;
            for (size_t k = 0; k < img->nsections && hdr == NULL; k++)
                if (strcmp(img->sections[k].name, ".eh_frame_hdr") == 0
                    && cfg_ehhdr_table(img->sections[k].bytes, img->sections[k].size,
                           img->sections[k].vma, &hdr, &c.nhdr) == QP_ENOMEM)
                    return QP_ENOMEM;
            c.hdr = hdr;
            int rc = cfg_ehframe_walk(s->bytes, s->size, s->vma, on_fde, &c);
            free(hdr);
            if (rc == QP_ENOMEM)
                return rc;
        }
        /* .init and .fini are procedures without symbols in stripped files. */
        if ((s->flags & CFG_SEC_CODE) && s->bytes != NULL
            && (strcmp(s->name, ".init") == 0 || strcmp(s->name, ".fini") == 0))
            QP_CHECK(add_cand(v, img, s->vma, s->vma + s->size, CFG_SRC_SECTION));
    }
    QP_CHECK(add_cand(v, img, img->entry, 0, CFG_SRC_ENTRY));
    for (size_t i = 0; i < img->ninit_funcs; i++)
        QP_CHECK(add_cand(v, img, img->init_funcs[i], 0, CFG_SRC_INIT));
    for (size_t i = 0; i < img->nrelocs; i++)
        if (img->relocs[i].kind == CFG_RELOC_IRELATIVE)
            QP_CHECK(add_cand(v, img, img->relocs[i].value, 0, CFG_SRC_ADDR));
    return 0;
}

/* Code addresses that the program holds as data: relocated words, and in non-PIE
 * files aligned words of data sections whose value lies in code. */
static int
collect_addr_taken(cfg_builder_t *b)
{
    const cfg_image_t *img = b->img;
    uint64_t align = cfg_image_isa(img)->insn_align; /* AArch64: no code at odd words */
    for (size_t i = 0; i < img->nrelocs; i++) {
        const cfg_reloc_t *r = &img->relocs[i];
        if ((r->kind == CFG_RELOC_RELATIVE || r->kind == CFG_RELOC_ABS64)
            && cfg_image_is_code(img, r->value) && r->value % align == 0)
            QP_CHECK(CFG_VEC_PUSH(b->addr_taken, r->value));
    }
    if (!(img->flags & CFG_IMG_PIE)) {
        /* The code's bounds first: most words are no address in it (python3.11: 318k
         * words, each a search of the sections). */
        uint64_t code_lo = UINT64_MAX, code_hi = 0;
        for (size_t i = 0; i < img->nsections; i++) {
            const cfg_section_t *s = &img->sections[i];
            if (!(s->flags & CFG_SEC_CODE))
                continue;
            if (s->vma < code_lo)
                code_lo = s->vma;
            if (s->vma + s->size > code_hi)
                code_hi = s->vma + s->size;
        }
        for (size_t i = 0; i < img->nsections; i++) {
            const cfg_section_t *s = &img->sections[i];
            if ((s->flags & CFG_SEC_CODE) || s->bytes == NULL || !(s->flags & CFG_SEC_ALLOC)
                || strncmp(s->name, ".eh_frame", 9) == 0 || strcmp(s->name, ".gcc_except_table") == 0)
                continue;
            uint64_t first = (s->vma + 7) & ~(uint64_t)7;
            for (uint64_t a = first; a + 8 <= s->vma + s->size; a += 8) {
                uint64_t w;
                memcpy(&w, s->bytes + (a - s->vma), 8);
                if (w >= 0x1000 && w >= code_lo && w < code_hi && cfg_image_is_code(img, w)
                    && w % align == 0)
                    QP_CHECK(CFG_VEC_PUSH(b->addr_taken, w));
            }
        }
    }
    if (b->addr_taken.n) {
        qsort(b->addr_taken.v, b->addr_taken.n, sizeof(uint64_t), cfg_u64_cmp);
        size_t k = 0;
        for (size_t i = 0; i < b->addr_taken.n; i++)
            if (k == 0 || b->addr_taken.v[k - 1] != b->addr_taken.v[i])
                b->addr_taken.v[k++] = b->addr_taken.v[i];
        b->addr_taken.n = k;
    }
    return 0;
}

static const cfg_builder_t *sort_builder; /* qsort has no context argument */

static int
cmp_by_name(const void *a, const void *b)
{
    const cfg_bproc_t *x = cfg_bproc_at(sort_builder, *(const uint32_t *)a);
    const cfg_bproc_t *y = cfg_bproc_at(sort_builder, *(const uint32_t *)b);
    int c = strcmp(x->p.name, y->p.name);
    return c ? c : (x->p.entry < y->p.entry ? -1 : x->p.entry > y->p.entry);
}

/* Tie "foo.cold" fragments to "foo": the fragment's blocks become part of foo's CFG. */
static int
tie_fragments(cfg_builder_t *b)
{
    uint32_t *byname = malloc((b->procs.n + 1) * sizeof(uint32_t));
    if (byname == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < b->procs.n; i++)
        byname[i] = (uint32_t)i;
    sort_builder = b;
    qsort(byname, b->procs.n, sizeof(uint32_t), cmp_by_name);
    char name[256];
    for (size_t i = 0; i < b->procs.n; i++) {
        cfg_bproc_t *f = cfg_bproc_at(b, i);
        size_t plen = cold_parent_len(f->p.name);
        if (plen == 0 || plen >= sizeof(name)
            || (f->p.sources & (CFG_SRC_CALL | CFG_SRC_ENTRY | CFG_SRC_INIT)))
            continue;
        memcpy(name, f->p.name, plen);
        name[plen] = '\0';
        size_t lo = 0, hi = b->procs.n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (strcmp(cfg_bproc_at(b, byname[mid])->p.name, name) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < b->procs.n && strcmp(cfg_bproc_at(b, byname[lo])->p.name, name) == 0) {
            const cfg_bproc_t *parent = cfg_bproc_at(b, byname[lo]);
            if (!(parent->p.flags & CFG_PROC_FRAGMENT)) {
                f->p.flags |= CFG_PROC_FRAGMENT;
                f->parent_entry = parent->p.entry;
            }
        }
    }
    free(byname);
    return 0;
}

int
cfg_discover(cfg_builder_t *b)
{
    cand_vec_t v = { 0 };
    int rc = collect_candidates(b, &v);
    if (rc == 0)
        rc = collect_addr_taken(b);
    if (rc < 0)
        goto out;
    if (v.n)
        qsort(v.v, v.n, sizeof(cand_t), cmp_cand);
    if (b->landing_pads.n)
        qsort(b->landing_pads.v, b->landing_pads.n, sizeof(uint64_t), cfg_u64_cmp);
    for (size_t i = 0; i < v.n;) {
        cand_t c = v.v[i++];
        for (; i < v.n && v.v[i].addr == c.addr; i++) {
            c.sources |= v.v[i].sources;
            if (v.v[i].hint_end > c.hint_end)
                c.hint_end = v.v[i].hint_end;
        }
        if ((rc = new_proc(b, c.addr, c.hint_end, c.sources)) < 0)
            goto out;
    }
    cfg_discover_extents(b);
    /* Code addresses held as data that fall in no procedure start new ones. */
    for (size_t i = 0; i < b->addr_taken.n; i++) {
        uint64_t a = b->addr_taken.v[i];
        if (cfg_discover_find(b, a) == CFG_NONE && (b->img->flags & CFG_IMG_PIE)) {
            if ((rc = CFG_VEC_PUSH(b->new_entries, a)) < 0
                || (rc = CFG_VEC_PUSH(b->new_srcs, (uint32_t)CFG_SRC_ADDR)) < 0)
                goto out;
        }
    }
    rc = cfg_discover_add_new(b);
    if (rc >= 0)
        rc = tie_fragments(b);
    if (rc >= 0)
        rc = cfg_list_fragments(b);
out:
    CFG_VEC_FREE(v);
    return rc;
}
