/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Unit tests of libqpt's CFG walk (qpt_proc_cfg, qpt_block*, qpt_dominates, qpt_loop*,
 * qpt_block_point, qpt_edge_point) on tests/qpt/cfg_prog built -O0 and -O2. Every
 * procedure of the program is checked against oracles computed here from the public
 * edges alone: reachability by a search, dominators by the textbook data-flow over
 * bit sets, natural loops by their definition (a back edge to a dominating header, the
 * blocks that reach its source without passing the header), nesting by inclusion of the
 * member sets. The source's shape is checked through its lines (MARK comments): the
 * blocks of nested's inner body are in two loops, its outer body in one, its return in
 * none, each header holds its loop's test or body start; classify's switch has table
 * edges; rec has no loop and calls itself. The same walk on the live process
 * (qpt_spawn) gives the same CFG, relative to each entry; its libc (qpt_library) is
 * walked too.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/qpt/qpt.h"

#define PROG_O0 "tests/qpt/cfg_prog_O0"
#define PROG_O2 "tests/qpt/cfg_prog_O2"
#define MAXB 512 /* procedures with more blocks are checked without the bit-set oracles */

static qpt_space_t *
open_prog(const char *path)
{
    char why[512] = "";
    qpt_space_t *s = NULL;
    ck_assert_msg(qpt_open(path, &s, why, sizeof(why)) == 0, "%s", why);
    return s;
}

/*****************************************************************************
 * Oracles over the public edges
 */

typedef struct graph {
    uint32_t n;
    uint32_t *succ, *nsucc; /* succ[b * 4n + k]: b's k-th successor inside (duplicates kept) */
    uint8_t *reach;
    uint8_t *dom;           /* dom[b * n + a]: a dominates b */
} graph_t;

static void
graph_load(qpt_space_t *s, uint32_t proc, uint32_t n, graph_t *g)
{
    g->n = n;
    g->succ = calloc((size_t)n * n * 4 + 1, sizeof(uint32_t));
    g->nsucc = calloc(n + 1, sizeof(uint32_t));
    g->reach = calloc(n + 1, 1);
    g->dom = calloc((size_t)n * n + 1, 1);
    ck_assert(g->succ && g->nsucc && g->reach && g->dom);
    for (uint32_t b = 0; b < n; b++) {
        qpt_block_t bl;
        ck_assert_int_eq(qpt_block(s, proc, b, &bl), 0);
        for (uint32_t k = 0; k < bl.nsucc; k++) {
            qpt_edge_t e;
            ck_assert_int_eq(qpt_block_succ(s, proc, b, k, &e), 0);
            if (e.to != QPT_NONE && g->nsucc[b] < 4 * n)
                g->succ[(size_t)b * 4 * n + g->nsucc[b]++] = e.to;
        }
    }
    /* Reachability from block 0. */
    uint32_t *stack = malloc((n + 1) * sizeof(uint32_t)), sp = 0;
    if (n > 0) {
        g->reach[0] = 1;
        stack[sp++] = 0;
    }
    while (sp > 0) {
        uint32_t b = stack[--sp];
        for (uint32_t k = 0; k < g->nsucc[b]; k++) {
            uint32_t t = g->succ[(size_t)b * 4 * n + k];
            if (!g->reach[t]) {
                g->reach[t] = 1;
                stack[sp++] = t;
            }
        }
    }
    free(stack);
    /* Dominators: Dom(0) = {0}; Dom(b) = {b} + the intersection over reachable preds. */
    for (uint32_t b = 0; b < n; b++)
        for (uint32_t a = 0; a < n; a++)
            g->dom[(size_t)b * n + a] = b == 0 ? a == 0 : 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t b = 1; b < n; b++) {
            if (!g->reach[b])
                continue;
            uint8_t nd[MAXB];
            memset(nd, 1, n);
            for (uint32_t p = 0; p < n; p++) {
                if (!g->reach[p])
                    continue;
                for (uint32_t k = 0; k < g->nsucc[p]; k++)
                    if (g->succ[(size_t)p * 4 * n + k] == b)
                        for (uint32_t a = 0; a < n; a++)
                            nd[a] &= g->dom[(size_t)p * n + a];
            }
            nd[b] = 1;
            if (memcmp(nd, &g->dom[(size_t)b * n], n) != 0) {
                memcpy(&g->dom[(size_t)b * n], nd, n);
                changed = 1;
            }
        }
    }
}

