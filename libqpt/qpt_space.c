/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * libqpt: spaces, procedures, points, snippets and insertions - what files and
 * processes share. A snippet is built as a tree of arch_snip_t nodes; qpt_insert checks
 * it against its point (arch_snip_check with the point's context) and keeps a copy.
 */
#include "config.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libqpt/qpt_priv.h"
#include "libqpt/qpt_rewrite_priv.h"

int
qpt_fail(qpt_space_t *s, int rc, const char *fmt, ...)
{
    rc = qpt_public_rc(rc);
    if (s != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->err, sizeof(s->err), fmt, ap);
        va_end(ap);
    }
    return rc;
}

/*
 * The core's codes the public enum does not have, as the public code a caller acts on
 * alike: QPT_E* values are the core's own, so the rest pass through.
 */
int
qpt_public_rc(int rc)
{
    switch (rc) {
    case QP_EDECODE:
        return QPT_EFORMAT;
    case QP_EDIR:
    case QP_ENOTEXEC:
    case QP_ENOTREG:
        return QPT_ENOTELF;
    case QP_EINTR:
        return QPT_EIO;
    default:
        return rc > 0 ? QPT_OK : rc;
    }
}

const char *
qpt_version(void)
{
    return PACKAGE_VERSION;
}

const char *
qpt_strerror(int rc)
{
    return qp_strerror(rc);
}

const char *
qpt_error(const qpt_space_t *s)
{
    return s != NULL ? s->err : "no space";
}

int
qpt_is_live(const qpt_space_t *s)
{
    return s != NULL && s->ops->live;
}

/*****************************************************************************
 * Spaces
 */

static void
why_set(char *why, size_t whylen, const char *fmt, const char *a, const char *b)
{
    if (why != NULL && whylen > 0)
        snprintf(why, whylen, fmt, a, b);
}

/* Threads of the analysis of the spaces opened from now on (qpt_set_analysis_threads). */
static unsigned analysis_threads;

int
qpt_set_analysis_threads(unsigned n)
{
    if (n > 16)
        return QP_EINVAL;
    analysis_threads = n;
    return 0;
}

/* Read PATH's procedures into S (both modes). */
static int
load_program(qpt_space_t *s, const char *path, char *why, size_t whylen)
{
    char w[320] = "";
    int rc = cfg_image_open_bfd_why(path, &s->img, w, sizeof(w));
    if (rc < 0) {
        why_set(why, whylen, "%s: %s", path, w[0] ? w : qp_strerror(rc));
        return rc;
    }
    const char *unsup = s->ops->image_refusal(s);
    if (unsup != NULL) {
        why_set(why, whylen, "%s: %s", path, unsup);
        return QP_EUNSUPP;
    }
    cfg_opts_t co = { 0 };
    co.threads = analysis_threads; /* (the same result for any number) */
    rc = cfg_prog_build(s->img, &co, &s->prog);
    if (rc < 0) {
        why_set(why, whylen, "%s: %s", path, qp_strerror(rc));
        return rc;
    }
    size_t n = strlen(path) + 1;
    if ((s->path = malloc(n)) == NULL)
        return QP_ENOMEM;
    memcpy(s->path, path, n);
    return 0;
}

int
qpt_open(const char *path, qpt_space_t **out, char *why, size_t whylen)
{
    if (out == NULL || path == NULL)
        return QP_EINVAL;
    *out = NULL;
    qpt_space_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return QP_ENOMEM;
    s->ops = &qpt_file_ops;
    int rc = load_program(s, path, why, whylen);
    ed_opts_t eo;
    qpt_engine_defaults(&eo, s->all_in_place);
    if (rc == 0 && (rc = ed_plan_create(s->prog, &eo, &s->plan)) < 0)
        why_set(why, whylen, "%s: %s", path, qp_strerror(rc));
    if (rc < 0) {
        qpt_close(s);
        return qpt_public_rc(rc);
    }
    *out = s;
    return 0;
}

int
qpt_attach(int pid, qpt_space_t **out, char *why, size_t whylen)
{
    if (out == NULL)
        return QP_EINVAL;
    *out = NULL;
    qpt_space_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return QP_ENOMEM;
    s->ops = &qpt_live_ops;
    int rc = qpt_live_attach(s, pid, why, whylen);
    if (rc < 0) {
        qpt_close(s);
        return qpt_public_rc(rc);
    }
    *out = s;
    return 0;
}

int
qpt_spawn(char *const argv[], qpt_space_t **out, char *why, size_t whylen)
{
    if (out == NULL || argv == NULL || argv[0] == NULL)
        return QP_EINVAL;
    *out = NULL;
    qpt_space_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return QP_ENOMEM;
    s->ops = &qpt_live_ops;
    int rc = qpt_live_spawn(s, argv, why, whylen);
    if (rc < 0) {
        qpt_kill(s); /* not run */
        return qpt_public_rc(rc);
    }
    *out = s;
    return 0;
}

/* Free S; KILL: qpt_kill's (a process that qpt_spawn started ends with it). */
static void
space_close(qpt_space_t *s, int kill)
{
    if (s == NULL)
        return;
    s->ops->close(s, kill);
    free(s->lib_name);
    for (size_t i = 0; i < s->nnamed; i++)
        free(s->named[i].name);
    free(s->named);
    qpt_notes_free(s);
    for (size_t i = 0; i < s->nins; i++)
        free(s->ins[i].nodes);
    free(s->ins);
    qpt_cfg_free(s);
    cfg_prog_destroy(s->prog);
    cfg_image_destroy(s->img);
    free(s->path);
    free(s);
}

void
qpt_kill(qpt_space_t *s)
{
    space_close(s, 1);
}

/* Load the program of a live process (qpt_live.c calls this once it knows the exe). */
int qpt_load_live_program(qpt_space_t *s, const char *exe, char *why, size_t whylen);
int
qpt_load_live_program(qpt_space_t *s, const char *exe, char *why, size_t whylen)
{
    return load_program(s, exe, why, whylen);
}

void
qpt_close(qpt_space_t *s)
{
    space_close(s, 0);
}

/*****************************************************************************
 * Procedures and points
 */

uint32_t
qpt_nprocs(const qpt_space_t *s)
{
    return s != NULL && s->prog != NULL ? s->prog->nprocs : 0;
}

const char *
qpt_proc_name(const qpt_space_t *s, uint32_t proc)
{
    return proc < qpt_nprocs(s) ? s->prog->procs[proc].name : NULL;
}

const char *
qpt_module_sep(const char *pattern)
{
    return pattern != NULL ? cfg_module_sep(pattern) : NULL;
}

char *
qpt_demangle(const char *name)
{
    return name != NULL ? cfg_demangle(name) : NULL;
}

int
qpt_proc_match(const qpt_space_t *s, uint32_t proc, const char *pattern)
{
    if (proc >= qpt_nprocs(s) || pattern == NULL)
        return 0;
    const char *sep = cfg_module_sep(pattern);
    if (sep != NULL && !cfg_module_match(pattern, (size_t)(sep - pattern), qpt_proc_module(s, proc)))
        return 0;
    return cfg_name_match(sep != NULL ? sep + 1 : pattern, s->prog->procs[proc].name, 1);
}

