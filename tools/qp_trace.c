/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qp trace: the block traces of a program rewritten with --driver=trace or trace-naive.
 *
 *   qp trace blocks PROG [TRACE...]   one line per block run: its address (0x...), in
 *                                     order; lines starting with '#' mark where the
 *                                     walk could not follow exactly (report/qp_trace.h)
 *   qp trace insns PROG [TRACE...]    one line per instruction run: its address, in
 *                                     order (the blocks' instructions; '#' marks alike)
 *   qp trace stats PROG [TRACE...]    per trace: records, bytes, blocks, bytes per block,
 *                                     marks, and a hash of the block sequence (equal
 *                                     traces have equal hashes); with --trace-mem
 *                                     also accesses and bytes per access; what was not
 *                                     traced (calls of code not traced, by name; the
 *                                     procedures left in place; cuts). The other
 *                                     commands note those calls on stderr
 *   qp trace mem PROG [TRACE...]      (--trace-mem) one line per data access, in order:
 *                                     "L|S|M ADDR SIZE INSN" (load, store, modify: a
 *                                     load and a store of the same bytes), hex 0x
 *                                     addresses (run-time ones), INSN the instruction's
 *                                     link-time address
 *   qp trace text PROG                the traced code: one line "0xSTART 0xEND" per
 *                                     block (to filter other tools' traces)
 *   qp trace cachesim [--l1 SIZE:WAYS:LINE] [--ll SIZE:WAYS:LINE] PROG [TRACE...]
 *                                     the address trace through a two-level LRU data
 *                                     cache (default 32k:8:64 and 8m:16:64), as
 *                                     cachegrind's D1 and LL; threads one after another
 *
 * Without TRACE, every PROG.trace.TID beside PROG (thread ids ascending); with several,
 * each thread's trace follows a line "# thread TID".
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch/qp_err.h"
#include "report/qp_cachesim.h"
#include "report/qp_trace.h"
#include "tools/qp_tool.h"
#include "tools/tool.h"

static int
usage(FILE *f, int rc)
{
    fprintf(f, "usage: qp trace blocks PROG [TRACE...]\n"
               "       qp trace insns PROG [TRACE...]\n"
               "       qp trace stats PROG [TRACE...]\n"
               "       qp trace mem PROG [TRACE...]   (rewritten with --trace-mem)\n"
               "       qp trace text PROG\n"
               "       qp trace cachesim [--l1 SIZE:WAYS:LINE] [--ll SIZE:WAYS:LINE] PROG [TRACE...]\n"
               "PROG: a program rewritten with qpt-rewrite --driver=trace or trace-naive;\n"
               "TRACE: its trace files (default: every PROG.trace.TID)\n");
    return rc;
}

/* The callees most called of U (D's list of code not traced): ": name N, ...", and
 * the calls through pointers (no name). */
static void
untraced_callees(FILE *f, const qp_trace_desc_t *d, const qp_trace_untraced_t *u)
{
    enum { SHOWN = 8 };
    uint32_t top[SHOWN], more;
    uint64_t pointers;
    uint32_t k = qp_trace_untraced_top(d, u, top, SHOWN, &more, &pointers);
    for (uint32_t j = 0; j < k; j++)
        fprintf(f, "%s%s%s %llu", j ? ", " : ": ", d->out_names + d->outs[top[j]].name,
                d->outs[top[j]].kind == QPT_TO_LEFT ? " (left in place)" : "",
                (unsigned long long)u->by[top[j]]);
    if (more)
        fprintf(f, ", %u more", more);
    if (pointers)
        fprintf(f, "%sthrough pointers %llu", k ? ", " : ": ", (unsigned long long)pointers);
}

typedef struct out {
    FILE *f;
    qp_trace_untraced_t u, total; /* what this trace, all traces, do not cover */
    const qp_trace_desc_t *d; /* insns */
    qp_cachesim_t *sim; /* cachesim */
    uint64_t hash; /* FNV-1a over the blocks' addresses, in order (stats) */
    /* Progress on stderr when it is a terminal and the output is not. */
    int progress;
    const char *path;       /* the trace being walked, the K-th of N */
    size_t k, n;
    uint64_t done;          /* blocks (or accesses) given to the sink so far */
    char buf[1 << 16];
} out_t;

/* "qp: trace: PATH (K of N): 24M blocks..." every 2^22 blocks or accesses; WHAT NULL:
 * the phase line, or "" to clear it. */
static void
show(out_t *o, const char *what)
{
    if (!o->progress)
        return;
    if (what == NULL)
        fprintf(stderr, "\rqp: trace: %s (%zu of %zu): %lluM blocks or accesses...\033[K",
                o->path, o->k, o->n, (unsigned long long)(o->done >> 20));
    else if (what[0])
        fprintf(stderr, "\rqp: trace: %s (%zu of %zu): %s...\033[K", o->path, o->k, o->n,
                what);
    else
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

static inline void
tick(out_t *o)
{
    if ((++o->done & ((1u << 22) - 1)) == 0)
        show(o, NULL);
}

static int
hash_block(void *arg, uint32_t block, uint64_t addr)
{
    out_t *o = arg;
    tick(o);
    qp_trace_untraced_block(&o->u, o->d, block);
    for (int i = 0; i < 8; i++) {
        o->hash ^= (addr >> (8 * i)) & 0xff;
        o->hash *= 0x100000001b3ull;
    }
    return 0;
}

static int
on_block(void *arg, uint32_t block, uint64_t addr)
{
    out_t *o = arg;
    tick(o);
    qp_trace_untraced_block(&o->u, o->d, block);
    fprintf(o->f, "0x%llx\n", (unsigned long long)addr);
    return 0;
}

static int
on_block_insns(void *arg, uint32_t block, uint64_t addr)
{
    out_t *o = arg;
    tick(o);
    qp_trace_untraced_block(&o->u, o->d, block);
    for (uint32_t i = o->d->ifirst[block]; i < o->d->ifirst[block + 1]; i++) {
        fprintf(o->f, "0x%llx\n", (unsigned long long)addr);
        addr += o->d->ilen[i];
    }
    return 0;
}

static int
on_mark(void *arg, const char *what, uint64_t addr)
{
    out_t *o = arg;
    qp_trace_untraced_mark(&o->u, what);
    if (addr)
        fprintf(o->f, "# %s (at 0x%llx)\n", what, (unsigned long long)addr);
    else
        fprintf(o->f, "# %s\n", what);
    return 0;
}

static int
on_access(void *arg, unsigned access, uint64_t addr, uint32_t size, uint64_t insn)
{
    out_t *o = arg;
    tick(o);
    fprintf(o->f, "%c 0x%llx %u 0x%llx\n", access == 3 ? 'M' : access == 2 ? 'S' : 'L',
            (unsigned long long)addr, size, (unsigned long long)insn);
    return 0;
}

static int
sim_access(void *arg, unsigned access, uint64_t addr, uint32_t size, uint64_t insn)
{
    (void)insn;
    out_t *o = arg;
    tick(o);
    qp_cachesim_access(o->sim, addr, size, access == QPT_TM_STORE);
    return 0;
}

static int
count_access(void *arg, unsigned access, uint64_t addr, uint32_t size, uint64_t insn)
{
    tick(arg);
    (void)access;
    (void)addr;
    (void)size;
    (void)insn;
    return 0;
}

static int
count_mark(void *arg, const char *what, uint64_t addr)
{
    (void)addr;
    out_t *o = arg;
    qp_trace_untraced_mark(&o->u, what);
    return 0;
}

/* One line of qp trace stats: what this trace does not cover. */
static void
untraced_stats(FILE *f, const qp_trace_desc_t *d, const char *path, uint64_t tid,
               const qp_trace_untraced_t *u)
{
    fprintf(f, "%s: tid %llu: not traced: %llu calls of code that is not traced (shared "
               "libraries through the PLT or GOT, procedures left in place, pointers to such code: "
               "what it ran is not in this trace, its callbacks into traced code are), %llu "
               "calls of C library functions that never call back (memcpy, ...), %llu places "
               "cut; calls",
            path, (unsigned long long)tid, (unsigned long long)u->calls,
            (unsigned long long)u->leaf, (unsigned long long)u->cuts);
    untraced_callees(f, d, u);
    fputc('\n', f);
}

/* qp trace stats: the procedures the rewrite left in place (not traced), once. */
static void
untraced_procs(FILE *f, const char *prog, const qp_trace_desc_t *d)
{
    if (d->outs == NULL) {
        fprintf(f, "%s: %u procedures traced; the description does not list the code not "
                   "traced (rewritten by an older qpt-rewrite)\n", prog, d->hdr.nprocs);
        return;
    }
    fprintf(f, "%s: %u procedures traced, %u left in place by the rewrite (not traced)", prog,
            d->hdr.nprocs, qp_trace_left_in_place(d));
    uint32_t k = 0;
    for (uint32_t i = 0; i < d->nouts && k <= 8; i++) {
        if (d->outs[i].kind != QPT_TO_LEFT)
            continue;
        if (k == 8)
            fprintf(f, ", ...");
        else
            fprintf(f, "%s%s", k == 0 ? ": " : ", ", d->out_names + d->outs[i].name);
        k++;
    }
    fputc('\n', f);
}

/* The note at the end of qp trace blocks, insns, mem and cachesim (stderr: their output
 * stays a list of blocks, instructions or accesses). */
static void
untraced_note(const qp_trace_desc_t *d, const qp_trace_untraced_t *u)
{
    if (u->calls + u->leaf == 0)
        return;
    fprintf(stderr, "qp: trace: not traced: %llu calls of code that is not traced and %llu "
                    "of C library functions that never call back: what they ran is not in "
                    "this trace (qp trace stats); calls",
            (unsigned long long)u->calls, (unsigned long long)u->leaf);
    untraced_callees(stderr, d, u);
    fputc('\n', stderr);
}

static int
cmp_tid(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    unsigned long long u = strtoull(strrchr(x, '.') + 1, NULL, 10);
    unsigned long long v = strtoull(strrchr(y, '.') + 1, NULL, 10);
    return u < v ? -1 : u > v;
}

/* PROG.trace.TID files beside PROG, sorted by TID: malloc'ed names in *V. */
static int
find_traces(const char *prog, char ***v, size_t *n)
{
    char dir[4096], base[4096];
    const char *slash = strrchr(prog, '/');
    if (slash) {
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - prog), prog);
        snprintf(base, sizeof(base), "%s.trace.", slash + 1);
    } else {
        snprintf(dir, sizeof(dir), ".");
        snprintf(base, sizeof(base), "%s.trace.", prog);
    }
    if (dir[0] == '\0')
        snprintf(dir, sizeof(dir), "/");
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    size_t k = 0, cap = 16;
    char **names = malloc(cap * sizeof(char *));
    struct dirent *e;
    size_t bl = strlen(base);
    while (names != NULL && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, base, bl) != 0 || e->d_name[bl] == '\0'
            || strspn(e->d_name + bl, "0123456789") != strlen(e->d_name + bl))
            continue;
        if (k == cap) {
            char **nv = realloc(names, 2 * cap * sizeof(char *));
            if (nv == NULL)
                break;
            names = nv;
            cap *= 2;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if ((names[k] = malloc(len)) == NULL)
            break;
        snprintf(names[k], len, "%s/%s", dir, e->d_name);
        k++;
    }
    closedir(d);
    if (names == NULL)
        return -1;
    qsort(names, k, sizeof(char *), cmp_tid);
    *v = names;
    *n = k;
    return 0;
}