static void
graph_free(graph_t *g)
{
    free(g->succ);
    free(g->nsucc);
    free(g->reach);
    free(g->dom);
}

static int
dominates(const graph_t *g, uint32_t a, uint32_t b)
{
    return g->reach[a] && g->reach[b] && g->dom[(size_t)b * g->n + a];
}

/* The immediate dominator by the definition: the strict dominator that every other
 * strict dominator dominates. */
static uint32_t
idom_of(const graph_t *g, uint32_t b)
{
    if (b == 0 || !g->reach[b])
        return QPT_NONE;
    for (uint32_t d = 0; d < g->n; d++) {
        if (d == b || !dominates(g, d, b))
            continue;
        int all = 1;
        for (uint32_t o = 0; o < g->n && all; o++)
            if (o != b && dominates(g, o, b) && !dominates(g, o, d))
                all = 0;
        if (all)
            return d;
    }
    return QPT_NONE;
}

/* The natural loop of header H into IN (members): H, and every block that reaches a
 * latch (a source of a back edge to H) backwards without passing H. */
static void
natural_loop(const graph_t *g, uint32_t h, uint8_t *in)
{
    uint32_t n = g->n;
    memset(in, 0, n);
    in[h] = 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t u = 0; u < n; u++) {
            if (in[u] || !g->reach[u])
                continue;
            for (uint32_t k = 0; k < g->nsucc[u]; k++) {
                uint32_t v = g->succ[(size_t)u * 4 * n + k];
                /* u -> h is a back edge, or u -> member (not the header) */
                if ((v == h && dominates(g, h, u)) || (v != h && in[v])) {
                    in[u] = 1;
                    changed = 1;
                    break;
                }
            }
        }
    }
}

/*****************************************************************************
 * The checks of one procedure
 */

/* Blocks and edges agree with themselves, with the points and with the addresses. */
static void
check_blocks(qpt_space_t *s, uint32_t proc, const qpt_cfg_t *c)
{
    const char *name = qpt_proc_name(s, proc);
    uint32_t nedges = 0, npreds = 0, inside = 0;
    qpt_block_t b0;
    ck_assert_int_eq(qpt_block(s, proc, 0, &b0), 0);
    ck_assert_msg(b0.start == qpt_proc_entry(s, proc), "%s: block 0 is not the entry", name);
    for (uint32_t b = 0; b < c->nblocks; b++) {
        qpt_block_t bl;
        ck_assert_int_eq(qpt_block(s, proc, b, &bl), 0);
        ck_assert_msg(bl.start < bl.end && bl.ninsns > 0 && bl.ninsns <= bl.end - bl.start,
                      "%s: block %u", name, b);
        uint32_t p, k;
        ck_assert_int_eq(qpt_block_at(s, bl.start, &p, &k), 0);
        ck_assert_msg(p == proc && k == b, "%s: block %u at 0x%lx is (%u, %u)", name, b,
                      (unsigned long)bl.start, p, k);
        ck_assert_int_eq(qpt_block_at(s, bl.end - 1, &p, &k), 0);
        ck_assert(p == proc && k == b);
        nedges += bl.nsucc;
        npreds += bl.npred;
        for (uint32_t i = 0; i < bl.nsucc; i++) {
            qpt_edge_t e;
            ck_assert_int_eq(qpt_block_succ(s, proc, b, i, &e), 0);
            ck_assert(e.from == b && e.kind >= QPT_EDGE_FALL && e.kind <= QPT_EDGE_UNKNOWN);
            if (e.to == QPT_NONE) {
                ck_assert_msg(e.kind >= QPT_EDGE_RETURN || e.kind == QPT_EDGE_TABLE
                                  || e.kind == QPT_EDGE_INDIRECT,
                              "%s: block %u: an edge of kind %u leaves", name, b, e.kind);
                continue;
            }
            inside++;
            /* Every edge's target is a block start: the destination's. */
            qpt_block_t to;
            ck_assert_int_eq(qpt_block(s, proc, e.to, &to), 0);
            ck_assert_msg(e.target == to.start, "%s: edge %u: target 0x%lx, block at 0x%lx",
                          name, e.id, (unsigned long)e.target, (unsigned long)to.start);
            ck_assert(e.kind <= QPT_EDGE_CALL_FALL);
            if (e.kind == QPT_EDGE_FALL || e.kind == QPT_EDGE_CALL_FALL)
                ck_assert_msg(to.start == bl.end, "%s: fall-through edge %u not to the next "
                              "block", name, e.id);
            /* ... and it is among the destination's edges in. */
            int found = 0;
            for (uint32_t j = 0; j < to.npred && !found; j++) {
                qpt_edge_t pe;
                ck_assert_int_eq(qpt_block_pred(s, proc, e.to, j, &pe), 0);
                found = pe.id == e.id && pe.from == b && pe.to == e.to && pe.kind == e.kind
                        && pe.flags == e.flags;
            }
            ck_assert_msg(found, "%s: edge %u not among block %u's edges in", name, e.id, e.to);
        }
        ck_assert_int_eq(qpt_block_succ(s, proc, b, bl.nsucc, &(qpt_edge_t) { 0 }),
                         QPT_ENOTFOUND);
    }
    ck_assert_uint_eq(nedges, c->nedges);
    ck_assert_uint_eq(npreds, inside);
    ck_assert_int_eq(qpt_block(s, proc, c->nblocks, &b0), QPT_ENOTFOUND);
}

