/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The report model: back-traces, then flow reconstruction of every measured procedure,
 * then the flat-profile order. Only the per-procedure summary is kept, with the counts
 * of the key call sites (the passes over the whole program read those); per-block and
 * per-edge counts are solved again on demand (qp_report_flow), which is cheap.
 */
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg.h"
#include "base/qp_huge.h"
#include "report/qp_report.h"

void
qp_report_free(qp_report_t *r)
{
    if (r == NULL)
        return;
    free(r->abandoned);
    qp_flow_entries_free(&r->entries);
    free(r->left);
    free(r->procs);
    free(r->unmeasured);
    free(r->unmeasured_calls);
    free(r->plt);
    free(r->stubs);
    free(r->flat);
    free(r->plt_names);
    free(r->site_count);
    free(r->site_state);
    free(r->site_first);
    memset(r, 0, sizeof(*r));
}

const qp_proc_result_t *
qp_report_row(const qp_report_t *r, uint32_t i)
{
    return r->flat != NULL ? r->flat[i] : &r->procs[i];
}

uint64_t
qp_report_insns(const qp_report_t *r)
{
    uint64_t t;
    return __builtin_add_overflow(r->total_insns, r->plt_insns, &t) ? UINT64_MAX : t;
}

const char *
qp_report_name(const qp_report_t *r, const qp_proc_result_t *res)
{
    return res->proc == QP_VIRT ? r->stubs[res->stub].name
                                : qp_desc_str(r->desc, r->desc->procs[res->proc].name);
}

const qp_plt_stub_t *
qp_report_stub(const qp_report_t *r, const qp_proc_result_t *res)
{
    return res->proc == QP_VIRT ? &r->stubs[res->stub] : NULL;
}

int
qp_report_flow(const qp_report_t *r, uint32_t proc, qp_flow_t *out)
{
    if (r == NULL || r->desc == NULL || r->prof == NULL)
        return QP_EINVAL;
    return qp_flow_solve_in(r->desc, proc, r->prof->counters, r->prof->hdr.ncounters,
        r->abandoned, &r->entries, out);
}

int
qp_name_matches(const char *mangled, const char *name)
{
    return cfg_name_match(name, mangled, 0);
}

uint32_t
qp_desc_find_proc(const qp_desc_t *d, const char *name)
{
    if (d == NULL || name == NULL)
        return QP_VIRT;
    /* The name as stored first; then demangled names (slower: only when that fails). */
    for (int pass = 0; pass < 2; pass++) {
        uint32_t found = QP_VIRT;
        for (uint32_t i = 0; i < d->hdr.nprocs; i++) {
            const char *pn = qp_desc_str(d, d->procs[i].name);
            if (pass == 0 ? strcmp(pn, name) != 0 : !qp_name_matches(pn, name))
                continue;
            if (d->procs[i].flags & QP_PROC_MEASURED)
                return i;
            if (found == QP_VIRT)
                found = i;
        }
        if (found != QP_VIRT)
            return found;
    }
    return QP_VIRT;
}

size_t
qp_csv_field(const char *s, char *out, size_t outlen)
{
    int quote = strpbrk(s, ",\"\r\n") != NULL;
    size_t n = 0;
/* Emit one byte, counting what does not fit. */
#define EMIT(ch)                                                                         \
    do {                                                                                 \
        if (n + 1 < outlen)                                                              \
            out[n] = (ch);                                                               \
        n++;                                                                             \
    } while (0)
    if (quote)
        EMIT('"');
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            EMIT('"');
        EMIT(*p);
    }
    if (quote)
        EMIT('"');
#undef EMIT
    if (outlen > 0)
        out[n < outlen ? n : outlen - 1] = '\0';
    return n;
}

/*****************************************************************************
 * Building
 */

/* Does a counter of procedure PROC hold UINT64_MAX (saturated), or did solving it
 * overflow? */
