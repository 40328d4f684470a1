/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qp report --annotate: a procedure's blocks disassembled by libopcodes (objdump's AT&T
 * syntax) at their original addresses, each instruction with the count of its block.
 * The bytes come from the instrumented executable, whose old text still holds the
 * original code, except where qpt-rewrite wrote a jump to the relocated code (at a moved
 * procedure's entry and at indirect-jump targets): such a jump is shown as what it is,
 * and the listing resumes at the first original instruction boundary after it. With
 * --original the bytes come from the uninstrumented executable instead.
 */
#include "config.h" /* before dis-asm.h, whose bfd.h insists on PACKAGE */

#include <dis-asm.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "tools/qp_tool.h"

#define REDIRECT_LEN 5 /* jmp rel32 */

typedef struct dis {
    disassemble_info info;
    disassembler_ftype print_insn;
    char text[256];               /* the instruction text being built */
    size_t len;
    const qp_desc_t *desc;        /* names addresses */
    const qp_inputs_t *in;        /* ... as printed */
    uint64_t count;               /* the count of the block being listed (known: below) */
    int count_known;
    uint64_t total;               /* instructions the procedure executed: percentages */
    const char *src_file;         /* the source file and line printed last (DWARF) */
    unsigned src_line;
    const char *text_of;          /* the file whose lines are loaded in `lines` */
    char **lines;                 /* its lines (NULL: could not be read) */
    size_t nlines;
    uint32_t *by_entry;           /* procedure indices sorted by entry */
    uint32_t nprocs;
} dis_t;

static void
dis_append(dis_t *d, const char *fmt, va_list ap)
{
    if (d->len >= sizeof(d->text) - 1)
        return;
    int n = vsnprintf(d->text + d->len, sizeof(d->text) - d->len, fmt, ap);
    if (n > 0)
        d->len += (size_t)n;
    if (d->len > sizeof(d->text) - 1)
        d->len = sizeof(d->text) - 1;
}

static int
dis_fprintf(void *stream, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dis_append(stream, fmt, ap);
    va_end(ap);
    return 0;
}

static int
dis_fprintf_styled(void *stream, enum disassembler_style style, const char *fmt, ...)
{
    (void)style;
    va_list ap;
    va_start(ap, fmt);
    dis_append(stream, fmt, ap);
    va_end(ap);
    return 0;
}

/* The procedure whose entry is the greatest one <= ADDR, or QP_VIRT. */
static uint32_t
proc_before(const dis_t *d, uint64_t addr)
{
    size_t lo = 0, hi = d->nprocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->desc->procs[d->by_entry[mid]].entry <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? QP_VIRT : d->by_entry[lo - 1];
}

/* Addresses as objdump prints them: 0x401126 <main+0x10>, named by original entries. */
static void
dis_print_address(bfd_vma addr, struct disassemble_info *info)
{
    dis_t *d = info->stream;
    dis_fprintf(d, "%#" PRIx64, (uint64_t)addr);
    /* Code the description does not list (PLT stubs) by its symbol. */
    const cfg_symbol_t *s = cfg_image_symbol_at(d->in->img, addr);
    if (s != NULL && (proc_before(d, addr) == QP_VIRT
                      || d->desc->procs[proc_before(d, addr)].entry != addr)) {
        char *dm = d->in->names != NULL ? cfg_demangle(s->name) : NULL;
        dis_fprintf(d, " <%s>", dm != NULL ? dm : s->name);
        free(dm);
        return;
    }
    uint32_t p = proc_before(d, addr);
    if (p == QP_VIRT)
        return;
    const qp_desc_proc_t *pr = &d->desc->procs[p];
    uint64_t off = addr - pr->entry;
    if (off > (1u << 20))
        return; /* too far from any entry to be inside that procedure */
    if (off)
        dis_fprintf(d, " <%s+%#" PRIx64 ">", qp_proc_name(d->in, p), off);
    else
        dis_fprintf(d, " <%s>", qp_proc_name(d->in, p));
}

static void
dis_memory_error(int status, bfd_vma addr, struct disassemble_info *info)
{
    (void)status;
    (void)addr;
    (void)info; /* an instruction running off the block is shown as (bad) */
}

static const qp_desc_t *sort_desc;

static int
cmp_entry(const void *a, const void *b)
{
    uint64_t x = sort_desc->procs[*(const uint32_t *)a].entry;
    uint64_t y = sort_desc->procs[*(const uint32_t *)b].entry;
    return x < y ? -1 : x > y;
}

static int
dis_init(dis_t *d, const qp_inputs_t *in)
{
    const qp_desc_t *desc = in->desc;
    memset(d, 0, sizeof(*d));
    init_disassemble_info(&d->info, d, dis_fprintf, dis_fprintf_styled);
    d->info.arch = bfd_arch_i386;
    d->info.mach = bfd_mach_x86_64;
    d->info.print_address_func = dis_print_address;
    d->info.memory_error_func = dis_memory_error;
    d->print_insn = disassembler(bfd_arch_i386, false, bfd_mach_x86_64, NULL);
    if (d->print_insn == NULL)
        return -1;
    disassemble_init_for_target(&d->info);
    d->desc = desc;
    d->in = in;
    d->by_entry = malloc((desc->hdr.nprocs ? desc->hdr.nprocs : 1) * sizeof(uint32_t));
    if (d->by_entry == NULL)
        return -1;
    for (uint32_t i = 0; i < desc->hdr.nprocs; i++)
        d->by_entry[i] = i;
    d->nprocs = desc->hdr.nprocs;
    sort_desc = desc;
    qsort(d->by_entry, d->nprocs, sizeof(uint32_t), cmp_entry);
    return 0;
}

/* Disassemble the instruction at BUF (N bytes) running at VMA; its length (>= 1). */
static int
dis_one(dis_t *d, const uint8_t *buf, size_t n, uint64_t vma)
{
    d->len = 0;
    d->text[0] = '\0';
    d->info.buffer = (bfd_byte *)buf;
    d->info.buffer_vma = vma;
    d->info.buffer_length = n;
    int len = d->print_insn(vma, &d->info);
    return len < 1 ? 1 : len;
}

/*****************************************************************************
 * The listing
 */

/* True when decoding from offset K of the SIZE bytes at BUF ends exactly at SIZE. */
static int
lands_at_end(dis_t *d, const uint8_t *buf, size_t k, size_t size, uint64_t vma)
{
    while (k < size)
        k += (size_t)dis_one(d, buf + k, size - k, vma + k);
    return k == size;
}

/*
 * True when the bytes at BUF (N readable) hold the jump qpt-rewrite writes over the
 * start of a moved block: a jmp rel32 into a section of its own (.qpt.*).
 */
static int
is_redirect(const cfg_image_t *img, const uint8_t *buf, size_t n, uint64_t vma)
{
    if (n < REDIRECT_LEN || buf[0] != 0xe9)
        return 0;
    int32_t rel;
    memcpy(&rel, buf + 1, 4);
    uint64_t target = vma + REDIRECT_LEN + (uint64_t)(int64_t)rel;
    const cfg_section_t *s = cfg_image_section_at(img, target);
    return s != NULL && strncmp(s->name, ".qpt", 4) == 0;
}

/* How many instructions decoding BUF (SIZE bytes at VMA) finds, or 0 if it overruns. */
static uint32_t
count_insns(dis_t *d, const uint8_t *buf, size_t size, uint64_t vma)
{
    uint32_t n = 0;
    size_t k = 0;
    while (k < size) {
        k += (size_t)dis_one(d, buf + k, size - k, vma + k);
        n++;
    }
    return k == size ? n : 0;
}

#define RECOVER_WINDOW 256 /* how far after new_start the block's copy may start */

/*
 * The original address of NEW, an address in relocated code that a branch of a
 * relocated copy targets: the start of a block (where its edge code begins) or a
 * procedure's entry. 0 when unknown.
 */
static uint64_t
map_back(const qp_desc_t *desc, uint64_t new)
{
    for (uint32_t i = 0; i < desc->hdr.nblocks; i++)
        if (desc->blocks[i].new_start == new)
            return desc->blocks[i].start;
    for (uint32_t i = 0; i < desc->hdr.nprocs; i++)
        if (desc->procs[i].new_entry == new)
            return desc->procs[i].entry;
    return 0;
}

/*
 * The original bytes of one block whose first `head` bytes a redirect overwrote, as
 * they are being rebuilt from the block's relocated copy.
 */
typedef struct recovery {
    const qp_desc_t *desc;     /* for branch targets */
    const qp_desc_block_t *b;  /* the block */
    const uint8_t *buf;        /* its bytes in the file (the first `head` are the jump's) */
    size_t head;               /* bytes overwritten */
    uint8_t *out;              /* b->size bytes being rebuilt */
    size_t lost;               /* offset of an instruction whose bytes stay unknown, or
                                * SIZE_MAX */
    size_t lost_len;           /* its length */
    const cfg_image_t *img;    /* the rewritten program */
} recovery_t;

/* Is ADDR in the new code of IMG (a .qpt.text section)? */
static int
in_new_code(const cfg_image_t *img, uint64_t addr)
{
    for (size_t i = 0; i < img->nsections; i++)
        if (strcmp(img->sections[i].name, ".qpt.text") == 0 && addr >= img->sections[i].vma
            && addr - img->sections[i].vma < img->sections[i].size)
            return 1;
    return 0;
}

static void
mark_lost(recovery_t *r, size_t off, size_t len)
{
    if (r->lost == SIZE_MAX) {
        r->lost = off;
        r->lost_len = len;
    }
}

/*
 * Give the pc-relative field of instruction IN (copied from the relocated code at
 * COPY_VMA, now at offset OFF of the block) its value at the original address: a
 * rip-relative operand addresses the same data, a branch goes to the original of its
 * target. When that is impossible the instruction is marked lost.
 */
static uint64_t original_target(const recovery_t *r, uint64_t new);

static void
fix_pc_relative(recovery_t *r, const arch_insn_t *in, size_t off)
{
    if (in->rel_size == 0)
        return;
    uint64_t target = (in->flags & ARCH_F_BRANCH_REL) ? original_target(r, in->target)
                                                      : in->target;
    int64_t disp = (int64_t)(target - (r->b->start + off + in->len));
    if (target != 0 && in->rel_size == 4 && disp == (int32_t)disp) {
        int32_t d32 = (int32_t)disp;
        memcpy(r->out + off + in->rel_off, &d32, 4);
    } else if (target != 0 && in->rel_size == 1 && disp == (int8_t)disp) {
        r->out[off + in->rel_off] = (uint8_t)(int8_t)disp;
    } else {
        mark_lost(r, off, in->len);
    }
}

/* Bytes of A and B (LEN each) equal outside the pc-relative field of IN. */
static int
same_but_rel(const uint8_t *a, const uint8_t *b, const arch_insn_t *in)
{
    for (size_t i = 0; i < in->len; i++)
        if ((i < in->rel_off || i >= (size_t)in->rel_off + in->rel_size) && a[i] != b[i])
            return 0;
    return 1;
}

/*
 * Try COPY (AVAIL bytes at COPY_VMA) as the block's relocated copy. Its instructions but
 * the last have the original lengths and bytes (pc-relative fields aside): the
 * overwritten bytes are taken from it, and the intact ones must agree with it. The last
 * instruction may differ (a branch re-encoded, counter code before a call that leaves):
 * its original bytes are used when intact, the copy's when it has the same length.
 */
static int is_snippet(const uint8_t *p, size_t n);

/*
 * The original address of a branch target NEW of the relocated code: a block's or a
 * procedure's; through a taken-edge stub (counter code, then a jmp to where the branch
 * went); or NEW itself when it is not new code (a PLT stub). 0 when unknown.
 */
static uint64_t
original_target(const recovery_t *r, uint64_t new)
{
    for (int steps = 0; steps < 16; steps++) {
        if (!in_new_code(r->img, new))
            return new;
        uint64_t old = map_back(r->desc, new);
        size_t avail;
        const uint8_t *q = cfg_image_ptr(r->img, new, &avail);
        arch_insn_t s;
        if (old != 0 || q == NULL || arch_decode(q, avail, new, &s) != 0)
            return old;
        if (s.kind == ARCH_KIND_JMP)
            new = s.target;
        else if (is_snippet(q, avail))
            new += s.len;
        else
            return 0;
    }
    return 0;
}

/*
 * The direct jmp or jcc IN (its bytes at P in the copy) in the form of LEN bytes (2:
 * rel8, 5 or 6: rel32) at offset OFF of the block, to the original of its target: the
 * relocated code widens short branches that no longer reach and shortens others. 0, or
 * -1 when it is no such branch or the target does not fit.
 */
static int
reencode_branch(recovery_t *r, const arch_insn_t *in, const uint8_t *p, size_t off, size_t len)
{
    if ((in->kind != ARCH_KIND_JMP && in->kind != ARCH_KIND_JCC) || in->target == 0)
        return -1;
    uint64_t target = original_target(r, in->target);
    if (target == 0)
        return -1;
    int cc = p[0] >= 0x70 && p[0] <= 0x7f ? p[0] & 0xf
        : p[0] == 0x0f && p[1] >= 0x80 && p[1] <= 0x8f ? p[1] & 0xf : -1;
    if ((in->kind == ARCH_KIND_JCC) != (cc >= 0))
        return -1;
    int64_t disp = (int64_t)(target - (r->b->start + off + len));
    uint8_t *o = r->out + off;
    if (len == 2 && disp == (int8_t)disp) {
        o[0] = cc >= 0 ? (uint8_t)(0x70 | cc) : 0xeb;
        o[1] = (uint8_t)(int8_t)disp;
        return 0;
    }
    size_t head = cc >= 0 ? 2 : 1;
    if (len != head + 4 || disp != (int32_t)disp)
        return -1;
    if (cc >= 0) {
        o[0] = 0x0f;
        o[1] = (uint8_t)(0x80 | cc);
    } else
        o[0] = 0xe9;
    int32_t d32 = (int32_t)disp;
    memcpy(o + head, &d32, 4);
    return 0;
}

static int
try_copy(dis_t *d, recovery_t *r, const uint8_t *copy, size_t avail, uint64_t copy_vma)
{
    size_t size = r->b->size, off = 0;
    memcpy(r->out, r->buf, size);
    r->lost = SIZE_MAX;
    for (uint32_t k = 0; k < r->b->ninsns; k++) {
        arch_insn_t in;
        if (off >= size || off >= avail
            || arch_decode(copy + off, avail - off, copy_vma + off, &in) != 0)
            return 0;
        int last = k == r->b->ninsns - 1;
        if (!last || off + in.len == size) {
            if (off + in.len > size || !same_but_rel(copy + off + 0, r->out + off, &in)) {
                /* Only overwritten bytes may differ: copy them, then compare. */
                size_t n = off + in.len <= size ? in.len : size - off;
                for (size_t i = 0; i < n; i++)
                    if (off + i < r->head)
                        r->out[off + i] = copy[off + i];
                if (off + in.len > size || !same_but_rel(copy + off, r->out + off, &in))
                    return 0;
            }
            if (off < r->head)
                fix_pc_relative(r, &in, off);
            off += in.len;
        } else if (off >= r->head) {
            off = size; /* a last instruction left intact */
        } else {
            /* Counter code before the last instruction (a call or return that leaves
             * the procedure's counted paths): the instruction follows it in the copy. */
            size_t c = off;
            arch_insn_t ci = in;
            while (is_snippet(copy + c, avail - c)) {
                size_t next = c + ci.len;
                if (next >= avail
                    || arch_decode(copy + next, avail - next, copy_vma + next, &ci) != 0)
                    break;
                c = next;
            }
            if (c != off && off + ci.len == size && !is_snippet(copy + c, avail - c)) {
                memcpy(r->out + off, copy + c, ci.len);
                fix_pc_relative(r, &ci, off);
            } else if (!is_snippet(copy + c, avail - c)
                       && reencode_branch(r, &ci, copy + c, off, size - off) == 0) {
                /* a branch the layout gave the other length */
            } else
                mark_lost(r, off, size - off); /* overwritten and re-encoded: unknown */
            off = size;
        }
    }
    /* The rebuilt bytes must decode into exactly the block's instructions. */
    return off == size && (r->lost != SIZE_MAX || count_insns(d, r->out, size, r->b->start)
                                                      == r->b->ninsns);
}

/* Counter code the rewriter puts before a block's copy (arch_emit_* of arch.h). */
static int
is_snippet(const uint8_t *p, size_t n)
{
    static const uint8_t inc[] = { 0x48, 0xff, 0x05 }, lock_inc[] = { 0xf0, 0x48, 0xff, 0x05 };
    static const uint8_t lea_down[] = { 0x48, 0x8d, 0x64, 0x24, 0x80 };
    static const uint8_t lea_up[] = { 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00 };
    return (n >= 3 && memcmp(p, inc, 3) == 0) || (n >= 4 && memcmp(p, lock_inc, 4) == 0)
        || (n >= 5 && memcmp(p, lea_down, 5) == 0) || (n >= 8 && memcmp(p, lea_up, 8) == 0)
        || p[0] == 0x9c || p[0] == 0x9d; /* pushfq, popfq */
}

/*
 * Rebuild the original bytes of the block from its relocated copy at new_start: past
 * the counter code (following its jumps), where the copy should start; else at every
 * instruction boundary seen on the way, nearest first. Returns 1 when one fits.
 */
static int
recover_original(dis_t *d, const cfg_image_t *img, recovery_t *r)
{
    size_t avail;
    uint64_t at = r->b->new_start;
    const uint8_t *p = at ? cfg_image_ptr(img, at, &avail) : NULL;
    uint64_t cand[64];
    size_t ncand = 0;
    for (size_t steps = 0; p != NULL && steps < RECOVER_WINDOW && ncand < 64; steps++) {
        cand[ncand++] = at;
        arch_insn_t in;
        if (arch_decode(p, avail, at, &in) != 0)
            break;
        if (in.kind == ARCH_KIND_JMP && in.target > at && in.target - at < RECOVER_WINDOW)
            at = in.target; /* the jump from counter code to the copy */
        else if (is_snippet(p, avail))
            at += in.len;
        else
            break;
        p = cfg_image_ptr(img, at, &avail);
    }
    while (ncand > 0) {
        at = cand[--ncand];
        if ((p = cfg_image_ptr(img, at, &avail)) != NULL && try_copy(d, r, p, avail, at))
            return 1;
    }
    return 0;
}

/* Load the lines of source file PATH into D (once per file). */
static void
load_source(dis_t *d, const char *path)
{
    if (d->text_of == path)
        return;
    for (size_t i = 0; i < d->nlines; i++)
        free(d->lines[i]);
    free(d->lines);
    d->lines = NULL;
    d->nlines = 0;
    d->text_of = path;
    FILE *src = fopen(path, "r");
    if (src == NULL)
        return;
    char *line = NULL;
    size_t cap = 0, n = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, src)) >= 0) {
        if (len > 0 && line[len - 1] == '\n')
            line[len - 1] = '\0';
        if (n == d->nlines) {
            size_t nc = n ? 2 * n : 256;
            char **v = realloc(d->lines, nc * sizeof(char *));
            if (v == NULL)
                break;
            d->lines = v;
            d->nlines = nc;
        }
        d->lines[n++] = line;
        line = NULL;
        cap = 0;
    }
    free(line);
    fclose(src);
    d->nlines = n;
}

