/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * PLT stubs counted from their callers (qp_report_count_plt, qp_report.h): which call
 * targets are PLT stubs, how many calls each got from measured code and how many
 * instructions one call runs in it, whether the module binds its symbols lazily, and
 * the flat-profile order of procedures and stubs together.
 */
#include "config.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "base/qp_search.h"
#include "report/qp_report.h"

/* The longest run of instructions looked at for a stub's first jump. */
#define PLT_MAX_INSNS 8

/* Bytes of a made-up name, "sub_" and 16 hex digits. */
#define PLT_NAME_LEN 24

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
    uint64_t t;
    return __builtin_add_overflow(a, b, &t) ? UINT64_MAX : t;
}


/*
 * Is the code at ADDR a PLT stub? As cfg/ classes procedures (cfg_discover.c): in a
 * section whose name starts with ".plt" (.plt, .plt.sec, .plt.got), or named by a
 * synthetic foo@plt symbol (the linker's .iplt of a static program).
 */
static int
is_plt(const cfg_image_t *img, uint64_t addr)
{
    const cfg_section_t *s = cfg_image_section_at(img, addr);
    if (s == NULL || !(s->flags & CFG_SEC_CODE))
        return 0;
    if (strncmp(s->name, ".plt", 4) == 0)
        return 1;
    const cfg_symbol_t *sym = cfg_image_symbol_at(img, addr);
    return sym != NULL && sym->addr == addr && sym->src == CFG_SYMSRC_PLT;
}

/* Is call site C a direct call or tail call whose count is the callee's? */
static int
is_direct(const qp_desc_call_t *c)
{
    return (c->kind == QP_CALL_DIRECT || c->kind == QP_CALL_TAIL) && c->target != 0;
}

/*
 * The instructions a call runs in the stub at ENTRY once its symbol is bound: those
 * from its entry to and including its first jump (1 for `jmp *GOT(%rip)`, 2 for
 * `endbr64; bnd jmp *GOT(%rip)`), or 0 when they do not decode as such. *SLOT gets the
 * GOT slot an indirect jump reads (rip-relative), else 0.
 */
static uint32_t
insns_per_call(const cfg_image_t *img, uint64_t entry, uint64_t *slot)
{
    *slot = 0;
    uint64_t at = entry;
    for (uint32_t n = 1; n <= PLT_MAX_INSNS; n++) {
        size_t avail;
        const uint8_t *p = cfg_image_ptr(img, at, &avail);
        arch_insn_t in;
        if (p == NULL || arch_decode(p, avail, at, &in) != 0)
            return 0;
        switch (in.kind) {
        case ARCH_KIND_JMP_IND:
            if ((in.flags & ARCH_F_RIPREL) && (in.flags & ARCH_F_MEM_IND))
                *slot = in.target;
            return n;
        case ARCH_KIND_JMP: return n;
        case ARCH_KIND_SEQ:
        case ARCH_KIND_ENDBR:
        case ARCH_KIND_NOP: at += in.len; break;
        default: return 0; /* a call, return or branch: not a stub's shape */
        }
    }
    return 0;
}



