/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Procedures by entry for the driver's serial steps: the procedure cfg_proc_entered_at
 * gives for an address, from a hash table instead of the search of the blocks (cc1's
 * qp rewrite looks up about 2.5 million call targets on the main thread: 0.1 s).
 */
#include "config.h"

#include <stdlib.h>

#include "driver/driver.h"

/* ADDR's first slot in M. */
static uint32_t
slot_of(const drv_entries_t *m, uint64_t addr)
{
    return (uint32_t)((addr * 0x9e3779b97f4a7c15ull) >> 32) & m->mask;
}

int
drv_entries_build(const cfg_prog_t *prog, drv_entries_t *m)
{
    uint32_t slots = 16;
    while (slots < 2 * (uint64_t)prog->nprocs + 1)
        slots *= 2;
    m->mask = slots - 1;
    m->addr = calloc(slots, sizeof(uint64_t)); /* 0: no entry (none is at 0) */
    m->proc = malloc(slots * sizeof(uint32_t));
    if (m->addr == NULL || m->proc == NULL) {
        drv_entries_free(m);
        return QP_ENOMEM;
    }
    /* The procedures that cfg_proc_entered_at finds at their own entries: for any
     * address, it gives one of them or none. */
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        uint64_t a = prog->procs[i].entry;
        if (cfg_proc_entered_at(prog, a) != &prog->procs[i])
            continue;
        uint32_t k = slot_of(m, a);
        while (m->addr[k] != 0)
            k = (k + 1) & m->mask;
        m->addr[k] = a;
        m->proc[k] = i;
    }
    return 0;
}

uint32_t
drv_entered(const drv_entries_t *m, uint64_t addr)
{
    if (addr == 0)
        return CFG_NONE;
    for (uint32_t k = slot_of(m, addr);; k = (k + 1) & m->mask) {
        if (m->addr[k] == addr)
            return m->proc[k];
        if (m->addr[k] == 0)
            return CFG_NONE;
    }
}

void
drv_entries_free(drv_entries_t *m)
{
    free(m->addr);
    free(m->proc);
    m->addr = NULL;
    m->proc = NULL;
    m->mask = 0;
}
