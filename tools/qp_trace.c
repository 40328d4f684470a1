/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qp trace: the block traces of a program rewritten with --driver=trace or trace-naive.
 *
 *   qp trace blocks PROG [TRACE...]   one line per block run: its address (0x...), in
 *                                     order; lines starting with '#' mark where the
 *                                     walk could not follow exactly (qpt_report.h)
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

#include "include/qpt/qpt.h"
#include "include/qpt/qpt_report.h"
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
untraced_callees(FILE *f, const qpt_tr_desc_t *d, const qpt_tr_untraced_t *u)
{
    enum { SHOWN = 8 };
    uint32_t top[SHOWN], more;
    uint64_t pointers;
    uint32_t k = qpt_tr_untraced_top(u, top, SHOWN, &more, &pointers);
    for (uint32_t j = 0; j < k; j++)
        fprintf(f, "%s%s%s %llu", j ? ", " : ": ", qpt_tr_untraced_name(d, top[j]),
                qpt_tr_untraced_is_left(d, top[j]) ? " (left in place)" : "",
                (unsigned long long)qpt_tr_untraced_by(u, top[j]));
    if (more)
        fprintf(f, ", %u more", more);
    if (pointers)
        fprintf(f, "%sthrough pointers %llu", k ? ", " : ": ", (unsigned long long)pointers);
}

typedef struct out {
    FILE *f;
    qpt_tr_untraced_t *u, *total; /* what this trace, all traces, do not cover */
    const qpt_tr_desc_t *d; /* insns */
    qpt_tr_cachesim_t *sim; /* cachesim */
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
    qpt_tr_untraced_block(o->u, block);
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
    qpt_tr_untraced_block(o->u, block);
    fprintf(o->f, "0x%llx\n", (unsigned long long)addr);
    return 0;
}

static int
on_block_insns(void *arg, uint32_t block, uint64_t addr)
{
    out_t *o = arg;
    tick(o);
    qpt_tr_untraced_block(o->u, block);
    const uint8_t *len;
    uint32_t n = qpt_tr_block_insns(o->d, block, &len);
    for (uint32_t i = 0; i < n; i++) {
        fprintf(o->f, "0x%llx\n", (unsigned long long)addr);
        addr += len[i];
    }
    return 0;
}

static int
on_mark(void *arg, const char *what, uint64_t addr)
{
    out_t *o = arg;
    qpt_tr_untraced_mark(o->u, what);
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
    qpt_tr_cachesim_access(o->sim, addr, size, access == QPT_TR_STORE);
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
    qpt_tr_untraced_mark(o->u, what);
    return 0;
}

static int
ignore_mark(void *arg, const char *what, uint64_t addr)
{
    (void)arg;
    (void)what;
    (void)addr;
    return 0;
}

/* One line of qp trace stats: what this trace does not cover. */
static void
untraced_stats(FILE *f, const qpt_tr_desc_t *d, const char *path, uint64_t tid,
               const qpt_tr_untraced_t *u)
{
    qpt_tr_untraced_counts_t c;
    qpt_tr_untraced_counts(u, &c);
    fprintf(f, "%s: tid %llu: not traced: %llu calls of code that is not traced (shared "
               "libraries through the PLT or GOT, procedures left in place, pointers to such code: "
               "what it ran is not in this trace, its callbacks into traced code are), %llu "
               "calls of C library functions that never call back (memcpy, ...), %llu places "
               "cut; calls",
            path, (unsigned long long)tid, (unsigned long long)c.calls,
            (unsigned long long)c.leaf, (unsigned long long)c.cuts);
    untraced_callees(f, d, u);
    fputc('\n', f);
}

/* qp trace stats: the procedures the rewrite left in place (not traced), once. */
static void
untraced_procs(FILE *f, const char *prog, const qpt_tr_desc_t *d)
{
    qpt_tr_desc_info_t di;
    qpt_tr_desc_info(d, &di);
    if (!di.lists_untraced) {
        fprintf(f, "%s: %u procedures traced; the description does not list the code not "
                   "traced (rewritten by an older qpt-rewrite)\n", prog, di.nprocs);
        return;
    }
    fprintf(f, "%s: %u procedures traced, %u left in place by the rewrite (not traced)", prog,
            di.nprocs, di.left_in_place);
    uint32_t k = 0;
    for (uint32_t i = 0; i < di.nuntraced && k <= 8; i++) {
        if (!qpt_tr_untraced_is_left(d, i))
            continue;
        if (k == 8)
            fprintf(f, ", ...");
        else
            fprintf(f, "%s%s", k == 0 ? ": " : ", ", qpt_tr_untraced_name(d, i));
        k++;
    }
    fputc('\n', f);
}