/* The block and edge points agree with qpt_points. */
static void
check_points(qpt_space_t *s, uint32_t proc, const qpt_cfg_t *c)
{
    qpt_point_t pt, all[MAXB * 4];
    size_t n;
    if (qpt_proc_refusal(s, proc) != NULL) {
        ck_assert_int_eq(qpt_block_point(s, proc, 0, &pt), QPT_EUNSUPP);
        return;
    }
    ck_assert_int_eq(qpt_points(s, proc, QPT_BLOCK, all, MAXB * 4, &n), 0);
    ck_assert_uint_eq(n, c->nblocks);
    for (uint32_t b = 0; b < c->nblocks; b++) {
        ck_assert_int_eq(qpt_block_point(s, proc, b, &pt), 0);
        ck_assert(memcmp(&pt, &all[b], sizeof(pt)) == 0);
    }
    ck_assert_int_eq(qpt_points(s, proc, QPT_EDGE, all, MAXB * 4, &n), 0);
    if (n > MAXB * 4)
        return;
    size_t seen = 0;
    for (uint32_t b = 0; b < c->nblocks; b++) {
        qpt_block_t bl;
        ck_assert_int_eq(qpt_block(s, proc, b, &bl), 0);
        for (uint32_t i = 0; i < bl.nsucc; i++) {
            qpt_edge_t e;
            ck_assert_int_eq(qpt_block_succ(s, proc, b, i, &e), 0);
            int rc = qpt_edge_point(s, proc, &e, &pt);
            if (e.to == QPT_NONE) {
                ck_assert_int_eq(rc, QPT_EUNSUPP);
                continue;
            }
            ck_assert_int_eq(rc, 0);
            int found = 0;
            for (size_t j = 0; j < n && !found; j++)
                found = memcmp(&pt, &all[j], sizeof(pt)) == 0;
            ck_assert_msg(found, "%s: edge %u: its point is not among qpt_points'",
                          qpt_proc_name(s, proc), e.id);
            seen++;
        }
    }
    ck_assert_uint_eq(seen, n);
}

