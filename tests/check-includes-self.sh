#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# tests/check-includes.sh checked on a small tree of its own: a file per folder that
# includes what the layering allows passes; each include the design forbids, planted one
# at a time, fails with its file and header named; a listed debt passes and a stale one
# fails.
set -u
top=${top_srcdir:-.}
script=$(cd "$top" && pwd)/tests/check-includes.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qpt-incl.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0

# The tree: FILE then the lines it holds.
put() {
    f=$tmp/$1
    shift
    mkdir -p "$(dirname "$f")"
    printf '%s\n' "$@" >"$f"
}
tree() {
    rm -rf "$tmp"/*
    put arch/x86_decode.c '#include "arch/arch.h"' '#include <string.h>'
    put base/qp_bytes.h '#include "arch/qp_err.h"'
    put cfg/cfg_build.c '#include "cfg/cfg.h"' '#include "base/qp_bytes.h"' '#include "arch/arch.h"'
    put cfg/cfg_bfd.c '#include <bfd.h>'
    put patch/patch.c '#include "patch/patch.h"' '#include "cfg/cfg.h"'
    put editor/ed_layout.c '#include "editor/ed.h"' '#include "patch/patch.h"'
    put editor/elfw.c '#include "editor/ed.h"' '#include <libelf.h>'
    put dynamic/dyn_ptrace.c '#include "dynamic/dyn.h"' '#include <sys/ptrace.h>' '#include <sys/wait.h>'
    put dynamic/dyn_space.c '#include "dynamic/dyn.h"' '#include "editor/ed.h"'
    put driver/drv_edge.c '#include "driver/driver.h"' '#include "editor/ed.h"'
    put report/qp_flow.c '#include "report/qp_flow.h"' '#include "cfg/cfg.h"'
    put libqpt/qpt_space.c '#include "libqpt/qpt_priv.h"' '#include "dynamic/dyn.h"' '#include "driver/driver.h"'
    put metrics/qm_parse.c '#include "include/qpt/qpt.h"' '#include "include/qpt/qpt_metrics.h"'
    put tools/qp.c '#include "include/qpt/qpt.h"' '#include "tools/tool.h"' '#include <stdio.h>'
    put examples/coverage.c '#include <qpt/qpt.h>'
    : >"$tmp/debts"
}
run() {
    (top_srcdir=$tmp QPT_INCLUDE_DEBTS=$tmp/debts sh "$script") >"$tmp/out" 2>&1
}
# expect_fail WHAT FILE LINE MESSAGE: LINE added to FILE fails with MESSAGE.
expect_fail() {
    tree
    echo "$3" >>"$tmp/$2"
    if run; then
        echo "check-includes-self: $1: passed: $2 with $3"
        fail=1
    elif ! grep -qF "$4" "$tmp/out"; then
        echo "check-includes-self: $1: no line '$4' in:"
        cat "$tmp/out"
        fail=1
    fi
}

tree
if ! run; then
    echo "check-includes-self: the allowed tree fails:"
    cat "$tmp/out"
    fail=1
fi
expect_fail "arch < base" arch/x86_decode.c '#include "base/qp_bytes.h"' 'arch/x86_decode.c: includes "base/qp_bytes.h"'
expect_fail "base < cfg" base/qp_bytes.h '#include "cfg/cfg.h"' 'base/qp_bytes.h: includes "cfg/cfg.h"'
expect_fail "cfg < patch" cfg/cfg_build.c '#include "patch/patch.h"' 'cfg/cfg_build.c: includes "patch/patch.h"'
expect_fail "cfg < editor" cfg/cfg_build.c '#include "editor/ed.h"' 'cfg/cfg_build.c: includes "editor/ed.h"'
expect_fail "patch < editor" patch/patch.c '#include "editor/ed.h"' 'patch/patch.c: includes "editor/ed.h"'
expect_fail "editor beside dynamic" editor/ed_layout.c '#include "dynamic/dyn.h"' 'editor/ed_layout.c: includes "dynamic/dyn.h"'
expect_fail "editor < driver" editor/ed_layout.c '#include "driver/driver.h"' 'editor/ed_layout.c: includes "driver/driver.h"'
expect_fail "dynamic < driver" dynamic/dyn_space.c '#include "driver/driver.h"' 'dynamic/dyn_space.c: includes "driver/driver.h"'
expect_fail "ptrace in dyn_ptrace.c only" dynamic/dyn_space.c '#include <sys/ptrace.h>' 'dynamic/dyn_space.c: includes <sys/ptrace.h>'
expect_fail "driver never sees a process" driver/drv_edge.c '#include "dynamic/dyn.h"' 'driver/drv_edge.c: includes "dynamic/dyn.h"'
expect_fail "driver < libqpt" driver/drv_edge.c '#include "include/qpt/qpt.h"' 'driver/drv_edge.c: includes "include/qpt/qpt.h"'
expect_fail "report on base and cfg" report/qp_flow.c '#include "driver/driver.h"' 'report/qp_flow.c: includes "driver/driver.h"'
expect_fail "libqpt < tools" libqpt/qpt_space.c '#include "tools/tool.h"' 'libqpt/qpt_space.c: includes "tools/tool.h"'
expect_fail "libqpt: no BFD" libqpt/qpt_space.c '#include <bfd.h>' 'libqpt/qpt_space.c: includes <bfd.h>'
expect_fail "metrics on the public header" metrics/qm_parse.c '#include "cfg/cfg.h"' 'metrics/qm_parse.c: includes "cfg/cfg.h"'
expect_fail "tools on the public headers" tools/qp.c '#include "report/qp_report.h"' 'tools/qp.c: includes "report/qp_report.h"'
expect_fail "no other folder's _priv.h" tools/qp.c '#include "libqpt/qpt_priv.h"' "tools/qp.c: includes another folder's libqpt/qpt_priv.h"
expect_fail "examples: the installed header only" examples/coverage.c '#include "cfg/cfg.h"' 'examples/coverage.c: includes "cfg/cfg.h"'
expect_fail "libelf in the ELF writer only" editor/ed_layout.c '#include <libelf.h>' 'editor/ed_layout.c: includes <libelf.h>'

# A listed debt passes; once its include is gone it fails as stale.
tree
echo '#include "report/qp_report.h"' >>"$tmp/tools/qp.c"
echo 'tools/qp.c report/qp_report.h # a test debt' >"$tmp/debts"
if ! run; then
    echo "check-includes-self: a listed debt fails:"
    cat "$tmp/out"
    fail=1
fi
tree
echo 'tools/qp.c report/qp_report.h # a test debt' >"$tmp/debts"
if run || ! grep -q 'tools/qp.c: no longer includes report/qp_report.h' "$tmp/out"; then
    echo "check-includes-self: a stale debt is not reported:"
    cat "$tmp/out"
    fail=1
fi
[ $fail -eq 0 ] && echo "check-includes-self: every rule fails on a forbidden include"
exit $fail
