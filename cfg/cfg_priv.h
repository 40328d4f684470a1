/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_CFG_PRIV_H
#define QP_CFG_PRIV_H
/*
 * PURPOSE: helpers shared by the cfg/ files and by tests/check_cfg.c only: growable arrays,
 * the FDE reader, the jump-table recogniser and the loop analysis. No other folder may
 * include this header.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/qp_pool.h"
#include "base/qp_prefetch.h"
#include "base/qp_search.h"
#include "cfg/cfg.h"

/*****************************************************************************
 * Growable arrays: struct { T *v; size_t n, cap; }
 */
#define CFG_VEC(T)                                                                       \
    struct {                                                                             \
        T *v;                                                                            \
        size_t n, cap;                                                                   \
    }

/* Make room for one more element; evaluates to 0 or QP_ENOMEM. (The call only when
 * full: a call a push cost cc1's analysis 1.7 million calls in the noreturn deps alone.) */
#define CFG_VEC_GROW(vec)                                                                \
    ((vec).n < (vec).cap                                                                 \
         ? 0                                                                             \
         : cfg_vec_grow((void **)&(vec).v, &(vec).cap, (vec).n + 1, sizeof(*(vec).v)))
/* Make room for N elements in all; evaluates to 0 or QP_ENOMEM. */
#define CFG_VEC_FIT(vec, need)                                                           \
    cfg_vec_grow((void **)&(vec).v, &(vec).cap, (need), sizeof(*(vec).v))
/* Append X; evaluates to 0 or QP_ENOMEM. */
#define CFG_VEC_PUSH(vec, x)                                                             \
    (CFG_VEC_GROW(vec) < 0 ? QP_ENOMEM : ((vec).v[(vec).n++] = (x), 0))
#define CFG_VEC_FREE(vec) (free((vec).v), (vec).v = NULL, (vec).n = (vec).cap = 0)

typedef CFG_VEC(uint64_t) cfg_u64_vec_t;
typedef CFG_VEC(char *) cfg_str_vec_t;

/* A copy of S owned by the caller, or NULL. */
char *cfg_strdup(const char *s);

/*****************************************************************************
 * Image internals (cfg_image.c)
 */

/* Sort the image's symbols and relocations and build its lookup tables. */
int cfg_image_finish(cfg_image_t *img);

/*****************************************************************************
 * .eh_frame (cfg_ehframe.c)
 */
typedef struct cfg_fde {
    uint64_t start;  /* pc_begin */
    uint64_t end;    /* pc_begin + pc_range */
    int signal;      /* 'S' augmentation: a signal trampoline, whose FDE starts one byte
                      * before the code so that unwinders can use pc - 1 */
    uint64_t lsda;   /* address of the LSDA (.gcc_except_table), or 0 */
    uint64_t addr;   /* address of the FDE record */
} cfg_fde_t;

/*
 * Parse the .eh_frame bytes BUF (LEN bytes at VMA) and call FN for every FDE whose
 * range is well formed. Malformed input stops the walk; returns the number of FDEs
 * seen or QP_EFORMAT when nothing could be parsed.
 */
int cfg_ehframe_walk(const uint8_t *buf, size_t len, uint64_t vma,
                     int (*fn)(void *arg, const cfg_fde_t *fde), void *arg);

/*
 * The search table of the .eh_frame_hdr bytes BUF (LEN bytes at VMA), the one libgcc
 * searches: *OUT gets *N pairs (FDE address, initial location) sorted by FDE address
 * (free it), NULL when there is no such table. The unwinder takes an FDE's start from
 * there, not from the FDE. Returns 0, QP_EFORMAT (a table past the section's end) or
 * QP_ENOMEM.
 */
int cfg_ehhdr_table(const uint8_t *buf, size_t len, uint64_t vma, uint64_t **out /*OUT*/,
                    size_t *n /*OUT*/);