/* Before the first instruction of a new source line: that line, as perf annotate does
 * (the file's name when it changes; the text when the file can be read). */
static void
print_source(FILE *f, dis_t *d, uint64_t vma)
{
    const char *file;
    unsigned line;
    if (cfg_image_line(d->in->img, vma, &file, &line) != 0
        || (file == d->src_file && line == d->src_line))
        return;
    if (file != d->src_file) {
        const char *base = strrchr(file, '/');
        fprintf(f, "%16s  %7s  %s\n", "", "", base ? base + 1 : file);
    }
    d->src_file = file;
    d->src_line = line;
    load_source(d, file);
    const char *text = line >= 1 && line <= d->nlines ? d->lines[line - 1] : "";
    fprintf(f, "%16s  %7s  %6u:  %s\n", "", "", line, text);
}

static void
print_insn(FILE *f, dis_t *d, const char *count, const uint8_t *buf, int len, uint64_t vma,
           const char *note)
{
    char hex[3 * 8 + 1] = "", pct[16] = "";
    for (int i = 0; i < len && i < 7; i++)
        snprintf(hex + 3 * i, 4, "%02x ", buf[i]);
    if (d->count_known && d->total > 0 && d->count > 0)
        snprintf(pct, sizeof(pct), "%.2f", 100.0 * (double)d->count / (double)d->total);
    print_source(f, d, vma);
    fprintf(f, "%16s  %7s  %8" PRIx64 ":  %-21s  %s%s\n", count, pct, vma, hex, d->text, note);
}

