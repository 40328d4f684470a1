/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The relocation plan's private state, shared by editor/ed_layout.c (where each moved
 * instruction goes, the probes' snippets), editor/ed_plan.c (the public calls, the new
 * code's bytes), editor/ed_reuse.c (new code in the dead bytes of the old text) and the
 * other editor/ed_*.c parts of the plan. Nothing else includes it.
 */
#ifndef QPT_EDITOR_ED_LAYOUT_PRIV_H
#define QPT_EDITOR_ED_LAYOUT_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "base/qp_search.h"
#include "editor/ed.h"

/* The length of a redirect in the old text (x86-64: `jmp rel32`, 5; AArch64: `b`, 4):
 * the program's ISA's emit_jmp. */
#define PAD_LEN(plan) ((plan)->isa->jmp_len)

/* A moved instruction. Slots are millions (chromium: about fifty), so both addresses are
 * 32-bit offsets and the small fields share 16 bits, 20 bytes a slot instead of 32: read
 * the addresses with slot_old and slot_new, the lead and entry bytes with slot_lead and
 * slot_entry_pre. */
typedef struct ed_slot {
    uint32_t old;      /* old address of the instruction, from plan->old_base */
    uint32_t new_;     /* new address of the slot: its BEFORE snippets, then the instruction
                        * (layout-relative; from plan->new_base, the new code's address
                        * once applied) */
    uint32_t stub;     /* its taken-edge stub in plan->stubs, or NO_STUB */
    uint16_t pre;      /* bytes of snippets before the instruction */
    uint16_t post;     /* bytes of snippets after it (fall-through path) */
    uint16_t extra;    /* SLOT_ENTRY: of pre, the bytes of the first snippets, which run for
                        * calls only (ED_PROBE_ENTRY); else the bytes of a taken-edge stub
                        * placed just before new_, falling into the slot (ED_PROBE_FALL_IN),
                        * 0 for none. Never both: a stub falls into no such slot. */
    unsigned len : 6;  /* new length, stretch nop included (<= ARCH_MAX_RELOC + 1) */
    unsigned olen : 4; /* old length (<= ARCH_MAX_INSN) */
    unsigned flags : 6;/* SLOT_* */
} ed_slot_t;

_Static_assert(sizeof(ed_slot_t) == 20, "a slot is 20 bytes");
_Static_assert(ARCH_MAX_RELOC + 1 < 64 && ARCH_MAX_INSN < 16, "a slot's lengths fit their bits");

#define NO_STUB UINT32_MAX
#define NO_HOLE UINT64_MAX

/* A taken-edge stub: the TAKEN snippets of a conditional branch, then a jmp to its target;
 * or, placed just before the target's slot (ED_PROBE_FALL_IN), the snippets alone. */
typedef struct ed_stub {
    uint64_t jcc;      /* old address of the conditional branch */
    uint64_t new_;     /* address of the stub */
    uint64_t target;   /* old address the branch goes to */
    uint32_t len;      /* bytes, jmp included (none when it falls into its target) */
    uint32_t before;   /* the slot (index in plan->lay) it falls into, or NO_STUB: apart */
    uint8_t want_fall; /* a probe asked for ED_PROBE_FALL_IN */
} ed_stub_t;

enum {
    SLOT_SHORT = 1,    /* branch encoded in its rel8 form */
    SLOT_JMP_AFTER = 2, /* a `jmp` follows (fall-through to a block not next in layout) */
    SLOT_BRANCH = 4,   /* a direct jmp or jcc: a candidate for the rel8 form */
    SLOT_XLATE = 8,    /* an indirect jump of unknown targets, translated at run time */
    SLOT_JMP_ADDED = 16, /* its SLOT_JMP_AFTER jumps over a stub falling into the next slot */
    SLOT_ENTRY = 32     /* its extra bytes are snippets for calls only (slot_entry_pre) */
};

typedef struct ed_seg {
    uint64_t start, end; /* an old extent (main part or cold fragment) of a moved proc */
    uint32_t owner;      /* the moved procedure */
} ed_seg_t;

