/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Tables of label addresses retargeted to the new code (issue 29). An interpreter built
 * with GNU computed gotos (lua's `disptab`, `goto *disptab[op]`) dispatches through a
 * static array of `&&label` words. After a rewrite those words still hold the old label
 * addresses, each a redirect jump in the old text: one more jump per dispatch. Here such
 * an array gets the new addresses instead, when it is proven to be nothing but the
 * dispatch targets of one moved procedure P:
 *   - it is a maximal run of aligned 8-byte words in read-only data (a section that is
 *     not writable, or .data.rel.ro*, and that no other loaded section overlaps: which
 *     bytes load there would not be known), each the address of a label of P: the
 *     start of a block that is the target of one of P's computed gotos (a
 *     CFG_EDGE_INDIRECT edge), or a case of a table of 8-byte absolute entries that
 *     retarget_tables leaves alone (in a PIE, or unbounded: the analysis takes `jmp
 *     *table(,%rax,8)` for a jump table, and a switch whose bound it cannot prove is
 *     the same thing);
 *   - no data symbol says the array is larger or smaller (a symbol overlapping the run
 *     must cover exactly it), and none is global (another module could read it);
 *   - nothing in data points into it (no relocation's value, and in a program that is
 *     not position independent no aligned data word);
 *   - code refers to it (a rip-relative operand; outside a PIE also any 4-byte field of
 *     an instruction, as an absolute displacement or immediate) only in P, at least
 *     once: to its words, or up to BEFORE bytes before them from a `lea`, an indexed
 *     operand or an instruction the decoder does not describe; the bytes of code
 *     sections in no block are decoded at every offset and must not refer to it either;
 *   - P has no indirect jump of unknown targets (which would read a word and translate
 *     it as an old address), it moves, every label has its new address, and no table
 *     that retarget_tables may write shares the words.
 * On AArch64 (no operand decoder) the references are the addresses code forms
 * (isa->code_ref: adr, adrp + add/ldr/str, ldr literal; lua 5.4's `disptab` in Debian's
 * arm64 PIE, R_AARCH64_RELATIVE words); an adrp whose use is not found keeps every run
 * on its page.
 * P's loads from it are taken to feed its indirect jumps (GCC emits nothing else for
 * `goto *table[i]` or a switch). ed_opts_t.keep_tables turns this off too. In a PIE each
 * word is written at load time from its R_X86_64_RELATIVE relocation: the addend in the
 * loaded .rela.dyn is rewritten (and the word in place, which RELR relocations add the
 * load base to). The redirects at the old labels stay: anything else that reaches an old
 * label address still works. The words then land where the redirects would have jumped
 * (the slot's new address, snippets before the instruction included), so drivers' counts
 * and traces are the same.
 */
#include <stdlib.h>
#include <string.h>

#include "base/qp_pool.h"
#include "cfg/cfg.h"
#include "editor/ed_layout_priv.h"

/* How far before a table a reference may point and still be one to it
 * (`jmp *table-8(,%rax,8)` when the first index is 1). */
#define BEFORE 64

typedef edl_label_t label_t;
typedef edl_run_t run_t;

static int
label_cmp(const void *a, const void *b)
{
    const label_t *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int
run_cmp(const void *a, const void *b)
{
    const run_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The owner of the label at ADDR, or CFG_NONE. */
static uint32_t
label_owner(const label_t *v, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].addr == addr ? v[lo].owner : CFG_NONE;
}

/* The run that [ADDR - BEFORE .. ADDR] falls into (sorted RUNS), or NULL. */
static run_t *
run_near(run_t *r, size_t n, uint64_t addr)
{
    /* (Runs do not overlap: the last ends last. Most values are far from every run:
     * their search cost cc1 1.4 G instructions, the data words' on the main thread.) */
    if (n == 0 || addr >= r[n - 1].hi || addr + BEFORE < r[0].lo)
        return NULL;
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the first run that ends after ADDR */
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].hi <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && addr + BEFORE >= r[lo].lo ? &r[lo] : NULL;
}

/*
 * A table of 8-byte absolute entries that retarget_tables leaves as they are (in a PIE,
 * or whose bound no compare proves): the analysis may take a computed goto's `jmp
 * *table(,%rax,8)` for one, found by scanning the words.
 */
static int
word_table(const cfg_prog_t *prog, const cfg_table_t *tb)
{
    return !tb->relative && tb->entry_size == 8
        && ((prog->img->flags & CFG_IMG_PIE) || !tb->bounded);
}

/* Are the tables of the jump ending block BL all such tables? (Found by jump address:
 * a scan of every table for every table edge cost cc1 0.38 G instructions.) */
static int
word_tables_only(const ed_plan_t *plan, const cfg_block_t *bl)
{
    const cfg_prog_t *prog = plan->prog;
    int found = 0;
    for (size_t i = edl_tables_from(plan, bl->start);
         i < prog->ntables && prog->tables[plan->table_by_jump[i]].jump < bl->end; i++) {
        if (!word_table(prog, &prog->tables[plan->table_by_jump[i]]))
            return 0;
        found = 1;
    }
    return found;
}

/* The labels of moved procedures without indirect jumps of unknown targets, sorted. */
static int
collect_labels(const ed_plan_t *plan, label_t **out, size_t *n)
{
    const cfg_prog_t *prog = plan->prog;
    label_t *v = NULL;
    size_t k = 0, cap = 0;
    /* Procedures with an indirect jump of unknown targets, cold fragments included. */
    uint8_t *unres = calloc(prog->nprocs ? prog->nprocs : 1, 1);
    if (unres == NULL)
        return QP_ENOMEM;
    for (uint32_t b = 0; b < prog->nblocks; b++) {
        const cfg_block_t *bl = &prog->blocks[b];
        for (uint32_t e = 0; e < bl->nsucc; e++)
            if (cfg_block_succ(prog, bl, e)->kind == CFG_EDGE_UNRESOLVED) {
                /* (its owner asked only here: a procedure's cache miss a block, cc1's
                 * 800,000 of them, was the most of this step's time) */
                uint32_t o = cfg_proc_owner(prog, bl->proc);
                if (o < prog->nprocs)
                    unres[o] = 1;
                break;
            }
    }
    for (uint32_t pi = 0; pi < prog->nprocs; pi++) {
        const cfg_proc_t *p = &prog->procs[pi];
        if (plan->reason[pi] != NULL || (p->flags & CFG_PROC_FRAGMENT) || unres[pi]
            || p->nind_unresolved)
            continue;
        for (uint32_t b = p->block; b < p->block + p->nblocks; b++) {
            const cfg_block_t *bl = &prog->blocks[b];
            int words = -1; /* word_tables_only, once asked */
            for (uint32_t e = 0; e < bl->nsucc; e++) {
                const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
                if (ed->to == CFG_NONE
                    || !(ed->kind == CFG_EDGE_INDIRECT
                        || (ed->kind == CFG_EDGE_TABLE
                            && (words < 0 ? (words = word_tables_only(plan, bl)) : words))))
                    continue;
                if (cfg_vec_grow((void **)&v, &cap, k + 1, sizeof(label_t)) < 0) {
                    free(v);
                    free(unres);
                    return QP_ENOMEM;
                }
                v[k++] = (label_t) { prog->blocks[ed->to].start, pi };
            }
        }
    }
    free(unres);
    if (k > 0)
        qsort(v, k, sizeof(label_t), label_cmp);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || v[u - 1].addr != v[i].addr)
            v[u++] = v[i];
        else if (v[u - 1].owner != v[i].owner)
            v[u - 1].owner = CFG_NONE; /* (two owners: no table of one procedure) */
    *out = v;
    *n = u;
    return 0;
}

