/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_ED_H
#define QP_ED_H
/*
 * PURPOSE: the memory-only half of the editor, shared by the static rewriter and the
 * live-process mode: which procedures move, where every instruction goes (the global
 * old-to-new map), the relocated code with the drivers' snippets, the redirects in the old
 * text, and the unwind tables for the new code. It writes only through qp_space_ops_t and
 * never knows whether it edits a file image or a live process: no libelf, no BFD, no
 * ptrace here. Lifetimes: a plan points into its cfg_prog_t, which must outlive it.
 */
#include <stddef.h>
#include <stdint.h>

#include "arch/arch.h"
#include "cfg/cfg.h"

/*****************************************************************************
 * Address spaces: the only thing that differs between static and live editing
 */

typedef struct qp_space_ops {
    /* Read LEN bytes at ADDR of the target. 0 or QP_E*. */
    int (*read)(void *self, uint64_t addr, void *buf, size_t len);
    /* Write LEN bytes at ADDR (existing code or memory from alloc). 0 or QP_E*. */
    int (*write)(void *self, uint64_t addr, const void *buf, size_t len);
    /*
     * Reserve LEN bytes of new memory whose every byte is within rel32 reach (+-2 GiB)
     * of [LO, HI), with PROT (ED_PROT_* bits); *OUT gets its address. 0 or QP_E*.
     */
    int (*alloc_near)(void *self, uint64_t lo, uint64_t hi, size_t len, uint32_t prot,
                      uint64_t *out /*OUT*/);
    /*
     * Optional (NULL where the old code may be running: a live process). As alloc_near,
     * for LEN + EXTRA bytes, whose first LEN show the target's bytes at OLD (page-aligned,
     * loaded from the file) at a new address: writes there land in those bytes, which
     * the old addresses then show too; the EXTRA bytes after them are new memory, from
     * *SKIP bytes into the next page (a multiple of 64: the static editor puts them at
     * the page offset their file bytes get, so that the file needs no padding before
     * them). The static editor maps the same file bytes twice.
     */
    int (*alloc_over)(void *self, uint64_t lo, uint64_t hi, uint64_t old, size_t len,
                      size_t extra, uint32_t prot, uint64_t *out /*OUT*/,
                      size_t *skip /*OUT*/);
    /*
     * Optional (NULL: a live process). Where the space keeps the LEN bytes at ADDR, all
     * of one piece of new memory from alloc_near or alloc_over's EXTRA, for writing them
     * in place (the relocated code is emitted there, not copied in: chromium's few
     * hundred MB are not held twice); NULL when it keeps them otherwise.
     */
    uint8_t *(*bytes)(void *self, uint64_t addr, size_t len);
} qp_space_ops_t;

enum {
    ED_PROT_R = 1u << 0,
    ED_PROT_W = 1u << 1,
    ED_PROT_X = 1u << 2,
};

/*****************************************************************************
 * Unwind tables for relocated code (ed_unwind.c)
 */

/*
 * Where an old code address went: the new address, or 0 when the code at OLD was not
 * relocated. For an address inside an instruction's "slot" the slot start is returned:
 * map(old instruction) is where the snippets placed before that instruction begin.
 */
typedef uint64_t (*ed_map_fn)(void *arg, uint64_t old);

/*
 * A piece of old code and where it is now: the bytes [OLD, OLD + OLEN) of a run of moved
 * instructions (in old address order) whose new code [NEW_, NEW_ + NLEN) is contiguous
 * (NEW_ != 0), or bytes outside every moved procedure (NEW_ == 0, NLEN == OLEN: they stay
 * where they are). Return 0 to go on, negative to stop with that error.
 */
typedef int (*ed_piece_fn)(void *arg, uint64_t old, uint64_t olen, uint64_t new_,
                           uint64_t nlen);

/* Cut [LO, HI) into pieces for FN: see ed_plan_pieces. */
typedef int (*ed_pieces_fn)(void *arg, uint64_t lo, uint64_t hi, ed_piece_fn fn, void *fnarg);


typedef struct ed_unwind_out {
    uint8_t *data;          /* the blob: new CIEs/FDEs, new LSDAs, new .eh_frame_hdr */
    size_t size;            /* its size */
    uint64_t eh_frame;      /* address of the new FDEs (start of the blob) */
    size_t eh_frame_size;   /* bytes of CIE/FDE records, terminator included */
    uint64_t hdr;           /* address of the new .eh_frame_hdr */
    size_t hdr_off;         /* its offset in data (the bytes before it go at eh_frame) */
    size_t hdr_size;        /* its size */
    uint32_t nfde_moved;    /* FDEs rewritten for relocated code */
    uint32_t nlsda_moved;   /* LSDAs rewritten */
    uint32_t nfde_failed;   /* FDEs not read or not rewritten (left out, or kept old) */
    uint32_t nfde_old;      /* FDEs only in the old .eh_frame (listed there, or unread) */
    uint32_t nold_refs;     /* entries of the new search table that point into the old
                             * .eh_frame: then it must stay where it is */
    uint64_t fail_lo;       /* ED_UNWIND_STRICT failures: the old range of the FDE */
    uint64_t fail_hi;       /* (kept when the build fails; 0 when unknown) */
} ed_unwind_out_t;