/* Reachability, dominators and loops against the oracles. */
static void
check_graph(qpt_space_t *s, uint32_t proc, const qpt_cfg_t *c)
{
    const char *name = qpt_proc_name(s, proc);
    uint32_t n = c->nblocks;
    graph_t g;
    graph_load(s, proc, n, &g);
    uint8_t in[MAXB], is_header[MAXB] = { 0 };
    uint32_t nheaders = 0;
    for (uint32_t b = 0; b < n; b++) {
        qpt_block_t bl;
        ck_assert_int_eq(qpt_block(s, proc, b, &bl), 0);
        ck_assert_msg((!(bl.flags & QPT_UNREACHABLE)) == g.reach[b], "%s: block %u: reachable?",
                      name, b);
        ck_assert_msg(bl.idom == idom_of(&g, b), "%s: block %u: idom %u, expected %u", name, b,
                      bl.idom, idom_of(&g, b));
        for (uint32_t a = 0; a < n; a++)
            ck_assert_msg(qpt_dominates(s, proc, a, b) == dominates(&g, a, b),
                          "%s: does %u dominate %u?", name, a, b);
        /* Headers: targets of back edges; the edge flags agree. */
        for (uint32_t i = 0; i < bl.nsucc; i++) {
            qpt_edge_t e;
            ck_assert_int_eq(qpt_block_succ(s, proc, b, i, &e), 0);
            int back = e.to != QPT_NONE && g.reach[b] && dominates(&g, e.to, b);
            ck_assert_int_eq(!!(e.flags & QPT_BACK_EDGE), back);
            if (back && !is_header[e.to]) {
                is_header[e.to] = 1;
                nheaders++;
            }
        }
    }
    ck_assert_msg(c->nloops == nheaders, "%s: %u loops, expected %u", name, c->nloops, nheaders);
    /* Each loop: its members, nesting and back edges. */
    uint32_t loop_of_header[MAXB];
    for (uint32_t l = 0; l < c->nloops; l++) {
        qpt_loop_t lp;
        ck_assert_int_eq(qpt_loop(s, proc, l, &lp), 0);
        ck_assert(lp.header < n && is_header[lp.header]);
        loop_of_header[lp.header] = l;
        natural_loop(&g, lp.header, in);
        uint32_t members = 0, list[MAXB];
        size_t nl;
        ck_assert_int_eq(qpt_loop_blocks(s, proc, l, list, MAXB, &nl), 0);
        for (uint32_t b = 0; b < n; b++) {
            members += in[b];
            ck_assert_msg(qpt_loop_contains(s, proc, l, b) == in[b], "%s: loop %u (header %u) "
                          "and block %u", name, l, lp.header, b);
        }
        ck_assert_uint_eq(lp.nblocks, members);
        ck_assert_uint_eq(nl, members);
        for (size_t k = 0; k < nl; k++)
            ck_assert(in[list[k]] && (k == 0 || list[k] > list[k - 1]));
        /* The parent: the smallest other loop holding the header. */
        uint32_t parent = QPT_NONE, psize = UINT32_MAX, depth = 1;
        for (uint32_t o = 0; o < c->nloops; o++) {
            qpt_loop_t ol;
            ck_assert_int_eq(qpt_loop(s, proc, o, &ol), 0);
            if (o == l || ol.header == lp.header || !qpt_loop_contains(s, proc, o, lp.header))
                continue;
            depth++;
            if (ol.nblocks < psize) {
                psize = ol.nblocks;
                parent = o;
            }
        }
        ck_assert_msg(lp.parent == parent && lp.depth == depth, "%s: loop %u: parent %u depth "
                      "%u, expected %u %u", name, l, lp.parent, lp.depth, parent, depth);
        ck_assert(parent == QPT_NONE || parent < l);
        uint32_t nback = 0;
        for (uint32_t b = 0; b < n; b++)
            for (uint32_t k = 0; k < g.nsucc[b]; k++)
                nback += g.succ[(size_t)b * 4 * n + k] == lp.header && g.reach[b]
                         && dominates(&g, lp.header, b);
        ck_assert_uint_eq(lp.nback, nback);
        for (uint32_t i = 0; i < lp.nback; i++) {
            qpt_edge_t e;
            ck_assert_int_eq(qpt_loop_back_edge(s, proc, l, i, &e), 0);
            ck_assert(e.to == lp.header && (e.flags & QPT_BACK_EDGE) && in[e.from]);
        }
    }
    /* Each block: its innermost loop and depth. */
    for (uint32_t b = 0; b < n; b++) {
        qpt_block_t bl;
        ck_assert_int_eq(qpt_block(s, proc, b, &bl), 0);
        uint32_t depth = 0, inner = QPT_NONE, isize = UINT32_MAX;
        for (uint32_t l = 0; l < c->nloops; l++) {
            qpt_loop_t lp;
            ck_assert_int_eq(qpt_loop(s, proc, l, &lp), 0);
            if (qpt_loop_contains(s, proc, l, b) == 1) {
                depth++;
                if (lp.nblocks < isize) {
                    isize = lp.nblocks;
                    inner = l;
                }
            }
        }
        ck_assert_msg(bl.loop == inner && bl.depth == depth, "%s: block %u: loop %u depth %u, "
                      "expected %u %u", name, b, bl.loop, bl.depth, inner, depth);
        ck_assert_int_eq(!!(bl.flags & QPT_LOOP_HEADER), is_header[b]);
        if (is_header[b])
            ck_assert_uint_eq(bl.loop, loop_of_header[b]);
    }
    graph_free(&g);
}

