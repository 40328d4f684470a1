/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * xcheck_opcodes: an independent cross-check of arch_decode() (Zydis) against libopcodes
 * (the disassembler behind objdump). For every instruction it compares the length and,
 * for direct jumps, conditional jumps and calls, the target; for rip-relative operands
 * it also compares the operand address (objdump's "# 0x..." comment).
 *
 *   xcheck_opcodes [--sweep] [--list N] FILE...
 *
 * Default (CFG) mode: the instructions are those of the blocks cfg_prog_build() finds.
 * --sweep: a linear sweep over every code section read with BFD directly, resynchronising
 * after a disagreement at the next boundary both decoders agree on. Sweep mode walks
 * into data and padding, so it reports but always exits 0; it exists for developing
 * arch/ before and independently of cfg/.
 *
 * Prints "xcheck: FILE: N instructions, M mismatches (...)" per file and the first
 * mismatches. Exit status: 0 all agree, 1 a mismatch (CFG mode), 2 a file could not be
 * read.
 */
#include "config.h" /* before bfd.h, which insists on PACKAGE */

#include <bfd.h>
#include <dis-asm.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "cfg/cfg.h"

/*****************************************************************************
 * libopcodes, one instruction at a time
 */

/* What libopcodes printed for one instruction. */
typedef struct od_insn {
    char text[512]; /* the instruction text */
    size_t tlen; /* characters in text */
    int in_comment; /* a "# ..." comment has started */
    uint64_t target; /* the last address printed as an operand (branch target) */
    int has_target; /* target is valid */
    uint64_t comment_addr; /* the address printed in the comment (rip-relative operand) */
    int has_comment_addr; /* comment_addr is valid */
} od_insn_t;

typedef struct od {
    disassembler_ftype print_insn; /* the x86-64 printer */
    struct disassemble_info info; /* its state; stream = the od_insn_t being filled */
    od_insn_t cur; /* the last instruction */
} od_t;

static void
od_append(od_insn_t* oi, const char* fmt, va_list ap)
{
    int n;

    if (oi->tlen >= sizeof(oi->text) - 1)
        return;
    n = vsnprintf(oi->text + oi->tlen, sizeof(oi->text) - oi->tlen, fmt, ap);
    if (n > 0)
        oi->tlen += (size_t)n;
    if (oi->tlen > sizeof(oi->text) - 1)
        oi->tlen = sizeof(oi->text) - 1;
}

static int
od_fprintf(void* stream, const char* fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    od_append(stream, fmt, ap);
    va_end(ap);
    return 0;
}

static int
od_fprintf_styled(void* stream, enum disassembler_style style, const char* fmt, ...)
{
    od_insn_t* oi = stream;
    va_list ap;

    if (style == dis_style_comment_start)
        oi->in_comment = 1;
    va_start(ap, fmt);
    od_append(oi, fmt, ap);
    va_end(ap);
    return 0;
}

/*
 * libopcodes hands every address it prints (branch targets, and the rip-relative
 * operand address in the trailing comment) to this callback instead of formatting it
 * itself, so targets are taken as numbers, not parsed from the text.
 */
static void
od_print_address(bfd_vma addr, struct disassemble_info* info)
{
    od_insn_t* oi = info->stream;

    if (oi->in_comment) {
        oi->comment_addr = addr;
        oi->has_comment_addr = 1;
    } else {
        oi->target = addr;
        oi->has_target = 1;
    }
    od_fprintf(oi, "%#" PRIx64, (uint64_t)addr);
}

/* A memory error (an instruction running off the buffer) must not print anything. */
static void
od_memory_error(int status, bfd_vma addr, struct disassemble_info* info)
{
    (void)status;
    (void)addr;
    (void)info;
}

static int
od_init(od_t* od)
{
    memset(od, 0, sizeof(*od));
    init_disassemble_info(&od->info, &od->cur, od_fprintf, od_fprintf_styled);
    od->info.arch = bfd_arch_i386;
    od->info.mach = bfd_mach_x86_64;
    /*
     * Model the same CPU as arch/: Intel64 semantics, where a 0x66 prefix does not
     * shorten a near jmp/jcc/call in 64-bit mode. libopcodes defaults to AMD64 semantics
     * (66 e9 = jmpw rel16), which no compiler emits and which would truncate rip.
     */
    od->info.disassembler_options = "intel64";
    od->info.print_address_func = od_print_address;
    od->info.memory_error_func = od_memory_error;
    od->print_insn = disassembler(bfd_arch_i386, false, bfd_mach_x86_64, NULL);
    if (od->print_insn == NULL)
        return -1;
    disassemble_init_for_target(&od->info);
    return 0;
}

/* Disassemble the instruction at BUF (N bytes readable), running at VMA: its length or
 * -1. */
static int
od_decode(od_t* od, const uint8_t* buf, size_t n, uint64_t vma)
{
    memset(&od->cur, 0, sizeof(od->cur));
    od->info.buffer = (bfd_byte*)buf;
    od->info.buffer_vma = vma;
    od->info.buffer_length = n;
    od->info.stream = &od->cur;
    return od->print_insn(vma, &od->info);
}

static int
od_is_bad(const od_insn_t* oi)
{
    return strstr(oi->text, "(bad)") != NULL;
}

/*
 * True when the text is only prefix names. libopcodes prints a prefix it cannot attach
 * to the following instruction (a REX prefix that is not last, a segment or operand-size
 * prefix repeated past what it folds, ...) as an instruction of its own, one byte long;
 * Zydis, like the CPU, treats the whole run as one instruction.
 */
static int
od_is_prefix_only(const od_insn_t* oi)
{
    static const char* const prefixes[] = {
        "data16",
        "data32",
        "addr16",
        "addr32",
        "cs",
        "ds",
        "es",
        "ss",
        "fs",
        "gs",
        "lock",
        "rep",
        "repz",
        "repnz",
        "repe",
        "repne",
        "bnd",
        "notrack",
        "xacquire",
        "xrelease",
        "{vex}",
        "{vex3}",
        "{evex}",
    };
    char buf[sizeof(oi->text)];
    char *tok, *save = NULL;
    int ntok = 0;
    size_t i;

    memcpy(buf, oi->text, sizeof(buf));
    for (tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        int ok = strncmp(tok, "rex", 3) == 0;

        for (i = 0; !ok && i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
            ok = strcmp(tok, prefixes[i]) == 0;
        if (!ok)
            return 0;
        ntok++;
    }
    return ntok > 0;
}

/* Legacy and REX prefixes: how far the opcode is into P (at most N). */
static size_t
xc_skip_prefixes(const uint8_t* p, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        switch (p[i]) {
        case 0x26:
        case 0x2e:
        case 0x36:
        case 0x3e:
        case 0x64:
        case 0x65:
        case 0x66:
        case 0x67:
        case 0xf0:
        case 0xf2:
        case 0xf3: continue;
        default:
            if ((p[i] & 0xf0) == 0x40)
                continue;
            return i;
        }
    }
    return n;
}

/*
 * The control-flow class libopcodes' text implies, in arch_kind_t terms, from the
 * mnemonic after any prefixes; -1 when the text says nothing definite. P and LEN are the
 * instruction's bytes, needed only to tell the nop 90 from other "xchg %ax,%ax".
 */
static int
od_kind(const od_insn_t* oi, const uint8_t* p, size_t len)
{
    static const struct {
        const char* mnemonic;
        int kind;
    } names[] = {
        { "ret", ARCH_KIND_RET },
        { "lret", ARCH_KIND_RET },
        { "iret", ARCH_KIND_RET },
        { "iretq", ARCH_KIND_RET },
        { "iretw", ARCH_KIND_RET },
        { "sysret", ARCH_KIND_RET },
        { "sysretq", ARCH_KIND_RET },
        { "sysexit", ARCH_KIND_RET },
        { "sysexitq", ARCH_KIND_RET },
        { "rsm", ARCH_KIND_RET },
        { "ljmp", ARCH_KIND_JMP_IND },
        { "lcall", ARCH_KIND_CALL_IND },
        { "loop", ARCH_KIND_JCC },
        { "loope", ARCH_KIND_JCC },
        { "loopne", ARCH_KIND_JCC },
        { "jrcxz", ARCH_KIND_JCC },
        { "jecxz", ARCH_KIND_JCC },
        { "xbegin", ARCH_KIND_JCC },
        { "syscall", ARCH_KIND_SYSCALL },
        { "sysenter", ARCH_KIND_SYSCALL },
        { "int", ARCH_KIND_SYSCALL },
        { "int1", ARCH_KIND_SYSCALL },
        { "icebp", ARCH_KIND_SYSCALL },
        { "int3", ARCH_KIND_HALT },
        { "hlt", ARCH_KIND_HALT },
        { "ud0", ARCH_KIND_HALT },
        { "ud1", ARCH_KIND_HALT },
        { "ud2", ARCH_KIND_HALT },
        { "ud1l", ARCH_KIND_HALT },
        { "ud0l", ARCH_KIND_HALT },
        { "ud1w", ARCH_KIND_HALT },
        { "ud0w", ARCH_KIND_HALT },
        { "ud1q", ARCH_KIND_HALT },
        { "ud0q", ARCH_KIND_HALT },
        { "endbr64", ARCH_KIND_ENDBR },
        { "endbr32", ARCH_KIND_ENDBR },
        { "nop", ARCH_KIND_NOP },
        { "nopw", ARCH_KIND_NOP },
        { "nopl", ARCH_KIND_NOP },
        { "nopq", ARCH_KIND_NOP },
    };
    char buf[sizeof(oi->text)];
    char *tok, *save = NULL, *comma;
    size_t i, n;

    memcpy(buf, oi->text, sizeof(buf));
    for (tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        od_insn_t one;

        memset(&one, 0, sizeof(one));
        snprintf(one.text, sizeof(one.text), "%s", tok);
        if (!od_is_prefix_only(&one))
            break;
    }
    if (tok == NULL)
        return -1;
    comma = strchr(tok, ','); /* branch hints: "loop,pt", "je,pn" */
    if (comma != NULL)
        *comma = '\0';
    if (strcmp(tok, "jmp") == 0 || strcmp(tok, "call") == 0) {
        char* rest = strtok_r(NULL, " \t", &save);
        int ind = rest != NULL && rest[0] == '*';

        if (tok[0] == 'j')
            return ind ? ARCH_KIND_JMP_IND : ARCH_KIND_JMP;
        return ind ? ARCH_KIND_CALL_IND : ARCH_KIND_CALL;
    }
    if (strcmp(tok, "xchg") == 0) {
        /*
         * 66 90 and rex.W 90 print as "xchg %ax,%ax", "xchg %rax,%rax": still nops.
         * (87 c0 "xchg %eax,%eax" is not: it zero-extends rax; 41 90 is xchg with r8.)
         */
        size_t op = xc_skip_prefixes(p, len);
        char* ops = strtok_r(NULL, " \t", &save);
        char* sep = ops != NULL ? strchr(ops, ',') : NULL;

        if (op + 1 == len && p[op] == 0x90 && sep != NULL) {
            *sep = '\0';
            if (strcmp(ops, sep + 1) == 0)
                return ARCH_KIND_NOP;
        }
        return ARCH_KIND_SEQ;
    }
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(tok, names[i].mnemonic) == 0)
            return names[i].kind;
    /* An operand-size suffix: "lretq", "loopl", "sysretl", "ljmpq". */
    n = strlen(tok);
    if (n > 2 && strchr("wlq", tok[n - 1]) != NULL) {
        tok[n - 1] = '\0';
        for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
            if (strcmp(tok, names[i].mnemonic) == 0)
                return names[i].kind;
    }
    if (tok[0] == 'j') /* jcc: ja, jae, ..., with or without a ,pt/,pn hint */
        return ARCH_KIND_JCC;
    return ARCH_KIND_SEQ;
}