/*
 * Parse the LSDA at BUF (LEN readable bytes, at VMA) of the function starting at
 * FUNC_START and call FN with every landing pad address. Returns the number of landing
 * pads, or QP_EFORMAT.
 */
int cfg_lsda_walk(const uint8_t *buf, size_t len, uint64_t vma, uint64_t func_start,
                  int (*fn)(void *arg, uint64_t landing_pad), void *arg);

/*****************************************************************************
 * Jump tables (cfg_jtab.c)
 */

/* Decoded instructions of one block, oldest first, for backward slicing. */
typedef struct cfg_insn_window {
    const arch_insn_t *insns; /* instructions, in address order */
    size_t n;                 /* how many */
} cfg_insn_window_t;

/*
 * Given the instructions leading to an indirect jump (the jump last), possibly spanning a
 * few predecessor blocks, recognise a jump table. LO..HI bounds the procedure's code:
 * every entry must land in [LO, HI) on code. Fills *T on success and returns 1, returns 0
 * when no table is recognised.
 */
int cfg_jtab_match(const cfg_image_t *img, const cfg_insn_window_t *w, uint64_t lo,
                   uint64_t hi, cfg_table_t *t /*OUT*/);

/* The target of entry I of table T, or 0 when it cannot be read. */
uint64_t cfg_jtab_entry(const cfg_image_t *img, const cfg_table_t *t, uint32_t i);

/*****************************************************************************
 * Dominators and loops (cfg_loops.c)
 */

/* Compute idom, loop_depth, is_loop_head for the blocks of P; set P's nloops/flags. */
int cfg_loops_proc(cfg_prog_t *prog, cfg_proc_t *p);



/*
 * What an image owns besides its arrays: a reader-specific close hook (cfg_bfd.c closes
 * BFD and unmaps the file), copied strings, and bytes.
 */
typedef struct cfg_image_priv {
    void (*close)(struct cfg_image_priv *priv); /* reader's cleanup, or NULL */
    void *reader;                               /* reader state for `close` */
    CFG_VEC(char *) strings;                    /* strings to free */
    uint8_t *bytes;                             /* copied bytes (cfg_image_from_bytes) */
    uint64_t *sec_order;                        /* loaded sections sorted by vma (indices) */
    size_t nsec_order;
    _Atomic(struct cfg_dcache *) dcache;        /* decoded instructions (cfg_image_decode) */
    void *dwtypes;                              /* DWARF types (cfg_dwtype.c), or NULL */
    int file_released;                          /* cfg_image_release_file: no file to read */
} cfg_image_priv_t;

/* For tests: does IMG's cache of decoded instructions (cfg_image_decode), or what its
 * freeze kept (cfg_image_decode_freeze), hold the instruction at ADDR? 1 or 0. */
int cfg_image_decode_kept(const cfg_image_t *img, uint64_t addr);

/* The mapping MAP of LEN bytes of the file PATH made known to cfg_mapped_at (forgotten
 * by cfg_mapped_remove); cfg_mapped.c. */
void cfg_mapped_add(const void *map, size_t len, const char *path);

/* Free cfg_image_priv_t.dwtypes. */
void cfg_dwtypes_free(void *dwtypes);

/*****************************************************************************
 * Separate debug files and names from code (cfg_debug.c, cfg_bfd.c)
 */

/* What a candidate debug file must match: IMG's build-id, or a .gnu_debuglink CRC. */
typedef struct cfg_debug_want {
    const uint8_t *build_id; /* build_id_len bytes, or build_id_len 0: not checked */
    size_t build_id_len;
    int check_crc;           /* nonzero: the file's CRC-32 must be `crc` */
    uint32_t crc;
    int own;                 /* nonzero: our own copy (MiniDebugInfo's), which nobody
                              * else changes: not checked again (cfg_image_debug_same) */
} cfg_debug_want_t;

/* The raw bytes of IMG's (non-empty, non-NOBITS) section NAME, or NULL. */
const uint8_t *cfg_bfd_raw_section(const cfg_image_t *img, const char *name, size_t *len);