/*
 * List BUF[from, size) (the block at VMA). The instruction at LOST (LOST_LEN bytes;
 * SIZE_MAX: none) was overwritten and could not be rebuilt: it is not shown as if it
 * were the original.
 */
static void
list_bytes(FILE *f, dis_t *d, const char *count, const uint8_t *buf, size_t from, size_t size,
           uint64_t vma, size_t lost, size_t lost_len)
{
    while (from < size) {
        int len;
        if (from == lost) {
            snprintf(d->text, sizeof(d->text),
                     "(instruction overwritten by qpt-rewrite; --original shows it)");
            len = (int)lost_len;
            print_insn(f, d, count, buf + from, 0, vma + from, "");
        } else {
            len = dis_one(d, buf + from, size - from, vma + from);
            print_insn(f, d, count, buf + from, len, vma + from, "");
        }
        from += (size_t)len;
    }
}

/*
 * A block whose first HEAD bytes were overwritten by a redirect: the original
 * instructions when they can be recovered from the relocated copy, else what is there,
 * from the first offset after the overwritten bytes that decodes up to the block's end.
 */
static void
list_overwritten(FILE *f, dis_t *d, const cfg_image_t *img, const qp_desc_block_t *b,
                 const char *count, const uint8_t *buf, size_t head)
{
    recovery_t r = { d->desc, b, buf, head, malloc(b->size), SIZE_MAX, 0, img };
    if (r.out != NULL && recover_original(d, img, &r)) {
        list_bytes(f, d, count, r.out, 0, b->size, b->start, r.lost, r.lost_len);
        free(r.out);
        return;
    }
    free(r.out);
    fprintf(f, "%16s  %7s  %8" PRIx64 ":  (%zu bytes overwritten by qpt-rewrite's jump to the "
               "relocated code; --original shows them)\n",
            count, "", b->start, head);
    size_t off = head;
    while (off < b->size && !lands_at_end(d, buf, off, b->size, b->start))
        off++;
    list_bytes(f, d, count, buf, off, b->size, b->start, SIZE_MAX, 0);
}

