/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The editor's address-space interface (qp_space_ops_t) over a live process: reads and
 * writes through dyn_proc_*, new memory from an mmap run on the process's behalf, placed
 * in a free gap of /proc/PID/maps within rel32 reach of the code that jumps to it.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "dynamic/dyn.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define PAGE 4096ull
/* Keep a margin inside the +-2 GiB of a rel32 so every byte of a region is in reach. */
#define REACH ((1ull << 31) - (1ull << 20))
/* Never place memory this close above the heap's break: brk() must stay free to grow. */
#define HEAP_ROOM (256ull << 20)

typedef struct range {
    uint64_t lo, hi; /* [lo, hi) */
    int heap;        /* the [heap] mapping */
} range_t;

typedef struct cand {
    uint64_t addr; /* where to try */
    uint64_t dist; /* distance from the code */
} cand_t;

static int
read_maps(int pid, range_t **out, size_t *n)
{
    char path[64], line[512];
    range_t *v = NULL;
    size_t k = 0, cap = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/maps", pid);
    f = fopen(path, "r");
    if (f == NULL)
        return QP_EIO;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long lo, hi;
        if (sscanf(line, "%llx-%llx", &lo, &hi) != 2)
            continue;
        if (k == cap) {
            range_t *nv;
            cap = cap ? 2 * cap : 64;
            nv = realloc(v, cap * sizeof(*v));
            if (nv == NULL) {
                free(v);
                fclose(f);
                return QP_ENOMEM;
            }
            v = nv;
        }
        v[k].lo = lo;
        v[k].hi = hi;
        v[k].heap = strstr(line, "[heap]") != NULL;
        k++;
    }
    fclose(f);
    *out = v;
    *n = k;
    return 0;
}

