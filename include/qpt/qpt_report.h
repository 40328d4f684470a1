/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QPT_QPT_REPORT_H
#define QPT_QPT_REPORT_H
/*
 * PURPOSE: reading what was measured, for tools that print it (qp, dyn, the metrics of
 * qpt-rewrite): the files they read and write the way qpt's own tools do (a regular file
 * only; an output written whole or not at all), and the calls of an earlier run of a
 * program from its profile. Conventions as in qpt.h: 0 (or a count, a descriptor) or a
 * negative QPT_E* code, one line in the caller's WHY buffer; the library never prints
 * and never reads the environment. Every call is thread-safe on distinct objects.
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*****************************************************************************
 * Files
 */

/*
 * PATH opened for reading, a regular file only: a FIFO, device or socket is refused
 * without blocking (QPT_ENOTREG), a folder is QPT_EDIR; WHY says why. Returns the
 * descriptor (O_CLOEXEC, blocking reads), which the caller closes, or a QPT_E* code.
 */
int qpt_file_open_read(const char *path, char *why, size_t whylen);

/*
 * An output written atomically: a temporary file beside PATH, renamed over PATH by
 * qpt_out_commit, removed by qpt_out_abort; a reader never sees PATH half written and a
 * failure leaves PATH as it was. PATH must not be a folder, FIFO or device (refused,
 * never replaced). qpt_out_open gives the object and the descriptor to write to (*FD);
 * PATH must outlive the object. Returns 0 or a QPT_E* code with WHY.
 */
typedef struct qpt_out qpt_out_t;

int qpt_out_open(qpt_out_t **out /*OUT*/, const char *path, int *fd /*OUT*/, char *why,
                 size_t whylen);

/*
 * Sync (unless FD_CLOSED: the caller closed the descriptor itself, e.g. with fclose of
 * a stream on it), close and rename the output over its path, and free O. 0, or
 * QPT_EIO with WHY: the output is then removed (and O freed) as by qpt_out_abort.
 */
int qpt_out_commit(qpt_out_t *o, int fd_closed, char *why, size_t whylen);

/* Remove the output and free O (its descriptor closed unless FD_CLOSED). NULL is fine;
 * errno is kept. */
void qpt_out_abort(qpt_out_t *o, int fd_closed);

/*****************************************************************************
 * The calls of an earlier run
 */

/* The calls of one procedure in a run. */
typedef struct qpt_entry_calls {
    uint64_t entry; /* its entry address, as the profiled program was linked */
    uint64_t calls; /* how often it was called */
} qpt_entry_calls_t;

/*
 * Read the profile PATH and the description of the program that wrote it (the executable
 * its header names), check one against the other, and give the calls of every measured
 * procedure whose count the counters determine: *OUT (malloc'd, the caller frees it)
 * gets *N of them in the description's order. 0, or a QPT_E* code with one line in WHY
 * (which names PATH); *OUT is then NULL.
 */
int qpt_profile_entry_calls(const char *path, qpt_entry_calls_t **out /*OUT*/,
                            size_t *n /*OUT*/, char *why, size_t whylen);

#ifdef __cplusplus
}
#endif

#endif