static int
saturated(const qp_report_t *r, uint32_t proc, const qp_flow_t *f)
{
    const qp_desc_proc_t *p = &r->desc->procs[proc];
    const uint64_t *c = r->prof->counters;
    /* Not decoded: every counter of its chunk is 0 (qp_flow_zero_known said so). */
    if (!qp_desc_loaded(r->desc, proc))
        return f->insns == UINT64_MAX;
    const qp_desc_edge_t *edges = qp_desc_proc_edges(r->desc, proc);
    const qp_desc_block_t *blocks = qp_desc_proc_blocks(r->desc, proc);
    for (uint32_t e = 0; e < p->nedges; e++) {
        uint32_t k = edges[e].counter;
        if (k != QP_NOCOUNTER && c[k] == UINT64_MAX)
            return 1;
    }
    for (uint32_t b = 0; b < p->nblocks; b++) {
        uint32_t k = blocks[b].counter;
        if (k != QP_NOCOUNTER && c[k] == UINT64_MAX)
            return 1;
    }
    for (size_t v = 0; v < f->nviolations; v++)
        if (f->violations[v].kind == QP_FLOW_V_OVERFLOW)
            return 1;
    return f->insns == UINT64_MAX;
}

/*
 * Which kinds of leaving (1: longjmp, 2: throw) PROC saw in this run: its call sites of
 * longjmp or of a throw ran, or one of its landing pads did (an exception thrown
 * somewhere, perhaps in code that is not measured, was caught or cleaned up here).
 */
static int
leaving_ran(const qp_desc_t *d, uint32_t proc, const qp_flow_t *f)
{
    const qp_desc_proc_t *p = &d->procs[proc];
    int ran = 0;
    const qp_desc_edge_t *edges = qp_desc_proc_edges(d, proc);
    if (p->flags & QP_PROC_APPROX_EH)
        for (uint32_t e = 0; e < p->nedges; e++)
            if (edges[e].kind == QP_EDGE_ROOT && f->edge_count[e] > 0)
                ran |= 2;
    /* Sites with flags are key sites (qp_desc_keys). */
    const qp_desc_keys_t *keys = qp_desc_keys(d);
    for (uint32_t i = keys != NULL ? keys->first[proc] : 0;
         keys != NULL && i < keys->n && keys->calls[i].block - p->block < p->nblocks; i++) {
        const qp_desc_call_t *c = &keys->calls[i];
        uint64_t n = qp_call_is_tail(c) ? f->edge_count[c->edge - p->edge]
                                        : f->block_count[c->block - p->block];
        if (n > 0)
            ran |= ((c->flags & QP_CALLF_LONGJMP) ? 1 : 0) | ((c->flags & QP_CALLF_THROW) ? 2 : 0);
    }
    return ran;
}

/* How often the jumps of PROC translated at run time went into the middle of code. */
static uint64_t
xlate_missed(const qp_desc_t *d, const qp_profile_t *p, uint32_t proc)
{
    uint32_t miss = d->procs[proc].miss;
    return (d->procs[proc].flags & QP_PROC_XLATE) && miss != 0 && miss <= p->hdr.ncounters
        ? p->counters[miss - 1]
        : 0;
}

/* The flow of PROC as far as result_of needs it (counts, states and violations left
 * out) from its zero-input summary Z: everything 0. */
static void
zero_flow(uint32_t proc, const qp_flow_zero_t *z, qp_flow_t *f)
{
    memset(f, 0, sizeof(*f));
    f->proc = proc;
    f->calls_known = z->calls_known;
    f->insns_exact = z->insns_exact;
    f->nunknown_edges = z->nunknown_edges;
}

/*
 * The result of measured procedure PROC into *RES from its flow SOLVED, or from Z when
 * its inputs are all zero (qp_flow_visit_fn's); the kinds of leaving it saw into *RAN.
 */
static void
result_of(const qp_report_t *r, uint32_t proc, const qp_flow_t *solved,
          const qp_flow_zero_t *z, qp_proc_result_t *res, int *ran)
{
    qp_flow_t zf;
    const qp_flow_t *fp = solved;
    /* A procedure known to count 0 everywhere did not run: no leaving, no violation,
     * no saturated counter (saturated() reads no count of F then). */
    if (z != NULL) {
        zero_flow(proc, z, &zf);
        fp = &zf;
    } else
        *ran |= leaving_ran(r->desc, proc, solved);
    const qp_flow_t f = *fp;
    uint32_t pflags = r->desc->procs[proc].flags;
    memset(res, 0, sizeof(*res));
    res->proc = proc;
    res->stub = QP_VIRT;
    res->calls = f.calls;
    res->calls_known = (uint8_t)f.calls_known;
    res->insns = f.insns;
    res->insns_exact = (uint8_t)f.insns_exact;
    res->nviolations = (uint32_t)f.nviolations;
    res->nunknown_edges = f.nunknown_edges;
    if (pflags & QP_PROC_APPROX_EH)
        res->flags |= QP_RES_APPROX_EH;
    if (pflags & QP_PROC_APPROX_JMP)
        res->flags |= QP_RES_APPROX_JMP;
    if ((pflags & QP_PROC_APPROX_IND) || xlate_missed(r->desc, r->prof, proc))
        res->flags |= QP_RES_APPROX_IND;
    if (pflags & QP_PROC_APPROX_RESUME)
        res->flags |= QP_RES_APPROX_RESUME;
    if (f.nviolations)
        res->flags |= QP_RES_VIOLATION;
    if (!f.calls_known || !f.insns_exact)
        res->flags |= QP_RES_UNKNOWN;
    if (saturated(r, proc, &f))
        res->flags |= QP_RES_SATURATED;
}