static int
range_cmp(const void *a, const void *b)
{
    const range_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The NAVOID ranges AVOID (pairs address, length) added to the N mappings *M as taken,
 * the list kept sorted and without overlaps. */
static int
add_avoided(range_t **m, size_t *n, const uint64_t *avoid, size_t navoid)
{
    range_t *v;
    size_t k = 0;

    if (navoid == 0)
        return 0;
    if ((v = realloc(*m, (*n + navoid) * sizeof(*v))) == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < navoid; i++)
        v[*n + i] = (range_t){ avoid[2 * i], avoid[2 * i] + avoid[2 * i + 1], 0 };
    qsort(v, *n + navoid, sizeof(*v), range_cmp);
    for (size_t i = 0; i < *n + navoid; i++) {
        if (k > 0 && v[i].lo <= v[k - 1].hi) {
            v[k - 1].hi = v[i].hi > v[k - 1].hi ? v[i].hi : v[k - 1].hi;
            v[k - 1].heap |= v[i].heap;
        } else
            v[k++] = v[i];
    }
    *m = v;
    *n = k;
    return 0;
}

static int
cand_cmp(const void *a, const void *b)
{
    const cand_t *x = a, *y = b;
    return x->dist < y->dist ? -1 : x->dist > y->dist;
}

/* Candidate addresses for LEN bytes within reach of [LO, HI), nearest first. */
static int
candidates(const range_t *m, size_t n, uint64_t lo, uint64_t hi, uint64_t len,
    cand_t **out, size_t *nout)
{
    cand_t *c = calloc(n + 1, sizeof(*c));
    size_t k = 0;
    uint64_t min_ok = hi > REACH ? hi - REACH : 0, max_end = lo + REACH;

    if (c == NULL)
        return QP_ENOMEM;
    if (min_ok < 0x10000)
        min_ok = 0x10000; /* vm.mmap_min_addr */
    min_ok = (min_ok + PAGE - 1) & ~(PAGE - 1);
    for (size_t i = 0; i <= n; i++) {
        uint64_t g0 = i == 0 ? 0 : m[i - 1].hi, g1 = i == n ? (1ull << 47) : m[i].lo;
        uint64_t a0, a1, a;
        if (i > 0 && m[i - 1].heap)
            g0 += HEAP_ROOM;
        a0 = g0 > min_ok ? g0 : min_ok;
        a1 = g1 < max_end ? g1 : max_end;
        if (a1 < len || a1 - len < a0)
            continue;
        a1 = (a1 - len) & ~(PAGE - 1);
        a0 = (a0 + PAGE - 1) & ~(PAGE - 1);
        if (a1 < a0)
            continue;
        /* The end of the gap nearest to the code. */
        a = a1 + len <= lo ? a1 : a0;
        c[k].addr = a;
        c[k].dist = a + len <= lo ? lo - a : (a >= hi ? a + len - hi : 0);
        k++;
    }
    qsort(c, k, sizeof(*c), cand_cmp);
    *out = c;
    *nout = k;
    return 0;
}

static int
space_read(void *self, uint64_t addr, void *buf, size_t len)
{
    return dyn_proc_read(self, addr, buf, len);
}

static int
space_write(void *self, uint64_t addr, const void *buf, size_t len)
{
    return dyn_proc_write(self, addr, buf, len);
}

int
dyn_space_map_near(dyn_proc_t *p, uint64_t lo, uint64_t hi, size_t len, uint32_t prot,
    int fd, uint64_t *out /*OUT*/)
{
    return dyn_space_map_near_avoid(p, lo, hi, len, prot, fd, NULL, 0, out);
}

int
dyn_space_map_near_avoid(dyn_proc_t *p, uint64_t lo, uint64_t hi, size_t len,
    uint32_t prot, int fd, const uint64_t *avoid, size_t navoid, uint64_t *out /*OUT*/)
{
    range_t *m = NULL;
    cand_t *c = NULL;
    size_t n = 0, nc = 0;
    uint64_t size = (len + PAGE - 1) & ~(PAGE - 1);
    int rc, mprot = 0;

    if (p == NULL || out == NULL || len == 0 || hi < lo || hi - lo > REACH)
        return QP_EINVAL;
    mprot |= (prot & ED_PROT_R) ? PROT_READ : 0;
    mprot |= (prot & ED_PROT_W) ? PROT_WRITE : 0;
    mprot |= (prot & ED_PROT_X) ? PROT_EXEC : 0;
    QP_CHECK(read_maps(dyn_proc_pid(p), &m, &n));
    rc = add_avoided(&m, &n, avoid, navoid);
    if (rc == 0)
        rc = candidates(m, n, lo, hi, size, &c, &nc);
    free(m);
    QP_CHECK(rc);
    rc = QP_ERANGE;
    for (size_t i = 0; i < nc && i < 64; i++) {
        uint64_t a[6] = { c[i].addr, size, (uint64_t)mprot,
            (fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED) | MAP_FIXED_NOREPLACE,
            (uint64_t)(int64_t)fd, 0 };
        int64_t r;
        rc = dyn_proc_syscall(p, SYS_mmap, a, &r);
        if (rc < 0)
            break;
        if (r < 0 && r > -4096) {
            rc = QP_ERANGE;
            continue; /* taken (EEXIST) or refused: the next gap */
        }
        if ((uint64_t)r == c[i].addr) {
            *out = (uint64_t)r;
            rc = 0;
            break;
        }
        /* A kernel without MAP_FIXED_NOREPLACE took it as a hint: undo. */
        dyn_space_free(p, (uint64_t)r, size);
        rc = QP_ERANGE;
    }
    free(c);
    return rc;
}

static int
space_alloc_near(void *self, uint64_t lo, uint64_t hi, size_t len, uint32_t prot,
    uint64_t *out /*OUT*/)
{
    return dyn_space_map_near(self, lo, hi, len, prot, -1, out);
}

const qp_space_ops_t dyn_space_ops = {
    .read = space_read,
    .write = space_write,
    .alloc_near = space_alloc_near,
};

int
dyn_space_free(dyn_proc_t *p, uint64_t addr, size_t len)
{
    uint64_t a[6] = { addr, (len + PAGE - 1) & ~(PAGE - 1), 0, 0, 0, 0 };
    int64_t r;

    QP_CHECK(dyn_proc_syscall(p, SYS_munmap, a, &r));
    if (r < 0) {
        errno = (int)-r;
        return QP_EIO;
    }
    return 0;
}