enum {
    /*
     * Copy the FDEs of code that did not move (or could not be rewritten) into the blob
     * too, pointing at their old LSDAs: the blob's CIE/FDE part is then a complete
     * .eh_frame (nfde_old == 0) that can replace the old section, e.g. for gdb, which
     * reads the section named .eh_frame and never .eh_frame_hdr.
     */
    ED_UNWIND_ALL = 1u << 0,
    /*
     * Never leave moved code without its unwind entry: an FDE some of whose code moved
     * but that cannot be rewritten (or whose new range would overlap another new FDE)
     * fails the build with its error, its old range in out->fail_lo/fail_hi. Without it
     * such an FDE is counted in nfde_failed and the moved code has no FDE.
     */
    ED_UNWIND_STRICT = 1u << 1,
};

/*
 * Build unwind information for relocated code, to be placed at address AT: for every FDE
 * of IMG's .eh_frame whose start MAP relocates, a copy (and its CIE) with every location
 * (pc_begin, pc_range, DW_CFA_advance_loc*, DW_CFA_set_loc) mapped through MAP, and a
 * copy of its LSDA (.gcc_except_table: call-site start/length/landing pad mapped; action
 * and type tables kept); then a new .eh_frame_hdr whose sorted search table covers the
 * old FDEs of code that did not move and the new ones. Returns 0 and fills *OUT (free
 * out->data with free()), QP_EFORMAT when the old tables cannot be parsed, QP_ENOMEM.
 * An image without .eh_frame gives an empty blob (size 0).
 * An FDE that cannot be rewritten (unknown CFA opcode, unsupported augmentation, a
 * landing pad MAP does not know, a location MAP moves backwards) is left out of the new
 * tables and counted in nfde_failed; its old FDE stays in the search table. AT should be
 * a multiple of 8: the blob then has the same size for every such AT (unless a
 * pc-relative field cannot reach, QP_ERANGE), so it can be sized with AT = 0 first.
 * A landing pad that would fall on the start of its new FDE (offset 0 means "none")
 * gets an explicit LPStart in the new LSDA.
 */
int ed_unwind_build(const cfg_image_t *img, ed_map_fn map, void *arg, uint64_t at,
                    ed_unwind_out_t *out /*OUT*/);

/* How old code addresses map, for ed_unwind_build_ex (ARG is passed to each). */
typedef struct ed_unwind_map {
    /* Instruction starts; other addresses of moved code: the next moved instruction. */
    ed_map_fn map;
    /*
     * Optional: the new address just past the relocated instruction that ends at OLD,
     * or 0 when unknown. It says what MAP cannot when OLD is also the start of another
     * relocated procedure (ends of FDEs and call sites).
     */
    ed_map_fn map_end;
    /* Optional: the new address of the instruction starting at OLD, else 0 (landing
     * pads must be relocated instructions themselves). */
    ed_map_fn map_insn;
    /*
     * Optional: the moved runs of an old range. With it, an FDE moves when any of its
     * code moved, and its new range is exactly that of its moved instructions, which
     * must be contiguous (else the FDE fails); without it, when MAP knows its start.
     */
    ed_pieces_fn pieces;
    void *arg;
} ed_unwind_map_t;

/* As ed_unwind_build, with the maps of M and FLAGS (ED_UNWIND_*; QP_EINVAL for others).
 */
int
ed_unwind_build_ex(const cfg_image_t *img, const ed_unwind_map_t *m, uint64_t at,
    uint32_t flags, ed_unwind_out_t *out /*OUT*/);

/* As ed_unwind_build_ex, with the .eh_frame_hdr at HDR_AT (a multiple of 4) rather than
 * right after the rest (HDR_AT 0): out->data's first out->hdr_off bytes go at AT, the
 * rest at HDR_AT. The sizes do not depend on either address. */
int
ed_unwind_build_at(const cfg_image_t *img, const ed_unwind_map_t *m, uint64_t at,
    uint64_t hdr_at, uint32_t flags, ed_unwind_out_t *out /*OUT*/);

/*
 * The old tables of an image read and checked once for several builds (the rewrite
 * sizes its tables, then builds them at their address: reading cc1's .eh_frame took as
 * long as a third of a build). ed_unwind_old_read: 0 (*OUT to free with
 * ed_unwind_old_free, whatever the tables hold: ed_unwind_build_old says what
 * ed_unwind_build_at would of them), QP_EINVAL or QP_ENOMEM.
 * ed_unwind_build_old: ed_unwind_build_at of O's image; the builds from one O run one
 * after another, each as if alone.
 */
typedef struct ed_unwind_old ed_unwind_old_t;
int
ed_unwind_old_read(const cfg_image_t *img, ed_unwind_old_t **out /*OUT*/);
void
ed_unwind_old_free(ed_unwind_old_t *o);
int
ed_unwind_build_old(ed_unwind_old_t *o, const ed_unwind_map_t *m, uint64_t at,
    uint64_t hdr_at, uint32_t flags, ed_unwind_out_t *out /*OUT*/);

/* A code location that unwind tables name: it must be an instruction boundary. */
enum {
    ED_LOC_CFA,      /* where the FDE's CFA program changes the rules */
    ED_LOC_CS_START, /* where a call-site range of its LSDA starts */
    ED_LOC_CS_END,   /* ... ends */
};
typedef struct ed_code_loc {
    uint64_t addr;
    uint32_t kind; /* ED_LOC_* */
} ed_code_loc_t;

