/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * libqpt for files: the insertions become ED_SNIP_CODE probes of the editor's plan, the
 * qpt_alloc'ed words become the counter region that the runtime maps onto the profile
 * (their placeholder addresses are translated once the rewrite has placed it), and the
 * description (QP_DRIVER_LIB) names what was inserted, so that a profile of another
 * rewrite is refused.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg.h"
#include "driver/driver.h"
#include "base/qp_desc.h"
#include "report/qp_profile.h"
#include "editor/elfw.h"
#include "libqpt/qpt_priv.h"
#include "libqpt/qpt_rewrite_priv.h"

/* What the rewrite needs from the space while it runs. */
typedef struct wctx {
    qpt_space_t *s;
    ed_snippet_t *snips;     /* one per live insertion */
    arch_snip_t **copies;    /* their nodes, with variable addresses translated */
    ed_probe_t *probes;      /* one per live insertion */
    size_t *order;           /* the insertions by order */
    size_t n;
    uint64_t counters;       /* where the words went */
    elfw_instr_t instr;      /* the runtime's, when there are words */
} wctx_t;

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The description: no procedure, a string that hashes what was inserted where. */
static int
describe(void *arg, const ed_plan_t *plan, uint64_t counters, uint8_t **buf, size_t *len,
         uint64_t *id)
{
    wctx_t *w = arg;
    (void)plan;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < w->s->nins; i++) {
        const qpt_ins_t *in = &w->s->ins[i];
        if (in->removed)
            continue;
        h = fnv(h, &in->pt, sizeof(in->pt));
        h = fnv(h, in->nodes, in->n * sizeof(arch_snip_t));
    }
    char tag[64];
    snprintf(tag, sizeof(tag), "libqpt:%016llx", (unsigned long long)h);
    qp_desc_t d;
    memset(&d, 0, sizeof(d));
    d.hdr.driver = QP_DRIVER_LIB;
    d.hdr.counters_vaddr = counters;
    d.hdr.ncounters = (uint32_t)(w->s->vars / 8);
    uint32_t off;
    int rc = qp_desc_add_string(&d, tag, &off);
    /* The names of qpt_alloc_named's memory: read back by name from a profile. */
    for (size_t i = 0; rc == 0 && i < w->s->nnamed; i++) {
        const qpt_named_t *nv = &w->s->named[i];
        char *str = NULL;
        if (asprintf(&str, QPT_NAMED_TAG "%llu %zu %s",
                     (unsigned long long)(nv->addr - QPT_VAR_BASE), nv->bytes, nv->name) < 0)
            rc = QP_ENOMEM;
        else
            rc = qp_desc_add_string(&d, str, &off);
        free(str);
    }
    if (rc == 0)
        rc = qpt_notes_describe(w->s, &d); /* qpt_note_set's texts */
    if (rc == 0)
        rc = qp_desc_serialize(&d, buf, len);
    if (rc == 0)
        w->s->written_id = *id = ((const qp_desc_hdr_t *)*buf)->id;
    qp_desc_free(&d);
    return rc;
}

/* Translate placeholder addresses of qpt_alloc'ed words to where they went. */
static void
translate(arch_snip_t *v, uint32_t n, uint64_t vars, uint64_t counters)
{
    for (uint32_t i = 0; i < n; i++) {
        arch_snip_t *s = &v[i];
        uint64_t a = (uint64_t)s->imm;
        if (arch_snip_imm_is_addr(s->op) && a >= QPT_VAR_BASE && a < QPT_VAR_BASE + vars)
            s->imm = (int64_t)(counters + (a - QPT_VAR_BASE));
    }
}

/* Called once the runtime's regions are placed: the snippets, final. */
static int
placed(void *arg, const ed_plan_t *plan, uint64_t counters)
{
    wctx_t *w = arg;
    w->counters = counters;
    for (size_t i = 0; i < w->n; i++)
        translate(w->copies[i], (uint32_t)w->snips[i].n, w->s->vars, counters);
    return ed_plan_set_snippets((ed_plan_t *)plan, w->snips, w->n);
}

static int
by_order(const void *x, const void *y, void *arg)
{
    const qpt_space_t *s = arg;
    int64_t a = s->ins[*(const size_t *)x].order, b = s->ins[*(const size_t *)y].order;
    return a < b ? -1 : a > b;
}