/*
 * Add the .symtab of the ELF file at PATH (a separate debug file of IMG that matches
 * WANT) to IMG's symbols and variables, and set img->debug_file. Returns 1 when it was
 * used, 0 when it is missing, unreadable or does not match, QP_ENOMEM, or
 * CFG_DEBUG_CHANGED (QP_EIO, img->debug_file set) when the file changed while it was
 * read (its device, inode, size or mtime, checked once its symbols are read). The file
 * used is remembered for cfg_image_debug_same (unless WANT->own).
 */
#define CFG_DEBUG_CHANGED QP_EIO
int cfg_bfd_add_debug_symbols(cfg_image_t *img, const char *path, const cfg_debug_want_t *want);

/*
 * Tests (issue 31): the image of PATH opened twice, once with the names we give x86-64's
 * PLT stubs and once with BFD's synthetic symbols, their symbols compared. 0 (the same:
 * WHY says how many PLT symbols), 1 (they differ: WHY says where), 2 (we leave PATH's
 * stubs to BFD, and then have the same symbols), or a QP_E* code of opening it.
 */
int cfg_bfd_plt_check(const char *path, char *why, size_t whylen);

/*
 * For a stripped IMG (read from PATH): the symbols of its separate debug file, found by
 * build-id, by .gnu_debuglink, or in its MiniDebugInfo (.gnu_debugdata). 0 when there is
 * none (not an error), QP_ENOMEM.
 */
int cfg_debug_find_symbols(cfg_image_t *img, const char *path);

/*
 * Names from the code where the symbols have none: `_start` for the entry, and `main`
 * for the address _start passes to __libc_start_main. IMG must be finished; it is
 * finished again when a name was added. 0 or QP_ENOMEM.
 */
int cfg_name_entry(cfg_image_t *img);

/* Keep a copy of S in the image; returns the copy or NULL on ENOMEM. */
const char *cfg_image_intern(cfg_image_t *img, const char *s);

/* Allocate an empty image with its priv part. */
cfg_image_t *cfg_image_alloc(void);

/*****************************************************************************
 * The builder (cfg_discover.c, cfg_build.c)
 */

typedef struct cfg_range {
    uint64_t start, end; /* [start, end) */
} cfg_range_t;

/* A call of a procedure marked "never returns": its callee and where it would return. */
typedef struct cfg_noret_site {
    uint64_t callee, ret;
} cfg_noret_site_t;

/* A procedure under construction; block and edge indices are local to it. */
typedef struct cfg_bproc {
    cfg_proc_t p;                     /* name, entry, extent, sources, flags, unsafe */
    CFG_VEC(cfg_range_t) ranges;      /* main extent first, then tied cold fragments */
    CFG_VEC(cfg_block_t) blocks;      /* local blocks in address order */
    CFG_VEC(cfg_edge_t) edges;        /* local edges, grouped by block */
    CFG_VEC(cfg_table_t) tables;      /* jump tables found */
    cfg_u64_vec_t extra_entries;      /* interior addresses other procedures jump to */
    uint32_t entry_block;             /* local index of the entry block */
    uint64_t hint_end;                /* end from symbol size or FDE, 0 if unknown */
    uint64_t limit_end;               /* gap procedures: end of the gap they were found in */
    uint64_t runs_into;               /* an instruction of its code runs past its range's
                                       * end into this address (unsafe), else 0 */
    uint64_t parent_entry;            /* fragments: entry of the owning procedure */
    uint8_t built;                    /* blocks are current */
    uint8_t name_noreturn;            /* never returns by its name */
    uint8_t tied_nameless;            /* tied as a fragment by tie_nameless_fragments */
    uint8_t never_tie;                /* was tied, and its parent did not reach its start */
    uint8_t nr_dirty;                 /* built since the last noreturn analysis */
    uint64_t ranges_h;                /* hash of `ranges` (assign_ranges) */
    CFG_VEC(cfg_noret_site_t) noret_sites; /* its "never returns" edges that are calls,
                                       * in edge order (kept with `edges`) */
    uint32_t ntail;                   /* its tail-call edges to a known address (kept
                                       * with `edges`): procedures without any are
                                       * skipped by the passes that look for them */
    uint64_t blocks_ver;              /* a new value (b->blocks_ver) whenever `blocks`
                                       * change; 0: never had any */
    uint64_t ret_direct;              /* 2 blocks_ver + 1 when a return is reached from
                                       * its entry without a call (so it may return,
                                       * whatever its callees do), 2 blocks_ver when not,
                                       * as found for those blocks (cfg_noreturn.c) */
    CFG_VEC(cfg_range_t) covered;     /* gap sweep: runs of adjacent blocks, as last found */
    uint64_t covered_ver;             /* ... among the blocks of that version */
    uint64_t covered_lo, covered_hi;  /* ... starting in [lo, hi) */
} cfg_bproc_t;

