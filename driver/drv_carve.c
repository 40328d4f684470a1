/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Several zeroed arrays in one allocation (drv_carve, driver.h): the per-procedure
 * arrays of the graphs and of the estimate, made and freed millions of times.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"

void *
drv_carve(void **const *parts, const size_t *sizes, size_t n)
{
    size_t total = 0;
    for (size_t k = 0; k < n; k++)
        total += (sizes[k] + 7) & ~(size_t)7;
    uint8_t *all = calloc(1, total ? total : 1);
    for (size_t k = 0, off = 0; k < n; k++) {
        /* Copied as bytes: *PARTS[k] is a uint64_t *, a double *, ..., not a void * (a
         * store through void ** would break the aliasing rule, C11 6.5p7). */
        uint8_t *at = all != NULL ? all + off : NULL;
        memcpy(parts[k], &at, sizeof(at));
        off += (sizes[k] + 7) & ~(size_t)7;
    }
    return all;
}