/* An AArch64 switch table whose `adr` forms a new base in the new code (ed_anchor.c). */
typedef struct ed_anchor {
    uint64_t adr;   /* old address of the adr */
    uint64_t base;  /* the base it forms in the new code */
    uint32_t table; /* index in prog->tables */
} ed_anchor_t;

struct ed_plan {
    const cfg_prog_t *prog;   /* the program */
    const arch_isa_t *isa;    /* its instruction set (cfg_image_isa): every relocation
                               * and jump of the new code goes through it */
    ed_opts_t opts;           /* options */
    const char **leave;       /* opts.leave sorted (decide only), or NULL */
    size_t nleave;            /* how many */
    const char **reason;      /* per procedure: why it stays, NULL when it moves */
    uint64_t *dropped;        /* redirects not written: entries and interior entries that
                               * only direct branches reach, in the way of a redirect
                               * (settle_unpadded: those branches must all move) ... */
    uint32_t *dropped_owner;  /* ... and the procedure of each (sorted by address) */
    size_t ndropped, dropped_cap;
    char **owned;             /* reasons formatted here */
    size_t nowned;
    uint64_t *groups;         /* FDEs over several procedures: (first, last) pairs of
                               * procedures that move together or not at all */
    size_t ngroups, capgroups;
    ed_slot_t *lay;           /* every moved instruction, in layout (new address) order */
    uint64_t old_base;        /* the old addresses of slots are offsets from this ... */
    uint64_t new_base;        /* ... and their new ones from this: 0 until applied, then
                               * plan->text */
    uint64_t *fall;           /* per SLOT_JMP_AFTER slot, in layout order: the old address
                               * its added jmp goes to (kept apart: slots are millions) */
    size_t nfall;
    uint32_t *idx;            /* indices into lay, sorted by old address (lookups) */
    size_t nslots;
    qp_buckets_t buckets;     /* over idx's old addresses, from the lowest slot's,
                               * 1 << BUCKET_SHIFT bytes a bucket */
    ed_seg_t *segs;           /* old extents of moved procedures, sorted */
    size_t nsegs;
    uint64_t *seg_new_end;    /* per segment: new address after its last instruction */
    const uint64_t *xt;       /* interior entries (cfg_interior_entries: the program's) */
    size_t nxt;
    uint32_t *table_by_jump;  /* the program's jump tables by jump address (then index) */
    uint8_t *table_alone;     /* per jump table: no other table shares its bytes */
    ed_probe_t *probes;       /* the drivers' snippets, sorted by address then place */
    size_t nprobes;
    size_t nprobes_placed;    /* probes that found their instruction during layout */
    ed_stub_t *stubs;         /* taken-edge stubs, after all slots in the new code */
    size_t nstubs;
    uint64_t counters;        /* address of counter 0 */
    uint64_t exit_hook;       /* address of the runtime's exit hook */
    uint64_t fork_hook;       /* address of the runtime's fork hook */
    uint64_t thread_hook;     /* address of the runtime's thread hook */
    uint64_t exec_hook;       /* address of the runtime's exec hook */
    uint64_t xlate;           /* the translation stub (arch_emit_xlate_stub), then its
                               * table, after the stubs: layout-relative until applied;
                               * 0 when no jump is translated */
    size_t nxlate;            /* jumps translated */
    uint64_t *xlate_sites;    /* translated jumps (old addresses, ascending) and ... */
    uint64_t *xlate_counters; /* ... their miss counters (ed_plan_set_xlate_miss) */
    size_t nxlate_sites;
    ed_snippet_t *snips;      /* ED_SNIP_CODE snippets, by index */
    size_t nsnips;
    uint64_t *lock_sites;     /* ARCH_INC_SWITCH: where each increment's first byte went */
    size_t nlock_sites, lock_cap;
    uint32_t *chunk;          /* per moved procedure, in layout order: its first slot
                               * (nchunks + 1 entries: the last is nslots) */
    size_t nchunks, chunkcap;
    uint64_t *chunk_at;       /* reuse_text: per chunk, its layout-relative address in
                               * a hole of the old text, or NO_HOLE ... */
    uint64_t *stub_at;        /* ... and per stub */
    uint64_t mirror;          /* reuse_text: the old address whose page the new code's
                               * first bytes mirror (0: no reuse) ... */
    uint64_t mirror_len;      /* ... for this many bytes: new code at layout-relative
                               * address A (< mirror_len) is written to old address
                               * mirror + A */
    uint64_t overflow;        /* layout-relative start of what found no hole */
    uint64_t *holes;          /* (start, end, fill) triples, layout-relative */
    size_t nholes;
    int laid_out;             /* layout() has run */
    size_t collect_grain;     /* testing: the instructions a part of the slots' collection
                               * reserves, about (0: ed_layout.c's COLLECT_GRAIN); the
                               * plan is the same for any, and the same for the slots a
                               * part of the index by old address takes (plan->idx;
                               * 0: INDEX_GRAIN) */
    uint64_t text;            /* address of the new code */
    uint64_t text_size;       /* its size */
    ed_stats_t stats;         /* figures */
    uint8_t *copied;          /* per procedure: why its code must keep its bytes, even
                               * in place (edl_copied_t), 0 when it need not */
    const char **unfit;       /* per procedure left in place: why it cannot be patched
                               * in place either, NULL when it can (ed_inplace.c) */
    ed_probe_t *ip_probes;    /* the probes of procedures left in place (ED_PROBE_INPLACE),
                               * sorted by address */
    size_t nip_probes;
    ed_inplace_t *inplace;    /* the driver's in-place entries (ed_plan_set_inplace), owned
                               * until edl_inplace_apply takes them; or NULL */
    ed_anchor_t *anchors;     /* AArch64 tables whose base moves (ed_anchor.c), by adr */
    size_t nanchors, anchor_cap;
    uint64_t *pads;           /* the landing pads, as ed_unwind_landing_pads gives them,
                               * from edl_decide's read of the unwind tables (kept for
                               * ed_inplace_create: a second read costs more) ... */
    size_t npads, cappads;
    int pads_rc;              /* ... and its answer; 1 when not read (then read again) */
};

