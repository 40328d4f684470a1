/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_PROFILE_H
#define QP_PROFILE_H
/*
 * PURPOSE: the profile (a.inst.qp, qp_format.h) in memory: read with validation, checked
 * against the description of the program that wrote it, merged over runs, written back.
 * The file is untrusted (written by the instrumented program, possibly cut short by a
 * crash): every size and offset is checked, and a failure comes with one line saying why.
 * No printing, no exit here; tools/ prints.
 * Lifetimes: a qp_profile_t owns its arrays until qp_profile_free.
 */
#include <stddef.h>
#include <stdint.h>

#include "base/qp_desc.h"

/* One complete exit dump (qp_format.h). */
typedef struct qp_dump {
    qp_dump_hdr_t hdr; /* registers, pc, bias, stack_len (<= QP_PROF_DUMP_STACK) */
    uint8_t *stack;    /* hdr.stack_len bytes saved from hdr.regs[7] upwards */
} qp_dump_t;

/*
 * A profile in memory, possibly the sum of several runs' files (qp_profile_merge).
 * Dumps that are incomplete (valid != 1, cut short by the file's end) or were never
 * kept (beyond QP_PROF_MAX_DUMPS) are counted in `ndropped`: the back-traces of those
 * exits are unknown and counts near them may be approximate.
 */
typedef struct qp_profile {
    qp_prof_hdr_t hdr;    /* as read; merged: runs and ndumps summed (saturating) */
    uint64_t *counters;   /* hdr.ncounters counters */
    qp_dump_t *dumps;     /* the complete dumps */
    size_t ndumps;        /* how many */
    uint64_t ndropped;    /* exits without a usable dump */
    uint32_t nfiles;      /* profile files summed into this one */
    uint32_t nslots_used; /* process slots summed in (running, or not yet folded) */
    uint32_t nrunning;    /* ... of which the owner still runs (its pid is alive and
                           * started when the slot says; this pid namespace only) */
    uint64_t running_pid; /* one of them */
    int saturated;        /* a counter reached UINT64_MAX (it is a lower bound) */
} qp_profile_t;

/*
 * Read the profile file PATH into *OUT with validation: a regular file, long enough for
 * the header, base counters, dumps and slot table, QP_PROF_MAGIC, QP_PROF_VERSION, the
 * layout where the format puts it, exe NUL-terminated. The counters are the sum of the
 * base counters and of every slot in use (a half-folded slot's journal completed), read
 * under a shared flock when one is granted within about two seconds. Dumps past the end
 * of the file or not marked valid are counted as dropped, not refused (a process may die
 * while writing one). Returns 0, QP_EINVAL, QP_ENOMEM, QP_EIO (errno kept) or
 * QP_EFORMAT, with one line in WHY (WHYLEN bytes; may be NULL). On failure *OUT is empty.
 */
int
qp_profile_read(const char *path, qp_profile_t *out /*OUT*/, char *why, size_t whylen);

/*
 * qp_profile_read in two steps, for a caller that reads the counters meanwhile on
 * another thread: qp_profile_open opens PATH and reads and checks all that
 * qp_profile_read checks of it (the header, the layout, the slot table), with the same
 * failures and words, into OUT's header and *PD (close it with qp_profile_close if
 * qp_profile_fill is not called); qp_profile_fill reads the counters and dumps into OUT
 * and closes PD: it fails only on I/O errors, memory, or a file cut short meanwhile.
 */
typedef struct qp_profile_pending qp_profile_pending_t;
int qp_profile_open(const char *path, qp_profile_t *out /*OUT*/,
                    qp_profile_pending_t **pd /*OUT*/, char *why, size_t whylen);
int qp_profile_fill(qp_profile_pending_t *pd, qp_profile_t *out, char *why, size_t whylen);
void qp_profile_close(qp_profile_pending_t *pd);

/*
 * Refuse a profile P that does not belong to the description D: another id (WHY:
 * "belongs to another executable or another rewrite ...") or another number of
 * counters. Returns 0 or QP_EFORMAT with one line in WHY.
 */
int
qp_profile_check(const qp_profile_t *p, const qp_desc_t *d, char *why, size_t whylen);

/*
 * Add the profile FROM to INTO: counters summed (saturating at UINT64_MAX, noted in
 * INTO->saturated), runs and ndumps summed, dumps appended (copied), dropped counts
 * summed. Both must have the same id and number of counters (QP_EFORMAT with WHY
 * otherwise). INTO may be an empty (zeroed) profile: it becomes a copy of FROM.
 * Returns 0, QP_EFORMAT or QP_ENOMEM (INTO is unchanged on failure).
 */
int
qp_profile_merge(qp_profile_t *into, const qp_profile_t *from, char *why, size_t whylen);

/* qp_profile_merge, but an empty INTO takes FROM's counters (FROM->counters becomes
 * NULL) instead of a copy: for a caller that only keeps the sum. */
int
qp_profile_merge_take(qp_profile_t *into, qp_profile_t *from, char *why, size_t whylen);

/*
 * Write P to PATH in the profile format (through a temporary file in the same directory
 * renamed over PATH; an existing PATH that is not a regular file is refused with
 * QP_ENOTREG, a directory with QP_EDIR). Every count goes into the base counters (no
 * slot in use); saturation is kept as QP_PROF_SATURATED. The first QP_PROF_MAX_DUMPS
 * complete dumps are kept; hdr.ndumps is set so that a reader counts every other exit
 * as dropped. Returns 0, QP_EINVAL, QP_ENOMEM or QP_EIO (errno kept) with one line in
 * WHY.
 */
int
qp_profile_write(const char *path, const qp_profile_t *p, char *why, size_t whylen);

/*
 * The checked file access every tool input and output goes through (the profiles' own).
 *
 * qp_file_open_read: PATH opened for reading, a regular file only: a FIFO, device or
 * socket is refused without blocking (QP_ENOTREG), a folder is QP_EDIR, and WHY says so.
 * Returns the descriptor (O_CLOEXEC, blocking reads), or a QP_E* code.
 *
 * qp_out_t: an output written atomically: qp_out_open makes a temporary file beside PATH
 * (PATH must not be a folder, FIFO or device: those are refused, never replaced);
 * write to FD (or fdopen it, then set FD to -1 after fclose); qp_out_commit syncs,
 * closes and renames it over PATH; qp_out_abort (also after a failed commit) removes it.
 * A reader never sees PATH half written, and a failure leaves PATH as it was.
 */
int qp_file_open_read(const char *path, char *why, size_t whylen);

typedef struct qp_out {
    int fd;
    char *tmp;        /* the temporary file's path */
    const char *path; /* the final one (not owned) */
} qp_out_t;

int qp_out_open(qp_out_t *o /*OUT*/, const char *path, char *why, size_t whylen);
int qp_out_commit(qp_out_t *o, char *why, size_t whylen);
void qp_out_abort(qp_out_t *o);

/* Free P's arrays and zero it. NULL is fine. */
void
qp_profile_free(qp_profile_t *p);

#endif
