/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_CFG_TRAV_PRIV_H
#define QP_CFG_TRAV_PRIV_H
/*
 * PURPOSE: what the two halves of building one procedure share: the traversal
 * (cfg_trav.c) leaves its marks and findings in a trav_t, from which cfg_blocks.c forms
 * blocks and edges. Only cfg_trav.c and cfg_blocks.c include this header.
 */
#include "cfg/cfg_priv.h"

/* Traversal marks, one byte per byte of a procedure's extent. */
enum {
    M_START = 1,     /* an instruction starts here */
    M_INSIDE = 2,    /* inside an instruction, not its first byte */
    M_LEADER = 4,    /* a block starts here */
    M_LEN_SHIFT = 3, /* bits 3..6 of a start byte: the instruction's length */
    M_END = 0x80,    /* the instruction ends its block (branch, call, return, trap) */
};
#define M_LEN(m) (((m) >> M_LEN_SHIFT) & 15)

typedef struct trav {
    cfg_builder_t *b;
    cfg_scratch_t *sc;        /* this worker's scratch and findings */
    cfg_bproc_t *bp;
    uint32_t self;            /* index of bp in b->procs */
    cfg_u64_vec_t pending;    /* indirect jumps not yet looked at */
    CFG_VEC(arch_insn_t) last;/* per local block: its last instruction */
    CFG_VEC(uint32_t) labels; /* computed-goto targets: local blocks (see form_edges) */
    cfg_u64_vec_t ptr_jumps;  /* jumps through a loaded pointer: tail calls */
    int labels_done;          /* labels computed */
    CFG_VEC(struct hoist_proof) proofs; /* tables whose hoisted base is to be proven */
    CFG_VEC(struct slot_proof) slot_proofs; /* tables whose address a stack slot holds */
    const cfg_u64_vec_t *no_far; /* jumps whose far `lea`s did not hold: not tried again */
    const cfg_u64_vec_t *stops; /* sorted starts of other data that scanned tables stop
                                 * before (cfg_scan_stops of the passes before) */
    unsigned unresolved;      /* indirect jumps whose targets stay unknown */
    cfg_u64_vec_t data_refs;  /* its own bytes read by its rip-relative operands */
    cfg_u64_vec_t gap_entries;/* code of its own bytes swept because of them */
    cfg_u64_vec_t own_addrs;  /* code addresses of its own bytes its code forms (adr,
                               * adrp + add): entries when its flow does not reach them */
} trav_t;

/* A table matched with a base register loaded far before its jump (an `lea` the
 * procedure has among many), to be proven once the procedure is traversed: no way into
 * the jump passes another write of the register after the lea (cfg_verify_hoisted). */
typedef struct hoist_proof {
    uint64_t jump, lea;
    uint8_t reg;
} hoist_proof_t;

/* A table whose address the jump loads from a stack slot (cfg_slot.c): proven once the
 * procedure is traversed that every load of the slot at LOAD reads what STORE put there,
 * the address formed by the instructions from FIRST to STORE. */
typedef struct slot_proof {
    uint64_t jump, load, store, first;
    int64_t slot; /* the slot's offset from sp */
} slot_proof_t;

/* More possible targets than this for one computed jump: leave it unresolved (the
 * editor translates it at run time) rather than bloat the graph. */
#define CFG_MAX_INDIRECT 1024

/* The traversal's helpers that forming blocks and edges uses (cfg_trav.c). */
int cfg_decode_at(cfg_builder_t *b, uint64_t addr, uint64_t limit, arch_insn_t *in);
int cfg_callee_noreturn(const cfg_builder_t *b, uint64_t target);
int cfg_indirect_call_noreturn(const cfg_image_t *img, const arch_insn_t *in);
uint64_t cfg_lock_skip_target(cfg_builder_t *b, uint64_t next, uint64_t target);
int cfg_traverse(trav_t *t);
int cfg_verify_hoisted(trav_t *t, cfg_u64_vec_t *no_far);
uint64_t
cfg_range_end(const cfg_bproc_t *bp, uint64_t addr);

/* Tables through a stack slot (cfg_slot.c). cfg_slot_find: for the jump J whose table
 * JT loads its address from a slot (JT->slot_load), the one store to the slot and the
 * address it stores: 1 with JT->table set and PF filled, else 0 (JT->table untouched).
 * cfg_slot_holds: the proof of PF over the traversed procedure: 1, 0, or QP_ENOMEM. */
int
cfg_slot_find(trav_t *t, uint64_t j, arch_jtab_t *jt, slot_proof_t *pf /*OUT*/);
int
cfg_slot_holds(trav_t *t, const slot_proof_t *pf);

/* Every way from the places in Q through T's traversed code meets DEF before USE
 * (cfg_trav.c; the walk of hoisted bases' and spilled tables' proofs): 1, 0, or
 * QP_ENOMEM. */
int
cfg_ways_pass(trav_t *t, cfg_u64_vec_t *q, uint8_t *seen, uint64_t def, uint64_t use);

/* Is the instruction at A (in T's decoded code) a rip-relative `lea` of read-only data
 * into a register? 1 with *IN decoded and *REG its destination, else 0. END bounds the
 * decoding (cfg_trav.c). */
int
cfg_rodata_lea(trav_t *t, uint64_t a, uint64_t end, arch_insn_t *in /*OUT*/, uint8_t *reg /*OUT*/);

/* Where scanned tables end (cfg_scanend.c). cfg_scan_cut: cut the table TAB that T's
 * traversal just matched, when scanned, before the first address of T->stops past its
 * base: 1 when it keeps 2 entries or more, else 0 (not a table). cfg_scan_stops, after
 * traversal PASS (0 the first): update the sorted STOPS - drop (into the sorted REJECTED,
 * never taken again) those this traversal did not see, add the first start of other data
 * (another table's base, read-only data a `lea` forms) that each scanned
 * table runs past: 1 when STOPS changed (traverse again with them), 0, or QP_ENOMEM. */
int
cfg_scan_cut(const trav_t *t, cfg_table_t *tab);
int
cfg_scan_stops(trav_t *t, cfg_u64_vec_t *stops, cfg_u64_vec_t *rejected, unsigned pass);

#endif