/* The K-th slot by old address. */
#define SLOT(plan, k) (&(plan)->lay[(plan)->idx[k]])

/* The old address of slot S; its new address (layout-relative until applied). */
static inline uint64_t
slot_old(const ed_plan_t *plan, const ed_slot_t *s)
{
    return plan->old_base + s->old;
}

static inline uint64_t
slot_new(const ed_plan_t *plan, const ed_slot_t *s)
{
    return plan->new_base + s->new_;
}

/* Bytes of the taken-edge stub that falls into slot S, placed just before its new_. */
static inline uint32_t
slot_lead(const ed_slot_t *s)
{
    return (s->flags & SLOT_ENTRY) ? 0 : s->extra;
}

/* Bytes of slot S's BEFORE snippets that run for calls only (the first ones). */
static inline uint32_t
slot_entry_pre(const ed_slot_t *s)
{
    return (s->flags & SLOT_ENTRY) ? s->extra : 0;
}

/* Old addresses per bucket of the lookup index: a lookup searches a few slots, not all. */
#define BUCKET_SHIFT 6

/* Bytes of a slot in the new code: snippets, instruction, snippets, added jmp (a stub
 * falling into it, lead bytes, comes before new_ and is not counted here). */
static inline uint64_t
slot_size(const ed_plan_t *plan, const ed_slot_t *s)
{
    return (uint64_t)s->pre + s->len + s->post
        + ((s->flags & SLOT_JMP_AFTER) ? PAD_LEN(plan) : 0);
}

/* ed_layout.c, for ed_reuse.c */

