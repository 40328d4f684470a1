/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#include "arch/qp_err.h"

const char *
qp_strerror(int err)
{
    switch (err) {
    case QP_OK: return "success";
    case QP_EINVAL: return "invalid argument";
    case QP_ENOMEM: return "out of memory";
    case QP_EIO: return "input/output error";
    case QP_ENOTELF: return "not an ELF file";
    case QP_EARCH: return "not an x86-64 ELF file (only x86-64 is supported)";
    case QP_ESHARED: return "a shared library, not an executable (not supported yet)";
    case QP_EFORMAT: return "malformed or truncated ELF file";
    case QP_EDECODE: return "bytes do not decode as an instruction";
    case QP_ERANGE: return "value out of range";
    case QP_ENOTFOUND: return "not found";
    case QP_EUNSUPP: return "not supported";
    case QP_EDIR: return "is a directory";
    case QP_ENOTEXEC: return "not an executable (relocatable object or core file)";
    case QP_ENOTREG: return "not a regular file (a device, FIFO or socket)";
    case QP_EINTR: return "interrupted";
    case QP_EBUG: return "an internal check failed (a bug in qpt: please report it); nothing was written";
    case QP_EEXITED: return "the process has exited";
    default: return "unknown error";
    }
}
