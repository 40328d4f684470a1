/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * repipe: send a running program's standard output into a file, without restarting it
 * (the example of the Dyninst API paper, made with one-time system calls): attach,
 * write the file's name into memory the library maps in the process, open it there,
 * dup2 it over descriptor 1, close the spare descriptor, detach.
 *
 *   repipe PID FILE
 *
 * Build: cc repipe.c $(pkg-config --cflags --libs qpt) -o repipe
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include <qpt/qpt.h>

static int
fail(qpt_space_t *s, const char *what)
{
    fprintf(stderr, "repipe: %s: %s\n", what, qpt_error(s));
    qpt_close(s);
    return 1;
}

int
main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: repipe PID FILE\n");
        return 2;
    }
    char why[512] = "";
    qpt_space_t *s = NULL;
    if (qpt_attach(atoi(argv[1]), &s, why, sizeof(why)) < 0) {
        fprintf(stderr, "repipe: %s\n", why);
        return 1;
    }
    uint64_t mem;
    if (qpt_alloc(s, 4096, &mem) < 0 || strlen(argv[2]) >= 4096
        || qpt_write_memory(s, mem, argv[2], strlen(argv[2]) + 1) < 0)
        return fail(s, "writing the file name");
    uint64_t a[6] = { (uint64_t)(int64_t)AT_FDCWD, mem, O_WRONLY | O_CREAT | O_TRUNC, 0644 };
    int64_t fd, r;
    if (qpt_syscall(s, SYS_openat, a, &fd) < 0)
        return fail(s, "openat");
    if (fd < 0) {
        fprintf(stderr, "repipe: %s: %s (in the process)\n", argv[2], strerror((int)-fd));
        qpt_close(s);
        return 1;
    }
    uint64_t d[6] = { (uint64_t)fd, 1, 0 };
    if (qpt_syscall(s, SYS_dup3, d, &r) < 0 || r < 0)
        return fail(s, "dup3");
    uint64_t c[6] = { (uint64_t)fd };
    qpt_syscall(s, SYS_close, c, &r);
    printf("repipe: process %s now writes its standard output to %s\n", argv[1], argv[2]);
    qpt_close(s);
    return 0;
}