/* Is S a section whose bytes cfg_image_section_at may give (loaded, with bytes)? */
static int
loaded_bytes(const cfg_section_t *s)
{
    uint32_t need = CFG_SEC_ALLOC | CFG_SEC_LOAD;
    return (s->flags & need) == need && s->size > 0 && s->bytes != NULL;
}

/* Does another section with loaded bytes share addresses with S? Then which bytes load
 * there is not known (a malformed file), and cfg_image_section_at's search, which
 * assumes they do not overlap, may give either section or none. */
static int
overlapped(const cfg_image_t *img, const cfg_section_t *s)
{
    for (size_t i = 0; i < img->nsections; i++) {
        const cfg_section_t *t = &img->sections[i];
        if (t != s && loaded_bytes(t) && t->vma < s->vma + s->size
            && s->vma < t->vma + t->size)
            return 1;
    }
    return 0;
}

/* Read-only data: loaded, not code, not writable but for .data.rel.ro (read-only once
 * relocated), overlapping no other section. The section holding [ADDR, ADDR + 8), or
 * NULL. */
static const cfg_section_t *
rodata_at(const cfg_image_t *img, uint64_t addr)
{
    for (size_t i = 0; i < img->nsections; i++) {
        const cfg_section_t *s = &img->sections[i];
        if (addr < s->vma || addr - s->vma >= s->size || s->size - (addr - s->vma) < 8)
            continue;
        uint32_t need = CFG_SEC_ALLOC | CFG_SEC_LOAD;
        if ((s->flags & need) != need || (s->flags & CFG_SEC_CODE)
            || ((s->flags & CFG_SEC_WRITE) && strncmp(s->name, ".data.rel.ro", 12) != 0)
            || overlapped(img, s))
            return NULL;
        return s;
    }
    return NULL;
}

