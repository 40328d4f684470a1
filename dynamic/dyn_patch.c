/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Entry counters, timers and call-site counters in a live process (see emit_tramp for
 * the three kinds of trampoline; a timed procedure is patched at its entry and at every
 * exit, all or nothing). Each patched procedure entry gets a 5-byte jump to
 * its trampoline: `lock incq counter(%rip)` (flags saved around it only where the ABI
 * does not say they are dead), the original instructions it replaced, relocated, and a
 * jump back (built by patch/'s pt_tramp_emit). A point is patched only when the CFG proves that no
 * branch lands inside the replaced bytes and no thread is inside them (pcs, and return
 * addresses found near the top of each stack for signal frames). Removal writes back
 * every original byte; the trampoline memory is unmapped unless a thread may still be
 * in it. Counters live in a memfd mapped shared into the process and into ours when the
 * process can open it, so they are read without a system call and survive its exit;
 * otherwise in anonymous memory read with process_vm_readv.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/qp_clock.h"
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
                           * relocated whole (with_neighbour): that one's row + 1, which
                           * must go in for this one to; 0: none */
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
    uint32_t row;     /* the row refused at install (row_bad), or UINT32_MAX */
} refusal_t;

struct dyn_session {
    dyn_proc_t *p;          /* the process */
    const cfg_prog_t *prog; /* its executable's CFGs */
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
    int memfd;                /* our end of shared counters, or -1 */
    volatile uint64_t *local; /* counters mapped here (shared), or NULL */
    uint64_t *last;           /* last sampled values (not shared) */
    int installed;            /* patches are in */
    int atomic;               /* lock prefix on increments */
    row_t *rows;              /* rows selected; counters at ctr + 8 * ROW_WORDS * row */
    size_t nrows, caprows;
    uint32_t *good; /* installed rows, in report order */
    size_t ngood;
    uint64_t *ticks; /* last sampled timer totals per good row */
    char **strs;     /* names made here (call sites) */
    size_t nstrs, capstrs;
    int has_calls; /* call-site trampolines are in */
    uint64_t tsc0; /* cycle counter and CLOCK_MONOTONIC ns at install */
    uint64_t mono0;
    uint32_t *frags; /* cold fragments, by parent (lazily) */
    size_t nfrags;
    uint64_t *pads; /* padding taken by short jumps and spills (link addresses; 5
                     * bytes from each are reserved) */
    size_t npads, cappads;
    uint8_t all_or_nothing; /* dyn_session_set_all_or_nothing */
    int shstk; /* the process has a shadow stack (-1: not known yet) */
    uint64_t *foreign; /* targets of branches from one procedure into another's middle
                        * (link addresses, sorted; lazily) */
    size_t nforeign;
    int foreign_done;
    uint64_t nb_want; /* check_reloc: find a slot for the jmp rel8 of another procedure's
                       * entry at this link address too (with_neighbour); 0: none */
    uint64_t nb_slot; /* ... the slot it found (link address, taken), for the next
                       * find_pad; 0: none */
    uint8_t nb_orig[JMP_LEN]; /* ... its bytes */
    int nb_allow;             /* check_reloc may borrow a neighbour's slot (borrow_slot) */
    int nb_depth;             /* ... not while one lends its own */
    const char *nb_pattern;   /* what the selection measures (NULL: every procedure) */
    uint64_t nb_need;         /* borrow_slot, not allowed: the link address whose short
                               * jump wanted a slot first (dyn_session_check_borrow) */
    int nb_pun;               /* nb_want is a 1-byte procedure's (pun_site): the lender is
                               * the procedure right after it, its first byte kept */
};

static int pun_site(const dyn_session_t *s, uint64_t a);

/* Bytes written at PT's first replaced byte: a jmp rel32, or a jmp rel8 to its pad (its
 * opcode alone for a pun), or a jmp rel32 after a kept first byte. */
static size_t
patch_len(const point_t *pt)
{
    return pt->pun ? 1 : pt->keep_first ? JMP_LEN + 1 : pt->pad ? SHORT_LEN : JMP_LEN;
}

/* Would PT's jump cross a page boundary (install refuses it: it could not be written in
 * one piece)? Known at selection, so that another way is tried. */
static int
crosses_page(const point_t *pt)
{
    return (pt->entry & 4095) > 4096 - patch_len(pt);
}

static int
refuse_name(dyn_session_t *s, const char *name, const char *why)
{
    if (s->nref == s->capref) {
        size_t cap = s->capref ? 2 * s->capref : 16;
        refusal_t *n = realloc(s->ref, cap * sizeof(*n));
        if (n == NULL)
            return QP_ENOMEM;
        s->ref = n;
        s->capref = cap;
    }
    s->ref[s->nref].name = name;
    s->ref[s->nref].row = UINT32_MAX;
    s->ref[s->nref++].why = why;
    return 0;
}

/* A new row; its index in *ROW. */
static int
add_row(dyn_session_t *s, const char *name, uint32_t proc, int timed, uint32_t *row)
{
    if (s->nrows == s->caprows) {
        size_t cap = s->caprows ? 2 * s->caprows : 64;
        row_t *n = realloc(s->rows, cap * sizeof(*n));
        if (n == NULL)
            return QP_ENOMEM;
        s->rows = n;
        s->caprows = cap;
    }
    s->rows[s->nrows].name = name;
    s->rows[s->nrows].proc = proc;
    s->rows[s->nrows].timed = (uint8_t)(timed != 0);
    s->rows[s->nrows].bad = 0;
    s->rows[s->nrows].why = NULL;
    *row = (uint32_t)s->nrows++;
    return 0;
}

static int
pad_take(dyn_session_t *s, uint64_t a);

static int
add_cand(dyn_session_t *s, const point_t *pt)
{
    if (pt->spill)
        QP_CHECK(pad_take(s, pt->entry - s->bias + pt->len - pt->spill));
    if (s->ncand == s->capcand) {
        size_t cap = s->capcand ? 2 * s->capcand : 64;
        point_t *n = realloc(s->cand, cap * sizeof(*n));
        if (n == NULL)
            return QP_ENOMEM;
        s->cand = n;
        s->capcand = cap;
    }
    s->cand[s->ncand++] = *pt;
    return 0;
}

/* "NAME+0xOFF->CALLEE" as a string owned by the session, or NULL. */
static const char *
site_name(dyn_session_t *s, const char *name, char sign, uint64_t off, const char *callee)
{
    size_t need = strlen(name) + strlen(callee) + 24;
    char *c;
    if (s->nstrs == s->capstrs) {
        size_t cap = s->capstrs ? 2 * s->capstrs : 16;
        char **n = realloc(s->strs, cap * sizeof(*n));
        if (n == NULL)
            return NULL;
        s->strs = n;
        s->capstrs = cap;
    }
    if ((c = malloc(need)) == NULL)
        return NULL;
    snprintf(c, need, "%s%c0x%llx->%s", name, sign, (unsigned long long)off, callee);
    s->strs[s->nstrs++] = c;
    return c;
}

/* Mark row R refused (once, with WHY). */
static int
row_bad(dyn_session_t *s, uint32_t r, const char *why)
{
    if (s->rows[r].bad)
        return 0;
    s->rows[r].bad = 1;
    s->rows[r].why = why;
    QP_CHECK(refuse_name(s, s->rows[r].name, why));
    s->ref[s->nref - 1].row = r;
    return 0;
}

int
dyn_session_create(
    dyn_proc_t *p, const cfg_prog_t *prog, uint64_t bias, dyn_session_t **out /*OUT*/)
{
    dyn_session_t *s;

    if (p == NULL || prog == NULL || out == NULL)
        return QP_EINVAL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return QP_ENOMEM;
    s->chosen = calloc(prog->nprocs ? prog->nprocs : 1, 1);
    if (s->chosen == NULL) {
        free(s);
        return QP_ENOMEM;
    }
    s->p = p;
    s->prog = prog;
    s->bias = bias;
    s->memfd = -1;
    s->atomic = 1;
    s->shstk = -1;
    *out = s;
    return 0;
}

void
dyn_session_set_atomic(dyn_session_t *s, int atomic)
{
    if (s != NULL)
        s->atomic = atomic != 0;
}

/*****************************************************************************
 * What the file proves: the replaced bytes are one block's, no branch lands inside
 */

/* Does a procedure start in [LO, HI) (link addresses)? */
static int
proc_entry_in(const cfg_prog_t *prog, uint64_t lo, uint64_t hi)
{
    size_t a = 0, b = prog->nprocs;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (prog->procs[mid].entry < lo)
            a = mid + 1;
        else
            b = mid;
    }
    return a < prog->nprocs && prog->procs[a].entry < hi;
}

/* Is [A, A + N) (link addresses) clear of the padding other points took (s->pads)? */
static int
pad_free(const dyn_session_t *s, uint64_t a, size_t n)
{
    for (size_t k = 0; k < s->npads; k++)
        if (a < s->pads[k] + JMP_LEN && s->pads[k] < a + n)
            return 0;
    return 1;
}

/* Take the 5 bytes of padding at link address A. */
static int
pad_take(dyn_session_t *s, uint64_t a)
{
    if (s->npads == s->cappads) {
        size_t cap = s->cappads ? 2 * s->cappads : 16;
        uint64_t *n = realloc(s->pads, cap * sizeof(*n));
        if (n == NULL)
            return QP_ENOMEM;
        s->pads = n;
        s->cappads = cap;
    }
    s->pads[s->npads++] = a;
    return 0;
}

/*
 * N bytes of padding right after the block that ends at link address END with a ret or
 * a jmp (so nothing falls into them): in no block, no procedure's entry, nops or int3
 * from END on, and not taken by another point. A jump may cover them.
 */
static int
spill_ok(const dyn_session_t *s, uint64_t end, size_t n)
{
    const cfg_prog_t *prog = s->prog;
    const uint8_t *bytes;
    size_t avail, x;

    for (x = 0; x < n; x++)
        if (cfg_block_at(prog, end + x) != CFG_NONE)
            return 0;
    if (proc_entry_in(prog, end, end + n) || !pad_free(s, end, n))
        return 0;
    if ((bytes = cfg_image_ptr(prog->img, end, &avail)) == NULL || avail < n)
        return 0;
    for (x = 0; x < n;) {
        arch_insn_t in;
        if (bytes[x] == 0xcc) {
            x++;
            continue;
        }
        if (arch_decode(bytes + x, avail - x, end + x, &in) < 0
            || in.kind != ARCH_KIND_NOP)
            return 0;
        x += in.len;
    }
    return 1;
}

/*
 * Does the process run with a shadow stack (x86 CET: /proc/PID/status says shstk)? A
 * call emulated by push and jmp would not be on it, and its ret would fault.
 */
static int
has_shadow_stack(const dyn_session_t *s)
{
    char path[64], line[256];
    FILE *f;
    int on = 0;

    if (s->shstk >= 0)
        return s->shstk;
    snprintf(path, sizeof(path), "/proc/%d/status", dyn_proc_pid(s->p));
    if ((f = fopen(path, "r")) == NULL)
        return 1; /* not known: assume the worst */
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "x86_Thread_features:", 20) == 0
            && strstr(line, "shstk") != NULL)
            on = 1;
    fclose(f);
    ((dyn_session_t *)s)->shstk = on; /* a cache, not state */
    return on;
}

/* At an ABI entry (called, or named as a function) the flags are dead. */
static uint8_t
entry_save_flags(const cfg_proc_t *pr)
{
    int abi = (pr->sources
                  & (CFG_SRC_SYMBOL | CFG_SRC_EH_FRAME | CFG_SRC_CALL | CFG_SRC_ENTRY
                      | CFG_SRC_INIT | CFG_SRC_PLT))
        != 0;
    return pt_flags_at_entry(abi) != 0;
}

/*
 * The whole instructions at procedure I's entry, NEED bytes of them at least, that a jump
 * replaces: why not, or NULL with PT's proc, entry, len, ninsns, orig, save_flags, spill
 * and call_ret. An entry block that ends (ret, jmp) before NEED bytes is completed with
 * the padding after it (spill). A direct call may be the last instruction: the
 * trampoline pushes its return address, which is then the end of the replaced bytes (so
 * a callee returns right after the jump, into the original code, whether the jump is
 * in or not). FIRST_ONLY (an indirect jump with unknown targets might land anywhere in
 * the procedure, but not inside an instruction): the bytes must be one instruction.
 */
static const char *
entry_insns(
    const dyn_session_t *s, uint32_t i, size_t need, int first_only, point_t *pt /*OUT*/)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[i];
    const cfg_block_t *b = &prog->blocks[pr->block];
    const uint8_t *bytes;
    size_t avail, len = 0;
    int last = -1;

    if (proc_entry_in(prog, pr->entry + 1, pr->entry + need))
        return "another procedure starts within 5 bytes of its entry";
    bytes = cfg_image_ptr(prog->img, pr->entry, &avail);
    if (bytes == NULL)
        return "no bytes in the file";
    memset(pt, 0, sizeof(*pt));
    pt->proc = i;
    pt->entry = pr->entry + s->bias;
    while (len < need) {
        arch_insn_t in;
        if (pt->call_ret)
            return "a call ends within the bytes the jump replaces (its callee would "
                   "return into the jump)";
        if (pr->entry + len >= b->end) {
            /* The block ended: a ret or a jmp may be followed by padding to cover. */
            if ((last != ARCH_KIND_RET && last != ARCH_KIND_JMP
                    && last != ARCH_KIND_JMP_IND)
                || need > sizeof(pt->orig) || avail < need
                || !spill_ok(s, pr->entry + len, need - len))
                return "its entry block is shorter than the 5-byte jump";
            pt->spill = (uint8_t)(need - len);
            len = need;
            break;
        }
        if (arch_decode(bytes + len, avail - len, pt->entry + len, &in) < 0)
            return "an instruction at its entry does not decode";
        if (pr->entry + len + in.len > b->end)
            return "its entry block is shorter than the 5-byte jump";
        if (in.flags & ARCH_F_PRIV)
            return "a privileged instruction at its entry";
        switch (in.kind) {
        case ARCH_KIND_SEQ:
        case ARCH_KIND_NOP:
        case ARCH_KIND_ENDBR:
        case ARCH_KIND_JMP:
        case ARCH_KIND_JCC:
        case ARCH_KIND_JMP_IND:
        case ARCH_KIND_RET: break;
        case ARCH_KIND_CALL:
            if (has_shadow_stack(s))
                return "a call in its first 5 bytes (the process has a shadow stack)";
            pt->call_ret = 1;
            break;
        case ARCH_KIND_CALL_IND:
            return "an indirect call in its first 5 bytes (the return address would be "
                   "in the trampoline)";
        case ARCH_KIND_SYSCALL: return "a system call in its first 5 bytes";
        default: return "an instruction in its first 5 bytes cannot be moved";
        }
        if ((in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC)
            && in.target >= pt->entry && in.target < pt->entry + len + in.len)
            return "a branch in its first bytes targets them";
        len += in.len;
        last = in.kind;
        pt->ninsns++;
    }
    if (first_only && pt->ninsns > 1)
        return "an indirect jump with unknown targets might land in its first bytes";
    if (len > sizeof(pt->orig))
        return "its first instructions are too long";
    pt->len = (uint8_t)len;
    memcpy(pt->orig, bytes, len);
    pt->save_flags = entry_save_flags(pr);
    return NULL;
}

static const char *entry_ok_loop(
    const dyn_session_t *s, uint32_t i, int loop_ok, int *first_only /*OUT*/);

/*
 * Why procedure I's entry cannot have a jump whatever its instructions, or NULL;
 * *FIRST_ONLY: only a jump within its first instruction is safe (see entry_insns).
 */
static const char *
entry_ok(const dyn_session_t *s, uint32_t i, int *first_only /*OUT*/)
{
    return entry_ok_loop(s, i, 0, first_only);
}

/* entry_ok, and with LOOP_OK a branch of the procedure back to its entry allowed (in a
 * copy it goes to the entry's copy, after the entry's snippet: a loop, not a call). */
static const char *
entry_ok_loop(const dyn_session_t *s, uint32_t i, int loop_ok, int *first_only /*OUT*/)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[i];
    const cfg_block_t *b;

    *first_only = pr->nind_unresolved > 0;
    if (pr->flags & CFG_PROC_FRAGMENT)
        return "a cold fragment of another procedure, not an entry";
    if (pr->unsafe != NULL)
        return "the analysis could not prove its code safe";
    if (pr->nblocks == 0)
        return "no code";
    b = &prog->blocks[pr->block];
    if (b->start != pr->entry)
        return "its entry does not start a block";
    if (b->npred > 0 && !loop_ok)
        return "a branch inside the procedure goes back to its entry";
    return NULL;
}

/* Why procedure I cannot get an entry counter, or NULL; fills *PT. */
static const char *
check_proc(const dyn_session_t *s, uint32_t i, point_t *pt /*OUT*/)
{
    int first_only;
    const char *why = entry_ok(s, i, &first_only);
    return why != NULL ? why : entry_insns(s, i, JMP_LEN, first_only, pt);
}

/*
 * Padding no procedure owns at link address A: the 5 bytes from A are in a gap between
 * blocks (cfg_block_at), and the gap's bytes up to them decode as nops or int3 (the
 * alignment between procedures). B0 is the lowest address the gap is looked for from.
 */
static int
is_padding(const cfg_prog_t *prog, uint64_t a, uint64_t b0)
{
    uint64_t g = a, x;
    size_t avail;
    const uint8_t *bytes;

    for (x = a; x < a + JMP_LEN; x++)
        if (cfg_block_at(prog, x) != CFG_NONE)
            return 0;
    while (g > b0 && cfg_block_at(prog, g - 1) == CFG_NONE)
        g--;
    if (g == b0)
        return 0; /* the gap's start is not known: not proven padding */
    if ((bytes = cfg_image_ptr(prog->img, g, &avail)) == NULL || avail < a + JMP_LEN - g)
        return 0;
    for (x = g; x < a + JMP_LEN;) {
        arch_insn_t in;
        if (bytes[x - g] == 0xcc) {
            x++;
            continue;
        }
        if (arch_decode(bytes + (x - g), avail - (x - g), x, &in) < 0
            || in.kind != ARCH_KIND_NOP)
            return 0;
        x += in.len;
    }
    return 1;
}

/*
 * A 5-byte jump in padding within reach of a 2-byte jmp rel8 at link address E, for PT
 * (whose bytes are filled): why not, or NULL with PT's pad and pad_orig set and the
 * padding taken.
 */
static const char *
find_pad(dyn_session_t *s, uint64_t e, point_t *pt)
{
    const cfg_prog_t *prog = s->prog;
    uint64_t from = e + SHORT_LEN - 128, to = e + SHORT_LEN + 127;
    uint64_t b0 = from > 256 ? from - 256 : 0;

    if (((e + s->bias) & 4095) > 4096 - SHORT_LEN)
        return "its first 2 bytes cross a page boundary";
    if (s->nb_slot != 0) {
        /* A slot in a neighbour's original code, taken already (with_neighbour). */
        uint64_t a = s->nb_slot;
        s->nb_slot = 0;
        if (a >= from && a <= to && !(a < e + pt->len && e < a + JMP_LEN)) {
            pt->pad = a + s->bias;
            memcpy(pt->pad_orig, s->nb_orig, JMP_LEN);
            return NULL;
        }
    }
    for (uint64_t a = from; a <= to; a++) {
        size_t k;
        if (((a + s->bias) & 4095) > 4096 - JMP_LEN)
            continue;
        /* Not the point's own bytes (a spill is padding too). */
        if (a < e + pt->len && e < a + JMP_LEN)
            continue;
        if (!pad_free(s, a, JMP_LEN) || !is_padding(prog, a, b0))
            continue;
        const uint8_t *bytes = cfg_image_ptr(prog->img, a, &k);
        if (pad_take(s, a) < 0)
            return "out of memory";
        pt->pad = a + s->bias;
        memcpy(pt->pad_orig, bytes, JMP_LEN);
        return NULL;
    }
    return "no padding within reach of a 2-byte jump for a 5-byte one";
}

/*
 * Procedure I's entry, too short for a 5-byte jump, with a 2-byte jmp rel8 to a 5-byte
 * jump in padding within its reach: why not, or NULL with *PT filled and the padding
 * taken.
 */
static const char *
check_short(dyn_session_t *s, uint32_t i, int first_only, point_t *pt /*OUT*/)
{
    const char *why;

    if ((why = entry_insns(s, i, SHORT_LEN, first_only, pt)) != NULL)
        return why;
    return find_pad(s, s->prog->procs[i].entry, pt);
}

static const char *
check_exit(const dyn_session_t *s, const cfg_block_t *b, uint64_t own, int whole,
    point_t *pt, int *want_pad);