/* qpt_measure_t.undo: the copies of the last plan (translated to its counters). */
static void
write_undo(void *arg)
{
    wctx_t *w = arg;
    for (size_t i = 0; i < w->n; i++)
        free(w->copies[i]);
    w->n = 0;
}

/* qpt_measure_t.plan: the insertions as probes of PLAN, their snippets copied afresh (a
 * retry places the words elsewhere, and placed() translates the copies). */
static int
write_plan(void *arg, ed_plan_t *plan, const elfw_instr_t **instr)
{
    wctx_t *w = arg;
    const qpt_space_t *s = w->s;
    /* The editor runs the probes of one place in snippet order: the insertions' order. */
    for (size_t k = 0; k < s->nins; k++) {
        const qpt_ins_t *in = &s->ins[w->order[k]];
        if (in->removed)
            continue;
        arch_snip_t *c = malloc(in->n * sizeof(arch_snip_t));
        if (c == NULL)
            return QP_ENOMEM;
        memcpy(c, in->nodes, in->n * sizeof(arch_snip_t));
        w->copies[w->n] = c;
        w->snips[w->n] = (ed_snippet_t) { c, in->n, in->root, in->ctx };
        w->probes[w->n] = (ed_probe_t) { .addr = in->where, .at = in->at, .what = ED_SNIP_CODE,
                                         .save_flags = in->save_flags,
                                         .flags = in->entry ? ED_PROBE_ENTRY : 0,
                                         .counter = (uint32_t)w->n };
        w->n++;
    }
    QP_CHECK(ed_plan_set_probes(plan, w->probes, w->n));
    /* Without words to save there is no runtime: the snippets are final as they are. */
    if (s->vars == 0)
        return ed_plan_set_snippets(plan, w->snips, w->n);
    *instr = &w->instr;
    return 0;
}

/* qpt_write: the rewrite engine of qpt-rewrite (qpt_engine_write), with the insertions
 * as the measurement: the same plan options, and a new plan when unwind data of moved
 * code cannot be rewritten. */
static int
file_write(qpt_space_t *s, const char *output)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nins; i++)
        n += !s->ins[i].removed;
    wctx_t w = { s, calloc(n + 1, sizeof(ed_snippet_t)), calloc(n + 1, sizeof(arch_snip_t *)),
                 calloc(n + 1, sizeof(ed_probe_t)), malloc((s->nins + 1) * sizeof(size_t)),
                 0, 0, { 0 } };
    w.instr = (elfw_instr_t) { .ncounters = (uint32_t)(s->vars / 8), .describe = describe,
                               .arg = &w, .placed = placed, .placed_arg = &w };
    qpt_engine_out_t *out = malloc(sizeof(*out));
    int rc = w.snips && w.copies && w.probes && w.order && out ? 0 : QP_ENOMEM;
    for (size_t i = 0; rc == 0 && i < s->nins; i++)
        w.order[i] = i;
    if (rc == 0)
        qsort_r(w.order, s->nins, sizeof(size_t), by_order, s);
    if (rc == 0) {
        ed_opts_t eo;
        qpt_engine_defaults(&eo, s->all_in_place);
        const qpt_measure_t m = { write_plan, write_undo, &w };
        /* The temporary output told to qpt_on_temp_file's hook; the rest as default. */
        const elfw_tmp_hook_t hook = { s->temp_fn, s->temp_arg };
        const elfw_rewrite_opts_t wo = { .tmp_hook = s->temp_fn != NULL ? &hook : NULL };
        const qpt_engine_io_t io = { s->path, output, &wo, NULL, NULL };
        rc = qpt_engine_write(s->prog, &eo, &m, &io, out);
        if (rc < 0)
            qpt_fail(s, rc, "%s: %s", s->path, out->err[0] ? out->err : qp_strerror(rc));
        /* The plan the output was written from (a retry keeps more code in place). */
        if (out->plan != NULL) {
            ed_plan_destroy(s->plan);
            s->plan = out->plan;
        }
    } else
        qpt_fail(s, rc, "%s: %s", s->path, qp_strerror(rc));
    write_undo(&w);
    free(w.copies);
    free(w.snips);
    free(w.probes);
    free(w.order);
    free(out);
    return qpt_public_rc(rc);
}