/* The value of the 8-byte word at AT once loaded, if it is a label: its owner, else
 * CFG_NONE. In a PIE only a RELATIVE relocation makes it an address. */
static uint32_t
word_label(const cfg_image_t *img, int pie, const label_t *lab, size_t nlab, uint64_t at)
{
    uint64_t w;
    if (pie) {
        const cfg_reloc_t *r = cfg_image_reloc_at(img, at);
        if (r == NULL || r->kind != CFG_RELOC_RELATIVE)
            return CFG_NONE;
        w = r->value;
    } else {
        size_t avail;
        const uint8_t *p = cfg_image_ptr(img, at, &avail);
        if (p == NULL || avail < 8)
            return CFG_NONE;
        memcpy(&w, p, 8);
    }
    return label_owner(lab, nlab, w);
}

int
edl_label_runs(
    const cfg_image_t *img, const label_t *lab, size_t nlab, run_t **out, size_t *n)
{
    int pie = (img->flags & CFG_IMG_PIE) != 0;
    run_t *v = NULL;
    size_t k = 0, cap = 0;
    /* The words to look at: relocated ones in a PIE, else every aligned word. */
    size_t nsec = pie ? 1 : img->nsections;
    for (size_t si = 0; si < nsec; si++) {
        uint64_t first = 0, end = 0;
        size_t ri = 0;
        const cfg_section_t *own = NULL; /* the section, when its words are the image's */
        if (!pie) {
            const cfg_section_t *s = &img->sections[si];
            /* (rodata_at refuses a section another overlaps: the fast path below reads
             * the section's own bytes, word_label the image's at each address.) */
            if (s->size < 8 || rodata_at(img, s->vma) != s)
                continue;
            first = (s->vma + 7) & ~(uint64_t)7;
            end = s->vma + s->size;
            if (s->bytes != NULL && cfg_image_section_at(img, s->vma) == s
                && cfg_image_section_at(img, end - 1) == s)
                own = s;
        }
        for (;;) {
            uint64_t at;
            if (pie) {
                if (ri >= img->nrelocs)
                    break;
                at = img->relocs[ri++].where;
            } else {
                if (first + 8 > end)
                    break;
                at = first;
                first += 8;
                /* Most words are no label: read in place, out of the labels' range
                 * (cfg_image_ptr and the search for each of cc1's 1.6 million
                 * words: 0.3 G instructions, on the main thread). */
                uint64_t w;
                if (own != NULL
                    && (memcpy(&w, own->bytes + (at - own->vma), 8),
                        w < lab[0].addr || w > lab[nlab - 1].addr))
                    continue;
            }
            uint32_t o = word_label(img, pie, lab, nlab, at);
            const cfg_section_t *s
                = o != CFG_NONE && at % 8 == 0 ? rodata_at(img, at) : NULL;
            if (s == NULL)
                continue;
            if (k > 0 && at < v[k - 1].hi) {
                v[k - 1].bad = 1; /* two relocations of one word */
                continue;
            }
            if (k > 0 && v[k - 1].hi == at && v[k - 1].owner == o
                && rodata_at(img, v[k - 1].lo) == s) {
                v[k - 1].hi = at + 8;
                continue;
            }
            if (cfg_vec_grow((void **)&v, &cap, k + 1, sizeof(run_t)) < 0) {
                free(v);
                return QP_ENOMEM;
            }
            v[k++] = (run_t) { .lo = at, .hi = at + 8, .owner = o };
        }
    }
    if (k > 1)
        qsort(v, k, sizeof(run_t), run_cmp);
    *out = v;
    *n = k;
    return 0;
}