static const char *
check_tail(const dyn_session_t *s, const cfg_block_t *b, uint64_t own, int whole,
    int plain, point_t *pt, int *want_pad);
static int has_except_table(const cfg_image_t *img);
static int is_tail_block(const cfg_prog_t *prog, const cfg_block_t *b);
static int is_cond_tail_block(const cfg_prog_t *prog, const cfg_block_t *b);
static const char *check_noret(const dyn_session_t *s, const cfg_block_t *b, point_t *pt);

/*
 * The first 5 bytes of whole instructions from ADDR, in block B, for a jump: why not, or
 * NULL with PT's entry, len, ninsns and orig filled.
 */
static const char *
check_head(const dyn_session_t *s, const cfg_block_t *b, uint64_t addr, point_t *pt)
{
    const cfg_prog_t *prog = s->prog;
    size_t avail, len = 0;
    const uint8_t *bytes = cfg_image_ptr(prog->img, addr, &avail);
    uint32_t i = (uint32_t)(cfg_proc_at(prog, addr) - prog->procs);

    if (bytes == NULL)
        return "no bytes in the file";
    /* The first procedure entered after ADDR (procs are sorted by entry). */
    uint32_t lo = 0, hi = prog->nprocs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (prog->procs[mid].entry <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < prog->nprocs && lo != i && prog->procs[lo].entry < addr + JMP_LEN)
        return "another procedure starts within 5 bytes";
    pt->entry = addr + s->bias;
    pt->ninsns = 0;
    while (len < JMP_LEN) {
        arch_insn_t in;
        if (arch_decode(bytes + len, avail - len, pt->entry + len, &in) < 0)
            return "an instruction does not decode";
        if (addr + len + in.len > b->end)
            return "its block is shorter than the 5-byte jump";
        if (in.flags & ARCH_F_PRIV)
            return "a privileged instruction in the bytes to patch";
        if (in.kind == ARCH_KIND_CALL_IND)
            return "an indirect call in the bytes to patch (its return address would be "
                   "in the trampoline)";
        /* A direct call ends the block: the trampoline makes it with its original
         * return address (call_ret), so nothing returns into the trampoline. */
        if (in.kind == ARCH_KIND_CALL && has_shadow_stack(s))
            return "a call in the bytes to patch (the process has a shadow stack)";
        if (in.kind == ARCH_KIND_SYSCALL)
            return "a system call in the bytes to patch";
        if (in.kind == ARCH_KIND_HALT)
            return "a trap in the bytes to patch";
        if ((in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC)
            && in.target > pt->entry && in.target < pt->entry + len + in.len)
            return "a branch in the bytes to patch targets them";
        len += in.len;
        pt->ninsns++;
        pt->call_ret = in.kind == ARCH_KIND_CALL;
    }
    if (len > sizeof(pt->orig))
        return "the instructions to move are too long";
    pt->len = (uint8_t)len;
    memcpy(pt->orig, bytes, len);
    return NULL;
}

/*
 * The entry of procedure I with its entry block moved whole (DYN_PT_WHOLE: it ends in
 * the procedure's ret, which the trampoline runs after the exit's snippet): why not, or
 * NULL with *PT filled (as timed_entry's whole entries: the padding after the block
 * covered by the jump, or a short jump to a jump in padding, which it takes).
 */
static const char *
whole_entry(const dyn_session_t *s, uint32_t i, point_t *pt /*OUT*/)
{
    const cfg_proc_t *pr = &s->prog->procs[i];
    const cfg_block_t *eb = &s->prog->blocks[pr->block];
    const char *why;
    int first_only, want_pad, both;

    if ((why = entry_ok(s, i, &first_only)) != NULL)
        return why;
    both = is_cond_tail_block(s->prog, eb) == 3;
    if (eb->last_kind != ARCH_KIND_RET && !is_tail_block(s->prog, eb) && !both)
        return "its entry block does not end in a ret or a tail call";
    if (eb->end - eb->start > sizeof(pt->orig))
        return "its entry block is too long to move whole";
    if ((why = check_exit(s, eb, pr->entry, 1, pt, &want_pad)) != NULL)
        return why;
    /* (entry_ok: only a first instruction may move when an indirect jump of unknown
     * targets might land after it.) */
    if (first_only && pt->ninsns > 1)
        return "an indirect jump with unknown targets might land in its entry block";
    if (want_pad && (why = find_pad((dyn_session_t *)s, pr->entry, pt)) != NULL)
        return why;
    if (pt->len < SHORT_LEN) {
        /* A lone ret: its jmp rel8's displacement is its neighbour's first byte, which
         * must lead to the slot it lent (pun_site, slot_at). */
        size_t avail;
        const uint8_t *nx = cfg_image_ptr(s->prog->img, pr->entry + 1, &avail);
        if (!s->nb_pun || nx == NULL || avail < 1 || pt->pad == 0
            || pt->pad != pr->entry + s->bias + SHORT_LEN + (uint64_t)(int64_t)(int8_t)nx[0])
            return "a 1-byte procedure whose neighbour lends no slot where its first byte "
                   "points";
        pt->pun = 1;
    }
    pt->by_jump = eb->last_kind != ARCH_KIND_RET;
    pt->whole = 1;
    pt->tail = both ? 3 : 0;
    pt->save_flags = entry_save_flags(pr);
    return NULL;
}

/* What the file says of the point of KIND at ADDR in PROC: 0 with *PT filled, or
 * QP_EUNSUPP with *WHY. */
static int
check_point(const dyn_session_t *s, int kind, uint32_t proc, uint64_t addr, point_t *out,
    const char **why)
{
    point_t pt;
    const cfg_prog_t *prog;
    const cfg_proc_t *pr;
    uint32_t b;

    *why = NULL;
    if (kind < DYN_PT_ENTRY || kind > DYN_PT_PROC)
        return QP_EINVAL;
    prog = s->prog;
    if (proc >= prog->nprocs)
        return QP_EINVAL;
    pr = &prog->procs[proc];
    memset(&pt, 0, sizeof(pt));
    if (pr->unsafe != NULL)
        *why = "the analysis could not prove its code safe";
    else if (pr->nind_unresolved > 0 && kind != DYN_PT_ENTRY && kind != DYN_PT_WHOLE)
        *why = "an indirect jump with unknown targets might land in the bytes to patch";
    else if ((b = cfg_block_at(prog, addr)) == CFG_NONE)
        *why = "not an instruction of the procedure";
    else if (kind == DYN_PT_ENTRY) {
        int first_only;
        *why = check_proc(s, proc, &pt);
        /* Too short for the jump: a short one through padding, as --count does. */
        if (*why != NULL && entry_ok(s, proc, &first_only) == NULL
            && check_short((dyn_session_t *)s, proc, first_only, &pt) == NULL)
            *why = NULL;
        if (*why == NULL && addr != pr->entry)
            *why = "not the procedure's entry";
    } else if (kind == DYN_PT_WHOLE) {
        *why = whole_entry(s, proc, &pt);
        if (*why == NULL && addr != pr->entry)
            *why = "not the procedure's entry";
    } else if (kind == DYN_PT_BLOCK) {
        if (prog->blocks[b].start != addr)
            *why = "not the start of a block";
        else
            *why = check_head(s, &prog->blocks[b], addr, &pt);
        pt.save_flags = 1;
    } else if (kind == DYN_PT_INSN) {
        /* An instruction boundary of the block, decoding from its start. */
        uint64_t a = prog->blocks[b].start;
        while (a < addr) {
            arch_insn_t in;
            if (cfg_image_decode(prog->img, a, 0, &in) < 0)
                break;
            a += in.len;
        }
        if (a != addr)
            *why = "not an instruction of the procedure";
        else
            *why = check_head(s, &prog->blocks[b], addr, &pt);
        pt.save_flags = 1;
    } else if (kind == DYN_PT_EXIT) {
        /* A ret, or a tail call (a jmp, or a jcc whose taken side leaves: its snippet
         * runs on the way out only, 3 when both sides leave). */
        const cfg_block_t *bl = &prog->blocks[b];
        int ctail = is_cond_tail_block(prog, bl);
        if (cfg_block_call_never_returns(prog, bl))
            *why = check_noret(s, bl, &pt); /* a call that never returns */
        else if (bl->last_kind != ARCH_KIND_RET && !is_tail_block(prog, bl) && !ctail)
            *why = "not a block ending in ret or a tail call";
        else {
            int want_pad;
            *why = check_exit(s, bl, pr->entry, 0, &pt, &want_pad);
            /* Too short: a jmp rel8 to a jump in padding (as --time's exits). */
            if (*why == NULL && want_pad)
                *why = find_pad((dyn_session_t *)s, bl->start, &pt);
            if (*why == NULL && ctail == 3)
                pt.tail = 3;
        }
        if (*why == NULL) {
            arch_insn_t in;
            size_t avail;
            const uint8_t *bytes = cfg_image_ptr(prog->img, addr, &avail);
            if (bytes == NULL || arch_decode(bytes, avail, addr, &in) < 0
                || addr + in.len != bl->end)
                *why = "not the ret or the tail call of its block";
        }
    } else { /* a call */
        const cfg_block_t *bl = &prog->blocks[b];
        arch_insn_t in;
        size_t avail;
        const uint8_t *bytes = cfg_image_ptr(prog->img, addr, &avail);
        if (bytes == NULL || arch_decode(bytes, avail, addr, &in) < 0
            || (in.kind != ARCH_KIND_CALL && in.kind != ARCH_KIND_CALL_IND)
            || addr + in.len != bl->end)
            *why = "not a call";
        else if (in.len < JMP_LEN)
            *why = "the call is shorter than the 5-byte jump";
        else if (in.kind == ARCH_KIND_CALL && in.target == addr + in.len)
            *why = "a call to the next instruction reads its own return address";
        else if (has_except_table(prog->img))
            *why = "the program has exception tables: an exception thrown through the "
                   "call would find no unwind information for its return address";
        else {
            pt.entry = addr + s->bias;
            pt.len = in.len;
            pt.ninsns = 1;
            memcpy(pt.orig, bytes, in.len);
        }
    }
    if (*why == NULL && (pt.entry & 4095) > 4096 - JMP_LEN)
        *why = "its first 5 bytes cross a page boundary (the jump could not be written in "
               "one piece)";
    if (*why != NULL)
        return QP_EUNSUPP;
    pt.kind = (uint8_t)(kind == DYN_PT_WHOLE ? PT_ENTRY : kind);
    pt.proc = proc;
    *out = pt;
    return 0;
}

static const char *exits_before(dyn_session_t *s, uint32_t i, const cfg_block_t *r,
    uint32_t row, const char *name, const point_t *entry, unsigned *nexit, int *err);

/*
 * Has row ROW a candidate at runtime address AT already (its candidates are the last
 * ones added)? A second jump there would overlap the first and be refused at install:
 * known at selection instead, so that the copy is tried.
 */
static int
cand_at(const dyn_session_t *s, uint32_t row, uint64_t at)
{
    for (size_t c = s->ncand; c > 0 && s->cand[c - 1].row == row; c--)
        if (s->cand[c - 1].entry == at)
            return 1;
    return 0;
}

/*
 * The ret block of an exit of procedure PROC at link address ADDR when it is too short
 * for a jump and the blocks that lead to it may be patched instead (exits_before, as
 * --time's exits); NULL otherwise.
 */
static const cfg_block_t *
short_ret_block(const dyn_session_t *s, uint32_t proc, uint64_t addr)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[proc];
    uint32_t b = cfg_block_at(prog, addr);
    if (pr->unsafe != NULL || pr->nind_unresolved > 0 || b == CFG_NONE)
        return NULL;
    const cfg_block_t *bl = &prog->blocks[b];
    if (bl->last_kind != ARCH_KIND_RET || bl->end - bl->start >= JMP_LEN
        || addr + 1 != bl->end)
        return NULL;
    return bl;
}

/*
 * An exit at short ret block R of procedure PROC: the blocks that lead to it patched,
 * their trampolines running R's bytes with SNIP (may be NULL) before its ret. Candidates
 * added for ROW (NAME); *LO, *HI: the run-time bytes of them all and of R. Why not (the
 * session as it was), or NULL; *ERR: QP_ENOMEM.
 */
static const char *
exit_via_preds(dyn_session_t *s, uint32_t proc, const cfg_block_t *r, uint32_t row,
    const char *name, const dyn_snippet_t *snip, uint64_t *lo, uint64_t *hi, int *err)
{
    point_t none;
    unsigned n = 0;
    size_t c0 = s->ncand, p0 = s->npads;

    memset(&none, 0, sizeof(none));
    none.save_flags = entry_save_flags(&s->prog->procs[proc]);
    const char *why = exits_before(s, proc, r, row, name, &none, &n, err);
    if (why != NULL || *err < 0 || n == 0) {
        s->ncand = c0;
        s->npads = p0;
        return why != NULL ? why : "a return block is too short for a jump and cannot move";
    }
    *lo = r->start + s->bias;
    *hi = r->end + s->bias;
    for (size_t k = c0; k < s->ncand; k++) {
        point_t *pt = &s->cand[k];
        if (snip != NULL)
            pt->before = *snip;
        *lo = pt->entry < *lo ? pt->entry : *lo;
        *hi = pt->entry + pt->len > *hi ? pt->entry + pt->len : *hi;
    }
    return NULL;
}

static const char *check_reloc(dyn_session_t *s, uint32_t i, const char *name, int timed,
    int exits, uint32_t *rowp, int *err);

/* A DYN_PT_PROC point of procedure PROC at ADDR (its entry): as dyn_session_add_point
 * (with ROW, BEFORE, AFTER, NAME) or, ADD 0, only whether it would go in (the session as
 * it was; *LO, *HI: its entry's bytes). */
static int
reloc_point(dyn_session_t *s, int add, uint32_t proc, uint64_t addr,
    const dyn_snippet_t *before, const dyn_snippet_t *after, const char *name,
    uint32_t *row, uint64_t *lo, uint64_t *hi, const char **why)
{
    size_t c0 = s->ncand, r0 = s->nrows, p0 = s->npads;
    uint32_t r;
    int err = 0;

    if (proc >= s->prog->nprocs)
        return QP_EINVAL;
    if (addr != s->prog->procs[proc].entry) {
        *why = "not the procedure's entry";
        return QP_EUNSUPP;
    }
    *why = check_reloc(s, proc, name, 0, 1, &r, &err);
    QP_CHECK(err);
    if (*why != NULL)
        return QP_EUNSUPP;
    point_t *pt = &s->cand[c0]; /* the entry's */
    if (lo != NULL)
        *lo = pt->entry;
    if (hi != NULL)
        *hi = pt->entry + pt->len;
    if (!add) {
        s->ncand = c0;
        s->nrows = r0;
        s->npads = p0;
        return 0;
    }
    if (before != NULL)
        pt->before = *before;
    if (after != NULL)
        pt->after = *after;
    if (row != NULL)
        *row = r;
    return 0;
}

int
dyn_session_check_point(const dyn_session_t *s, int kind, uint32_t proc, uint64_t addr,
    uint64_t *lo, uint64_t *hi, const char **why)
{
    static const char *unused;
    point_t pt;

    if (why == NULL)
        why = &unused;
    *why = NULL;
    if (s == NULL)
        return QP_EINVAL;
    if (kind == DYN_PT_PROC)
        return reloc_point((dyn_session_t *)s, 0, proc, addr, NULL, NULL, NULL, NULL, lo, hi,
            why);
    /* A point through padding takes it: given back, nothing is added here. */
    size_t npads = s->npads;
    int rc = check_point(s, kind, proc, addr, &pt, why);
    ((dyn_session_t *)s)->npads = npads;
    const cfg_block_t *r;
    if (rc == QP_EUNSUPP && kind == DYN_PT_EXIT && proc < s->prog->nprocs
        && (r = short_ret_block(s, proc, addr)) != NULL) {
        /* Through the blocks before it: every bytes they replace in [*LO, *HI). */
        dyn_session_t *w = (dyn_session_t *)s;
        size_t c0 = w->ncand;
        uint64_t l, h;
        int err = 0;
        const char *w2 = exit_via_preds(w, proc, r, 0, NULL, NULL, &l, &h, &err);
        w->ncand = c0;
        w->npads = npads;
        QP_CHECK(err);
        if (w2 == NULL) {
            *why = NULL;
            if (lo != NULL)
                *lo = l;
            if (hi != NULL)
                *hi = h;
            return 0;
        }
    }
    QP_CHECK(rc);
    if (lo != NULL)
        *lo = pt.entry;
    if (hi != NULL)
        *hi = pt.entry + pt.len;
    return 0;
}

void
dyn_session_set_all_or_nothing(dyn_session_t *s, int on)
{
    if (s != NULL)
        s->all_or_nothing = on != 0;
}

int
dyn_session_add_point(dyn_session_t *s, int kind, uint32_t proc, uint64_t addr,
    const dyn_snippet_t *before, const dyn_snippet_t *after, const char *name,
    uint32_t *row, const char **why)
{
    static const char *unused;
    point_t pt;

    if (why == NULL)
        why = &unused;
    *why = NULL;
    if (s == NULL || s->installed || (before == NULL && after == NULL)
        || (after != NULL && kind != DYN_PT_CALL && kind != DYN_PT_WHOLE
            && kind != DYN_PT_PROC))
        return QP_EINVAL;
    if (kind == DYN_PT_PROC)
        return reloc_point(s, 1, proc, addr, before, after, name, row, NULL, NULL, why);
    int rc = check_point(s, kind, proc, addr, &pt, why);
    const cfg_block_t *r;
    if (rc == QP_EUNSUPP && kind == DYN_PT_EXIT && before != NULL
        && proc < s->prog->nprocs && (r = short_ret_block(s, proc, addr)) != NULL) {
        /* A ret block too short for its jump: the blocks before it instead. */
        size_t r0 = s->nrows;
        uint32_t nrow;
        uint64_t l, h;
        int err = 0;
        QP_CHECK(add_row(s, name, proc, 0, &nrow));
        if (exit_via_preds(s, proc, r, nrow, name, before, &l, &h, &err) == NULL && err == 0) {
            *why = NULL;
            if (row != NULL)
                *row = nrow;
            return 0;
        }
        s->nrows = r0;
        QP_CHECK(err);
    }
    QP_CHECK(rc);
    pt.name = name;
    if (before != NULL)
        pt.before = *before;
    if (after != NULL)
        pt.after = *after;
    QP_CHECK(add_row(s, name, proc, 0, &pt.row));
    QP_CHECK(add_cand(s, &pt));
    if (row != NULL)
        *row = pt.row;
    return 0;
}

int
dyn_session_set_exits(dyn_session_t *s, uint32_t row, const uint64_t *exits, size_t n)
{
    if (s == NULL || s->installed)
        return QP_EINVAL;
    for (size_t i = 0; i < s->ncand; i++)
        if (s->cand[i].row == row && s->cand[i].reloc) {
            s->cand[i].exits = exits;
            s->cand[i].nexits = n;
            return 0;
        }
    return QP_ENOTFOUND;
}

const char *
dyn_session_refused_row(const dyn_session_t *s, uint32_t row)
{
    return s != NULL && row < s->nrows && (s->rows[row].bad & 1) ? s->rows[row].why : NULL;
}

/*
 * The name of procedure PR that matches PATTERN: its own, or another function symbol at
 * its entry (an alias: `malloc` for `__libc_malloc`); NULL when none does.
 */
static const char *
match_name(const cfg_image_t *img, const cfg_proc_t *pr, const char *pattern)
{
    size_t lo = 0, hi = img->nsymbols;

    if (cfg_name_match(pattern, pr->name, 1))
        return pr->name;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (img->symbols[mid].addr < pr->entry)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < img->nsymbols && img->symbols[lo].addr == pr->entry; lo++) {
        const cfg_symbol_t *sym = &img->symbols[lo];
        if ((sym->kind == CFG_SYM_FUNC || sym->kind == CFG_SYM_IFUNC)
            && cfg_name_match(pattern, sym->name, 1))
            return sym->name;
    }
    return NULL;
}

/* Procedure I's entry counter in place (as dyn_session_select): why not, or NULL with
 * its row and point added. *ERR: QP_ENOMEM. */
static const char *
count_in_place(dyn_session_t *s, uint32_t i, const char *name, int *err)
{
    point_t pt;
    int first_only;
    const char *why = check_proc(s, i, &pt);
    /* Too short for the jump: a short one through padding, if there is some. */
    if (why != NULL && entry_ok(s, i, &first_only) == NULL
        && check_short(s, i, first_only, &pt) == NULL)
        why = NULL;
    *err = 0;
    if (why != NULL)
        return why;
    pt.name = name;
    pt.kind = PT_ENTRY;
    if ((*err = add_row(s, name, i, 0, &pt.row)) == 0)
        *err = add_cand(s, &pt);
    return NULL;
}

