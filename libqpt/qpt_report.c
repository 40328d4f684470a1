/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * include/qpt/qpt_report.h: report/'s checked files and the calls of an earlier run,
 * behind the public names.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "include/qpt/qpt.h"
#include "include/qpt/qpt_report.h"
#include "report/qp_report.h"

/*****************************************************************************
 * Files
 */

struct qpt_out {
    qp_out_t o; /* the temporary file, its descriptor and the final path */
};

int
qpt_file_open_read(const char *path, char *why, size_t whylen)
{
    if (path == NULL)
        return QPT_EINVAL;
    return qp_file_open_read(path, why, whylen);
}

int
qpt_out_open(qpt_out_t **out, const char *path, int *fd, char *why, size_t whylen)
{
    if (out == NULL || path == NULL || fd == NULL)
        return QPT_EINVAL;
    *out = NULL;
    qpt_out_t *o = malloc(sizeof(*o));
    if (o == NULL)
        return QPT_ENOMEM;
    int rc = qp_out_open(&o->o, path, why, whylen);
    if (rc < 0) {
        free(o);
        return rc;
    }
    *fd = o->o.fd;
    *out = o;
    return 0;
}

int
qpt_out_commit(qpt_out_t *o, int fd_closed, char *why, size_t whylen)
{
    if (o == NULL)
        return QPT_EINVAL;
    /* A caller that closed the descriptor (fclose of its stream) still gets the data on
     * disk before the rename: a descriptor of the temporary opened again syncs the same
     * file (a crash must never leave an empty or partial file at the path). */
    if (fd_closed)
        o->o.fd = o->o.tmp != NULL ? open(o->o.tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (fd_closed && o->o.fd < 0) {
        int saved = errno;
        qp_out_abort(&o->o);
        free(o);
        qp_why(why, whylen, "%s", strerror(saved));
        errno = saved;
        return QPT_EIO;
    }
    int rc = qp_out_commit(&o->o, why, whylen);
    free(o);
    return rc;
}

void
qpt_out_abort(qpt_out_t *o, int fd_closed)
{
    if (o == NULL)
        return;
    if (fd_closed)
        o->o.fd = -1;
    qp_out_abort(&o->o);
    free(o);
}

const char *
qpt_out_temp(const qpt_out_t *o)
{
    return o != NULL ? o->o.tmp : NULL;
}

/*****************************************************************************
 * The calls of an earlier run
 */

int
qpt_profile_entry_calls(const char *path, qpt_entry_calls_t **out, size_t *n, char *why,
                        size_t whylen)
{
    if (out == NULL || n == NULL)
        return QPT_EINVAL;
    *out = NULL;
    *n = 0;
    if (path == NULL)
        return QPT_EINVAL;
    qp_edge_count_t *v = NULL;
    size_t nv = 0;
    int rc = qp_edge_counts_read(path, &v, &nv, why, whylen);
    if (rc < 0)
        return rc;
    /* At most one entry edge per procedure: a result no longer than the counts. */
    qpt_entry_calls_t *c = malloc((nv ? nv : 1) * sizeof(*c));
    if (c == NULL) {
        free(v);
        return QPT_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < nv; i++)
        if (v[i].kind == QP_EDGE_ENTRY)
            c[k++] = (qpt_entry_calls_t) { v[i].to, v[i].count };
    free(v);
    *out = c;
    *n = k;
    return 0;
}