/* The counts of PROC's kept key call sites (qp_report_site_kept: MAP) into R's
 * site_count and site_state, from its flow F (NULL: every count 0 and known). */
static void
keep_sites(qp_report_t *r, const qp_entry_map_t *map, uint32_t proc, const qp_flow_t *f)
{
    const qp_desc_proc_t *p = &r->desc->procs[proc];
    const qp_desc_keys_t *keys = qp_desc_keys(r->desc);
    uint32_t kept = r->site_first[proc];
    for (uint32_t k = keys->first[proc];
         k < keys->n && keys->calls[k].block - p->block < p->nblocks; k++) {
        if (!qp_report_site_kept(map, keys, k))
            continue;
        const qp_desc_call_t *c = &keys->calls[k];
        int tail = qp_call_is_tail(c);
        uint32_t i = tail ? c->edge - p->edge : c->block - p->block;
        int inside = i < (tail ? p->nedges : p->nblocks); /* else a bad description */
        r->site_count[kept] = f == NULL || !inside ? 0
            : tail                                ? f->edge_count[i]
                                                  : f->block_count[i];
        r->site_state[kept++] = !inside ? QP_FLOW_UNKNOWN
            : f == NULL                 ? QP_FLOW_SOLVED
            : tail                      ? f->edge_state[i]
                                        : f->block_state[i];
    }
}

/* R's site_first, and R's site_count and site_state sized for the kept key sites of
 * the measured procedures (MAP: the description's entry map). */
static int
index_sites(qp_report_t *r, const qp_entry_map_t *map)
{
    const qp_desc_t *d = r->desc;
    const qp_desc_keys_t *keys = qp_desc_keys(d);
    r->site_first = malloc((d->hdr.nprocs + 1) * sizeof(uint32_t));
    if (r->site_first == NULL)
        return QP_ENOMEM;
    uint32_t nkept = 0;
    for (uint32_t proc = 0; proc < d->hdr.nprocs; proc++) {
        const qp_desc_proc_t *p = &d->procs[proc];
        r->site_first[proc] = nkept;
        for (uint32_t k = keys->first[proc]; (p->flags & QP_PROC_MEASURED) && k < keys->n
             && keys->calls[k].block - p->block < p->nblocks; k++)
            nkept += (uint32_t)qp_report_site_kept(map, keys, k);
    }
    r->site_first[d->hdr.nprocs] = nkept;
    r->site_count = calloc(nkept + 1, sizeof(uint64_t));
    r->site_state = calloc(nkept + 1, 1);
    return r->site_count != NULL && r->site_state != NULL ? 0 : QP_ENOMEM;
}

/* The flat-profile order: instructions, then calls, descending, then name, then index.
 * qsort needs the description, hence a file-scope pointer. */
static const qp_desc_t *order_desc;

/* A row of the flat order as qsort moves it: its name's key (the first 8 bytes of the
 * name as a big-endian number: most names differ there), its procedure and row; a row
 * that ran, its counts before them. */
typedef struct name_key {
    uint64_t prefix;
    uint32_t row, proc;
} name_key_t;

typedef struct flat_key {
    uint64_t insns, calls;
    name_key_t name;
} flat_key_t;

static uint64_t
name_prefix(const char *s)
{
    uint64_t v = 0;
    int i = 0;
    for (; i < 8 && s[i] != '\0'; i++)
        v = v << 8 | (unsigned char)s[i];
    return i < 8 ? v << 8 * (8 - i) : v; /* a shorter name ends in zeros: first */
}