/* What ed_unwind_fdes says of one FDE. */
typedef struct ed_fde_info {
    uint64_t lo, hi;      /* the code it covers */
    int err;              /* 0, or why its tables could not be rewritten if its code moved
                           * (QP_EFORMAT, QP_EUNSUPP, QP_ERANGE) */
    const uint64_t *pads; /* the landing pads its LSDA names (absolute), npads of them */
    size_t npads;
    const char *defect;   /* NULL, or in words what is wrong with its tables when err is
                           * set: a malformed CFA program or LSDA, or an inconsistency
                           * between .eh_frame_hdr and .eh_frame (then [lo, hi) is the
                           * code the unwinder may take it for: it must stay in place) */
    const ed_code_loc_t *locs; /* the code locations its CFA program and LSDA name */
    size_t nlocs;
} ed_fde_info_t;

/*
 * Call FN(ARG, INFO) for every FDE of IMG whose range can be read, in .eh_frame order:
 * what the plan needs before it moves code (ed_layout.c). ERR is the result of rewriting
 * the FDE and its LSDA for code shifted as a whole, so it names what no layout can
 * represent (formats, encodings, opcodes); INFO, PADS and LOCS are valid during the call
 * only. The .eh_frame_hdr table is what the unwinder searches, and it takes an FDE's
 * start from there: an FDE that the table does not name once, in order and with its own
 * start, whose range leaves its code section or overlaps the next FDE, or that cannot be
 * read while the table names it, comes with a DEFECT (and after the FDEs, each entry of
 * the table that names no FDE). Returns 0, FN's first negative return, QP_EINVAL or
 * QP_ENOMEM; malformed tables are reported through ERR, a table that cannot be split into
 * records or a search table past its section as QP_EFORMAT.
 */
int
ed_unwind_fdes(
    const cfg_image_t *img, int (*fn)(void *arg, const ed_fde_info_t *info), void *arg);

/*
 * ed_unwind_fdes, and with PAD not NULL ed_unwind_landing_pads' calls PAD(PAD_ARG, FUNC,
 * PAD) too, from the same read of the tables (after FN's calls; a read costs cc1 90 M
 * instructions): *PADS_RC gets what ed_unwind_landing_pads would have returned, or 1 when
 * the pads were not walked (PAD NULL, or the FDEs' walk stopped with an error).
 */
int
ed_unwind_fdes_pads(const cfg_image_t *img,
    int (*fn)(void *arg, const ed_fde_info_t *info), void *arg,
    int (*pad)(void *arg, uint64_t func, uint64_t pad), void *pad_arg, int *pads_rc);

/*
 * Call FN(ARG, FUNC, PAD) for every landing pad PAD named by the LSDA of an FDE of IMG
 * whose code starts at FUNC, in .eh_frame order. Only the unwinder jumps to landing
 * pads, so a CFG does not reach them: the editor must relocate them as instruction starts
 * (map() must know them) or leave their procedure in place. Returns 0, QP_EFORMAT when
 * some FDE or LSDA could not be read (the pads of the others were reported), FN's first
 * negative return, QP_EINVAL or QP_ENOMEM.
 */
int ed_unwind_landing_pads(const cfg_image_t *img,
                           int (*fn)(void *arg, uint64_t func, uint64_t pad), void *arg);


/*****************************************************************************
 * DWARF debug information for relocated code (ed_dwarf.c)
 */

/* How old code addresses map, for ed_dwarf_build (ARG is passed to each). */
typedef struct ed_dwarf_map {
    ed_map_fn map;          /* instruction starts (ed_plan_map) */
    ed_map_fn map_return;   /* return addresses (ed_plan_map_return) */
    ed_pieces_fn pieces;    /* ranges (ed_plan_pieces) */
    void *arg;
} ed_dwarf_map_t;

/* New contents for one non-alloc section. */
typedef struct ed_dwarf_sec {
    const char *name;       /* ".debug_line" (static storage) */
    uint8_t *data;          /* the bytes (malloc; ed_dwarf_out_free frees them) */
    size_t size;            /* their number */
} ed_dwarf_sec_t;

#define ED_DWARF_MAXSEC 9

typedef struct ed_dwarf_out {
    ed_dwarf_sec_t secs[ED_DWARF_MAXSEC]; /* sections that changed (new ones included) */
    size_t nsecs;
    uint64_t nline_rows_moved;   /* line rows placed at new addresses */
    uint64_t nline_rows_kept;    /* line rows of code left in place */
    uint32_t nline_seqs;         /* sequences of the regenerated line programs */
    uint32_t nline_units_moved;  /* line programs regenerated */
    uint32_t nline_units_kept;   /* line programs not understood: kept as they were */
    int line_kept;               /* .debug_line kept whole (a unit's table not found) */
    uint32_t ndie_moved;         /* DIE addresses and ranges mapped */
    uint32_t ndie_stale;         /* DIE ranges in moved code left old (split, too small) */
    uint32_t ndie_addrx;         /* DIE addresses not readable (no address table): old */
    uint32_t ndie_ranges;        /* DW_AT_ranges left old (lists not understood) */
    uint32_t ncu_moved;          /* CUs whose ranges now cover their new code */
    uint32_t ncu_stale;          /* CUs with moved code whose ranges stayed old */
    uint32_t nrnglists_added;    /* new range lists */
    uint32_t naddr_added;        /* new .debug_addr entries (DW_FORM_addrx) */
    uint32_t naranges_moved;     /* .debug_aranges sets rewritten */
    uint32_t naranges_kept;      /* sets not understood: kept */
    uint32_t nunits_skipped;     /* units not handled (DWARF 2/3, 64-bit, split): kept */
    uint32_t nunits_partial;     /* units with a DIE not understood: DIEs after it kept */
    uint32_t ncompressed;        /* compressed .debug_* sections: nothing was changed */
} ed_dwarf_out_t;

