/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/* A two-level LRU data cache simulator (qp_cachesim.h). */
#include <stdlib.h>
#include <string.h>

#include "arch/qp_err.h"
#include "report/qp_cachesim.h"

static int
pow2(uint64_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

static int
parse_size(const char *s, char **end, uint64_t *v)
{
    *v = strtoull(s, end, 10);
    if (*end == s)
        return QP_EINVAL;
    if (**end == 'k' || **end == 'K') {
        *v <<= 10;
        (*end)++;
    } else if (**end == 'm' || **end == 'M') {
        *v <<= 20;
        (*end)++;
    }
    return 0;
}

int
qp_cache_parse(const char *spec, qp_cache_t *c)
{
    memset(c, 0, sizeof(*c));
    char *e;
    uint64_t size, ways, line;
    if (parse_size(spec, &e, &size) < 0 || *e != ':')
        return QP_EINVAL;
    if (parse_size(e + 1, &e, &ways) < 0 || *e != ':')
        return QP_EINVAL;
    if (parse_size(e + 1, &e, &line) < 0 || *e != '\0')
        return QP_EINVAL;
    if (!pow2(line) || ways == 0 || ways > 1024 || size % (ways * line) != 0)
        return QP_EINVAL;
    uint64_t sets = size / (ways * line);
    if (!pow2(sets) || sets > (1u << 24))
        return QP_EINVAL;
    c->size = size;
    c->ways = (uint32_t)ways;
    c->line = (uint32_t)line;
    c->sets = (uint32_t)sets;
    while ((1u << c->line_shift) < c->line)
        c->line_shift++;
    return 0;
}

int
qp_cache_init(qp_cache_t *c)
{
    c->tags = calloc((size_t)c->sets * c->ways, sizeof(uint64_t));
    return c->tags != NULL ? 0 : QP_ENOMEM;
}

void
qp_cache_free(qp_cache_t *c)
{
    free(c->tags);
    c->tags = NULL;
}

/* Reference line number B: 1 on a miss (the least recently used way is replaced). */
static int
ref_line(qp_cache_t *c, uint64_t b)
{
    uint64_t *set = c->tags + (size_t)(b & (c->sets - 1)) * c->ways, tag = b + 1;
    uint32_t w = 0;
    while (w < c->ways && set[w] != tag)
        w++;
    int miss = w == c->ways;
    if (miss)
        w = c->ways - 1;
    memmove(set + 1, set, w * sizeof(uint64_t));
    set[0] = tag;
    return miss;
}

/* Reference SIZE bytes at ADDR: 1 when a line they touch missed. */
static int
ref(qp_cache_t *c, uint64_t addr, uint32_t size)
{
    uint64_t b1 = addr >> c->line_shift, b2 = (addr + (size ? size - 1 : 0)) >> c->line_shift;
    c->refs++;
    int miss = ref_line(c, b1);
    for (uint64_t b = b1 + 1; b <= b2; b++)
        miss |= ref_line(c, b);
    c->misses += (uint64_t)miss;
    return miss;
}

void
qp_cachesim_access(qp_cachesim_t *s, uint64_t addr, uint32_t size, int write)
{
    if (write)
        s->writes++;
    else
        s->reads++;
    if (!ref(&s->l1, addr, size))
        return;
    if (write)
        s->l1_write_misses++;
    else
        s->l1_read_misses++;
    if (ref(&s->ll, addr, size)) {
        if (write)
            s->ll_write_misses++;
        else
            s->ll_read_misses++;
    }
}