static const char *check_timed(dyn_session_t *s, uint32_t i, const char *name, int *err);

/*
 * Neighbours whose original code may lend a slot to a short jump at link address NEAR of
 * procedure I: the procedures whose code lies within the jump's reach, nearest first (a
 * cold fragment's parent), that the selection (s->nb_pattern, NULL: every procedure)
 * measures and that are not chosen yet; into OUT (CAP), with their names. Their number.
 */
static size_t
neighbours(const dyn_session_t *s, uint32_t i, uint64_t near, uint32_t *out,
    const char **names, size_t cap)
{
    const cfg_prog_t *prog = s->prog;
    size_t n = 0;
    for (uint64_t d = 0; d < 128 && n < cap; d++) {
        for (int side = 0; side < 2 && n < cap; side++) {
            uint64_t a = side ? near + SHORT_LEN + d : near + SHORT_LEN - 1 - d;
            const cfg_proc_t *q = cfg_proc_at(prog, a);
            if (q == NULL || q == &prog->procs[i])
                continue;
            uint32_t j = (uint32_t)(q - prog->procs);
            size_t k;
            for (k = 0; k < n && out[k] != j; k++)
                ;
            if (k < n || (s->chosen[j] & 1) || (q->flags & CFG_PROC_FRAGMENT))
                continue;
            const char *qname = s->nb_pattern == NULL
                ? q->name
                : match_name(prog->img, q, s->nb_pattern);
            if (qname == NULL)
                continue;
            names[n] = qname;
            out[n++] = j;
        }
    }
    return n;
}

/*
 * Neighbour J (chosen by NAME) relocated whole (TIMED), with a slot in its original code
 * for a short jump at link address NEAR: 1 with the slot in s->nb_slot and *ROW its row
 * (its candidates added), 0 when not (the session as it was), or QP_ENOMEM.
 */
static int
lend_slot(dyn_session_t *s, uint32_t j, const char *name, uint64_t near, int timed,
    uint32_t *row)
{
    size_t c0 = s->ncand, r0 = s->nrows, p0 = s->npads;
    int err = 0;
    s->nb_want = near;
    s->nb_slot = 0;
    s->nb_depth++; /* (the neighbour borrows from no other) */
    const char *why = check_reloc(s, j, name, timed, timed, row, &err);
    s->nb_depth--;
    s->nb_want = 0;
    if (err < 0)
        return err;
    if (why == NULL && s->nb_slot != 0)
        return 1;
    s->nb_slot = 0;
    s->ncand = c0;
    s->nrows = r0;
    s->npads = p0;
    return 0;
}

/*
 * A slot for PT's short jump at link address NEAR (in procedure I, relocated whole:
 * TIMED) in the original code of a neighbour relocated whole (lend_slot), when I has
 * none of its own: why not (the session as it was), or NULL with PT's pad and pad_orig
 * set, *DEP the neighbour's row, and the neighbour in *LENT (to be marked chosen when I
 * goes in). Only while dyn_session_select or _select_time choose (s->nb_allow), once deep.
 * *ERR: QP_ENOMEM.
 */
static const char *
borrow_slot(dyn_session_t *s, uint32_t i, uint64_t near, int timed, point_t *pt,
    uint32_t *dep, uint32_t *lent, int *err)
{
    uint32_t nb[8], row;
    const char *names[8];
    *err = 0;
    if (!s->nb_allow && s->nb_depth == 0 && s->nb_need == 0)
        s->nb_need = near;
    if (!s->nb_allow || s->nb_depth > 0 || has_shadow_stack(s))
        return "no neighbour to borrow bytes from";
    size_t n = neighbours(s, i, near, nb, names, 8);
    for (size_t k = 0; k < n; k++) {
        int rc = lend_slot(s, nb[k], names[k], near, timed, &row);
        if (rc < 0) {
            *err = rc;
            return NULL;
        }
        if (rc == 1) {
            pt->pad = s->nb_slot + s->bias;
            memcpy(pt->pad_orig, s->nb_orig, JMP_LEN);
            s->nb_slot = 0;
            *dep = row;
            *lent = nb[k];
            return NULL;
        }
    }
    return "no neighbour to borrow bytes from";
}

/*
 * Procedure I (chosen by NAME) too short for a jump at its entry, with no padding within
 * a short jump's reach and none of its own code to borrow (`xor %eax,%eax; ret` between
 * two procedures, as cold code is laid out): its jmp rel8 goes to a slot in the original
 * code of a neighbour relocated whole, as Dyninst and e9patch borrow a neighbour's bytes.
 * The neighbour is one the selection measures anyway, not chosen yet (neighbours); it
 * runs as its copy (measured there, TIMED as I is), its original idle and reached by
 * nothing but its entry's and return sites' jumps, so the slot's bytes never run; I goes
 * in only if it does (dep1). Why not (the session as it was), or NULL with both added.
 * *ERR: QP_ENOMEM.
 */
static const char *
with_neighbour(dyn_session_t *s, uint32_t i, const char *name, int timed, int *err)
{
    uint32_t nb[8], row;
    const char *names[8];

    *err = 0;
    if (has_shadow_stack(s) || s->nb_depth > 0)
        return "no neighbour to borrow bytes from";
    size_t n = neighbours(s, i, s->prog->procs[i].entry, nb, names, 8);
    for (size_t k = 0; k < n; k++) {
        size_t c0 = s->ncand, r0 = s->nrows, p0 = s->npads;
        int rc = lend_slot(s, nb[k], names[k], s->prog->procs[i].entry, timed, &row);
        if (rc < 0) {
            *err = rc;
            return NULL;
        }
        if (rc == 0)
            continue;
        /* I as it would go in, its find_pad taking the slot. */
        size_t c1 = s->ncand;
        const char *why = timed ? check_timed(s, i, name, err) : count_in_place(s, i, name, err);
        if (*err < 0)
            return NULL;
        if (why == NULL && s->nb_slot == 0 && s->ncand > c1) {
            for (size_t c = c1; c < s->ncand; c++)
                if (s->cand[c].dep1 == 0)
                    s->cand[c].dep1 = row + 1;
            s->chosen[nb[k]] |= 1;
            return NULL;
        }
        s->nb_slot = 0;
        s->ncand = c0;
        s->nrows = r0;
        s->npads = p0;
    }
    return "no neighbour to borrow bytes from";
}

/*****************************************************************************
 * Neighbour slots for callers that choose points one by one (libqpt)
 */

int
dyn_session_check_borrow(const dyn_session_t *s, int kind, uint32_t proc, uint64_t addr,
    int (*lend)(void *arg, uint32_t proc), void *arg, uint32_t *lender /*OUT*/,
    uint64_t *near /*OUT*/, uint64_t *lo /*OUT*/, uint64_t *hi /*OUT*/,
    const char **why /*OUT*/)
{
    static const char *unused;
    dyn_session_t *w = (dyn_session_t *)s;
    uint32_t nb[8];
    const char *names[8];

    if (why == NULL)
        why = &unused;
    *why = NULL;
    if (s == NULL || lend == NULL || lender == NULL || near == NULL || proc >= s->prog->nprocs
        || (kind != DYN_PT_ENTRY && kind != DYN_PT_WHOLE && kind != DYN_PT_PROC))
        return QP_EINVAL;
    uint64_t e = s->prog->procs[proc].entry;
    *why = "no neighbour to borrow bytes from";
    if (addr != e || has_shadow_stack(w) || s->nb_depth > 0 || s->nb_want != 0)
        return QP_EUNSUPP;
    /* Relocated whole, the short jump that wants a slot may be a return site's: the
     * first one its copy could not find a slot for. */
    uint64_t at = e;
    if (kind == DYN_PT_PROC) {
        const char *w0;
        w->nb_need = 0;
        int rc = reloc_point(w, 0, proc, addr, NULL, NULL, NULL, NULL, NULL, NULL, &w0);
        if (rc == 0 || w->nb_need == 0) {
            w->nb_need = 0;
            return rc < 0 && rc != QP_EUNSUPP ? rc : QP_EUNSUPP;
        }
        at = w->nb_need;
        w->nb_need = 0;
    }
    size_t n = neighbours(w, proc, at, nb, names, 8);
    w->nb_pun = kind == DYN_PT_WHOLE && pun_site(s, at);
    for (size_t k = 0; k < n; k++) {
        if (!lend(arg, nb[k]))
            continue;
        size_t c0 = w->ncand, r0 = w->nrows, p0 = w->npads;
        uint32_t row;
        int err = 0, rc = QP_EUNSUPP;
        const char *wy;
        /* The neighbour as it would go in (with its exits' snippets: exits 1), keeping
         * a slot within the short jump's reach; then the point, which takes it. */
        w->nb_want = at;
        w->nb_slot = 0;
        w->nb_depth++;
        wy = check_reloc(w, nb[k], names[k], 0, 1, &row, &err);
        w->nb_depth--;
        w->nb_want = 0;
        if (err == 0 && wy == NULL && w->nb_slot != 0) {
            point_t pt;
            uint64_t l = 0, h = 0;
            if (kind == DYN_PT_PROC)
                rc = reloc_point(w, 0, proc, addr, NULL, NULL, NULL, NULL, &l, &h, &wy);
            else if ((rc = check_point(w, kind, proc, addr, &pt, &wy)) == 0) {
                l = pt.entry;
                h = pt.entry + pt.len;
            }
            if (rc == 0 && w->nb_slot != 0)
                rc = QP_EUNSUPP; /* (the slot not taken: not what it wanted) */
            if (rc == 0) {
                *lender = nb[k];
                *near = at;
                if (lo != NULL)
                    *lo = l;
                if (hi != NULL)
                    *hi = h;
            }
        }
        w->nb_slot = 0;
        w->ncand = c0;
        w->nrows = r0;
        w->npads = p0;
        if (err < 0 || rc == 0 || rc != QP_EUNSUPP)
            w->nb_pun = 0;
        if (err < 0)
            return err;
        if (rc == 0) {
            *why = NULL;
            return 0;
        }
        if (rc != QP_EUNSUPP)
            return rc;
    }
    w->nb_pun = 0;
    return QP_EUNSUPP;
}

int
dyn_session_want_slot(dyn_session_t *s, uint64_t near)
{
    if (s == NULL || s->installed)
        return QP_EINVAL;
    s->nb_want = near;
    s->nb_slot = 0;
    s->nb_pun = near != 0 && pun_site(s, near);
    return 0;
}

int
dyn_session_slot_kept(dyn_session_t *s)
{
    if (s == NULL)
        return QP_EINVAL;
    s->nb_want = 0;
    return s->nb_slot != 0;
}

int
dyn_session_add_lender(dyn_session_t *s, uint32_t proc, const char *name,
    uint32_t *row /*OUT*/, const char **why /*OUT*/)
{
    static const char *unused;
    uint32_t r;
    int err = 0;

    if (why == NULL)
        why = &unused;
    *why = NULL;
    if (s == NULL || s->installed || proc >= s->prog->nprocs)
        return QP_EINVAL;
    *why = check_reloc(s, proc, name, 0, 1, &r, &err);
    QP_CHECK(err);
    if (*why != NULL)
        return QP_EUNSUPP;
    if (row != NULL)
        *row = r;
    return 0;
}

static int select_loop(dyn_session_t *s, const char *pattern, uint32_t flags, unsigned *kp);

int
dyn_session_select(
    dyn_session_t *s, const char *pattern, uint32_t flags, unsigned *nmatch /*OUT*/)
{
    unsigned k = 0;

    if (s == NULL || (pattern == NULL && !(flags & DYN_SEL_ALL)) || s->installed)
        return QP_EINVAL;
    s->nb_pattern = (flags & DYN_SEL_ALL) ? NULL : pattern;
    s->nb_allow = 1;
    int rc = select_loop(s, pattern, flags, &k);
    s->nb_allow = 0;
    s->nb_pattern = NULL;
    if (nmatch != NULL)
        *nmatch = k;
    return rc;
}

/* dyn_session_select's loop; *K: the procedures that match. */
static int
select_loop(dyn_session_t *s, const char *pattern, uint32_t flags, unsigned *kp)
{
    unsigned k = 0;
    for (uint32_t i = 0; i < s->prog->nprocs; i++) {
        const cfg_proc_t *pr = &s->prog->procs[i];
        const char *why;
        point_t pt;
        const char *name = pr->name;
        if (!(flags & DYN_SEL_ALL)
            && (name = match_name(s->prog->img, pr, pattern)) == NULL)
            continue;
        /* A cold fragment is counted in its parent's calls: a glob (as --all, and as
         * --time) leaves it out; named alone, it is refused with the reason. */
        if ((pr->flags & CFG_PROC_FRAGMENT)
            && ((flags & DYN_SEL_ALL) || strpbrk(pattern, "*?[") != NULL))
            continue;
        k++;
        if (s->chosen[i] & 1)
            continue;
        s->chosen[i] |= 1;
        why = check_proc(s, i, &pt);
        /* Too short for the jump: a short one through padding, if there is some. */
        int first_only;
        if (why != NULL && entry_ok(s, i, &first_only) == NULL
            && check_short(s, i, first_only, &pt) == NULL)
            why = NULL;
        pt.name = name;
        if (why != NULL) {
            /* Its entry does not fit in place: the procedure relocated whole, its entry
             * reached through a slot of its own code. */
            int err = 0;
            const char *w2 = check_reloc(s, i, name, 0, 0, NULL, &err);
            QP_CHECK(err);
            if (w2 == NULL)
                continue;
            /* Else through a slot in a neighbour's code. */
            w2 = with_neighbour(s, i, name, 0, &err);
            QP_CHECK(err);
            if (w2 == NULL)
                continue;
        }
        if (why != NULL) {
            QP_CHECK(refuse_name(s, name, why));
            continue;
        }
        pt.kind = PT_ENTRY;
        QP_CHECK(add_row(s, name, i, 0, &pt.row));
        QP_CHECK(add_cand(s, &pt));
    }
    *kp = k;
    return 0;
}

/*****************************************************************************
 * Timers: the entry and every exit (the tail of each block ending in ret)
 */

static int
frag_cmp(const void *a, const void *b, void *prog)
{
    const cfg_proc_t *procs = ((const cfg_prog_t *)prog)->procs;
    uint32_t x = procs[*(const uint32_t *)a].parent,
             y = procs[*(const uint32_t *)b].parent;
    return x < y ? -1 : x > y;
}

/*
 * The procedures whose blocks make up procedure I: I itself, then its cold fragments.
 * Into OUT (CAP entries); their number, or QP_ENOMEM.
 */
static int
parts_of(dyn_session_t *s, uint32_t i, uint32_t *out, size_t cap)
{
    const cfg_prog_t *prog = s->prog;
    size_t n = 0, lo = 0, hi;

    if (s->frags == NULL) {
        s->frags = malloc((prog->nprocs + 1) * sizeof(*s->frags));
        if (s->frags == NULL)
            return QP_ENOMEM;
        for (uint32_t j = 0; j < prog->nprocs; j++)
            if ((prog->procs[j].flags & CFG_PROC_FRAGMENT)
                && prog->procs[j].parent != CFG_NONE)
                s->frags[s->nfrags++] = j;
        qsort_r(s->frags, s->nfrags, sizeof(*s->frags), frag_cmp, (void *)prog);
    }
    out[n++] = i;
    hi = s->nfrags;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (prog->procs[s->frags[mid]].parent < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < s->nfrags && prog->procs[s->frags[lo]].parent == i; lo++) {
        if (n == cap)
            return QP_ERANGE;
        out[n++] = s->frags[lo];
    }
    return (int)n;
}

/* Every block B of procedure I and its fragments (PARTS, NPARTS from parts_of). */
#define FOR_BLOCKS(prog, parts, nparts, k, b)                                            \
    for ((k) = 0; (k) < (nparts); (k)++)                                                 \
        for ((b) = (prog)->procs[(parts)[k]].block;                                      \
             (b) < (prog)->procs[(parts)[k]].block + (prog)->procs[(parts)[k]].nblocks;  \
             (b)++)

/*
 * The exit point of block B of the procedure entered at link address OWN, ending in a
 * ret or (a tail call) a jmp: the shortest tail of whole instructions of at least 5
 * bytes, or with WHOLE (the block is the procedure's entry block) all of them. A block
 * shorter than 5 bytes is completed with the padding after it (spill), or else is left
 * to a 2-byte jump through padding: *WANT_PAD (the caller finds it, find_pad). Why not,
 * or NULL with *PT filled.
 */
static const char *
check_exit(const dyn_session_t *s, const cfg_block_t *b, uint64_t own, int whole,
    point_t *pt /*OUT*/, int *want_pad /*OUT*/)
{
    return check_tail(s, b, own, whole, 0, pt, want_pad);
}

/* check_exit, and with PLAIN a block that ends in a plain instruction (falling into a
 * return block). */
static const char *
check_tail(const dyn_session_t *s, const cfg_block_t *b, uint64_t own, int whole,
    int plain, point_t *pt /*OUT*/, int *want_pad /*OUT*/)
{
    const cfg_prog_t *prog = s->prog;
    uint64_t starts[8];
    size_t avail, n = 0, len, blen = b->end - b->start;
    const uint8_t *bytes = cfg_image_ptr(prog->img, b->start, &avail);
    uint64_t a = b->start, from;
    size_t j;
    int last = -1;

    *want_pad = 0;
    if (bytes == NULL || avail < blen)
        return "a return block has no bytes in the file";
    while (a < b->end) {
        arch_insn_t in;
        if (arch_decode(bytes + (a - b->start), b->end - a, a, &in) < 0)
            return "an instruction of a return block does not decode";
        starts[n++ % 8] = a;
        a += in.len;
        last = in.kind;
    }
    if (a != b->end)
        return "a return block does not end on an instruction";
    /* The last start at least 5 bytes before the end (at most 8 instructions back). */
    from = b->start;
    for (j = 1; !whole && j <= 8 && j <= n; j++)
        if (b->end - starts[(n - j) % 8] >= JMP_LEN) {
            from = starts[(n - j) % 8];
            break;
        }
    if (!whole && j > 8)
        return "a return block has no short tail to move";
    len = b->end - from;
    if (len > sizeof(pt->orig))
        return whole ? "its entry block is too long to move whole"
                     : "the instructions before a ret are too long";
    memset(pt, 0, sizeof(*pt));
    for (a = from; a < b->end;) {
        arch_insn_t in;
        arch_decode(bytes + (a - b->start), b->end - a, a, &in);
        if (in.flags & ARCH_F_PRIV)
            return "a privileged instruction before a ret";
        if (in.kind != ARCH_KIND_SEQ && in.kind != ARCH_KIND_NOP
            && in.kind != ARCH_KIND_ENDBR
            && !((in.kind == ARCH_KIND_RET || in.kind == ARCH_KIND_JMP
                     || in.kind == ARCH_KIND_JMP_IND || in.kind == ARCH_KIND_JCC)
                && a + in.len == b->end))
            return "an instruction before a ret cannot be moved";
        if (plain && a + in.len == b->end && in.kind == ARCH_KIND_RET)
            return "an instruction before a ret cannot be moved";
        a += in.len;
        pt->ninsns++;
    }
    /* Another procedure's entry inside the tail (overlapping code). */
    if (proc_entry_in(prog, from + 1, b->end)
        || (from != own && proc_entry_in(prog, from, from + 1)))
        return "another procedure starts inside the tail of a return block";
    if (len < JMP_LEN) {
        size_t more = JMP_LEN - len;
        if (!plain && avail >= blen + more && spill_ok(s, b->end, more)) {
            memcpy(pt->orig + len, bytes + blen, more);
            pt->spill = (uint8_t)more;
        } else if (len >= SHORT_LEN || (whole && s->nb_pun && s->nb_slot != 0))
            *want_pad = 1; /* (1 byte: the pun of a lender's slot, whole_entry) */
        else
            return "a block ending in ret is shorter than the 5-byte jump, with no "
                   "padding after it";
    }
    pt->kind = PT_EXIT;
    pt->tail = last == ARCH_KIND_JCC                         ? 2
        : last == ARCH_KIND_JMP || last == ARCH_KIND_JMP_IND ? 1
                                                             : 0;
    pt->entry = from + s->bias;
    pt->len = (uint8_t)(len + pt->spill);
    memcpy(pt->orig, bytes + (from - b->start), len);
    return NULL;
}

/* Does block B end in a tail call that always leaves (a jmp whose edges are all tail
 * calls)? */
