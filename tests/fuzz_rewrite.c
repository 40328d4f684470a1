/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A fuzz target for the whole static rewrite: the input bytes, as an executable, go
 * through everything `qpt-rewrite INPUT -o OUTPUT` does - the reader, the CFGs, the plan,
 * a driver (the input's last byte picks none, qp or naive), the counter choice, the
 * relocation, the unwind and DWARF rewrites and the ELF writer - into a scratch file
 * that is then read back by the reader; the description it carries must parse. Any crash, hang, leak or sanitizer report is a
 * bug; refusals are fine. The output must never be set-user-ID (the target aborts).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfg/cfg.h"
#include "driver/driver.h"
#include "base/qp_desc.h"
#include "editor/ed.h"
#include "editor/elfw.h"
#include "tests/fuzz.h"

static int
describe(void *arg, const ed_plan_t *plan, uint64_t counters, uint8_t **desc, size_t *len,
         uint64_t *id)
{
    int rc = drv_describe(arg, plan, counters, desc, len, id);
    qp_desc_t d;
    char why[512];
    if (rc == 0 && qp_desc_parse(*desc, *len, &d, why, sizeof(why)) != 0)
        abort(); /* a description the rewriter writes must parse */
    if (rc == 0)
        qp_desc_free(&d);
    return rc;
}

/* Measure and write PROG (from INPUT) to OUTPUT with driver DRV (NULL: none). */
static void
rewrite(const cfg_prog_t *prog, const char *input, const char *output, const drv_ops_t *drv)
{
    ed_plan_t *plan = NULL;
    if (ed_plan_create(prog, NULL, &plan) < 0)
        return;
    drv_result_t res;
    memset(&res, 0, sizeof(res));
    elfw_instr_t instr = { 0 };
    int ok = 1;
    if (drv != NULL) {
        ok = drv_run(drv, prog, plan, NULL, &res) == 0
            && ed_plan_set_probes(plan, res.probes, res.nprobes) == 0;
        if (ok) {
            drv_inc_t inc;
            drv_choose_inc(prog, &res, -1, &inc);
            ed_plan_set_inc_mode(plan, inc.mode);
            instr = (elfw_instr_t) { .ncounters = res.ncounters, .lock_at_start = inc.lock_at_start,
                                     .describe = describe, .arg = &res, .watcher = inc.watcher };
        }
    }
    char err[512];
    elfw_rewrite_stats_t st;
    if (ok && elfw_rewrite(prog, plan, drv ? &instr : NULL, input, output, NULL, &st, err,
                           sizeof(err))
            == 0) {
        /* What was written must read back. */
        cfg_image_t *img = NULL;
        if (cfg_image_open_bfd(output, &img) == 0)
            cfg_image_destroy(img);
    }
    ed_plan_destroy(plan);
    drv_result_free(&res);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char input[64], output[96];
    const char *dir = fuzz_scratch_dir();
    int fd = dir ? fuzz_memfd(data, size, input, sizeof(input)) : -1;
    if (fd < 0)
        return 0;
    snprintf(output, sizeof(output), "%s/out", dir);
    cfg_image_t *img = NULL;
    cfg_prog_t *prog = NULL;
    if (cfg_image_open_bfd(input, &img) == 0) {
        if (ed_image_unsupported(img) == NULL && ed_image_rewritten(img) == NULL
            && cfg_prog_build(img, NULL, &prog) == 0) {
            static const char *const drivers[] = { NULL, "qp", "naive" };
            const char *name = drivers[size > 0 ? data[size - 1] % 3 : 0];
            rewrite(prog, input, output, name ? drv_find(name) : NULL);
            cfg_prog_destroy(prog);
        }
        cfg_image_destroy(img);
    }
    struct stat st;
    if (stat(output, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)))
        abort(); /* a rewrite must never be set-user-ID */
    unlink(output);
    close(fd);
    return 0;
}
