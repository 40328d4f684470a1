/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "base/qp_search.h"

#include "cfg/cfg_priv.h"

const char *const cfg_src_names[CFG_NSRC] = {
    "symbol", "eh_frame", "call target", "entry point", "init/fini",
    "plt",    "gap",      "jump target", "address taken", "section start",
};

const char *const cfg_edge_kind_names[CFG_NEDGE_KINDS] = {
    "fall", "taken", "jump", "table", "indirect", "callret",
    "return", "tailcall", "noreturn", "unresolved",
};

int
cfg_vec_grow(void **v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    void *nv = realloc(*v, ncap * elem);
    if (nv == NULL)
        return QP_ENOMEM;
    *v = nv;
    *cap = ncap;
    return 0;
}

void
cfg_vec_trim(void **v, size_t *cap, size_t n, size_t elem)
{
    if (*v == NULL || n + 1 >= *cap)
        return;
    void *nv = realloc(*v, (n + 1) * elem);
    if (nv == NULL)
        return;
    *v = nv;
    *cap = n + 1;
}

char *
cfg_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

int
cfg_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

size_t
cfg_u64_lower_bound(const uint64_t *v, size_t n, uint64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int
cfg_u64_contains(const uint64_t *v, size_t n, uint64_t x)
{
    size_t i = cfg_u64_lower_bound(v, n, x);
    return i < n && v[i] == x;
}

/*****************************************************************************
 * Callees and system calls
 */

const char *
cfg_callee_name(const cfg_prog_t *prog, const arch_insn_t *in)
{
    if (prog == NULL || in == NULL)
        return NULL;
    if ((in->flags & ARCH_F_MEM_IND) && (in->flags & ARCH_F_RIPREL)) {
        const cfg_reloc_t *r = cfg_image_reloc_at(prog->img, in->target);
        return r != NULL ? r->sym : NULL;
    }
    if (in->target == 0 || (in->flags & ARCH_F_MEM_IND))
        return NULL;
    const cfg_proc_t *p = cfg_proc_at(prog, in->target);
    return p != NULL && p->entry == in->target ? p->name : NULL;
}

long
cfg_syscall_nr(const cfg_image_t *img, const arch_insn_t *prev, const arch_insn_t *sc)
{
    if (img == NULL || sc == NULL || sc->kind != ARCH_KIND_SYSCALL || prev == NULL
        || prev->addr + prev->len != sc->addr)
        return -1;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(img, prev->addr, &avail);
    arch_ops_t ops;
    const arch_isa_t *isa = cfg_image_isa(img);
    if (p != NULL && avail >= prev->len && isa->decode_ops == NULL)
        return isa->syscall_nr != NULL ? isa->syscall_nr(p, prev->len) : -1;
    if (p == NULL || avail < prev->len || arch_decode_ops(p, prev->len, prev->addr, &ops) < 0)
        return -1;
    if (ops.op != ARCH_OP_MOV || ops.dst.kind != ARCH_OPND_REG || ops.dst.reg != ARCH_REG_SYSNR
        || ops.src.kind != ARCH_OPND_IMM || ops.src.imm < 0)
        return -1;
    return (long)ops.src.imm;
}

/*****************************************************************************
 * Matching names the way users write them
 */

/* PAT against the N bytes at S: whole (GLOB: as a shell pattern). */
static int
match_part(const char *pat, const char *s, size_t n, int glob)
{
    if (!glob)
        return strlen(pat) == n && strncmp(pat, s, n) == 0;
    char *c = strndup(s, n);
    int m = c != NULL && fnmatch(pat, c, 0) == 0;
    free(c);
    return m;
}

int
cfg_name_match(const char *pat, const char *name, int glob)
{
    /* The lazy-binding halves of PLT entries (NAME@plt.lazy) and the resolver's entry
     * (.plt) are no procedures a user means by "lib_*" or "*": only a pattern that
     * names the PLT matches them. */
    size_t len = strlen(name);
    if (glob && strstr(pat, "plt") == NULL
        && (strcmp(name, ".plt") == 0 || (len > 9 && strcmp(name + len - 9, "@plt.lazy") == 0)))
        return 0;
    if (match_part(pat, name, len, glob))
        return 1;
    char *dm = cfg_demangle(name);
    if (dm == NULL)
        return 0;
    /* The parameter list starts at the first '(' outside template arguments. */
    size_t n = 0, ret = 0;
    int depth = 0;
    for (; dm[n] && !(dm[n] == '(' && depth == 0 && n > 0); n++) {
        if (dm[n] == '<')
            depth++;
        else if (dm[n] == '>' && depth > 0)
            depth--;
        else if (dm[n] == ' ' && depth == 0)
            ret = n + 1; /* a template function's return type ends here */
    }
    int m = match_part(pat, dm, strlen(dm), glob) || match_part(pat, dm, n, glob)
        || (ret > 0 && n > 0 && dm[n - 1] == '>' && match_part(pat, dm + ret, n - ret, glob));
    free(dm);
    return m;
}

const char *
cfg_module_sep(const char *pat)
{
    const char *colon = strchr(pat, ':');
    while (colon != NULL && colon[1] == ':') /* C++'s '::' belongs to the name */
        colon = strchr(colon + 2, ':');
    return colon != NULL && colon != pat ? colon : NULL;
}

int
cfg_module_match(const char *pat, size_t n, const char *file)
{
    if (file == NULL)
        return 0;
    const char *base = strrchr(file, '/');
    char *m = strndup(pat, n);
    int ok = m != NULL
        && (fnmatch(m, file, 0) == 0 || fnmatch(m, base != NULL ? base + 1 : file, 0) == 0);
    free(m);
    return ok;
}

const cfg_reloc_t *
cfg_image_reloc_at(const cfg_image_t *img, uint64_t where)
{
    size_t i = qp_lower_bound_u64(img->relocs, img->nrelocs, sizeof(*img->relocs),
                                  offsetof(cfg_reloc_t, where), where);
    return i < img->nrelocs && img->relocs[i].where == where ? &img->relocs[i] : NULL;
}

uint32_t
cfg_proc_owner(const cfg_prog_t *prog, uint32_t i)
{
    if (i == CFG_NONE || i >= prog->nprocs)
        return CFG_NONE;
    const cfg_proc_t *p = &prog->procs[i];
    return (p->flags & CFG_PROC_FRAGMENT) && p->parent != CFG_NONE ? p->parent : i;
}