/*
 * New contents for the DWARF sections of IMG whose code addresses MAP changes:
 * .debug_line (line programs regenerated, rows of moved code at their new addresses),
 * .debug_info (DW_AT_stmt_list, DIE low_pc/high_pc and DW_AT_ranges, call sites and CU
 * ranges patched in place, same size), .debug_abbrev, .debug_rnglists or .debug_ranges (new lists
 * appended, the section created when absent), .debug_addr (a unit's table copied with
 * new entries appended), .debug_aranges and .debug_macro. Only
 * sections that change are in OUT->secs. What cannot be rewritten keeps its old bytes
 * and is counted in OUT; location lists stay old (a debugger then shows no value in
 * moved code, never a wrong one). Returns 0, QP_EINVAL, QP_ERANGE or
 * QP_ENOMEM (OUT then holds nothing). Free with ed_dwarf_out_free.
 */
int ed_dwarf_build(const cfg_image_t *img, const ed_dwarf_map_t *map,
                   ed_dwarf_out_t *out /*OUT*/);

void ed_dwarf_out_free(ed_dwarf_out_t *out);


/*****************************************************************************
 * The relocation plan (ed_layout.c)
 */

typedef struct ed_plan ed_plan_t;

/* An FDE whose tables could not be rewritten for the new code (see elfw_rewrite). */
typedef struct ed_fde_fail {
    uint64_t lo, hi; /* its old range; lo 0: none */
    int err;         /* why (QP_E*) */
} ed_fde_fail_t;

/* Options; zero-initialise for the defaults. */
typedef struct ed_opts {
    int stretch;        /* testing: put a nop after every relocated instruction, so layout
                         * assumptions fail loudly instead of by luck */
    int long_branches;  /* never use rel8 forms in relocated code */
    int atomic;         /* counter increments: ARCH_INC_PLAIN (0), ARCH_INC_ATOMIC (1), or
                         * ARCH_INC_SWITCH (plain until the runtime makes them atomic in
                         * place, see ed_plan_lock_sites) */
    int keep_tables;    /* do not retarget proven jump tables nor tables of label
                         * addresses (computed gotos): every dispatch then goes through
                         * the redirect at the old case address */
    const ed_fde_fail_t *stay; /* FDEs an earlier rewrite could not rewrite for its layout
                                * (nstay of them; read by ed_plan_create only): the code
                                * they cover stays in place */
    size_t nstay;
    const char *const *leave; /* testing aid: names of procedures to leave in place
                               * (nleave of them, exact names; read by ed_plan_create
                               * only), to find which procedure a misbehaving rewrite
                               * depends on (qpt-rewrite fills it from QPT_LEAVE) */
    size_t nleave;
    void (*on_progress)(void *arg, size_t done, size_t total); /* or NULL: called while
                                * the new code is emitted (ed_plan_apply), DONE of TOTAL
                                * instructions, about 100 times */
    void *progress_arg;         /* its ARG */
    void (*on_phase)(void *arg, const char *phase); /* or NULL: the end of a part of
                                * ed_plan_apply (the points patched in place, the layout,
                                * the new code's place before it is emitted, the tables
                                * of labels retargeted, the new code emitted):
                                * development timing, and where a tool gives its heap's
                                * free pages back */
    void *phase_arg;            /* its ARG */
    const char *all_in_place; /* when set: every procedure stays in place, for this
                               * reason (a runtime that finds code by its addresses: Go,
                               * GHC); counting drivers then patch them in place */
    unsigned threads;   /* threads the new code may be written on (qp_pool.h; 0 or 1:
                         * the caller's alone); the bytes are the same for any number */
    int reuse_text;     /* put new code into the old bytes of moved code that nothing
                         * reaches any more (between the redirects), through a second
                         * mapping of the old text (qp_space_ops_t.alloc_over, when the
                         * space has it), and only what does not fit into new memory:
                         * smaller files. The old instructions are then gone from the
                         * output (a tool that decodes them needs the input) */
} ed_opts_t;