/* Buckets over the procedures' entries (b->entry), for cfg_discover_find (see there). */
typedef struct cfg_find_index {
    qp_buckets_t buckets;             /* over b->entry, from its first, 4 KiB a bucket */
    int frozen;                       /* not to be changed (cfg_discover_freeze) */
    int built;                        /* the buckets were built ... */
    uint64_t ver;                     /* ... when b->procs_ver was this */
} cfg_find_index_t;

/* A PLT stub's GOT slot holds HELD: the stub is symbol SYM of the image. */
typedef struct cfg_plt_held {
    uint64_t held;                    /* the slot's word */
    uint32_t sym;                     /* index in the image's symbols */
} cfg_plt_held_t;

/*
 * Where the procedures under construction live: in chunks that never move, by an id
 * given out once (a dropped procedure's slot stays empty). The builder orders them by
 * entry through an array of ids, so a round that adds a few procedures to 670,000 moves
 * 4-byte ids, not 352-byte structs, and a pointer to a procedure stays valid while
 * procedures are added.
 */
#define CFG_POOL_SHIFT 12             /* 4,096 procedures a chunk (1.4 MB) */
typedef struct cfg_bpool {
    cfg_bproc_t **chunk;              /* the chunks */
    size_t nchunk, cap;               /* how many; allocated */
    uint32_t n;                       /* ids given out */
} cfg_bpool_t;

/*
 * The runs of adjacent blocks the gap sweeps skip (collect_spans), kept from one sweep
 * to the next: a sweep takes them again but where procedures changed since, which the
 * builder notes as they change (cfg_spans_dirty, cfg_spans_cut). Fragments (whose runs
 * are their parent's blocks) are collected again at each sweep.
 */
typedef CFG_VEC(cfg_range_t) cfg_range_vec_t;
typedef struct cfg_spans {
    cfg_range_vec_t runs;             /* every holder's runs, in address order */
    cfg_range_vec_t tmp;              /* (the next `runs`, while it is made) */
    cfg_u64_vec_t dirty;              /* entries of procedures whose runs may have
                                       * changed since `runs` was made */
    cfg_range_vec_t cut;              /* where dropped procedures' runs were */
    cfg_u64_vec_t frags;              /* the fragments when `runs` was made */
    int valid;                        /* `runs` is current but for the above (else all
                                       * are collected again) */
} cfg_spans_t;

