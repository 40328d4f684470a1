/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * An x86-64 stand-in for one arm64 program, for bench/a64-coreutils.sh: copied as
 * DIR/NAME, it runs DIR/.a64/NAME under qemu-aarch64 with the program's own argv[0],
 * so that a test suite finds NAME in PATH and sees the messages it expects
 * ("NAME: ..."). DIR/.a64 is a symbolic link to the program set in use (original,
 * none or qp: switching sets is one link), DIR/.a64-sys to the arm64 libraries.
 *
 * The program is started through its dynamic linker (DIR/.a64/.ld/NAME, a hard link of
 * ld-linux-aarch64.so.1 per program) with --argv0 and --library-path, not with qemu's
 * -L: -L also redirects the guest's "/", "/lib" and "/usr" to the library tree, which
 * tests that look at "/" would see. /proc/self/exe is then the per-program link, so a
 * qp-rewritten program writes its profile to DIR/.a64/.ld/NAME.qp.
 *
 * LD_PRELOAD (stdbuf's libstdbuf.so, an arm64 library) is handed to the guest with
 * qemu's -E and taken out of qemu's own environment: the x86-64 loader would complain
 * about it on stderr. Build statically, for the same reason.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef QEMU
#define QEMU "/usr/bin/qemu-aarch64"
#endif

int
main(int argc, char **argv)
{
    char self[PATH_MAX], prog[PATH_MAX + 16], ld[PATH_MAX + 32], sys[PATH_MAX + 16];
    char libs[3 * PATH_MAX + 80], pre[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        perror("a64-wrap: /proc/self/exe");
        return 127;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    const char *name = slash + 1;
    snprintf(prog, sizeof(prog), "%s/.a64/%s", self, name);
    snprintf(ld, sizeof(ld), "%s/.a64/.ld/%s", self, name);
    snprintf(sys, sizeof(sys), "%s/.a64-sys", self);
    snprintf(libs, sizeof(libs), "%s/lib/aarch64-linux-gnu:%s/usr/lib/aarch64-linux-gnu",
        sys, sys);

    const char *qargv[argc + 16];
    int q = 0;
    qargv[q++] = "qemu-aarch64";
    qargv[q++] = "-0";
    qargv[q++] = argc > 0 ? argv[0] : name;
    const char *preload = getenv("LD_PRELOAD");
    if (preload != NULL) {
        snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", preload);
        qargv[q++] = "-E";
        qargv[q++] = pre;
        unsetenv("LD_PRELOAD");
    }
    qargv[q++] = ld;
    qargv[q++] = "--argv0";
    qargv[q++] = argc > 0 ? argv[0] : name;
    qargv[q++] = "--library-path";
    qargv[q++] = libs;
    qargv[q++] = prog;
    for (int i = 1; i < argc; i++)
        qargv[q++] = argv[i];
    qargv[q] = NULL;
    execv(QEMU, (char *const *)qargv);
    fprintf(stderr, "a64-wrap: %s: %s\n", QEMU, strerror(errno));
    return 127;
}