/*****************************************************************************
 * A file's kind of space (qpt_file_ops): what qpt_space.c dispatches to
 */

static const char *
file_image_refusal(qpt_space_t *s)
{
    /* A file of Go or GHC is rewritten as qpt-rewrite does, every procedure in place
     * (their points then refused with the reason). */
    s->all_in_place = qpt_all_in_place_reason(s->img);
    const char *unsup = s->all_in_place != NULL ? NULL : ed_image_unsupported(s->img);
    return unsup != NULL ? unsup : ed_image_rewritten(s->img);
}

static void
file_close(qpt_space_t *s, int kill)
{
    (void)kill;
    ed_plan_destroy(s->plan);
    s->plan = NULL;
}

static const char *
file_proc_refusal(const qpt_space_t *s, uint32_t proc)
{
    return ed_plan_left_reason(s->plan, proc);
}

/*
 * Where an edge's snippet goes in a file: where qp would put a counter for it (after the
 * source's last instruction, before a dead spot of a source with one way out, before the
 * destination with one way in, or on a stub for a taken branch).
 */
static int
file_edge_place(qpt_space_t *s, const qpt_point_t *pt, const cfg_block_t *to, qpt_ins_t *ins)
{
    const cfg_prog_t *prog = s->prog;
    (void)to;
    static const drv_prog_info_t none = { 0 };
    drv_graph_t g;
    int rc = drv_graph_build(prog, pt->proc, &none, &g);
    if (rc < 0)
        return qpt_fail(s, rc, "%s: %s", qpt_proc_name(s, pt->proc), qp_strerror(rc));
    if (rc == DRV_NOT_MEASURED)
        return qpt_fail(s, QP_EUNSUPP, "%s: %s", qpt_proc_name(s, pt->proc), g.why);
    rc = QP_EUNSUPP;
    for (uint32_t k = 0; k < g.nedges; k++) {
        const drv_edge_t *d = &g.edges[k];
        if (d->cfg_edge != pt->edge || d->place == DRV_PLACE_NONE)
            continue;
        ins->at = d->place == DRV_PLACE_BEFORE ? ED_AT_BEFORE
                  : d->place == DRV_PLACE_AFTER ? ED_AT_AFTER
                                                : ED_AT_TAKEN;
        ins->where = d->at;
        rc = 0;
        break;
    }
    drv_graph_free(&g);
    if (rc < 0)
        return qpt_fail(s, rc, "%s: the edge 0x%llx -> 0x%llx (of a jump table or an indirect "
                        "jump) has no place of its own: use a block point at its destination",
                        qpt_proc_name(s, pt->proc), (unsigned long long)pt->addr,
                        (unsigned long long)pt->to);
    return 0;
}


/* A call that never returns is no exit in a file (its procedure's exits are its rets
 * and tail calls). */
static int
file_call_is_exit(const qpt_space_t *s, const cfg_block_t *b)
{
    (void)s;
    (void)b;
    return 0;
}

static int
file_exit_other(qpt_space_t *s, const qpt_point_t *pt, const arch_insn_t *in,
                arch_snip_ctx_t *c)
{
    (void)c;
    if (in->kind == ARCH_KIND_JCC)
        return qpt_fail(s, QP_EUNSUPP,
                        "0x%llx: a conditional tail call gets no snippet in a file yet",
                        (unsigned long long)pt->addr);
    return qpt_fail(s, QP_EINVAL, "0x%llx: not a return or tail call",
                    (unsigned long long)pt->addr);
}

static int
file_accept(qpt_space_t *s, qpt_ins_t *ins)
{
    (void)s;
    (void)ins;
    return 0; /* (the rewrite places every checked point) */
}

static int
file_cycles(qpt_space_t *s, const qpt_ins_t *in, double *cycles)
{
    (void)s;
    /* Compiled where it runs; its variables are placed later: near them then. */
    int rc = arch_snip_cycles(in->nodes, in->n, in->root, &in->ctx, in->where, cycles);
    if (rc == QP_ERANGE)
        rc = arch_snip_cycles(in->nodes, in->n, in->root, &in->ctx, QPT_VAR_BASE, cycles);
    return rc;
}

