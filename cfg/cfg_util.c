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
