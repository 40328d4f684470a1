/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * What the parts of dyn_patch.c share (dynamic/ only): the point and the session
 * they build, and the helpers one part calls in another. The parts: dyn_patch.c
 * (the session, reading and removing), dyn_patch_check.c (what the file proves for a
 * point), dyn_patch_select.c (neighbour slots, call sites),
 * dyn_patch_timer.c (timers at the entry and every exit), dyn_patch_reloc.c
 * (procedures relocated whole), dyn_patch_install.c (counters, trampolines, patching).
 * Each helper is described where it is defined; the helpers are listed by file.
 */
#ifndef QP_DYN_PATCH_PRIV_H
#define QP_DYN_PATCH_PRIV_H

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dynamic/dyn.h"
#include "patch/patch.h"

/*
 * Bytes of a trampoline at most: flags save, counter, timer, restore, 5 relocated
 * instructions (ARCH_MAX_RELOC each), jump.
 */
#define TRAMP_MAX 320
/* Words of counter memory per row: calls, timer depth, timer start, timer total. */
#define ROW_WORDS 4
/* Bytes of stack scanned above each thread's stack pointer for return addresses. */
#define STACK_SCAN (32u << 10)
/* Times a thread is let run alone at most to leave a trampoline (dyn_proc_leave). */
#define LEAVE_TRIES 100
#define JMP_LEN 5
/* A jmp rel8 (an entry too short for JMP_LEN goes through padding within its reach). */
#define SHORT_LEN 2
/* The header at the start of the trampoline memory (dyn_tramp_hdr_t). */
#define HDR_LEN sizeof(dyn_tramp_hdr_t)

/* What a point patches (the values of DYN_PT_*). */
enum {
    PT_ENTRY = DYN_PT_ENTRY, /* a procedure entry: counter (and timer start), then the moved
                              * code */
    PT_CALL = DYN_PT_CALL,   /* one call instruction: counter, then the call */
    PT_EXIT = DYN_PT_EXIT,   /* the tail of a block ending in ret: the moved code, timer
                              * stop, ret */
    PT_BLOCK = DYN_PT_BLOCK, /* a block's start: like an entry, loops back to it included */
    PT_INSN = DYN_PT_INSN,   /* an instruction inside a block: like a block's start */
    PT_RSITE = 16,           /* the return site of a call in a procedure relocated whole:
                              * a jump into its copy (no trampoline of its own) */
};

