/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A procedure relocated whole, the way Dyninst instruments a live procedure whose
 * points do not fit in place: the copy holds every instruction relocated, the snippets
 * at its entry, before its rets and before the jumps that leave it; the original stays
 * as it is but for the jump at its entry (and, written by the caller, a jump at each
 * return site of a call). Pure: from (what, where) to bytes, as pt_tramp.c.
 *
 *   copy:  ENTER snippet; [jmp E']            E' = the entry's copy, if not next
 *          every run, relocated, in address order:
 *            branch inside the runs     -> the same branch to the target's copy
 *            ret                        -> RET snippet; ret
 *            jmp out of the runs        -> LEAVE snippet; jmp (or jmp *) as it was
 *            jmp * of a jump table      -> as it was (to the original targets, whose
 *                                          jumps the caller writes into the copy)
 *            jcc out of the runs        -> jcc to a stub after the body
 *            call                       -> made with the original return address
 *                                          (its site's snippet first, if it has one)
 *            call that never returns    -> LEAVE snippet; the call as above
 *            falls out of a run         -> jmp to the next instruction's copy (or, out
 *                                          of the procedure, LEAVE snippet; jmp)
 *            jmp * of unknown targets   -> translated (arch_emit_jmp_xlate): to XS
 *   XS:    (when P has unknown jumps) two translation stubs, each followed by where
 *          its misses go: LEAVE snippet; ret $128 (to T), and ret $128 alone (a jump
 *          whose exit the caller did not choose)
 *   stubs: LEAVE snippet; jmp TARGET    (one per jcc leaving the runs)
 *   TABLE: (8-aligned) every instruction of P -> its copy (arch.h's hash table)
 *
 * Built in two passes: the first places every instruction (branches to far targets, so
 * every one gets its longest form); the second writes them there, a shorter form padded
 * with nops. Each snippet is given the room of its first compile everywhere.
 */
#include <string.h>

#include "patch/patch.h"

#define JMP_LEN 5

typedef struct gen {
    const pt_proc_t *p;
    uint64_t at;       /* the copy's address */
    uint8_t *out;      /* its bytes (pass 1 writes scratch there too) */
    size_t cap;
    size_t k;          /* the body's cursor */
    size_t stub;       /* the stubs' cursor (pass 2) */
    size_t nstubs;     /* stubs so far */
    size_t body;       /* pass 2: the body's length (pass 1's) */
    pt_map_t *map;     /* every instruction, by original address */
    size_t nmap, mapcap;
    int pass;          /* 1: place, 2: write */
    int senter, sret, sleave; /* each snippet's room (its first compile) */
    size_t xarea;      /* bytes of the translation stubs (XS) after the body */
    uint64_t xs_leave, xs_plain; /* pass 2: the stubs whose misses run the leave snippet
                                  * and not */
    size_t nsites;     /* sites whose snippet this pass emitted */
} gen_t;

/* SN's room: its length compiled at AT (0 for none). */
static int
snip_room(const pt_snip_t *sn, uint64_t at)
{
    return sn->nodes == NULL ? 0 : pt_snip_size(sn, at);
}

/* N bytes of nops at *K. */
static int
pad(gen_t *g, size_t *k, size_t n)
{
    if (n == 0)
        return 0;
    if (g->cap - *k < n)
        return QP_ERANGE;
    QP_CHECK(arch_emit_nops(n, g->out + *k, g->cap - *k));
    *k += n;
    return 0;
}

/* Snippet SN in ROOM bytes at *K (nops after it). */
static int
snip(gen_t *g, const pt_snip_t *sn, int room, size_t *k)
{
    size_t k0 = *k;
    if (sn->nodes != NULL) {
        int n = arch_snip_emit(sn->nodes, sn->n, sn->root, &sn->ctx, g->at + *k, g->out + *k,
            g->cap - *k);
        QP_CHECK(n);
        if (n > room)
            return QP_ERANGE; /* it grew where it runs: no room kept for that */
        *k += (size_t)n;
    }
    return pad(g, k, (size_t)room - (*k - k0));
}

/* Is ADDR inside a run (so a branch there must go to an instruction's copy)? */
static int
in_runs(const pt_proc_t *p, uint64_t addr)
{
    size_t lo = 0, hi = p->nruns;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->runs[mid].addr + p->runs[mid].len <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->nruns && p->runs[lo].addr <= addr;
}

uint64_t
pt_proc_at(const pt_map_t *map, size_t n, uint64_t orig)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (map[mid].orig < orig)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && map[lo].orig == orig ? map[lo].copy : 0;
}

/*
 * Where a branch to TARGET goes in the copy: pass 1, far away (the longest form); pass
 * 2, the target's copy. 0 with *OUT set, QP_EUNSUPP for a target inside an instruction.
 */
static int
inside_target(const gen_t *g, uint64_t target, uint64_t *out)
{
    if (g->pass == 1) {
        *out = g->at + (1u << 30);
        return 0;
    }
    *out = pt_proc_at(g->map, g->nmap, target);
    return *out != 0 ? 0 : QP_EUNSUPP;
}

/* Is ADDR one of the N sorted words of V? */
static int
listed(const uint64_t *v, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo] == addr;
}