/* The flat-profile order of rows whose counts are alike: by name, then procedure. */
static int
cmp_name_key(const void *a, const void *b)
{
    const name_key_t *x = a, *y = b;
    if (x->prefix != y->prefix)
        return x->prefix < y->prefix ? -1 : 1;
    if ((x->prefix & 0xff) != 0) { /* 8 bytes alike, and the names go on */
        int c = strcmp(qp_desc_str(order_desc, order_desc->procs[x->proc].name),
            qp_desc_str(order_desc, order_desc->procs[y->proc].name));
        if (c != 0)
            return c;
    }
    return x->proc < y->proc ? -1 : x->proc > y->proc;
}

/* The flat-profile order on keys. */
static int
cmp_flat_key(const void *a, const void *b)
{
    const flat_key_t *x = a, *y = b;
    if (x->insns != y->insns)
        return x->insns > y->insns ? -1 : 1;
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    return cmp_name_key(&x->name, &y->name);
}

static name_key_t
name_key(const qp_report_t *r, uint32_t row)
{
    uint32_t proc = r->procs[row].proc;
    return (name_key_t) { name_prefix(qp_desc_str(r->desc, r->desc->procs[proc].name)), row,
                          proc };
}

/*
 * Into FROM[i], the row of R->procs that goes to place i of the flat order: the rows that
 * ran (counts not both 0) sorted by keys, then those that did not by name alone (chromium:
 * 89,000 and 573,000), each sort with keys of its own: one array of 32-byte keys for all
 * rows and qsort's copy of it held 42 MB at the report's peak.
 */
static int
flat_order(const qp_report_t *r, uint32_t *from)
{
    uint32_t nran = 0, n = r->nprocs;
    for (uint32_t i = 0; i < n; i++)
        nran += r->procs[i].insns != 0 || r->procs[i].calls != 0;
    flat_key_t *k = malloc((nran + 1) * sizeof(flat_key_t));
    if (k == NULL)
        return QP_ENOMEM;
    for (uint32_t i = 0, j = 0; i < n; i++)
        if (r->procs[i].insns != 0 || r->procs[i].calls != 0)
            k[j++] = (flat_key_t) { r->procs[i].insns, r->procs[i].calls, name_key(r, i) };
    qsort(k, nran, sizeof(flat_key_t), cmp_flat_key);
    for (uint32_t j = 0; j < nran; j++)
        from[j] = k[j].name.row;
    free(k);
    name_key_t *z = malloc((n - nran + 1) * sizeof(name_key_t));
    if (z == NULL)
        return QP_ENOMEM;
    for (uint32_t i = 0, j = 0; i < n; i++)
        if (r->procs[i].insns == 0 && r->procs[i].calls == 0)
            z[j++] = name_key(r, i);
    qsort(z, n - nran, sizeof(name_key_t), cmp_name_key);
    for (uint32_t j = 0; j < n - nran; j++)
        from[nran + j] = z[j].row;
    free(z);
    return 0;
}

/* R->procs in flat-profile order, sorted by keys: sorting the rows themselves
 * moved a whole row at a time and read two names for most comparisons (chromium: 316,000
 * rows that did not run, told apart by their names only). */
static int
sort_flat(qp_report_t *r)
{
    uint32_t *from = malloc((r->nprocs + 1) * sizeof(uint32_t));
    int rc = from == NULL ? QP_ENOMEM : flat_order(r, from);
    /* Row from[i] goes to i: moved in place, a cycle at a time (rows done: QP_VIRT). */
    for (uint32_t i = 0; rc == 0 && i < r->nprocs; i++) {
        if (from[i] == QP_VIRT)
            continue;
        qp_proc_result_t first = r->procs[i];
        uint32_t j = i;
        while (from[j] != i) {
            uint32_t src = from[j];
            r->procs[j] = r->procs[src];
            from[j] = QP_VIRT;
            j = src;
        }
        r->procs[j] = first;
        from[j] = QP_VIRT;
    }
    free(from);
    return rc;
}