static int
is_tail_block(const cfg_prog_t *prog, const cfg_block_t *b)
{
    if ((b->last_kind != ARCH_KIND_JMP && b->last_kind != ARCH_KIND_JMP_IND)
        || b->nsucc == 0)
        return 0;
    for (uint32_t e = 0; e < b->nsucc; e++)
        if (cfg_block_succ(prog, b, e)->kind != CFG_EDGE_TAILCALL)
            return 0;
    return 1;
}

/* Does block B end in a conditional tail call: 2 for a jcc whose taken edge leaves for
 * another procedure and which falls through otherwise, 3 when both sides leave (the
 * next procedure's code follows); else 0? */
static int
is_cond_tail_block(const cfg_prog_t *prog, const cfg_block_t *b)
{
    unsigned tails = 0;

    if (b->last_kind != ARCH_KIND_JCC)
        return 0;
    for (uint32_t e = 0; e < b->nsucc; e++) {
        uint8_t kind = cfg_block_succ(prog, b, e)->kind;
        if (kind == CFG_EDGE_TAILCALL)
            tails++;
        else if (kind != CFG_EDGE_FALL)
            return 0;
    }
    return tails == 1 ? 2 : tails == 2 && b->nsucc == 2 ? 3 : 0;
}

/* Does block B end in the indirect jump of a jump table of proven bounds (its every
 * edge one of the table's)? */
static int
is_table_block(const cfg_prog_t *prog, const cfg_block_t *b)
{
    if (b->last_kind != ARCH_KIND_JMP_IND || b->nsucc == 0)
        return 0;
    for (uint32_t e = 0; e < b->nsucc; e++)
        if (cfg_block_succ(prog, b, e)->kind != CFG_EDGE_TABLE)
            return 0;
    return 1;
}

static size_t part_block_index(const cfg_prog_t *prog, const uint32_t *parts, int nparts,
    uint32_t b);

/*
 * Does block BL of the procedure of PARTS end in an indirect jump that its copy
 * translates at run time (pt_proc_t's unknown): one of unknown targets, or of a table
 * not all of whose targets are the procedure's own code? (A table whose every target is
 * is relocated as it is, with jumps into the copy at its targets: is_table_block.)
 */
static int
xlate_block(const dyn_session_t *s, const uint32_t *parts, int nparts, const cfg_block_t *bl)
{
    const cfg_prog_t *prog = s->prog;
    int table = 0, out = 0;
    if (bl->last_kind != ARCH_KIND_JMP_IND)
        return 0;
    for (uint32_t e = 0; e < bl->nsucc; e++) {
        const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
        if (ed->kind == CFG_EDGE_UNRESOLVED || ed->kind == CFG_EDGE_INDIRECT)
            return 1;
        if (ed->kind == CFG_EDGE_TABLE) {
            table = 1;
            out |= ed->to == CFG_NONE
                || part_block_index(prog, parts, nparts, ed->to) == SIZE_MAX;
        }
    }
    return table && (out || !is_table_block(prog, bl));
}

/* The last instructions of the blocks of the procedure of PARTS that WHICH says yes to
 * (NULL: xlate_block): their runtime addresses, sorted, into *OUT (malloc'd, NULL for
 * none); their number, or QP_ENOMEM. */
static int
block_ends(const dyn_session_t *s, const uint32_t *parts, int nparts,
    int (*which)(const cfg_prog_t *, const cfg_block_t *), uint64_t **out)
{
    const cfg_prog_t *prog = s->prog;
    size_t n = 0, cap = 0;
    uint64_t *v = NULL;
    uint32_t b;
    int k;

    *out = NULL;
    FOR_BLOCKS(prog, parts, nparts, k, b)
    {
        const cfg_block_t *bl = &prog->blocks[b];
        arch_insn_t in;
        uint64_t a = bl->start;
        if (which != NULL ? !which(prog, bl) : !xlate_block(s, parts, nparts, bl))
            continue;
        while (a < bl->end && cfg_image_decode(prog->img, a, 0, &in) >= 0
            && a + in.len < bl->end)
            a += in.len;
        if (a >= bl->end)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            uint64_t *w = realloc(v, cap * sizeof(*w));
            if (w == NULL) {
                free(v);
                return QP_ENOMEM;
            }
            v = w;
        }
        v[n++] = a + s->bias;
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), cfg_u64_cmp);
    *out = v;
    return (int)n;
}

static const char *catches(const dyn_session_t *s, const cfg_block_t *bl);

/*
 * Why the call to TARGET that ends block B, a C++ throw (__cxa_throw, __cxa_rethrow),
 * is no exit: its procedure catches exceptions (a catch clause calls __cxa_begin_catch),
 * so the throw may land in its own handler and the activation go on. NULL otherwise.
 */
static const char *
throws_to_itself(const dyn_session_t *s, const cfg_block_t *b, uint64_t target)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *c = cfg_proc_at(prog, target), *own = &prog->procs[b->proc];
    uint32_t parts[64], bb;
    int k, nparts;

    if (c == NULL || c->entry != target || c->name == NULL
        || (strstr(c->name, "__cxa_throw") == NULL && strstr(c->name, "__cxa_rethrow") == NULL))
        return NULL;
    nparts = parts_of((dyn_session_t *)s,
        (own->flags & CFG_PROC_FRAGMENT) && own->parent != CFG_NONE ? own->parent : b->proc,
        parts, 64);
    if (nparts < 0)
        return "too many cold fragments";
    FOR_BLOCKS(prog, parts, nparts, k, bb)
    if (catches(s, &prog->blocks[bb]) != NULL)
        return "it throws an exception it may catch itself (a timer stopped at the throw "
               "would miss the handler)";
    return NULL;
}

/*
 * The exit point of block B that ends in a call that never returns
 * (cfg_block_call_never_returns): the call alone, its snippet before it, the call made from the trampoline with its
 * original return address (so unwinding, and a callee that returns after all, see the
 * code they would without dyn). Why not, or NULL with *PT filled (kind PT_EXIT).
 */
static const char *
check_noret(const dyn_session_t *s, const cfg_block_t *b, point_t *pt /*OUT*/)
{
    const cfg_prog_t *prog = s->prog;
    const char *refused = "a call that never returns cannot take its exit's jump (an "
                          "indirect one, or a call to the next instruction)";
    arch_insn_t in;
    uint64_t a = b->start;
    size_t avail;
    const uint8_t *bytes;
    const char *why;

    memset(&in, 0, sizeof(in));
    while (a < b->end && cfg_image_decode(prog->img, a, 0, &in) >= 0 && a + in.len < b->end)
        a += in.len;
    if (a >= b->end || a + in.len != b->end || (bytes = cfg_image_ptr(prog->img, a, &avail)) == NULL
        || avail < in.len)
        return refused;
    /* (An indirect call would push a return address in the trampoline.) */
    if (in.kind != ARCH_KIND_CALL || in.len < JMP_LEN || in.len > sizeof(pt->orig)
        || in.target == a + in.len || proc_entry_in(prog, a + 1, a + in.len))
        return refused;
    if (has_shadow_stack(s))
        return "a call that never returns would be made with its original return address "
               "(the process has a shadow stack)";
    if ((why = throws_to_itself(s, b, in.target)) != NULL)
        return why;
    if (((a + s->bias) & 4095) > 4096 - JMP_LEN)
        return "a call that never returns crosses a page boundary (the jump could not be "
               "written in one piece)";
    memset(pt, 0, sizeof(*pt));
    pt->kind = PT_EXIT;
    pt->entry = a + s->bias;
    pt->len = (uint8_t)in.len;
    pt->ninsns = 1;
    pt->call_ret = 1;
    pt->noret = 1;
    memcpy(pt->orig, bytes, in.len);
    return NULL;
}

/*
 * The entry of timed procedure I: its entry block moved whole when it ends the
 * procedure (ret, tail call: the timer starts and stops in one trampoline), else its
 * first instructions (a short jump through padding when they are too few). Why not, or
 * NULL with *PT filled (kind PT_ENTRY).
 */
static const char *
timed_entry(dyn_session_t *s, uint32_t i, point_t *pt /*OUT*/)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[i];
    const cfg_block_t *eb;
    const char *why;
    int first_only, want_pad, both;

    if ((why = entry_ok(s, i, &first_only)) != NULL)
        return why;
    eb = &prog->blocks[pr->block];
    both = is_cond_tail_block(prog, eb) == 3;
    if ((eb->last_kind == ARCH_KIND_RET || is_tail_block(prog, eb) || both)
        && eb->end - eb->start <= sizeof(pt->orig)) {
        if ((why = check_exit(s, eb, pr->entry, 1, pt, &want_pad)) != NULL)
            return why;
        if (want_pad && (why = find_pad(s, pr->entry, pt)) != NULL)
            return why;
        pt->whole = 1;
        pt->tail = both ? 3 : 0;
        pt->save_flags = entry_save_flags(pr);
    } else if ((why = entry_insns(s, i, JMP_LEN, first_only, pt)) != NULL
        && check_short(s, i, first_only, pt) != NULL)
        return why;
    pt->kind = PT_ENTRY;
    pt->proc = i;
    return NULL;
}

/*
 * Exits for return block R of procedure I (row ROW, chosen by NAME, entry point ENTRY)
 * when R is too short for a jump of its own (a lone `ret` between two blocks): a point
 * on each block that leads to it instead (falling into it, or a jmp or a jcc to it),
 * whose trampoline runs R's instructions, the timer stop before the ret, where the
 * block would go to R. All of them or none: why not, or NULL with the candidates added
 * and counted in *NEXIT. *ERR: QP_ENOMEM.
 */
static const char *
exits_before(dyn_session_t *s, uint32_t i, const cfg_block_t *r, uint32_t row,
    const char *name, const point_t *entry, unsigned *nexit, int *err)
{
    const cfg_prog_t *prog = s->prog;
    const uint64_t own = prog->procs[i].entry;
    size_t avail, rlen = r->end - r->start, ncand0 = s->ncand, off = 0;
    const uint8_t *bytes = cfg_image_ptr(prog->img, r->start, &avail);
    uint8_t rninsns = 0;

    *err = 0;
    if (bytes == NULL || avail < rlen || rlen > sizeof(entry->rbytes) || r->npred == 0)
        return "a return block is too short for a jump and cannot move";
    while (off < rlen) {
        arch_insn_t in;
        if (arch_decode(bytes + off, rlen - off, r->start + off, &in) < 0
            || (in.flags & ARCH_F_PRIV)
            || (off + in.len == rlen
                    ? in.kind != ARCH_KIND_RET
                    : in.kind != ARCH_KIND_SEQ && in.kind != ARCH_KIND_NOP))
            return "a return block is too short for a jump and cannot move";
        off += in.len;
        rninsns++;
    }
    for (uint32_t k = 0; k < r->npred; k++) {
        const cfg_edge_t *e = &prog->edges[prog->preds[r->pred + k]];
        const cfg_block_t *b = &prog->blocks[e->from];
        const char *why;
        int want_pad;
        point_t ex;
        if (prog->procs[b->proc].entry != own && prog->procs[b->proc].parent != i)
            why = "a return block is reached from another procedure's code";
        else if (e->kind == CFG_EDGE_FALL && b->last_kind != ARCH_KIND_SEQ
            && b->last_kind != ARCH_KIND_NOP && b->last_kind != ARCH_KIND_JCC)
            why = "a short return block follows a call";
        else if (e->kind != CFG_EDGE_FALL && e->kind != CFG_EDGE_JUMP
            && e->kind != CFG_EDGE_TAKEN)
            why = "a short return block is reached by a jump table or an indirect jump";
        else if (e->kind == CFG_EDGE_FALL && b->end != r->start)
            why = "a return block's fall-through predecessor does not end at it";
        else
            why = check_tail(s, b, own, 0, e->kind == CFG_EDGE_FALL, &ex, &want_pad);
        if (why == NULL && want_pad)
            why = find_pad(s, b->start, &ex);
        if (why == NULL && crosses_page(&ex))
            why = "the jump before a short ret would cross a page boundary";
        if (why == NULL && cand_at(s, row, ex.entry))
            why = "a block leads to two short return blocks (or one both ways)";
        if (why == NULL && ex.entry < entry->entry + entry->len
            && entry->entry < ex.entry + ex.len)
            why = "its entry and a block before a short ret share the bytes to patch";
        if (why != NULL) {
            s->ncand = ncand0;
            return why;
        }
        ex.proc = i;
        ex.row = row;
        ex.name = name;
        ex.save_flags = entry->save_flags;
        ex.rlen = (uint8_t)rlen;
        ex.rninsns = rninsns;
        ex.raddr = r->start + s->bias;
        memcpy(ex.rbytes, bytes, rlen);
        if ((*err = add_cand(s, &ex)) < 0)
            return NULL;
        (*nexit)++;
    }
    return NULL;
}

/*****************************************************************************
 * Procedures relocated whole: where a procedure's exits do not fit in place (too short,
 * shared, jumped into by other procedures), it runs as a copy with the snippets in it
 * (patch/'s pt_proc_emit), entered by the jump at its entry; each call in the copy
 * pushes its original return address, and a jump at each return site brings the callee
 * back into the copy. The original keeps every other byte: a thread already inside it,
 * or another procedure jumping into its middle, runs the original code, unmeasured.
 */

/* Is link address A the target of a branch from another procedure into the middle of
 * the procedure whose code holds it? (The targets, collected once.) */
static int
foreign_target(dyn_session_t *s, uint64_t a, int *err)
{
    const cfg_prog_t *prog = s->prog;
    *err = 0;
    if (!s->foreign_done) {
        size_t n = 0;
        s->foreign = malloc((prog->nedges + 1) * sizeof(*s->foreign));
        if (s->foreign == NULL) {
            *err = QP_ENOMEM;
            return 0;
        }
        for (uint32_t e = 0; e < prog->nedges; e++) {
            const cfg_edge_t *ed = &prog->edges[e];
            if (ed->target == 0)
                continue;
            const cfg_proc_t *to = cfg_proc_at(prog, ed->target);
            const cfg_proc_t *from = cfg_proc_at(prog, prog->blocks[ed->from].start);
            if (to != NULL && to != from && to->entry != ed->target)
                s->foreign[n++] = ed->target;
        }
        qsort(s->foreign, n, sizeof(*s->foreign), cfg_u64_cmp);
        s->nforeign = n;
        s->foreign_done = 1;
    }
    size_t i = cfg_u64_lower_bound(s->foreign, s->nforeign, a);
    return i < s->nforeign && s->foreign[i] == a;
}

static int
run_cmp(const void *a, const void *b)
{
    const pt_run_t *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/*
 * Procedure I's code as runs for pt_proc_emit: its blocks and its cold fragments' (PARTS,
 * NPARTS), by address, those back to back joined. Into *OUT (malloc'd); their number, or
 * QP_E*.
 */
static int
proc_runs(const dyn_session_t *s, const uint32_t *parts, int nparts, pt_run_t **out)
{
    const cfg_prog_t *prog = s->prog;
    size_t n = 0, cap = 0;
    uint32_t b;
    int k;
    pt_run_t *v;

    FOR_BLOCKS(prog, parts, nparts, k, b)
    cap++;
    if ((v = malloc((cap + 1) * sizeof(*v))) == NULL)
        return QP_ENOMEM;
    FOR_BLOCKS(prog, parts, nparts, k, b)
    {
        const cfg_block_t *bl = &prog->blocks[b];
        size_t avail;
        const uint8_t *bytes = cfg_image_ptr(prog->img, bl->start, &avail);
        if (bytes == NULL || avail < bl->end - bl->start) {
            free(v);
            return QP_EINVAL;
        }
        v[n++] = (pt_run_t) { bl->start + s->bias, bytes, (uint32_t)(bl->end - bl->start) };
    }
    qsort(v, n, sizeof(*v), run_cmp);
    size_t m = 0;
    for (size_t r = 0; r < n; r++) {
        if (m > 0 && v[m - 1].addr + v[m - 1].len == v[r].addr
            && v[m - 1].bytes + v[m - 1].len == v[r].bytes)
            v[m - 1].len += v[r].len;
        else if (m > 0 && v[m - 1].addr + v[m - 1].len > v[r].addr) {
            free(v); /* overlapping blocks: not one reading of the bytes */
            return QP_EINVAL;
        } else
            v[m++] = v[r];
    }
    *out = v;
    return (int)m;
}

/* The blocks of PARTS as one index range per part, for a visited set. */
static size_t
part_block_index(const cfg_prog_t *prog, const uint32_t *parts, int nparts, uint32_t b)
{
    size_t base = 0;
    for (int k = 0; k < nparts; k++) {
        const cfg_proc_t *p = &prog->procs[parts[k]];
        if (b >= p->block && b < p->block + p->nblocks)
            return base + (b - p->block);
        base += p->nblocks;
    }
    return SIZE_MAX;
}

/*
 * The return site X (link address) of a call in procedure I (its parts PARTS, NPARTS)
 * for a jump into the copy: why not, or NULL; *WIDE: the jump covers more than X's
 * block (the blocks after it, of the procedure, or padding). XS (NXS, sorted): every
 * return site of the procedure, none of which may be under the jump but X.
 */
static const char *
rsite_ok(const dyn_session_t *s, uint32_t i, const uint32_t *parts, int nparts,
    uint64_t x, const uint64_t *xs, size_t nxs, int *wide)
{
    const cfg_prog_t *prog = s->prog;
    uint32_t b = cfg_block_at(prog, x);
    uint64_t a;

    *wide = 0;
    if (b == CFG_NONE || prog->blocks[b].start != x)
        return "a call's return site does not start a block";
    if (proc_entry_in(prog, x + 1, x + JMP_LEN) || !pad_free(s, x, JMP_LEN))
        return "a call's return site shares its bytes with another procedure";
    if (((x + s->bias) & 4095) > 4096 - JMP_LEN)
        return "a call's return site crosses a page boundary";
    size_t j = cfg_u64_lower_bound(xs, nxs, x + 1);
    if (j < nxs && xs[j] < x + JMP_LEN)
        return "two return sites within 5 bytes";
    for (a = prog->blocks[b].end; a < x + JMP_LEN;) {
        uint32_t c = cfg_block_at(prog, a);
        *wide = 1;
        if (c == CFG_NONE) /* padding after a ret or a jmp, the rest of it */
            return spill_ok(s, a, x + JMP_LEN - a)
                ? NULL
                : "a call's return site is too short for a jump into the copy";
        const cfg_block_t *cb = &prog->blocks[c];
        int mine = 0;
        for (int k = 0; k < nparts; k++)
            mine |= cb->proc == parts[k];
        if (cb->start != a || !mine || c == prog->procs[i].block)
            return "a call's return site is too short for a jump into the copy";
        a = cb->end;
    }
    return NULL;
}

static void count_snip(const dyn_session_t *s, int timed, uint64_t words, arch_snip_t v[4],
    dyn_snippet_t *sn);

/*
 * Whether the copy of the procedure of PT (PARTS, NPARTS) can be made (emitted once
 * where the procedure is, with a counter and a timer): why not, or NULL with PT->rsize
 * its length. *ERR: QP_ENOMEM.
 */
static const char *
reloc_trial(const dyn_session_t *s, const uint32_t *parts, int nparts, point_t *pt,
    int *err)
{
    pt_run_t *runs;
    int n = proc_runs(s, parts, nparts, &runs);
    if (n < 0) {
        *err = n == QP_ENOMEM ? n : 0;
        return "its blocks overlap (not one reading of its bytes)";
    }
    uint64_t e = s->prog->procs[pt->proc].entry + s->bias, *noret = NULL, *inner = NULL,
             *unknown = NULL;
    int nnr = block_ends(s, parts, nparts, cfg_block_call_never_returns, &noret);
    int nin = nnr < 0 ? nnr : block_ends(s, parts, nparts, is_table_block, &inner);
    int nun = nin < 0 ? nin : block_ends(s, parts, nparts, NULL, &unknown);
    if (nnr < 0 || nin < 0 || nun < 0) {
        free(runs);
        free(noret);
        free(inner);
        *err = QP_ENOMEM;
        return "out of memory";
    }
    arch_snip_t cv[4], stop = { .op = ARCH_SN_TIMER_STOP, .a = ARCH_SNIP_NONE,
        .b = ARCH_SNIP_NONE, .c = ARCH_SNIP_NONE, .imm = (int64_t)e };
    dyn_snippet_t count;
    count_snip(s, 1, e, cv, &count);
    pt_proc_t p = { runs, (size_t)n, e,
        { count.nodes, count.n, count.root, pt_point_ctx(PT_POINT_ENTRY, ARCH_FLAGS_STATUS) },
        { &stop, 1, 0, pt_point_ctx(PT_POINT_EXIT, ARCH_FLAGS_STATUS) },
        { &stop, 1, 0, pt_point_ctx(PT_POINT_INSN, ARCH_FLAGS_STATUS) }, NULL, 0, noret,
        (size_t)nnr, inner, (size_t)nin, unknown, (size_t)nun };
    size_t cap = pt_proc_size(&p, 256), mapcap = pt_proc_mapcap(&p), nmap;
    uint8_t *out = malloc(cap + 1);
    pt_map_t *map = malloc((mapcap + 1) * sizeof(*map));
    const char *why = NULL;
    if (out == NULL || map == NULL)
        *err = QP_ENOMEM;
    else if ((n = pt_proc_emit(&p, p.entry, out, cap, map, mapcap, &nmap)) < 0)
        why = n == QP_EUNSUPP ? "an instruction cannot run in a copy (a call to the next "
                                "one or into its middle, a branch into an instruction, an "
                                "indirect jump whose operand cannot be translated)"
                              : "its instructions cannot be relocated to the trampoline";
    else
        pt->rsize = (uint32_t)n;
    free(out);
    free(map);
    free(runs);
    free(noret);
    free(inner);
    free(unknown);
    return why;
}

/* Why the call that ends block BL makes its procedure catch exceptions (a C++ catch
 * clause calls __cxa_begin_catch), or NULL. */
static const char *
catches(const dyn_session_t *s, const cfg_block_t *bl)
{
    arch_insn_t in;
    uint64_t a = bl->start;
    while (a < bl->end && cfg_image_decode(s->prog->img, a, 0, &in) >= 0 && a + in.len < bl->end)
        a += in.len;
    if (a >= bl->end || in.kind != ARCH_KIND_CALL)
        return NULL;
    const cfg_proc_t *c = cfg_proc_at(s->prog, in.target);
    return c != NULL && c->name != NULL && strstr(c->name, "__cxa_begin_catch") != NULL
        ? "it catches exceptions (the handler would go on in the original code, past the "
          "copy's exits)"
        : NULL;
}

/* Is link address A in a block of PARTS (none of those other procedures reach, SEEN)? */
static int
own_byte(const dyn_session_t *s, const uint32_t *parts, int nparts, const uint8_t *seen,
    uint64_t a)
{
    uint32_t b = cfg_block_at(s->prog, a);
    if (b == CFG_NONE)
        return 0;
    size_t x = part_block_index(s->prog, parts, nparts, b);
    return x != SIZE_MAX && (seen == NULL || !seen[x]);
}

/*
 * The return site X of a call in the procedure of PARTS for a jmp rel8 (to a slot,
 * find_slot): its 2 bytes in its own blocks, on instruction boundaries, no other return
 * site (XS, NXS) or procedure entry under them, not across a page.
 */
static int
short_rsite_ok(const dyn_session_t *s, const uint32_t *parts, int nparts, uint64_t x,
    const uint64_t *xs, size_t nxs)
{
    const cfg_prog_t *prog = s->prog;
    uint32_t b = cfg_block_at(prog, x), c = cfg_block_at(prog, x + 1);
    size_t j = cfg_u64_lower_bound(xs, nxs, x + 1);
    if (b == CFG_NONE || prog->blocks[b].start != x || !own_byte(s, parts, nparts, NULL, x)
        || !own_byte(s, parts, nparts, NULL, x + 1)
        || (c != b && prog->blocks[c].start != x + 1))
        return 0;
    if (j < nxs && xs[j] == x + 1)
        return 0;
    return !proc_entry_in(prog, x + 1, x + SHORT_LEN) && pad_free(s, x, SHORT_LEN)
        && ((x + s->bias) & 4095) <= 4096 - SHORT_LEN;
}

/*
 * The slot a lender kept (dyn_session_want_slot, s->nb_slot) for PT's jmp rel8 at link
 * address NEAR, when in its reach: 1 with PT's pad and pad_orig set (the slot given),
 * else 0.
 */
static int
kept_slot(dyn_session_t *s, uint64_t near, point_t *pt)
{
    uint64_t a = s->nb_slot;
    if (a == 0 || a < near + SHORT_LEN - 128 || a > near + SHORT_LEN + 127)
        return 0;
    s->nb_slot = 0;
    pt->pad = a + s->bias;
    memcpy(pt->pad_orig, s->nb_orig, JMP_LEN);
    return 1;
}

/*
 * Is link address A a 1-byte procedure (a lone ret) with another procedure right after
 * it, whose first byte is a REX prefix (0x40-0x4f)? Its jmp rel8 opcode alone then
 * leads, through that byte as the displacement, to A + 2 + (int8_t)byte, in the
 * neighbour's code: a slot there when the neighbour is relocated whole with its first
 * byte kept as its entry jump's prefix (e9patch's punned jumps).
 */
static int
pun_site(const dyn_session_t *s, uint64_t a)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *p = cfg_proc_at(prog, a), *q = cfg_proc_at(prog, a + 1);
    uint32_t b = cfg_block_at(prog, a);
    size_t avail;
    const uint8_t *nx = cfg_image_ptr(prog->img, a + 1, &avail);
    return p != NULL && p->entry == a && b != CFG_NONE && prog->blocks[b].end == a + 1
        && prog->blocks[b].last_kind == ARCH_KIND_RET && q != NULL && q->entry == a + 1
        && nx != NULL && avail > 0 && nx[0] >= 0x40 && nx[0] <= 0x4f;
}

