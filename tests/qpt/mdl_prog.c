/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For tests/mdl.sh (the metric language's MDL side): truth it computes itself, printed on
 * stderr as "truth NAME VALUE", for the metrics to be compared with. Four threads run at
 * once (a barrier, no lock around the calls) and each calls put(buf, len) with lengths of
 * its own, so that sums, maxima and minima meet across threads; put_rec(r) reads a
 * record's fields (r->len at offset 8, r->tag[1] at 24) for memory reads in expressions
 * and returns r->len (-1 for NULL);
 * lock_a and lock_b are the members of a list, lock_c is not. stdout: a checksum only
 * (the same in the rewritten program).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct rec {
    long id;      /* 0 */
    long len;     /* 8 */
    long tag[2];  /* 16, 24 */
};

static _Thread_local volatile long sink; /* each thread's: no race */
void put(const char *buf, long len);
long put_rec(const struct rec *r);
void lock_a(long k);
void lock_b(long k);
void lock_c(long k);

__attribute__((noinline)) void
put(const char *buf, long len)
{
    sink += buf[0] + len;
}

__attribute__((noinline)) long
put_rec(const struct rec *r)
{
    sink += r ? r->len : 0;
    return r ? r->len : -1; /* its return value, for sum(retval) */
}

__attribute__((noinline)) void lock_a(long k) { sink += k; }
__attribute__((noinline)) void lock_b(long k) { sink -= k; }
__attribute__((noinline)) void lock_c(long k) { sink ^= k; }

#define NT 4
#define CALLS 20000
static pthread_barrier_t start;
static long t_calls[NT], t_sum[NT], t_max[NT], t_min[NT], t_big[NT];
static const char text[] = "the quick brown fox";

/* The length of call I of thread T: -7 .. 9000 + T, different in each thread. */
static long
len_of(long t, long i)
{
    return (i * 7919 + t * 104729) % (9008 + t) - 7;
}

static void *
worker(void *arg)
{
    long t = (long)arg;
    pthread_barrier_wait(&start);
    t_max[t] = -1000000;
    t_min[t] = 1000000;
    for (long i = 0; i < CALLS; i++) {
        long len = len_of(t, i);
        put(text, len);
        t_calls[t]++;
        t_sum[t] += len;
        t_max[t] = len > t_max[t] ? len : t_max[t];
        t_min[t] = len < t_min[t] ? len : t_min[t];
        t_big[t] += len > 4096;
        if (i % 100 == 0) {
            lock_a(t);
            lock_b(t);
            lock_c(t);
        }
    }
    return NULL;
}

int
main(void)
{
    pthread_t th[NT];
    pthread_barrier_init(&start, NULL, NT);
    for (long t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, worker, (void *)t);
    for (long t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    /* records: lengths 10, 20, ... 100; tags 1 .. 10; and a NULL record (read as 0) */
    long rec_sum = 0, tag_max = 0;
    for (long i = 1; i <= 10; i++) {
        struct rec r = { i, 10 * i, { 0, i } };
        put_rec(&r);
        rec_sum += r.len;
        tag_max = r.tag[1] > tag_max ? r.tag[1] : tag_max;
    }
    rec_sum += put_rec(NULL); /* -1 for retval, 0 for the NULL record's fields */
    long calls = 0, sum = 0, max = -1000000, min = 1000000, big = 0;
    for (long t = 0; t < NT; t++) {
        calls += t_calls[t];
        sum += t_sum[t];
        max = t_max[t] > max ? t_max[t] : max;
        min = t_min[t] < min ? t_min[t] : min;
        big += t_big[t];
        fprintf(stderr, "truth thread%ld_sum %ld\n", t, t_sum[t]);
    }
    fprintf(stderr, "truth calls %ld\ntruth sum %ld\ntruth max %ld\ntruth min %ld\n", calls,
            sum, max, min);
    fprintf(stderr, "truth avg %ld\ntruth big %ld\n", sum / calls, big);
    fprintf(stderr, "truth rec_sum %ld\ntruth ret_sum %ld\ntruth tag_max %ld\ntruth locks %d\n",
            rec_sum + 1, rec_sum, tag_max,
            NT * 2 * (CALLS / 100));
    printf("%ld %ld\n", calls, (long)strlen(text) + sink);
    return 0;
}
