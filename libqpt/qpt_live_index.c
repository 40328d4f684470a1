/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A live space's insertions found by procedure and by the pages their patched bytes
 * touch, so that checking a new insertion against the others (qpt_live_point_ok, done
 * while the process is stopped) looks at the few that can matter instead of all of them:
 * --all on python3.11 inserts about 10,000 points, and two linear scans per insertion
 * made the stop quadratic. The index holds handles only and is brought up to date
 * lazily (handles [0, nins) never change their procedure; a patch range that changes,
 * when a procedure lends a slot and goes into a copy, is added by qpt_live_index_moved);
 * whether an insertion is removed or relocated, and its range, are read from S->ins
 * when it is looked at.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libqpt/qpt_priv.h"

/* A patch range spanning more pages than this goes into one list seen by every query
 * (a procedure's copy covers it whole: a few, each big). */
#define WIDE_PAGES 16
#define PAGE_SHIFT 12
/* The keys of the one hash table: a procedure, a page, the wide list. */
#define KEY_PROC(p) (((uint64_t)(p) << 1) | 1)
#define KEY_PAGE(a) ((((uint64_t)(a) >> PAGE_SHIFT) + 1) << 1)
#define KEY_WIDE    UINT64_MAX
#define KEY_EMPTY   0

typedef struct list {
    size_t *v;               /* handles, ascending */
    size_t n, cap;
} list_t;

struct qpt_live_index {
    uint64_t *keys;          /* open addressing, KEY_EMPTY free */
    uint32_t *at;            /* per slot: its list in LISTS */
    size_t nslots;           /* a power of 2, at least twice NLISTS */
    list_t *lists;
    size_t nlists, caplists;
    size_t done;             /* handles [0, done) are in */
};

static size_t
slot_of(const qpt_live_index_t *ix, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    size_t m = ix->nslots - 1, i = (size_t)(h >> 17) & m;
    while (ix->keys[i] != KEY_EMPTY && ix->keys[i] != key)
        i = (i + 1) & m;
    return i;
}

static int
grow_slots(qpt_live_index_t *ix)
{
    size_t n = ix->nslots ? 2 * ix->nslots : 1024;
    qpt_live_index_t t = *ix;
    t.nslots = n;
    t.keys = calloc(n, sizeof(uint64_t));
    t.at = malloc(n * sizeof(uint32_t));
    if (t.keys == NULL || t.at == NULL) {
        free(t.keys);
        free(t.at);
        return QP_ENOMEM;
    }
    for (size_t i = 0; i < ix->nslots; i++)
        if (ix->keys[i] != KEY_EMPTY) {
            size_t j = slot_of(&t, ix->keys[i]);
            t.keys[j] = ix->keys[i];
            t.at[j] = ix->at[i];
        }
    free(ix->keys);
    free(ix->at);
    ix->keys = t.keys;
    ix->at = t.at;
    ix->nslots = n;
    return 0;
}

/* Append handle H to the list of KEY (made when new). */
static int
add(qpt_live_index_t *ix, uint64_t key, size_t h)
{
    if (2 * (ix->nlists + 1) > ix->nslots)
        QP_CHECK(grow_slots(ix));
    size_t i = slot_of(ix, key);
    if (ix->keys[i] == KEY_EMPTY) {
        if (ix->nlists == ix->caplists) {
            size_t cap = ix->caplists ? 2 * ix->caplists : 256;
            list_t *l = realloc(ix->lists, cap * sizeof(list_t));
            if (l == NULL)
                return QP_ENOMEM;
            ix->lists = l;
            ix->caplists = cap;
        }
        ix->lists[ix->nlists] = (list_t) { NULL, 0, 0 };
        ix->keys[i] = key;
        ix->at[i] = (uint32_t)ix->nlists++;
    }
    list_t *l = &ix->lists[ix->at[i]];
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4;
        size_t *v = realloc(l->v, cap * sizeof(size_t));
        if (v == NULL)
            return QP_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = h;
    return 0;
}