/*
 * List block B. *OVER_END is the end of the bytes the previous block's redirect
 * overwrote (a redirect may cover a short block and the start of the next); it is
 * updated for the next block.
 */
static void
list_block(FILE *f, dis_t *d, const qp_inputs_t *in, const qp_desc_block_t *b,
           const char *count, uint64_t *over_end)
{
    const cfg_image_t *img = in->original ? in->original : in->img;
    size_t avail;
    const uint8_t *buf = cfg_image_ptr(img, b->start, &avail);
    if (buf == NULL || avail < b->size) {
        fprintf(f, "%16s  %7s  %8" PRIx64 ":  (the code is not in %s)\n", count, "", b->start,
                img->path);
        return;
    }
    if (in->original == NULL && is_redirect(img, buf, avail, b->start))
        *over_end = b->start + REDIRECT_LEN;
    size_t head = 0;
    if (in->original == NULL && *over_end > b->start)
        head = *over_end - b->start < b->size ? *over_end - b->start : b->size;
    if (in->original == NULL && b->new_start != 0 && qp_old_text_reused(img))
        head = b->size; /* new code went over it: all rebuilt from the copy */
    if (head > 0)
        list_overwritten(f, d, img, b, count, buf, head);
    else
        list_bytes(f, d, count, buf, 0, b->size, b->start, SIZE_MAX, 0);
}

