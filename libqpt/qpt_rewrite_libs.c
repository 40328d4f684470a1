/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qpt_rewrite_with_libs (--with-libs): a program and the libraries it loads at start,
 * rewritten into one folder, each output looking in its own folder first.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libqpt/qpt_rewrite_priv.h"

/* Is library D (of a program whose dynamic linker is INTERP, LOADER its real path) one
 * --with-libs writes as DIR/NAME? 0: the dynamic linker; -1: named by a path, or not found
 * (said in a line when SAY). */
static int
lib_written(const qpt_rewrite_t *r, const elfw_dep_t *d, const char *interp,
            const char *loader, int say)
{
    char *real = d->path != NULL ? realpath(d->path, NULL) : NULL;
    int is_loader = (loader != NULL && real != NULL && strcmp(loader, real) == 0)
        || (interp != NULL && strrchr(interp, '/') != NULL
            && strcmp(d->name, strrchr(interp, '/') + 1) == 0);
    free(real);
    if (is_loader)
        return 0; /* the dynamic linker: it runs before any runtime could */
    if (strchr(d->name, '/') != NULL || strcmp(d->name, "..") == 0
        || strcmp(d->name, ".") == 0 || d->name[0] == '\0') {
        /* Loaded by its path, not searched for: a copy in DIR would not be the one
         * loaded (and such a name must never choose where a file is written). */
        if (say)
            qpt_rw_say(r, "%s: named by a path: left as it is", d->name);
        return -1;
    }
    if (d->path == NULL) {
        if (say)
            qpt_rw_say(r, "%s: not found; the program will not find it either",
                d->name);
        return -1;
    }
    return 1;
}

/*
 * --with-libs: PROGRAM and every library it loads at start, rewritten into the folder
 * DIR (created if need be; one holding other files only with --force): DIR/PROGRAM and
 * DIR/NAME for each library, as DT_NEEDED names it. Each output looks in its own folder
 * first ($ORIGIN in DT_RPATH, or DT_RUNPATH when it had one), so DIR/PROGRAM runs with the
 * rewritten libraries. A library that cannot be rewritten is named and left out (the
 * program loads the original); the dynamic linker is never rewritten.
 */
int
qpt_rewrite_with_libs(qpt_rewrite_t *r, const char *input, const char *dir, int force)
{
    if (r == NULL || input == NULL || dir == NULL)
        return QPT_EINVAL;
    r->err[0] = '\0';
    memset(&r->sum, 0, sizeof(r->sum));
    elfw_dep_t *deps = NULL;
    size_t n = 0;
    char *interp = NULL, why[512];
    if (elfw_deps(input, r->sysroot, &deps, &n, &interp, why, sizeof(why)) < 0)
        return qpt_rw_fail(r, QPT_EFORMAT, "%s: %s", input, why);
    struct stat st;
    int made = 0; /* the folder is ours: removed again if the program cannot be written */
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            elfw_deps_free(deps, n);
            free(interp);
            return qpt_rw_fail(r, QPT_EINVAL, "%s: not a folder (--with-libs writes a folder)",
                               dir);
        }
        DIR *d = opendir(dir);
        struct dirent *e;
        int others = 0;
        while (d != NULL && (e = readdir(d)) != NULL)
            others |= strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
        if (d != NULL)
            closedir(d);
        if (others && !force) {
            elfw_deps_free(deps, n);
            free(interp);
            return qpt_rw_fail(r, QPT_EINVAL,
                               "%s: the folder holds other files (--force writes into it)", dir);
        }
    } else if (mkdir(dir, 0777) < 0) {
        qpt_rw_fail(r, QPT_EIO, "%s: cannot create the folder: %s", dir, strerror(errno));
        elfw_deps_free(deps, n);
        free(interp);
        return QPT_EIO;
    } else
        made = 1;
    const char *base = strrchr(input, '/') ? strrchr(input, '/') + 1 : input;
    char out[PATH_MAX];
    int status = qpt_rw_fail(r, QPT_ERANGE, "%s/%s: name too long", dir, base);
    int local_libs = r->local_libs;
    r->local_libs = 1; /* each output looks in its own folder first */
    char *loader = interp != NULL ? realpath(interp, NULL) : NULL;
    /* DIR/NAME is what the program loads (DIR comes first in its search path): a folder,
     * FIFO or device there would be loaded instead of any library, and fail. */
    for (size_t i = 0; i < n; i++) {
        struct stat ls;
        if (lib_written(r, &deps[i], interp, loader, 0) == 1
            && snprintf(out, sizeof(out), "%s/%s", dir, deps[i].name) < (int)sizeof(out)
            && stat(out, &ls) == 0 && !S_ISREG(ls.st_mode)) {
            qpt_rw_fail(r, QPT_EUNSUPP, "%s: exists and is not a regular file: the program "
                        "would load it instead of %s (remove it)", out, deps[i].name);
            free(loader);
            elfw_deps_free(deps, n);
            free(interp);
            return QPT_EUNSUPP;
        }
    }
    if (snprintf(out, sizeof(out), "%s/%s", dir, base) < (int)sizeof(out))
        status = qpt_rw_file(r, input, out);
    /* Only the folder's own checks are usage errors (the caller's exit status 2). */
    if (status == QPT_EINVAL)
        status = QPT_EUNSUPP;
    size_t done = 0, libs = 0;
    for (size_t i = 0; status == 0 && i < n; i++) {
        int w = lib_written(r, &deps[i], interp, loader, 1);
        libs += w != 0;
        if (w < 1)
            continue;
        int too_long = snprintf(out, sizeof(out), "%s/%s", dir, deps[i].name)
            >= (int)sizeof(out);
        if (too_long || qpt_rw_file(r, deps[i].path, out) != 0) {
            if (!too_long)
                qpt_rw_say(r, "%s", r->err); /* why, before what follows from it */
            /* An earlier run's DIR/NAME would be loaded instead of the original. */
            int stale = unlink(out) == 0;
            qpt_rw_say(r, "%s: left as it is%s: the program loads the original %s",
                deps[i].name, stale ? " (the earlier copy in the folder removed)" : "",
                deps[i].path);
        } else
            done++;
    }
    if (status != 0 && made)
        rmdir(dir); /* nothing written: leave nothing behind */
    if (status == 0)
        qpt_rw_say(r, "%s: %s and %zu of %zu libraries rewritten; run %s/%s%s%s",
            dir, base, done, libs, dir, base,
            interp ? " (the dynamic linker " : "", interp ? "is not rewritten)" : "");
    r->local_libs = local_libs;
    if (status == 0)
        r->err[0] = '\0'; /* a library's failure was said: the rewrite succeeded */
    free(loader);
    free(interp);
    elfw_deps_free(deps, n);
    return qpt_public_rc(status);
}

