/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Two threads in libbfd at once (issue 31). usage: bfd_threads FILE ROUNDS
 * One thread opens an image of FILE, looks a line up in it (BFD reads its DWARF), lets
 * go of its file (cfg_image_release_file: bfd_close, as qpt_wait does for a library the
 * process unloaded) and destroys it, ROUNDS times; the other meanwhile looks up the
 * lines of ROUNDS addresses and functions of another image of FILE. BFD's state is
 * global (its list of open files and cache of their descriptors, its error): cfg_bfd.c
 * makes every call into it under one lock. tests/bfd-threads.sh runs this natively and
 * under helgrind, which names any access to that state from both threads unlocked.
 * Exit status: 0, or 1 with what failed on stderr.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cfg/cfg.h"

typedef struct job {
    const char *path;
    unsigned rounds;
    cfg_image_t *img;   /* the looker's image */
    unsigned found;     /* lines found by the looker */
    int rc;             /* the first failure, or 0 */
} job_t;

/* The first line of IMG's .text at or after its byte OFF (modulo its size): 0 or
 * QP_ENOTFOUND, else the error. */
static int
text_line(const cfg_image_t *img, uint64_t off, unsigned *found)
{
    const cfg_section_t *t = cfg_image_section_named(img, ".text");
    if (t == NULL || t->size == 0)
        return QP_EFORMAT;
    const char *file;
    unsigned line;
    int rc = cfg_image_line(img, t->vma + off % t->size, &file, &line);
    *found += rc == 0;
    return rc == QP_ENOTFOUND ? 0 : rc;
}

static void *
open_and_close(void *arg)
{
    job_t *j = arg;
    unsigned found = 0;
    for (unsigned i = 0; i < j->rounds && j->rc == 0; i++) {
        cfg_image_t *img = NULL;
        int rc = cfg_image_open_bfd(j->path, &img);
        if (rc == 0)
            rc = text_line(img, 16 * i, &found);
        if (rc == 0)
            rc = cfg_image_release_file(img);
        cfg_image_destroy(img);
        if (rc < 0) {
            fprintf(stderr, "round %u: open, line, release: %s\n", i, qp_strerror(rc));
            j->rc = rc;
        }
    }
    return NULL;
}

static void *
look_up(void *arg)
{
    job_t *j = arg;
    for (unsigned i = 0; i < j->rounds && j->rc == 0; i++) {
        /* Addresses 4099 bytes apart: each a miss of the cache in front of BFD. */
        int rc = text_line(j->img, 4099ull * i, &j->found);
        const char *file;
        unsigned line;
        if (rc == 0 && cfg_image_func_line(j->img, "main", j->img->entry, &file, &line) == QP_ENOMEM)
            rc = QP_ENOMEM;
        if (rc < 0) {
            fprintf(stderr, "round %u: line lookup: %s\n", i, qp_strerror(rc));
            j->rc = rc;
        }
    }
    return NULL;
}

int
main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bfd_threads FILE ROUNDS\n");
        return 2;
    }
    job_t closer = { argv[1], (unsigned)strtoul(argv[2], NULL, 10), NULL, 0, 0 };
    job_t looker = closer;
    int rc = cfg_image_open_bfd(argv[1], &looker.img);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", argv[1], qp_strerror(rc));
        return 1;
    }
    pthread_t t[2];
    if (pthread_create(&t[0], NULL, open_and_close, &closer) != 0
        || pthread_create(&t[1], NULL, look_up, &looker) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    cfg_image_destroy(looker.img);
    if (closer.rc == 0 && looker.rc == 0 && looker.found == 0)
        fprintf(stderr, "%s: no line found: no line information?\n", argv[1]);
    return closer.rc == 0 && looker.rc == 0 && looker.found > 0 ? 0 : 1;
}
