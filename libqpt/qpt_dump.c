/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * --dump-cfg: the analysis of a program as text (a summary, every block and edge) or as
 * Graphviz DOT, written through the caller's text callback (qpt_rewrite_dump_cfg).
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "libqpt/qpt_rewrite_priv.h"

/* Format and pass the text on. */
static void __attribute__((format(printf, 2, 3)))
put(dump_out_t *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    qpt_rw_vsay(f->fn, f->arg, fmt, ap);
    va_end(ap);
}

static double
percent(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 100.0;
}

static void
print_sources(dump_out_t *f, uint32_t sources)
{
    const char *sep = "";
    for (int s = 0; s < CFG_NSRC; s++)
        if (sources & (1u << s)) {
            put(f, "%s%s", sep, cfg_src_names[s]);
            sep = ",";
        }
}

void
qpt_dump_summary(dump_out_t *f, const cfg_prog_t *prog, int verbose)
{
    const cfg_image_t *img = prog->img;
    const cfg_stats_t *st = &prog->stats;
    put(f, "file: %s\n", img->path);
    put(f, "type: %s %s, %s, %s%s%s\n", cfg_image_isa(img)->name,
            (img->flags & CFG_IMG_SHLIB) ? "shared library"
            : (img->flags & CFG_IMG_PIE) ? ((img->flags & CFG_IMG_DYNAMIC) ? "PIE executable"
                                                                           : "static-pie executable")
                                         : "position-dependent executable",
            (img->flags & (CFG_IMG_DYNAMIC | CFG_IMG_SHLIB)) ? "dynamically linked"
                                                             : "statically linked",
            (img->flags & CFG_IMG_SYMTAB) ? "not stripped" : "stripped",
            (img->flags & CFG_IMG_IBT) ? ", IBT" : "", (img->flags & CFG_IMG_SHSTK) ? ", SHSTK" : "");
    if (img->build_id_len) {
        put(f, "build-id: ");
        for (size_t i = 0; i < img->build_id_len; i++)
            put(f, "%02x", img->build_id[i]);
        put(f, "\n");
    }
    if (img->debug_file != NULL)
        put(f, "symbols from: %s\n", img->debug_file);
    put(f, "entry: 0x%" PRIx64 "\n", img->entry);
    uint32_t nfrag = 0, nnoret = 0, nloops = 0, nplt = 0;
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        nfrag += (p->flags & CFG_PROC_FRAGMENT) != 0;
        nnoret += (p->flags & CFG_PROC_NORETURN) != 0;
        nplt += (p->flags & CFG_PROC_PLT) != 0;
        nloops += p->nloops;
    }
    put(f, "procedures: %" PRIu32 " (%" PRIu32 " cold fragments tied to their parent)\n",
            prog->nprocs, nfrag);
    put(f, "procedures by source:");
    for (int s = 0; s < CFG_NSRC; s++)
        if (st->nprocs_by_src[s])
            put(f, " %s %" PRIu32 ",", cfg_src_names[s], st->nprocs_by_src[s]);
    put(f, "\n");
    put(f, "blocks: %" PRIu32 ", edges: %" PRIu32 ", instructions: %" PRIu64
               ", loops: %" PRIu32 ", noreturn procedures: %" PRIu32 "\n",
            prog->nblocks, prog->nedges, st->ninsns, nloops, nnoret);
    put(f, "text bytes: %" PRIu64 " (%" PRIu64 " in blocks, %" PRIu64 " padding, %" PRIu64
               " dead after noreturn calls, %" PRIu64 " data or unreached)\n",
            st->text_bytes, st->block_bytes, st->padding_bytes, st->dead_bytes, st->data_bytes);
    /* Scripts rely on this exact line: covered = in blocks + padding + dead code. */
    put(f, "coverage: %.2f%% of text bytes\n",
            percent(st->block_bytes + st->padding_bytes + st->dead_bytes, st->text_bytes));
    put(f, "indirect jumps: %" PRIu32 " resolved (%" PRIu32 " jump tables), %" PRIu32
               " unresolved; indirect tail calls: %" PRIu32 "\n",
            st->nind_resolved, prog->ntables, st->nind_jumps - st->nind_resolved, st->nind_tailcalls);
    put(f, "unsafe procedures: %" PRIu32 "\n", st->nunsafe);
    uint32_t shown = 0;
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        if (p->unsafe == NULL)
            continue;
        if (!verbose && shown == 20) {
            put(f, "  ... (%" PRIu32 " more; --verbose lists all)\n", st->nunsafe - shown);
            break;
        }
        char *dm = cfg_demangle(p->name);
        put(f, "  %s at 0x%" PRIx64 ": %s\n", dm != NULL ? dm : p->name, p->entry, p->unsafe);
        free(dm);
        shown++;
    }
}

