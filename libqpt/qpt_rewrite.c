/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The static rewrite engine (include/qpt/qpt_rewrite.h): analyse, let a driver measure,
 * relocate, patch what stays in place, write - and plan again when the writer cannot
 * rewrite the unwind data of moved code. qpt-rewrite is its command line; qpt_write
 * (qpt_file.c) runs the same loop, qpt_engine_write, for a mutator's snippets.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "libqpt/qpt_rewrite_priv.h"
#include "report/qp_report.h"

/* Set R's message (printf-style) and return RC. */
int
qpt_rw_fail(qpt_rewrite_t *r, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof(r->err), fmt, ap);
    va_end(ap);
    return rc;
}

void
qpt_rw_vsay(void (*fn)(void *arg, const char *line), void *arg, const char *fmt, va_list ap)
{
    char small[1024], *buf = small;
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    if (n >= 0 && (size_t)n >= sizeof(small) && (buf = malloc((size_t)n + 1)) != NULL)
        vsnprintf(buf, (size_t)n + 1, fmt, again);
    va_end(again);
    if (n >= 0 && buf != NULL)
        fn(arg, buf);
    if (buf != small)
        free(buf);
}

/* One line for the on_message hook. */
void
qpt_rw_say(const qpt_rewrite_t *r, const char *fmt, ...)
{
    if (r->message == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    qpt_rw_vsay(r->message, r->message_arg, fmt, ap);
    va_end(ap);
}

void
qpt_rw_progress(const qpt_rewrite_t *r, const char *phase)
{
    if (r->progress != NULL)
        r->progress(r->progress_arg, phase, 0, 0);
}

/* "INPUT: why" for a failure RC of the core (errno's text for a failed system call). */
int
qpt_rw_fail_input(qpt_rewrite_t *r, const char *input, int rc)
{
    qpt_rw_progress(r, NULL);
    const char *why = qp_strerror(rc);
    if (rc == QP_EIO && errno != 0)
        why = strerror(errno);
    return qpt_rw_fail(r, rc, "%s: %s", input, why);
}

/*****************************************************************************
 * The rewrite object and its options
 */

int
qpt_rewrite_create(qpt_rewrite_t **out)
{
    if (out == NULL)
        return QPT_EINVAL;
    qpt_rewrite_t *r = calloc(1, sizeof(*r));
    if ((*out = r) == NULL)
        return QPT_ENOMEM;
    r->drv = drv_find("qp");
    r->driver = "qp";
    r->atomic = -1;
    r->threads = 1;
    return 0;
}

static void
free_leave(qpt_rewrite_t *r)
{
    for (size_t i = 0; i < r->nleave; i++)
        free(r->leave[i]);
    free(r->leave);
    r->leave = NULL;
    r->nleave = 0;
}

void
qpt_rewrite_destroy(qpt_rewrite_t *r)
{
    if (r == NULL)
        return;
    free(r->weights);
    free(r->sysroot);
    free_leave(r);
    free(r->leave_all);
    free(r);
}

const char *
qpt_rewrite_error(const qpt_rewrite_t *r)
{
    return r != NULL ? r->err : "no rewrite";
}

int
qpt_rewrite_set_driver(qpt_rewrite_t *r, const char *name)
{
    if (r == NULL || name == NULL)
        return QPT_EINVAL;
    static const char *const names[] = { "qp", "naive", "none", "trace", "trace-naive" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(name, names[i]) == 0) {
            r->driver = names[i];
            r->drv = i == 2 ? NULL : drv_find(names[i]);
            return 0;
        }
    return qpt_rw_fail(r, QPT_EINVAL, "unknown driver '%s' (qp, naive, trace, trace-naive, none)",
                   name);
}

/* A copy of S (NULL stays NULL) into *DST, the old one freed. */
static int
set_string(char **dst, const char *s)
{
    char *c = NULL;
    if (s != NULL && (c = strdup(s)) == NULL)
        return QPT_ENOMEM;
    free(*dst);
    *dst = c;
    return 0;
}

int
qpt_rewrite_set_weights(qpt_rewrite_t *r, const char *profile)
{
    return r == NULL ? QPT_EINVAL : set_string(&r->weights, profile);
}

int
qpt_rewrite_set_sysroot(qpt_rewrite_t *r, const char *dir)
{
    return r == NULL ? QPT_EINVAL : set_string(&r->sysroot, dir);
}

int
qpt_rewrite_set_leave_all(qpt_rewrite_t *r, const char *reason)
{
    return r == NULL ? QPT_EINVAL : set_string(&r->leave_all, reason);
}

int
qpt_rewrite_set_leave(qpt_rewrite_t *r, const char *const *names, size_t n)
{
    if (r == NULL || (names == NULL && n > 0))
        return QPT_EINVAL;
    free_leave(r);
    if (n == 0)
        return 0;
    if ((r->leave = calloc(n, sizeof(char *))) == NULL)
        return QPT_ENOMEM;
    for (; r->nleave < n; r->nleave++)
        if ((r->leave[r->nleave] = strdup(names[r->nleave])) == NULL) {
            free_leave(r);
            return QPT_ENOMEM;
        }
    return 0;
}

int
qpt_rewrite_set(qpt_rewrite_t *r, int option, long value)
{
    if (r == NULL)
        return QPT_EINVAL;
    int on = value != 0;
    switch (option) {
    case QPT_RW_ATOMIC:
        if (value < -1 || value > 1)
            return QPT_EINVAL;
        r->atomic = (int)value;
        return 0;
    case QPT_RW_THREADS:
        if (value < 1 || value > 16)
            return QPT_EINVAL;
        r->threads = (unsigned)value;
        return 0;
    case QPT_RW_CALL_TARGETS: r->call_targets = on; return 0;
    case QPT_RW_TRACE_MEM: r->trace_mem = on; return 0;
    case QPT_RW_KEEP_OLD_TEXT: r->keep_old_text = on; return 0;
    case QPT_RW_VERBOSE: r->verbose = on; return 0;
    case QPT_RW_STRETCH: r->stretch = on; return 0;
    case QPT_RW_KEEP_TABLES: r->keep_tables = on; return 0;
    case QPT_RW_LOCAL_LIBS: r->local_libs = on; return 0;
    case QPT_RW_IV_LOOPS: r->iv_loops = on; return 0;
    default: return QPT_EINVAL;
    }
}

int
qpt_set_debug_dirs(const char *dirs)
{
    return qpt_public_rc(cfg_set_debug_dirs(dirs));
}

const char *
qpt_mapped_input_at(const void *addr)
{
    return cfg_mapped_at(addr);
}

void
qpt_rewrite_on_progress(qpt_rewrite_t *r, qpt_rewrite_progress_fn fn, void *arg)
{
    if (r != NULL) {
        r->progress = fn;
        r->progress_arg = arg;
    }
}

void
qpt_rewrite_on_message(qpt_rewrite_t *r, qpt_rewrite_message_fn fn, void *arg)
{
    if (r != NULL) {
        r->message = fn;
        r->message_arg = arg;
    }
}

void
qpt_rewrite_on_temp_file(qpt_rewrite_t *r, qpt_rewrite_temp_fn fn, void *arg)
{
    if (r != NULL) {
        r->temp = fn;
        r->temp_arg = arg;
    }
}

void
qpt_rewrite_on_debug(qpt_rewrite_t *r, qpt_rewrite_phase_fn phase, qpt_rewrite_message_fn note,
                     void *arg)
{
    if (r != NULL) {
        r->debug_phase = phase;
        r->debug_note = note;
        r->debug_arg = arg;
    }
}

int
qpt_rewrite_summary(const qpt_rewrite_t *r, qpt_rewrite_summary_t *out)
{
    if (r == NULL || out == NULL)
        return QPT_EINVAL;
    *out = r->sum;
    return 0;
}

/*****************************************************************************
 * The engine loop (shared with qpt_write)
 */

/* Rewrites made again, at most, when an FDE of moved code cannot be rewritten. */
#define MAX_RETRIES 16

const char *
qpt_all_in_place_reason(const cfg_image_t *img)
{
    switch (cfg_image_runtime(img)) {
    case CFG_RUNTIME_GO:
        return "a Go program: its runtime finds functions by return address through "
               ".gopclntab, so every procedure stays in place";
    case CFG_RUNTIME_GHC:
        return "a GHC program: its info tables sit right before the code they "
               "describe, so every procedure stays in place";
    default: return NULL;
    }
}

void
qpt_engine_defaults(ed_opts_t *eo, const char *all_in_place)
{
    memset(eo, 0, sizeof(*eo));
    eo->reuse_text = 1;
    eo->all_in_place = all_in_place;
}

int
qpt_engine_write(const cfg_prog_t *prog, ed_opts_t *eo, const qpt_measure_t *m,
                 const qpt_engine_io_t *io, qpt_engine_out_t *out)
{
    memset(out, 0, sizeof(*out));
    /*
     * An FDE of moved code whose tables cannot be rewritten for the new layout (which
     * the plan could not foresee) fails the rewrite with its range: then plan, measure
     * and rewrite again with that code in place.
     */
    ed_fde_fail_t stay[MAX_RETRIES];
    int rc;
    for (size_t nstay = 0;;) {
        eo->stay = stay;
        eo->nstay = nstay;
        const elfw_instr_t *instr = NULL;
        if ((rc = ed_plan_create(prog, eo, &out->plan)) < 0)
            return rc; /* out->err empty: the caller says rc's text */
        if (io->wo != NULL && io->wo->on_phase != NULL)
            io->wo->on_phase(io->wo->phase_arg, "planned");
        if (m->plan != NULL && (rc = m->plan(m->arg, out->plan, &instr)) < 0)
            return rc;
        if (m->plan != NULL && io->wo != NULL && io->wo->on_phase != NULL)
            io->wo->on_phase(io->wo->phase_arg, "measured (driver)");
        out->err[0] = '\0';
        if (io->progress != NULL)
            io->progress(io->progress_arg, "relocating and writing", 0, 0);
        rc = elfw_rewrite(prog, out->plan, instr, io->input, io->output, io->wo, &out->st,
                          out->err, sizeof(out->err));
        if (io->progress != NULL)
            io->progress(io->progress_arg, NULL, 0, 0);
        int again = 0; /* the same FDE twice: the plan could not keep it in place */
        for (size_t i = 0; i < nstay; i++)
            again |= stay[i].lo == out->st.unwind_fail.lo && stay[i].hi == out->st.unwind_fail.hi;
        if (rc >= 0 || out->st.unwind_fail.lo == 0 || again || nstay == MAX_RETRIES)
            break;
        stay[nstay++] = out->st.unwind_fail;
        out->retries++;
        ed_plan_destroy(out->plan);
        out->plan = NULL;
        if (m->undo != NULL)
            m->undo(m->arg);
    }
    eo->stay = NULL;
    eo->nstay = 0;
    if (rc == QP_EBUG && out->plan != NULL && ed_plan_stats(out->plan)->bad_exit_to != 0)
        snprintf(out->err, sizeof(out->err),
                 "code left in place at 0x%llx would run into new code placed at 0x%llx: %s",
                 (unsigned long long)ed_plan_stats(out->plan)->bad_exit_from,
                 (unsigned long long)ed_plan_stats(out->plan)->bad_exit_to, qp_strerror(rc));
    if (rc < 0 && out->err[0] == '\0')
        snprintf(out->err, sizeof(out->err), "%s", qp_strerror(rc));
    return rc < 0 ? rc : 0;
}

/*****************************************************************************
 * The drivers' measurement: counters (qp, naive), traces, indirect-call targets
 */

/* drv_run_progress's callback: "placing counters... 45%". */
static void
placing_progress(void *arg, size_t done, size_t total)
{
    const qpt_rewrite_t *r = arg;
    if (r->progress != NULL && total != 0)
        r->progress(r->progress_arg, "placing counters", done, total);
}

/* ed_opts_t.on_progress: "relocating... 45%", then "writing..." for the rest. */
static void
relocation_progress(void *arg, size_t done, size_t total)
{
    const qpt_rewrite_t *r = arg;
    if (r->progress == NULL || total == 0)
        return;
    if (done < total)
        r->progress(r->progress_arg, "relocating", done, total);
    else
        r->progress(r->progress_arg, "writing", 0, 0);
}

/* cfg_opts_t.on_progress: "analysing... 45%". */
static void
analysis_progress(void *arg, size_t done, size_t total)
{
    const qpt_rewrite_t *r = arg;
    if (r->progress != NULL && total != 0)
        r->progress(r->progress_arg, "analysing", done, total);
}

/* elfw_instr_t.placed: the snippets that record indirect calls' targets. */
static int
place_indirect(void *arg, const struct ed_plan *plan, uint64_t counters)
{
    return drv_indirect_place(arg, (ed_plan_t *)plan, counters);
}

/* elfw_instr_t.describe over a driver's result. */
static int
describe(void *arg, const ed_plan_t *plan, uint64_t counters, uint8_t **desc, size_t *len,
         uint64_t *id)
{
    return drv_describe(arg, plan, counters, desc, len, id);
}

/* The same for tracing (--driver=trace, trace-naive): the events of drv_trace.c too. */
static int
trace_placed(void *arg, const struct ed_plan *plan, uint64_t counters)
{
    measure_ctx_t *c = arg;
    QP_CHECK(drv_indirect_place(&c->res, (ed_plan_t *)plan, counters));
    return drv_trace_place(c->tr, &c->res, (ed_plan_t *)plan, elfw_trace_refill(plan));
}

static int
trace_describe(void *arg, const ed_plan_t *plan, uint64_t counters, uint8_t **desc,
               size_t *len, uint64_t *id)
{
    measure_ctx_t *c = arg;
    QP_CHECK(drv_describe(&c->res, plan, counters, desc, len, id));
    drv_trace_set_id(c->tr, *id);
    uint64_t rt_size = 0, rt = elfw_runtime(plan, &rt_size);
    return drv_trace_set_layout(c->tr, plan, rt, rt_size);
}

static int
trace_section(void *arg, const char **name, uint8_t **bytes, size_t *len)
{
    measure_ctx_t *c = arg;
    *name = ".qpt.trace";
    return drv_trace_section(c->tr, bytes, len);
}

static void
measure_undo(void *arg)
{
    measure_ctx_t *c = arg;
    drv_result_free(&c->res);
    memset(&c->res, 0, sizeof(c->res));
    drv_trace_free(c->tr);
    c->tr = NULL;
}

/* qpt_measure_t.plan for the drivers: place counters (and trace events) into PLAN. */
static int
measure_plan(void *arg, ed_plan_t *plan, const elfw_instr_t **instr)
{
    measure_ctx_t *c = arg;
    const qpt_rewrite_t *r = c->r;
    const cfg_prog_t *prog = c->prog;
    qpt_rw_progress(r, "placing counters");
    c->res.iv_loops = (uint8_t)r->iv_loops;
    int rc = drv_run_threads(r->drv, prog, plan, c->w, &c->res, placing_progress, c->r,
                             r->threads);
    if (rc == 0 && r->call_targets && !c->tracing)
        rc = drv_indirect_tables(&c->res, prog);
    drv_trace_free(c->tr);
    c->tr = NULL;
    if (rc == 0 && c->tracing)
        rc = drv_trace_plan(prog, &c->res, r->drv->trace == DRV_TRACE_BLOCKS, c->w, &c->tr,
                            &c->ntraced);
    if (rc == 0 && c->tracing && r->trace_mem)
        rc = drv_trace_plan_mem(c->tr, prog, &c->nmrefs, &c->nmvals);
    if (rc < 0 || (rc = ed_plan_set_probes(plan, c->res.probes, c->res.nprobes)) < 0)
        return rc;
    if (ed_plan_set_inplace(plan, c->res.inplace) == 0)
        c->res.inplace = NULL; /* the plan's now (else drv_result_free frees it) */
    drv_choose_inc(prog, &c->res, c->atomic, &c->inc);
    ed_plan_set_inc_mode(plan, c->inc.mode);
    c->res.pie = (prog->img->flags & CFG_IMG_PIE) != 0;
    c->res.summarize = qp_flow_zero_summaries;
    c->instr = (elfw_instr_t) { .ncounters = c->res.ncounters,
                                .lock_at_start = c->inc.lock_at_start,
                                .describe = describe, .arg = &c->res,
                                .placed = place_indirect, .placed_arg = &c->res,
                                .watcher = c->inc.watcher };
    if (c->tracing) {
        c->instr.describe = trace_describe;
        c->instr.arg = c;
        c->instr.placed = trace_placed;
        c->instr.placed_arg = c;
        c->instr.trace = drv_trace_unit(c->tr);
        c->instr.section = trace_section;
        c->instr.section_arg = c;
    }
    *instr = &c->instr;
    return 0;
}

/*
 * The edge counts of the profile PATH (read through report/) into W, for the driver.
 * Returns 0 or QP_E* with one line in WHY.
 */
static int
load_weights(const char *path, drv_weights_t *w, char *why, size_t whylen)
{
    qp_edge_count_t *v = NULL;
    size_t n = 0;
    int rc = qp_edge_counts_read(path, &v, &n, why, whylen);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = drv_weights_add(w, v[i].from, v[i].to, v[i].count, v[i].kind);
    free(v);
    if (rc == 0) {
        drv_weights_sort(w);
        return 0;
    }
    if (n > 0) /* the counts were read: drv_weights_add failed */
        snprintf(why, whylen, "%s: %s", path, qp_strerror(rc));
    drv_weights_free(w);
    return rc;
}

/* elfw_rewrite_opts_t.on_phase and ed_opts_t.on_phase: the writer's and the plan's
 * phases, to R's debug hook. */
static void
write_phase(void *arg, const char *phase)
{
    const qpt_rewrite_t *r = arg;
    r->debug_phase(r->debug_arg, phase, 0);
}

/* The rewrite proper: plan, measure, relocate, write, then the summary lines. */
int
qpt_rw_rewrite(qpt_rewrite_t *r, const cfg_prog_t *prog, const char *input, const char *output,
        const char *all_in_place)
{
    ed_opts_t eo;
    qpt_engine_defaults(&eo, all_in_place);
    eo.stretch = r->stretch;
    eo.keep_tables = r->keep_tables;
    eo.on_progress = relocation_progress;
    eo.progress_arg = r;
    eo.on_phase = r->debug_phase != NULL ? write_phase : NULL;
    eo.phase_arg = r;
    eo.threads = r->threads;
    eo.leave = (const char *const *)r->leave;
    eo.nleave = r->nleave;
    measure_ctx_t c;
    memset(&c, 0, sizeof(c));
    c.r = r;
    c.prog = prog;
    c.tracing = r->drv != NULL && r->drv->trace != 0;
    c.atomic = r->atomic;
    eo.reuse_text = !c.tracing && !r->keep_old_text;
    if (cfg_image_isa(prog->img) != arch_isa_host())
        eo.reuse_text = 0; /* TODO(#34): editor/ed_reuse.c fills and decodes as x86-64 */
    if (all_in_place != NULL && cfg_image_runtime(prog->img) == CFG_RUNTIME_GO && c.atomic < 0)
        c.atomic = 1; /* its threads start from raw clone system calls: no hook sees them */
    drv_weights_t w = { 0 };
    if (r->weights != NULL) {
        char why[600];
        int rc = load_weights(r->weights, &w, why, sizeof(why));
        qpt_rw_progress(r, NULL);
        if (rc < 0)
            return qpt_rw_fail(r, rc, "--weights %s: %s", r->weights, why);
        double match = drv_weights_match(&w, prog);
        if (match < 0.95) {
            drv_weights_free(&w);
            return qpt_rw_fail(r, QP_EINVAL, "--weights %s: a profile of another program (%.0f%% "
                           "of its edges are edges of %s)", r->weights, 100 * match, input);
        }
        c.w = &w;
    }
    static const qpt_measure_t none = { NULL, NULL, NULL };
    const qpt_measure_t m = { measure_plan, measure_undo, &c };
    const elfw_tmp_hook_t hook = { r->temp, r->temp_arg };
    const elfw_rewrite_opts_t wo = { r->temp != NULL ? &hook : NULL, r->local_libs,
                                     r->debug_phase != NULL ? write_phase : NULL, r,
                                     r->threads };
    const qpt_engine_io_t io = { input, output, &wo, r->progress, r->progress_arg };
    qpt_engine_out_t *eout = malloc(sizeof(*eout));
    if (eout == NULL) {
        drv_weights_free(&w);
        return qpt_rw_fail_input(r, input, QP_ENOMEM);
    }
    int rc = qpt_engine_write(prog, &eo, r->drv != NULL ? &m : &none, &io, eout);
    drv_weights_free(&w);
    if (rc < 0 && eout->plan != NULL && eout->err[0] != '\0')
        qpt_rw_fail(r, rc, "%s: %s", input, eout->err);
    else if (rc < 0)
        qpt_rw_fail_input(r, input, rc);
    else
        qpt_rw_report(r, prog, input, output, eout, &c);
    ed_plan_destroy(eout->plan);
    free(eout);
    measure_undo(&c);
    return rc;
}

/*****************************************************************************
 * Reading and analysing the input
 */

/*
 * Why R cannot rewrite a program of ISA (NULL: it can). x86-64 has every driver;
 * AArch64 (issue 34) the null rewrite and the counting drivers (qp, naive), of
 * programs and libraries (whose increments are then atomic from the start: AArch64 has
 * no switchable ones): tracing, indirect calls' targets and the snippets of metrics are
 * x86-64 code.
 */
static const char *
rewrite_isa_refusal(const qpt_rewrite_t *r, const arch_isa_t *isa)
{
    if (isa->elf_machine == ARCH_EM_X86_64)
        return NULL;
    if (r->stretch)
        return "--stretch pads with one byte, which AArch64 code cannot take";
    if (r->drv == NULL)
        return NULL;
    if (r->drv->trace != 0 || r->trace_mem)
        return "tracing is x86-64 only so far (--driver=none, qp or naive)";
    if (r->call_targets)
        return "indirect calls' targets are recorded on x86-64 only so far";
    return NULL;
}

/* INPUT's image into *IMG, checked for a rewrite (REWRITE) or a dump; *ALL_IN_PLACE:
 * why every procedure stays in place, or NULL. */
static int
open_input(qpt_rewrite_t *r, const char *input, int rewrite, cfg_image_t **img,
           const char **all_in_place)
{
    char why[320];
    errno = 0;
    /* A dump reads any ISA cfg/ analyses; a rewrite x86-64, and AArch64 as far as
     * rewrite_isa_refusal allows. */
    int rc = cfg_image_open_bfd_analysis(input, img, why, sizeof(why));
    if (rc == 0 && rewrite) {
        const arch_isa_t *isa = cfg_image_isa(*img);
        const char *no = rewrite_isa_refusal(r, isa);
        if (no != NULL) {
            cfg_image_destroy(*img);
            *img = NULL;
            return qpt_rw_fail(r, QP_EUNSUPP, "%s: %s: %s", input, isa->name, no);
        }
    }
    if (rc < 0 && why[0] != '\0')
        return qpt_rw_fail(r, rc, "%s: %s", input, why);
    if (rc < 0)
        return qpt_rw_fail_input(r, input, rc);
    const char *unsupported = NULL;
    *all_in_place = qpt_all_in_place_reason(*img);
    if (*all_in_place == NULL) {
        *all_in_place = r->leave_all;
        if (rewrite)
            unsupported = ed_image_unsupported(*img);
    }
    if (rewrite && unsupported == NULL)
        unsupported = ed_image_rewritten(*img);
    if (unsupported != NULL) {
        cfg_image_destroy(*img);
        *img = NULL;
        return qpt_rw_fail(r, QP_EUNSUPP, "%s: %s", input, unsupported);
    }
    return 0;
}

/* cfg_opts_t's development hooks, passed on to R's. */
static void
debug_phase(void *arg, const char *phase, size_t nprocs)
{
    const qpt_rewrite_t *r = arg;
    r->debug_phase(r->debug_arg, phase, nprocs);
}

static void
debug_note(void *arg, const char *line)
{
    const qpt_rewrite_t *r = arg;
    r->debug_note(r->debug_arg, line);
}

/* The analysis of IMG into *PROG (progress shown when SHOW). */
static int
analyse(qpt_rewrite_t *r, const char *input, const cfg_image_t *img, int show,
        cfg_prog_t **prog)
{
    if (show)
        qpt_rw_progress(r, "analysing");
    cfg_opts_t co = { 0 };
    co.on_phase = r->debug_phase != NULL ? debug_phase : NULL;
    co.on_note = r->debug_note != NULL ? debug_note : NULL;
    co.on_progress = show ? analysis_progress : NULL;
    co.cb_arg = r;
    co.threads = r->threads;
    int rc = cfg_prog_build(img, &co, prog);
    if (!show || rc < 0)
        qpt_rw_progress(r, NULL);
    return rc < 0 ? qpt_rw_fail_input(r, input, rc) : 0;
}

int
qpt_rw_file(qpt_rewrite_t *r, const char *input, const char *output)
{
    cfg_image_t *img = NULL;
    const char *all_in_place = NULL;
    int rc = open_input(r, input, 1, &img, &all_in_place);
    cfg_prog_t *prog = NULL;
    if (rc == 0 && (rc = analyse(r, input, img, 1, &prog)) == 0)
        rc = qpt_rw_rewrite(r, prog, input, output, all_in_place);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
    return rc;
}

int
qpt_rewrite_run(qpt_rewrite_t *r, const char *input, const char *output)
{
    if (r == NULL || input == NULL || output == NULL)
        return QPT_EINVAL;
    r->err[0] = '\0';
    memset(&r->sum, 0, sizeof(r->sum));
    return qpt_public_rc(qpt_rw_file(r, input, output));
}

int
qpt_rewrite_dump_cfg(qpt_rewrite_t *r, const char *input, int kind, const char *proc,
                     qpt_rewrite_text_fn out, void *arg)
{
    if (r == NULL || input == NULL || out == NULL || kind < QPT_DUMP_SUMMARY
        || kind > QPT_DUMP_DOT || (kind == QPT_DUMP_DOT && proc == NULL))
        return QPT_EINVAL;
    r->err[0] = '\0';
    cfg_image_t *img = NULL;
    const char *all_in_place = NULL;
    cfg_prog_t *prog = NULL;
    int rc = open_input(r, input, 0, &img, &all_in_place);
    if (rc == 0)
        rc = analyse(r, input, img, 0, &prog);
    dump_out_t f = { out, arg };
    if (rc == 0 && kind == QPT_DUMP_SUMMARY)
        qpt_dump_summary(&f, prog, r->verbose);
    else if (rc == 0 && kind == QPT_DUMP_TEXT)
        qpt_dump_text(&f, prog);
    else if (rc == 0) {
        const cfg_proc_t *p = cfg_proc_by_name(prog, proc);
        /* Else a demangled name, with or without its parameters (the first that fits). */
        for (uint32_t i = 0; p == NULL && i < prog->nprocs; i++)
            if (cfg_name_match(proc, prog->procs[i].name, 0))
                p = &prog->procs[i];
        if (p == NULL)
            rc = qpt_rw_fail(r, QP_ENOTFOUND, "%s: no procedure named '%s'", input, proc);
        else
            qpt_dump_dot(&f, prog, p);
    }
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
    return qpt_public_rc(rc);
}
