/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
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

char *
cfg_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
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