const char *
qpt_proc_module(const qpt_space_t *s, uint32_t proc)
{
    if (s == NULL || proc >= qpt_nprocs(s))
        return NULL;
    const cfg_proc_t *p = &s->prog->procs[proc];
    const char *file = NULL;
    unsigned line;
    if ((p->name == NULL || cfg_image_func_line(s->prog->img, p->name, p->entry, &file, &line) < 0)
        && cfg_image_line(s->prog->img, p->entry, &file, &line) < 0)
        return NULL;
    return file;
}

uint64_t
qpt_proc_entry(const qpt_space_t *s, uint32_t proc)
{
    return proc < qpt_nprocs(s) ? s->prog->procs[proc].entry + s->bias : 0;
}

int
qpt_proc_find(const qpt_space_t *s, const char *name, uint32_t *proc)
{
    if (s == NULL || name == NULL || proc == NULL || s->prog == NULL)
        return QP_EINVAL;
    const cfg_proc_t *p = cfg_proc_by_name(s->prog, name);
    if (p == NULL)
        return QP_ENOTFOUND;
    *proc = (uint32_t)(p - s->prog->procs);
    return 0;
}

const char *
qpt_proc_refusal(const qpt_space_t *s, uint32_t proc)
{
    if (proc >= qpt_nprocs(s))
        return "no such procedure";
    const cfg_proc_t *p = &s->prog->procs[proc];
    if (p->flags & CFG_PROC_FRAGMENT)
        return "a cold fragment (its points belong to its parent)";
    return s->ops->proc_refusal(s, proc);
}

/* Visit the instructions of block B: FN(ARG, insn, prev or NULL); stops at FN's != 0. */
static int
block_insns(const cfg_prog_t *prog, const cfg_block_t *b,
            int (*fn)(void *arg, const arch_insn_t *in, const arch_insn_t *prev), void *arg)
{
    arch_insn_t in, prev;
    int have = 0;
    for (uint64_t a = b->start; a < b->end; a += in.len) {
        if (cfg_image_decode(prog->img, a, 0, &in) < 0)
            return QP_EDECODE;
        int r = fn(arg, &in, have ? &prev : NULL);
        if (r != 0)
            return r;
        prev = in;
        have = 1;
    }
    return 0;
}

/* Collecting points. */
typedef struct collect {
    qpt_space_t *s;
    uint32_t proc, kind;
    const cfg_block_t *block;
    qpt_point_t *out;
    size_t cap, n;
} collect_t;

static void
add_point(collect_t *c, uint64_t addr)
{
    if (c->n < c->cap)
        c->out[c->n] = (qpt_point_t) { c->kind, c->proc, addr + c->s->bias, 0, 0, 0 };
    c->n++;
}

static void
add_edge(collect_t *c, uint64_t from, uint64_t to, uint32_t edge)
{
    if (c->n < c->cap)
        c->out[c->n] = (qpt_point_t) { QPT_EDGE, c->proc, from + c->s->bias, to + c->s->bias,
                                       edge, 0 };
    c->n++;
}

/* Does block B leave by a return to after its last call? */
static int
block_returns_from_call(const cfg_prog_t *prog, const cfg_block_t *b)
{
    for (uint32_t e = 0; e < b->nsucc; e++)
        if (cfg_block_succ(prog, b, e)->kind == CFG_EDGE_CALLRET)
            return 1;
    return 0;
}

static int
visit(void *arg, const arch_insn_t *in, const arch_insn_t *prev)
{
    collect_t *c = arg;
    (void)prev;
    int last = in->addr + in->len >= c->block->end;
    switch (c->kind) {
    case QPT_EXIT:
        if (in->kind == ARCH_KIND_RET)
            add_point(c, in->addr);
        else if (last && in->kind == ARCH_KIND_CALL && c->s->ops->call_is_exit(c->s, c->block))
            add_point(c, in->addr);
        else if (last
                 && (in->kind == ARCH_KIND_JMP || in->kind == ARCH_KIND_JMP_IND
                     || in->kind == ARCH_KIND_JCC)) {
            /* A tail call; a conditional one too (its taken side leaves: an exit that a
             * timer must see, or its time would be wrong). */
            for (uint32_t e = 0; e < c->block->nsucc; e++)
                if (cfg_block_succ(c->s->prog, c->block, e)->kind == CFG_EDGE_TAILCALL) {
                    add_point(c, in->addr);
                    break;
                }
        }
        break;
    case QPT_CALL:
    case QPT_AFTER_CALL:
        if ((in->kind == ARCH_KIND_CALL || in->kind == ARCH_KIND_CALL_IND)
            && (c->kind == QPT_CALL || (last && block_returns_from_call(c->s->prog, c->block))))
            add_point(c, in->addr);
        break;
    case QPT_INSN: add_point(c, in->addr); break;
    default: break;
    }
    return 0;
}

int
qpt_points(qpt_space_t *s, uint32_t proc, uint32_t kind, qpt_point_t *out, size_t cap, size_t *n)
{
    if (s == NULL || n == NULL || (cap > 0 && out == NULL) || kind < QPT_ENTRY
        || kind > QPT_INSN)
        return QP_EINVAL;
    *n = 0;
    if (proc >= qpt_nprocs(s))
        return qpt_fail(s, QP_ENOTFOUND, "procedure %u: no such procedure", proc);
    const char *why = qpt_proc_refusal(s, proc);
    if (why != NULL)
        return qpt_fail(s, QP_EUNSUPP, "%s: %s", qpt_proc_name(s, proc), why);
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *p = &prog->procs[proc];
    collect_t c = { s, proc, kind, NULL, out, cap, 0 };
    if (kind == QPT_ENTRY)
        add_point(&c, p->entry);
    for (uint32_t k = 0; kind != QPT_ENTRY && k < p->nblocks; k++) {
        c.block = &prog->blocks[p->block + k];
        if (kind == QPT_BLOCK)
            add_point(&c, c.block->start);
        else if (kind == QPT_EDGE) {
            for (uint32_t e = 0; e < c.block->nsucc; e++) {
                const cfg_edge_t *ed = cfg_block_succ(prog, c.block, e);
                if (ed->to != CFG_NONE)
                    add_edge(&c, c.block->start, prog->blocks[ed->to].start,
                             c.block->succ + e);
            }
        } else
            QP_CHECK(block_insns(prog, c.block, visit, &c));
    }
    *n = c.n;
    return 0;
}

/* Does the DWARF file name NAME end with the path WANT, component-wise? */
static int
same_file(const char *name, const char *want)
{
    size_t n = strlen(name), w = strlen(want);
    if (w > n || strcmp(name + n - w, want) != 0)
        return 0;
    return w == n || name[n - w - 1] == '/' || want[0] == '/';
}

int
qpt_line_points(qpt_space_t *s, const char *file, unsigned line, qpt_point_t *out, size_t cap,
                size_t *n)
{
    if (s == NULL || file == NULL || n == NULL || (cap > 0 && out == NULL))
        return QP_EINVAL;
    *n = 0;
    const cfg_prog_t *prog = s->prog;
    collect_t c = { s, 0, QPT_INSN, NULL, out, cap, 0 };
    for (uint32_t p = 0; p < prog->nprocs; p++) {
        if (qpt_proc_refusal(s, p) != NULL)
            continue;
        c.proc = p;
        for (uint32_t k = 0; k < prog->procs[p].nblocks; k++) {
            const cfg_block_t *b = &prog->blocks[prog->procs[p].block + k];
            int prev_same = 0;
            arch_insn_t in;
            for (uint64_t a = b->start; a < b->end; a += in.len) {
                if (cfg_image_decode(prog->img, a, 0, &in) < 0)
                    break;
                const char *f;
                unsigned l;
                int same = cfg_image_line(prog->img, a, &f, &l) == 0 && l == line
                           && same_file(f, file);
                if (same && !prev_same)
                    add_point(&c, a);
                prev_same = same;
            }
        }
    }
    *n = c.n;
    if (c.n == 0)
        return qpt_fail(s, QP_ENOTFOUND, "%s:%u: no instruction of that line (is the program "
                        "built with -g?)", file, line);
    return 0;
}

