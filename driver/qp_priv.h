/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_PRIV_H
#define QP_PRIV_H
/*
 * PURPOSE: helpers shared by the profile-reading files of driver/ (qp_desc.c,
 * qp_profile.c, qp_flow.c, qp_backtrace.c, qp_report.c, qp_lines.c) and their tests.
 * No other folder may include this header.
 */
#include <stddef.h>

/* Write one line (printf FMT) into WHY (WHYLEN bytes); nothing when WHY is NULL. */
void qp_why(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
