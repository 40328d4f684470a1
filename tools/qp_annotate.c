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

#include "tools/qp_tool.h"
#include "tools/tool.h"


typedef struct dis {
    disassemble_info info;
    disassembler_ftype print_insn;
    char text[256];               /* the instruction text being built */
    size_t len;
    const qp_inputs_t *in;        /* names addresses as printed */
    uint64_t count;               /* the count of the block being listed (known: below) */
    int count_known;
    uint64_t total;               /* instructions the procedure executed: percentages */
    const char *src_file;         /* the source file and line printed last (DWARF) */
    unsigned src_line;
    const char *text_of;          /* the file whose lines are loaded in `lines` */
    char **lines;                 /* its lines (NULL: could not be read) */
    size_t nlines;
    uint32_t *by_entry;           /* procedure indices sorted by entry */
    uint64_t *entry;              /* per procedure: its entry */
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

/* The procedure whose entry is the greatest one <= ADDR, or QPT_QP_NONE. */
static uint32_t
proc_before(const dis_t *d, uint64_t addr)
{
    size_t lo = 0, hi = d->nprocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->entry[d->by_entry[mid]] <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? QPT_QP_NONE : d->by_entry[lo - 1];
}

/* Addresses as objdump prints them: 0x401126 <main+0x10>, named by original entries. */
static void
dis_print_address(bfd_vma addr, struct disassemble_info *info)
{
    dis_t *d = info->stream;
    dis_fprintf(d, "%#" PRIx64, (uint64_t)addr);
    /* Code the description does not list (PLT stubs) by its symbol. */
    const char *sym;
    int global;
    if (qpt_qp_symbol_at(d->in->qp, addr, &sym, &global) == 0
        && (proc_before(d, addr) == QPT_QP_NONE || d->entry[proc_before(d, addr)] != addr)) {
        char *dm = d->in->demangle ? qpt_demangle(sym) : NULL;
        dis_fprintf(d, " <%s>", dm != NULL ? dm : sym);
        free(dm);
        return;
    }
    /* Data (a variable's address in a RIP-relative operand) is no place in code: by its
     * section, as stderr is not <sub_35988+0x15cd8>. */
    const char *sec;
    uint64_t vma;
    int code;
    int found = qpt_qp_section_at(d->in->qp, addr, &sec, &vma, &code) == 0;
    if (!found || !code) {
        if (found)
            dis_fprintf(d, " <%s+%#" PRIx64 ">", sec, (uint64_t)(addr - vma));
        return;
    }
    uint32_t p = proc_before(d, addr);
    if (p == QPT_QP_NONE)
        return;
    uint64_t off = addr - d->entry[p];
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

static int
cmp_entry(const void *a, const void *b, void *arg)
{
    const uint64_t *entry = arg;
    uint64_t x = entry[*(const uint32_t *)a];
    uint64_t y = entry[*(const uint32_t *)b];
    return x < y ? -1 : x > y;
}

static int
dis_init(dis_t *d, const qp_inputs_t *in)
{
    qpt_qp_info_t info;
    memset(d, 0, sizeof(*d));
    if (qpt_qp_info(in->qp, &info) < 0)
        return -1;
    init_disassemble_info(&d->info, d, dis_fprintf, dis_fprintf_styled);
    d->info.arch = bfd_arch_i386;
    d->info.mach = bfd_mach_x86_64;
    d->info.print_address_func = dis_print_address;
    d->info.memory_error_func = dis_memory_error;
    d->print_insn = disassembler(bfd_arch_i386, false, bfd_mach_x86_64, NULL);
    if (d->print_insn == NULL)
        return -1;
    disassemble_init_for_target(&d->info);
    d->in = in;
    d->by_entry = malloc((info.nprocs ? info.nprocs : 1) * sizeof(uint32_t));
    d->entry = malloc((info.nprocs ? info.nprocs : 1) * sizeof(uint64_t));
    if (d->by_entry == NULL || d->entry == NULL)
        return -1;
    for (uint32_t i = 0; i < info.nprocs; i++) {
        qpt_qp_proc_t p;
        d->by_entry[i] = i;
        d->entry[i] = qpt_qp_proc(in->qp, i, &p) == 0 ? p.entry : 0;
    }
    d->nprocs = info.nprocs;
    qsort_r(d->by_entry, d->nprocs, sizeof(uint32_t), cmp_entry, d->entry);
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
    char why[256];
    FILE *src = tool_fopen_read(path, why, sizeof(why)); /* a FIFO is not waited on */
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
    if (qpt_qp_line(d->in->qp, vma, &file, &line) != 0
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
list_overwritten(FILE *f, dis_t *d, uint32_t proc, uint32_t bi, const qpt_qp_block_t *b,
                 const char *count, const qpt_qp_code_t *c)
{
    uint8_t *orig = malloc(b->size);
    size_t lost = SIZE_MAX, lost_len = 0;
    if (orig != NULL && qpt_qp_block_original(d->in->qp, proc, bi, c, orig, &lost, &lost_len)) {
        list_bytes(f, d, count, orig, 0, b->size, b->start, lost, lost_len);
        free(orig);
        return;
    }
    free(orig);
    fprintf(f, "%16s  %7s  %8" PRIx64 ":  (%zu bytes overwritten by qpt-rewrite's jump to the "
               "relocated code; --original shows them)\n",
            count, "", b->start, c->head);
    size_t off = c->head;
    while (off < b->size && !lands_at_end(d, c->bytes, off, b->size, b->start))
        off++;
    list_bytes(f, d, count, c->bytes, off, b->size, b->start, SIZE_MAX, 0);
}

/*
 * List block B. *OVER_END is the end of the bytes the previous block's redirect
 * overwrote (a redirect may cover a short block and the start of the next); it is
 * updated for the next block.
 */
static void
list_block(FILE *f, dis_t *d, uint32_t proc, uint32_t bi, const qpt_qp_block_t *b,
           const char *count, uint64_t *over_end)
{
    qpt_qp_code_t c;
    if (qpt_qp_block_code(d->in->qp, proc, bi, over_end, &c) < 0 || c.bytes == NULL) {
        fprintf(f, "%16s  %7s  %8" PRIx64 ":  (the code is not in %s)\n", count, "", b->start,
                c.bytes == NULL ? c.path : "?");
        return;
    }
    if (c.head > 0)
        list_overwritten(f, d, proc, bi, b, count, &c);
    else
        list_bytes(f, d, count, c.bytes, 0, b->size, b->start, SIZE_MAX, 0);
}

/* The listing order: from the entry up by address, then what lies below the entry
 * (cold fragments placed before their parent). */
typedef struct block_order {
    const qpt_qp_block_t *blk; /* the procedure's blocks */
    uint64_t entry;            /* its entry */
} block_order_t;

static int
cmp_block_start(const void *a, const void *b, void *arg)
{
    const block_order_t *o = arg;
    uint64_t x = o->blk[*(const uint32_t *)a].start;
    uint64_t y = o->blk[*(const uint32_t *)b].start;
    int below_x = x < o->entry, below_y = y < o->entry;
    if (below_x != below_y)
        return below_x - below_y;
    return x < y ? -1 : x > y;
}

/* The blocks of PROC (P) into a malloc'd array, or NULL. */
static qpt_qp_block_t *
blocks_of(const qp_inputs_t *in, uint32_t proc, const qpt_qp_proc_t *p)
{
    qpt_qp_block_t *v = malloc((p->nblocks ? p->nblocks : 1) * sizeof(*v));
    for (uint32_t b = 0; v != NULL && b < p->nblocks; b++)
        if (qpt_qp_block(in->qp, proc, b, &v[b]) < 0) {
            free(v);
            v = NULL;
        }
    return v;
}

int
qp_print_annotate(FILE *f, const qp_inputs_t *in, uint32_t proc)
{
    qpt_qp_proc_t p;
    dis_t d;
    qpt_qp_flow_t *fl = NULL;
    qpt_qp_block_t *blk = NULL;
    uint32_t *order = NULL;
    int ok = qpt_qp_proc(in->qp, proc, &p) == 0;
    if (ok) {
        order = malloc((p.nblocks ? p.nblocks : 1) * sizeof(uint32_t));
        blk = blocks_of(in, proc, &p);
    }
    int init = ok && order != NULL && blk != NULL ? dis_init(&d, in) : -1;
    if (init < 0 || qpt_qp_flow(in->qp, proc, &fl) < 0) {
        fprintf(stderr, "qp: %s: cannot disassemble (out of memory or no x86-64 "
                        "disassembler in libopcodes)\n", in->exe);
        if (init == 0) {
            free(d.by_entry);
            free(d.entry);
        }
        free(order);
        free(blk);
        return 1;
    }
    for (uint32_t i = 0; i < p.nblocks; i++)
        order[i] = i;
    block_order_t bo = { blk, p.entry };
    qsort_r(order, p.nblocks, sizeof(uint32_t), cmp_block_start, &bo);
    qpt_qp_flow_info_t fi;
    qpt_qp_flow_info(fl, &fi);
    char cbuf[24];
    fprintf(f, "%s at 0x%" PRIx64 ": %s calls, %" PRIu64 " instructions executed\n", p.name,
            p.entry, qp_fmt_count(cbuf, fi.calls, fi.calls_known), fi.insns);
    fprintf(f, "%16s  %7s  %8s   %-21s  %s\n", "count", "%", "address", "bytes",
            "instruction (source lines between, from DWARF)");
    d.total = fi.insns;
    uint64_t prev_end = 0, over_end = 0;
    for (uint32_t i = 0; i < p.nblocks; i++) {
        const qpt_qp_block_t *b = &blk[order[i]];
        uint64_t count = 0;
        int state = QPT_QP_COUNT_UNKNOWN;
        qpt_qp_flow_block(fl, order[i], &count, &state);
        if (i > 0 && b->start != prev_end)
            fprintf(f, "%16s  %7s  %8s\n", "", "", "...");
        d.count = count;
        d.count_known = state != QPT_QP_COUNT_UNKNOWN;
        list_block(f, &d, proc, order[i], b, qp_fmt_count(cbuf, count, d.count_known),
                   &over_end);
        prev_end = b->start + b->size;
    }
    qpt_qp_flow_free(fl);
    free(d.by_entry);
    free(d.entry);
    for (size_t i = 0; i < d.nlines; i++)
        free(d.lines[i]);
    free(d.lines);
    free(order);
    free(blk);
    return 0;
}