typedef struct point {
    uint32_t proc;      /* procedure index in prog->procs */
    uint32_t row;       /* the row (s->rows) it counts or times for */
    uint8_t kind;       /* PT_* */
    const char *name;   /* the name the procedure was chosen by (owned by the image) */
    uint64_t entry;     /* runtime address of the first replaced byte */
    uint8_t len;        /* bytes replaced (whole instructions, >= 5) */
    uint8_t ninsns;     /* instructions replaced */
    uint8_t save_flags; /* flags may be live at the entry */
    uint8_t spill;      /* bytes of padding at the end of orig (after a ret or a jmp that
                         * ends the block: never run), covered by the jump, not moved */
    uint8_t call_ret;   /* the last replaced instruction is a direct call (an entry's, or
                         * the end of a block): the trampoline pushes its return address
                         * in the original code and jumps to the callee (nothing returns
                         * into the trampoline) */
    uint8_t whole;      /* PT_ENTRY of a timed procedure whose entry block ends in a ret
                         * or a tail jump: the whole block moves, timer stop before its
                         * last instruction */
    uint8_t call_len;   /* PT_CALL shorter than the jump, with the instructions after it
                         * (its return site's, reached from nowhere else) moved along: the
                         * call's length; 0 otherwise */
    uint8_t rlen;       /* PT_EXIT before a return block too short for its own jump: its
                         * bytes (rbytes: plain instructions, then the ret) run in the
                         * trampoline where the tail would go to it (falling into it, a
                         * jmp, or the taken side of a jcc), the timer stop before the ret */
    uint8_t rninsns;    /* ... their instructions */
    uint8_t rbytes[16];
    uint64_t raddr;     /* ... their runtime address */
    uint8_t by_jump;    /* a whole entry block ending in a tail jump, not a ret: no return
                         * value where its exit snippet runs */
    uint8_t noret;      /* PT_EXIT at a direct call that never returns into the procedure
                         * (the code after it is another procedure's): its snippet, then
                         * the call made with its original return address (call_ret) */
    uint8_t tail;       /* PT_EXIT ending in a tail jump instead of a ret: 1, or 2 for a
                         * conditional one (jcc: the timer stops only when it is taken),
                         * 3 for a jcc whose both sides leave (it stops on both) */
    uint8_t orig[32];   /* the original bytes */
    uint8_t patch[32];  /* the bytes written over them */
    uint64_t pad;       /* PT_ENTRY too short for the jump: runtime address of the 5-byte
                         * jump to the trampoline in padding, reached by a 2-byte jmp
                         * rel8 at the entry; 0 for none */
    uint8_t pad_orig[JMP_LEN];  /* the padding's bytes */
    uint8_t pad_patch[JMP_LEN]; /* the jump written over them */
    uint64_t tramp;     /* runtime address of the trampoline */
    uint64_t ret_at;    /* PT_CALL: the return address the moved call pushes */
    dyn_snippet_t before; /* dyn_session_add_point: what runs instead of the counter */
    dyn_snippet_t after;  /* PT_CALL: what runs after the call returned */
    uint8_t reloc;        /* PT_ENTRY of a procedure relocated whole (its points do not
                           * fit in place): its trampoline is the procedure's copy, its
                           * return sites (PT_RSITE, same row) jump into it */
    pt_map_t *map;        /* ... the copy's instructions (installed points only) */
    uint32_t rsize;       /* reloc: the copy's length where it was tried (reloc_trial) */
    const uint64_t *exits; /* reloc: the exits (link addresses, sorted; the caller's
                            * until install) AFTER runs at; NULL: every one */
    size_t nexits;
    const dyn_site_t *sites; /* reloc: calls with a snippet before them (sorted; the
                              * caller's until install); NULL: none */
    size_t nsites;
    uint8_t wide;         /* PT_RSITE whose jump covers the blocks after its own (or
                           * padding): the original must be idle when it goes in */
    size_t nmap;
    uint8_t pun;          /* PT_ENTRY of a 1-byte procedure (a lone ret): its patch is the
                           * jmp rel8 opcode alone, whose displacement is the next byte,
                           * the first of its neighbour's entry kept (keep_first), which
                           * puts pad there (slot_at) */
    uint8_t keep_first;   /* reloc PT_ENTRY whose first byte (a REX prefix) is kept: its
                           * jump is written after it (the prefix then is the jump's), for
                           * the pun of a 1-byte procedure before it */
    uint32_t dep1;        /* its pad is a slot in the original code of a neighbour
                           * relocated whole (dynp_with_neighbour): that one's row + 1,
                           * which must go in for this one to; 0: none */
} point_t;

/* One line of the report: a procedure (entry counter, maybe timed) or a call site. */
typedef struct row {
    const char *name; /* owned by the image, or by s->strs for call sites */
    uint32_t proc;    /* procedure */
    uint8_t timed;    /* has a timer (entry and every exit) */
    uint8_t bad;      /* refused at install: none of its points goes in */
    const char *why;  /* ... why */
} row_t;

typedef struct refusal {
    const char *name; /* procedure name (owned by the image) */
    const char *why;  /* static text */
    uint32_t row;     /* the row refused at install (dynp_row_bad), or UINT32_MAX */
} refusal_t;