typedef struct cfg_builder {
    const cfg_image_t *img;           /* the image */
    cfg_opts_t opts;                  /* options (copied) */
    cfg_bpool_t pool;                 /* the procedures, by id */
    CFG_VEC(uint32_t) procs;          /* their ids sorted by entry address: procedure
                                       * index I is procs.v[I] (cfg_bproc_at) */
    cfg_u64_vec_t entry;              /* the entry of each, in the same order: searched
                                       * instead of the procedures (a miss a step) */
    cfg_u64_vec_t addr_taken;         /* code addresses held as data, sorted */
    cfg_u64_vec_t new_entries;        /* call/jump targets found while building */
    CFG_VEC(uint32_t) new_srcs;       /* their CFG_SRC_* bits */
    struct cfg_scratch *scratch;      /* per worker: traversal scratch, findings (cfg_build.c) */
    unsigned nscratch;                /* workers (opts.threads, at least 1) */
    cfg_u64_vec_t rejected;           /* gap starts that proved not to be code */
    cfg_u64_vec_t landing_pads;       /* exception landing pads (from LSDAs), sorted */
    cfg_str_vec_t strings;            /* names made up here (handed to the program) */
    cfg_find_index_t *find;           /* lookup index (cfg_discover_find), or NULL */
    struct cfg_side *side;            /* during a gap sweep: procedures found so far */
    uint64_t gen;                     /* bumped when procedures, extents or fragments change */
    uint64_t procs_ver;               /* bumped when procs' entries change (added, dropped) */
    struct cfg_nr_deps *nr;           /* noreturn analysis: who depends on whom, or NULL */
    atomic_uint_least64_t blocks_ver; /* the last cfg_bproc_t.blocks_ver given out */
    atomic_int unsafe_built;          /* a build made a procedure unsafe since
                                       * reject_bad_gap_procs last looked */
    cfg_u64_vec_t unbuilt;            /* entries of the procedures marked not built
                                       * (cfg_mark_unbuilt) since the last round */
    int unbuilt_lost;                 /* one could not be noted (no memory): look at all */
    cfg_u64_vec_t frags;              /* entries of the fragments as last listed
                                       * (cfg_list_fragments; some may be no more) */
    cfg_u64_vec_t parents;            /* entries of the procedures that had fragments
                                       * when assign_ranges last ran */
    cfg_u64_vec_t nr_dirty;           /* entries of the procedures marked nr_dirty
                                       * since the noreturn analysis last ran */
    int nr_dirty_lost;                /* one could not be noted: look at all */
    int ranges_done;                  /* assign_ranges ran, when b->gen was ranges_gen */
    uint64_t ranges_gen;              /* ... and b->procs.n ranges_n */
    size_t ranges_n;
    CFG_VEC(struct cfg_plt_held) plt_held; /* what PLT stubs' GOT slots hold, sorted
                                            * (cfg_discover.c's plt_name) */
    int plt_held_done;                /* plt_held was made */
    cfg_spans_t spans;                /* the gap sweeps' runs of blocks (cfg_build.c) */
} cfg_builder_t;

/* The procedure with id ID in B's pool. */
static inline cfg_bproc_t *
cfg_bproc_id(const cfg_builder_t *b, uint32_t id)
{
    return &b->pool.chunk[id >> CFG_POOL_SHIFT][id & ((1u << CFG_POOL_SHIFT) - 1)];
}

/* The procedure at index I (< b->procs.n) of B's procedures in entry order. */
static inline cfg_bproc_t *
cfg_bproc_at(const cfg_builder_t *b, size_t i)
{
    return cfg_bproc_id(b, b->procs.v[i]);
}

/* Ask the procedure at index I into the cache, all its lines (walks read fields at any
 * offset), for a walk that comes to it soon. */
static inline void
cfg_bproc_prefetch(const cfg_builder_t *b, size_t i)
{
    const char *p = (const char *)cfg_bproc_at(b, i);
    for (size_t off = 0; off < sizeof(cfg_bproc_t); off += 64)
        qp_prefetch(p + off);
}

/* cfg_bproc_at for a walk of the procedures in entry order, which is not the pool's:
 * the one 8 further on is asked into the cache meanwhile, as the hardware would for an
 * array walked in order. */
#define CFG_WALK_AHEAD 8
static inline cfg_bproc_t *
cfg_bproc_walk(const cfg_builder_t *b, size_t i)
{
    if (i + CFG_WALK_AHEAD < b->procs.n)
        cfg_bproc_prefetch(b, i + CFG_WALK_AHEAD);
    return cfg_bproc_at(b, i);
}