/* Handle H into the list of KEY in its place (ascending), unless it is there. */
static int
add_sorted(qpt_live_index_t *ix, uint64_t key, size_t h)
{
    QP_CHECK(add(ix, key, h)); /* appended: moved to its place */
    list_t *l = &ix->lists[ix->at[slot_of(ix, key)]];
    size_t lo = 0, hi = l->n - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (l->v[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < l->n - 1 && l->v[lo] == h) {
        l->n--; /* there already */
        return 0;
    }
    memmove(l->v + lo + 1, l->v + lo, (l->n - 1 - lo) * sizeof(size_t));
    l->v[lo] = h;
    return 0;
}

static const size_t *
get(const qpt_live_index_t *ix, uint64_t key, size_t *n)
{
    *n = 0;
    if (ix == NULL || ix->nslots == 0)
        return NULL;
    size_t i = slot_of(ix, key);
    if (ix->keys[i] == KEY_EMPTY)
        return NULL;
    *n = ix->lists[ix->at[i]].n;
    return ix->lists[ix->at[i]].v;
}

/* The last page a range [LO, HI) touches, an empty one taken as [LO, LO + 1) (the
 * overlap test of point_ok counts an empty range strictly inside another). */
static uint64_t
last_byte(uint64_t lo, uint64_t hi)
{
    return hi > lo ? hi - 1 : lo;
}

int
qpt_live_index_sync(qpt_space_t *s)
{
    qpt_live_index_t *ix = s->index;
    if (ix == NULL) {
        if ((ix = calloc(1, sizeof(*ix))) == NULL)
            return QP_ENOMEM;
        s->index = ix;
    }
    for (; ix->done < s->nins; ix->done++) {
        const qpt_ins_t *in = &s->ins[ix->done];
        QP_CHECK(add(ix, KEY_PROC(in->pt.proc), ix->done));
        uint64_t lo = in->patch_lo >> PAGE_SHIFT;
        uint64_t hi = last_byte(in->patch_lo, in->patch_hi) >> PAGE_SHIFT;
        if (hi - lo >= WIDE_PAGES)
            QP_CHECK(add(ix, KEY_WIDE, ix->done));
        else
            for (uint64_t p = lo; p <= hi; p++)
                QP_CHECK(add(ix, KEY_PAGE(p << PAGE_SHIFT), ix->done));
    }
    return 0;
}

int
qpt_live_index_moved(qpt_space_t *s, size_t h)
{
    qpt_live_index_t *ix = s->index;
    if (ix == NULL || h >= ix->done)
        return 0; /* indexed with its range of then by the next sync */
    /* Its old pages keep it too: the overlap test reads its range of now. */
    const qpt_ins_t *in = &s->ins[h];
    uint64_t lo = in->patch_lo >> PAGE_SHIFT;
    uint64_t hi = last_byte(in->patch_lo, in->patch_hi) >> PAGE_SHIFT;
    if (hi - lo >= WIDE_PAGES)
        return add_sorted(ix, KEY_WIDE, h);
    for (uint64_t p = lo; p <= hi; p++)
        QP_CHECK(add_sorted(ix, KEY_PAGE(p << PAGE_SHIFT), h));
    return 0;
}

void
qpt_live_index_free(qpt_space_t *s)
{
    qpt_live_index_t *ix = s->index;
    if (ix == NULL)
        return;
    for (size_t i = 0; i < ix->nlists; i++)
        free(ix->lists[i].v);
    free(ix->lists);
    free(ix->keys);
    free(ix->at);
    free(ix);
    s->index = NULL;
}

const size_t *
qpt_live_index_proc(const qpt_space_t *s, uint32_t proc, size_t *n)
{
    return get(s->index, KEY_PROC(proc), n);
}

size_t
qpt_live_index_overlap(const qpt_space_t *s, uint64_t lo, uint64_t hi,
                       int (*fn)(const qpt_space_t *s, size_t h, void *arg), void *arg)
{
    size_t best = SIZE_MAX, n;
    const size_t *v = get(s->index, KEY_WIDE, &n);
    for (size_t k = 0; k < n && v[k] < best; k++)
        if (fn(s, v[k], arg))
            best = v[k];
    for (uint64_t p = lo >> PAGE_SHIFT; p <= last_byte(lo, hi) >> PAGE_SHIFT; p++) {
        v = get(s->index, KEY_PAGE(p << PAGE_SHIFT), &n);
        for (size_t k = 0; k < n && v[k] < best; k++) /* (ascending: the first is enough) */
            if (fn(s, v[k], arg))
                best = v[k];
    }
    return best;
}