static void
print_edge(dump_out_t *f, const cfg_prog_t *prog, const cfg_edge_t *e)
{
    if (e->to != CFG_NONE)
        put(f, " 0x%" PRIx64 ":%s", prog->blocks[e->to].start, cfg_edge_kind_names[e->kind]);
    else if (e->target)
        put(f, " ->0x%" PRIx64 ":%s", e->target, cfg_edge_kind_names[e->kind]);
    else
        put(f, " %s", cfg_edge_kind_names[e->kind]);
}

void
qpt_dump_text(dump_out_t *f, const cfg_prog_t *prog)
{
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        put(f, "proc %s 0x%" PRIx64 "-0x%" PRIx64 " [", p->name, p->start, p->end);
        print_sources(f, p->sources);
        put(f, "] blocks=%" PRIu32 " loops=%" PRIu32 " tables=%" PRIu32, p->nblocks, p->nloops,
                p->ntables);
        if (p->flags & CFG_PROC_NORETURN)
            put(f, " noreturn");
        if (p->flags & CFG_PROC_FRAGMENT)
            put(f, " fragment-of=%s", p->parent != CFG_NONE ? prog->procs[p->parent].name : "?");
        if (p->unsafe)
            put(f, " unsafe=\"%s\"", p->unsafe);
        /* The demangled name last: the fields before it stay where scripts find them. */
        char *dm = cfg_demangle(p->name);
        if (dm != NULL)
            put(f, " demangled=\"%s\"", dm);
        free(dm);
        put(f, "\n");
        for (uint32_t k = p->block; k < p->block + p->nblocks; k++) {
            const cfg_block_t *b = &prog->blocks[k];
            put(f, "  block 0x%" PRIx64 "-0x%" PRIx64 " insns=%" PRIu32 " depth=%u", b->start,
                    b->end, b->ninsns, b->loop_depth);
            if (b->call_target)
                put(f, " call=0x%" PRIx64, b->call_target);
            put(f, " ->");
            for (uint32_t e = 0; e < b->nsucc; e++)
                print_edge(f, prog, cfg_block_succ(prog, b, e));
            put(f, "\n");
        }
    }
    qpt_dump_unreached(f, prog);
}

void
qpt_dump_unreached(dump_out_t *f, const cfg_prog_t *prog)
{
    for (uint32_t i = 0; i < prog->nunreached; i++) {
        const cfg_span_t *s = &prog->unreached[i];
        const cfg_proc_t *p = NULL;
        /* Name the procedure whose extent holds the bytes, if any. */
        for (uint32_t k = 0; k < prog->nprocs && p == NULL; k++)
            if (s->start >= prog->procs[k].start && s->start < prog->procs[k].end)
                p = &prog->procs[k];
        put(f, "unreached 0x%" PRIx64 "-0x%" PRIx64 " (%" PRIu64 " bytes)%s%s\n", s->start,
                s->end, s->end - s->start, p ? " in " : "", p ? p->name : "");
    }
}

void
qpt_dump_dot(dump_out_t *f, const cfg_prog_t *prog, const cfg_proc_t *p)
{
    char *dm = cfg_demangle(p->name);
    put(f, "digraph \"%s\" {\n  node [shape=box fontname=monospace];\n",
            dm != NULL ? dm : p->name);
    free(dm);
    put(f, "  exit [shape=ellipse label=\"exit\"];\n");
    for (uint32_t k = p->block; k < p->block + p->nblocks; k++) {
        const cfg_block_t *b = &prog->blocks[k];
        put(f, "  b%" PRIx64 " [label=\"0x%" PRIx64 "-0x%" PRIx64 "\\n%" PRIu32 " insns%s\"];\n",
                b->start, b->start, b->end, b->ninsns, k == p->block ? " (entry)" : "");
    }
    for (uint32_t k = p->block; k < p->block + p->nblocks; k++) {
        const cfg_block_t *b = &prog->blocks[k];
        for (uint32_t e = 0; e < b->nsucc; e++) {
            const cfg_edge_t *ed = cfg_block_succ(prog, b, e);
            if (ed->to != CFG_NONE)
                put(f, "  b%" PRIx64 " -> b%" PRIx64 " [label=\"%s\"];\n", b->start,
                        prog->blocks[ed->to].start, cfg_edge_kind_names[ed->kind]);
            else
                put(f, "  b%" PRIx64 " -> exit [label=\"%s\" style=dashed];\n", b->start,
                        cfg_edge_kind_names[ed->kind]);
        }
    }
    put(f, "}\n");
}