/* Data that says a run is more, or is read from elsewhere: symbols, pointers in data. */
static void
check_data(const cfg_prog_t *prog, run_t *r, size_t n)
{
    const cfg_image_t *img = prog->img;
    int pie = (img->flags & CFG_IMG_PIE) != 0;
    for (size_t i = 0; i < img->nvariables; i++) {
        const cfg_symbol_t *y = &img->variables[i];
        if (y->kind == CFG_SYM_TLS)
            continue;
        uint64_t yend = y->addr + (y->size ? y->size : 1);
        for (size_t k = 0; k < n; k++)
            if (y->addr < r[k].hi && r[k].lo < yend
                && (y->global || y->addr != r[k].lo || y->size != r[k].hi - r[k].lo))
                r[k].bad = 1;
    }
    for (size_t i = 0; i < img->nrelocs; i++) {
        run_t *x = run_near(r, n, img->relocs[i].value);
        if (x != NULL && img->relocs[i].value >= x->lo)
            x->bad = 1;
    }
    for (size_t si = 0; si < img->nsections && !pie; si++) {
        const cfg_section_t *s = &img->sections[si];
        uint32_t need = CFG_SEC_ALLOC | CFG_SEC_LOAD;
        if ((s->flags & need) != need || (s->flags & CFG_SEC_CODE) || s->bytes == NULL)
            continue;
        for (uint64_t off = (8 - s->vma % 8) % 8; off + 8 <= s->size; off += 8) {
            uint64_t w;
            memcpy(&w, s->bytes + off, 8);
            run_t *x = run_near(r, n, w);
            if (x != NULL && w >= x->lo)
                x->bad = 1;
        }
    }
}

/*
 * Whether a reference from an instruction counts up to BEFORE bytes before a run:
 * decided from its operands only when such a reference is seen (decoding the operands
 * of every instruction of the program cost more than the rest of this file).
 */
typedef struct near_ref {
    const uint8_t *p; /* the instruction's bytes (NULL: not readable) */
    size_t avail;
    uint64_t addr;
    int known, near;
} near_ref_t;

static int
is_near_ref(near_ref_t *q)
{
    if (!q->known) {
        arch_ops_t ops;
        q->known = 1;
        q->near = 1;
        if (q->p != NULL && arch_decode_ops(q->p, q->avail, q->addr, &ops) == 0
            && (ops.src.kind != ARCH_OPND_NONE || ops.dst.kind != ARCH_OPND_NONE))
            q->near = ops.op == ARCH_OP_LEA
                || (ops.src.kind == ARCH_OPND_MEM && ops.src.index != ARCH_REG_NONE)
                || (ops.dst.kind == ARCH_OPND_MEM && ops.dst.index != ARCH_REG_NONE);
    }
    return q->near;
}

/* A reference to VALUE from code of procedure OWNER (CFG_NONE: none, or not known);
 * NEAR (NULL: yes): whether one up to BEFORE bytes before a run counts too. */
static void
note_ref(run_t *r, size_t n, uint64_t value, uint32_t owner, near_ref_t *near)
{
    run_t *x = run_near(r, n, value);
    if (x == NULL || (value < x->lo && near != NULL && !is_near_ref(near)))
        return;
    if (owner == x->owner)
        x->refs++;
    else
        x->bad = 1;
}

/*
 * The references of instruction IN of OWNER's code. An address a little before a table
 * is one to it only from a `lea` or an indexed memory operand (`table-8(,%rax,8)`), or
 * from an instruction whose operands the decoder does not describe; else it names the
 * data there (a string).
 */
static void
insn_refs(const cfg_image_t *img, int pie, const arch_insn_t *in, run_t *r, size_t n,
    uint32_t owner)
{
    near_ref_t near = { 0 };
    near.p = cfg_image_ptr(img, in->addr, &near.avail);
    near.addr = in->addr;
    const uint8_t *p = near.p;
    size_t avail = near.avail;
    if (in->flags & ARCH_F_RIPREL)
        note_ref(r, n, in->target, owner, &near);
    for (size_t o = 0; !pie && p != NULL && o + 4 <= in->len && o + 4 <= avail; o++) {
        uint32_t u;
        memcpy(&u, p + o, 4);
        note_ref(r, n, u, owner, &near);                             /* zero-extended */
        note_ref(r, n, (uint64_t)(int64_t)(int32_t)u, owner, &near); /* sign-extended */
    }
}