uint64_t
qpt_point_callee(const qpt_space_t *s, const qpt_point_t *pt)
{
    if (s == NULL || pt == NULL || (pt->kind != QPT_CALL && pt->kind != QPT_AFTER_CALL))
        return 0;
    arch_insn_t in;
    if (cfg_image_decode(s->prog->img, pt->addr - s->bias, 0, &in) < 0
        || in.kind != ARCH_KIND_CALL)
        return 0;
    return in.target + s->bias;
}

static int insn_of(const qpt_space_t *s, uint32_t proc, uint64_t addr, arch_insn_t *in);

int
qpt_insn_point(qpt_space_t *s, uint64_t addr, qpt_point_t *out)
{
    if (s == NULL || out == NULL)
        return QP_EINVAL;
    const cfg_proc_t *p = cfg_proc_at(s->prog, addr - s->bias);
    if (p == NULL)
        return qpt_fail(s, QP_ENOTFOUND, "0x%llx: in no procedure", (unsigned long long)addr);
    uint32_t proc = (uint32_t)(p - s->prog->procs);
    if (p->flags & CFG_PROC_FRAGMENT)
        proc = p->parent;
    const char *why = qpt_proc_refusal(s, proc);
    if (why != NULL)
        return qpt_fail(s, QP_EUNSUPP, "%s: %s", qpt_proc_name(s, proc), why);
    arch_insn_t in;
    int rc = insn_of(s, (uint32_t)(p - s->prog->procs), addr - s->bias, &in);
    if (rc < 0)
        return qpt_fail(s, rc, "0x%llx: not the start of an instruction of %s",
                        (unsigned long long)addr, qpt_proc_name(s, proc));
    *out = (qpt_point_t) { QPT_INSN, proc, addr, 0, 0, 0 };
    return 0;
}

/*
 * After an instruction: before the next one when it is in the same block (the only way
 * there); the fall-through edge when the instruction ends its block; its QPT_AFTER_CALL
 * point for a call. An instruction that leaves by a jump, a branch or a return has no one
 * place after it.
 */
int
qpt_point_after(qpt_space_t *s, const qpt_point_t *insn, qpt_point_t *out)
{
    if (s == NULL || insn == NULL || out == NULL || insn->kind != QPT_INSN)
        return QP_EINVAL;
    uint64_t addr = insn->addr - s->bias;
    arch_insn_t in;
    const cfg_proc_t *owner = cfg_proc_at(s->prog, addr);
    if (owner == NULL || insn_of(s, (uint32_t)(owner - s->prog->procs), addr, &in) < 0)
        return qpt_fail(s, QP_ENOTFOUND, "0x%llx: not an instruction of %s",
                        (unsigned long long)insn->addr, qpt_proc_name(s, insn->proc));
    switch (in.kind) {
    case ARCH_KIND_CALL:
    case ARCH_KIND_CALL_IND: {
        /* Only calls that return have an after-call point. */
        const cfg_block_t *b = &s->prog->blocks[cfg_block_at(s->prog, addr)];
        if (addr + in.len < b->end || !block_returns_from_call(s->prog, b))
            return qpt_fail(s, QP_EUNSUPP, "0x%llx: the call does not return",
                            (unsigned long long)insn->addr);
        *out = (qpt_point_t) { QPT_AFTER_CALL, insn->proc, insn->addr, 0, 0, 0 };
        return 0;
    }
    case ARCH_KIND_JMP:
    case ARCH_KIND_JCC:
    case ARCH_KIND_JMP_IND:
    case ARCH_KIND_RET:
    case ARCH_KIND_HALT:
        return qpt_fail(s, QP_EUNSUPP, "0x%llx: control leaves it by a jump, a branch or a "
                        "return, not to one place after it (use its QPT_EDGE points)",
                        (unsigned long long)insn->addr);
    default: break;
    }
    const cfg_prog_t *prog = s->prog;
    const cfg_block_t *b = &prog->blocks[cfg_block_at(prog, addr)];
    if (addr + in.len < b->end) {
        *out = (qpt_point_t) { QPT_INSN, insn->proc, insn->addr + in.len, 0, 0, 0 };
        return 0;
    }
    for (uint32_t e = 0; e < b->nsucc; e++) {
        const cfg_edge_t *ed = cfg_block_succ(prog, b, e);
        if (ed->kind == CFG_EDGE_FALL && ed->to != CFG_NONE) {
            *out = (qpt_point_t) { QPT_EDGE, insn->proc, b->start + s->bias,
                                   prog->blocks[ed->to].start + s->bias, b->succ + e, 0 };
            return 0;
        }
    }
    return qpt_fail(s, QP_EUNSUPP, "0x%llx: nothing runs after it in %s (it ends the "
                    "procedure)", (unsigned long long)insn->addr, qpt_proc_name(s, insn->proc));
}

/*****************************************************************************
 * Snippets
 */

qpt_snippet_t *
qpt_snippet_create(void)
{
    return calloc(1, sizeof(qpt_snippet_t));
}

void
qpt_snippet_destroy(qpt_snippet_t *sn)
{
    if (sn == NULL)
        return;
    free(sn->v);
    free(sn);
}

/* A new node; QPT_NONE (and the snippet marked bad) when an operand is bad. */
static qpt_expr_t
add(qpt_snippet_t *sn, uint8_t op, qpt_expr_t a, qpt_expr_t b, qpt_expr_t c, int64_t imm,
    int nops)
{
    if (sn == NULL)
        return QPT_NONE;
    if ((nops >= 1 && (a == QPT_NONE || a >= sn->n)) || (nops >= 2 && (b == QPT_NONE || b >= sn->n))
        || (c != QPT_NONE && c >= sn->n)) {
        sn->bad = 1;
        return QPT_NONE;
    }
    if (sn->n == sn->cap) {
        uint32_t cap = sn->cap ? 2 * sn->cap : 16;
        arch_snip_t *v = realloc(sn->v, cap * sizeof(arch_snip_t));
        if (v == NULL) {
            sn->bad = 1;
            return QPT_NONE;
        }
        sn->v = v;
        sn->cap = cap;
    }
    arch_snip_t *s = &sn->v[sn->n];
    memset(s, 0, sizeof(*s));
    s->op = op;
    s->size = 8;
    s->a = nops >= 1 ? a : ARCH_SNIP_NONE;
    s->b = nops >= 2 ? b : ARCH_SNIP_NONE;
    s->c = c;
    s->imm = imm;
    return sn->n++;
}

#define N QPT_NONE

qpt_expr_t
qpt_const(qpt_snippet_t *sn, int64_t v)
{
    return add(sn, ARCH_SN_CONST, N, N, N, v, 0);
}

qpt_expr_t
qpt_arg(qpt_snippet_t *sn, int i)
{
    return add(sn, ARCH_SN_ARG, N, N, N, i, 0);
}