/*
 * For a walk of the procedures in entry order that reads only their noret_sites (most
 * have some): procedure FAR's line that holds the vector is asked into the cache, and
 * the sites of procedure NEAR (whose line was asked for earlier). Indices past the last
 * procedure are ignored. Two misses a procedure overlapped, not waited for in turn.
 */
static inline void
cfg_bproc_prefetch_sites(const cfg_builder_t *b, size_t far, size_t near)
{
    if (far < b->procs.n) {
        const cfg_bproc_t *bp = cfg_bproc_at(b, far);
        qp_prefetch(&bp->noret_sites);
        qp_prefetch((const char *)(&bp->noret_sites + 1) - 1);
    }
    if (near < b->procs.n) {
        const cfg_bproc_t *bp = cfg_bproc_at(b, near);
        if (bp->noret_sites.n > 0)
            qp_prefetch(bp->noret_sites.v);
    }
}

/* cfg_bproc_walk for a walk that reads only the procedure's entry, extent and flags
 * (p.entry to p.end, p.flags): only their lines are asked for, not all six. */
static inline cfg_bproc_t *
cfg_bproc_walk_head(const cfg_builder_t *b, size_t i)
{
    if (i + CFG_WALK_AHEAD < b->procs.n) {
        const cfg_bproc_t *bp = cfg_bproc_at(b, i + CFG_WALK_AHEAD);
        qp_prefetch(&bp->p.entry);
        qp_prefetch(&bp->p.flags);
    }
    return cfg_bproc_at(b, i);
}

/* A copy of BP in a new slot of B's pool, its id in *ID; 0 or QP_ENOMEM. */
int cfg_bpool_add(cfg_builder_t *b, const cfg_bproc_t *bp, uint32_t *id /*OUT*/);

/* Insert a copy of BP at index AT of B's procedures (the caller keeps them sorted);
 * 0 or QP_ENOMEM. */
int cfg_procs_insert(cfg_builder_t *b, size_t at, const cfg_bproc_t *bp);

/*
 * Walk B's procedures in entry order and drop those DROP(ARG, procedure) answers 1 for
 * (0 keeps one; a negative answer keeps it and the rest, and is returned), freeing them;
 * only ids and entries move. The extents that grew, those of the procedures before the
 * dropped ones, are set. Returns how many were dropped, or DROP's error. DROP may read
 * only BP and ARG: while the walk runs the order arrays are half compacted and the
 * lookup index still looks current, so it must not look procedures up.
 */
int cfg_procs_drop(cfg_builder_t *b, int (*drop)(void *arg, const cfg_bproc_t *bp),
                   void *arg);

/* Free every procedure of B's pool and the pool; b->procs and b->entry emptied. */
void cfg_bpool_free(cfg_builder_t *b);

/*
 * Procedure indices: below b->procs.n an index in b->procs; during a gap sweep, the
 * procedures it found so far (kept aside, see cfg_discover_sweep_begin) follow them.
 */
cfg_bproc_t *cfg_discover_proc(const cfg_builder_t *b, uint32_t i);

/* BP is to be built (again): clear its mark and note its entry in b->unbuilt. */
void cfg_mark_unbuilt(cfg_builder_t *b, cfg_bproc_t *bp);

/* BP's blocks, extent or kind changed, or it is new: its runs of blocks are collected
 * again at the next gap sweep (cfg_spans_t). */
void cfg_spans_dirty(cfg_builder_t *b, const cfg_bproc_t *bp);

/* BP is dropped: the runs it had are to go at the next gap sweep. */
void cfg_spans_cut(cfg_builder_t *b, const cfg_bproc_t *bp);

/* BP's calls may go elsewhere now: set bp->nr_dirty and note its entry in b->nr_dirty. */
void cfg_mark_nr_dirty(cfg_builder_t *b, cfg_bproc_t *bp);

