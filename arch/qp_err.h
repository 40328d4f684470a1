/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_ERR_H
#define QP_ERR_H
/*
 * PURPOSE: the error codes shared by every library folder (arch, cfg, driver, editor,
 * dynamic). Library code never prints or exits: it returns 0 on success or a negative
 * QP_E* code, and tools/ turns the code into a message with qp_strerror().
 * Lives in arch/ because arch/ is the lowest layer that everyone may include; it uses libc only.
 */

enum qp_err {
    QP_OK = 0,
    QP_EINVAL = -1,     /* a caller passed an invalid argument */
    QP_ENOMEM = -2,     /* out of memory */
    QP_EIO = -3,        /* reading or writing a file failed (see errno) */
    QP_ENOTELF = -4,    /* the file is not an ELF file we can read */
    QP_EARCH = -5,      /* wrong architecture or class (not x86-64) */
    QP_ESHARED = -6,    /* a shared library, not an executable */
    QP_EFORMAT = -7,    /* a malformed or truncated ELF file */
    QP_EDECODE = -8,    /* bytes that do not decode as an instruction */
    QP_ERANGE = -9,     /* an address or value out of the supported range */
    QP_ENOTFOUND = -10, /* a named object (procedure, section) does not exist */
    QP_EUNSUPP = -11,   /* a valid input this version does not handle */
    QP_EDIR = -12,      /* the path names a directory */
    QP_ENOTEXEC = -13,  /* an ELF file that is not an executable (object, core) */
    QP_ENOTREG = -14,   /* the path names a device, FIFO or socket, not a regular file */
    QP_EINTR = -15,     /* the caller asked to stop (its stop flag) before the work began */
    QP_EBUG = -16,      /* an invariant of ours failed: no output was made (a bug to report) */
    QP_EEXITED = -17,   /* the live process has exited (or its image is gone: an execve) */
};

/* The text for an error code; never NULL, never to be freed. */
const char *qp_strerror(int err);

/* Return early from the calling function when E is an error. */
#define QP_CHECK(e)                                                                      \
    do {                                                                                 \
        int qp_check_rc_ = (e);                                                          \
        if (qp_check_rc_ < 0)                                                            \
            return qp_check_rc_;                                                         \
    } while (0)

#endif