/*
 * The return site X of a call in the procedure of PARTS on a page's last byte (even a
 * jmp rel8 would cross: it could not be written in one piece): its byte alone as a jmp
 * rel8 opcode, the next byte (its own code, kept as it is) the displacement, to a slot
 * of its own original code there (slot_at; e9patch's punned jumps). Whether X fits.
 */
static int
pun_rsite_ok(const dyn_session_t *s, const uint32_t *parts, int nparts, uint64_t x,
    const uint64_t *xs, size_t nxs)
{
    const cfg_prog_t *prog = s->prog;
    uint32_t b = cfg_block_at(prog, x);
    size_t j = cfg_u64_lower_bound(xs, nxs, x + 1);
    return ((x + s->bias) & 4095) == 4095 && b != CFG_NONE && prog->blocks[b].start == x
        && own_byte(s, parts, nparts, NULL, x) && own_byte(s, parts, nparts, NULL, x + 1)
        && !(j < nxs && xs[j] == x + 1) && !proc_entry_in(prog, x + 1, x + SHORT_LEN)
        && pad_free(s, x, SHORT_LEN);
}

/* A slot at exactly link address A (as find_slot, for a punned jump): why not, or NULL
 * with PT's pad and pad_orig set and the slot taken. */
static const char *
slot_at(dyn_session_t *s, const uint32_t *parts, int nparts, const uint8_t *seen,
    const uint64_t *rng, size_t nrng, uint64_t a, point_t *pt)
{
    int ok = ((a + s->bias) & 4095) <= 4096 - JMP_LEN && pad_free(s, a, JMP_LEN);
    for (uint64_t x = a; ok && x < a + JMP_LEN; x++)
        ok = own_byte(s, parts, nparts, seen, x);
    for (size_t r = 0; ok && r + 1 < nrng; r += 2)
        ok = a + JMP_LEN <= rng[r] || rng[r + 1] <= a;
    size_t avail;
    const uint8_t *bytes = ok ? cfg_image_ptr(s->prog->img, a, &avail) : NULL;
    if (bytes == NULL || avail < JMP_LEN || pad_take(s, a) < 0)
        return "no slot where a punned jump leads (the byte after it its displacement)";
    pt->pad = a + s->bias;
    memcpy(pt->pad_orig, bytes, JMP_LEN);
    return NULL;
}

/*
 * A slot for the 5-byte jump of PT's jmp rel8 at link address NEAR: 5 bytes of the
 * procedure's own original code (PARTS; none SEEN: no other procedure runs them) within
 * the jmp's reach, clear of the bytes its jumps take (RNG: NRNG / 2 ranges [lo, hi)) and
 * of other slots and padding taken. Nothing runs there once the copy is in and the
 * original is idle (checked at install: PT's wide). Why not, or NULL with PT's pad and
 * pad_orig set and the slot taken.
 */
static const char *
find_slot(dyn_session_t *s, const uint32_t *parts, int nparts, const uint8_t *seen,
    const uint64_t *rng, size_t nrng, uint64_t near, point_t *pt)
{
    uint64_t from = near + SHORT_LEN - 128, to = near + SHORT_LEN + 127;
    for (uint64_t a = from; a <= to; a++) {
        int ok = ((a + s->bias) & 4095) <= 4096 - JMP_LEN && pad_free(s, a, JMP_LEN);
        for (uint64_t x = a; ok && x < a + JMP_LEN; x++)
            ok = own_byte(s, parts, nparts, seen, x);
        for (size_t r = 0; ok && r + 1 < nrng; r += 2)
            ok = a + JMP_LEN <= rng[r] || rng[r + 1] <= a;
        if (!ok)
            continue;
        size_t avail;
        const uint8_t *bytes = cfg_image_ptr(s->prog->img, a, &avail);
        if (bytes == NULL || avail < JMP_LEN || pad_take(s, a) < 0)
            continue;
        pt->pad = a + s->bias;
        memcpy(pt->pad_orig, bytes, JMP_LEN);
        return NULL;
    }
    return "a return site or its entry is too short for a jump, with no room within a "
           "short jump's reach";
}

/*
 * Procedure I relocated whole (a row added for NAME, TIMED: a timer's, else the
 * caller's snippets; *ROW): its entry jump, then a jump at the return site of each
 * call. Why not (the session as it was), or NULL with the candidates added, the entry's
 * first. *ERR: QP_ENOMEM.
 */
static const char *
check_reloc(dyn_session_t *s, uint32_t i, const char *name, int timed, int exits,
    uint32_t *rowp, int *err)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[i];
    size_t ncand0 = s->ncand, nrows0 = s->nrows, npads0 = s->npads, nblk = 0, nxs = 0;
    uint32_t parts[64], b, row;
    int k, nparts, first_only;
    const char *why;
    point_t pt;
    uint8_t *seen = NULL, *how = NULL;
    uint32_t *todo = NULL, lent[8];
    uint64_t *xs = NULL, *rng = NULL;
    int nlent = 0;

    *err = 0;
    if ((nparts = parts_of(s, i, parts, 64)) < 0) {
        *err = nparts == QP_ERANGE ? 0 : nparts;
        return "too many cold fragments";
    }
    if ((why = entry_ok_loop(s, i, 1, &first_only)) != NULL)
        return why;
    if (has_shadow_stack(s))
        return "its calls would be made with their original return address (the process "
               "has a shadow stack)";

    int entry_slot = 0;
    /* Lending to a 1-byte procedure right before it: its first byte kept, as the
     * prefix of its jump and that procedure's displacement (pun_site). */
    int keep = s->nb_want != 0 && s->nb_pun;
    if (keep && (pr->entry != s->nb_want + 1 || ((pr->entry + s->bias) & 4095) > 4096 - JMP_LEN - 1
                    || entry_insns(s, i, JMP_LEN + 1, 0, &pt) != NULL))
        return "its entry cannot keep its first byte before its jump";
    const char *cross = keep ? NULL
        : ((pr->entry + s->bias) & 4095) > 4096 - JMP_LEN
        ? "its first 5 bytes cross a page boundary (the jump could not be written in one "
          "piece)"
        : NULL;
    if (!keep && (cross != NULL || (why = entry_insns(s, i, JMP_LEN, 0, &pt)) != NULL)) {
        /* Too short, or across a page: a jmp rel8 to a jump in padding, or else in its
         * own original code (a slot, found once the bytes its other jumps take are
         * known). */
        if (entry_insns(s, i, SHORT_LEN, 0, &pt) != NULL)
            return why != NULL ? why : cross;
        if (((pr->entry + s->bias) & 4095) > 4096 - SHORT_LEN)
            return cross;
        entry_slot = find_pad(s, pr->entry, &pt) != NULL;
        why = NULL;
    }
    pt.kind = PT_ENTRY;
    pt.proc = i;
    pt.name = name;
    pt.reloc = 1;
    pt.keep_first = (uint8_t)keep;
    pt.call_ret = 0;
    pt.save_flags = entry_save_flags(pr);
    size_t nsucc = 0;
    for (k = 0; k < nparts; k++)
        nblk += prog->procs[parts[k]].nblocks;
    FOR_BLOCKS(prog, parts, nparts, k, b)
    nsucc += prog->blocks[b].nsucc;
    seen = calloc(nblk + 1, 1);
    todo = malloc((nblk + 1) * sizeof(*todo));
    xs = malloc((nblk + nsucc + 1) * sizeof(*xs));
    if (seen == NULL || todo == NULL || xs == NULL) {
        *err = QP_ENOMEM;
        goto out;
    }
    /* What the copy cannot keep inside: tables and jumps of unknown targets, calls
     * into other procedures' code. The return sites; the blocks other procedures jump
     * into (the start of a search of what they run of the original). */
    size_t ntodo = 0;
    int nxlate = 0;
    FOR_BLOCKS(prog, parts, nparts, k, b)
    {
        const cfg_block_t *bl = &prog->blocks[b];
        /* An indirect jump the copy translates at run time (pt_proc_emit): its targets,
         * known or not, are the copy's own code or leave it (the leave snippet first). */
        int xlate = xlate_block(s, parts, nparts, bl);
        nxlate += xlate;
        for (uint32_t e = 0; e < bl->nsucc && why == NULL; e++) {
            const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
            if (xlate
                && (ed->kind == CFG_EDGE_TABLE || ed->kind == CFG_EDGE_INDIRECT
                    || ed->kind == CFG_EDGE_UNRESOLVED))
                continue;
            if (ed->kind == CFG_EDGE_TABLE && is_table_block(prog, bl) && ed->to != CFG_NONE
                && part_block_index(prog, parts, nparts, ed->to) != SIZE_MAX)
                /* A jump table of proven bounds into its own code: each target gets a
                 * jump into the copy, as a return site does (the copy's jump reads the
                 * table, which stays as it is, and lands there). */
                xs[nxs++] = prog->blocks[ed->to].start;
            else if (ed->kind == CFG_EDGE_TABLE || ed->kind == CFG_EDGE_INDIRECT)
                why = "a jump table (its targets would run the original code)";
            else if (ed->kind == CFG_EDGE_UNRESOLVED)
                why = "an indirect jump with unknown targets may leave it";
            else if (ed->kind == CFG_EDGE_TAILCALL
                && (bl->last_kind == ARCH_KIND_CALL || bl->last_kind == ARCH_KIND_CALL_IND)
                && !cfg_block_call_never_returns(prog, bl))
                /* (Else it never returns: the copy's leave snippet runs before it.) */
                why = "a call returns into another procedure's code (its callee is assumed "
                      "never to return)";
            else if (ed->kind == CFG_EDGE_CALLRET && ed->to != CFG_NONE)
                xs[nxs++] = prog->blocks[ed->to].start;
        }
        /* An exception it catches goes on in the original code (its landing pad), past
         * the copy: a ret there would miss its exit's snippet. (A cleanup ends in
         * _Unwind_Resume: no ret runs there, in place or in a copy.) */
        if (why == NULL && exits && bl->last_kind == ARCH_KIND_CALL)
            why = catches(s, bl);
        if (why != NULL)
            goto out;
        if (b != pr->block && foreign_target(s, bl->start, err)) {
            seen[part_block_index(prog, parts, nparts, b)] = 1;
            todo[ntodo++] = b;
        }
        if (*err < 0)
            goto out;
    }
    qsort(xs, nxs, sizeof(*xs), cfg_u64_cmp);
    /*
     * The code other procedures run in the original: a call there would return into the
     * copy (through its return site's jump), and a jump under their feet would take
     * them there: either stops the timer it never started.
     */
    while (ntodo > 0 && why == NULL) {
        const cfg_block_t *bl = &prog->blocks[todo[--ntodo]];
        size_t j = cfg_u64_lower_bound(xs, nxs, bl->start > JMP_LEN ? bl->start - JMP_LEN + 1 : 0);
        if (bl->last_kind == ARCH_KIND_CALL || bl->last_kind == ARCH_KIND_CALL_IND)
            why = "other procedures jump into its middle and reach one of its calls";
        else if (j < nxs && xs[j] < bl->end)
            why = "other procedures jump into its middle and reach a return site";
        for (uint32_t e = 0; e < bl->nsucc; e++) {
            const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
            size_t x;
            if (ed->to == CFG_NONE
                || (x = part_block_index(prog, parts, nparts, ed->to)) == SIZE_MAX
                || seen[x])
                continue;
            seen[x] = 1;
            todo[ntodo++] = ed->to;
        }
    }
    if (why != NULL)
        goto out;
    /* Each return site: a jump into the copy (covering the blocks after it when the
     * original is idle), else a jmp rel8 to a jump in a slot of its own code. */
    if ((how = calloc(nxs + 1, 1)) == NULL
        || (rng = malloc((2 * nxs + 2) * sizeof(*rng))) == NULL) {
        *err = QP_ENOMEM;
        goto out;
    }
    size_t nrng = 0;
    rng[nrng++] = pr->entry;
    rng[nrng++] = pr->entry + (keep ? JMP_LEN + 1 : pt.pad || entry_slot ? SHORT_LEN : JMP_LEN);
    for (size_t j = 0; j < nxs && why == NULL; j++) {
        int wide;
        if (j > 0 && xs[j] == xs[j - 1])
            continue;
        why = rsite_ok(s, i, parts, nparts, xs[j], xs, nxs, &wide);
        /* A wide jump reaches past its block, maybe into padding: never into bytes
         * another point's jump took (each would break the other, and restoring one
         * would leave the other's bytes). */
        if (why == NULL && wide && !pad_free(s, xs[j], JMP_LEN))
            why = "a return site's jump would cover padding another jump takes";
        how[j] = why == NULL ? (uint8_t)(1 + wide) : 3;
        if (why != NULL && short_rsite_ok(s, parts, nparts, xs[j], xs, nxs))
            why = NULL;
        else if (why != NULL && pun_rsite_ok(s, parts, nparts, xs[j], xs, nxs)) {
            why = NULL;
            how[j] = 4;
        }
        /* (A pun's next byte is its displacement: no slot over it either.) */
        rng[nrng++] = xs[j];
        rng[nrng++] = xs[j] + (how[j] >= 3 ? SHORT_LEN : JMP_LEN);
    }
    if (why != NULL)
        goto out;
    if (entry_slot) {
        if ((why = find_slot(s, parts, nparts, seen, rng, nrng, pr->entry, &pt)) != NULL
            && (why = borrow_slot(s, i, pr->entry, timed, &pt, &pt.dep1, &lent[nlent], err))
                == NULL
            && *err == 0) {
            pt.dep1++;
            nlent++;
        }
        if (why != NULL || *err < 0)
            goto out;
        pt.wide = 1;
    }
    if (s->nb_want != 0) {
        /* A slot for a neighbour's short entry too (with_neighbour). */
        point_t nb;
        memset(&nb, 0, sizeof(nb));
        if (keep) {
            size_t avail;
            const uint8_t *b0 = cfg_image_ptr(prog->img, pr->entry, &avail);
            why = b0 == NULL ? "no bytes in the file"
                             : slot_at(s, parts, nparts, seen, rng, nrng,
                                   pr->entry + 1 + (uint64_t)(int64_t)(int8_t)b0[0], &nb);
        } else
            why = find_slot(s, parts, nparts, seen, rng, nrng, s->nb_want, &nb);
        if (why != NULL)
            goto out;
        s->nb_slot = nb.pad - s->bias;
        memcpy(s->nb_orig, nb.pad_orig, JMP_LEN);
        pt.wide = 1;
    }
    /* A thread left in the original could take a jump of unknown target into the middle
     * of a patched jump: the original must be idle when the copy goes in (as for a
     * slot). */
    if (nxlate > 0 || pr->nind_unresolved > 0)
        pt.wide = 1;
    if ((*err = add_row(s, name, i, timed, &row)) < 0)
        goto out;
    if (rowp != NULL)
        *rowp = row;
    pt.row = row;
    if ((*err = add_cand(s, &pt)) < 0)
        goto out;
    for (size_t j = 0; j < nxs && why == NULL; j++) {
        size_t avail;
        const uint8_t *bytes = cfg_image_ptr(prog->img, xs[j], &avail);
        point_t rs;
        if (how[j] == 0)
            continue;
        if (bytes == NULL || avail < JMP_LEN) {
            why = "no bytes in the file";
            break;
        }
        memset(&rs, 0, sizeof(rs));
        rs.kind = PT_RSITE;
        rs.proc = i;
        rs.row = row;
        rs.name = name;
        rs.entry = xs[j] + s->bias;
        rs.len = how[j] == 4 ? 1 : how[j] == 3 ? SHORT_LEN : JMP_LEN;
        rs.wide = how[j] >= 2;
        rs.pun = how[j] == 4;
        memcpy(rs.orig, bytes, rs.len);
        if (how[j] == 4
            && (why = slot_at(s, parts, nparts, seen, rng, nrng,
                    xs[j] + SHORT_LEN + (uint64_t)(int64_t)(int8_t)bytes[1], &rs))
                != NULL)
            break;
        if (how[j] == 3
            && (why = find_slot(s, parts, nparts, seen, rng, nrng, xs[j], &rs)) != NULL
            && kept_slot(s, xs[j], &rs))
            why = NULL; /* (a lender's, dyn_session_want_slot) */
        else if (how[j] == 3 && why != NULL) {
            /* None of its own: one in a neighbour's code (at most 8 neighbours). */
            if (nlent == 8
                || (why = borrow_slot(s, i, xs[j], timed, &rs, &rs.dep1, &lent[nlent], err))
                    != NULL
                || *err < 0)
                break;
            rs.dep1++;
            nlent++;
        }
        if (how[j] == 2 && (*err = pad_take(s, xs[j])) < 0) /* its 5 bytes: see above */
            goto out;
        if ((*err = add_cand(s, &rs)) < 0)
            goto out;
    }
    if (why == NULL)
        why = reloc_trial(s, parts, nparts, &pt, err);