/* List the fragments' entries in b->frags (after fragments were tied); 0 or QP_ENOMEM. */
int cfg_list_fragments(cfg_builder_t *b);

/* Free what a procedure under construction owns. */
void cfg_bproc_free(cfg_bproc_t *bp);

/* Collect the procedure entries of the image into B->procs with their extents. */
int cfg_discover(cfg_builder_t *b);

/*
 * Bring the lookup index of cfg_discover_find up to date and keep it as it is until
 * FROZEN is 0 again: while frozen, cfg_discover_find changes nothing (threads may call it
 * at once) and B's procedures must not change.
 */
void cfg_discover_freeze(cfg_builder_t *b, int frozen);

/* Index in B->procs of the procedure whose main extent holds ADDR, or CFG_NONE. Unless
 * the index is frozen (cfg_discover_freeze), the first call after a change rebuilds it:
 * then only one thread may call. */
uint32_t cfg_discover_find(const cfg_builder_t *b, uint64_t addr);

/* Insert new procedures at B->new_entries (splitting extents), clearing the list.
 * Returns the number added. During a sweep they are kept aside. */
int cfg_discover_add_new(cfg_builder_t *b);

/*
 * A gap sweep adds procedures one at a time, each built before the next is looked for.
 * Between begin and end they are kept aside, in an index of their own, instead of being
 * merged into b->procs (an O(n) step each); cfg_discover_find, cfg_discover_proc and
 * cfg_discover_end see b->procs and them as one sorted array would be. End merges
 * them in, sets the extents they changed (theirs and their predecessors'), and frees
 * what begin allocated (also after an error); 0 or QP_ENOMEM.
 */
int cfg_discover_sweep_begin(cfg_builder_t *b);
int cfg_discover_sweep_end(cfg_builder_t *b);

/* The end of procedure I's main extent as cfg_discover_extents would compute it now. */
uint64_t cfg_discover_end(const cfg_builder_t *b, uint32_t i);

/* Recompute every procedure's extent from its neighbours and the image. */
void cfg_discover_extents(cfg_builder_t *b);

/* The procedure (index) whose entry is ADDR, or CFG_NONE. */
static inline uint32_t
cfg_proc_by_entry(const cfg_builder_t *b, uint64_t addr)
{
    uint32_t i = cfg_discover_find(b, addr);
    return i != CFG_NONE && cfg_discover_proc(b, i)->p.entry == addr ? i : CFG_NONE;
}

/* A new cfg_bproc_t.blocks_ver, for blocks that changed (any thread may ask). */
static inline uint64_t
cfg_blocks_changed(cfg_builder_t *b)
{
    return atomic_fetch_add_explicit(&b->blocks_ver, 1, memory_order_relaxed) + 1;
}

/*
 * What one worker of a round of builds (qp_parallel_for) needs to itself: the traversal
 * scratch, and what it found that concerns other procedures, handed to the builder in
 * worker order once the round is over (scratch_flush). Nothing else is written during a
 * round but the procedure being built.
 */
typedef struct cfg_scratch {
    uint8_t *map;                 /* a byte per byte of extent (M_* marks) */
    size_t mapcap;                /* its size */
    cfg_u64_vec_t work;           /* traversal worklist */
    cfg_u64_vec_t new_entries;    /* call/jump targets found (for b->new_entries) */
    CFG_VEC(uint32_t) new_srcs;   /* their CFG_SRC_* bits */
    CFG_VEC(uint32_t) known;      /* pairs: index of a known procedure, CFG_SRC_* bit */
    cfg_str_vec_t strings;        /* reasons made up (for b->strings) */
} cfg_scratch_t;

/* cfg_blocks.c (with cfg_trav.c): building one procedure, and what cfg_build.c's rounds
 * need of it. */