struct dyn_session {
    dyn_proc_t *p;          /* the process */
    const cfg_prog_t *prog; /* its executable's CFGs */
    pt_decoded_t *decoded;  /* where relocated procedures are decoded, or NULL (the
                             * caller's: dyn_session_keep_decoded) */
    uint64_t bias;          /* load bias (runtime - link address) */
    uint8_t *chosen;        /* per procedure: already selected or refused */
    point_t *cand;          /* selected, not yet installed */
    size_t ncand, capcand;
    point_t *pts; /* installed points */
    size_t npts;
    refusal_t *ref; /* refused procedures */
    size_t nref, capref;
    uint64_t code, code_size; /* trampoline memory in the process */
    uint64_t code_used;       /* ... the bytes of it emit_all filled */
    uint64_t ctr, ctr_size;   /* counter memory in the process */
    int installed;            /* patches are in */
    row_t *rows;              /* rows selected; counters at ctr + 8 * ROW_WORDS * row */
    size_t nrows, caprows;
    char **strs; /* names made here (call sites) */
    size_t nstrs, capstrs;
    int has_calls; /* call-site trampolines are in */
    uint32_t *frags; /* cold fragments, by parent (lazily) */
    size_t nfrags;
    uint64_t *pads; /* padding taken by short jumps and spills (link addresses; 5
                     * bytes from each are reserved) */
    size_t npads, cappads;
    uint8_t all_or_nothing; /* dyn_session_set_all_or_nothing */
    uint64_t *avoid; /* dyn_session_set_avoid: ranges (address, length) never mapped */
    size_t navoid;
    int shstk; /* the process has a shadow stack (-1: not known yet) */
    int go;    /* a Go program: no instruction that may fault moves (dynp_go_refusal) */
    uint64_t *foreign; /* targets of branches from one procedure into another's middle
                        * (link addresses, sorted; lazily) */
    size_t nforeign;
    int foreign_done;
    uint64_t
        nb_want; /* dynp_check_reloc: find a slot for the jmp rel8 of another procedure's
                  * entry at this link address too (dynp_with_neighbour); 0: none */
    uint64_t nb_slot; /* ... the slot it found (link address, taken), for the next
                       * dynp_find_pad; 0: none */
    uint8_t nb_orig[JMP_LEN]; /* ... its bytes */
    int nb_depth; /* dynp_with_neighbour is checking a lender (not twice deep) */
    uint64_t nb_need;         /* dynp_borrow_slot: the link address whose short
                               * jump wanted a slot first (dyn_session_check_borrow) */
    int nb_pun; /* nb_want is a 1-byte procedure's (dynp_pun_site): the lender is
                 * the procedure right after it, its first byte kept */
};

/* Every block B of procedure I and its fragments (PARTS, NPARTS from dynp_parts_of). */
#define FOR_BLOCKS(prog, parts, nparts, k, b)                                            \
    for ((k) = 0; (k) < (nparts); (k)++)                                                 \
        for ((b) = (prog)->procs[(parts)[k]].block;                                      \
             (b) < (prog)->procs[(parts)[k]].block + (prog)->procs[(parts)[k]].nblocks;  \
             (b)++)

/* dyn_patch.c */
size_t
dynp_patch_len(const point_t *pt);
int
dynp_crosses_page(const point_t *pt);
int
dynp_refuse_name(dyn_session_t *s, const char *name, const char *why);
int
dynp_add_row(dyn_session_t *s, const char *name, uint32_t proc, int timed, uint32_t *row);
int
dynp_add_cand(dyn_session_t *s, const point_t *pt);
const char *
dynp_site_name(
    dyn_session_t *s, const char *name, char sign, uint64_t off, const char *callee);
int
dynp_row_bad(dyn_session_t *s, uint32_t r, const char *why);

/* dyn_patch_check.c */
int
dynp_proc_entry_in(const cfg_prog_t *prog, uint64_t lo, uint64_t hi);
int
dynp_pad_free(const dyn_session_t *s, uint64_t a, size_t n);
int
dynp_pad_take(dyn_session_t *s, uint64_t a);
int
dynp_spill_ok(const dyn_session_t *s, uint64_t end, size_t n);
int
dynp_has_shadow_stack(const dyn_session_t *s);
uint8_t
dynp_entry_save_flags(const cfg_proc_t *pr);
enum { ENTRY_FIRST_ONLY = 1, ENTRY_COPY = 2 }; /* dynp_entry_insns's FLAGS */
const char *
dynp_entry_insns(
    const dyn_session_t *s, uint32_t i, size_t need, int flags, point_t *pt /*OUT*/);
const char *
dynp_entry_ok(const dyn_session_t *s, uint32_t i, int *first_only /*OUT*/);
const char *
dynp_entry_ok_loop(
    const dyn_session_t *s, uint32_t i, int loop_ok, int *first_only /*OUT*/);
const char *
dynp_check_proc(const dyn_session_t *s, uint32_t i, point_t *pt /*OUT*/);
const char *
dynp_go_refusal(const dyn_session_t *s, const point_t *pt);
const char *
dynp_go_proc_refusal(const dyn_session_t *s, const uint32_t *parts, int nparts);
const char *
dynp_find_pad(dyn_session_t *s, uint64_t e, point_t *pt);
const char *
dynp_check_short(dyn_session_t *s, uint32_t i, int first_only, point_t *pt /*OUT*/);
int
dynp_check_point(const dyn_session_t *s, int kind, uint32_t proc, uint64_t addr,
    point_t *out, const char **why);
