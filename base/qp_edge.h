/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_EDGE_H
#define QP_BASE_EDGE_H
/*
 * PURPOSE: the kinds of a CFG edge, as cfg/ builds them and as our formats store them
 * (the description, base/qp_desc.h; the values 0..CFG_NEDGE_KINDS-1 are on disk, so
 * they never change). Here, below cfg/, so that the formats need nothing of cfg/;
 * cfg/cfg.h includes it. The names are defined in cfg/cfg_util.c.
 */
#include <stdint.h>

typedef enum cfg_edge_kind {
    CFG_EDGE_FALL = 0,  /* falls through into the next block */
    CFG_EDGE_TAKEN,     /* a conditional branch taken */
    CFG_EDGE_JUMP,      /* a direct unconditional jump inside the procedure */
    CFG_EDGE_TABLE,     /* one target of a jump table */
    CFG_EDGE_INDIRECT,  /* possible target of an indirect jump (an address-taken label) */
    CFG_EDGE_CALLRET,   /* from a call to its return site (the callee returns) */
    CFG_EDGE_RETURN,    /* leaves: return */
    CFG_EDGE_TAILCALL,  /* leaves: jump to another procedure (direct or through memory) */
    CFG_EDGE_NORETURN,  /* leaves: call to a procedure that never returns, hlt, ud2 */
    CFG_EDGE_UNRESOLVED,/* leaves: indirect jump whose targets are unknown */
    CFG_NEDGE_KINDS,
} cfg_edge_kind_t;

/* Names for edge kinds ("fall", "taken", ...). */
extern const char *const cfg_edge_kind_names[CFG_NEDGE_KINDS];

/* qsort's comparison of two uint64_t, ascending. */
static inline int
qp_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

#endif