typedef struct ed_stats {
    uint32_t nmoved;        /* procedures relocated */
    uint32_t nleft;         /* procedures left in place */
    uint64_t bytes_old;     /* bytes of the relocated procedures' blocks */
    uint64_t bytes_new;     /* bytes of relocated code (the new text) */
    uint32_t npads;         /* redirect jumps written into the old text */
    uint32_t nind_pads;     /* ... of which for indirect-jump targets (tables, labels) */
    uint32_t ntables;       /* jump tables retargeted to the new code */
    uint32_t ntable_entries;/* ... their entries */
    uint32_t nprobes;       /* snippets placed */
    uint32_t nflag_saves;   /* ... of which save and restore the flags */
    uint32_t nstubs;        /* taken-edge stubs (a conditional branch goes through one) */
    uint64_t bytes_probes;  /* bytes of snippets and stubs in the new code */
    uint32_t nxlate;        /* indirect jumps of unknown targets translated at run time */
    uint64_t bytes_reused;  /* bytes of new code placed in the old text (reuse_text) */
    uint64_t bytes_holes;   /* bytes of the old text free for it */
    uint32_t nheld_inside;  /* addresses the program holds (a relocated word, a `lea`)
                             * inside a block of a moved procedure, not at its start:
                             * code entered there runs the old copy, unmeasured */
    uint64_t held_inside;   /* ... the first of them, 0 when none */
    uint32_t nkept_reached; /* moved procedures that keep their old bytes (reuse_text):
                             * code that stays runs into them, not at a redirect (there
                             * the old copy runs, unmeasured) */
    uint64_t kept_reached;  /* ... the first such address, 0 when none */
    uint32_t nunreached_into_pad; /* unreached bytes that decode as code and jump into
                                   * the middle of a redirect (should they run: a crash) */
    uint64_t unreached_into_pad_from, unreached_into_pad_to; /* ... the first */
    uint32_t ninplace;      /* points patched in place (a jump to a trampoline) */
    uint64_t bytes_inplace; /* bytes of their trampolines */
    uint64_t inplace_text;  /* address of the trampolines' region, 0 when none */
    uint64_t bad_exit_from; /* QP_EBUG: code that stays, at this address, would run ... */
    uint64_t bad_exit_to;   /* ... into new code placed here (a bug: the plan fails) */
    uint32_t nstubs_fall;   /* taken-edge stubs placed before their target, falling into
                             * it (ED_PROBE_FALL_IN): no jmp back */
    uint32_t ntables_kept;  /* AArch64 switch tables whose base could move but whose
                             * entries do not reach the new cases (1 or 2 bytes), or with
                             * a case that stays: they dispatch through the redirects */
    uint64_t table_kept;    /* ... the first one's br, 0 when none */
    uint32_t nkept_branches;/* AArch64: direct calls and jumps of code left in place
                             * that go straight to moved procedures' new entries */
} ed_stats_t;

/*
 * Decide which procedures of PROG move: those cfg/ classed safe, except PLT stubs and
 * those whose redirect jumps do not fit in their old bytes (an entry or indirect target
 * closer than 5 bytes to the next one or the end of the extent and the alignment padding
 * after it). An indirect jump whose targets are unknown is translated at run time
 * (arch_emit_jmp_xlate: a procedure entry goes to its new code; see
 * ed_plan_set_xlate_miss); one whose operand cannot be re-encoded keeps its procedure in
 * place. OPTS may be NULL. Free with ed_plan_destroy.
 */
int ed_plan_create(const cfg_prog_t *prog, const ed_opts_t *opts, ed_plan_t **out /*OUT*/);

void ed_plan_destroy(ed_plan_t *plan);

/*
 * The 8-byte counters that translated jumps add one to when their target lies in the
 * file's code but is no procedure entry (they did not leave their procedure as a tail
 * call: its flow is not what the CFG says): the jump at old address SITES[i] (ascending)
 * counts into COUNTERS[i] (an address). Before layout; a jump not listed counts nothing.
 * 0, QP_EINVAL or QP_ENOMEM.
 */
int ed_plan_set_xlate_miss(ed_plan_t *plan, const uint64_t *sites, const uint64_t *counters,
                           size_t n);

/*
 * Probes: the snippets a driver asks for, around instructions of moving procedures.
 * ED_AT_BEFORE runs on every path to the instruction (branches to it land on the
 * snippet); ED_AT_AFTER runs on its fall-through path only (a conditional branch not
 * taken, a call that returned); ED_AT_TAKEN runs when a conditional branch is taken: the
 * branch goes to a stub (the snippet, then a jump to the old target), the seed's split of
 * a critical edge.
 */
typedef enum ed_at {
    ED_AT_BEFORE = 0,
    ED_AT_AFTER,
    ED_AT_TAKEN,
} ed_at_t;

typedef enum ed_snip {
    ED_SNIP_COUNT = 0,  /* add one to a counter */
    ED_SNIP_EXIT_HOOK,  /* call the runtime's exit hook (it saves every register) */
    ED_SNIP_FORK_HOOK,  /* call the runtime's fork hook (likewise); it runs before the
                         * other snippets of its place */
    ED_SNIP_THREAD_HOOK,/* call the runtime's thread hook (likewise): it makes switchable
                         * counters atomic before the program starts a thread */
    ED_SNIP_CODE,       /* a snippet of the plan's (ed_plan_set_snippets), compiled by
                         * arch_snip_emit; `counter` is its index */
    ED_SNIP_EXEC_HOOK,  /* call the runtime's exec hook (likewise), after a call to an
                         * exec function: it returned, the exec failed */
} ed_snip_t;

/*
 * A counter changed by a register, for a loop counted from its induction variable
 * (doc/qp.md): ED_SNIP_COUNT_REG(REG, SUB) adds the 64-bit register REG (arch/'s number,
 * not ARCH_REG_SP) to the counter, or subtracts it (SUB). The kind names the register, so
 * that a probe needs no field of its own (chromium has millions). Only where the ISA can
 * (arch_isa_t.emit_counter_add_reg_at), never in place.
 */