enum { MODE_BLOCKS, MODE_STATS, MODE_MEM, MODE_SIM, MODE_INSNS };

static int
one_trace(const qp_trace_desc_t *d, const char *path, int mode, int header, out_t *o)
{
    char why[600];
    qpt_trace_file_t h;
    uint32_t *rec = NULL;
    uint64_t *vals = NULL;
    size_t n = 0, nvals = 0;
    uint64_t bytes = 0, nacc = 0, bias = 0;
    int stats = mode == MODE_STATS;
    o->path = path;
    o->k++;
    o->done = 0;
    show(o, "reading");
    if (qp_trace_file_read_vals(path, &h, &rec, &n, &vals, &nvals, &bias, &bytes, why,
                                sizeof(why)) < 0) {
        show(o, "");
        fprintf(stderr, "qp: %s\n", why);
        return 1;
    }
    show(o, "regenerating");
    if (h.id != d->hdr.id) {
        show(o, "");
        fprintf(stderr, "qp: %s: a trace of another program (or of another rewrite of it)\n",
                path);
        free(rec);
        free(vals);
        return 1;
    }
    if (header && mode != MODE_STATS && mode != MODE_SIM)
        fprintf(o->f, "# thread %llu\n", (unsigned long long)h.tid);
    o->hash = 0xcbf29ce484222325ull;
    qp_trace_untraced_reset(&o->u, d);
    qp_trace_sink_t sink = { stats ? hash_block : mode == MODE_INSNS ? on_block_insns : on_block,
                             stats ? count_mark : on_mark, o, NULL };
    qp_trace_stats_t st;
    qp_trace_mem_sink_t msink = { stats ? count_access : mode == MODE_SIM ? sim_access : on_access,
                                  stats || mode == MODE_SIM ? count_mark : on_mark, o };
    int rc = mode == MODE_MEM || mode == MODE_SIM ? qp_trace_mem_regen(d, rec, n, vals, nvals, bias, &msink, &st, &nacc)
                              : qp_trace_regen(d, rec, n, &sink, &st);
    if (rc == 0 && stats && d->mblocks != NULL) {
        qp_trace_stats_t st2;
        qp_trace_untraced_t keep = o->u; /* the second walk marks the same places again */
        rc = qp_trace_mem_regen(d, rec, n, vals, nvals, bias, &msink, &st2, &nacc);
        o->u = keep;
    }
    if (rc == 0 && (mode == MODE_MEM || mode == MODE_SIM)) /* no blocks in the address walk */
        rc = qp_trace_untraced_walk(d, rec, n, &o->u);
    qp_trace_untraced_end(&o->u, d);
    qp_trace_untraced_add(&o->total, &o->u, d);
    free(rec);
    free(vals);
    show(o, "");
    if (rc < 0) {
        fprintf(stderr, "qp: %s: %s\n", path,
                rc == QP_EINVAL ? "a record names no event of the program's trace description"
                                : qp_strerror(rc));
        return 1;
    }
    if (stats) {
        fprintf(o->f, "%s: tid %llu: %llu records, %llu bytes, %llu blocks, %.3f bytes per "
                      "block, %llu marks, blocks hash %016llx%s\n",
                path, (unsigned long long)h.tid, (unsigned long long)st.records,
                (unsigned long long)bytes, (unsigned long long)st.blocks,
                st.blocks ? (double)bytes / (double)st.blocks : 0.0,
                (unsigned long long)st.marks, (unsigned long long)o->hash,
                st.complete ? "" : ", incomplete");
        if (d->mblocks != NULL)
            fprintf(o->f, "%s: tid %llu: %llu data accesses, %llu address values, %.3f bytes "
                          "per access (all records), load bias 0x%llx\n",
                    path, (unsigned long long)h.tid, (unsigned long long)nacc,
                    (unsigned long long)nvals, nacc ? (double)bytes / (double)nacc : 0.0,
                    (unsigned long long)bias);
        untraced_stats(o->f, d, path, h.tid, &o->u);
    }
    return 0;
}