/*
 * The references of the instruction at A (code up to END) of OWNER, for an ISA without
 * an operand decoder (AArch64): the address it forms with the instructions after it
 * (isa->code_ref: adr, adrp + add, adrp + ldr/str, ldr literal), counted up to BEFORE
 * bytes before a run. A pc-relative instruction whose address code_ref cannot follow
 * (an adrp whose add is in another block) may name anything on its page: the runs there
 * are read from a place not known, and stay.
 */
static void
isa_refs(const ed_plan_t *plan, uint64_t a, uint64_t end, run_t *r, size_t n, uint32_t owner)
{
    const cfg_image_t *img = plan->prog->img;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(img, a, &avail);
    arch_insn_t in;
    if (p == NULL || avail < 4 || plan->isa->decode(p, avail, a, &in) < 0
        || !(in.flags & ARCH_F_RIPREL))
        return;
    uint64_t v;
    size_t len = end > a && end - a < avail ? (size_t)(end - a) : avail;
    if (plan->isa->code_ref(p, len, a, &v) != 0) {
        note_ref(r, n, v, owner, NULL);
        return;
    }
    uint64_t lo = in.target & ~(uint64_t)0xfff, hi = lo + 0x1000 + BEFORE;
    for (size_t k = 0; k < n; k++)
        if (r[k].lo < hi && lo < r[k].hi)
            r[k].bad = 1;
}

/*
 * The code is read on the pool, CODE_GRAIN blocks a part (the code bytes in no block
 * are the last part): each worker counts into its own copy of the runs, and the copies
 * are summed (refs) and joined (bad) after, which gives the same runs in any order.
 */
#define CODE_GRAIN 1024

typedef struct code_job {
    const ed_plan_t *plan;
    size_t n;                    /* runs */
    run_t *copy;                 /* per worker: n runs, refs and bad its own */
} code_job_t;

/* qp_task_fn: the references from part K of the code (code_job_t ARG). */
static int
code_part(void *arg, unsigned worker, size_t k)
{
    const code_job_t *j = arg;
    const ed_plan_t *plan = j->plan;
    const cfg_prog_t *prog = plan->prog;
    const cfg_image_t *img = prog->img;
    int pie = (img->flags & CFG_IMG_PIE) != 0;
    run_t *r = j->copy + (size_t)worker * j->n;
    size_t n = j->n;
    size_t lo = k * CODE_GRAIN;
    if (lo >= prog->nblocks) { /* the last part: the code bytes in no block */
        int aligned = plan->isa->decode_ops == NULL; /* AArch64: aligned words */
        for (uint32_t u = 0; u < prog->nunreached; u++)
            for (uint64_t a = aligned ? (prog->unreached[u].start + 3) & ~(uint64_t)3
                                      : prog->unreached[u].start;
                 a < prog->unreached[u].end; a += aligned ? 4 : 1) {
                if (aligned) {
                    if (a + 4 <= prog->unreached[u].end)
                        isa_refs(plan, a, prog->unreached[u].end, r, n, CFG_NONE);
                    continue;
                }
                size_t avail;
                const uint8_t *p = cfg_image_ptr(img, a, &avail);
                arch_insn_t in;
                if (p != NULL && arch_decode(p, avail, a, &in) == 0)
                    insn_refs(img, pie, &in, r, n, CFG_NONE);
            }
        return 0;
    }
    size_t hi = lo + CODE_GRAIN < prog->nblocks ? lo + CODE_GRAIN : prog->nblocks;
    for (size_t b = lo; b < hi; b++) {
        const cfg_block_t *bl = &prog->blocks[b];
        uint32_t owner = cfg_proc_owner(prog, bl->proc);
        if (plan->isa->decode_ops == NULL) {
            for (uint64_t a = bl->start; a + 4 <= bl->end; a += 4)
                isa_refs(plan, a, bl->end, r, n, owner);
            continue;
        }
        for (uint64_t a = bl->start; a < bl->end;) {
            arch_insn_t in;
            if (cfg_image_decode(img, a, bl->end, &in) < 0)
                return QP_EDECODE;
            insn_refs(img, pie, &in, r, n, owner);
            a += in.len;
        }
    }
    return 0;
}