/*****************************************************************************
 * Known differences between the decoders
 */

/*
 * FWAIT (9b) is an instruction of its own for the CPU and for Zydis. libopcodes prints
 * it together with the x87 instruction after it ("fstcw" = fwait; fnstcw), or with
 * garbage as "(bad)". Where Zydis's instruction is a (prefixed) fwait, both decoders
 * agree on it alone and the comparison goes on at the next byte.
 */
static int
xc_is_fwait(const uint8_t* p, size_t len)
{
    size_t op = xc_skip_prefixes(p, len);

    return op + 1 == len && p[op] == 0x9b;
}

/*
 * Reserved register forms that CPUs run as aliases and Zydis decodes, while libopcodes
 * prints "(bad)". No compiler emits them; they are counted apart, not as mismatches:
 * - x87: fstp1 d9 d8+i, fcom2 dc d0+i, fcomp3 dc d8+i, fxch4 dd c8+i, fcomp5 de d0+i,
 *   fxch7 df c8+i, fstp8 df d0+i, fstp9 df d8+i;
 * - fences with nonzero r/m bits: 0f ae e9..ef (lfence), f1..f7 (mfence), f9..ff
 *   (sfence), without a 66/f2/f3 prefix (those select other instructions);
 * - 0f 0d with a register operand: a reserved nop for Zydis, "prefetch (bad)" for
 *   libopcodes.
 */