qpt_expr_t
qpt_retval(qpt_snippet_t *sn)
{
    return add(sn, ARCH_SN_RETVAL, N, N, N, 0, 0);
}

qpt_expr_t
qpt_load(qpt_snippet_t *sn, uint64_t addr, int size)
{
    qpt_expr_t e = add(sn, ARCH_SN_LOAD, N, N, N, (int64_t)addr, 0);
    if (e != N)
        sn->v[e].size = (uint8_t)size;
    return e;
}

qpt_expr_t
qpt_op(qpt_snippet_t *sn, qpt_op_t op, qpt_expr_t a, qpt_expr_t b)
{
    static const uint8_t map[] = {
        [QPT_ADD] = ARCH_SN_ADD, [QPT_SUB] = ARCH_SN_SUB, [QPT_MUL] = ARCH_SN_MUL,
        [QPT_DIV] = ARCH_SN_DIV, [QPT_MOD] = ARCH_SN_MOD, [QPT_SHL] = ARCH_SN_SHL,
        [QPT_SHR] = ARCH_SN_SHR, [QPT_AND] = ARCH_SN_AND, [QPT_OR] = ARCH_SN_OR,
        [QPT_XOR] = ARCH_SN_XOR, [QPT_EQ] = ARCH_SN_EQ,   [QPT_NE] = ARCH_SN_NE,
        [QPT_LT] = ARCH_SN_LT,   [QPT_LE] = ARCH_SN_LE,   [QPT_GT] = ARCH_SN_GT,
        [QPT_GE] = ARCH_SN_GE,   [QPT_ULT] = ARCH_SN_LT,  [QPT_ULE] = ARCH_SN_LE,
        [QPT_UGT] = ARCH_SN_GT,  [QPT_UGE] = ARCH_SN_GE,  [QPT_LAND] = ARCH_SN_LAND,
        [QPT_LOR] = ARCH_SN_LOR,
    };
    if (op < QPT_ADD || op > QPT_LOR) {
        if (sn != NULL)
            sn->bad = 1;
        return N;
    }
    qpt_expr_t e = add(sn, map[op], a, b, N, 0, 2);
    if (e != N && op >= QPT_ULT && op <= QPT_UGE)
        sn->v[e].flags = ARCH_SNF_UNSIGNED;
    return e;
}

qpt_expr_t
qpt_not(qpt_snippet_t *sn, qpt_expr_t a)
{
    return add(sn, ARCH_SN_NOT, a, N, N, 0, 1);
}

qpt_expr_t
qpt_if(qpt_snippet_t *sn, qpt_expr_t cond, qpt_expr_t then, qpt_expr_t els)
{
    return add(sn, ARCH_SN_IF, cond, then, els, 0, 2);
}

qpt_expr_t
qpt_seq(qpt_snippet_t *sn, qpt_expr_t a, qpt_expr_t b)
{
    return add(sn, ARCH_SN_SEQ, a, b, N, 0, 2);
}

qpt_expr_t
qpt_store(qpt_snippet_t *sn, uint64_t addr, int size, qpt_expr_t v)
{
    qpt_expr_t e = add(sn, ARCH_SN_STORE, v, N, N, (int64_t)addr, 1);
    if (e != N)
        sn->v[e].size = (uint8_t)size;
    return e;
}

qpt_expr_t
qpt_add_to(qpt_snippet_t *sn, uint64_t addr, qpt_expr_t v, int atomic)
{
    qpt_expr_t e = add(sn, ARCH_SN_ADD_TO, v, N, N, (int64_t)addr, 1);
    if (e != N && atomic)
        sn->v[e].flags = ARCH_SNF_ATOMIC;
    return e;
}

qpt_expr_t
qpt_add_to_cpu(qpt_snippet_t *sn, const qpt_cpu_var_t *var, uint64_t off, qpt_expr_t v)
{
    if (var == NULL || off % 8 != 0 || off >= var->stride) {
        if (sn != NULL)
            sn->bad = 1;
        return N;
    }
    qpt_expr_t o = qpt_const(sn, var->rseq_offset);
    qpt_expr_t st = qpt_const(sn, (int64_t)var->stride);
    if (o == N || st == N)
        return N;
    return add(sn, ARCH_SN_ADD_CPU, v, o, st, (int64_t)(var->addr + off), 2);
}

qpt_expr_t
qpt_addr(qpt_snippet_t *sn, uint64_t addr)
{
    return add(sn, ARCH_SN_ADDR, N, N, N, (int64_t)addr, 0);
}

qpt_expr_t
qpt_load_at(qpt_snippet_t *sn, qpt_expr_t addr, int size)
{
    qpt_expr_t e = add(sn, ARCH_SN_LOAD_AT, addr, N, N, 0, 1);
    if (e != N)
        sn->v[e].size = (uint8_t)size;
    return e;
}

qpt_expr_t
qpt_load_safe(qpt_snippet_t *sn, qpt_expr_t addr, int size)
{
    qpt_expr_t e = add(sn, ARCH_SN_LOAD_SAFE, addr, N, N, 0, 1);
    if (e != N)
        sn->v[e].size = (uint8_t)size;
    return e;
}

qpt_expr_t
qpt_store_at(qpt_snippet_t *sn, qpt_expr_t addr, int size, qpt_expr_t v)
{
    qpt_expr_t e = add(sn, ARCH_SN_STORE_AT, addr, v, N, 0, 2);
    if (e != N)
        sn->v[e].size = (uint8_t)size;
    return e;
}

qpt_expr_t
qpt_add_at(qpt_snippet_t *sn, qpt_expr_t addr, qpt_expr_t v, int atomic)
{
    qpt_expr_t e = add(sn, ARCH_SN_ADD_AT, addr, v, N, 0, 2);
    if (e != N && atomic)
        sn->v[e].flags = ARCH_SNF_ATOMIC;
    return e;
}

qpt_expr_t
qpt_thread_var(qpt_snippet_t *sn, uint64_t var, size_t bytes)
{
    qpt_expr_t slot = add(sn, ARCH_SN_THREAD_SLOT, N, N, N, (int64_t)var, 0);
    return qpt_op(sn, QPT_ADD, qpt_addr(sn, var + 8 * QPT_MAX_THREADS),
                  qpt_op(sn, QPT_MUL, slot, qpt_const(sn, (int64_t)bytes)));
}

qpt_expr_t
qpt_key_var(qpt_snippet_t *sn, uint64_t var, size_t bytes, qpt_expr_t key)
{
    qpt_expr_t slot = add(sn, ARCH_SN_KEY_SLOT, key, N, N, (int64_t)var, 1);
    return qpt_op(sn, QPT_ADD, qpt_addr(sn, var + 8 * QPT_MAX_THREADS),
                  qpt_op(sn, QPT_MUL, slot, qpt_const(sn, (int64_t)bytes)));
}

qpt_expr_t
qpt_sp(qpt_snippet_t *sn)
{
    return add(sn, ARCH_SN_SP, N, N, N, 0, 0);
}

qpt_expr_t
qpt_cycles(qpt_snippet_t *sn)
{
    return add(sn, ARCH_SN_CYCLES, N, N, N, 0, 0);
}

qpt_expr_t
qpt_thread_cpu_ns(qpt_snippet_t *sn)
{
    return add(sn, ARCH_SN_THREAD_CPU, N, N, N, 0, 0);
}