/* Does the exit at ADDR (a ret, a jump out; 0: falling out) get its snippet? */
static int
chosen(const pt_proc_t *p, uint64_t addr)
{
    if (p->exits == NULL)
        return 1;
    return addr != 0 && listed(p->exits, p->nexits, addr);
}

/*
 * Does a miss of the translated jump at ADDR (it leaves) run the leave snippet? When it
 * is chosen, and also whenever some exit is: a caller that lists the exits it knows
 * (rets, tail calls) cannot name a jump of unknown targets as one, yet leaving through
 * it ends the call as they do (a timer must stop there).
 */
static int
xlate_leaves(const pt_proc_t *p, uint64_t addr)
{
    return p->leave.nodes != NULL && (chosen(p, addr) || p->nexits > 0);
}

/* A jump out of the runs to TARGET at *K (from the exit at FROM): the leave snippet
 * (if chosen), then jmp. */
static int
leave_jmp(gen_t *g, uint64_t from, uint64_t target, size_t *k)
{
    int n;
    if (chosen(g->p, from))
        QP_CHECK(snip(g, &g->p->leave, g->sleave, k));
    QP_CHECK(n = arch_emit_jmp(g->at + *k, target, g->out + *k, g->cap - *k));
    *k += (size_t)n;
    return 0;
}

/*
 * A direct call to TARGET returning to RET, at *K: `call T; int3; T: the return address
 * := RET; jmp TARGET` (a real call keeps the return stack buffer balanced; the int3 is
 * never run). In the copy the callee then returns to the original code.
 */
static int
call_orig(gen_t *g, uint64_t target, uint64_t ret, size_t *k)
{
    int n;
    if (g->cap - *k < JMP_LEN + 1)
        return QP_ERANGE;
    QP_CHECK(n = arch_emit_call(g->at + *k, g->at + *k + JMP_LEN + 1, g->out + *k,
                 g->cap - *k));
    *k += (size_t)n;
    g->out[(*k)++] = 0xcc;
    QP_CHECK(n = arch_emit_store_ret64(ret, g->out + *k, g->cap - *k));
    *k += (size_t)n;
    QP_CHECK(n = arch_emit_jmp(g->at + *k, target, g->out + *k, g->cap - *k));
    *k += (size_t)n;
    return 0;
}

/*
 * Before call IN: a call that never returns (listed in noret, or its return address is
 * outside the runs: abort, exit, a longjmp, an error raised) ends the procedure there,
 * so the leave snippet runs first (if chosen). Should the callee return after all, it
 * returns to the original code, as it would uninstrumented.
 */
