/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_TRACE_FORMAT_H
#define QP_TRACE_FORMAT_H
/*
 * PURPOSE: the control-flow tracer's formats (--driver=trace, --driver=trace-naive).
 * driver/drv_trace.c writes the description into the instrumented program as the
 * non-allocated section `.qpt.trace`; runtime/qprt.c writes one trace file per thread;
 * report/qp_trace.c reads both. Independent of the qp description (qp_format.h).
 *
 * The description (all little-endian, packed as the structs below, each array 8-byte
 * aligned in this order): qpt_trace_hdr_t, procs, blocks, edges, events, then the
 * instruction part, the new code part, (--trace-mem) the address part and the part of
 * the code not traced. Block and
 * procedure indices are the description's own; addresses are link-time (old) ones.
 *
 * A trace file (PROG.trace.TID, beside the profile: its name with ".qp" replaced, or
 * $QP_PROFILE's likewise): a qpt_trace_file_t, then its records in one of two encodings,
 * which its magic tells:
 *  - QPT_TRACE_FMAGIC (the naive tracer's): 32-bit words: event ids (the index of an
 *    event of the description), QPT_TRACE_REPEAT counts, value records (QPT_TRACE_BIAS
 *    first, QPT_TRACE_VAL, QPT_TRACE_SIGNAL: the word, then 8 bytes) and QPT_TRACE_END
 *    where the process flushed it at its exit;
 *  - QPT_TRACE_FMAGIC16 (the chord tracer's before description version 5): the same
 *    words in 16-bit units (QPT_TRACE_U16_*): an event below QPT_TRACE_U16_LONG is one
 *    unit, any other two; a chord trace has a few thousand events, so nearly every
 *    record takes 2 bytes. The runtime turned its buffers (32-bit words) into units when
 *    it wrote them out; a reader turns the units back into the words above;
 *  - QPT_TRACE_FMAGIC3 (the chord tracer's since version 5): the same units, which the
 *    snippets themselves write into the buffer (an event one unit, a long event two, a
 *    value record five), so that writing a buffer out is a scan for runs and a copy
 *    (issue 31: the conversion took about 70% of the tracer's added instructions). The
 *    one difference: a slot reserved and not written (QPT_TRACE_EMPTY) is one EMPTY
 *    unit per unit of its record (a long event's: two).
 */
#include <stdint.h>

#define QPT_TRACE_MAGIC "QPTTRDS1"  /* description */
#define QPT_TRACE_FMAGIC "QPTTRFL1" /* trace file, 32-bit words */
#define QPT_TRACE_FMAGIC16 "QPTTRFL2" /* trace file, 16-bit units (the runtime's) */
#define QPT_TRACE_FMAGIC3 "QPTTRFL3"  /* trace file, 16-bit units (the snippets') */
#define QPT_TRACE_VERSION 5u /* 2: the instruction part (qpt_trace_ins_hdr_t); 3: the new
                              * code part (qpt_trace_new_hdr_t), QPT_TRACE_SIGNAL records,
                              * QPT_TB_LEAFCALL, QPT_TB_CALLPTR, the part of the code
                              * not traced (qpt_trace_out_hdr_t); 4: QPT_TB_JUMPVAL and
                              * QPT_TRACE_JUMP records; 5: the chord tracer's snippets
                              * write 16-bit units (QPT_TRACE_FMAGIC3) */
#define QPT_TRACE_VERSION_MIN 4u /* the oldest a reader still reads */
#define QPT_TRACE_NONE UINT32_MAX

/* Records of a trace file that are no event of the description. */
#define QPT_TRACE_END 0xffffffffu   /* the process flushed its buffers at exit */
#define QPT_TRACE_LOST 0xfffffffeu  /* the buffer may hold another thread's events (a
                                     * thread control block reused unseen) */
#define QPT_TRACE_VAL 0xfffffff0u   /* a value record (--trace-mem): this word, then an
                                     * 8-byte value (two words, low first), not counted
                                     * in runs */