out:
    free(seen);
    free(todo);
    free(xs);
    free(how);
    free(rng);
    if (why != NULL || *err < 0) {
        s->ncand = ncand0;
        s->nrows = nrows0;
        s->npads = npads0;
    } else
        for (int k2 = 0; k2 < nlent; k2++)
            s->chosen[lent[k2]] |= 1; /* (measured as the copies that lend the slots) */
    return why;
}

/* Why procedure I cannot be timed in place, or NULL with its entry and exit candidates
 * added. */
static const char *
check_timed_inplace(dyn_session_t *s, uint32_t i, const char *name, int *err /*OUT*/)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[i];
    size_t ncand0 = s->ncand, nrows0 = s->nrows;
    const char *why;
    uint32_t b, row, parts[64];
    int k, nparts, want_pad;
    unsigned nexit = 0;
    point_t pt, ex;

    *err = 0;
    if ((nparts = parts_of(s, i, parts, 64)) < 0) {
        *err = nparts == QP_ERANGE ? 0 : nparts;
        return "too many cold fragments";
    }
    if ((why = timed_entry(s, i, &pt)) != NULL)
        return why;
    if (crosses_page(&pt))
        return "its first 5 bytes cross a page boundary (the jump could not be written in "
               "one piece)";
    if (pr->flags & CFG_PROC_MULTI_ENTRY)
        return "other procedures jump into its middle (its time would be wrong)";
    pt.name = name;
    if ((*err = add_row(s, name, i, 1, &row)) < 0)
        return NULL;
    pt.row = row;
    if ((*err = add_cand(s, &pt)) < 0)
        return NULL;
    nexit += pt.whole;
    FOR_BLOCKS(prog, parts, nparts, k, b)
    {
        const cfg_block_t *bl = &prog->blocks[b];
        int tail = is_tail_block(prog, bl) ? 1 : is_cond_tail_block(prog, bl);
        int noret = cfg_block_call_never_returns(prog, bl);
        for (uint32_t e = 0; e < bl->nsucc; e++) {
            const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
            if (ed->kind == CFG_EDGE_TAILCALL && !tail && !noret)
                why = bl->last_kind == ARCH_KIND_CALL
                        || bl->last_kind == ARCH_KIND_CALL_IND
                    ? "a call returns into another procedure's code (its callee is "
                      "assumed never to return)"
                    : "a tail call leaves it other than by a jmp or a jcc at a block's "
                      "end";
            else if (ed->kind == CFG_EDGE_UNRESOLVED)
                why = "an indirect jump with unknown targets may leave it";
            else if (ed->to == CFG_NONE && ed->kind != CFG_EDGE_RETURN
                && ed->kind != CFG_EDGE_NORETURN && ed->kind != CFG_EDGE_TAILCALL)
                why = "control leaves it other than by a ret";
        }
        if (why == NULL && noret) {
            /* A call that never returns: the timer stops before it. */
            if ((why = check_noret(s, bl, &ex)) == NULL) {
                ex.proc = i;
                ex.row = row;
                ex.name = name;
                if (ex.entry < pt.entry + pt.len && pt.entry < ex.entry + ex.len)
                    why = "its entry and a call that never returns share the bytes to patch";
                else if (cand_at(s, row, ex.entry))
                    why = "a call that never returns and another exit share the bytes to "
                          "patch";
                else if ((*err = add_cand(s, &ex)) < 0)
                    return NULL;
                nexit++;
            }
        }
        if (why == NULL && (bl->last_kind == ARCH_KIND_RET || tail)
            && !(pt.whole && b == pr->block)) {
            why = check_exit(s, bl, pr->entry, 0, &ex, &want_pad);
            if (why == NULL && want_pad)
                why = find_pad(s, bl->start, &ex);
            if (why != NULL && !tail && bl->end - bl->start < JMP_LEN) {
                /* Too short, no padding: patch the blocks that lead to it instead. */
                const char *w2 = exits_before(s, i, bl, row, name, &pt, &nexit, err);
                if (*err < 0)
                    return NULL;
                if (w2 == NULL) {
                    why = NULL;
                    continue;
                }
                if (bl->end - bl->start < SHORT_LEN)
                    why = w2; /* (a lone ret: what stopped the way round it) */
            }
            if (why == NULL) {
                ex.tail = tail == 3 ? 3 : ex.tail;
                ex.proc = i;
                ex.row = row;
                ex.name = name;
                ex.save_flags = pt.save_flags;
                if (ex.entry < pt.entry + pt.len && pt.entry < ex.entry + ex.len)
                    why = "its entry and a ret share the bytes to patch (too short)";
                else if (crosses_page(&ex))
                    why = "the jump before a ret would cross a page boundary";
                else if (cand_at(s, row, ex.entry))
                    why = "a ret and another exit share the bytes to patch";
                else if ((*err = add_cand(s, &ex)) < 0)
                    return NULL;
                nexit++;
            }
        }
        if (why != NULL)
            goto done;
    }
done:
    if (why == NULL && nexit == 0)
        why = "it has no ret (never returns)";
    if (why != NULL) {
        s->ncand = ncand0;
        s->nrows = nrows0;
    }
    return why;
}

/*
 * Why procedure I cannot be timed, or NULL with its candidates added: in place where its
 * exits fit (the cheapest), else relocated whole. The reason given is the in-place one
 * unless that was its being jumped into, which the copy takes care of.
 */
static const char *
check_timed(dyn_session_t *s, uint32_t i, const char *name, int *err /*OUT*/)
{
    const char *why = check_timed_inplace(s, i, name, err), *w2;
    if (why == NULL || *err < 0)
        return why;
    w2 = check_reloc(s, i, name, 1, 1, NULL, err);
    if (w2 == NULL || *err < 0)
        return w2;
    return s->prog->procs[i].flags & CFG_PROC_MULTI_ENTRY ? w2 : why;
}

int
dyn_session_select_time(dyn_session_t *s, const char *pattern, unsigned *nmatch /*OUT*/)
{
    unsigned k = 0;
    int err = 0;

    if (s == NULL || pattern == NULL || s->installed)
        return QP_EINVAL;
    s->nb_pattern = pattern;
    s->nb_allow = 1;
    for (uint32_t i = 0; i < s->prog->nprocs; i++) {
        const cfg_proc_t *pr = &s->prog->procs[i];
        const char *name, *why;
        if ((pr->flags & CFG_PROC_FRAGMENT)
            || (name = match_name(s->prog->img, pr, pattern)) == NULL)
            continue;
        k++;
        if (s->chosen[i] & 1)
            continue;
#if !defined(__x86_64__)
        why = "timers need x86-64's cycle counter";
#else
        why = check_timed(s, i, name, &err);
        if (err < 0)
            break;
        if (why != NULL) {
            /* Through a slot in a neighbour's code (which is timed too). */
            const char *w2 = with_neighbour(s, i, name, 1, &err);
            if (err < 0)
                break;
            why = w2 == NULL ? NULL : why;
        }
#endif
        if (why != NULL) {
            /* Not chosen: --count may still count it. */
            if ((err = refuse_name(s, name, why)) < 0)
                break;
            continue;
        }
        s->chosen[i] |= 1;
    }
    s->nb_allow = 0;
    s->nb_pattern = NULL;
    if (err < 0)
        return err;
    if (nmatch != NULL)
        *nmatch = k;
    return 0;
}

/*****************************************************************************
 * Call sites: each call instruction of at least 5 bytes
 */

/* The call sites of procedure I (chosen by NAME): rows and candidates, or refusals. */
/* Does the program carry C++-style exception tables (.gcc_except_table)? */
static int
has_except_table(const cfg_image_t *img)
{
    for (size_t i = 0; i < img->nsections; i++)
        if (strcmp(img->sections[i].name, ".gcc_except_table") == 0)
            return 1;
    return 0;
}

/*
 * PT, a call shorter than the jump at the end of block BL, with the instructions that
 * follow it moved along (whole ones, up to the 5 bytes of the jump): only when its
 * return site is reached from the call alone (so nothing but the callee's return lands
 * there, and a thread inside the callee, whose return address would be inside the jump,
 * makes install refuse the point) and they are plain instructions. Why not, or NULL with
 * PT's len, ninsns, orig and call_len set.
 */
static const char *
call_with_next(const dyn_session_t *s, const cfg_block_t *bl, point_t *pt)
{
    const cfg_prog_t *prog = s->prog;
    uint32_t r = cfg_block_at(prog, bl->end);
    const cfg_block_t *rb;
    const uint8_t *bytes;
    size_t avail, len = pt->len;

    if (r == CFG_NONE || (rb = &prog->blocks[r])->start != bl->end || rb->npred != 1
        || rb->proc != bl->proc)
        return "the call is shorter than the 5-byte jump, with no padding within reach "
               "and its return site reached from elsewhere";
    if (proc_entry_in(prog, bl->end, bl->end + JMP_LEN))
        return "another procedure starts after the call";
    if ((bytes = cfg_image_ptr(prog->img, bl->end, &avail)) == NULL)
        return "no bytes in the file";
    while (len < JMP_LEN) {
        arch_insn_t in;
        size_t off = len - pt->len;
        if (bl->end + off >= rb->end
            || arch_decode(bytes + off, avail - off, pt->entry + len, &in) < 0
            || bl->end + off + in.len > rb->end
            || (in.kind != ARCH_KIND_SEQ && in.kind != ARCH_KIND_NOP)
            || (in.flags & ARCH_F_PRIV) || len + in.len > sizeof(pt->orig))
            return "the call is shorter than the 5-byte jump, with no padding within "
                   "reach nor plain instructions after it";
        memcpy(pt->orig + len, bytes + off, in.len);
        len += in.len;
        pt->ninsns++;
    }
    pt->call_len = pt->len;
    pt->len = (uint8_t)len;
    return NULL;
}

static int
select_calls_of(dyn_session_t *s, uint32_t i, const char *name)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[i];
    uint32_t b, parts[64];
    int k, nparts;

    if ((nparts = parts_of(s, i, parts, 64)) < 0)
        return nparts == QP_ERANGE ? refuse_name(s, name, "too many cold fragments")
                                   : nparts;
    if (pr->unsafe != NULL)
        return refuse_name(s, name, "the analysis could not prove its code safe");
    if (pr->nind_unresolved > 0)
        return refuse_name(
            s, name, "an indirect jump with unknown targets might land inside a call");
    FOR_BLOCKS(prog, parts, nparts, k, b)
    {
        const cfg_block_t *bl = &prog->blocks[b];
        const uint8_t *bytes;
        size_t avail;
        uint64_t a;
        arch_insn_t in;
        char buf[24];
        const char *why = NULL, *callee, *site;
        point_t pt;
        uint32_t row;

        if (bl->last_kind != ARCH_KIND_CALL && bl->last_kind != ARCH_KIND_CALL_IND)
            continue;
        bytes = cfg_image_ptr(prog->img, bl->start, &avail);
        if (bytes == NULL || avail < bl->end - bl->start)
            continue;
        memset(&in, 0, sizeof(in));
        for (a = bl->start; a < bl->end; a += in.len)
            if (arch_decode(bytes + (a - bl->start), bl->end - a, a, &in) < 0)
                break;
        if (a != bl->end)
            continue;
        a -= in.len; /* the call */
        callee = NULL;
        if (in.kind == ARCH_KIND_CALL) {
            const cfg_proc_t *c = cfg_proc_at(prog, in.target);
            callee = c != NULL && c->entry == in.target ? c->name : NULL;
            if (callee == NULL) {
                snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)in.target);
                callee = buf;
            }
        }
        site = site_name(s, name, a >= pr->entry ? '+' : '-',
            a >= pr->entry ? a - pr->entry : pr->entry - a,
            callee == NULL ? "*indirect" : callee);
        if (site == NULL)
            return QP_ENOMEM;
        if (has_except_table(prog->img))
            why = "the program has exception tables: an exception thrown through the "
                  "call "
                  "would find no unwind information for its return address in the "
                  "trampoline";
        else if (in.kind == ARCH_KIND_CALL && in.target == a + in.len)
            why = "a call to the next instruction reads its own return address";
        else if (callee != NULL
            && (strstr(callee, "setjmp") != NULL || strstr(callee, "vfork") != NULL
                || strstr(callee, "getcontext") != NULL
                || strstr(callee, "savectx") != NULL))
            why = "the callee keeps its return address beyond the stack";
        if (why != NULL) {
            QP_CHECK(refuse_name(s, site, why));
            continue;
        }
        memset(&pt, 0, sizeof(pt));
        pt.kind = PT_CALL;
        pt.proc = i;
        pt.name = site;
        pt.entry = a + s->bias;
        pt.len = in.len;
        pt.ninsns = 1;
        memcpy(pt.orig, bytes + (a - bl->start), in.len);
        /* Shorter than the jump (`call *%rax`): a jmp rel8 inside the call, to a jump in
         * padding (the call is one instruction: nothing lands inside it), or else the
         * jump covers the first instructions of its return site too. */
        if (in.len < JMP_LEN && (why = find_pad(s, a, &pt)) != NULL
            && (why = call_with_next(s, bl, &pt)) != NULL) {
            QP_CHECK(refuse_name(s, site, why));
            continue;
        }
        QP_CHECK(add_row(s, site, i, 0, &row));
        pt.row = row;
        QP_CHECK(add_cand(s, &pt));
    }
    return 0;
}

int
dyn_session_select_calls(dyn_session_t *s, const char *pattern, unsigned *nmatch /*OUT*/)
{
    unsigned k = 0;

    if (s == NULL || pattern == NULL || s->installed)
        return QP_EINVAL;
    for (uint32_t i = 0; i < s->prog->nprocs; i++) {
        const cfg_proc_t *pr = &s->prog->procs[i];
        const char *name;
        if ((pr->flags & CFG_PROC_FRAGMENT)
            || (name = match_name(s->prog->img, pr, pattern)) == NULL)
            continue;
        k++;
        if (s->chosen[i] & 2)
            continue;
        s->chosen[i] |= 2;
        QP_CHECK(select_calls_of(s, i, name));
    }
    if (nmatch != NULL)
        *nmatch = k;
    return 0;
}

/*****************************************************************************
 * What the process proves: nobody is inside the bytes, and they are the file's
 */

/* True when a word of the sorted W lies in [LO, HI). */
static int
any_in(const uint64_t *w, size_t n, uint64_t lo, uint64_t hi)
{
    size_t i = cfg_u64_lower_bound(w, n, lo);
    return i < n && w[i] < hi;
}

/*****************************************************************************
 * Counters
 */

/* Shared counters: a memfd of ours that the process opens through /proc. */
static int
counters_shared(dyn_session_t *s, size_t size)
{
    char path[96];
    uint64_t a[6] = { 0 };
    int64_t rfd, r;
    void *m;
    int rc;

    s->memfd = (int)syscall(SYS_memfd_create, "qpt-dyn-counters", 1u /* MFD_CLOEXEC */);
    if (s->memfd < 0)
        return QP_EIO;
    if (ftruncate(s->memfd, (off_t)size) < 0)
        return QP_EIO;
    m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, s->memfd, 0);
    if (m == MAP_FAILED)
        return QP_EIO;
    s->local = m;
    /* The path goes into the (not yet used) trampoline memory for the remote open (if
       dyn dies before the close, the process keeps an open descriptor: harmless). */
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), s->memfd);
    QP_CHECK(dyn_proc_write(s->p, s->code + HDR_LEN, path, strlen(path) + 1));
    a[0] = (uint64_t)(int64_t)AT_FDCWD;
    a[1] = s->code + HDR_LEN;
    a[2] = O_RDWR | O_CLOEXEC;
    QP_CHECK(dyn_proc_syscall(s->p, SYS_openat, a, &rfd));
    if (rfd < 0) {
        errno = (int)-rfd;
        return QP_EIO;
    }
    rc = dyn_space_map_near(s->p, s->code, s->code + s->code_size, size,
        ED_PROT_R | ED_PROT_W, (int)rfd, &s->ctr);
    memset(a, 0, sizeof(a));
    a[0] = (uint64_t)rfd;
    dyn_proc_syscall(s->p, SYS_close, a, &r);
    return rc;
}

static void
counters_local_free(dyn_session_t *s)
{
    if (s->local != NULL)
        munmap((void *)s->local, s->ctr_size);
    if (s->memfd >= 0)
        close(s->memfd);
    s->local = NULL;
    s->memfd = -1;
}

static int
counters_alloc(dyn_session_t *s, size_t n)
{
    size_t size = (n * 8 * ROW_WORDS + 4095) & ~(size_t)4095;

    s->ctr_size = size;
    s->last = calloc(n ? n : 1, sizeof(uint64_t));
    s->ticks = calloc(n ? n : 1, sizeof(uint64_t));
    if (s->last == NULL || s->ticks == NULL)
        return QP_ENOMEM;
    if (counters_shared(s, size) == 0)
        return 0;
    counters_local_free(s);
    return dyn_space_ops.alloc_near(
        s->p, s->code, s->code + s->code_size, size, ED_PROT_R | ED_PROT_W, &s->ctr);
}

/*****************************************************************************
 * Installing
 */

/*
 * A point's trampoline is built by patch/'s pt_tramp_emit (see there the shapes) from
 * its bytes and snippets: the snippet is the point's own, or the row's counter and
 * timer, compiled by the snippet compiler, which saves the flags where they may be live
 * (at a ret they are dead by the ABI, unless the procedure is not known to be called by
 * it).
 */
/* What holds where a snippet of PT runs (AFTER: after its call). */
static arch_snip_ctx_t
snip_ctx(const point_t *pt, int after)
{
    uint8_t flags = pt->save_flags ? ARCH_FLAGS_STATUS : 0;
    switch (pt->kind) {
    /* After: an entry moved whole, before its ret (or its tail jump: no return value
     * there, and the flags saved, as they may be live for a jump into other code). */
    case PT_ENTRY:
        if (after && pt->by_jump)
            return pt_point_ctx(PT_POINT_INSN, ARCH_FLAGS_STATUS);
        return pt_point_ctx(after ? PT_POINT_EXIT : PT_POINT_ENTRY, flags);
    /* Before a call and after it returned the flags are dead (the callee clobbers them). */
    case PT_CALL: return pt_point_ctx(after ? PT_POINT_AFTER_CALL : PT_POINT_CALL, 0);
    case PT_EXIT: /* a tail call (or a call that never returns): no return value, the
                   * flags saved (as above); before a short ret block's ret (rlen) it is a
                   * return again */
        return (pt->tail || pt->noret) && !pt->rlen ? pt_point_ctx(PT_POINT_INSN, ARCH_FLAGS_STATUS)
                                     : pt_point_ctx(PT_POINT_EXIT, flags);
    default: return pt_point_ctx(PT_POINT_BLOCK, ARCH_FLAGS_STATUS); /* a block */
    }
}