int
qp_trace_main(int argc, char **argv)
{
    if (argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0))
        return usage(stdout, 0);
    if (argc < 4)
        return usage(stderr, 2);
    int mode = strcmp(argv[2], "stats") == 0 ? MODE_STATS
        : strcmp(argv[2], "mem") == 0        ? MODE_MEM
        : strcmp(argv[2], "cachesim") == 0   ? MODE_SIM
        : strcmp(argv[2], "insns") == 0      ? MODE_INSNS
                                             : MODE_BLOCKS;
    static qp_cachesim_t sim;
    const char *l1 = "32k:8:64", *ll = "8m:16:64";
    int first = 3;
    while (mode == MODE_SIM && first + 1 < argc
           && (strcmp(argv[first], "--l1") == 0 || strcmp(argv[first], "--ll") == 0)) {
        if (strcmp(argv[first], "--l1") == 0)
            l1 = argv[first + 1];
        else
            ll = argv[first + 1];
        first += 2;
    }
    if (mode == MODE_SIM) {
        if (qp_cache_parse(l1, &sim.l1) < 0 || qp_cache_parse(ll, &sim.ll) < 0) {
            fprintf(stderr, "qp: trace cachesim: a cache is SIZE:WAYS:LINE (e.g. 32k:8:64; "
                            "LINE and SIZE/(WAYS*LINE) powers of 2): %s\n",
                    qp_cache_parse(l1, &sim.l1) < 0 ? l1 : ll);
            return 2;
        }
        if (first >= argc)
            return usage(stderr, 2);
        if (qp_cache_init(&sim.l1) < 0 || qp_cache_init(&sim.ll) < 0) {
            fprintf(stderr, "qp: trace cachesim: out of memory\n");
            return 1;
        }
        argv += first - 3;
        argc -= first - 3;
    }
    int text = strcmp(argv[2], "text") == 0;
    if (!text && mode == MODE_BLOCKS && strcmp(argv[2], "blocks") != 0) {
        fprintf(stderr, "qp: trace: unknown command '%s' (blocks, insns, stats, mem, text, cachesim)\n",
                argv[2]);
        return 2;
    }
    const char *prog = argv[3];
    qp_trace_desc_t d;
    char why[600];
    if (qp_trace_desc_read(prog, &d, why, sizeof(why)) < 0) {
        fprintf(stderr, "qp: %s\n", why);
        return 1;
    }
    if ((mode == MODE_MEM || mode == MODE_SIM || text) && d.mblocks == NULL) {
        fprintf(stderr, "qp: %s: no address-trace description: not rewritten with --trace-mem\n",
                prog);
        qp_trace_desc_free(&d);
        return 1;
    }
    if (text) {
        for (uint32_t b = 0; b < d.hdr.nblocks; b++)
            printf("0x%llx 0x%llx\n", (unsigned long long)d.blocks[b].start,
                   (unsigned long long)d.mblocks[b].end);
        qp_trace_desc_free(&d);
        return fflush(stdout) != 0;
    }
    char **files = NULL;
    size_t nfiles = 0;
    int owned = 0;
    if (argc > 4) {
        files = argv + 4;
        nfiles = (size_t)(argc - 4);
    } else if (find_traces(prog, &files, &nfiles) < 0 || nfiles == 0) {
        fprintf(stderr, "qp: %s: no trace files (%s.trace.TID); run the program first\n", prog,
                prog);
        qp_trace_desc_free(&d);
        free(files);
        return 1;
    } else
        owned = 1;
    static out_t o;
    o.f = stdout;
    o.d = &d;
    o.sim = &sim;
    if (qp_trace_untraced_init(&o.u, &d) < 0 || qp_trace_untraced_init(&o.total, &d) < 0) {
        fprintf(stderr, "qp: trace: out of memory\n");
        return 1;
    }
    setvbuf(stdout, o.buf, _IOFBF, sizeof(o.buf));
    o.progress = isatty(STDERR_FILENO) && !isatty(STDOUT_FILENO);
    o.n = nfiles;
    int rc = 0;
    if (mode == MODE_STATS)
        untraced_procs(o.f, prog, &d);
    for (size_t i = 0; i < nfiles && rc == 0; i++)
        rc = one_trace(&d, files[i], mode, nfiles > 1, &o);
    if (rc == 0 && mode != MODE_STATS)
        untraced_note(&d, &o.total);
    if (rc == 0 && mode == MODE_SIM) {
        uint64_t refs = sim.reads + sim.writes;
        uint64_t m1 = sim.l1_read_misses + sim.l1_write_misses;
        uint64_t ml = sim.ll_read_misses + sim.ll_write_misses;
        printf("D   refs: %llu (%llu reads, %llu writes; a modify is a read)\n",
               (unsigned long long)refs, (unsigned long long)sim.reads,
               (unsigned long long)sim.writes);
        printf("D1  misses: %llu (%llu reads, %llu writes), %.4f%%  [%s]\n",
               (unsigned long long)m1, (unsigned long long)sim.l1_read_misses,
               (unsigned long long)sim.l1_write_misses, refs ? 100.0 * (double)m1 / (double)refs : 0.0,
               l1);
        printf("LLd misses: %llu (%llu reads, %llu writes), %.4f%%  [%s]\n",
               (unsigned long long)ml, (unsigned long long)sim.ll_read_misses,
               (unsigned long long)sim.ll_write_misses, refs ? 100.0 * (double)ml / (double)refs : 0.0,
               ll);
    }
    qp_cache_free(&sim.l1);
    qp_cache_free(&sim.ll);
    if (owned) {
        for (size_t i = 0; i < nfiles; i++)
            free(files[i]);
        free(files);
    }
    qp_trace_desc_free(&d);
    qp_trace_untraced_free(&o.u);
    qp_trace_untraced_free(&o.total);
    if (fflush(stdout) != 0 && rc == 0) {
        fprintf(stderr, "qp: trace: write error\n");
        rc = 1;
    }
    return rc;
}