static int
xc_is_alias(const uint8_t* p, size_t len)
{
    size_t op = xc_skip_prefixes(p, len);
    uint8_t m;

    if (op + 2 == len) {
        m = p[op + 1];
        switch (p[op]) {
        case 0xd9: return m >= 0xd8 && m <= 0xdf;
        case 0xdc: return m >= 0xd0 && m <= 0xdf;
        case 0xdd: return m >= 0xc8 && m <= 0xcf;
        case 0xde: return m >= 0xd0 && m <= 0xd7;
        case 0xdf: return m >= 0xc8 && m <= 0xdf;
        default: return 0;
        }
    }
    if (op + 3 == len && p[op] == 0x0f && p[op + 2] >= 0xc0) {
        m = p[op + 2];
        if (p[op + 1] == 0x0d)
            return 1;
        if (p[op + 1] == 0xae && (m & 7) != 0 && m >= 0xe8 && memchr(p, 0x66, op) == NULL
            && memchr(p, 0xf2, op) == NULL && memchr(p, 0xf3, op) == NULL)
            return 1;
    }
    return 0;
}

/*
 * A REX prefix followed by another prefix is ignored by the CPU (only a REX right
 * before the opcode counts). libopcodes then gets operand and address sizes wrong in
 * some cases (66 45 41 2d: imm32 instead of imm16; 67 47 64 a3: moffs64 instead of
 * moffs32) while Zydis follows the rule. Compilers never emit such prefix runs; a
 * length difference on one is counted apart.
 */