static int
cmp_stub(const void *a, const void *b)
{
    const qp_plt_stub_t *x = a, *y = b;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

const qp_proc_result_t *
qp_report_plt_at(const qp_report_t *r, uint64_t target)
{
    if (r == NULL || r->nplt == 0)
        return NULL;
    qp_plt_stub_t key = { .entry = target };
    const qp_plt_stub_t *s = bsearch(&key, r->stubs, r->nplt, sizeof(key), cmp_stub);
    return s != NULL ? &r->plt[s - r->stubs] : NULL;
}

/* The flat-profile order of report.c (instructions, calls, name, procedure), stubs
 * after procedures of the same name, by entry. */
static int
cmp_rows(const void *a, const void *b, void *arg)
{
    const qp_report_t *r = arg;
    const qp_proc_result_t *x = *(const qp_proc_result_t *const *)a;
    const qp_proc_result_t *y = *(const qp_proc_result_t *const *)b;
    if (x->insns != y->insns)
        return x->insns > y->insns ? -1 : 1;
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    int c = strcmp(qp_report_name(r, x), qp_report_name(r, y));
    if (c != 0)
        return c;
    if (x->proc != y->proc)
        return x->proc < y->proc ? -1 : 1;
    return x->stub < y->stub ? -1 : x->stub > y->stub; /* stubs[] is by entry */
}

/*****************************************************************************
 * Counting
 */

/* The calls counter of the procedure not measured whose entry is TARGET, or NULL.
 * UE[i] is the entry of unmeasured[i] (a copy in one array: a search through the
 * procedures for each of chromium's 3 million call sites missed the cache). */
static uint64_t *
unmeasured_at(const qp_report_t *r, const uint64_t *ue, uint64_t target)
{
    size_t lo = 0, hi = r->nunmeasured;
    while (lo < hi) { /* unmeasured[] is by address */
        size_t mid = lo + (hi - lo) / 2;
        uint64_t e = ue[mid];
        if (e == target)
            return r->unmeasured_calls != NULL ? &r->unmeasured_calls[mid] : NULL;
        if (e < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* What a direct call's target is: the entry of a procedure not measured (or of several
 * procedures, one perhaps not measured), of measured procedures only, or of none. */
enum { TARGET_UNMEASURED, TARGET_MEASURED, TARGET_NONE };

/* Of key call site K's target (KEYS: qp_desc_keys). Every site whose target is not a
 * measured procedure is a key site. */
static int
target_kind(const qp_entry_map_t *map, const qp_desc_keys_t *keys, uint32_t k)
{
    uint32_t p = keys->callee[k];
    if (p == QP_VIRT)
        return TARGET_NONE;
    uint8_t kind = map->kind[p];
    return (kind & QP_EMAP_SHARED) || !(kind & QP_EMAP_MEASURED) ? TARGET_UNMEASURED
                                                                : TARGET_MEASURED;
}

int
qp_report_site_kept(const qp_entry_map_t *map, const qp_desc_keys_t *keys, uint32_t k)
{
    return is_direct(&keys->calls[k]) && target_kind(map, keys, k) != TARGET_MEASURED;
}

/* The place in R->stubs[0..N-1] (by entry) of the stub at ENTRY, or where it goes. */
static size_t
stub_place(const qp_report_t *r, size_t n, uint64_t entry)
{
    return qp_lower_bound_u64(r->stubs, n, sizeof(*r->stubs), offsetof(qp_plt_stub_t, entry),
                              entry);
}

/* The stub at C's target among R->stubs[0..*N-1] (by entry; AT: its stub_place):
 * added, or its name taken from C when it has none. */
static int
add_stub(qp_report_t *r, size_t *n, size_t *cap, size_t at, const qp_desc_call_t *c)
{
    const char *name = qp_desc_str(r->desc, c->name);
    if (at < *n && r->stubs[at].entry == c->target) {
        if (r->stubs[at].name[0] == '\0')
            r->stubs[at].name = name;
        return 0;
    }
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        qp_plt_stub_t *v = realloc(r->stubs, nc * sizeof(*v));
        if (v == NULL)
            return QP_ENOMEM;
        r->stubs = v;
        *cap = nc;
    }
    memmove(&r->stubs[at + 1], &r->stubs[at], (*n - at) * sizeof(*r->stubs));
    r->stubs[at] = (qp_plt_stub_t) { .entry = c->target, .name = name };
    (*n)++;
    return 0;
}

/* The stubs that the measured procedures of R call (R->stubs, by entry, each named by
 * the first site that names it), and per measured procedure (in R->procs order) whether
 * it calls one. One entry per stub as the sites are walked: an entry per site, sorted,
 * was 2.7% of chromium's flat report (380,000 sites, 1,700 stubs). */
static int
find_stubs(qp_report_t *r, const uint64_t *ue, const qp_entry_map_t *map,
           const cfg_image_t *img, uint8_t *calls_stub)
{
    const qp_desc_t *d = r->desc;
    const qp_desc_keys_t *keys = qp_desc_keys(d);
    size_t out = 0, cap = 0;
    int rc = keys == NULL ? QP_ENOMEM : 0;
    for (uint32_t k = 0; k < r->nprocs && rc == 0; k++) {
        uint32_t proc = r->procs[k].proc;
        const qp_desc_proc_t *p = &d->procs[proc];
        for (uint32_t i = keys->first[proc];
             rc == 0 && i < keys->n && keys->calls[i].block - p->block < p->nblocks; i++) {
            const qp_desc_call_t *c = &keys->calls[i];
            int kind = is_direct(c) ? target_kind(map, keys, i) : TARGET_NONE;
            /* A stub the description lists is counted as what it is there. */
            if (kind == TARGET_UNMEASURED && unmeasured_at(r, ue, c->target) != NULL)
                calls_stub[k] = 1; /* calls a procedure not measured: counted too */
            if (!is_direct(c) || kind != TARGET_NONE)
                continue;
            size_t at = stub_place(r, out, c->target);
            if ((at < out && r->stubs[at].entry == c->target) || is_plt(img, c->target)) {
                calls_stub[k] = 1;
                rc = add_stub(r, &out, &cap, at, c);
            }
        }
    }
    if (rc < 0)
        return rc;
    r->nplt = (uint32_t)out;
    r->plt = calloc(out + 1, sizeof(*r->plt));
    r->plt_names = calloc(out + 1, PLT_NAME_LEN);
    if (r->plt == NULL || r->plt_names == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < out; i++) {
        r->plt[i] = (qp_proc_result_t) { .proc = QP_VIRT, .stub = (uint32_t)i };
        if (r->stubs[i].name[0] == '\0') {
            char *nm = r->plt_names + i * PLT_NAME_LEN;
            snprintf(nm, PLT_NAME_LEN, "sub_%" PRIx64, r->stubs[i].entry);
            r->stubs[i].name = nm;
        }
    }
    return 0;
}

/* Add the calls measured procedure RES made to the stubs, and to procedures not
 * measured: the counts of its key sites that qp_report_build kept (in order from
 * site_first: qp_report_site_kept). */
static int
add_calls(qp_report_t *r, const uint64_t *ue, const qp_entry_map_t *map,
          const qp_proc_result_t *res)
{
    const qp_desc_t *d = r->desc;
    const qp_desc_proc_t *p = &d->procs[res->proc];
    const qp_desc_keys_t *keys = qp_desc_keys(d);
    if (keys == NULL)
        return QP_ENOMEM;
    uint32_t kept = r->site_first[res->proc];
    for (uint32_t i = keys->first[res->proc];
         i < keys->n && keys->calls[i].block - p->block < p->nblocks; i++) {
        if (!qp_report_site_kept(map, keys, i))
            continue;
        const qp_desc_call_t *c = &keys->calls[i];
        qp_proc_result_t *s;
        int kind = target_kind(map, keys, i);
        uint64_t *um = kind == TARGET_UNMEASURED ? unmeasured_at(r, ue, c->target) : NULL;
        uint64_t n = r->site_count[kept];
        uint8_t state = r->site_state[kept++];
        if (um != NULL) {
            *um = sat_add(*um, n);
            r->calls_unmeasured = sat_add(r->calls_unmeasured, n);
        }
        /* Stubs are at no procedure's entry (find_stubs). */
        if (kind != TARGET_NONE
            || (s = (qp_proc_result_t *)qp_report_plt_at(r, c->target)) == NULL)
            continue;
        s->calls = sat_add(s->calls, n);
        if (state == QP_FLOW_UNKNOWN)
            s->calls_known = 0;
        if (s->calls == UINT64_MAX || (res->flags & QP_RES_SATURATED))
            s->flags |= QP_RES_SATURATED;
        if (res->flags & (QP_RES_APPROX_PROC | QP_RES_VIOLATION))
            s->flags |= QP_RES_APPROX_CALLER;
    }
    return 0;
}

/* Each stub's instructions, from its calls and what one call runs. */
static void
finish_stubs(qp_report_t *r, const cfg_image_t *img)
{
    r->plt_lazy = (img->flags & CFG_IMG_LAZY) != 0;
    r->plt_insns = 0;
    for (uint32_t i = 0; i < r->nplt; i++) {
        qp_proc_result_t *s = &r->plt[i];
        qp_plt_stub_t *st = &r->stubs[i];
        uint64_t slot;
        st->per_call = insns_per_call(img, st->entry, &slot);
        const cfg_reloc_t *rel = slot != 0 ? cfg_image_reloc_at(img, slot) : NULL;
        if (r->plt_lazy && rel != NULL && rel->kind == CFG_RELOC_JUMP_SLOT)
            s->flags |= QP_RES_APPROX_LAZY;
        if (__builtin_mul_overflow(s->calls, (uint64_t)st->per_call, &s->insns)) {
            s->insns = UINT64_MAX;
            s->flags |= QP_RES_SATURATED;
        }
        s->insns_exact = (uint8_t)(s->calls_known && st->per_call > 0);
        if (!s->insns_exact)
            s->flags |= QP_RES_UNKNOWN;
        r->plt_insns = sat_add(r->plt_insns, s->insns);
    }
}

/* R->flat: the procedures and the stubs in flat-profile order. R->procs is in that
 * order already (qp_report_build: cmp_rows orders two procedures as it does), so the
 * stubs are sorted alone and merged in (a sort of chromium's 370,000 rows, most of them
 * told apart by name only, took 0.1 s). */
static int
order_rows(qp_report_t *r)
{
    size_t n = (size_t)r->nprocs + r->nplt;
    r->flat = malloc((n + 1) * sizeof(*r->flat));
    const qp_proc_result_t **stubs = malloc((r->nplt + 1) * sizeof(*stubs));
    if (r->flat == NULL || stubs == NULL) {
        free(stubs);
        return QP_ENOMEM;
    }
    for (uint32_t k = 0; k < r->nplt; k++)
        stubs[k] = &r->plt[k];
    qsort_r(stubs, r->nplt, sizeof(*stubs), cmp_rows, r);
    size_t i = 0, j = 0, out = 0;
    while (i < r->nprocs || j < r->nplt) {
        const qp_proc_result_t *p = i < r->nprocs ? &r->procs[i] : NULL;
        if (p != NULL && (j == r->nplt || cmp_rows(&p, &stubs[j], r) < 0)) {
            r->flat[out++] = p;
            i++;
        } else
            r->flat[out++] = stubs[j++];
    }
    free(stubs);
    return 0;
}

/* Forget the stubs: R as qp_report_build left it. */
static void
drop_stubs(qp_report_t *r)
{
    free(r->plt);
    free(r->stubs);
    free(r->flat);
    free(r->plt_names);
    r->plt = NULL;
    r->stubs = NULL;
    r->flat = NULL;
    r->plt_names = NULL;
    r->nplt = 0;
    r->plt_insns = 0;
    r->plt_lazy = 0;
}

int
qp_report_count_plt(qp_report_t *r, const cfg_image_t *img)
{
    if (r == NULL || r->desc == NULL || r->prof == NULL || img == NULL)
        return QP_EINVAL;
    drop_stubs(r);
    free(r->unmeasured_calls);
    r->unmeasured_calls = calloc(r->nunmeasured + 1, sizeof(uint64_t));
    r->calls_unmeasured = 0;
    uint8_t *calls_stub = calloc(r->nprocs + 1, 1);
    uint64_t *ue = malloc((r->nunmeasured + 1) * sizeof(uint64_t));
    if (r->unmeasured_calls == NULL || ue == NULL) {
        free(calls_stub);
        free(ue);
        return QP_ENOMEM;
    }
    for (uint32_t i = 0; i < r->nunmeasured; i++)
        ue[i] = r->desc->procs[r->unmeasured[i]].entry;
    qp_entry_map_t local;
    const qp_entry_map_t *map = NULL;
    int rc = calls_stub == NULL || qp_desc_entry_map(r->desc, &local, &map) < 0
        ? QP_ENOMEM
        : find_stubs(r, ue, map, img, calls_stub);
    for (uint32_t i = 0; rc == 0 && i < r->nplt; i++)
        r->plt[i].calls_known = 1;
    for (uint32_t k = 0; rc == 0 && k < r->nprocs; k++)
        if (calls_stub[k])
            rc = add_calls(r, ue, map, &r->procs[k]);
    qp_entry_map_free(&local);
    free(ue);
    if (rc == 0) {
        finish_stubs(r, img);
        for (uint32_t i = 0; i < r->nplt; i++)
            r->plt[i].flags |= QP_RES_PLT;
        rc = order_rows(r);
    }
    free(calls_stub);
    if (rc < 0)
        drop_stubs(r);
    return rc;
}