qpt_expr_t
qpt_thread_id(qpt_snippet_t *sn)
{
    return add(sn, ARCH_SN_THREAD_ID, N, N, N, 0, 0);
}

/* The calling thread's word K of the 3-word CPU timer VAR (depth, start, total). */
static qpt_expr_t
cpu_word(qpt_snippet_t *sn, uint64_t var, int k)
{
    return qpt_op(sn, QPT_ADD, qpt_thread_var(sn, var, 24), qpt_const(sn, 8 * k));
}

qpt_expr_t
qpt_cpu_timer_start(qpt_snippet_t *sn, uint64_t var)
{
    /* if (depth == 0) start = now; depth += 1 */
    qpt_expr_t first = qpt_op(sn, QPT_EQ, qpt_load_at(sn, cpu_word(sn, var, 0), 8),
                              qpt_const(sn, 0));
    qpt_expr_t set = qpt_store_at(sn, cpu_word(sn, var, 1), 8, qpt_thread_cpu_ns(sn));
    return qpt_seq(sn, qpt_if(sn, first, set, QPT_NONE),
                   qpt_add_at(sn, cpu_word(sn, var, 0), qpt_const(sn, 1), 0));
}

qpt_expr_t
qpt_cpu_timer_stop(qpt_snippet_t *sn, uint64_t var)
{
    /* if (depth > 0) { depth -= 1; if (depth == 0) total += now - start } */
    qpt_expr_t in = qpt_op(sn, QPT_GT, qpt_load_at(sn, cpu_word(sn, var, 0), 8),
                           qpt_const(sn, 0));
    qpt_expr_t dec = qpt_add_at(sn, cpu_word(sn, var, 0), qpt_const(sn, -1), 0);
    qpt_expr_t last = qpt_op(sn, QPT_EQ, qpt_load_at(sn, cpu_word(sn, var, 0), 8),
                             qpt_const(sn, 0));
    qpt_expr_t add_total = qpt_add_at(
        sn, cpu_word(sn, var, 2),
        qpt_op(sn, QPT_SUB, qpt_thread_cpu_ns(sn), qpt_load_at(sn, cpu_word(sn, var, 1), 8)),
        0);
    return qpt_if(sn, in, qpt_seq(sn, dec, qpt_if(sn, last, add_total, QPT_NONE)), QPT_NONE);
}

qpt_expr_t
qpt_timer_start(qpt_snippet_t *sn, uint64_t timer)
{
    return add(sn, ARCH_SN_TIMER_START, N, N, N, (int64_t)timer, 0);
}

qpt_expr_t
qpt_timer_stop(qpt_snippet_t *sn, uint64_t timer)
{
    return add(sn, ARCH_SN_TIMER_STOP, N, N, N, (int64_t)timer, 0);
}

qpt_expr_t
qpt_call(qpt_snippet_t *sn, uint64_t fn, const qpt_expr_t *args, int nargs)
{
    if (sn == NULL || nargs < 0 || nargs > ARCH_SNIP_MAXARGS || (nargs > 0 && args == NULL)) {
        if (sn != NULL)
            sn->bad = 1;
        return N;
    }
    for (int i = 0; i < nargs; i++)
        if (args[i] == N || args[i] >= sn->n) {
            sn->bad = 1;
            return N;
        }
    qpt_expr_t e = add(sn, ARCH_SN_CALL, N, N, N, (int64_t)fn, 0);
    if (e != N) {
        sn->v[e].nargs = (uint8_t)nargs;
        for (int i = 0; i < nargs; i++)
            sn->v[e].args[i] = args[i];
    }
    return e;
}

#undef N

/*****************************************************************************
 * Points: what holds there
 */

/* Register bits (1u << ARCH_REG_*) of x86-64 registers by hardware number. */
#define REG(hw) (1u << ((hw) + 1))
#define R_RCX REG(1)
#define R_RSI REG(6)
#define R_RDI REG(7)
#define R_R8 REG(8)
#define R_R9 REG(9)
#define R_R10 REG(10)
#define R_R11 REG(11)

/* Find the instruction at ADDR (link time) in PROC's blocks; 0 or QP_ENOTFOUND. */
static int
insn_of(const qpt_space_t *s, uint32_t proc, uint64_t addr, arch_insn_t *in)
{
    uint32_t b = cfg_block_at(s->prog, addr);
    if (b == CFG_NONE)
        return QP_ENOTFOUND;
    const cfg_proc_t *owner = cfg_proc_at(s->prog, addr);
    if (owner == NULL || (uint32_t)(owner - s->prog->procs) != proc)
        return QP_ENOTFOUND;
    const cfg_block_t *bl = &s->prog->blocks[b];
    for (uint64_t a = bl->start; a < bl->end; a += in->len) {
        if (cfg_image_decode(s->prog->img, a, 0, in) < 0)
            return QP_EDECODE;
        if (a == addr)
            return 0;
    }
    return QP_ENOTFOUND;
}

/* Check that edge point PT names an edge of its procedure; its kind places it. */
static int
edge_setup(qpt_space_t *s, const qpt_point_t *pt, qpt_ins_t *ins)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *p = &prog->procs[pt->proc];
    if (pt->edge >= prog->nedges)
        return qpt_fail(s, QP_EINVAL, "edge %u: no such edge", pt->edge);
    const cfg_edge_t *e = &prog->edges[pt->edge];
    if (e->from < p->block || e->from >= p->block + p->nblocks || e->to == CFG_NONE
        || prog->blocks[e->from].start + s->bias != pt->addr
        || prog->blocks[e->to].start + s->bias != pt->to)
        return qpt_fail(s, QP_EINVAL, "edge %u: not an edge of %s from 0x%llx to 0x%llx",
                        pt->edge, qpt_proc_name(s, pt->proc), (unsigned long long)pt->addr,
                        (unsigned long long)pt->to);
    return s->ops->edge_place(s, pt, &prog->blocks[e->to], ins);
}