static int
xc_has_stray_rex(const uint8_t* p, size_t len)
{
    size_t op = xc_skip_prefixes(p, len), i;

    for (i = 0; i + 1 < op; i++)
        if ((p[i] & 0xf0) == 0x40)
            return 1;
    return 0;
}

/*****************************************************************************
 * Comparison
 */

enum { XC_LIST_DEFAULT = 10 };

static const char* const xc_kind_names[] = {
    "seq",
    "jmp",
    "jcc",
    "call",
    "jmp_ind",
    "call_ind",
    "ret",
    "syscall",
    "halt",
    "endbr",
    "nop",
};

typedef struct xc_stats {
    uint64_t ninsns; /* instructions compared */
    uint64_t nmismatch; /* genuine disagreements */
    uint64_t nrefused; /* libopcodes decodes, Zydis refuses (reported, not mismatches) */
    uint64_t nbad_both; /* both refuse (sweep mode only: data in code sections) */
    uint64_t nprefix_split; /* libopcodes split a prefix off; lengths agree when folded */
    uint64_t nfwait; /* libopcodes merged an fwait into the next instruction */
    uint64_t nalias; /* reserved alias forms only Zydis names (xc_is_alias) */
    uint64_t nstray_rex; /* length differences after an ignored REX prefix */
    uint64_t ntargets; /* direct targets compared */
    uint64_t nriprel; /* rip-relative operand addresses compared */
} xc_stats_t;

typedef struct xc {
    od_t od; /* libopcodes */
    const char* path; /* file being checked */
    int sweep; /* sweep mode */
    int list; /* how many mismatches to list per file */
    xc_stats_t st; /* counts for this file */
} xc_t;

static void
xc_bytes(char* out, size_t outsz, const uint8_t* p, size_t n)
{
    size_t i, o = 0;

    out[0] = '\0';
    for (i = 0; i < n && i < ARCH_MAX_INSN && o + 4 < outsz; i++)
        o += (size_t)snprintf(out + o, outsz - o, "%s%02x", i ? " " : "", p[i]);
}