#define ED_SNIP_COUNT_REG_BASE 32
#define ED_SNIP_COUNT_REG(reg, sub) ((uint8_t)(ED_SNIP_COUNT_REG_BASE + 2 * (reg) + !!(sub)))

/* Is WHAT an ED_SNIP_COUNT_REG kind? Then its register into *REG, SUB into *SUB. */
static inline int
ed_snip_count_reg(uint8_t what, uint8_t *reg, int *sub)
{
    if (what < ED_SNIP_COUNT_REG_BASE + 2 || what >= ED_SNIP_COUNT_REG_BASE + 2 * ARCH_NREGS)
        return 0;
    *reg = (uint8_t)((what - ED_SNIP_COUNT_REG_BASE) / 2);
    *sub = (what - ED_SNIP_COUNT_REG_BASE) & 1;
    return 1;
}

enum {
    ED_PROBE_ENTRY = 1u << 0, /* ED_AT_BEFORE a procedure's entry, for calls only: jumps
                               * from inside the procedure to its entry land after it */
    ED_PROBE_INPLACE = 1u << 1, /* in a procedure left in place: patched where it is with
                               * a jump to a trampoline (ed_inplace.c; ED_AT_BEFORE and
                               * ED_SNIP_COUNT only, at a point ed_inplace_fit accepts) */
    ED_PROBE_FALL_IN = 1u << 2, /* ED_AT_TAKEN: put the stub just before the branch's target
                               * block, falling into it (no jmp back), when nothing else
                               * falls into that block (ed_block_fall_free), it is in the
                               * branch's procedure and no other stub took the place; else
                               * the stub goes apart as usual. Any TAKEN probe of the
                               * branch asking for it is enough */
};

typedef struct ed_probe {
    uint64_t addr;       /* old address of the instruction */
    uint8_t at;          /* ed_at_t */
    uint8_t what;        /* ed_snip_t */
    uint8_t save_flags;  /* the arithmetic flags are live there: save and restore them */
    uint8_t flags;       /* ED_PROBE_* */
    uint32_t counter;    /* ED_SNIP_COUNT: the counter's index; ED_SNIP_CODE: the snippet's */
} ed_probe_t;

/* A snippet to place (ED_SNIP_CODE): the tree and what holds where it runs. */
typedef struct ed_snippet {
    const arch_snip_t *nodes; /* the caller's, until ed_plan_apply returns */
    size_t n;
    uint32_t root;
    arch_snip_ctx_t ctx;      /* where: which values exist; dead registers, live flags, red
                               * zone (the probe's save_flags adds the flags) */
} ed_snippet_t;

/*
 * The snippets ED_SNIP_CODE probes name, by index (the array is copied, the trees are
 * not). Before ed_plan_apply. Each is checked with arch_snip_check: QP_EINVAL when one
 * is malformed (the caller checks first to learn why), QP_ENOMEM.
 */
int ed_plan_set_snippets(ed_plan_t *plan, const ed_snippet_t *v, size_t n);

/*
 * Give PLAN the probes (copied; any order) before ed_plan_apply. Every probe must name an
 * instruction of a moving procedure, and ED_AT_TAKEN a conditional branch; ed_plan_apply
 * fails with QP_EINVAL otherwise (a probe is never dropped silently).
 */
int ed_plan_set_probes(ed_plan_t *plan, const ed_probe_t *probes, size_t n);

/* What the snippets refer to: the address of counter 0 and of the runtime's hooks. */
void ed_plan_set_runtime(ed_plan_t *plan, uint64_t counters, uint64_t exit_hook,
                         uint64_t fork_hook, uint64_t thread_hook, uint64_t exec_hook);

/* The exit hook's address that ed_plan_set_runtime gave (0 before): the runtime blob
 * lies at it minus QPRT_HOOK_OFF (runtime/qprt.h). */
uint64_t ed_plan_exit_hook(const ed_plan_t *plan);

/* How counters are incremented (ARCH_INC_*; ed_opts_t.atomic), before ed_plan_apply. */
void ed_plan_set_inc_mode(ed_plan_t *plan, int mode);

/*
 * After ed_plan_apply with ARCH_INC_SWITCH counters: the new addresses of their first
 * bytes (ARCH_INC_PLAIN_BYTE, to be made ARCH_INC_LOCK_BYTE), ascending; *N gets their
 * number. Valid until the plan is destroyed.
 */
const uint64_t *ed_plan_lock_sites(const ed_plan_t *plan, size_t *n /*OUT*/);

/*
 * After ed_plan_apply: the new address of the relocated instruction at OLD itself (past
 * the snippets placed before it), and in *AFTER the address just past it (what a call
 * there pushes as its return address). 0 when OLD is not a moved instruction.
 */
uint64_t ed_plan_insn_new(const ed_plan_t *plan, uint64_t old, uint64_t *after /*OUT*/);

/* Why procedure I of the program stays in place, or NULL when it moves. */
const char *ed_plan_left_reason(const ed_plan_t *plan, uint32_t proc);