/* Words at placeholder addresses, translated once the rewrite has placed them. */
static int
file_alloc(qpt_space_t *s, size_t bytes, uint64_t *addr)
{
    if (s->vars + bytes > (64ull << 20))
        return qpt_fail(s, QP_ERANGE, "more than 64 MiB of variables");
    *addr = QPT_VAR_BASE + s->vars;
    s->vars += bytes;
    return 0;
}

static int
file_read(qpt_space_t *s, uint64_t addr, void *buf, size_t len)
{
    (void)addr;
    (void)buf;
    (void)len;
    return qpt_fail(s, QP_EUNSUPP, "a file has no memory to read: run the rewritten "
                                   "program and read its profile (qpt_profile_read)");
}

static int
file_commit(qpt_space_t *s)
{
    return qpt_fail(s, QP_EUNSUPP, "a file takes its snippets at qpt_write");
}

static int
file_write_memory(qpt_space_t *s, uint64_t addr, const void *buf, size_t len)
{
    (void)addr;
    (void)buf;
    (void)len;
    return qpt_fail(s, QP_EUNSUPP, "a file has no memory to write");
}

static int
file_free(qpt_space_t *s, uint64_t addr)
{
    (void)addr;
    return qpt_fail(s, QP_EUNSUPP, "a file's variables are part of the program it "
                                   "writes: they cannot be freed");
}

static int
file_set_active(qpt_space_t *s, int on)
{
    (void)on;
    return qpt_fail(s, QP_EUNSUPP, "a file has no running snippets (leave them out of "
                                   "qpt_write instead)");
}

static int
file_set_relocate(qpt_space_t *s, int on)
{
    (void)on;
    return qpt_fail(s, QP_EUNSUPP, "a file's procedures are relocated by qpt_write");
}

static int
not_a_process(qpt_space_t *s)
{
    return qpt_fail(s, QP_EUNSUPP, "not a process");
}

static int
file_keep_on_exit(qpt_space_t *s, int keep)
{
    (void)keep;
    return not_a_process(s);
}

/* A process's life: a file has none. */
static int
file_library(qpt_space_t *s, const char *module, qpt_space_t **out, char *why, size_t whylen)
{
    (void)s;
    (void)out;
    snprintf(why, whylen, "%s: a shared library is measured in a live process only", module);
    return QP_EUNSUPP;
}

static int
file_ended(qpt_space_t *s, int *status)
{
    (void)s;
    (void)status;
    return QP_EINVAL;
}

static int
file_syscall(qpt_space_t *s, long nr, const uint64_t args[6], int64_t *ret)
{
    (void)s;
    (void)nr;
    (void)args;
    (void)ret;
    return QP_EINVAL;
}

static int
file_call_now(qpt_space_t *s, uint64_t fn, const uint64_t *args, int nargs, uint64_t *ret)
{
    (void)fn;
    (void)args;
    (void)nargs;
    (void)ret;
    return not_a_process(s);
}

static int
file_pid(const qpt_space_t *s)
{
    (void)s;
    return 0;
}

/* A file's snippets run where its procedures were written: no copy of their own. */
static int
file_runs_as_copy(qpt_space_t *s, uint32_t proc)
{
    (void)s;
    (void)proc;
    return 0;
}

static int
file_thread_stacks(qpt_space_t *s, qpt_stack_fn fn, void *arg)
{
    (void)fn;
    (void)arg;
    return qpt_fail(s, QP_EUNSUPP, "a file has no threads: stacks are a process's");
}

static int
file_thread_block(qpt_space_t *s, uint64_t var, size_t bytes, uint64_t thread_ptr,
                  uint64_t *addr)
{
    (void)var;
    (void)bytes;
    (void)thread_ptr;
    (void)addr;
    return qpt_fail(s, QP_EUNSUPP, "a file has no threads: their blocks are a process's");
}

static int
file_watch(qpt_space_t *s, unsigned mask)
{
    (void)mask;
    return not_a_process(s);
}

static int
file_next_event(qpt_space_t *s, qpt_event_t *ev, int timeout_ms)
{
    (void)ev;
    (void)timeout_ms;
    return not_a_process(s);
}