/* Every procedure of S; the number checked. */
static uint32_t
check_all(qpt_space_t *s)
{
    uint32_t checked = 0;
    for (uint32_t p = 0; p < qpt_nprocs(s); p++) {
        qpt_cfg_t c;
        int rc = qpt_proc_cfg(s, p, &c);
        if (rc == QPT_EUNSUPP) { /* a cold fragment */
            ck_assert_ptr_nonnull(strstr(qpt_error(s), "cold fragment"));
            continue;
        }
        ck_assert_int_eq(rc, 0);
        if (c.nblocks == 0 || c.nblocks > MAXB)
            continue;
        check_blocks(s, p, &c);
        check_points(s, p, &c);
        check_graph(s, p, &c);
        checked++;
    }
    return checked;
}

/*****************************************************************************
 * The source's shape
 */

/* The line of cfg_prog.c holding MARK. */
static unsigned
mark_line(const char *mark)
{
    char path[4096], buf[512];
    const char *src = getenv("top_srcdir");
    snprintf(path, sizeof(path), "%s/tests/qpt/cfg_prog.c", src ? src : ".");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    unsigned line = 0, found = 0;
    while (!found && fgets(buf, sizeof(buf), f) != NULL) {
        line++;
        found = strstr(buf, mark) != NULL;
    }
    fclose(f);
    ck_assert_msg(found, "%s: no %s", path, mark);
    return line;
}

/* How many loops of PROC hold every instruction of the line of MARK (the same number
 * for all of them). */
static uint32_t
loops_at_line(qpt_space_t *s, uint32_t proc, const char *mark)
{
    qpt_point_t pt[32];
    size_t n;
    unsigned line = mark_line(mark);
    ck_assert_msg(qpt_line_points(s, "cfg_prog.c", line, pt, 32, &n) == 0, "%s",
                  qpt_error(s));
    uint32_t depth = UINT32_MAX;
    for (size_t k = 0; k < n && k < 32; k++) {
        uint32_t p, b;
        qpt_block_t bl;
        ck_assert_int_eq(qpt_block_at(s, pt[k].addr, &p, &b), 0);
        ck_assert_uint_eq(p, proc);
        ck_assert_int_eq(qpt_block(s, p, b, &bl), 0);
        ck_assert_msg(depth == UINT32_MAX || depth == bl.depth, "%s: line %u in blocks of "
                      "depths %u and %u", mark, line, depth, bl.depth);
        depth = bl.depth;
    }
    return depth;
}

/* Does block BLOCK of PROC hold an instruction of the line of MARK or of MARK2? */
static int
block_has_line(qpt_space_t *s, uint32_t proc, uint32_t block, const char *mark,
               const char *mark2)
{
    qpt_block_t bl;
    qpt_point_t pt[32];
    size_t n;
    ck_assert_int_eq(qpt_block(s, proc, block, &bl), 0);
    for (int k = 0; k < 2; k++) {
        unsigned line = mark_line(k == 0 ? mark : mark2);
        if (qpt_line_points(s, "cfg_prog.c", line, pt, 32, &n) < 0)
            continue;
        for (size_t i = 0; i < n && i < 32; i++)
            if (pt[i].addr >= bl.start && pt[i].addr < bl.end)
                return 1;
    }
    return 0;
}