/*
 * Lay out the moving procedures in new memory from SPACE (one executable region within
 * rel32 reach of the image), write the relocated code there and a `jmp` to the new code at
 * every entry and indirect-jump target of each moved procedure's old bytes. Direct
 * branches go through the global old-to-new map. Returns 0, QP_ERANGE when the new code
 * cannot reach what it refers to, or an error of SPACE. The image's pages read so far are
 * released as it goes (cfg_image_release_pages) and its decoded instructions let go once
 * the moved code is written (cfg_image_decode_done): what reads them later reads the
 * file's pages again and decodes anew.
 */
int ed_plan_apply(ed_plan_t *plan, const qp_space_ops_t *ops, void *space);

/* Address of the new code region and its size (after ed_plan_apply). */
uint64_t ed_plan_text(const ed_plan_t *plan, uint64_t *size /*OUT*/);

/*
 * Where the code at OLD went (after ed_plan_apply): the new address of the instruction at
 * OLD; for an address inside a moved procedure that is not an instruction start (holes,
 * the end of a range), the new address of the next moved instruction, or the end of the
 * procedure's new code; 0 when OLD did not move. Usable as an ed_map_fn (ARG = plan).
 */
uint64_t ed_plan_map(void *plan, uint64_t old);

/*
 * The new address of the moved instruction that starts at OLD (its slot: the snippets
 * placed before it come first), or 0 when no moved instruction starts there (padding,
 * code that stays). An ed_map_fn.
 */
uint64_t
ed_plan_map_insn(void *plan, uint64_t old);

/*
 * The new address just past the moved instruction that ends at OLD (for the ends of
 * unwind ranges), or 0 when no moved instruction ends there. An ed_map_fn.
 */
uint64_t ed_plan_map_end(void *plan, uint64_t old);

/*
 * The return address that a call moved from OLD - its old return address, the end of the
 * call - pushes in the new code (past the call itself, before its AFTER snippets), or 0
 * when no moved instruction ends at OLD. An ed_map_fn.
 */
uint64_t ed_plan_map_return(void *plan, uint64_t old);

/*
 * Cut the old range [LO, HI) into pieces (after ed_plan_apply), in old address order, and
 * call FN(FNARG, ...) for each. Bytes of a moved procedure that are no moved instruction
 * (padding, unreachable code) are in no piece. Returns 0, FN's first negative return or
 * QP_EINVAL. Usable as an ed_pieces_fn (ARG = plan).
 */
int ed_plan_pieces(void *plan, uint64_t lo, uint64_t hi, ed_piece_fn fn, void *fnarg);

/* Figures for the summary line. */
const ed_stats_t *ed_plan_stats(const ed_plan_t *plan);

/*
 * As ed_plan_map, but where a taken-edge stub falls into the instruction at OLD
 * (ED_PROBE_FALL_IN), the stub's address: where the state that holds at OLD (its unwind
 * rules) begins in the new code. An ed_map_fn, for ed_unwind_map_t.map.
 */
uint64_t ed_plan_map_state(void *plan, uint64_t old);

/*
 * Where a taken-edge stub into block BLOCK (an index in prog->blocks) of procedure PROC
 * may go just before it and fall into it, without a jump (ED_PROBE_FALL_IN), when the
 * procedure is relocated. 1: nothing falls into the block (it is not the entry nor the
 * first block laid out, and the block laid out before it ends in a jump, a return or a
 * halt, or falls through to another block: the editor then adds a jmp). 2: only the block
 * laid out before it falls into it (the block at its start address, not a call's return):
 * that block then jumps over the stub, one jmp on that edge. 0: the stub goes apart.
 * Drivers ask it to price a counter.
 */
int ed_block_fall_free(const cfg_prog_t *prog, uint32_t proc, uint32_t block);


/*****************************************************************************
 * In-place measurement for files (ed_inplace.c; its trampolines: patch/'s
 * pt_inplace_emit): code that does not move is patched where it is, a 5-byte jmp at each
 * point into a trampoline that counts, runs the displaced instructions (a call among them
 * pushes its original return address and jumps: no return address ever points into new
 * code) and jumps back.
 */

/* Why a point cannot take a jump (ed_inplace_fit's positive returns). */
enum {
    ED_IP_OK = 0,
    ED_IP_SHORT,   /* fewer than 5 bytes of its block (and padding) from the point */
    ED_IP_TARGET,  /* another entry lies in the bytes a jump would cover: a block start,
                    * a landing pad, an address the program holds, a recovery point */
    ED_IP_INSN,    /* an instruction there cannot be moved (a call through %rsp) */
    ED_IP_FAULT,   /* a Go program's instruction there may fault (a nil pointer): the
                    * runtime turns the fault into a panic by its address */
    ED_IP_NREASONS
};

/* ED_IP_* as a phrase. */
const char *ed_inplace_why(int code);

typedef struct ed_inplace ed_inplace_t;

/* What ed_inplace_fit needs of PROG (its entries, held addresses, landing pads) and of
 * PLAN (the bytes of moved code, which padding must not lend; may be NULL). Both must
 * outlive it. 0, QP_EINVAL or QP_ENOMEM. */
int ed_inplace_create(const cfg_prog_t *prog, const ed_plan_t *plan,
                      ed_inplace_t **out /*OUT*/);
void ed_inplace_destroy(ed_inplace_t *ip);