/* The counter (and timer start) of a row's entry as a snippet, at WORDS. */
static void
count_snip(const dyn_session_t *s, int timed, uint64_t words, arch_snip_t v[4],
    dyn_snippet_t *sn)
{
    v[0] = (arch_snip_t) { .op = ARCH_SN_CONST, .imm = 1, .a = ARCH_SNIP_NONE,
        .b = ARCH_SNIP_NONE, .c = ARCH_SNIP_NONE };
    v[1] = (arch_snip_t) { .op = ARCH_SN_ADD_TO, .a = 0, .b = ARCH_SNIP_NONE,
        .c = ARCH_SNIP_NONE, .imm = (int64_t)words,
        .flags = s->atomic ? ARCH_SNF_ATOMIC : 0 };
    v[2] = (arch_snip_t) { .op = ARCH_SN_TIMER_START, .a = ARCH_SNIP_NONE,
        .b = ARCH_SNIP_NONE, .c = ARCH_SNIP_NONE, .imm = (int64_t)(words + 8) };
    v[3] = (arch_snip_t) { .op = ARCH_SN_SEQ, .a = 1, .b = 2, .c = ARCH_SNIP_NONE };
    *sn = (dyn_snippet_t) { v, 4, timed ? 3 : 1 };
}

/* SN and what holds where it runs at PT (AFTER: after its call). */
static pt_snip_t
tramp_snip(const point_t *pt, const dyn_snippet_t *sn, int after)
{
    return (pt_snip_t) { sn->nodes, sn->n, sn->root, snip_ctx(pt, after) };
}

/*
 * The copy of PT's procedure (relocated whole) at AT into OUT (CAP bytes), with PRE at
 * its entry and POST (may be NULL) before each ret and each jump that leaves it: its
 * length, or QP_E*; PT's map of it set.
 */
static int
emit_reloc(const dyn_session_t *s, point_t *pt, uint64_t at, const dyn_snippet_t *pre,
    const dyn_snippet_t *post, uint8_t *out, size_t cap)
{
    uint32_t parts[64];
    int nparts = parts_of((dyn_session_t *)s, pt->proc, parts, 64), n;
    pt_run_t *runs;
    uint8_t fl = pt->save_flags ? ARCH_FLAGS_STATUS : 0;

    QP_CHECK(nparts);
    QP_CHECK(n = proc_runs(s, parts, nparts, &runs));
    pt_proc_t p = { runs, (size_t)n, s->prog->procs[pt->proc].entry + s->bias,
        tramp_snip(pt, pre, 0), { 0 }, { 0 }, NULL, 0, NULL, 0, NULL, 0, NULL, 0 };
    uint64_t *exits = NULL, *noret = NULL, *inner = NULL, *unknown = NULL;
    int nnr = block_ends(s, parts, nparts, cfg_block_call_never_returns, &noret);
    int nin = nnr < 0 ? nnr : block_ends(s, parts, nparts, is_table_block, &inner);
    int nun = nin < 0 ? nin : block_ends(s, parts, nparts, NULL, &unknown);
    if (nnr < 0 || nin < 0 || nun < 0) {
        free(runs);
        free(noret);
        free(inner);
        return QP_ENOMEM;
    }
    p.noret = noret;
    p.nnoret = (size_t)nnr;
    p.inner = inner;
    p.ninner = (size_t)nin;
    p.unknown = unknown;
    p.nunknown = (size_t)nun;
    if (pt->exits != NULL) {
        /* Only the exits the caller put its snippet at (link addresses, sorted). */
        if ((exits = malloc((pt->nexits + 1) * sizeof(*exits))) == NULL) {
            free(runs);
            free(noret);
            free(inner);
            free(unknown);
            return QP_ENOMEM;
        }
        for (size_t k = 0; k < pt->nexits; k++)
            exits[k] = pt->exits[k] + s->bias;
        p.exits = exits;
        p.nexits = pt->nexits;
    }
    if (post != NULL) {
        /* At a ret the flags are dead where the ABI holds (as a timed exit's); before a
         * jump that leaves, they are saved (they may be live for its target). */
        p.ret = (pt_snip_t) { post->nodes, post->n, post->root, pt_point_ctx(PT_POINT_EXIT, fl) };
        p.leave = (pt_snip_t) { post->nodes, post->n, post->root,
            pt_point_ctx(PT_POINT_INSN, ARCH_FLAGS_STATUS) };
    }
    free(pt->map);
    pt->nmap = 0;
    size_t mapcap = pt_proc_mapcap(&p);
    pt->map = malloc((mapcap + 1) * sizeof(*pt->map));
    if (pt->map == NULL) {
        free(runs);
        free(exits);
        free(noret);
        free(inner);
        free(unknown);
        return QP_ENOMEM;
    }
    n = pt_proc_emit(&p, at, out, cap, pt->map, mapcap, &pt->nmap);
    free(runs);
    free(exits);
    free(noret);
    free(inner);
    free(unknown);
    return n;
}

/* Bytes enough for the copy of PT's procedure (relocated whole) with its snippets; 0
 * when it cannot be known (emitting then says what is wrong). */
static size_t
reloc_size(const dyn_session_t *s, const point_t *pt)
{
    /* As tried, with a counter and a timer; room for snippets of its own and for
     * encodings that differ where it goes (an emit that does not fit refuses it). */
    const dyn_snippet_t *sn[2] = { &pt->before, &pt->after };
    size_t extra = 0;
    for (int a = 0; a < 2; a++)
        if (sn[a]->nodes != NULL) {
            pt_snip_t ps = { sn[a]->nodes, sn[a]->n, sn[a]->root, snip_ctx(pt, a) };
            int n = pt_snip_size(&ps, pt->entry);
            extra += n > 0 ? (size_t)n : 4096;
        }
    (void)s;
    return pt->rsize + pt->rsize / 4 + 256 + extra * (pt->rsize / 8 + 1);
}

/* The trampoline of PT (counting or timing for its row at WORDS) at AT into OUT: its
 * length or QP_E*. */
static int
emit_tramp(const dyn_session_t *s, point_t *pt, uint64_t at, uint64_t words, uint8_t *out,
    size_t cap)
{
    arch_snip_t cv[4], stop = { .op = ARCH_SN_TIMER_STOP, .a = ARCH_SNIP_NONE,
        .b = ARCH_SNIP_NONE, .c = ARCH_SNIP_NONE, .imm = (int64_t)(words + 8) };
    dyn_snippet_t count, st = { &stop, 1, 0 };
    pt_tramp_t t = { .addr = pt->entry, .orig = pt->orig, .len = pt->len,
        .ninsns = pt->ninsns, .spill = pt->spill };

    /* Every snippet goes through the snippet compiler, the counters' and timers' too. */
    count_snip(s, s->rows[pt->row].timed, words, cv, &count);
    const dyn_snippet_t *pre = pt->before.nodes ? &pt->before : &count;
    if (pt->reloc)
        return emit_reloc(s, pt, at, pre,
            pt->after.nodes != NULL ? &pt->after : s->rows[pt->row].timed ? &st : NULL, out,
            cap);
    if (pt->call_len) {
        t.shape = PT_TRAMP_CALL_NEXT;
        t.spill = 0;
        t.call_len = pt->call_len;
        t.before = tramp_snip(pt, pre, 0);
        return pt_tramp_emit(&t, at, out, cap, &pt->ret_at);
    }
    if (pt->call_ret || pt->whole || pt->tail || pt->rlen) {
        /* A timer stop runs where a ret's would: the flags are dead at an ABI exit. */
        uint8_t fl = pt->save_flags ? ARCH_FLAGS_STATUS : 0;
        t.shape = PT_TRAMP_OWN;
        t.call_ret = pt->call_ret;
        t.tail = pt->tail;
        if (pt->kind != PT_EXIT)
            t.before = tramp_snip(pt, pre, 0);
        if (pt->whole && pt->after.nodes != NULL)
            t.after = tramp_snip(pt, &pt->after, 1); /* the point's own, before the ret */
        else if (pt->kind == PT_EXIT && pt->before.nodes != NULL)
            t.after = tramp_snip(pt, &pt->before, 0); /* the point's own, on the way out */
        else if (pt->kind == PT_EXIT || pt->whole)
            t.after = (pt_snip_t) { &stop, 1, 0, { 0, 0, fl, !fl } };
        if (pt->noret)
            t.after.ctx = snip_ctx(pt, 0); /* before a call: not an ABI return */
        if (pt->rlen) {
            t.rbytes = pt->rbytes;
            t.rlen = pt->rlen;
            t.rninsns = pt->rninsns;
            t.raddr = pt->raddr;
        }
        return pt_tramp_emit(&t, at, out, cap, NULL);
    }
    /* A short entry reached through padding (pt->pad) replaces fewer than 5 bytes. */
    t.shape = pt->kind == PT_EXIT ? PT_TRAMP_EXIT
        : pt->after.nodes != NULL ? PT_TRAMP_CALL
                                  : PT_TRAMP_BEFORE;
    t.padded = 1;
    t.before = tramp_snip(pt, pt->before.nodes ? &pt->before : pt->kind == PT_EXIT ? &st : pre, 0);
    t.after = tramp_snip(pt, &pt->after, 1);
    return pt_tramp_emit(&t, at, out, cap, &pt->ret_at);
}

static int
point_cmp(const void *a, const void *b)
{
    const point_t *x = a, *y = b;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

/* The candidate whose replaced bytes hold PC after their first, or NULL (cand sorted). */
static const point_t *
cand_inside(const dyn_session_t *s, uint64_t pc)
{
    size_t lo = 0, hi = s->ncand;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->cand[mid].entry < pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* s->cand[lo - 1] is the last entry below PC. */
    if (lo > 0 && pc < s->cand[lo - 1].entry + s->cand[lo - 1].len)
        return &s->cand[lo - 1];
    return NULL;
}

/*
 * A thread stopped inside the bytes a jump would replace is single-stepped until it is
 * out of them (a few instructions); one that cannot be is left, and its point refused.
 */
static void
step_threads_out(dyn_session_t *s)
{
    dyn_thread_info_t *ti;
    size_t nt = 0;

    if (dyn_proc_threads(s->p, NULL, 0, &nt) < 0 || nt == 0)
        return;
    ti = calloc(nt, sizeof(*ti));
    if (ti == NULL || dyn_proc_threads(s->p, ti, nt, &nt) < 0) {
        free(ti);
        return;
    }
    for (size_t i = 0; i < nt; i++) {
        const point_t *pt;
        for (int k = 0; k < 4 && (pt = cand_inside(s, ti[i].pc)) != NULL; k++) {
            size_t n1 = 0;
            if (dyn_proc_leave(
                    s->p, ti[i].tid, pt->entry + 1, pt->entry + pt->len, LEAVE_TRIES)
                < 0)
                break;
            /* Where every thread is now (same order): it may be in another's bytes. */
            if (dyn_proc_threads(s->p, ti, nt, &n1) < 0 || n1 != nt)
                break;
        }
    }
    free(ti);
}

/*
 * The header of the trampoline memory (what dyn clean needs to take it out): into CODE
 * (the image of the whole memory, written later), or straight into the process.
 */
static int
write_header(const dyn_session_t *s, uint8_t *code)
{
    dyn_tramp_hdr_t h;

    memset(&h, 0, sizeof(h));
    memcpy(h.magic, DYN_TRAMP_MAGIC, sizeof(h.magic));
    h.size = s->code_size;
    h.ctr = s->ctr;
    h.ctr_size = s->ctr_size;
    h.flags = s->has_calls ? DYN_HDR_CALLS : 0;
    h.dyn_pid = (uint32_t)getpid();
    if (code != NULL) {
        memcpy(code, &h, sizeof(h));
        return 0;
    }
    return dyn_proc_write(s->p, s->code, &h, sizeof(h));
}

int
dyn_tramp_forget_counters(dyn_proc_t *p, uint64_t code)
{
    static const uint64_t zero[2];

    return dyn_proc_write(p, code + offsetof(dyn_tramp_hdr_t, ctr), zero, sizeof(zero));
}

/*
 * Emit the trampolines of every point of a good row into CODE (packed), filling
 * pt->tramp. A point that cannot be emitted makes its row bad; then 1 (emit again).
 */
static int
emit_all(dyn_session_t *s, uint8_t *code, int *again)
{
    uint64_t at = HDR_LEN;

    *again = 0;
    for (size_t i = 0; i < s->npts; i++) {
        point_t *pt = &s->pts[i];
        int n;
        if (s->rows[pt->row].bad || pt->kind == PT_RSITE)
            continue;
        n = emit_tramp(s, pt, s->code + at, s->ctr + 8 * ROW_WORDS * pt->row, code + at,
            s->code_size - at);
        if (n < 0) {
            QP_CHECK(row_bad(s, pt->row,
                pt->kind == PT_EXIT ? "the code before a ret cannot be relocated"
                                    : "its instructions cannot be relocated to the "
                                      "trampoline"));
            if (!pt->reloc) {
                *again = 1;
                return 0;
            }
            /* (A copy: not emitted again from the start, its bytes are left unused.) */
            continue;
        }
        pt->tramp = s->code + at;
        at += (uint64_t)n;
    }
    s->code_used = at;
    /* Return sites: into their procedure's copy (the relocated point of their row). */
    for (size_t i = 0; i < s->npts; i++) {
        point_t *pt = &s->pts[i];
        if (s->rows[pt->row].bad || pt->kind != PT_RSITE)
            continue;
        /* Its procedure's entry point (s->pts sorted by address). */
        uint64_t e = s->prog->procs[pt->proc].entry + s->bias;
        size_t lo = 0, hi = s->npts;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (s->pts[mid].entry < e)
                lo = mid + 1;
            else
                hi = mid;
        }
        pt->tramp = 0;
        for (; lo < s->npts && s->pts[lo].entry == e && pt->tramp == 0; lo++)
            if (s->pts[lo].reloc && s->pts[lo].row == pt->row && s->pts[lo].map != NULL)
                pt->tramp = pt_proc_at(s->pts[lo].map, s->pts[lo].nmap, pt->entry);
        if (pt->tramp == 0) {
            QP_CHECK(row_bad(s, pt->row, "a call's return site has no place in the copy"));
            *again = 1;
            return 0;
        }
    }
    return 0;
}

/*
 * PT's original bytes back into P: the entry's, then the padding's (CHECK: only what
 * still holds our patch; someone else may have changed it since). 0, or QP_EIO.
 */
static int
unpatch(dyn_proc_t *p, const point_t *pt, int check)
{
    uint8_t mem[JMP_LEN + 1]; /* (patch_len: at most a jump after a kept byte) */
    size_t n = patch_len(pt);
    int rc = 0;

    if (!check || dyn_proc_read(p, pt->entry, mem, n) < 0 || memcmp(mem, pt->patch, n) == 0)
        if (dyn_proc_write(p, pt->entry, pt->orig, n) < 0)
            rc = QP_EIO;
    if (pt->pad != 0
        && (!check || dyn_proc_read(p, pt->pad, mem, JMP_LEN) < 0
            || memcmp(mem, pt->pad_patch, JMP_LEN) == 0)
        && dyn_proc_write(p, pt->pad, pt->pad_orig, JMP_LEN) < 0)
        rc = QP_EIO;
    return rc;
}

/*
 * Is the original code of the procedure of PT (a return site whose jump covers the next
 * instructions) idle: no word of W (NW, sorted: pcs, return addresses and signal frames
 * near the top of each stack) inside it but its entry and its return sites (s->cand
 * sorted), which lead into the copy?
 */
static int
reloc_idle(dyn_session_t *s, const point_t *pt, const uint64_t *w, size_t nw)
{
    const cfg_prog_t *prog = s->prog;
    uint32_t parts[64];
    int nparts = parts_of(s, pt->proc, parts, 64);

    if (nparts < 0)
        return 0;
    for (int k = 0; k < nparts; k++) {
        const cfg_proc_t *p = &prog->procs[parts[k]];
        if (p->nblocks == 0)
            continue;
        uint64_t lo = prog->blocks[p->block].start + s->bias,
                 hi = prog->blocks[p->block + p->nblocks - 1].end + s->bias;
        for (size_t i = cfg_u64_lower_bound(w, nw, lo); i < nw && w[i] < hi; i++) {
            if (w[i] == prog->procs[pt->proc].entry + s->bias)
                continue;
            size_t lo2 = 0, hi2 = s->ncand;
            while (lo2 < hi2) {
                size_t mid = lo2 + (hi2 - lo2) / 2;
                if (s->cand[mid].entry < w[i])
                    lo2 = mid + 1;
                else
                    hi2 = mid;
            }
            if (lo2 < s->ncand && s->cand[lo2].entry == w[i]
                && s->cand[lo2].kind == PT_RSITE && s->cand[lo2].row == pt->row)
                continue;
            return 0;
        }
    }
    return 1;
}

/* Reads of process memory in windows (points are checked in address order: one read
 * per window instead of one per point). */
#define RD_WINDOW 65536
typedef struct rd_cache {
    uint64_t lo, hi; /* what buf holds */
    uint8_t *buf;    /* RD_WINDOW bytes, or NULL: read directly */
} rd_cache_t;

static int
read_cached(dyn_proc_t *p, rd_cache_t *c, uint64_t addr, void *out, size_t len)
{
    if (c->buf != NULL && (addr < c->lo || addr + len > c->hi)) {
        /* A window from ADDR, shorter where the mapping ends (a failed read). */
        c->lo = c->hi = addr;
        for (size_t n = RD_WINDOW; n >= 4096 && c->hi == c->lo; n /= 2)
            if (dyn_proc_read(p, addr, c->buf, n) == 0)
                c->hi = addr + n;
    }
    if (c->buf == NULL || addr < c->lo || addr + len > c->hi)
        return dyn_proc_read(p, addr, out, len);
    memcpy(out, c->buf + (addr - c->lo), len);
    return 0;
}

/* Refuse the rows of points (V, N) whose slot is in the code of a neighbour whose row
 * was refused (dep1): the slot's bytes would run as its original. */
static int
deps_bad(dyn_session_t *s, const point_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].dep1 != 0 && s->rows[v[i].dep1 - 1].bad && !s->rows[v[i].row].bad)
            QP_CHECK(row_bad(s, v[i].row,
                "the neighbour whose code its short jump goes through was refused"));
    return 0;
}

