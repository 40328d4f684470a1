/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * tests/dyn-go.sh's helper: Go's fault rule in dyn (patch/pt_go.c). libqpt refuses a Go
 * process before a session sees it (live_image_refusal), so this drives the session of
 * dynamic/ itself: start PROG (tests/inplace/truth.go's build), stopped at its entry;
 * ask for each procedure NAME... (relocated whole, the way dyn counts a Go procedure:
 * its entry block is a loop's target, the stack check's) and print "NAME: in" or
 * "NAME: WHY"; install, let it run to its end with the copies in (its output is ours)
 * and exit with its status. main.deref's nil dereferences, recovered, would fault in
 * its copy and stop the program ("unknown caller pc") but for the rule.
 * Usage: gorule PROG NAME...
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "cfg/cfg.h"
#include "dynamic/dyn.h"

int
main(int argc, char **argv)
{
    char why[320] = "";
    cfg_image_t *img = NULL;
    cfg_prog_t *prog = NULL;
    dyn_proc_t *p = NULL;
    dyn_session_t *s = NULL;
    uint64_t bias = 0;
    cfg_opts_t co = { 0 };

    if (argc < 3) {
        fprintf(stderr, "usage: gorule PROG NAME...\n");
        return 99;
    }
    if (cfg_image_open_bfd_why(argv[1], &img, why, sizeof(why)) < 0
        || cfg_prog_build(img, &co, &prog) < 0) {
        fprintf(stderr, "gorule: %s: cannot read it %s\n", argv[1], why);
        return 99;
    }
    char *args[] = { argv[1], NULL };
    int rc = dyn_proc_spawn(args, &p);
    if (rc < 0) {
        fprintf(stderr, "gorule: cannot start %s: %s\n", argv[1], qp_strerror(rc));
        return 77; /* ptrace not permitted */
    }
    if ((rc = dyn_proc_run_to_entry(p)) < 0 || (rc = dyn_proc_load_bias(p, img->entry, &bias)) < 0
        || (rc = dyn_session_create(p, prog, bias, &s)) < 0) {
        fprintf(stderr, "gorule: %s: %s\n", argv[1], qp_strerror(rc));
        dyn_proc_kill(p);
        return 99;
    }
    for (int i = 2; i < argc; i++) {
        const cfg_proc_t *pr = cfg_proc_by_name(prog, argv[i]);
        const char *w = "no such procedure";
        if (pr != NULL
            && dyn_session_add_point(s, DYN_PT_PROC, (uint32_t)(pr - prog->procs), pr->entry,
                   NULL, NULL, argv[i], NULL, &w) == 0)
            w = "in";
        fprintf(stderr, "%s: %s\n", argv[i], w);
    }
    if ((rc = dyn_session_install(s)) < 0) {
        fprintf(stderr, "gorule: install: %s\n", qp_strerror(rc));
        dyn_proc_kill(p);
        return 99;
    }
    for (size_t i = 0; i < dyn_session_nrefused(s); i++) {
        const char *w = NULL;
        const char *n = dyn_session_refusal(s, i, &w);
        fprintf(stderr, "%s: refused at install: %s\n", n, w);
    }
    if ((rc = dyn_proc_resume(p)) < 0) {
        fprintf(stderr, "gorule: resume: %s\n", qp_strerror(rc));
        return 99;
    }
    int st = 0;
    while (dyn_proc_ended(p, &st) == 0) {
        struct timespec ts = { 0, 2000000 };
        nanosleep(&ts, NULL);
    }
    dyn_session_destroy(s);
    dyn_proc_destroy(p);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