int
qpt_point_setup(qpt_space_t *s, const qpt_point_t *pt, qpt_ins_t *ins)
{
    uint64_t addr = pt->addr - s->bias;
    arch_insn_t in;
    int rc = insn_of(s, pt->proc, addr, &in);
    if (rc < 0)
        return qpt_fail(s, rc, "0x%llx: not an instruction of %s",
                        (unsigned long long)pt->addr, qpt_proc_name(s, pt->proc));
    arch_snip_ctx_t c = { 0 };
    ins->at = ED_AT_BEFORE;
    ins->entry = 0;
    ins->save_flags = 0;
    ins->where = pt->addr;
    int call = in.kind == ARCH_KIND_CALL || in.kind == ARCH_KIND_CALL_IND;
    switch (pt->kind) {
    case QPT_ENTRY:
        if (addr != s->prog->procs[pt->proc].entry)
            return qpt_fail(s, QP_EINVAL, "0x%llx: not the entry of %s",
                            (unsigned long long)pt->addr, qpt_proc_name(s, pt->proc));
        /* The ABI: flags dead, nothing below %rsp in use. No register is taken for
         * dead: GCC's interprocedural register allocation (-fipa-ra, on from -O1) lets a
         * caller keep r11 (or any call-clobbered register the callee is seen not to
         * touch) live across a call to a procedure of the same unit. */
        c = (arch_snip_ctx_t) { ARCH_SNX_ENTRY, 0, 0, 1 };
        ins->entry = 1;
        break;
    case QPT_EXIT:
        if (in.kind == ARCH_KIND_RET)
            /* No register dead either (-fipa-ra: see QPT_ENTRY). */
            c = (arch_snip_ctx_t) { ARCH_SNX_RETURN, 0, 0, 1 };
        else if (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JMP_IND)
            c = (arch_snip_ctx_t) { 0, 0, 0, 1 }; /* a tail call: the callee's arguments */
        else if (in.kind == ARCH_KIND_JCC || in.kind == ARCH_KIND_CALL)
            /* A conditional tail call, or a call that never returns: as its kind allows. */
            QP_CHECK(s->ops->exit_other(s, pt, &in, &c));
        else
            return qpt_fail(s, QP_EINVAL, "0x%llx: not a return or tail call",
                            (unsigned long long)pt->addr);
        break;
    case QPT_CALL:
    case QPT_AFTER_CALL:
        if (!call)
            return qpt_fail(s, QP_EINVAL, "0x%llx: not a call", (unsigned long long)pt->addr);
        if (pt->kind == QPT_CALL) {
            /* r11 is not dead before a call: with -fipa-ra the caller may keep it live
             * across a callee known not to touch it (see QPT_ENTRY). */
            c = (arch_snip_ctx_t) { ARCH_SNX_CALL, 0, 0, 1 };
        } else {
            /* After a call: nothing dead (-fipa-ra: see QPT_ENTRY). */
            c = (arch_snip_ctx_t) { ARCH_SNX_AFTER_CALL, 0, 0, 1 };
            ins->at = ED_AT_AFTER;
        }
        break;
    case QPT_BLOCK:
        if (s->prog->blocks[cfg_block_at(s->prog, addr)].start != addr)
            return qpt_fail(s, QP_EINVAL, "0x%llx: not the start of a block",
                            (unsigned long long)pt->addr);
        c = (arch_snip_ctx_t) { 0, 0, ARCH_FLAGS_STATUS, 0 }; /* flags and red zone live */
        ins->save_flags = 1;
        break;
    case QPT_INSN:
        c = (arch_snip_ctx_t) { 0, 0, ARCH_FLAGS_STATUS, 0 };
        ins->save_flags = 1;
        break;
    case QPT_EDGE:
        QP_CHECK(edge_setup(s, pt, ins));
        c = (arch_snip_ctx_t) { 0, 0, ARCH_FLAGS_STATUS, 0 };
        ins->save_flags = 1;
        break;
    default: return qpt_fail(s, QP_EINVAL, "point kind %u: unknown", pt->kind);
    }
    ins->ctx = c;
    return 0;
}

/*****************************************************************************
 * Insertion
 */

/*
 * A compact copy of the tree at ROOT of the nodes V (checked: indices in range, acyclic):
 * only the nodes it reaches, ROOT first, so that a snippet object that built many
 * expressions costs each insertion only its own (emitting walks every node it is given).
 */
typedef struct {
    uint32_t *key, *val;
    size_t cap, n;
} idmap_t;

static int
idmap_put(idmap_t *m, uint32_t k, uint32_t v)
{
    if (2 * (m->n + 1) > m->cap) {
        idmap_t g = { NULL, NULL, m->cap ? 2 * m->cap : 64, 0 };
        g.key = malloc(g.cap * sizeof(uint32_t));
        g.val = malloc(g.cap * sizeof(uint32_t));
        if (g.key == NULL || g.val == NULL) {
            free(g.key);
            free(g.val);
            return QP_ENOMEM;
        }
        memset(g.key, 0xff, g.cap * sizeof(uint32_t));
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i] != UINT32_MAX)
                idmap_put(&g, m->key[i], m->val[i]);
        free(m->key);
        free(m->val);
        *m = g;
    }
    size_t i = (k * 2654435761u) & (m->cap - 1);
    while (m->key[i] != UINT32_MAX && m->key[i] != k)
        i = (i + 1) & (m->cap - 1);
    if (m->key[i] == UINT32_MAX)
        m->n++;
    m->key[i] = k;
    m->val[i] = v;
    return 0;
}

static uint32_t
idmap_get(const idmap_t *m, uint32_t k)
{
    if (m->cap == 0)
        return UINT32_MAX;
    size_t i = (k * 2654435761u) & (m->cap - 1);
    while (m->key[i] != UINT32_MAX && m->key[i] != k)
        i = (i + 1) & (m->cap - 1);
    return m->key[i] == k ? m->val[i] : UINT32_MAX;
}

static int
snip_extract(const arch_snip_t *v, uint32_t root, arch_snip_t **out, uint32_t *nout)
{
    idmap_t m = { 0 };
    arch_snip_t *o = NULL;
    uint32_t *todo = NULL, n = 0;
    size_t ntodo = 0, cap = 0, captodo = 0;
    int rc = QP_ENOMEM;

#define PUSH(x)                                                                            \
    do {                                                                                   \
        if (ntodo == captodo) {                                                            \
            captodo = captodo ? 2 * captodo : 16;                                          \
            uint32_t *t = realloc(todo, captodo * sizeof(uint32_t));                       \
            if (t == NULL)                                                                 \
                goto out;                                                                  \
            todo = t;                                                                      \
        }                                                                                  \
        todo[ntodo++] = (x);                                                               \
    } while (0)
    PUSH(root);
    while (ntodo > 0) {
        uint32_t x = todo[--ntodo];
        if (idmap_get(&m, x) != UINT32_MAX)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            arch_snip_t *t = realloc(o, cap * sizeof(arch_snip_t));
            if (t == NULL)
                goto out;
            o = t;
        }
        if (idmap_put(&m, x, n) < 0)
            goto out;
        o[n++] = v[x];
        const arch_snip_t *e = &v[x];
        uint32_t kids[3] = { e->a, e->b, e->c };
        for (int k = 0; k < 3; k++)
            if (kids[k] != ARCH_SNIP_NONE)
                PUSH(kids[k]);
        for (int k = 0; e->op == ARCH_SN_CALL && k < e->nargs && k < ARCH_SNIP_MAXARGS; k++)
            PUSH(e->args[k]);
    }
#undef PUSH
    for (uint32_t i = 0; i < n; i++) {
        arch_snip_t *e = &o[i];
        uint32_t *f[3] = { &e->a, &e->b, &e->c };
        for (int k = 0; k < 3; k++)
            if (*f[k] != ARCH_SNIP_NONE)
                *f[k] = idmap_get(&m, *f[k]);
        for (int k = 0; e->op == ARCH_SN_CALL && k < e->nargs && k < ARCH_SNIP_MAXARGS; k++)
            e->args[k] = idmap_get(&m, e->args[k]);
    }
    *out = o;
    *nout = n;
    o = NULL;
    rc = 0;
out:
    free(o);
    free(todo);
    free(m.key);
    free(m.val);
    return rc;
}

static int insert(qpt_space_t *s, const qpt_point_t *pt, const qpt_snippet_t *sn,
                  qpt_expr_t root, qpt_handle_t *h, int first);

int
qpt_insert(qpt_space_t *s, const qpt_point_t *pt, const qpt_snippet_t *sn, qpt_expr_t root,
           qpt_handle_t *h)
{
    return insert(s, pt, sn, root, h, 0);
}