int cfg_build_proc(cfg_builder_t *b, cfg_scratch_t *sc, uint32_t i);
int cfg_build_round(cfg_builder_t *b, const uint32_t *todo, size_t n);
int cfg_scratch_flush(cfg_builder_t *b, cfg_scratch_t *sc);
void cfg_scratch_free(cfg_scratch_t *sc);
void cfg_note_built(cfg_builder_t *b, uint32_t i);
int cfg_gap_only(const cfg_bproc_t *bp);
uint32_t cfg_local_block_at(const cfg_bproc_t *bp, uint64_t addr);
/* cfg_trav.c */
int64_t cfg_slot(const cfg_bproc_t *bp, uint64_t addr);
int cfg_set_unsafe(cfg_str_vec_t *strings, cfg_bproc_t *bp, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* cfg_blocks.c: length of the padding at P (at most N bytes at ADDR): nops, zero bytes
 * and traps. */
size_t cfg_padding_len(const arch_isa_t *isa, const uint8_t *p, size_t n, uint64_t addr);

/* cfg_blocks.c: note BP's "never returns" call edges and count its tail calls (whenever
 * its edges change). 0 or QP_ENOMEM. */
int cfg_note_noret_sites(cfg_bproc_t *bp);

/* cfg_noreturn.c: the noreturn analysis (see there). */
typedef struct cfg_nr_deps cfg_nr_deps_t;
void cfg_nr_deps_free(cfg_nr_deps_t *d);
/* Find the procedures that never return and cut the calls to them (see there). */
int cfg_nr_noreturn_and_prune(cfg_builder_t *b, cfg_u64_vec_t *noret);
/* Procedure I's "may return" as the last analysis found it (the procedures unchanged
 * since): 1 or 0. */
int cfg_nr_may_return(const cfg_builder_t *b, size_t i);

/* True when NAME (possibly "foo@plt" or "foo@@GLIBC_2.2.5") never returns by convention. */
int cfg_name_is_noreturn(const char *name);
/* cfg_gopcln.c: each function of the Go function table TAB[0..LEN) (.gopclntab; TEXT:
 * the address its textStart word holds once loaded where the file holds 0,
 * cfg_gopcln_text_loaded; 0 when unknown: then no function), its entry, its end (the
 * next one's entry: padding included) and its name (in TAB), to FN in table order;
 * FN's negative return stops and is returned. A table of another layout, or
 * inconsistent anywhere, gives none: 0. */
typedef int (*cfg_gopcln_fn_t)(void *arg, uint64_t entry, uint64_t end, const char *name);
int cfg_gopcln_funcs(const uint8_t *tab, size_t len, uint64_t text, cfg_gopcln_fn_t fn,
                     void *arg);
/* The offset of the first header of a function table in BUF[0..LEN) at FROM or after
 * (8-byte aligned; the table of a program linked externally lies inside .data.rel.ro),
 * or LEN. Only cfg_gopcln_funcs can tell whether a table follows. */
size_t cfg_gopcln_find(const uint8_t *buf, size_t len, size_t from);
/* The addend of IMG's R_X86_64_RELATIVE relocation of the textStart word of the table
 * header at VMA (a PIE's: the address of runtime.text once loaded), or 0. */
uint64_t cfg_gopcln_text_loaded(const cfg_image_t *img, uint64_t vma);

/* True when NAME is one of Go's runtime procedures whose calls return although their
 * code does not (the scheduler resumes the caller at the return address). */
int cfg_name_is_resumed(const char *name);

/* cfg_held_addrs's and cfg_interior_entries' answers, computed once per program (cfg_held.c; the first call is not
 * to race another on the same program). */
typedef struct cfg_held_cache {
    cfg_held_t *v;
    size_t n;
    int done;
    unsigned threads; /* the scan's threads: the analysis' (cfg_opts_t.threads) */
    uint64_t *xt;     /* cfg_interior_entries' answer, once asked (xt_done) */
    size_t nxt;       /* its entries */
    int xt_done;      /* xt is computed */
} cfg_held_cache_t;
cfg_held_cache_t *cfg_prog_held_cache(const cfg_prog_t *prog);

#endif