static int
cmp_unmeasured(const void *a, const void *b)
{
    const qp_desc_proc_t *x = &order_desc->procs[*(const uint32_t *)a];
    const qp_desc_proc_t *y = &order_desc->procs[*(const uint32_t *)b];
    if (x->entry != y->entry)
        return x->entry < y->entry ? -1 : 1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

void
qp_report_mark_leaving(qp_report_t *r, int ran)
{
    const qp_desc_t *d = r->desc;
    r->nviolating = r->napprox = r->napprox_resume = r->napprox_other = 0;
    r->nunknown = r->nsaturated = 0;
    for (uint32_t k = 0; k < r->nprocs; k++) {
        qp_proc_result_t *res = &r->procs[k];
        uint32_t pflags = d->procs[res->proc].flags;
        if ((pflags & QP_PROC_LEAVE_JMP) && (ran & 1))
            res->flags |= QP_RES_APPROX_JMP;
        if ((pflags & QP_PROC_LEAVE_EH) && (ran & 2))
            res->flags |= QP_RES_APPROX_EH;
        r->nviolating += (res->flags & QP_RES_VIOLATION) != 0;
        r->napprox += (res->flags & QP_RES_APPROX_PROC) != 0;
        r->napprox_resume += (res->flags & QP_RES_APPROX_RESUME) != 0;
        r->napprox_other += (res->flags & QP_RES_APPROX_PROC & ~QP_RES_APPROX_RESUME) != 0;
        r->nunknown += (res->flags & QP_RES_UNKNOWN) != 0;
        r->nsaturated += (res->flags & QP_RES_SATURATED) != 0;
    }
}

void
qp_report_mark_leaving_all(qp_report_t *const *r, size_t n)
{
    int ran = 0;
    for (size_t k = 0; k < n; k++)
        ran |= r[k]->leaving_ran;
    for (size_t k = 0; k < n; k++)
        qp_report_mark_leaving(r[k], ran);
}

uint32_t
qp_report_unseen_leaving(const qp_report_t *r)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < r->nprocs; k++)
        n += (r->desc->procs[r->procs[k].proc].flags
                 & (QP_PROC_LEAVE_EH | QP_PROC_LEAVE_JMP))
            && !(r->procs[k].flags & (QP_RES_APPROX_EH | QP_RES_APPROX_JMP));
    return n;
}

/* The walk over the measured procedures (qp_flow_entries_visit): each one's row of
 * R->procs (by index) and key sites, then its blocks and edges are not needed again. */
typedef struct walk {
    qp_report_t *r;
    const qp_entry_map_t *map; /* the description's entry map (keep_sites) */
    uint32_t *row; /* per procedure: its row in R->procs */
    int ran;       /* leaving kinds seen in this run */
} walk_t;

static int
visit_proc(void *arg, uint32_t proc, const qp_flow_t *f, const qp_flow_zero_t *z)
{
    walk_t *w = arg;
    result_of(w->r, proc, f, z, &w->r->procs[w->row[proc]], &w->ran);
    keep_sites(w->r, w->map, proc, f);
    qp_desc_release(w->r->desc, proc);
    return 0;
}

/* Every measured procedure solved once (and the entries of those counted by their
 * calls), then the flat-profile order and the procedures not measured by address. */
static int
collect_results(qp_report_t *r, void (*phase)(void *arg, const char *name), void *arg)
{
    const qp_desc_t *d = r->desc;
    const qp_prof_hdr_t *h = &r->prof->hdr;
    uint32_t n = d->hdr.nprocs;
    qp_entry_map_t local = { 0 }; /* filled by qp_desc_entry_map when it builds one */
    walk_t w = { r, NULL, calloc(n + 1, sizeof(uint32_t)), 0 };
    r->procs = qp_calloc_whole(n ? n : 1, sizeof(qp_proc_result_t));
    r->unmeasured = calloc(n ? n : 1, sizeof(uint32_t));
    int rc = w.row && r->procs && r->unmeasured && qp_desc_keys(d) != NULL
            && qp_desc_entry_map(d, &local, &w.map) == 0
        ? index_sites(r, w.map) : QP_ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        if (!(d->procs[i].flags & QP_PROC_MEASURED))
            r->unmeasured[r->nunmeasured++] = i;
        else
            w.row[i] = r->nprocs++;
    }
    if (rc == 0)
        rc = qp_flow_entries_visit(d, r->prof->counters, h->ncounters, r->abandoned, r->left,
                                   visit_proc, &w, &r->entries);
    free(w.row);
    qp_entry_map_free(&local);
    QP_CHECK(rc);
    for (uint32_t k = 0; k < r->nprocs; k++) {
        uint64_t t;
        r->total_insns = __builtin_add_overflow(r->total_insns, r->procs[k].insns, &t)
            ? UINT64_MAX : t;
    }
    r->leaving_ran = (uint8_t)w.ran;
    qp_report_mark_leaving(r, w.ran);
    if (phase != NULL)
        phase(arg, "ordering the procedures");
    order_desc = d;
    rc = sort_flat(r);
    qsort(r->unmeasured, r->nunmeasured, sizeof(uint32_t), cmp_unmeasured);
    order_desc = NULL;
    return rc;
}