static void
xc_report(xc_t* xc, const char* what, uint64_t addr, const uint8_t* p, size_t n,
    const char* fmt, ...)
{
    char bytes[64];
    va_list ap;

    if (strcmp(what, "refused") == 0) {
        if (xc->st.nrefused > (uint64_t)xc->list)
            return;
    } else if (xc->st.nmismatch > (uint64_t)xc->list)
        return;
    xc_bytes(bytes, sizeof(bytes), p, n);
    printf("  %s %#" PRIx64 ": [%s] ", what, addr, bytes);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(" | objdump: %s\n", xc->od.cur.text);
}

/*
 * Compare the instruction at P (AVAIL bytes readable) at ADDR. Returns the number of
 * bytes both decoders agree it has, or 0 when they disagree (the caller resynchronises
 * or stops) or when both refuse the bytes (*BOTH_BAD is set then).
 */
static size_t
xc_compare(xc_t* xc, const uint8_t* p, size_t avail, uint64_t addr, int* both_bad)
{
    arch_insn_t in;
    int zr, ol, okind;
    size_t total;

    *both_bad = 0;
    zr = arch_decode(p, avail, addr, &in);
    ol = od_decode(&xc->od, p, avail, addr);

    if (zr < 0) {
        if (ol <= 0 || od_is_bad(&xc->od.cur)) {
            *both_bad = 1;
            return 0;
        }
        /*
         * libopcodes accepts some encodings the CPU rejects (e.g. a lock prefix on an
         * instruction that does not allow it, or opcodes removed in 64-bit mode printed
         * with their old meaning). Counted and listed, not mismatches: Zydis is the
         * stricter and, for these, the correct one.
         */
        xc->st.nrefused++;
        xc_report(xc, "refused", addr, p, (size_t)ol, "zydis: %s", qp_strerror(zr));
        return (size_t)ol;
    }
    xc->st.ninsns++;
    if (xc_is_fwait(p, in.len)
        && (ol != (int)in.len || strstr(xc->od.cur.text, "fwait") == NULL)) {
        xc->st.nfwait++;
        return in.len;
    }
    if (ol > 0 && od_is_bad(&xc->od.cur) && xc_is_alias(p, in.len)) {
        xc->st.nalias++;
        return in.len;
    }
    if (ol <= 0 || od_is_bad(&xc->od.cur)) {
        xc->st.nmismatch++;
        xc_report(
            xc, "MISMATCH", addr, p, in.len, "zydis: %u bytes, objdump refuses", in.len);
        return 0;
    }

    total = (size_t)ol;
    if (total < in.len && od_is_prefix_only(&xc->od.cur)) {
        /* Fold libopcodes' stray prefixes into the instruction that follows them. */
        int nsplit = 0;

        while (total < in.len && od_is_prefix_only(&xc->od.cur)) {
            ol = od_decode(&xc->od, p + total, avail - total, addr + total);
            if (ol <= 0)
                break;
            total += (size_t)ol;
            nsplit++;
        }
        if (total == in.len && !od_is_bad(&xc->od.cur)) {
            xc->st.nprefix_split++;
            return total; /* the target check below needs an unsplit view: skip it */
        }
        (void)nsplit;
    }
    if (total != in.len && xc_has_stray_rex(p, in.len)) {
        xc->st.nstray_rex++;
        return 0; /* resynchronise (sweep) or end the block walk (CFG mode) */
    }
    if (total != in.len) {
        xc->st.nmismatch++;
        xc_report(xc, "MISMATCH", addr, p, in.len > total ? in.len : total,
            "length: zydis %u, objdump %zu", in.len, total);
        return 0;
    }

    okind = od_kind(&xc->od.cur, p, in.len);
    if (okind != (int)in.kind) {
        xc->st.nmismatch++;
        xc_report(xc, "MISMATCH", addr, p, in.len, "kind: zydis %s, objdump %s",
            xc_kind_names[in.kind], okind < 0 ? "?" : xc_kind_names[okind]);
        return in.len;
    }
    if (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC
        || in.kind == ARCH_KIND_CALL) {
        xc->st.ntargets++;
        if (!xc->od.cur.has_target || xc->od.cur.target != in.target) {
            xc->st.nmismatch++;
            xc_report(
                xc, "MISMATCH", addr, p, in.len, "target: zydis %#" PRIx64, in.target);
        }
    } else if (in.flags & ARCH_F_RIPREL) {
        uint64_t want = xc->od.cur.comment_addr;

        /*
         * With an address-size prefix (eip-relative), libopcodes prints the 32-bit sum
         * sign-extended; the CPU (and arch/) zero-extend it.
         */
        if (in.target <= 0xffffffffu && xc_skip_prefixes(p, in.len) > 0
            && memchr(p, 0x67, xc_skip_prefixes(p, in.len)) != NULL)
            want &= 0xffffffffu;
        xc->st.nriprel++;
        if (!xc->od.cur.has_comment_addr || want != in.target) {
            xc->st.nmismatch++;
            xc_report(xc, "MISMATCH", addr, p, in.len,
                "rip-relative address: zydis %#" PRIx64, in.target);
        }
    }
    return in.len;
}