/* The listing order: from the entry up by address, then what lies below the entry
 * (cold fragments placed before their parent). qsort has no context: file scope. */
static const qp_desc_t *block_desc;
static uint64_t block_entry;

static int
cmp_block_start(const void *a, const void *b)
{
    uint64_t x = block_desc->blocks[*(const uint32_t *)a].start;
    uint64_t y = block_desc->blocks[*(const uint32_t *)b].start;
    int below_x = x < block_entry, below_y = y < block_entry;
    if (below_x != below_y)
        return below_x - below_y;
    return x < y ? -1 : x > y;
}

int
qp_print_annotate(FILE *f, const qp_inputs_t *in, uint32_t proc)
{
    const qp_desc_t *desc = in->desc;
    const qp_desc_proc_t *p = &desc->procs[proc];
    dis_t d;
    qp_flow_t fl;
    uint32_t *order = malloc((p->nblocks ? p->nblocks : 1) * sizeof(uint32_t));
    if (order == NULL || dis_init(&d, in) < 0 || qp_report_flow(in->rep, proc, &fl) < 0) {
        fprintf(stderr, "qp: %s: cannot disassemble (out of memory or no x86-64 "
                        "disassembler in libopcodes)\n", in->exe);
        free(order);
        return 1;
    }
    for (uint32_t i = 0; i < p->nblocks; i++)
        order[i] = p->block + i;
    block_desc = desc;
    block_entry = p->entry;
    qsort(order, p->nblocks, sizeof(uint32_t), cmp_block_start);
    char cbuf[24];
    fprintf(f, "%s at 0x%" PRIx64 ": %s calls, %" PRIu64 " instructions executed\n",
            qp_proc_name(in, proc), p->entry, qp_fmt_count(cbuf, fl.calls, fl.calls_known),
            fl.insns);
    fprintf(f, "%16s  %7s  %8s   %-21s  %s\n", "count", "%", "address", "bytes",
            "instruction (source lines between, from DWARF)");
    d.total = fl.insns;
    uint64_t prev_end = 0, over_end = 0;
    for (uint32_t i = 0; i < p->nblocks; i++) {
        const qp_desc_block_t *b = &desc->blocks[order[i]];
        uint32_t local = order[i] - p->block;
        if (i > 0 && b->start != prev_end)
            fprintf(f, "%16s  %7s  %8s\n", "", "", "...");
        d.count = fl.block_count[local];
        d.count_known = fl.block_state[local] != QP_FLOW_UNKNOWN;
        list_block(f, &d, in, b,
                   qp_fmt_count(cbuf, fl.block_count[local],
                                fl.block_state[local] != QP_FLOW_UNKNOWN),
                   &over_end);
        prev_end = b->start + b->size;
    }
    qp_flow_free(&fl);
    free(d.by_entry);
    for (size_t i = 0; i < d.nlines; i++)
        free(d.lines[i]);
    free(d.lines);
    free(order);
    return 0;
}