/*
 * R->abandoned from the exit back-traces of R's profile (U: its unwinder), or NULL when
 * they abandoned nothing (the flow reads NULL as all zero), and R->left the procedures
 * whose blocks it counts in (n + 1 flags, or NULL with it). Chromium's array is 109 MB: reads
 * of every measured procedure's blocks made all of it resident, as fresh pages read are
 * on a kernel that does not map its zero page for them (this machine's); with LEFT,
 * only the pages of those procedures' blocks are read.
 */
static int
abandoned_at_exits(qp_report_t *r, qp_unwinder_t *u)
{
    const qp_desc_t *d = r->desc;
    r->abandoned = calloc(d->hdr.nblocks ? d->hdr.nblocks : 1, sizeof(uint64_t));
    r->left = calloc(d->hdr.nprocs + 1, 1);
    if (r->abandoned == NULL || r->left == NULL)
        return QP_ENOMEM;
    QP_CHECK(qp_backtrace_abandoned(u, d, r->prof, r->abandoned, r->left, &r->bt));
    if (r->bt.matched == 0 && r->bt.execs == 0) {
        free(r->abandoned);
        r->abandoned = NULL;
        free(r->left);
        r->left = NULL;
    }
    return 0;
}

int
qp_report_build(
    const qp_desc_t *d, const qp_profile_t *p, qp_unwinder_t *u, qp_report_t *out)
{
    return qp_report_build_phased(d, p, u, NULL, NULL, out);
}

int
qp_report_build_phased(const qp_desc_t *d, const qp_profile_t *p, qp_unwinder_t *u,
    void (*phase)(void *arg, const char *name), void *arg, qp_report_t *out)
{
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (d == NULL || p == NULL || out == NULL || p->hdr.ncounters != d->hdr.ncounters)
        return QP_EINVAL;
    out->desc = d;
    out->prof = p;
    /* The call sites its passes look at (read by every one below). */
    int rc = qp_desc_keys(d) == NULL ? QP_ENOMEM : 0;
    if (rc == 0 && p->ndumps > 0 && u != NULL)
        rc = abandoned_at_exits(out, u);
    else if (p->ndumps > 0)
        out->bt.incomplete = p->ndumps; /* no unwinder: every dump is unused */
    if (rc == 0)
        rc = collect_results(out, phase, arg);
    if (rc < 0)
        qp_report_free(out);
    return rc;
}

int
qp_report_branch_edges(const qp_desc_t *d, uint32_t proc, uint8_t *keep)
{
    const qp_desc_proc_t *p = &d->procs[proc];
    uint32_t *npred = calloc(p->nblocks + 1, sizeof(uint32_t));
    uint8_t *cond = calloc(p->nblocks + 1, 1);
    if (npred == NULL || cond == NULL) {
        free(npred);
        free(cond);
        return QP_ENOMEM;
    }
    for (uint32_t k = 0; k < p->nedges; k++) {
        const qp_desc_edge_t *e = &d->edges[p->edge + k];
        if (e->to != QP_VIRT)
            npred[e->to - p->block]++;
        if (e->from != QP_VIRT && e->kind == CFG_EDGE_TAKEN)
            cond[e->from - p->block] = 1;
    }
    for (uint32_t k = 0; k < p->nedges; k++) {
        const qp_desc_edge_t *e = &d->edges[p->edge + k];
        keep[k] = e->from != QP_VIRT && e->to != QP_VIRT
            && (e->kind == CFG_EDGE_TAKEN || e->kind == CFG_EDGE_JUMP || e->kind == CFG_EDGE_TABLE
                || (e->kind == CFG_EDGE_FALL && cond[e->from - p->block])
                || npred[e->to - p->block] >= 2);
    }
    free(npred);
    free(cond);
    return 0;
}

int
qp_old_text_reused(const cfg_image_t *img)
{
    for (size_t i = 0; i < img->nsections; i++) {
        const cfg_section_t *m = &img->sections[i];
        if (strcmp(m->name, ".qpt.text") != 0 || m->file_off == 0)
            continue;
        for (size_t k = 0; k < img->nsections; k++) {
            const cfg_section_t *o = &img->sections[k];
            if (k != i && (o->flags & CFG_SEC_CODE) && o->file_off != 0
                && strcmp(o->name, ".qpt.text") != 0 && o->file_off < m->file_off + m->size
                && m->file_off < o->file_off + o->size)
                return 1;
        }
    }
    return 0;
}