static int
noret_leave(gen_t *g, const arch_insn_t *in, size_t *k)
{
    const pt_proc_t *p = g->p;
    if ((in_runs(p, in->addr + in->len) && !listed(p->noret, p->nnoret, in->addr))
        || !chosen(p, in->addr))
        return 0;
    return snip(g, &g->p->leave, g->sleave, k);
}

/* The site of the call at ADDR in P, or NULL. */
static const pt_site_t *
site_at(const pt_proc_t *p, uint64_t addr)
{
    size_t lo = 0, hi = p->nsites;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->sites[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->nsites && p->sites[lo].addr == addr ? &p->sites[lo] : NULL;
}

/* Before call IN: its site's snippet, if it has one (in the room of its compile at the
 * copy's start, the same in both passes). */
static int
site_snip(gen_t *g, const arch_insn_t *in, size_t *k)
{
    const pt_site_t *st = site_at(g->p, in->addr);
    if (st == NULL)
        return 0;
    int room = snip_room(&st->snip, g->at);
    QP_CHECK(room);
    g->nsites++;
    return snip(g, &st->snip, room, k);
}

/* The instruction IN (bytes B) of the procedure, relocated at g->k. */
static int
one(gen_t *g, const uint8_t *b, const arch_insn_t *in)
{
    const pt_proc_t *p = g->p;
    size_t *k = &g->k;
    uint64_t t;
    int n;

    if (in->flags & ARCH_F_PRIV)
        return QP_EUNSUPP;
    switch (in->kind) {
    case ARCH_KIND_JMP:
        if (!in_runs(p, in->target))
            return leave_jmp(g, in->addr, in->target, k);
        QP_CHECK(inside_target(g, in->target, &t));
        break;
    case ARCH_KIND_JCC:
        if (!in_runs(p, in->target)) {
            /* To its stub: the leave snippet, a jmp to the target. */
            size_t s = g->pass == 1 ? 0 : g->stub;
            t = g->pass == 1 ? g->at + (1u << 30) : g->at + s;
            if (g->pass == 2) {
                QP_CHECK(leave_jmp(g, in->addr, in->target, &g->stub));
            }
            g->nstubs++;
        } else
            QP_CHECK(inside_target(g, in->target, &t));
        break;
    case ARCH_KIND_CALL:
        /* A call to the next instruction reads its own return address; one into the
         * procedure's middle would run its rets (and the ret snippet) in the copy. */
        if (in->target == in->addr + in->len
            || (in_runs(p, in->target) && in->target != p->entry))
            return QP_EUNSUPP;
        QP_CHECK(site_snip(g, in, k));
        QP_CHECK(noret_leave(g, in, k));
        return call_orig(g, in->target, in->addr + in->len, k);
    case ARCH_KIND_CALL_IND:
        QP_CHECK(site_snip(g, in, k));
        QP_CHECK(noret_leave(g, in, k));
        QP_CHECK(n = arch_emit_call_ret(b, in, g->at + *k, in->addr + in->len, g->out + *k,
                     g->cap - *k));
        *k += (size_t)n;
        return 0;
    case ARCH_KIND_RET:
        if (chosen(p, in->addr))
            QP_CHECK(snip(g, &p->ret, g->sret, k));
        t = in->target;
        break;
    case ARCH_KIND_JMP_IND:
        if (listed(p->unknown, p->nunknown, in->addr)) {
            /* Translated: to its target's copy, or out (the leave snippet first). */
            uint64_t stub = g->pass == 1 ? g->at + (1u << 30)
                : xlate_leaves(p, in->addr) ? g->xs_leave
                                            : g->xs_plain;
            QP_CHECK(n = arch_emit_jmp_xlate(b, in, g->at + *k, stub, 0, g->out + *k,
                         g->cap - *k));
            *k += (size_t)n;
            return 0;
        }
        /* A jump table's (inner): its targets in the original jump into the copy. Else
         * the caller proved it leaves the procedure. */
        if (!listed(p->inner, p->ninner, in->addr) && chosen(p, in->addr))
            QP_CHECK(snip(g, &p->leave, g->sleave, k));
        t = in->target;
        break;
    default: t = in->target; break;
    }
    QP_CHECK(n = arch_reloc_insn(b, in, g->at + *k, t, 0, g->out + *k, g->cap - *k));
    *k += (size_t)n;
    return 0;
}

/* Does an instruction of KIND go on to the next one? */
static int
falls(int kind)
{
    return kind != ARCH_KIND_JMP && kind != ARCH_KIND_JMP_IND && kind != ARCH_KIND_RET
        && kind != ARCH_KIND_HALT && kind != ARCH_KIND_CALL && kind != ARCH_KIND_CALL_IND;
}

/* One pass over the procedure. */
static int
pass(gen_t *g)
{
    const pt_proc_t *p = g->p;
    size_t m = 0;
    int n;

    g->k = 0;
    g->nstubs = 0;
    g->nsites = 0;
    g->stub = g->body + g->xarea;
    QP_CHECK(snip(g, &p->enter, g->senter, &g->k));
    if (p->runs[0].addr != p->entry) {
        uint64_t t;
        QP_CHECK(inside_target(g, p->entry, &t));
        QP_CHECK(n = arch_emit_jmp(g->at + g->k, t, g->out + g->k, g->cap - g->k));
        g->k += (size_t)n;
    }
    for (size_t r = 0; r < p->nruns; r++) {
        const pt_run_t *run = &p->runs[r];
        int last = ARCH_KIND_JMP;
        for (uint32_t off = 0; off < run->len;) {
            arch_insn_t in;
            QP_CHECK(pt_decode(p->decoded, run->bytes + off, run->len - off, run->addr + off,
                               &in));
            if (g->pass == 1) {
                if (m == g->mapcap)
                    return QP_ERANGE;
                g->map[m] = (pt_map_t) { run->addr + off, g->at + g->k };
            } else {
                /* Where pass 1 put it: a shorter form before is padded. */
                uint64_t want = g->map[m].copy - g->at;
                if (want < g->k)
                    return QP_ERANGE;
                QP_CHECK(pad(g, &g->k, want - g->k));
            }
            m++;
            QP_CHECK(one(g, run->bytes + off, &in));
            off += in.len;
            last = in.kind;
        }
        /* Falling out of the run: to the next instruction, in the copy or not. */
        uint64_t end = run->addr + run->len;
        if (falls(last) && !(r + 1 < p->nruns && p->runs[r + 1].addr == end)) {
            if (in_runs(p, end)) {
                uint64_t t;
                QP_CHECK(inside_target(g, end, &t));
                QP_CHECK(n = arch_emit_jmp(g->at + g->k, t, g->out + g->k, g->cap - g->k));
                g->k += (size_t)n;
            } else
                QP_CHECK(leave_jmp(g, 0, end, &g->k));
        }
    }
    g->nmap = m;
    /* Every site a call of the runs: none left without its snippet. */
    return g->nsites == p->nsites ? 0 : QP_EINVAL;
}

/*****************************************************************************
 * Jumps of unknown targets translated at run time
 */

/* Slots of the table for N instructions: a power of two, a third more at least (a
 * lookup probes about two slots and always ends at an empty one). */
static uint64_t
xlate_slots(size_t n)
{
    uint64_t slots = 16;
    while (3 * slots < 4 * (uint64_t)n)
        slots *= 2;
    return slots;
}

/* Bytes of XS (the stubs and where their misses go) with the leave snippet in SLEAVE. */
static size_t
xlate_area(const pt_proc_t *p, int sleave)
{
    size_t plain = ARCH_XLATE_STUB_OUT_LEN + ARCH_XLATE_GO_LEN;
    return p->nunknown == 0 ? 0
        : p->leave.nodes != NULL ? 2 * plain + (size_t)sleave
                                 : plain;
}

/* A stub at *K whose misses go to the leave snippet (LEAVE) or not, then the go. */
static int
xlate_stub(gen_t *g, uint64_t table, int leave, size_t *k)
{
    int n;
    size_t miss = *k + ARCH_XLATE_STUB_OUT_LEN;
    QP_CHECK(n = arch_emit_xlate_stub_out(g->at + *k, table, g->at + miss, g->out + *k,
                 g->cap - *k));
    *k += (size_t)n;
    if (leave)
        QP_CHECK(snip(g, &g->p->leave, g->sleave, k));
    if (g->cap - *k < ARCH_XLATE_GO_LEN)
        return QP_ERANGE;
    QP_CHECK(n = arch_emit_xlate_go(g->out + *k, g->cap - *k));
    *k += (size_t)n;
    return 0;
}

/*
 * XS and the table after the stubs (which end at END): every instruction's copy, keyed
 * by its offset from the first run (arch.h). The copy's length, or QP_E*.
 */
static int
xlate_emit(gen_t *g, size_t end)
{
    const pt_proc_t *p = g->p;
    uint64_t lo = p->runs[0].addr, hi = p->runs[p->nruns - 1].addr + p->runs[p->nruns - 1].len;
    uint64_t slots = xlate_slots(g->nmap), shift = 32;
    size_t t = (end + 7) & ~(size_t)7, k = g->body;

    if (hi - lo >= UINT32_MAX - 1)
        return QP_ERANGE;
    if (t > g->cap || g->cap - t < ARCH_XLATE_HDR + 8 * slots)
        return QP_ERANGE;
    if (p->leave.nodes != NULL)
        QP_CHECK(xlate_stub(g, g->at + t, 1, &k));
    QP_CHECK(xlate_stub(g, g->at + t, 0, &k));
    memset(g->out + end, 0xcc, t - end);
    for (uint64_t x = slots; x > 1; x /= 2)
        shift--;
    uint8_t *slot = g->out + t + ARCH_XLATE_HDR;
    memset(slot, 0, 8 * slots);
    for (size_t i = 0; i < g->nmap; i++) {
        uint32_t key = (uint32_t)(g->map[i].orig - lo), key1 = key + 1, cur;
        int64_t d = (int64_t)(g->map[i].copy - lo);
        if (d < INT32_MIN || d > INT32_MAX)
            return QP_ERANGE;
        int32_t d32 = (int32_t)d;
        uint64_t h = ((uint32_t)(key * 0x9e3779b1u) >> shift) & (slots - 1);
        for (;; h = (h + 1) & (slots - 1)) {
            memcpy(&cur, slot + 8 * h, 4);
            if (cur == 0 || cur == key1)
                break;
        }
        memcpy(slot + 8 * h, &key1, 4);
        memcpy(slot + 8 * h + 4, &d32, 4);
    }
    /* (Runtime addresses throughout: the table's own address is its "link" one, so the
     * stub's load bias is 0.) */
    uint64_t hdr[6] = { g->at + t, slots - 1, lo, hi - lo, 0, shift };
    memcpy(g->out + t, hdr, sizeof(hdr));
    return (int)(t + ARCH_XLATE_HDR + 8 * slots);
}

size_t
pt_proc_mapcap(const pt_proc_t *p)
{
    size_t n = 0;
    for (size_t r = 0; p != NULL && r < p->nruns; r++)
        n += p->runs[r].len;
    return n;
}

size_t
pt_proc_size(const pt_proc_t *p, size_t snip_max)
{
    /* The entry's snippet and jump; per run, a jump (and a snippet) where it falls out;
     * per instruction its longest form: its own bytes (a rip-relative operand keeps its
     * length), a branch rel32 (loop: 9 bytes; a jcc leaving: its stub, a snippet and a
     * jmp), a snippet
     * before a ret or a jump that leaves, a call made with its original return address
     * (30 bytes direct, 19 and a jmp indirect; the leave snippet before one that never
     * returns, its site's snippet before a call that has one). Undecodable bytes: as much each. */
    size_t n = snip_max + JMP_LEN, s5 = snip_max + JMP_LEN, ninsns = 0;
    for (size_t r = 0; p != NULL && r < p->nruns; r++) {
        const pt_run_t *run = &p->runs[r];
        n += s5;
        for (uint32_t off = 0; off < run->len;) {
            arch_insn_t in;
            if (pt_decode(p->decoded, run->bytes + off, run->len - off, run->addr + off, &in)
                < 0) {
                n += (size_t)(run->len - off) * ARCH_MAX_RELOC;
                ninsns += run->len - off;
                break;
            }
            ninsns++;
            switch (in.kind) {
            case ARCH_KIND_JMP: n += in_runs(p, in.target) ? JMP_LEN : s5; break;
            case ARCH_KIND_JCC: n += 9u + (in_runs(p, in.target) ? 0 : s5); break;
            case ARCH_KIND_CALL:
            case ARCH_KIND_CALL_IND:
                n += in.kind == ARCH_KIND_CALL ? 32 : 19 + ARCH_MAX_RELOC;
                if (!in_runs(p, in.addr + in.len) || listed(p->noret, p->nnoret, in.addr))
                    n += snip_max; /* a call that never returns: the leave snippet */
                if (site_at(p, in.addr) != NULL)
                    n += snip_max; /* its site's snippet */
                break;
            case ARCH_KIND_RET:
            case ARCH_KIND_JMP_IND: n += snip_max + ARCH_MAX_RELOC; break;
            default: n += in.len + 8u; break;
            }
            off += in.len;
        }
    }
    if (p != NULL && p->nunknown > 0)
        n += xlate_area(p, (int)snip_max) + 8 + ARCH_XLATE_HDR + 8 * xlate_slots(ninsns);
    return n;
}

int
pt_proc_emit(const pt_proc_t *p, uint64_t at, uint8_t *out, size_t cap, pt_map_t *map,
    size_t mapcap, size_t *nmap)
{
    if (p == NULL || p->runs == NULL || p->nruns == 0 || out == NULL || map == NULL
        || !in_runs(p, p->entry))
        return QP_EINVAL;
    for (size_t r = 0; r + 1 < p->nruns; r++)
        if (p->runs[r].addr + p->runs[r].len > p->runs[r + 1].addr)
            return QP_EINVAL;
    if (p->nsites > 0 && p->sites == NULL)
        return QP_EINVAL;
    for (size_t i = 0; i + 1 < p->nsites; i++)
        if (p->sites[i].addr >= p->sites[i + 1].addr)
            return QP_EINVAL;
    gen_t g = { .p = p, .at = at, .out = out, .cap = cap, .map = map, .mapcap = mapcap };
    QP_CHECK(g.senter = snip_room(&p->enter, at));
    QP_CHECK(g.sret = snip_room(&p->ret, at));
    QP_CHECK(g.sleave = snip_room(&p->leave, at));
    g.pass = 1;
    QP_CHECK(pass(&g));
    g.body = g.k;
    g.pass = 2;
    g.xarea = xlate_area(p, g.sleave);
    g.xs_leave = at + g.body;
    g.xs_plain = at + g.body
        + (p->leave.nodes != NULL ? ARCH_XLATE_STUB_OUT_LEN + ARCH_XLATE_GO_LEN + (size_t)g.sleave : 0);
    if (g.body + g.xarea > cap)
        return QP_ERANGE;
    QP_CHECK(pass(&g));
    if (g.k > g.body)
        return QP_ERANGE;
    QP_CHECK(pad(&g, &g.k, g.body - g.k));
    if (nmap != NULL)
        *nmap = g.nmap;
    if (p->nunknown > 0)
        return xlate_emit(&g, g.stub);
    return (int)g.stub;
}
