/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Truth program for fields by DWARF type in the metric language (tests/mdl-fields.sh):
 * records passed by pointer to noipa procedures (so no store is dropped and no argument
 * is changed by the compiler), with nested structs, an anonymous union, a signed short,
 * a pointer chain, a bit-field, an array, and a double before a pointer. It prints its
 * own truth on stderr ("truth NAME VALUE").
 */
#include <stdio.h>
#include <stdlib.h>

struct hdr {
    int kind;
    short delta;
};

struct rec {
    struct hdr h;
    union {
        long wide;
        unsigned char narrow;
    };
    size_t len;
    struct rec *next;
    unsigned flag : 3;
    char name[8];
};
typedef const struct rec rec_t;

long take(int n, rec_t *r);
long scaled(double scale, rec_t *r);

__attribute__((noipa)) long
take(int n, rec_t *r)
{
    return (long)r->len + n + r->h.delta + r->h.kind + r->narrow + r->flag + r->name[0]
           + (r->next != NULL);
}

__attribute__((noipa)) long
scaled(double scale, rec_t *r)
{
    return (long)((double)r->len * scale);
}

int
main(void)
{
    struct rec tail = { { 1, -5 }, { 0 }, 1000, NULL, 1, "t" };
    long s = 0, len = 0, delta = 0, kind2 = 0, nextlen = 0, narrow = 0;
    for (int i = 0; i < 100; i++) {
        struct rec *r = calloc(1, sizeof(*r));
        if (r == NULL)
            return 1;
        r->h.kind = i % 3;
        r->h.delta = (short)(i % 2 ? -i : i);
        r->len = (size_t)i * 3;
        r->next = i % 10 ? &tail : NULL;
        r->narrow = (unsigned char)(i % 7);
        r->flag = (unsigned)i & 7;
        len += (long)r->len;
        delta += r->h.delta;
        kind2 += r->h.kind == 2;
        nextlen += r->next != NULL ? (long)r->next->len : 0;
        narrow = narrow > r->narrow ? narrow : r->narrow;
        s += take(1, r) + scaled(0.5, r);
        free(r);
    }
    printf("%ld\n", s);
    fprintf(stderr, "truth len %ld\ntruth delta %ld\ntruth kind2 %ld\ntruth nextlen %ld\n"
            "truth narrow %ld\n", len, delta, kind2, nextlen, narrow);
    return 0;
}