/*
 * After a disagreement at OFF: walk each decoder along its own boundaries until both
 * reach the same offset. Returns that offset (or N).
 */
static size_t
xc_resync(xc_t* xc, const uint8_t* buf, size_t n, uint64_t vma, size_t off)
{
    size_t za = off, ob = off;
    arch_insn_t in;
    int ol;

    do {
        if (za <= ob) {
            za += arch_decode(buf + za, n - za, vma + za, &in) == 0 ? in.len : 1;
        } else {
            ol = od_decode(&xc->od, buf + ob, n - ob, vma + ob);
            ob += ol > 0 ? (size_t)ol : 1;
        }
    } while (za != ob && za < n && ob < n);
    return za > ob ? za : ob;
}

/* Linear sweep over BUF (N bytes at VMA). */
static void
xc_sweep_range(xc_t* xc, const uint8_t* buf, size_t n, uint64_t vma)
{
    size_t off = 0, k;
    int both_bad;

    while (off < n) {
        k = xc_compare(xc, buf + off, n - off, vma + off, &both_bad);
        if (k > 0)
            off += k;
        else if (both_bad) {
            xc->st.nbad_both++;
            off++;
        } else
            off = xc_resync(xc, buf, n, vma, off);
    }
}

static int
xc_file_sweep(xc_t* xc)
{
    bfd* abfd;
    asection* sec;
    int rc = 0;

    abfd = bfd_openr(xc->path, NULL);
    if (abfd == NULL)
        return -1;
    if (!bfd_check_format(abfd, bfd_object) || bfd_get_arch(abfd) != bfd_arch_i386
        || !(bfd_get_mach(abfd) & bfd_mach_x86_64)) {
        bfd_close(abfd);
        return -1;
    }
    for (sec = abfd->sections; sec != NULL; sec = sec->next) {
        flagword f = bfd_section_flags(sec);
        bfd_size_type size = bfd_section_size(sec);
        uint8_t* buf;

        if (!(f & SEC_CODE) || !(f & SEC_HAS_CONTENTS) || size == 0)
            continue;
        buf = malloc(size);
        if (buf == NULL || !bfd_get_section_contents(abfd, sec, buf, 0, size)) {
            free(buf);
            rc = -1;
            break;
        }
        xc_sweep_range(xc, buf, size, bfd_section_vma(sec));
        free(buf);
    }
    bfd_close(abfd);
    return rc;
}

static int
xc_block_cmp(const void* a, const void* b)
{
    const cfg_block_t* x = *(const cfg_block_t* const*)a;
    const cfg_block_t* y = *(const cfg_block_t* const*)b;

    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->end < y->end ? 1 : x->end > y->end ? -1 : 0;
}