int
qpt_insert_first(qpt_space_t *s, const qpt_point_t *pt, const qpt_snippet_t *sn,
                 qpt_expr_t root, qpt_handle_t *h)
{
    return insert(s, pt, sn, root, h, 1);
}

static int
insert(qpt_space_t *s, const qpt_point_t *pt, const qpt_snippet_t *sn, qpt_expr_t root,
       qpt_handle_t *h, int first)
{
    if (s == NULL || pt == NULL || sn == NULL)
        return QP_EINVAL;
    if (sn->bad || root == QPT_NONE || root >= sn->n)
        return qpt_fail(s, QP_EINVAL, "the snippet is incomplete (a builder call failed)");
    if (pt->proc >= qpt_nprocs(s))
        return qpt_fail(s, QP_ENOTFOUND, "procedure %u: no such procedure", pt->proc);
    const char *refused = qpt_proc_refusal(s, pt->proc);
    if (refused != NULL)
        return qpt_fail(s, QP_EUNSUPP, "%s: %s", qpt_proc_name(s, pt->proc), refused);
    qpt_ins_t ins;
    memset(&ins, 0, sizeof(ins));
    ins.pt = *pt;
    QP_CHECK(qpt_point_setup(s, pt, &ins));
    char why[200];
    if (arch_snip_check(sn->v, sn->n, root, &ins.ctx, why, sizeof(why)) < 0)
        return qpt_fail(s, QP_EINVAL, "%s at 0x%llx: %s", qpt_proc_name(s, pt->proc),
                        (unsigned long long)pt->addr, why);
    QP_CHECK(snip_extract(sn->v, root, &ins.nodes, &ins.n));
    int rc = s->ops->accept(s, &ins);
    if (rc < 0) {
        free(ins.nodes);
        return rc;
    }
    ins.root = 0;
    ins.order = first ? --s->first : ++s->last;
    if (s->nins == s->capins) {
        size_t cap = s->capins ? 2 * s->capins : 16;
        qpt_ins_t *v = realloc(s->ins, cap * sizeof(qpt_ins_t));
        if (v == NULL) {
            free(ins.nodes);
            return QP_ENOMEM;
        }
        s->ins = v;
        s->capins = cap;
    }
    s->ins[s->nins] = ins;
    if (h != NULL)
        *h = (qpt_handle_t)s->nins;
    s->nins++;
    return 0;
}

int
qpt_remove(qpt_space_t *s, qpt_handle_t h)
{
    if (s == NULL || h >= s->nins || s->ins[h].removed)
        return qpt_fail(s, QP_EINVAL, "handle %u: no such insertion", h);
    s->ins[h].removed = 1;
    return 0;
}

int
qpt_insertion_point(const qpt_space_t *s, qpt_handle_t h, qpt_point_t *pt)
{
    if (s == NULL || pt == NULL || h >= s->nins)
        return QP_EINVAL;
    *pt = s->ins[h].pt;
    return 0;
}

int
qpt_cost_cycles(qpt_space_t *s, qpt_handle_t h, double *cycles)
{
    if (s == NULL || cycles == NULL || h >= s->nins)
        return QP_EINVAL;
    int rc = s->ops->cycles(s, &s->ins[h], cycles);
    if (rc < 0)
        return qpt_fail(s, rc, "insertion %u: its code cannot be estimated", h);
    return 0;
}

/*****************************************************************************
 * Variables
 */

int
qpt_alloc(qpt_space_t *s, size_t bytes, uint64_t *addr)
{
    if (s == NULL || addr == NULL || bytes == 0 || bytes % 8 != 0)
        return QP_EINVAL;
    return s->ops->alloc(s, bytes, addr);
}

int
qpt_alloc_named(qpt_space_t *s, const char *name, size_t bytes, uint64_t *addr)
{
    if (s == NULL || name == NULL || addr == NULL)
        return QP_EINVAL;
    size_t len = strlen(name);
    /* (a profile's description holds it after its offset and size: no space first) */
    if (len == 0 || len > 200 || name[0] == ' ' || name[0] == '\t' || name[0] == '\n')
        return qpt_fail(s, QP_EINVAL, "a variable's name has 1 to 200 bytes, the first "
                                      "not a space");
    for (size_t i = 0; i < s->nnamed; i++)
        if (strcmp(s->named[i].name, name) == 0)
            return qpt_fail(s, QP_EINVAL, "%s: a variable of that name exists", name);
    qpt_named_t *v = realloc(s->named, (s->nnamed + 1) * sizeof(*v));
    if (v == NULL)
        return QP_ENOMEM;
    s->named = v;
    char *copy = strdup(name);
    if (copy == NULL)
        return QP_ENOMEM;
    int rc = qpt_alloc(s, bytes, addr);
    if (rc < 0) {
        free(copy);
        return rc;
    }
    v[s->nnamed++] = (qpt_named_t) { copy, *addr, bytes };
    return 0;
}

int
qpt_var_named(const qpt_space_t *s, const char *name, uint64_t *addr, size_t *bytes)
{
    if (s == NULL || name == NULL)
        return QP_EINVAL;
    for (size_t i = 0; i < s->nnamed; i++)
        if (strcmp(s->named[i].name, name) == 0) {
            if (addr != NULL)
                *addr = s->named[i].addr;
            if (bytes != NULL)
                *bytes = s->named[i].bytes;
            return 0;
        }
    return QP_ENOTFOUND;
}

int
qpt_alloc_per_thread(qpt_space_t *s, size_t bytes, uint64_t *var)
{
    if (s == NULL || var == NULL || bytes == 0 || bytes % 8 != 0 || bytes > 65536)
        return qpt_fail(s, QP_EINVAL, "per-thread variables: 8 to 65,536 bytes, a multiple "
                                      "of 8");
    return qpt_alloc(s, QPT_PER_THREAD_SIZE(bytes), var);
}

int
qpt_alloc_per_cpu(qpt_space_t *s, size_t bytes, qpt_cpu_var_t *var)
{
    int32_t off;
    unsigned ncpu;
    uint64_t stride = 64;
    if (s == NULL || var == NULL || bytes == 0 || bytes % 8 != 0)
        return qpt_fail(s, QP_EINVAL, "per-CPU variables: a multiple of 8 bytes");
    if (s->ops->cpu_slots == NULL)
        return qpt_fail(s, QP_EUNSUPP, "per-CPU words are a process's, not a file's");
    if (s->img == NULL || cfg_image_isa(s->img)->elf_machine != ARCH_EM_X86_64)
        return qpt_fail(s, QP_EUNSUPP, "per-CPU words are x86-64's");
    QP_CHECK(s->ops->cpu_slots(s, &off, &ncpu));
    while (stride < bytes)
        stride *= 2;
    if (ncpu > QPT_MAX_CPUS || stride > ARCH_SNIP_CPU_STRIDE_MAX
        || stride * ncpu > (64u << 20))
        return qpt_fail(s, QP_EUNSUPP, "%u CPUs of %llu bytes: too many for per-CPU "
                        "words", ncpu, (unsigned long long)stride);
    QP_CHECK(qpt_alloc(s, stride * ncpu, &var->addr));
    var->stride = stride;
    var->ncpu = ncpu;
    var->rseq_offset = off;
    return 0;
}

int
qpt_free(qpt_space_t *s, uint64_t addr)
{
    if (s == NULL)
        return QP_EINVAL;
    return s->ops->free(s, addr);
}

