/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The input files mapped now (cfg_bfd.c's readers), for a tool's SIGBUS handler: a file
 * truncated while it is read through its mapping makes the next read of a page past its
 * new end fault, and only the handler can tell that from a bug. A few slots, claimed and
 * published with atomics, read without a lock (async-signal-safe). Also the comparison
 * of a file's state that says whether it changed.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cfg/cfg_priv.h"

/* Files mapped at once: the input, its debug file, a process's libraries (qp report of a
 * whole process keeps every module's image mapped): enough for any process, and a file
 * past them is not known to the handler (a fault there stays a crash). */
enum { MAPPED_SLOTS = 1024 };

typedef struct mapped_slot {
    atomic_int used;      /* claimed by cfg_mapped_add */
    _Atomic uintptr_t lo; /* the mapping's start, 0 while the slot is not published */
    _Atomic size_t len;   /* its bytes */
    char *_Atomic path;   /* the file's path (malloc'ed) */
} mapped_slot_t;

static mapped_slot_t mapped[MAPPED_SLOTS];

void
cfg_mapped_add(const void *map, size_t len, const char *path)
{
    char *copy = strdup(path);
    if (copy == NULL)
        return; /* not known to the handler: a fault there stays a crash */
    for (size_t i = 0; i < MAPPED_SLOTS; i++) {
        int free_slot = 0;
        if (!atomic_compare_exchange_strong(&mapped[i].used, &free_slot, 1))
            continue;
        atomic_store(&mapped[i].path, copy);
        atomic_store(&mapped[i].len, len);
        atomic_store(&mapped[i].lo, (uintptr_t)map); /* published last */
        return;
    }
    free(copy);
}

const void *
cfg_mapped_add_file(const void *map, size_t len, const char *path)
{
    if (map == NULL || len == 0)
        return NULL;
    cfg_mapped_add(map, len, path);
    return cfg_mapped_at(map) != NULL ? map : NULL;
}

void
cfg_mapped_remove(const void *map)
{
    for (size_t i = 0; i < MAPPED_SLOTS; i++) {
        if (atomic_load(&mapped[i].lo) != (uintptr_t)map || map == NULL)
            continue;
        atomic_store(&mapped[i].lo, 0); /* unpublished first */
        free(atomic_exchange(&mapped[i].path, NULL));
        atomic_store(&mapped[i].used, 0);
        return;
    }
}

const char *
cfg_mapped_at(const void *addr)
{
    uintptr_t a = (uintptr_t)addr;
    for (size_t i = 0; i < MAPPED_SLOTS; i++) {
        uintptr_t lo = atomic_load(&mapped[i].lo);
        if (lo != 0 && a >= lo && a - lo < atomic_load(&mapped[i].len))
            return atomic_load(&mapped[i].path);
    }
    return NULL;
}

int
cfg_file_same(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size
        && a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec
        /* a write sets the change time too, and no one but root can set it back as
         * `touch -d` sets the modification time back */
        && a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}