/* CFG mode: the instructions of every block, each address once. */
static int
xc_file_cfg(xc_t* xc)
{
    cfg_image_t* img = NULL;
    cfg_prog_t* prog = NULL;
    const cfg_block_t** order;
    uint64_t done_to = 0;
    uint32_t i;
    int rc;

    rc = cfg_image_open_bfd(xc->path, &img);
    if (rc < 0) {
        fprintf(stderr, "xcheck_opcodes: %s: %s\n", xc->path, qp_strerror(rc));
        return -1;
    }
    rc = cfg_prog_build(img, NULL, &prog);
    if (rc < 0) {
        fprintf(stderr, "xcheck_opcodes: %s: %s\n", xc->path, qp_strerror(rc));
        cfg_image_destroy(img);
        return -1;
    }
    /* Blocks are grouped by procedure; shared code may appear twice. Walk by address. */
    order = malloc((prog->nblocks + 1) * sizeof(*order));
    if (order == NULL) {
        cfg_prog_destroy(prog);
        cfg_image_destroy(img);
        return -1;
    }
    for (i = 0; i < prog->nblocks; i++)
        order[i] = &prog->blocks[i];
    qsort(order, prog->nblocks, sizeof(*order), xc_block_cmp);

    for (i = 0; i < prog->nblocks; i++) {
        const cfg_block_t* b = order[i];
        uint64_t a = b->start;

        if (b->end <= done_to)
            continue;
        while (a < b->end) {
            size_t avail, k;
            const uint8_t* p = cfg_image_ptr(img, a, &avail);
            int both_bad;

            if (p == NULL) {
                xc->st.nmismatch++;
                printf("  MISMATCH %#" PRIx64 ": block [%#" PRIx64 ", %#" PRIx64
                       ") has no bytes\n",
                    a, b->start, b->end);
                break;
            }
            k = xc_compare(xc, p, avail, a, &both_bad);
            if (k == 0) {
                if (both_bad) { /* a block holding bytes neither decoder accepts */
                    xc->st.nmismatch++;
                    printf("  MISMATCH %#" PRIx64 ": inside block [%#" PRIx64
                           ", %#" PRIx64 "): both decoders refuse the bytes\n",
                        a, b->start, b->end);
                }
                break; /* the rest of this block cannot be aligned */
            }
            a += k;
        }
        if (a > b->end) {
            xc->st.nmismatch++;
            printf("  MISMATCH %#" PRIx64
                   ": last instruction runs past the block end %#" PRIx64 "\n",
                b->start, b->end);
        }
        if (b->end > done_to)
            done_to = b->end;
    }
    free(order);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
    return 0;
}

static void
usage(FILE* f)
{
    fprintf(f, "usage: xcheck_opcodes [--sweep] [--list N] FILE...\n");
}

int
main(int argc, char** argv)
{
    xc_t xc;
    int i, status = 0, nfiles = 0;

    memset(&xc, 0, sizeof(xc));
    xc.list = XC_LIST_DEFAULT;
    bfd_init();
    if (od_init(&xc.od) < 0) {
        fprintf(stderr, "xcheck_opcodes: libopcodes has no x86-64 disassembler\n");
        return 2;
    }
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sweep") == 0) {
            xc.sweep = 1;
            continue;
        }
        if (strcmp(argv[i], "--list") == 0 && i + 1 < argc) {
            xc.list = atoi(argv[++i]);
            continue;
        }
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (argv[i][0] == '-') {
            usage(stderr);
            return 2;
        }
        nfiles++;
        memset(&xc.st, 0, sizeof(xc.st));
        xc.path = argv[i];
        if ((xc.sweep ? xc_file_sweep(&xc) : xc_file_cfg(&xc)) < 0) {
            fprintf(
                stderr, "xcheck_opcodes: %s: cannot read as an x86-64 object\n", xc.path);
            status = 2;
            continue;
        }
        printf("xcheck: %s: %" PRIu64 " instructions, %" PRIu64 " mismatches (%" PRIu64
               " direct targets and %" PRIu64 " rip-relative addresses compared; %" PRIu64
               " refused by zydis; %" PRIu64 " prefix splits folded; %" PRIu64
               " fwait merges, %" PRIu64 " reserved aliases and %" PRIu64
               " stray-REX lengths set apart",
            xc.path, xc.st.ninsns, xc.st.nmismatch, xc.st.ntargets, xc.st.nriprel,
            xc.st.nrefused, xc.st.nprefix_split, xc.st.nfwait, xc.st.nalias,
            xc.st.nstray_rex);
        if (xc.sweep)
            printf("; %" PRIu64 " bytes both refuse", xc.st.nbad_both);
        printf(")\n");
        if (xc.st.nmismatch > 0 && !xc.sweep && status == 0)
            status = 1;
    }
    if (nfiles == 0) {
        usage(stderr);
        return 2;
    }
    disassemble_free_target(&xc.od.info);
    return status;
}
