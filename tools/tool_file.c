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
    int fd = qp_file_open_read(path, why, whylen);
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
    t->o.fd = -1;
    t->o.tmp = NULL;
    if (path == NULL)
        return 0;
    t->name = path;
    char why[256] = "";
    int rc = qp_out_open(&t->o, path, why, sizeof(why));
    if (rc == 0 && (t->f = fdopen(t->o.fd, "w")) == NULL) {
        snprintf(why, sizeof(why), "%s", strerror(errno));
        qp_out_abort(&t->o);
        rc = -1;
    }
    if (rc < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, why[0] ? why : qp_strerror(rc));
        t->f = NULL;
        return -1;
    }
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
    t->o.fd = -1; /* closed with the stream */
    char why[256] = "";
    if (err == 0 && ok && qp_out_commit(&t->o, why, sizeof(why)) == 0)
        return 0;
    qp_out_abort(&t->o); /* the path stays as it was */
    if (err != 0 || why[0] != '\0')
        fprintf(stderr, "%s: %s: %s\n", prog, t->name, err != 0 ? strerror(err) : why);
    return -1;
}