/* The procedure that owns the code at ADDR (a fragment's parent), or CFG_NONE. */
uint32_t edl_owner_at(const cfg_prog_t *prog, uint64_t addr);
/* The held addresses inside a block, not at its start: sorted, unique (ed_select.c). */
int edl_held_mid_block(const cfg_prog_t *prog, uint64_t **out, size_t *n);

/* Old addresses of procedure PI that need a redirect (*OUT, *N of them, sorted; *NIND of
 * them not its entry). 0 or QP_ENOMEM. */
int edl_collect_pads(const ed_plan_t *plan, uint32_t pi, uint64_t **out, size_t *n,
                     uint32_t *nind);

/* Every procedure's redirects (edl_collect_pads), made on the pool: procedure PI's are
 * v[off[PI] .. off[PI + 1]), nind[PI] of them not its entry; none for a fragment. */
typedef struct edl_pads {
    uint64_t *v;
    size_t *off;            /* nprocs + 1 */
    uint32_t *nind;         /* nprocs */
} edl_pads_t;
/* *OUT for every procedure of PLAN (edl_pads_free frees it). 0 or QP_ENOMEM. */
int edl_pads_all(const ed_plan_t *plan, edl_pads_t *out);
void edl_pads_free(edl_pads_t *p);

/* The index of the first moved extent that ends after OLD (nsegs: none). */
size_t edl_seg_after(const ed_plan_t *plan, uint64_t old);
/* The moved extent containing OLD (*IDX its index when IDX is not NULL), or NULL. */
const ed_seg_t *edl_seg_at(const ed_plan_t *plan, uint64_t old, size_t *idx);

/* The translation table: its address (8-byte aligned after the stub) and size. */
uint64_t edl_xlate_table_at(const ed_plan_t *plan);
uint64_t edl_xlate_table_size(const cfg_prog_t *prog);

/* After ed_plan_apply: the new address of the slot of the instruction at OLD (where a
 * redirect there jumps), or 0 when OLD starts no moved instruction. */
uint64_t edl_slot_new(const ed_plan_t *plan, uint64_t old);
/* ... and of the instruction itself, past the snippets before it; 0 likewise. */
uint64_t edl_slot_insn(const ed_plan_t *plan, uint64_t old);
/* The slot of the instruction at OLD, or NULL when OLD starts no moved instruction. */
const ed_slot_t *
edl_slot_at(const ed_plan_t *plan, uint64_t old);

/* ed_anchor.c, for ed_layout.c: AArch64 switch tables whose base moves */

/* After the layout is final: the tables whose relocated `adr` forms a new base and
 * their bases (plan->anchors); those that cannot counted in stats.ntables_kept. 0 or
 * QP_ENOMEM. */
int edl_anchors_plan(ed_plan_t *plan);
/* The anchor of the `adr` at old address ADR, or NULL. */
const ed_anchor_t *edl_anchor_at(const ed_plan_t *plan, uint64_t adr);
/* After the new code is written: the tables' entries rewritten for the new bases, each
 * old `adr` a jump to its new one. 0 or QP_E*. */
int edl_anchors_apply(ed_plan_t *plan, const qp_space_ops_t *ops, void *space);
/* In BUF (the new text as emit_code fills it, at plan->text): the padding nop of each
 * anchor's one-instruction `adr` moved past its `br`, where no dispatch runs it. */
void
edl_anchors_unpad(const ed_plan_t *plan, uint8_t *buf);

/* ed_labels.c, for ed_layout.c */

/* A label: an address a computed goto of a moved procedure may jump to. */
typedef struct edl_label {
    uint64_t addr;  /* a block start that a computed goto of OWNER may jump to */
    uint32_t owner; /* the moved procedure */
} edl_label_t;

/* A run of label words in read-only data: a table of labels, maybe. */
typedef struct edl_run {
    uint64_t lo, hi; /* [lo, hi): words, each a label of OWNER */
    uint32_t owner;
    uint32_t refs; /* references from OWNER's code */
    int bad;       /* a reason not to touch it was found */
} edl_run_t;