/* The note at the end of qp trace blocks, insns, mem and cachesim (stderr: their output
 * stays a list of blocks, instructions or accesses). */
static void
untraced_note(const qpt_tr_desc_t *d, const qpt_tr_untraced_t *u)
{
    qpt_tr_untraced_counts_t c;
    qpt_tr_untraced_counts(u, &c);
    if (c.calls + c.leaf == 0)
        return;
    fprintf(stderr, "qp: trace: not traced: %llu calls of code that is not traced and %llu "
                    "of C library functions that never call back: what they ran is not in "
                    "this trace (qp trace stats); calls",
            (unsigned long long)c.calls, (unsigned long long)c.leaf);
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
one_trace(const qpt_tr_desc_t *d, const char *path, int mode, int header, out_t *o)
{
    char why[600];
    qpt_tr_file_t *tf = NULL;
    uint64_t nacc = 0;
    int stats = mode == MODE_STATS;
    o->path = path;
    o->k++;
    o->done = 0;
    show(o, "reading");
    if (qpt_tr_file_read(path, &tf, why, sizeof(why)) < 0) {
        show(o, "");
        fprintf(stderr, "qp: %s\n", why);
        return 1;
    }
    show(o, "regenerating");
    if (!qpt_tr_file_matches(tf, d)) {
        show(o, "");
        fprintf(stderr, "qp: %s: a trace of another program (or of another rewrite of it)\n",
                path);
        qpt_tr_file_free(tf);
        return 1;
    }
    qpt_tr_file_info_t h;
    qpt_tr_file_info(tf, &h);
    qpt_tr_desc_info_t di;
    qpt_tr_desc_info(d, &di);
    if (header && mode != MODE_STATS && mode != MODE_SIM)
        fprintf(o->f, "# thread %llu\n", (unsigned long long)h.tid);
    o->hash = 0xcbf29ce484222325ull;
    qpt_tr_untraced_reset(o->u);
    qpt_tr_sink_t sink = { stats ? hash_block : mode == MODE_INSNS ? on_block_insns : on_block,
                           stats ? count_mark : on_mark, o, NULL };
    qpt_tr_stats_t st;
    qpt_tr_mem_sink_t msink = { stats ? count_access : mode == MODE_SIM ? sim_access : on_access,
                                stats || mode == MODE_SIM ? count_mark : on_mark, o };
    int rc = mode == MODE_MEM || mode == MODE_SIM ? qpt_tr_mem_regen(d, tf, &msink, &st, &nacc)
                              : qpt_tr_regen(d, tf, &sink, &st);
    if (rc == 0 && stats && di.has_mem) {
        qpt_tr_stats_t st2;
        /* the second walk meets the same marks again: not counted twice */
        msink.mark = ignore_mark;
        rc = qpt_tr_mem_regen(d, tf, &msink, &st2, &nacc);
    }
    if (rc == 0 && (mode == MODE_MEM || mode == MODE_SIM)) /* no blocks in the address walk */
        rc = qpt_tr_untraced_walk(tf, o->u);
    qpt_tr_untraced_end(o->u);
    qpt_tr_untraced_add(o->total, o->u);
    qpt_tr_file_free(tf);
    show(o, "");
    if (rc < 0) {
        fprintf(stderr, "qp: %s: %s\n", path,
                rc == QPT_EINVAL ? "a record names no event of the program's trace description"
                                 : qpt_strerror(rc));
        return 1;
    }
    if (stats) {
        fprintf(o->f, "%s: tid %llu: %llu records, %llu bytes, %llu blocks, %.3f bytes per "
                      "block, %llu marks, blocks hash %016llx%s\n",
                path, (unsigned long long)h.tid, (unsigned long long)st.records,
                (unsigned long long)h.bytes, (unsigned long long)st.blocks,
                st.blocks ? (double)h.bytes / (double)st.blocks : 0.0,
                (unsigned long long)st.marks, (unsigned long long)o->hash,
                st.complete ? "" : ", incomplete");
        if (di.has_mem)
            fprintf(o->f, "%s: tid %llu: %llu data accesses, %llu address values, %.3f bytes "
                          "per access (all records), load bias 0x%llx\n",
                    path, (unsigned long long)h.tid, (unsigned long long)nacc,
                    (unsigned long long)h.nvals, nacc ? (double)h.bytes / (double)nacc : 0.0,
                    (unsigned long long)h.bias);
        untraced_stats(o->f, d, path, h.tid, o->u);
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
    qpt_tr_cachesim_t *sim = NULL;
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
        if (!qpt_tr_cache_spec_ok(l1) || !qpt_tr_cache_spec_ok(ll)) {
            fprintf(stderr, "qp: trace cachesim: a cache is SIZE:WAYS:LINE (e.g. 32k:8:64; "
                            "LINE and SIZE/(WAYS*LINE) powers of 2): %s\n",
                    !qpt_tr_cache_spec_ok(l1) ? l1 : ll);
            return 2;
        }
        if (first >= argc)
            return usage(stderr, 2);
        if (qpt_tr_cachesim_create(l1, ll, &sim) < 0) {
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
    qpt_tr_desc_t *d = NULL;
    char why[600];
    if (qpt_tr_desc_read(prog, &d, why, sizeof(why)) < 0) {
        fprintf(stderr, "qp: %s\n", why);
        qpt_tr_cachesim_destroy(sim);
        return 1;
    }
    qpt_tr_desc_info_t di;
    qpt_tr_desc_info(d, &di);
    if ((mode == MODE_MEM || mode == MODE_SIM || text) && !di.has_mem) {
        fprintf(stderr, "qp: %s: no address-trace description: not rewritten with --trace-mem\n",
                prog);
        qpt_tr_desc_free(d);
        qpt_tr_cachesim_destroy(sim);
        return 1;
    }
    if (text) {
        for (uint32_t b = 0; b < di.nblocks; b++)
            printf("0x%llx 0x%llx\n", (unsigned long long)qpt_tr_block_start(d, b),
                   (unsigned long long)qpt_tr_block_mem_end(d, b));
        qpt_tr_desc_free(d);
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
        qpt_tr_desc_free(d);
        qpt_tr_cachesim_destroy(sim);
        free(files);
        return 1;
    } else
        owned = 1;
    static out_t o;
    o.f = stdout;
    o.d = d;
    o.sim = sim;
    if (qpt_tr_untraced_create(d, &o.u) < 0 || qpt_tr_untraced_create(d, &o.total) < 0) {
        fprintf(stderr, "qp: trace: out of memory\n");
        return 1;
    }
    setvbuf(stdout, o.buf, _IOFBF, sizeof(o.buf));
    o.progress = isatty(STDERR_FILENO) && !isatty(STDOUT_FILENO);
    o.n = nfiles;
    int rc = 0;
    if (mode == MODE_STATS)
        untraced_procs(o.f, prog, d);
    for (size_t i = 0; i < nfiles && rc == 0; i++)
        rc = one_trace(d, files[i], mode, nfiles > 1, &o);
    if (rc == 0 && mode != MODE_STATS)
        untraced_note(d, o.total);
    if (rc == 0 && mode == MODE_SIM) {
        qpt_tr_cache_counts_t sc;
        qpt_tr_cachesim_counts(sim, &sc);
        uint64_t refs = sc.reads + sc.writes;
        uint64_t m1 = sc.l1_read_misses + sc.l1_write_misses;
        uint64_t ml = sc.ll_read_misses + sc.ll_write_misses;
        printf("D   refs: %llu (%llu reads, %llu writes; a modify is a read)\n",
               (unsigned long long)refs, (unsigned long long)sc.reads,
               (unsigned long long)sc.writes);
        printf("D1  misses: %llu (%llu reads, %llu writes), %.4f%%  [%s]\n",
               (unsigned long long)m1, (unsigned long long)sc.l1_read_misses,
               (unsigned long long)sc.l1_write_misses, refs ? 100.0 * (double)m1 / (double)refs : 0.0,
               l1);
        printf("LLd misses: %llu (%llu reads, %llu writes), %.4f%%  [%s]\n",
               (unsigned long long)ml, (unsigned long long)sc.ll_read_misses,
               (unsigned long long)sc.ll_write_misses, refs ? 100.0 * (double)ml / (double)refs : 0.0,
               ll);
    }
    qpt_tr_cachesim_destroy(sim);
    if (owned) {
        for (size_t i = 0; i < nfiles; i++)
            free(files[i]);
        free(files);
    }
    qpt_tr_desc_free(d);
    qpt_tr_untraced_destroy(o.u);
    qpt_tr_untraced_destroy(o.total);
    if (fflush(stdout) != 0 && rc == 0) {
        fprintf(stderr, "qp: trace: write error\n");
        rc = 1;
    }
    return rc;
}