/* References from code: every block's instructions, and the code bytes in no block. */
static int
check_code(const ed_plan_t *plan, run_t *r, size_t n)
{
    const cfg_prog_t *prog = plan->prog;
    unsigned threads = plan->opts.threads < 1 ? 1
        : plan->opts.threads > QP_MAX_THREADS ? QP_MAX_THREADS : plan->opts.threads;
    code_job_t job = { plan, n, malloc((size_t)threads * n * sizeof(run_t)) };
    if (job.copy == NULL)
        return QP_ENOMEM;
    for (unsigned w = 0; w < threads; w++)
        for (size_t k = 0; k < n; k++)
            job.copy[(size_t)w * n + k] = (run_t) { r[k].lo, r[k].hi, r[k].owner, 0, 0 };
    size_t nparts = (prog->nblocks + CODE_GRAIN - 1) / CODE_GRAIN + 1;
    int rc = qp_parallel_for(threads, nparts, 1, code_part, &job, NULL);
    for (unsigned w = 0; w < threads; w++)
        for (size_t k = 0; k < n; k++) {
            r[k].refs += job.copy[(size_t)w * n + k].refs;
            r[k].bad |= job.copy[(size_t)w * n + k].bad;
        }
    free(job.copy);
    return rc;
}

/* Does a jump table that retarget_tables may write share bytes with run R? */
static int
overlaps_table(const cfg_prog_t *prog, const run_t *r)
{
    for (uint32_t t = 0; t < prog->ntables; t++) {
        const cfg_table_t *tb = &prog->tables[t];
        if (!word_table(prog, tb) && tb->addr < r->hi
            && r->lo < tb->addr + (uint64_t)tb->nentries * tb->entry_size)
            return 1;
    }
    return 0;
}

/* Write run R's words (and in a PIE their relocations' addends) with the new addresses:
 * 1 when written, 0 when a word cannot be (then nothing is), or QP_E*. */
static int
write_run(ed_plan_t *plan, const run_t *r, const qp_space_ops_t *ops, void *space)
{
    const cfg_image_t *img = plan->prog->img;
    int pie = (img->flags & CFG_IMG_PIE) != 0;
    size_t nw = (size_t)((r->hi - r->lo) / 8);
    uint64_t *w = malloc(nw * sizeof(uint64_t));
    if (w == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < nw; i++) {
        uint64_t at = r->lo + 8 * i, old;
        const cfg_reloc_t *rl = pie ? cfg_image_reloc_at(img, at) : NULL;
        if (pie) {
            old = rl->value;
            /* (addend_at 0: a RELR relocation, which adds the base to the word in place;
             * the reader takes RELA entries from loaded sections only) */
        } else {
            size_t avail;
            memcpy(&old, cfg_image_ptr(img, at, &avail), 8);
        }
        w[i] = edl_slot_new(plan, old);
        if (w[i] == 0) {
            free(w);
            return 0;
        }
    }
    int rc = ops->write(space, r->lo, w, nw * sizeof(uint64_t));
    for (size_t i = 0; i < nw && rc == 0 && pie; i++) {
        const cfg_reloc_t *rl = cfg_image_reloc_at(img, r->lo + 8 * i);
        if (rl->addend_at != 0)
            rc = ops->write(space, rl->addend_at, &w[i], 8);
    }
    free(w);
    return rc < 0 ? rc : 1;
}

int
edl_retarget_labels(ed_plan_t *plan, const qp_space_ops_t *ops, void *space)
{
    const cfg_prog_t *prog = plan->prog;
    label_t *lab;
    size_t nlab, nrun = 0;
    run_t *run = NULL;
    /* The references to a table are found with the operand decoder, or where an ISA
     * has none (AArch64) with its code_ref. */
    if (plan->isa->decode_ops == NULL && plan->isa->code_ref == NULL)
        return 0;
    QP_CHECK(collect_labels(plan, &lab, &nlab));
    int rc = nlab > 0 ? edl_label_runs(prog->img, lab, nlab, &run, &nrun) : 0;
    free(lab);
    if (rc == 0 && nrun > 0) {
        check_data(prog, run, nrun);
        rc = check_code(plan, run, nrun);
    }
    for (size_t k = 0; k < nrun && rc == 0; k++) {
        if (run[k].bad || run[k].refs == 0 || overlaps_table(prog, &run[k]))
            continue;
        rc = write_run(plan, &run[k], ops, space);
        if (rc > 0) {
            plan->stats.ntables++;
            plan->stats.ntable_entries += (uint32_t)((run[k].hi - run[k].lo) / 8);
            rc = 0;
        }
    }
    free(run);
    return rc;
}