/*
 * The runs of label words (the NLAB labels LAB, sorted by address) in IMG's read-only
 * data, into *OUT (malloc'ed, sorted, not overlapping) and *N: in a PIE the words of
 * RELATIVE relocations, else every aligned word. No word of a section that another
 * loaded section overlaps is one. 0 or QP_ENOMEM.
 */
int edl_label_runs(const cfg_image_t *img, const edl_label_t *lab, size_t nlab,
                   edl_run_t **out /*OUT*/, size_t *n /*OUT*/);

/* Retarget the tables of label addresses that only computed gotos of one moved procedure
 * read (see there). 0 or QP_E*. */
int edl_retarget_labels(ed_plan_t *plan, const qp_space_ops_t *ops, void *space);

/* ed_inplace.c, for ed_layout.c */

/* Patch the points of plan->ip_probes in place, their trampolines in a new region of
 * SPACE (stats: ninplace, bytes_inplace). 0 or QP_E*. */
int edl_inplace_apply(ed_plan_t *plan, const qp_space_ops_t *ops, void *space);

/* ed_reuse.c, for ed_layout.c */

/* Plan new code in the old text (plan->holes, plan->chunk_at, plan->stub_at,
 * plan->mirror, plan->overflow), or nothing when it would save too little. 0 or
 * QP_ENOMEM. */
int edl_plan_reuse(ed_plan_t *plan);
/* No way out of code that stays (KEEP: procedures that keep their bytes, or NULL) lands
 * in bytes that new code or a redirect took: 0, or QP_EBUG with the first in the stats.
 * ALL: every procedure's redirects (edl_pads_all), or NULL: collected where needed. */
int edl_check_kept_exits(ed_plan_t *plan, const edl_pads_t *all, const uint8_t *keep);

/* As the plain layout's assign, with the chunks and stubs that found a hole there, the
 * rest from the overflow; returns the size from layout-relative 0 (the mirror's first
 * byte). */
uint64_t edl_assign_reuse(ed_plan_t *plan);

/* ed_layout.c: the stubs that fall into their slots, placed just before them (after
 * every slot has its address). */
void edl_place_fall_stubs(ed_plan_t *plan);

/* The chunk of slot I (a procedure, or the procedures one FDE covers). */
size_t edl_chunk_of(const ed_plan_t *plan, size_t i);

/* ed_select.c, for ed_layout.c: which procedures move */

/* Which procedures move and which stay: plan->reason[i] says why procedure I stays
 * (NULL: it moves), plan->copied and the jump targets are filled; *VOUCHED gets
 * edl_vouched_procs' answer, which it read (the caller's to free, NULL on failure).
 * 0 or QP_ENOMEM. */
int edl_decide(ed_plan_t *plan, uint8_t **vouched /*OUT*/);
/* Why each procedure left in place cannot be patched there either (plan->unfit). */
int edl_decide_unfit(ed_plan_t *plan, const uint8_t *vouched);
/* ... for AArch64 code with nothing against it but the missing in-place patcher (the
 * very pointer, compared by ed_kept_calls.c). */
extern const char edl_unfit_a64[];

/* ed_kept_calls.c, for ed_layout.c */

/* AArch64: the direct calls and jumps of code left in place to moved procedures' entries
 * go straight to the new entries (stats.nkept_branches). 0 or QP_E*. */
int edl_retarget_kept_calls(ed_plan_t *plan, const qp_space_ops_t *ops, void *space);
/* The procedures something vouches for (a symbol, an FDE, a direct call...): not data in
 * .text. A malloc'ed byte per procedure, or NULL. */
uint8_t *edl_vouched_procs(const cfg_prog_t *prog);
/* Does block B end in an indirect jump whose targets are unknown? */
int edl_block_unresolved(const cfg_prog_t *prog, const cfg_block_t *b);
/* The owner of the redirect dropped at ADDR (plan->dropped), or CFG_NONE. */
uint32_t edl_dropped_at(const ed_plan_t *plan, uint64_t addr);
/* Will jump table T be retargeted to the new code whenever procedure PI moves? */
int edl_table_sure(const ed_plan_t *plan, uint32_t t, uint32_t pi);
/* The first entry of plan->table_by_jump whose table's jump is at ADDR or above
 * (ntables: none). */
