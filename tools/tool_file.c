/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * PURPOSE: the tools' files, through report/'s checked access (qp_file_open_read,
 * qp_out_t): inputs are regular files (a FIFO or device refused at once, never waited
 * on), outputs are written beside their path and renamed over it when complete.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tools/tool.h"

FILE *
tool_fopen_read(const char *path, char *why, size_t whylen)
{
    int fd = qpt_file_open_read(path, why, whylen);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "r");
    if (f == NULL) {
        snprintf(why, whylen, "%s", strerror(errno));
        close(fd);
    }
    return f;
}

int
tool_out_open(tool_out_t *t, const char *prog, const char *path)
{
    t->f = stdout;
    t->name = "standard output";
    t->o = NULL;
    if (path == NULL)
        return 0;
    t->name = path;
    char why[256] = "";
    int fd = -1;
    int rc = qpt_out_open(&t->o, path, &fd, why, sizeof(why));
    if (rc == 0 && (t->f = fdopen(fd, "w")) == NULL) {
        snprintf(why, sizeof(why), "%s", strerror(errno));
        qpt_out_abort(t->o, 0);
        t->o = NULL;
        rc = -1;
    }
    if (rc < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, why[0] ? why : qpt_strerror(rc));
        t->f = NULL;
        return -1;
    }
    tool_signal_temp(NULL, qpt_out_temp(t->o)); /* removed if a signal ends the tool */
    return 0;
}

int
tool_out_close(tool_out_t *t, const char *prog, int ok)
{
    if (t->f == NULL)
        return -1;
    int err = 0;
    if (fflush(t->f) != 0 || ferror(t->f))
        err = errno ? errno : EIO;
    if (t->f == stdout) {
        if (err != 0)
            fprintf(stderr, "%s: %s: %s\n", prog, t->name, strerror(err));
        return err != 0 || !ok ? -1 : 0;
    }
    if (fclose(t->f) != 0 && err == 0)
        err = errno ? errno : EIO;
    t->f = NULL;
    qpt_out_t *o = t->o; /* its descriptor closed with the stream */
    t->o = NULL;
    char why[256] = "";
    /* The temporary stays known to the signal handlers until it is renamed or removed:
     * a signal in between removes it (after the rename, the unlink finds nothing). */
    if (err == 0 && ok) {
        int rc = qpt_out_commit(o, 1, why, sizeof(why));
        tool_signal_temp(NULL, NULL);
        if (rc == 0)
            return 0;
        /* a failed commit removed the output: the path stays as it was */
    } else {
        qpt_out_abort(o, 1); /* the path stays as it was */
        tool_signal_temp(NULL, NULL);
    }
    if (err != 0 || why[0] != '\0')
        fprintf(stderr, "%s: %s: %s\n", prog, t->name, err != 0 ? strerror(err) : why);
    return -1;
}