int
dyn_session_install(dyn_session_t *s)
{

    uint64_t *w = NULL, lo = UINT64_MAX, hi = 0, maxend = 0;
    size_t nw = 0, k = 0;
    uint8_t *code = NULL;
    int rc, again;

    if (s == NULL || s->installed || !dyn_proc_is_stopped(s->p))
        return QP_EINVAL;
    qsort(s->cand, s->ncand, sizeof(*s->cand), point_cmp);
    step_threads_out(s);
    QP_CHECK(dyn_proc_words(s->p, STACK_SCAN, &w, &nw));
    s->pts = calloc(s->ncand ? s->ncand : 1, sizeof(*s->pts));
    s->good = calloc(s->nrows ? s->nrows : 1, sizeof(*s->good));
    if (s->pts == NULL || s->good == NULL) {
        free(w);
        return QP_ENOMEM;
    }
    /* A row goes in whole or not at all (a timer needs its entry and every exit). */
    rd_cache_t rd = { 0, 0, malloc(RD_WINDOW) };
    for (size_t i = 0; i < s->ncand; i++) {
        point_t *pt = &s->cand[i];
        uint8_t mem[32];
        const char *why = NULL;
        if (pt->entry < maxend)
            why = "its bytes overlap another point's";
        else if ((pt->entry & 4095) > 4096 - patch_len(pt))
            why = "its first 5 bytes cross a page boundary (the jump could not be "
                  "written "
                  "in one piece)";
        else if (any_in(w, nw, pt->entry + 1, pt->entry + pt->len))
            why = "a thread is inside the bytes to patch (pc or signal frame): try again";
        else if (pt->wide && !reloc_idle(s, pt, w, nw))
            why = "a thread is inside its code (pc or signal frame), where a return site's "
                  "jump covers the next instructions: try again";
        else if (read_cached(s->p, &rd, pt->entry, mem, pt->len) < 0) {
            if (errno == ESRCH) { /* the process ended: nothing to install into */
                free(w);
                free(rd.buf);
                return QP_EIO;
            }
            why = "its code cannot be read";
        } else if (memcmp(mem, pt->orig, pt->len) != 0)
            why = "its code in memory differs from the file (patched already?)";
        else if (pt->pad != 0
            && (dyn_proc_read(s->p, pt->pad, mem, JMP_LEN) < 0
                || memcmp(mem, pt->pad_orig, JMP_LEN) != 0))
            why = "the padding its short jump goes through differs from the file";
        if (pt->entry + pt->len > maxend)
            maxend = pt->entry + pt->len;
        if (why != NULL && (rc = row_bad(s, pt->row, why)) < 0) {
            free(w);
            free(rd.buf);
            return rc;
        }
    }
    free(w);
    free(rd.buf);
    if ((rc = deps_bad(s, s->cand, s->ncand)) < 0)
        return rc;
    /* A caller that takes a refusal for a failure: nothing written (it would only be
     * taken out again, the process stopped meanwhile). */
    if (s->all_or_nothing && s->nref > 0)
        return 0;
    for (size_t i = 0; i < s->ncand; i++) {
        point_t *pt = &s->cand[i];
        if (s->rows[pt->row].bad)
            continue;
        s->pts[k++] = *pt;
        lo = pt->entry < lo ? pt->entry : lo;
        hi = pt->entry + pt->len > hi ? pt->entry + pt->len : hi;
        if (pt->pad != 0) {
            lo = pt->pad < lo ? pt->pad : lo;
            hi = pt->pad + JMP_LEN > hi ? pt->pad + JMP_LEN : hi;
        }
    }
    s->npts = k;
    if (k == 0) {
        s->installed = 1;
        return 0;
    }
    /* Room: a trampoline's moved code and jumps, and its snippets as they compile. */
    {
        uint64_t need = HDR_LEN + k * TRAMP_MAX;
        for (size_t i = 0; i < k; i++) {
            const point_t *pt = &s->pts[i];
            if (pt->reloc)
                need += reloc_size(s, pt); /* the copy */
            for (int a = 0; a < 2; a++) {
                const dyn_snippet_t *sn = a ? &pt->after : &pt->before;
                arch_snip_ctx_t c = snip_ctx(pt, a);
                /* Sized where the trampolines will be (near the point: the variables
                 * are in rel32 reach from there, not from 0); a length that cannot be
                 * known is given room anyway (emitting then says what is wrong). */
                pt_snip_t ps = { sn->nodes, sn->n, sn->root, c };
                int n = pt_snip_size(&ps, pt->entry);
                need += n > 0 ? (uint64_t)n : sn->nodes ? 4096 : 0;
            }
        }
        s->code_size = (need + 4095) & ~(uint64_t)4095;
    }
    rc = dyn_space_ops.alloc_near(
        s->p, lo, hi, s->code_size, ED_PROT_R | ED_PROT_X, &s->code);
    if (rc < 0)
        return rc;
    /* Marked at once: dyn clean finds it by this header if dyn dies from here on. */
    if ((rc = write_header(s, NULL)) < 0)
        goto fail;
    if ((rc = counters_alloc(s, s->nrows)) < 0)
        goto fail;
    code = calloc(1, s->code_size);
    if (code == NULL) {
        rc = QP_ENOMEM;
        goto fail;
    }
    /* Trampolines, packed; a row with a point that cannot be relocated is refused. */
    do {
        if ((rc = emit_all(s, code, &again)) < 0 || (rc = deps_bad(s, s->pts, s->npts)) < 0)
            goto fail;
    } while (again);
    k = 0;
    for (size_t i = 0; i < s->npts; i++)
        if (!s->rows[s->pts[i].row].bad)
            s->pts[k++] = s->pts[i];
    s->npts = k;
    s->ngood = 0;
    for (size_t i = 0; i < s->npts; i++)
        s->rows[s->pts[i].row].bad |= 2; /* has a point: reported */
    for (size_t r = 0; r < s->nrows; r++)
        if (s->rows[r].bad == 2) {
            s->rows[r].bad = 0;
            s->good[s->ngood++] = (uint32_t)r;
        }
    for (size_t i = 0; i < s->npts; i++)
        s->has_calls |= s->pts[i].kind == PT_CALL;
    if ((rc = write_header(s, code)) < 0
        || (rc = dyn_proc_write(s->p, s->code, code, s->code_used)) < 0)
        goto fail;
    /*
     * The patches, last: until here the process is unchanged but for new memory. Only
     * the 5 bytes of the jump are written (the rest of the replaced bytes is never run
     * once it is in), in one write within one page, so that a dyn killed at any moment
     * leaves each point either as it was or with its whole jump.
     */
    for (size_t i = 0; i < s->npts; i++) {
        point_t *pt = &s->pts[i];
        if (pt->pad != 0) {
            /* The jump in the padding first, then the entry's jmp rel8 to it. */
            if ((rc = pt_tramp_patch(pt->pad, pt->tramp, pt->pad_patch, sizeof(pt->pad_patch)))
                    < 0
                || (rc = dyn_proc_write(s->p, pt->pad, pt->pad_patch, JMP_LEN)) < 0) {
                s->npts = i;
                goto undo;
            }
            memcpy(pt->patch, pt->orig, pt->len);
            pt->patch[0] = 0xeb;
            if (!pt->pun) /* (a pun's displacement is its neighbour's first byte) */
                pt->patch[1] = (uint8_t)(int8_t)(int64_t)(pt->pad - (pt->entry + SHORT_LEN));
            rc = dyn_proc_write(s->p, pt->entry, pt->patch, patch_len(pt));
        } else if (pt->keep_first) {
            /* The first byte kept: it prefixes the jump (a REX prefix on jmp rel32). */
            pt->patch[0] = pt->orig[0];
            if ((rc = pt_tramp_patch(pt->entry + 1, pt->tramp, pt->patch + 1,
                     sizeof(pt->patch) - 1)) >= 0)
                rc = dyn_proc_write(s->p, pt->entry, pt->patch, JMP_LEN + 1);
        } else {
            if ((rc = pt_tramp_patch(pt->entry, pt->tramp, pt->patch, sizeof(pt->patch))) >= 0)
                rc = dyn_proc_write(s->p, pt->entry, pt->patch, JMP_LEN);
        }
        if (rc < 0) {
            /* Take back what is in: every patch before this one (and its padding). */
            if (pt->pad != 0)
                dyn_proc_write(s->p, pt->pad, pt->pad_orig, JMP_LEN);
            s->npts = i;
            goto undo;
        }
    }
    free(code);
    s->tsc0 = qp_cycles();
    s->mono0 = qp_mono_ns();
    s->installed = 1;
    return 0;
undo:
    for (size_t i = 0; i < s->npts; i++)
        unpatch(s->p, &s->pts[i], 0);
fail : {
    int saved = errno;
    free(code);
    if (s->ctr != 0)
        dyn_space_free(s->p, s->ctr, s->ctr_size);
    dyn_space_free(s->p, s->code, s->code_size);
    counters_local_free(s);
    s->code = s->ctr = 0;
    s->npts = 0;
    s->ngood = 0;
    s->has_calls = 0;
    errno = saved;
}
    return rc;
}

size_t
dyn_session_npoints(const dyn_session_t *s)
{
    return s ? s->ngood : 0;
}

const char *
dyn_session_point(const dyn_session_t *s, size_t i, uint64_t *addr /*OUT*/)
{
    const row_t *r;

    if (s == NULL || i >= s->ngood)
        return NULL;
    r = &s->rows[s->good[i]];
    if (addr != NULL) {
        *addr = 0;
        for (size_t k = 0; k < s->npts; k++)
            if (s->pts[k].row == s->good[i]) {
                *addr = s->pts[k].entry;
                break;
            }
    }
    return r->name;
}

int
dyn_session_shared(const dyn_session_t *s)
{
    return s != NULL && s->local != NULL;
}

/*****************************************************************************
 * Timers read while running (seed 001, section 3.3): a row's time so far is its total
 * plus, while some thread is inside (depth > 0), the cycles since its start. The words
 * are read without stopping the process; an active row is read again until two reads
 * agree (a thread was starting or stopping it meanwhile). The timer
 * code writes START before DEPTH leaves 0 (arch_emit_timer_start), so an agreed read
 * never has a stale start; between a stop's decrement and its add the value reads low,
 * never high, and the largest value read so far is kept.
 */

#define READ_TRIES 4 /* reads of a changing row before its running part is left out */

/* The row words of every row, into ALL (nrows * ROW_WORDS). */
static int
read_rows(dyn_session_t *s, uint64_t *all)
{
    if (s->local != NULL) {
        for (size_t i = 0; i < s->nrows * ROW_WORDS; i++)
            all[i] = __atomic_load_n(&s->local[i], __ATOMIC_RELAXED);
        return 0;
    }
    return dyn_proc_read(s->p, s->ctr, all, s->nrows * 8 * ROW_WORDS);
}

/* Do rows' timer words (depth, start, total) agree in A and B? */
static int
same_timer(const uint64_t *a, const uint64_t *b)
{
    return a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

/* The cycles timed by row words W at NOW (STABLE: the words were read twice alike). */
static uint64_t
timer_so_far(const uint64_t *w, uint64_t now, int stable)
{
    int64_t depth = (int64_t)w[1];
    uint64_t start = w[2], total = w[3];

    if (!stable || depth <= 0 || start == 0 || now <= start)
        return total;
    return total + (now - start);
}

int
dyn_session_sample(dyn_session_t *s, uint64_t *counts /*OUT*/)
{
    int rc = 0;

    if (s == NULL || (counts == NULL && s->ngood != 0))
        return QP_EINVAL;
    if (s->ngood == 0)
        return 0;
    if (s->local != NULL || (s->ctr != 0 && s->installed)) {
        size_t nw = s->nrows * ROW_WORDS;
        uint64_t *all = malloc(nw * 8), *again = malloc(nw * 8);
        unsigned char *stable = calloc(s->ngood, 1);
        if (all == NULL || again == NULL || stable == NULL)
            rc = QP_ENOMEM;
        if (rc == 0)
            rc = read_rows(s, all);
        /* Only an active timer needs a second read: one read at depth 0 can only miss
         * a stop's add (low), never pair a start with the wrong total. */
        size_t active = 0;
        for (size_t i = 0; rc == 0 && i < s->ngood; i++) {
            const uint64_t *w = all + (size_t)s->good[i] * ROW_WORDS;
            if (s->rows[s->good[i]].timed && (int64_t)w[1] > 0)
                active++;
            else
                stable[i] = 1; /* (its running part is 0 anyway) */
        }
        for (int k = 1; rc == 0 && active > 0 && k < READ_TRIES; k++) {
            size_t left = 0;
            if ((rc = read_rows(s, again)) < 0)
                break;
            for (size_t i = 0; i < s->ngood; i++) {
                size_t w = (size_t)s->good[i] * ROW_WORDS;
                if (stable[i])
                    continue;
                if (same_timer(all + w, again + w))
                    stable[i] = 1;
                else
                    left++;
                memcpy(all + w, again + w, 8 * ROW_WORDS);
            }
            if (left == 0)
                break;
        }
        uint64_t now = qp_cycles(); /* after the reads: not before any start read */
        for (size_t i = 0; rc == 0 && i < s->ngood; i++) {
            const uint64_t *w = all + (size_t)s->good[i] * ROW_WORDS;
            uint64_t t = timer_so_far(w, now, stable[i]);
            s->last[i] = w[0];
            if (t > s->ticks[i])
                s->ticks[i] = t;
        }
        free(all);
        free(again);
        free(stable);
    }
    if (counts != s->last)
        memcpy(counts, s->last, s->ngood * sizeof(*counts));
    return rc;
}

int
dyn_session_wall_ns(dyn_session_t *s, int64_t *ns /*OUT*/)
{
    uint64_t t, m;
    double per;

    if (s == NULL || (ns == NULL && s->ngood != 0))
        return QP_EINVAL;
    /* Calibrate the cycle counter against CLOCK_MONOTONIC over the session (>= 20 ms). */
    while ((m = qp_mono_ns()) - s->mono0 < 20000000u) {
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
    t = qp_cycles();
    per = t > s->tsc0 ? (double)(m - s->mono0) / (double)(t - s->tsc0) : 0.0;
    for (size_t i = 0; i < s->ngood; i++)
        ns[i]
            = s->rows[s->good[i]].timed ? (int64_t)((double)s->ticks[i] * per + 0.5) : -1;
    return 0;
}

/*****************************************************************************
 * Removing
 */

static int
pc_map_cmp(const void *a, const void *b)
{
    const dyn_pc_map_t *x = a, *y = b;
    return x->from < y->from ? -1 : x->from > y->from;
}

/* Every instruction of the installed copies, copy to original, sorted (malloc'd: free
 * it); NULL when there is none or no memory. */
static dyn_pc_map_t *
copies_map(const dyn_session_t *s, size_t *n)
{
    size_t total = 0, k = 0;
    for (size_t i = 0; i < s->npts; i++)
        total += s->pts[i].map != NULL ? s->pts[i].nmap : 0;
    dyn_pc_map_t *v = total ? malloc(total * sizeof(*v)) : NULL;
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < s->npts; i++)
        for (size_t j = 0; s->pts[i].map != NULL && j < s->pts[i].nmap; j++)
            v[k++] = (dyn_pc_map_t) { s->pts[i].map[j].copy, s->pts[i].map[j].orig };
    qsort(v, k, sizeof(*v), pc_map_cmp);
    *n = k;
    return v;
}

int
dyn_session_remove(dyn_session_t *s, int *leaked /*OUT*/)
{
    dyn_thread_info_t *ti = NULL;
    uint64_t *w = NULL;
    size_t nt = 0, nw = 0;
    int rc = 0, keep = 0;

    if (leaked != NULL)
        *leaked = 0;
    if (s == NULL || !dyn_proc_is_stopped(s->p))
        return QP_EINVAL;
    if (!s->installed || s->code == 0) {
        s->installed = 0;
        return 0;
    }
    /*
     * Two rounds: every point but the exits back first, and the threads inside a
     * trampoline let out (no calls, no loops there; inside the copy of a procedure,
     * loops there, moved to the same instruction of the original); then the exits, and
     * out again. A thread let out runs a moment on its own: one that left an entry's
     * trampoline after its timer started may run to its procedure's return meanwhile,
     * and must find the exit's stop there (else the timer never stops).
     */
    dyn_pc_map_t *pcs = NULL;
    size_t npcs = 0;
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < s->npts; i++)
            if ((s->pts[i].kind == PT_EXIT) == (round == 1)
                && unpatch(s->p, &s->pts[i], 1) < 0 && rc == 0)
                rc = QP_EIO;
        nt = 0;
        if (dyn_proc_threads(s->p, NULL, 0, &nt) < 0) {
            keep = 1;
            continue;
        }
        if (nt == 0)
            continue;
        free(ti);
        if ((ti = calloc(nt, sizeof(*ti))) == NULL || dyn_proc_threads(s->p, ti, nt, &nt) < 0) {
            keep = 1;
            continue;
        }
        /*
         * A thread that cannot leave in the first round is tried again in the second,
         * and only that one keeps the code: one in an exit's trampoline whose tail loops
         * back to its own patched block (a leaf loop falling into a short ret) goes round
         * through that patch until the exits are back.
         */
        for (size_t i = 0; i < nt; i++) {
            if (ti[i].pc < s->code || ti[i].pc >= s->code + s->code_size)
                continue;
            if (pcs == NULL && (pcs = copies_map(s, &npcs)) == NULL)
                npcs = 0;
            if (dyn_proc_leave_map(s->p, ti[i].tid, s->code, s->code + s->code_size, pcs,
                    npcs, round == 0 ? LEAVE_TRIES / 10 : LEAVE_TRIES)
                    < 0
                && round == 1)
                keep = 1;
        }
    }
    free(pcs);
    free(ti);
    ti = NULL;
    /*
     * A signal frame or return address pointing into the trampolines keeps them; the
     * return address of a moved call only needs its jmp back (kept anyway), not the
     * counters.
     */
    if (!keep && dyn_proc_words(s->p, STACK_SCAN, &w, &nw) == 0) {
        size_t i = cfg_u64_lower_bound(w, nw, s->code);
        for (; i < nw && w[i] < s->code + s->code_size && !keep; i++) {
            keep = 1;
            for (size_t k = 0; k < s->npts && keep; k++)
                if (s->pts[k].kind == PT_CALL && s->pts[k].ret_at == w[i])
                    keep = 0;
        }
    } else {
        keep = 1;
    }
    free(w);
    dyn_session_sample(s, s->last);
    /*
     * Call-site trampolines: a callee still running (on any stack, also one not scanned:
     * a coroutine's, or an address saved in a jmp_buf) returns into its jmp back to the
     * restored code, so that code stays mapped. Nothing there reads the counters.
     */
    if (dyn_session_reroute_returns(s, NULL) < 0 && rc == 0)
        rc = QP_EIO;
    if (!keep && !s->has_calls)
        dyn_space_free(s->p, s->code, s->code_size);
    if (!keep && dyn_space_free(s->p, s->ctr, s->ctr_size) == 0 && s->has_calls)
        dyn_tramp_forget_counters(s->p, s->code);
    if (leaked != NULL)
        *leaked = keep ? 1 : s->has_calls ? 2 : 0;
    s->installed = 0;
    return rc;
}

/* Does PT's trampoline run snippets after its call (the return address it pushes,
 * ret_at, leads into them)? */
static int
runs_after_call(const point_t *pt)
{
    return pt->kind == PT_CALL && pt->after.nodes != NULL && !pt->call_len && !pt->reloc
           && pt->ret_at != 0 && pt->tramp != 0;
}

int
dyn_session_reroute_returns(dyn_session_t *s, const dyn_session_t *next)
{
    if (s == NULL || !dyn_proc_is_stopped(s->p))
        return QP_EINVAL;
    int rc = 0;
    for (size_t i = 0; i < s->npts; i++) {
        const point_t *pt = &s->pts[i];
        if (!runs_after_call(pt))
            continue;
        uint64_t to = pt->entry + pt->len - pt->spill; /* after the call, in place */
        for (size_t k = 0; next != NULL && next->installed && k < next->npts; k++)
            if (runs_after_call(&next->pts[k]) && next->pts[k].entry == pt->entry)
                to = next->pts[k].ret_at;
        uint8_t jmp[JMP_LEN];
        if (pt_tramp_patch(pt->ret_at, to, jmp, sizeof(jmp)) < 0
            || dyn_proc_write(s->p, pt->ret_at, jmp, JMP_LEN) < 0)
            rc = QP_EIO;
    }
    return rc;
}

int
dyn_session_drop(dyn_session_t *s, int gone_all)
{
    dyn_thread_info_t *ti = NULL;
    size_t nt = 0;
    int keep = 0;

    if (s == NULL || (!gone_all && !dyn_proc_is_stopped(s->p)))
        return QP_EINVAL;
    if (!s->installed || s->code == 0) {
        s->installed = 0;
        return 0;
    }
    dyn_session_sample(s, s->last); /* (shared: read here; else the counters in it) */
    if (gone_all) {
        s->installed = 0;
        return 0;
    }
    /* The module is gone: nothing jumps here any more but a thread already inside. */
    if (dyn_proc_threads(s->p, NULL, 0, &nt) == 0 && nt > 0
        && (ti = calloc(nt, sizeof(*ti))) != NULL
        && dyn_proc_threads(s->p, ti, nt, &nt) == 0) {
        for (size_t i = 0; i < nt; i++)
            keep |= ti[i].pc >= s->code && ti[i].pc < s->code + s->code_size;
    } else {
        keep = 1;
    }
    free(ti);
    if (!keep) {
        dyn_space_free(s->p, s->code, s->code_size);
        dyn_space_free(s->p, s->ctr, s->ctr_size);
    }
    s->installed = 0;
    return 0;
}

int
dyn_session_counts_copies(const dyn_session_t *s)
{
    return s != NULL && (!s->installed || s->local != NULL);
}

int
dyn_session_unpatch_copy(const dyn_session_t *s, dyn_proc_t *child)
{
    int rc = 0;

    if (s == NULL || child == NULL || !dyn_proc_is_stopped(child))
        return QP_EINVAL;
    if (!s->installed)
        return 0;
    for (size_t i = 0; i < s->npts; i++)
        if (unpatch(child, &s->pts[i], 1) < 0 && rc == 0)
            rc = QP_EIO;
    return rc;
}

size_t
dyn_session_nrefused(const dyn_session_t *s)
{
    return s ? s->nref : 0;
}

const char *
dyn_session_refusal(const dyn_session_t *s, size_t i, const char **why /*OUT*/)
{
    if (s == NULL || i >= s->nref)
        return NULL;
    if (why != NULL)
        *why = s->ref[i].why;
    return s->ref[i].name;
}

uint32_t
dyn_session_refusal_row(const dyn_session_t *s, size_t i)
{
    return s != NULL && i < s->nref ? s->ref[i].row : UINT32_MAX;
}

void
dyn_session_destroy(dyn_session_t *s)
{
    if (s == NULL)
        return;
    counters_local_free(s);
    free(s->last);
    free(s->ticks);
    free(s->good);
    free(s->rows);
    free(s->frags);
    free(s->pads);
    for (size_t i = 0; i < s->nstrs; i++)
        free(s->strs[i]);
    free(s->strs);
    for (size_t i = 0; s->pts != NULL && i < s->npts; i++)
        free(s->pts[i].map);
    free(s->pts);
    free(s->foreign);
    free(s->cand);
    free(s->ref);
    free(s->chosen);
    free(s);
}