int
qpt_set_active(qpt_space_t *s, int on)
{
    if (s == NULL)
        return QP_EINVAL;
    return s->ops->set_active(s, on);
}

int
qpt_set_relocate(qpt_space_t *s, int on)
{
    if (s == NULL)
        return QP_EINVAL;
    return s->ops->set_relocate(s, on);
}

int
qpt_tls_offset(const qpt_space_t *s, const char *name, int64_t *off)
{
    if (s == NULL || name == NULL || off == NULL || s->img == NULL)
        return QP_EINVAL;
    const cfg_segment_t *tls = NULL;
    for (size_t i = 0; i < s->img->nsegments; i++)
        if (s->img->segments[i].type == 7 /* PT_TLS */)
            tls = &s->img->segments[i];
    if (tls == NULL)
        return QP_ENOTFOUND;
    for (size_t i = 0; i < s->img->nvariables; i++) {
        const cfg_symbol_t *v = &s->img->variables[i];
        if (v->kind != CFG_SYM_TLS || strcmp(v->name, name) != 0)
            continue;
        /* The executable's block ends at the thread pointer (x86-64's variant II), its
         * start aligned as the loader does: roundup(memsz - firstbyte, align) + firstbyte. */
        uint64_t align = tls->align ? tls->align : 1, first = tls->vaddr & (align - 1);
        uint64_t size = ((tls->memsz - first + align - 1) / align) * align + first;
        *off = (int64_t)v->addr - (int64_t)size;
        return 0;
    }
    return QP_ENOTFOUND;
}

qpt_expr_t
qpt_tls_addr(qpt_snippet_t *sn, int64_t off)
{
    return qpt_op(sn, QPT_ADD, add(sn, ARCH_SN_THREAD_PTR, QPT_NONE, QPT_NONE, QPT_NONE, 0, 0),
                  qpt_const(sn, off));
}

int
qpt_keep_on_exit(qpt_space_t *s, int keep)
{
    if (s == NULL)
        return QP_EINVAL;
    return s->ops->keep_on_exit(s, keep);
}

/* Is symbol HAVE the one named WANT? A dynamic symbol's name carries its version
 * (BFD: "_thread_db_pthread_tid@@GLIBC_PRIVATE"); WANT without one matches any. */
static int
same_symbol(const char *have, const char *want)
{
    size_t n = strlen(want);
    return strncmp(have, want, n) == 0
        && (have[n] == '\0' || (have[n] == '@' && strchr(want, '@') == NULL));
}

int
qpt_symbol(const qpt_space_t *s, const char *name, uint64_t *addr, uint64_t *size)
{
    if (s == NULL || name == NULL || addr == NULL || s->img == NULL)
        return QP_EINVAL;
    for (int pass = 0; pass < 2; pass++) {
        const cfg_symbol_t *v = pass ? s->img->symbols : s->img->variables;
        size_t n = pass ? s->img->nsymbols : s->img->nvariables;
        for (size_t i = 0; i < n; i++)
            if (v[i].kind == CFG_SYM_TLS && same_symbol(v[i].name, name))
                return QP_EUNSUPP; /* thread-local: qpt_tls_offset */
            else if (v[i].addr != 0 && same_symbol(v[i].name, name)) {
                *addr = v[i].addr + s->bias;
                if (size != NULL)
                    *size = v[i].size;
                return 0;
            }
    }
    return QP_ENOTFOUND;
}

const char *
qpt_symbol_at(const qpt_space_t *s, uint64_t addr, uint64_t *off)
{
    if (s == NULL || s->img == NULL)
        return NULL;
    uint64_t a = addr - s->bias;
    const cfg_symbol_t *best = NULL;
    for (int pass = 0; pass < 2; pass++) {
        const cfg_symbol_t *v = pass ? s->img->symbols : s->img->variables;
        size_t n = pass ? s->img->nsymbols : s->img->nvariables;
        for (size_t i = 0; i < n; i++)
            if (v[i].kind != CFG_SYM_TLS && v[i].addr != 0 && v[i].addr <= a
                && a < v[i].addr + (v[i].size ? v[i].size : 1)
                && (best == NULL || v[i].addr > best->addr))
                best = &v[i];
    }
    if (best != NULL && off != NULL)
        *off = a - best->addr;
    return best ? best->name : NULL;
}

int
qpt_read_memory(qpt_space_t *s, uint64_t addr, void *buf, size_t len)
{
    if (s == NULL || buf == NULL)
        return QP_EINVAL;
    return s->ops->read(s, addr, buf, len);
}

int
qpt_write_memory(qpt_space_t *s, uint64_t addr, const void *buf, size_t len)
{
    if (s == NULL || buf == NULL)
        return QP_EINVAL;
    return s->ops->write(s, addr, buf, len);
}

int
qpt_commit(qpt_space_t *s)
{
    if (s == NULL)
        return QP_EINVAL;
    return s->ops->commit(s);
}

int
qpt_write(qpt_space_t *s, const char *output)
{
    if (s == NULL || output == NULL)
        return QP_EINVAL;
    return s->ops->write_file(s, output);
}

void
qpt_on_temp_file(qpt_space_t *s, void (*fn)(void *arg, const char *path), void *arg)
{
    if (s != NULL) {
        s->temp_fn = fn;
        s->temp_arg = arg;
    }
}

/*****************************************************************************
 * Shared libraries by name
 */

int
qpt_module_matches(const char *module, const char *name)
{
    if (module == NULL || name == NULL)
        return 0;
    if (fnmatch(module, name, 0) == 0)
        return 1;
    char *n = strdup(name);
    int yes = 0;
    /* libqv.so.0.8.6, libqv.so.0.8, libqv.so.0: each version number taken off in turn
     * while ".so." stays. */
    for (char *dot; n != NULL && !yes && strstr(n, ".so.") != NULL;) {
        if ((dot = strrchr(n, '.')) == NULL || dot[1] == '\0'
            || strspn(dot + 1, "0123456789") != strlen(dot + 1))
            break;
        *dot = '\0';
        yes = fnmatch(module, n, 0) == 0;
    }
    free(n);
    return yes;
}

const char *
qpt_library_name(const qpt_space_t *s)
{
    return s != NULL ? s->lib_name : NULL;
}

const char *
qpt_proc_match_name(const qpt_space_t *s, uint32_t proc, const char *pattern)
{
    if (s == NULL || proc >= qpt_nprocs(s) || pattern == NULL)
        return NULL;
    if (qpt_proc_match(s, proc, pattern))
        return s->prog->procs[proc].name;
    const char *sep = cfg_module_sep(pattern);
    if (sep != NULL && !cfg_module_match(pattern, (size_t)(sep - pattern), qpt_proc_module(s, proc)))
        return NULL;
    /* The function symbols at its entry (sorted by address: found by bisection). */
    const cfg_image_t *img = s->prog->img;
    uint64_t entry = s->prog->procs[proc].entry;
    size_t lo = 0, hi = img->nsymbols;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (img->symbols[mid].addr < entry)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < img->nsymbols && img->symbols[lo].addr == entry; lo++) {
        const cfg_symbol_t *sym = &img->symbols[lo];
        if ((sym->kind == CFG_SYM_FUNC || sym->kind == CFG_SYM_IFUNC)
            && cfg_name_match(sep != NULL ? sep + 1 : pattern, sym->name, 1))
            return sym->name;
    }
    return NULL;
}