#define QPT_TRACE_BIAS 0xfffffff1u  /* the same, the value being the load bias (run-time
                                     * address - link-time address) of the program:
                                     * each file's first record */
#define QPT_TRACE_SIGNAL 0xfffffff2u /* the same, the value being the run-time address
                                     * of the instruction the program was to run next (the
                                     * rip the kernel saved) when a signal came: the next
                                     * record is the ENTER of its handler (its entry found
                                     * the kernel's signal frame) */
#define QPT_TRACE_FAULT 0xfffffff3u  /* the same for a fault (SIGSEGV, SIGBUS, SIGILL,
                                     * SIGFPE from the kernel): the rip is the instruction
                                     * that faulted, begun */
#define QPT_TRACE_JUMP 0xfffffff4u  /* the same, the value being the run-time target of the
                                     * indirect jump that ends a QPT_TB_JUMPVAL block,
                                     * recorded just before it jumps */
#define QPT_TRACE_EMPTY 0xfffffffcu  /* a slot reserved but not written when its buffer
                                     * was written out: a record interrupted between its
                                     * reservation and its write by a signal handler
                                     * whose records filled the buffer (the next record
                                     * is then the handler's QPT_TRACE_SIGNAL, whose rip
                                     * is in the record's snippet) */
#define QPT_TRACE_SLACK 16           /* a buffer's bytes past its limit */
#define QPT_TRACE_MAXEVENTS 0xf0000000u
/* QPT_TRACE_REPEAT + N (N < QPT_TRACE_REPEAT_MAX): the record before it, N more times (the
 * runtime writes a run of equal records so: a loop of one block, one record a turn). */
#define QPT_TRACE_REPEAT 0xf0000000u
#define QPT_TRACE_REPEAT_MAX 0x0ffffff0u

/*
 * The 16-bit units of a QPT_TRACE_FMAGIC16 or QPT_TRACE_FMAGIC3 file (little-endian),
 * each standing for one word of the 32-bit encoding (or three: a value record):
 *   U < LONG                 event U
 *   LONG <= U < REPEAT       event (U - LONG) << 16 | the next unit (events below
 *                            QPT_TRACE_U16_MAXEVENTS)
 *   REPEAT <= U < RAW        QPT_TRACE_REPEAT + (U - REPEAT + 1): a run, 1 to 224 more
 *   RAW                      the word in the next two units, low first (longer runs,
 *                            any other word)
 *   VAL, BIAS, SIGNAL, FAULT, JUMP  the same marker word, then its 8-byte value in
 *                            the next four units, low first
 *   EMPTY, LOST, END         that marker word
 * Any other unit is malformed. The snippets of a version-5 chord tracer write events,
 * long events and value records so (a long event as one 4-byte store of its two units,
 * QPT_TRACE_U16_PACK); the runtime adds the REPEAT, RAW, LOST and END units, and a
 * buffer is filled with EMPTY units before it takes records.
 */
#define QPT_TRACE_U16_LONG 0xf000u
#define QPT_TRACE_U16_REPEAT 0xff00u
#define QPT_TRACE_U16_RAW 0xffe0u
#define QPT_TRACE_U16_VAL 0xfff0u    /* + (marker - QPT_TRACE_VAL): VAL BIAS SIGNAL FAULT
                                      * JUMP */
#define QPT_TRACE_U16_EMPTY 0xfffcu
#define QPT_TRACE_U16_LOST 0xfffeu
#define QPT_TRACE_U16_END 0xffffu
#define QPT_TRACE_U16_MAXEVENTS ((QPT_TRACE_U16_REPEAT - QPT_TRACE_U16_LONG) << 16)
/* Event X (QPT_TRACE_U16_LONG <= X < QPT_TRACE_U16_MAXEVENTS) as the 32-bit
 * little-endian word of its two units. */
#define QPT_TRACE_U16_PACK(x) \
    ((QPT_TRACE_U16_LONG + ((uint32_t)(x) >> 16)) | ((uint32_t)(x) & 0xffffu) << 16)

/* Where the runtime keeps a thread's buffer cursor and limit: two words of glibc's
 * x86-64 tcbhead_t that glibc does not use (unused_vgetcpu_cache[2]). */
#define QPT_TRACE_TCB_CUR 0x38
#define QPT_TRACE_TCB_LIM 0x40

enum qpt_trace_kind {
    QPT_TRACE_NAIVE = 0, /* every block records its BLOCK event */
    QPT_TRACE_CHORDS = 1,/* the chords and the other events below */
};

typedef struct qpt_trace_hdr {
    char magic[8];       /* QPT_TRACE_MAGIC */
    uint32_t version;    /* QPT_TRACE_VERSION */
    uint32_t kind;       /* enum qpt_trace_kind */
    uint64_t id;         /* the trace files of a run carry it */
    uint32_t nprocs, nblocks, nedges, nevents;
} qpt_trace_hdr_t;

enum {
    QPT_TP_TRACED = 1u << 0, /* its blocks record events (else it is outside code) */
    QPT_TP_ENTER = 1u << 1,  /* its entry records ENTER (it may be entered other than by a
                              * direct call from traced code) */
    QPT_TP_UNCLEAN = 1u << 2,/* it may end in code that is not traced (a tail jump out):
                              * direct calls of it record RETURNED */
    QPT_TP_RECURSIVE = 1u << 3,/* it may call itself (through others): ENTER, and no
                              * silent path from a return site of such a call to a return */
};

typedef struct qpt_trace_proc {
    uint64_t entry;
    uint32_t block, nblocks; /* its blocks: block .. block + nblocks - 1 (entry first) */
    uint32_t flags;          /* QPT_TP_* */
    uint32_t enter_event;    /* its ENTER event, or QPT_TRACE_NONE */
} qpt_trace_proc_t;

enum {
    QPT_TB_BLOCKEV = 1u << 0, /* entering it records BLOCK (any way in) */
    QPT_TB_ROOT = 1u << 1,    /* entered from outside its procedure (landing pad) */
    QPT_TB_SETJMP = 1u << 2,  /* its call may return twice (setjmp, vfork) */
    QPT_TB_LEAFCALL = 1u << 3,/* it ends in a call of a C library function that never
                               * calls back (memcpy, ...; through the PLT: QPT_TC_NONE):
                               * not traced, records nothing */
    QPT_TB_CHORD_IN = 1u << 4,/* the CHORD of a way into it is recorded in it, before its
                               * first instruction (its only way in) */
    QPT_TB_CALLPTR = 1u << 5, /* its call (QPT_TC_OUTSIDE) goes through a pointer: to
                               * traced code when the next block is a procedure's entry */
    QPT_TB_JUMPVAL = 1u << 6, /* it ends in an indirect jump of unknown target
                               * (QPT_TE_OUT), which records its target first
                               * (QPT_TRACE_JUMP) */
};

enum qpt_trace_call {
    QPT_TC_NONE = 0,   /* the block ends in no call */
    QPT_TC_DIRECT,     /* a direct call of traced procedure `callee` (no RETURNED) */
    QPT_TC_DIRECT_RET, /* a direct call of traced `callee`, RETURNED after it */
    QPT_TC_OUTSIDE,    /* a call of code not traced or through a pointer: RETURNED */
};

typedef struct qpt_trace_block {
    uint64_t start;      /* link-time address */
    uint32_t proc;
    uint32_t flags;      /* QPT_TB_* */
    uint32_t edge, nedges; /* its out-edges: edge .. edge + nedges - 1 */
    uint32_t tree;       /* the out-edge taken when no event says otherwise, or NONE */
    uint32_t call;       /* enum qpt_trace_call */
    uint32_t callee;     /* DIRECT*: the procedure; OUTSIDE or LEAFCALL: its
                          * qpt_trace_out_t, or NONE (a pointer; no such list) */
    uint32_t block_event;/* its BLOCK event, or NONE */
    uint32_t ret_event;  /* its RETURNED event, or NONE */
    uint32_t pad;
} qpt_trace_block_t;

enum qpt_trace_edge_kind {
    QPT_TE_BLOCK = 0,  /* to a block of the procedure */
    QPT_TE_RETURN,     /* leaves: return */
    QPT_TE_TAIL,       /* leaves: jump to traced procedure `to` */
    QPT_TE_OUT,        /* leaves: jump to code not traced, or unknown */
    QPT_TE_NORETURN,   /* leaves: a call that does not return, hlt, ud2 */
    QPT_TE_TAIL_INTO,  /* leaves: jump into block `to` of another traced procedure (it
                        * records BLOCK: it is entered from outside its procedure) */
};

typedef struct qpt_trace_edge {
    uint32_t from;     /* block */
    uint32_t to;       /* block (QPT_TE_BLOCK), procedure (QPT_TE_TAIL), else NONE */
    uint32_t kind;     /* enum qpt_trace_edge_kind */
    uint32_t event;    /* its CHORD event, or NONE */
} qpt_trace_edge_t;

enum qpt_trace_event_kind {
    QPT_TV_BLOCK = 0,  /* a: block */
    QPT_TV_CHORD,      /* a: edge */
    QPT_TV_ENTER,      /* a: procedure */
    QPT_TV_RETURNED,   /* a: the call's block */
};

typedef struct qpt_trace_event {
    uint32_t kind;     /* enum qpt_trace_event_kind */
    uint32_t a;
} qpt_trace_event_t;

/*
 * The instructions of every block (qp trace insns), after the events: a
 * qpt_trace_ins_hdr_t, then uint32_t first[nblocks + 1] (block b's instructions are
 * first[b] .. first[b + 1] - 1) and uint8_t len[ninsns], their lengths in bytes, in
 * address order from the block's start; each piece 8-byte aligned. (The rewritten file's
 * old text cannot tell them: redirects overwrite its entries.)
 */
#define QPT_TRACE_IMAGIC "QPTTRINS"

typedef struct qpt_trace_ins_hdr {
    char magic[8];     /* QPT_TRACE_IMAGIC */
    uint32_t nblocks;  /* qpt_trace_hdr_t.nblocks */
    uint32_t ninsns;
} qpt_trace_ins_hdr_t;

/*
 * The new code (version 3), after the instructions: where each instruction of the
 * instruction part went in the rewritten program, to place a signal handler's entry at
 * the instruction it interrupted (or to know that it interrupted the runtime or code not
 * traced). A qpt_trace_new_hdr_t, then one qpt_trace_new_t per
 * instruction (the same order), 8-byte aligned. Instruction i's slot starts at base +
 * slot (the snippets placed before it, then the instruction at base + slot + pre, ending
 * at base + slot + pre + len, its slot at base + slot + pre + len + post); slot
 * QPT_TRACE_NEW_NONE: not known.
 */
#define QPT_TRACE_NMAGIC "QPTTRNEW"
#define QPT_TRACE_NEW_NONE UINT32_MAX

typedef struct qpt_trace_new_hdr {
    char magic[8];     /* QPT_TRACE_NMAGIC */
    uint32_t ninsns;   /* qpt_trace_ins_hdr_t.ninsns */
    uint32_t pad;
    uint64_t base;     /* link-time address of the new code */
    uint64_t size;     /* its bytes */
    uint64_t rt, rt_size; /* the runtime's code (the trace buffer refill, the hooks) */
} qpt_trace_new_hdr_t;

typedef struct qpt_trace_new {
    uint32_t slot;     /* offset from base, or QPT_TRACE_NEW_NONE */
    uint16_t pre;      /* bytes of snippets before the instruction */
    uint16_t len;      /* bytes of the relocated instruction */
    uint16_t post;     /* bytes after it in its slot (snippets after it, a jump) */
    uint16_t pad;
} qpt_trace_new_t;

/*
 * Address tracing (--trace-mem): after the new code, the description may go on with a
 * qpt_trace_mem_hdr_t, then one qpt_trace_mblock_t per block (the same indices) and the
 * accesses (qpt_trace_mref_t), each 8-byte aligned. Each access names an instruction of
 * its block, in the order they run. A block's accesses consume the value records
 * (QPT_TRACE_VAL) of a thread's trace in order, block after regenerated block.
 */
#define QPT_TRACE_MMAGIC "QPTTRMEM"
#define QPT_TRACE_MNEW 0xffffu /* qpt_trace_mref_t.from: the access records its value */

typedef struct qpt_trace_mem_hdr {
    char magic[8];     /* QPT_TRACE_MMAGIC */
    uint32_t nblocks;  /* qpt_trace_hdr_t.nblocks */
    uint32_t nrefs;
} qpt_trace_mem_hdr_t;

typedef struct qpt_trace_mblock {
    uint32_t ref, nrefs; /* its accesses */
    uint64_t end;        /* the address after its last instruction */
} qpt_trace_mblock_t;

enum qpt_trace_mref_kind {
    QPT_TM_STATIC = 0, /* at disp (rip-relative or absolute): no value */
    QPT_TM_EA,         /* at V + disp: V the value it records (from == MNEW: base + index *
                        * scale, plus %fs's base), or the V of access `from` of its block
                        * (same base and index, not written in between) */
    QPT_TM_STRING,     /* a string instruction: values rcx (rep only), rsi (access != 0),
                        * rdi (access2 != 0); rcx times (1 without rep): at rsi (access),
                        * then at rdi (access2); both step by size */
    QPT_TM_UNTRACED,   /* an access this does not describe (the walk marks it) */
};

enum { QPT_TM_LOAD = 1, QPT_TM_STORE = 2 }; /* both: a modify */

typedef struct qpt_trace_mref {
    uint64_t insn;     /* the instruction (link-time address) */
    int64_t disp;
    uint8_t kind;      /* enum qpt_trace_mref_kind */
    uint8_t access;    /* QPT_TM_LOAD | QPT_TM_STORE */
    uint8_t access2;   /* STRING: at rdi */
    uint8_t rep;       /* STRING */
    uint16_t size;     /* bytes */
    uint16_t from;     /* EA: QPT_TRACE_MNEW, or an earlier access of the block */
} qpt_trace_mref_t;

/*
 * Code that is not traced: the description may end (after the address part, if any)
 * with a qpt_trace_out_hdr_t, qpt_trace_out_t[nouts] and the names (nbytes of
 * NUL-terminated strings), each piece 8-byte aligned: the program's PLT stubs and the
 * procedures the rewrite left in place. A block whose call goes there directly
 * (QPT_TC_OUTSIDE, or QPT_TB_LEAFCALL) names it in `callee` (else QPT_TRACE_NONE).
 */
#define QPT_TRACE_OMAGIC "QPTTROUT"

typedef struct qpt_trace_out_hdr {
    char magic[8];     /* QPT_TRACE_OMAGIC */
    uint32_t nouts;
    uint32_t nbytes;   /* of the names */
} qpt_trace_out_hdr_t;

enum {
    QPT_TO_PLT = 0,  /* a PLT stub */
    QPT_TO_LEFT = 1, /* a procedure left in place */
    QPT_TO_GOT = 2,  /* a shared library's function called through the GOT (entry 0) */
};

typedef struct qpt_trace_out {
    uint64_t entry;    /* link-time address */
    uint32_t name;     /* offset of its name in the names */
    uint32_t kind;     /* QPT_TO_* */
} qpt_trace_out_t;

typedef struct qpt_trace_file {
    char magic[8];     /* QPT_TRACE_FMAGIC */
    uint64_t id;       /* qpt_trace_hdr_t.id */
    uint64_t pid, tid;
} qpt_trace_file_t;

#endif