static int
file_set_callback(qpt_space_t *s, uint32_t kind, qpt_event_fn fn, void *arg)
{
    (void)kind;
    (void)fn;
    (void)arg;
    return not_a_process(s);
}

static int
file_wait(qpt_space_t *s, int timeout_ms)
{
    (void)timeout_ms;
    return not_a_process(s);
}

const qpt_space_ops_t qpt_file_ops = {
    .kind = "file",
    .live = 0,
    .image_refusal = file_image_refusal,
    .close = file_close,
    .proc_refusal = file_proc_refusal,
    .edge_place = file_edge_place,
    .call_is_exit = file_call_is_exit,
    .exit_other = file_exit_other,
    .accept = file_accept,
    .cycles = file_cycles,
    .alloc = file_alloc,
    .free = file_free,
    .set_active = file_set_active,
    .set_relocate = file_set_relocate,
    .keep_on_exit = file_keep_on_exit,
    .read = file_read,
    .write = file_write_memory,
    .commit = file_commit,
    .write_file = file_write,
    .alive = not_a_process,
    .library = file_library,
    .run = not_a_process,
    .stop = not_a_process,
    .ended = file_ended,
    .syscall = file_syscall,
    .call_now = file_call_now,
    .pid = file_pid,
    .runs_as_copy = file_runs_as_copy,
    .thread_stacks = file_thread_stacks,
    .thread_block = file_thread_block,
    .watch = file_watch,
    .next_event = file_next_event,
    .set_callback = file_set_callback,
    .wait = file_wait,
};

uint64_t
qpt_written_id(const qpt_space_t *s)
{
    return s != NULL ? s->written_id : 0; /* (0 in a process: never written) */
}

int
qpt_profile_id(const char *profile, uint64_t *id, char *why, size_t whylen)
{
    if (profile == NULL || id == NULL)
        return QP_EINVAL;
    qp_profile_t p;
    int rc = qp_profile_read(profile, &p, why, whylen);
    if (rc < 0)
        return qpt_public_rc(rc);
    *id = p.hdr.id;
    qp_profile_free(&p);
    return 0;
}

int
qpt_profile_read(const char *profile, uint64_t addr, uint64_t *out, size_t nwords, char *why,
                 size_t whylen)
{
    if (profile == NULL || out == NULL)
        return QP_EINVAL;
    qp_profile_t p;
    int rc = qp_profile_read(profile, &p, why, whylen);
    if (rc < 0)
        return qpt_public_rc(rc);
    uint64_t first = (addr - QPT_VAR_BASE) / 8;
    if (addr < QPT_VAR_BASE || (addr - QPT_VAR_BASE) % 8 != 0 || first > p.hdr.ncounters
        || nwords > p.hdr.ncounters - first) {
        if (why != NULL && whylen > 0)
            snprintf(why, whylen, "words 0x%llx..+%zu are not in the profile (%llu words)",
                     (unsigned long long)addr, nwords, (unsigned long long)p.hdr.ncounters);
        qp_profile_free(&p);
        return QP_ERANGE;
    }
    memcpy(out, p.counters + first, nwords * 8);
    qp_profile_free(&p);
    return 0;
}

/*****************************************************************************
 * Named memory in profiles (qpt_alloc_named): the names are strings of the rewrite's
 * description (.qpt.desc of the program the profile names)
 */

/* The description of the rewritten PROGRAM into *D (WHY names PROFILE when given). */
static int
qpt_program_desc_of(const char *program, const char *profile, qp_desc_t *d, char *why,
                    size_t whylen)
{
    cfg_image_t *img = NULL;
    int rc = cfg_image_open_bfd(program, &img);
    if (rc < 0) {
        if (profile != NULL)
            snprintf(why, whylen, "%s: cannot read the program that wrote it (%s): %s",
                     profile, program, qp_strerror(rc));
        else
            snprintf(why, whylen, "%s: %s", program, qp_strerror(rc));
        return rc;
    }
    const cfg_section_t *sec = cfg_image_section_named(img, QP_DESC_SECTION);
    if (sec == NULL) {
        snprintf(why, whylen, "%s%s%s has no %s section: not written by qpt_write",
                 profile ? profile : "", profile ? ": " : "", program, QP_DESC_SECTION);
        rc = QP_EFORMAT;
    }
    if (rc == 0)
        rc = qp_desc_parse(sec->bytes, sec->size, d, why, whylen);
    cfg_image_destroy(img);
    return rc;
}