size_t edl_tables_from(const ed_plan_t *plan, uint64_t addr);
/* plan->table_by_jump and plan->table_alone, from the program's tables. */
int edl_index_tables(ed_plan_t *plan);
/* Sort the names of opts.leave. */
int edl_sort_leave(ed_plan_t *plan);
/* Append X to the growable array *V (*N used, *CAP allocated). 0 or QP_ENOMEM. */
int edl_push_u64(uint64_t **v, size_t *n, size_t *cap, uint64_t x);

/* plan->copied: why a procedure's bytes must stay as they are, unpatched. */
typedef enum edl_copied {
    EDL_COPIED_RANGE = 1,  /* the program may copy its code (a code range it hands out) */
    EDL_COPIED_UNWIND = 2, /* its unwind tables cannot be read or disagree */
    EDL_COPIED_V8 = 3,     /* one of V8's builtins: V8 may run a copy of them */
} edl_copied_t;

/* ed_layout.c, for ed_plan.c: the layout and the probes' snippets */

/* Where the switchable increments (ARCH_INC_SWITCH) of a part of the new code went. */
typedef struct edl_lock_sites {
    uint64_t *v;                 /* each increment's first byte, in layout order */
    size_t n, cap;
} edl_lock_sites_t;

/* The position (in idx) of the first slot at OLD or above; nslots when there is none. */
size_t edl_slot_lower(const ed_plan_t *plan, uint64_t old);
/* Probes in order: by address, place, calls-only first, then snippet kind and counter
 * (a qsort comparison of ed_probe_t). */
int edl_cmp_probe(const void *a, const void *b);
/* Note the switchable increment at ADDR (SITES: when writing; NULL when sizing). */
int edl_note_lock_site(edl_lock_sites_t *sites, uint64_t addr);
/* Emit the snippets of the probes at (OLD, AT) from ADDR into OUT (CAP bytes); returns
 * their total size. With OUT == NULL only sizes them. */
int edl_emit_probes(const ed_plan_t *plan, uint64_t old, int at, uint64_t addr, uint8_t *out,
                    size_t cap, edl_lock_sites_t *sites);
/* The miss counter of the jump translated at OLD, relative to the table, or 0. */
int32_t edl_xlate_miss_rel(const ed_plan_t *plan, uint64_t old);
/* The addresses the translation table's keys are relative to: the loaded sections'. */
void edl_xlate_range(const cfg_prog_t *prog, uint64_t *lo, uint64_t *hi);
/* Is procedure P's entry a key of the translation table? */
int edl_xlate_key(const cfg_proc_t *p, uint64_t lo, uint64_t hi);
/* Slots of the translation table (a power of two). */
uint64_t edl_xlate_slots(const cfg_prog_t *prog);
/* A branch target: the new address of a moved instruction, else the old address. */
uint64_t edl_map_target(const ed_plan_t *plan, uint64_t target);
/* The target of a branch at FROM: a jump inside a procedure to its own entry skips the
 * snippets that run for calls only (ED_PROBE_ENTRY). */
uint64_t edl_map_branch(const ed_plan_t *plan, uint64_t from, uint64_t target);
/* plan->segs: the old extents of the moved procedures. 0 or QP_ENOMEM. */
int edl_build_segments(ed_plan_t *plan);
/* The new end of every segment: after its last instruction (and added jmp); on the
 * pool. 0 or QP_E*. */
int edl_segment_ends(ed_plan_t *plan);
/* Lay out the moving code (REUSE: in the old text's holes where it saves enough): every
 * slot's size and address, the stubs, the lookup index. 0 or QP_E*. */
int edl_layout(ed_plan_t *plan, int reuse);

#endif /* QPT_EDITOR_ED_LAYOUT_PRIV_H */