int
dynp_cand_at(const dyn_session_t *s, uint32_t row, uint64_t at);
int
dynp_reloc_point(dyn_session_t *s, int add, uint32_t proc, uint64_t addr,
    const dyn_snippet_t *before, const dyn_snippet_t *after, const char *name,
    uint32_t *row, uint64_t *lo, uint64_t *hi, const char **why);
size_t
dynp_neighbours(const dyn_session_t *s, uint32_t i, uint64_t near, uint32_t *out,
    const char **names, size_t cap);
const char *
dynp_borrow_slot(dyn_session_t *s, uint32_t i, uint64_t near, int timed, point_t *pt,
    uint32_t *dep, uint32_t *lent, int *err);
const char *
dynp_with_neighbour(dyn_session_t *s, uint32_t i, const char *name, int timed, int *err);

/* dyn_patch_select.c */
int
dynp_has_except_table(const cfg_image_t *img);
/*
 * The call IN (its bytes BYTES) that ends block BL, to the procedure named CALLEE (NULL:
 * through a pointer, or not a procedure's entry): why a counter cannot go before it in
 * place, or NULL with *PT filled (kind, entry, len, orig; a call shorter than the jump
 * through padding, pad taken, or moved with the instructions after it, call_len).
 */
const char *
dynp_check_call(dyn_session_t *s, const cfg_block_t *bl, const arch_insn_t *in,
    const uint8_t *bytes, const char *callee, point_t *pt /*OUT*/);

/* dyn_patch_timer.c */
int
dynp_parts_of(dyn_session_t *s, uint32_t i, uint32_t *out, size_t cap);
const char *
dynp_check_exit(const dyn_session_t *s, const cfg_block_t *b, uint64_t own, int whole,
    point_t *pt /*OUT*/, int *want_pad /*OUT*/);
const char *
dynp_check_tail(const dyn_session_t *s, const cfg_block_t *b, uint64_t own, int whole,
    int plain, point_t *pt /*OUT*/, int *want_pad /*OUT*/);
int
dynp_is_tail_block(const cfg_prog_t *prog, const cfg_block_t *b);
int
dynp_is_cond_tail_block(const cfg_prog_t *prog, const cfg_block_t *b);
int
dynp_is_table_block(const cfg_prog_t *prog, const cfg_block_t *b);
int
dynp_xlate_block(
    const dyn_session_t *s, const uint32_t *parts, int nparts, const cfg_block_t *bl);
int
dynp_proc_block_ends(const dyn_session_t *s, const uint32_t *parts, int nparts,
    pt_proc_t *p /*OUT*/);
void
dynp_proc_block_ends_free(pt_proc_t *p);
const char *
dynp_check_noret(const dyn_session_t *s, const cfg_block_t *b, point_t *pt /*OUT*/);
const char *
dynp_timed_entry(dyn_session_t *s, uint32_t i, point_t *pt /*OUT*/);
const char *
dynp_exits_before(dyn_session_t *s, uint32_t i, const cfg_block_t *r, uint32_t row,
    const char *name, const point_t *entry, unsigned *nexit, int *err);

/* dyn_patch_reloc.c */
int
dynp_proc_runs(const dyn_session_t *s, const uint32_t *parts, int nparts, pt_run_t **out);
size_t
dynp_part_block_index(
    const cfg_prog_t *prog, const uint32_t *parts, int nparts, uint32_t b);
const char *
dynp_catches(const dyn_session_t *s, const cfg_block_t *bl);
int
dynp_pun_site(const dyn_session_t *s, uint64_t a);
const char *
dynp_check_reloc(dyn_session_t *s, uint32_t i, const char *name, int timed, int exits,
    uint32_t *rowp, int *err);
const char *
dynp_check_timed(dyn_session_t *s, uint32_t i, const char *name, int *err /*OUT*/);

/* dyn_patch_install.c */
#define COUNT_NODES 4 /* the nodes of dynp_count_snip */
void
dynp_count_snip(int timed, uint64_t words, arch_snip_t v[COUNT_NODES], dyn_snippet_t *sn);
int
dynp_unpatch(dyn_proc_t *p, const point_t *pt, int check);

#endif