int
qpt_program_desc(const char *program, qp_desc_t *d, char *why, size_t whylen)
{
    return qpt_program_desc_of(program, NULL, d, why, whylen);
}

int
qpt_profile_desc(const char *profile, const qp_profile_t *p, qp_desc_t *d, char *why,
                 size_t whylen)
{
    int rc = qpt_program_desc_of(p->hdr.exe, profile, d, why, whylen);
    if (rc == 0)
        rc = qp_profile_check(p, d, why, whylen);
    return rc;
}

/* The named memory NAME of description D: its offset and size; 0 or QP_ENOTFOUND with
 * the names there are in WHY. */
static int
find_named(const qp_desc_t *d, const char *name, uint64_t *off, size_t *bytes, char *why,
           size_t whylen)
{
    size_t tag = strlen(QPT_NAMED_TAG), len = 0;
    char list[400] = "";
    for (uint32_t o = 0; o < d->hdr.strtab_size;) {
        const char *str = qp_desc_str(d, o);
        size_t n = strlen(str);
        unsigned long long at;
        size_t sz;
        int k = 0;
        if (strncmp(str, QPT_NAMED_TAG, tag) == 0
            && sscanf(str + tag, "%llu %zu %n", &at, &sz, &k) == 2 && k > 0) {
            if (strcmp(str + tag + k, name) == 0) {
                *off = at;
                *bytes = sz;
                return 0;
            }
            if (len + 1 < sizeof(list))
                len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
                                        len ? ", " : "", str + tag + k);
        }
        o += (uint32_t)n + 1;
    }
    snprintf(why, whylen, "no memory named '%s' in the program (named: %s)", name,
             len ? list : "none");
    return QP_ENOTFOUND;
}

int
qpt_profile_var(const char *profile, const char *name, uint64_t *addr, size_t *bytes,
                char *why, size_t whylen)
{
    char dummy[8];
    if (why == NULL || whylen == 0) {
        why = dummy;
        whylen = sizeof(dummy);
    }
    if (profile == NULL || name == NULL)
        return QP_EINVAL;
    qp_profile_t p;
    qp_desc_t d;
    memset(&d, 0, sizeof(d));
    int rc = qp_profile_read(profile, &p, why, whylen);
    if (rc < 0)
        return qpt_public_rc(rc);
    uint64_t off = 0;
    size_t sz = 0;
    rc = qpt_profile_desc(profile, &p, &d, why, whylen);
    if (rc == 0 && (rc = find_named(&d, name, &off, &sz, why, whylen)) < 0) {
        char w[512];
        snprintf(w, sizeof(w), "%s: %s", profile, why);
        snprintf(why, whylen, "%s", w);
    }
    if (rc == 0 && (off % 8 != 0 || off / 8 + sz / 8 > p.hdr.ncounters)) {
        snprintf(why, whylen, "%s: memory '%s' lies outside the profile's words", profile,
                 name);
        rc = QP_EFORMAT;
    }
    if (rc == 0 && addr != NULL)
        *addr = QPT_VAR_BASE + off;
    if (rc == 0 && bytes != NULL)
        *bytes = sz;
    qp_desc_free(&d);
    qp_profile_free(&p);
    return qpt_public_rc(rc);
}

int
qpt_profile_read_named(const char *profile, const char *name, uint64_t *out, size_t nwords,
                       char *why, size_t whylen)
{
    uint64_t addr;
    size_t bytes;
    if (out == NULL)
        return QP_EINVAL;
    int rc = qpt_profile_var(profile, name, &addr, &bytes, why, whylen);
    if (rc < 0)
        return rc;
    if (nwords > bytes / 8) {
        if (why != NULL && whylen > 0)
            snprintf(why, whylen, "%s: '%s' has %zu words, not %zu", profile, name, bytes / 8,
                     nwords);
        return QPT_ERANGE;
    }
    return qpt_profile_read(profile, addr, out, nwords, why, whylen);
}