static void
check_shape(qpt_space_t *s)
{
    uint32_t nested, classify, rec;
    qpt_cfg_t c;
    ck_assert_int_eq(qpt_proc_find(s, "nested", &nested), 0);
    ck_assert_int_eq(qpt_proc_find(s, "classify", &classify), 0);
    ck_assert_int_eq(qpt_proc_find(s, "rec", &rec), 0);

    /* nested: two loops, the inner in the outer; the if's branch in both. */
    ck_assert_int_eq(qpt_proc_cfg(s, nested, &c), 0);
    ck_assert_uint_eq(c.nloops, 2);
    ck_assert_uint_eq(c.flags, 0);
    qpt_loop_t outer, inner;
    ck_assert_int_eq(qpt_loop(s, nested, 0, &outer), 0);
    ck_assert_int_eq(qpt_loop(s, nested, 1, &inner), 0);
    ck_assert(outer.parent == QPT_NONE && outer.depth == 1);
    ck_assert(inner.parent == 0 && inner.depth == 2);
    ck_assert_int_eq(qpt_loop_contains(s, nested, 0, inner.header), 1);
    ck_assert_int_eq(qpt_loop_contains(s, nested, 1, outer.header), 0);
    ck_assert_uint_gt(outer.nblocks, inner.nblocks);
    ck_assert_uint_eq(loops_at_line(s, nested, "MARK:inner"), 2);
    ck_assert_uint_eq(loops_at_line(s, nested, "MARK:outer"), 1);
    ck_assert_uint_eq(loops_at_line(s, nested, "MARK:after"), 0);
    /* Each header is its loop's test (top-tested, -O0) or its body's start (rotated). */
    ck_assert(block_has_line(s, nested, outer.header, "MARK:ofor", "MARK:outer"));
    ck_assert(block_has_line(s, nested, inner.header, "MARK:ifor", "MARK:inner"));
    /* The header dominates its loop and each back edge comes from a member. */
    for (uint32_t l = 0; l < 2; l++) {
        qpt_loop_t lp = l ? inner : outer;
        uint32_t list[MAXB];
        size_t n;
        ck_assert_int_eq(qpt_loop_blocks(s, nested, l, list, MAXB, &n), 0);
        for (size_t k = 0; k < n; k++)
            ck_assert_int_eq(qpt_dominates(s, nested, lp.header, list[k]), 1);
        ck_assert_uint_ge(lp.nback, 1);
    }

    /* classify: a jump table of the 8 cases (and the default: the guard's), no loop. */
    ck_assert_int_eq(qpt_proc_cfg(s, classify, &c), 0);
    ck_assert_uint_eq(c.nloops, 0);
    uint64_t targets[64];
    uint32_t ntargets = 0;
    for (uint32_t b = 0; b < c.nblocks; b++) {
        qpt_block_t bl;
        ck_assert_int_eq(qpt_block(s, classify, b, &bl), 0);
        for (uint32_t i = 0; i < bl.nsucc; i++) {
            qpt_edge_t e;
            ck_assert_int_eq(qpt_block_succ(s, classify, b, i, &e), 0);
            if (e.kind != QPT_EDGE_TABLE)
                continue;
            ck_assert_uint_ne(e.to, QPT_NONE);
            int dup = 0;
            for (uint32_t k = 0; k < ntargets; k++)
                dup |= targets[k] == e.target;
            if (!dup && ntargets < 64)
                targets[ntargets++] = e.target;
        }
    }
    ck_assert_msg(ntargets >= 8, "classify: %u table targets", ntargets);

    /* rec: no loop (a recursion is none); it calls itself and the call returns. */
    ck_assert_int_eq(qpt_proc_cfg(s, rec, &c), 0);
    ck_assert_uint_eq(c.nloops, 0);
    qpt_point_t calls[8];
    size_t n;
    ck_assert_int_eq(qpt_points(s, rec, QPT_CALL, calls, 8, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(qpt_point_callee(s, &calls[0]), qpt_proc_entry(s, rec));
    uint32_t p, b;
    qpt_block_t bl;
    ck_assert_int_eq(qpt_block_at(s, calls[0].addr, &p, &b), 0);
    ck_assert_int_eq(qpt_block(s, rec, b, &bl), 0);
    qpt_edge_t e;
    int callfall = 0;
    for (uint32_t i = 0; i < bl.nsucc; i++) {
        ck_assert_int_eq(qpt_block_succ(s, rec, b, i, &e), 0);
        callfall |= e.kind == QPT_EDGE_CALL_FALL && e.to != QPT_NONE;
    }
    ck_assert(callfall);
}

/*****************************************************************************
 * Tests
 */

static void
file_case(const char *path)
{
    qpt_space_t *s = open_prog(path);
    ck_assert_uint_gt(check_all(s), 10);
    check_shape(s);
    qpt_close(s);
}

START_TEST(test_qptcfg_file_O0)
{
    file_case(PROG_O0);
}
END_TEST

START_TEST(test_qptcfg_file_O2)
{
    file_case(PROG_O2);
}
END_TEST

/* Errors: a bad procedure, block, loop, edge; a CFG that is read-only is still walked. */
START_TEST(test_qptcfg_errors)
{
    qpt_space_t *s = open_prog(PROG_O2);
    qpt_cfg_t c;
    qpt_block_t bl;
    qpt_loop_t lp;
    qpt_edge_t e;
    qpt_point_t pt;
    uint32_t nested;
    ck_assert_int_eq(qpt_proc_cfg(s, qpt_nprocs(s), &c), QPT_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(qpt_error(s), "no such procedure"));
    ck_assert_int_eq(qpt_proc_cfg(s, 0, NULL), QPT_EINVAL);
    ck_assert_int_eq(qpt_proc_cfg(NULL, 0, &c), QPT_EINVAL);
    ck_assert_int_eq(qpt_proc_find(s, "nested", &nested), 0);
    ck_assert_int_eq(qpt_proc_cfg(s, nested, &c), 0);
    ck_assert_int_eq(qpt_block(s, nested, c.nblocks, &bl), QPT_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(qpt_error(s), "no such block"));
    ck_assert_int_eq(qpt_loop(s, nested, c.nloops, &lp), QPT_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(qpt_error(s), "no such loop"));
    ck_assert_int_eq(qpt_loop_contains(s, nested, 0, c.nblocks), QPT_ENOTFOUND);
    ck_assert_int_eq(qpt_dominates(s, nested, 0, c.nblocks), QPT_ENOTFOUND);
    ck_assert_int_eq(qpt_block_at(s, 1, NULL, NULL), QPT_ENOTFOUND);
    /* An edge that leaves: no edge point. */
    int left = 0;
    for (uint32_t b = 0; b < c.nblocks && !left; b++) {
        ck_assert_int_eq(qpt_block(s, nested, b, &bl), 0);
        for (uint32_t i = 0; i < bl.nsucc && !left; i++) {
            ck_assert_int_eq(qpt_block_succ(s, nested, b, i, &e), 0);
            if (e.to == QPT_NONE) {
                left = 1;
                ck_assert_int_eq(e.kind, QPT_EDGE_RETURN);
                ck_assert_int_eq(qpt_edge_point(s, nested, &e, &pt), QPT_EUNSUPP);
                ck_assert_ptr_nonnull(strstr(qpt_error(s), "leaves the procedure"));
            }
        }
    }
    ck_assert(left);
    /* An edge record of another block is refused. */
    ck_assert_int_eq(qpt_block_succ(s, nested, 0, 0, &e), 0);
    e.from = c.nblocks - 1;
    ck_assert_int_eq(qpt_edge_point(s, nested, &e, &pt), QPT_ENOTFOUND);
    qpt_close(s);
}
END_TEST

/* Programs named by $QPTCFG_PROGRAMS (space-separated; none by default, for make check
 * stays small): every procedure of each against the same oracles. */
START_TEST(test_qptcfg_programs)
{
    const char *list = getenv("QPTCFG_PROGRAMS");
    char buf[4096], *save = NULL;
    if (list == NULL)
        return;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *path = strtok_r(buf, " ", &save); path != NULL; path = strtok_r(NULL, " ", &save)) {
        qpt_space_t *s = open_prog(path);
        uint32_t n = check_all(s);
        fprintf(stderr, "%s: %u of %u procedures checked\n", path, n, qpt_nprocs(s));
        qpt_close(s);
    }
}
END_TEST

#ifdef ENABLE_DYNAMIC_TESTS
/* The live process gives the CFG of the file, at its own addresses. */
START_TEST(test_qptcfg_live_same)
{
    char why[512] = "";
    char *argv[] = { PROG_O2, "10", NULL };
    qpt_space_t *live = NULL;
    int rc = qpt_spawn(argv, &live, why, sizeof(why));
    if (rc == QPT_EIO && strstr(why, "ermission") != NULL)
        return; /* ptrace is not allowed here */
    ck_assert_msg(rc == 0, "%s", why);
    qpt_space_t *file = open_prog(PROG_O2);
    ck_assert_uint_eq(qpt_nprocs(live), qpt_nprocs(file));
    uint32_t compared = 0;
    for (uint32_t p = 0; p < qpt_nprocs(file); p++) {
        qpt_cfg_t fc, lc;
        ck_assert_str_eq(qpt_proc_name(live, p), qpt_proc_name(file, p));
        int frc = qpt_proc_cfg(file, p, &fc);
        ck_assert_int_eq(qpt_proc_cfg(live, p, &lc), frc);
        if (frc < 0)
            continue;
        ck_assert(memcmp(&fc, &lc, sizeof(fc)) == 0);
        uint64_t fe = qpt_proc_entry(file, p), le = qpt_proc_entry(live, p);
        for (uint32_t b = 0; b < fc.nblocks; b++) {
            qpt_block_t fb, lb;
            ck_assert_int_eq(qpt_block(file, p, b, &fb), 0);
            ck_assert_int_eq(qpt_block(live, p, b, &lb), 0);
            ck_assert(fb.start - fe == lb.start - le && fb.end - fe == lb.end - le);
            fb.start = lb.start = fb.end = lb.end = 0;
            ck_assert_msg(memcmp(&fb, &lb, sizeof(fb)) == 0, "%s: block %u differs live",
                          qpt_proc_name(file, p), b);
            for (uint32_t i = 0; i < fb.nsucc; i++) {
                qpt_edge_t ff, lf;
                ck_assert_int_eq(qpt_block_succ(file, p, b, i, &ff), 0);
                ck_assert_int_eq(qpt_block_succ(live, p, b, i, &lf), 0);
                ck_assert(ff.kind == lf.kind && ff.from == lf.from && ff.to == lf.to
                          && ff.id == lf.id && ff.flags == lf.flags);
                if (ff.to != QPT_NONE)
                    ck_assert(ff.target - fe == lf.target - le);
            }
        }
        for (uint32_t l = 0; l < fc.nloops; l++) {
            qpt_loop_t fl, ll;
            ck_assert_int_eq(qpt_loop(file, p, l, &fl), 0);
            ck_assert_int_eq(qpt_loop(live, p, l, &ll), 0);
            ck_assert(memcmp(&fl, &ll, sizeof(fl)) == 0);
        }
        compared++;
    }
    ck_assert_uint_gt(compared, 10);
    /* The live walk passes the same oracles, and its points are the live ones. */
    check_all(live);
    check_shape(live);
    /* A shared library's space (qpt_library) is walked the same way, at its addresses. */
    qpt_space_t *libc = NULL;
    ck_assert_msg(qpt_library(live, "libc.so.6", &libc, why, sizeof(why)) == 0, "%s", why);
    uint32_t walked = 0;
    for (uint32_t p = 0; p < qpt_nprocs(libc); p++) {
        qpt_cfg_t c;
        if (qpt_proc_cfg(libc, p, &c) == 0 && c.nblocks > 0 && c.nblocks <= MAXB) {
            check_blocks(libc, p, &c);
            walked++;
        }
    }
    ck_assert_uint_gt(walked, 1000);
    qpt_close(file);
    qpt_kill(live);
}
END_TEST
#endif

static Suite *
qptcfg_suite(void)
{
    Suite *s = suite_create("qptcfg");
    TCase *tc = tcase_create("cfg walk");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_qptcfg_file_O0);
    tcase_add_test(tc, test_qptcfg_file_O2);
    tcase_add_test(tc, test_qptcfg_errors);
    tcase_add_test(tc, test_qptcfg_programs);
#ifdef ENABLE_DYNAMIC_TESTS
    tcase_add_test(tc, test_qptcfg_live_same);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(qptcfg_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
