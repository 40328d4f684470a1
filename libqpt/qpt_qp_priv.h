/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QPT_QP_PRIV_H
#define QPT_QP_PRIV_H
/*
 * PURPOSE: the objects behind include/qpt/qpt_qp.h, shared by its two halves: reading
 * and loading modules (qpt_qp.c) and the views over a loaded module (qpt_qp_view.c:
 * counts, call graph, lines, code, several modules). Everything here is report/'s.
 */
#include <pthread.h>

#include "include/qpt/qpt.h"
#include "include/qpt/qpt_qp.h"
#include "report/qp_report.h"

struct qpt_qp {
    qpt_qp_set_t *set;       /* the set it belongs to (its original executable) */
    const char *exe;         /* the file: what its first profile names, or EXE */
    uint64_t id;             /* its first profile's description id */
    const char **files;      /* its profiles, in the order given */
    qp_profile_t **ps;       /* ... as read (the set's; counters freed once summed) */
    uint32_t nfiles;         /* how many */
    cfg_image_t *img;        /* the file's image */
    qp_desc_t desc;          /* its description */
    qp_profile_t prof;       /* the sum of its profiles */
    qp_unwinder_t *unw;      /* for the exit dumps, or NULL */
    qp_report_t rep;         /* its report */
    int loaded;              /* qpt_qp_load succeeded */
    char **names;            /* per procedure: the name printed, NULL: the stored one */
    char **plt_names;        /* per PLT stub, likewise, or NULL */
    char build_id[2 * 64 + 1]; /* the code file's build-id in hex */
};

struct qpt_qp_set {
    qpt_qp_t *mods;          /* the modules, in the order first named */
    uint32_t nmods;          /* how many */
    qp_profile_t *ps;        /* every profile read */
    int nfiles;              /* how many */
    const char *const *files; /* their paths (the caller's) */
    cfg_image_t *original;   /* qpt_qp_set_original, or NULL */
    /* QPT_QP_BACKGROUND: the profiles' counters read on another thread. */
    qp_profile_pending_t **pending; /* per profile: what is left to read, or NULL */
    pthread_t reader;        /* the thread reading them */
    int reading;             /* it runs (not joined yet) */
    int read_rc;             /* its result, once joined; WHY below */
    char read_why[1024];
};

/* The image whose code M's listings read: the original when given, else M's. */
const cfg_image_t *qpt_qp_code_image(const qpt_qp_t *m);

/* Row RES of M's report as the public row. */
void qpt_qp_fill_row(const qpt_qp_t *m, const qp_proc_result_t *res, qpt_qp_row_t *out);

#endif