/*
 * Can the code at AT, an instruction of block BLOCK (a global index) of a procedure left
 * in place, take a jump to a trampoline? 0 (ED_IP_OK) with *LEN the bytes of whole
 * instructions the trampoline runs and *SPAN >= 5 the bytes the patch covers (LEN, or
 * more when a block that does not fall through is followed by padding); ED_IP_* when it
 * cannot; QP_E* on errors.
 */
int ed_inplace_fit(const ed_inplace_t *ip, uint32_t block, uint64_t at, uint32_t *len /*OUT*/,
                   uint32_t *span /*OUT*/);

/*
 * Give PLAN the in-place entries IP that a driver made for it (ed_inplace_create with
 * PLAN and its program) before ed_plan_apply, which then patches the points in place
 * with them instead of making them again (cc1: 0.22 G instructions, on the main thread).
 * PLAN owns IP from then on (it frees it once applied, or when destroyed); IP NULL gives
 * nothing. QP_EINVAL, IP not taken, when IP was made for another plan or program or
 * after the points were patched.
 */
int ed_plan_set_inplace(ed_plan_t *plan, ed_inplace_t *ip);

/*
 * Why procedure PROC, left in place, must not be patched there either (its code may be
 * data, or control may enter it where its CFG does not say), or NULL when it may. NULL
 * too for a procedure that moves.
 */
const char *ed_plan_inplace_unfit(const ed_plan_t *plan, uint32_t proc);


/*****************************************************************************
 * The static address space: an executable file's image in memory (ed_image.c)
 */

typedef struct ed_image ed_image_t;

/* A region allocated in the image (it becomes a new PT_LOAD). */
typedef struct ed_region {
    uint64_t vaddr;     /* address */
    uint64_t size;      /* size */
    uint32_t prot;      /* ED_PROT_* */
    uint8_t *bytes;     /* contents, owned by the image (NULL for a mirror) */
    uint64_t mirror;    /* a mirror of the input's bytes at this address (alloc_over),
                         * whose writes are patches there; else 0 */
} ed_region_t;

/* Bytes written over the input's loaded contents (redirects in the old text). */
typedef struct ed_patch {
    uint64_t vaddr;     /* address */
    uint64_t len;       /* length */
    uint8_t *bytes;     /* new bytes, owned by the image */
} ed_patch_t;

/*
 * Why IMG cannot be edited at all (its language runtime reads code addresses in ways
 * the editor does not rewrite), as a phrase for an error message; NULL when it can.
 */
const char *ed_image_unsupported(const cfg_image_t *img);

/*
 * Why IMG must not be rewritten again (it is the output of a rewrite: its runtime and
 * counters would be taken for the program's own code), or NULL.
 */
const char *ed_image_rewritten(const cfg_image_t *img);

/*
 * V8's embedded builtins (editor/ed_v8.c): when IMG carries the V8 JavaScript engine's
 * embedded code blob (its builtins, compiled when V8 was built and linked into .text),
 * returns 1 with its bounds [*LO, *HI); V8 finds those builtins by their offsets from
 * the blob's start and recognises their pcs by the blob's bounds, so they must stay in
 * place. Returns 0 (*LO = *HI = 0) when IMG has none, QP_EINVAL on NULL arguments.
 * Found from V8's own layout table in read-only data, not from symbols.
 */
int ed_v8_builtins(const cfg_image_t *img, uint64_t *lo /*OUT*/, uint64_t *hi /*OUT*/);

/* The ops of an ed_image_t, to pass with it as SPACE. */
extern const qp_space_ops_t ed_image_ops;

/* An empty editable image over IMG (which must outlive it). */
int ed_image_create(const cfg_image_t *img, ed_image_t **out /*OUT*/);

/* Where the output file's new bytes will start (elfw_new_bytes_at), before any region is
 * allocated: regions are placed so that their file bytes need no padding. */
void ed_image_set_file_end(ed_image_t *im, uint64_t off);

void ed_image_destroy(ed_image_t *im);

/*
 * As ed_image_ops.alloc_near, the region's start ALIGN-aligned (a power of two up to
 * the page size, 4 KiB): code that addresses itself by pages (AArch64's adrp) is placed
 * at a page. 0, QP_EINVAL, QP_ERANGE or QP_ENOMEM.
 */
int ed_image_alloc_aligned(ed_image_t *im, uint64_t lo, uint64_t hi, size_t len, uint32_t prot,
                           uint64_t align, uint64_t *out /*OUT*/);

/*
 * As ed_image_ops.alloc_near, then a write of all LEN bytes of BYTES (a malloc'd block):
 * the region takes BYTES over instead of copying them (a description of the whole
 * program runs to tens of megabytes). On success the image owns BYTES; on failure the
 * caller still does.
 */
int ed_image_alloc_bytes(ed_image_t *im, uint64_t lo, uint64_t hi, uint8_t *bytes, size_t len,
                         uint32_t prot, uint64_t *out /*OUT*/);

/* The regions allocated so far, in address order (valid until the next call). */
const ed_region_t *ed_image_regions(const ed_image_t *im, size_t *n /*OUT*/);

/* The patches written so far, in address order (the editor never writes one byte twice). */
const ed_patch_t *ed_image_patches(ed_image_t *im, size_t *n /*OUT*/);


#endif
