#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The layering of ../shared/DESIGN.md (section 8) and STYLE.md's include table, checked on
# every #include (like Valgrind's tests/check_headers_and_includes):
#
#   arch < base < cfg < patch < editor, dynamic < driver < libqpt < metrics < tools;
#   report/ beside them, on base and cfg; runtime/ freestanding, on base;
#   tools/ and examples/ through the public headers (include/qpt/) only.
#
# A folder may include the public headers of the folders below it (the lists below are
# that table, narrowed where STYLE.md is stricter: a driver never sees dynamic/), never a
# folder above or beside it, nor another folder's *_priv.h. Prints each violation and
# fails if there is one.
#
# Includes the design forbids but the code still has are listed, one "FILE HEADER" a
# line with the issue that removes them, in tests/include-debts.txt (or $QPT_INCLUDE_DEBTS):
# they pass, and a listed one that the code no longer has fails as stale, so that the list
# only shrinks. tests/check-includes-self.sh plants forbidden includes to show that each
# rule fails.
set -u
top=${top_srcdir:-.}
debts=${QPT_INCLUDE_DEBTS:-$top/tests/include-debts.txt}
# (absolute before the cd: in a VPATH build, as make distcheck's, top_srcdir is relative)
case $debts in /*) ;; *) debts=$PWD/$debts ;; esac
cd "$top" || exit 99
# check FILE ALLOWED-PROJECT-PREFIXES FORBIDDEN-SYSTEM-HEADERS
check() {
    file=$1 allowed=$2 forbidden=$3
    grep -n '^[[:space:]]*#[[:space:]]*include' "$file" | while IFS= read -r line; do
        hdr=$(echo "$line" | sed -n 's/.*#[[:space:]]*include[[:space:]]*[<"]\([^>"]*\)[>"].*/\1/p')
        case $line in
        *'"'*)
            [ "$hdr" = config.h ] && continue
            ok=0
            # the patterns are matched as patterns, not expanded against the file system
            # (arch/* must allow arch/aarch64/a64_priv.h)
            set -f
            for a in $allowed; do
                case $hdr in $a) ok=1 ;; esac
            done
            set +f
            [ $ok -eq 1 ] || echo "check-includes: $file: includes \"$hdr\""
            case $hdr in *_priv.h)
                # a module is a top-level folder: arch/arch_isa.c may include
                # arch/aarch64/a64_priv.h
                d=${file%%/*}; [ "${hdr%%/*}" = "$d" ] || [ "${file#tests/}" != "$file" ] ||
                    echo "check-includes: $file: includes another folder's $hdr" ;;
            esac
            ;;
        *)
            for f in $forbidden; do
                [ "$hdr" = "$f" ] && echo "check-includes: $file: includes <$hdr>"
            done
            ;;
        esac
    done
}
# What no library folder includes: BFD is cfg_bfd.c's, libelf the ELF writer's, ptrace
# dyn_ptrace*.c's, libopcodes the report tools'.
lowlevel="bfd.h libelf.h gelf.h sys/ptrace.h dis-asm.h"
out=$(
    # arch/: instructions only.
    for f in arch/*.[ch] arch/*/*.[ch]; do
        [ -f "$f" ] && check "$f" "arch/*" "$lowlevel"
    done
    # base/: byte readers and writers, formats; on arch/'s error codes at most.
    for f in base/*.[ch]; do
        [ -f "$f" ] && check "$f" "arch/arch.h arch/qp_err.h base/*" "$lowlevel"
    done
    for f in cfg/*.[ch]; do
        [ -f "$f" ] || continue
        forb="libelf.h gelf.h sys/ptrace.h dis-asm.h"
        [ "$f" = cfg/cfg_bfd.c ] || forb="$forb bfd.h"
        check "$f" "arch/arch.h arch/qp_err.h base/* cfg/*" "$forb"
    done
    # patch/: the point model, the flags rule, the trampoline builder.
    for f in patch/*.[ch]; do
        [ -f "$f" ] && check "$f" "arch/*.h base/* cfg/cfg.h patch/*" "$lowlevel"
    done
    for f in editor/*.[ch]; do
        [ -f "$f" ] || continue
        case $f in
        editor/elfw*) check "$f" "arch/arch.h arch/qp_err.h base/* cfg/cfg.h patch/patch.h editor/* runtime/qprt.h" "bfd.h sys/ptrace.h dis-asm.h" ;;
        *) check "$f" "arch/arch.h arch/qp_err.h base/* cfg/cfg.h editor/ed* patch/patch.h" "$lowlevel" ;;
        esac
    done
    # dynamic/: beside editor/, below the drivers; ptrace and waitpid in process control
    # only (dyn_ptrace.c, its parts dyn_ptrace_*.c and their dyn_ptrace_priv.h).
    for f in dynamic/*.[ch]; do
        [ -f "$f" ] || continue
        forb="bfd.h libelf.h gelf.h dis-asm.h"
        case $f in
        dynamic/dyn_ptrace.c | dynamic/dyn_ptrace_*.[ch]) ;;
        *) forb="$forb sys/ptrace.h sys/wait.h" ;;
        esac
        check "$f" "arch/arch.h arch/qp_err.h base/* cfg/cfg.h editor/ed.h patch/patch.h dynamic/*" "$forb"
    done
    # driver/: what to measure where; never whether it is a file or a process (STYLE 25),
    # never report/ (reading profiles), never elfutils.
    for f in driver/*.[ch]; do
        [ -f "$f" ] && check "$f" "arch/arch.h arch/qp_err.h base/* cfg/cfg.h driver/* editor/ed.h patch/patch.h" \
            "$lowlevel elfutils/libdw.h dwarf.h"
    done
    # report/: reading what was measured, on base/ and cfg/; exit back-traces need libdw's
    # CFI reader: qp_backtrace.c only.
    for f in report/*.[ch]; do
        [ -f "$f" ] || continue
        forb="bfd.h sys/ptrace.h dis-asm.h"
        [ "$f" = report/qp_backtrace.c ] || forb="$forb libelf.h gelf.h elfutils/libdw.h dwarf.h"
        check "$f" "arch/arch.h arch/qp_err.h base/* cfg/cfg.h report/*" "$forb"
    done
    # runtime/: freestanding, no system headers but the compiler's own; qprt.c includes
    # its parts runtime/qprt_*.c (one translation unit).
    for f in runtime/*.[ch]; do
        [ -f "$f" ] && check "$f" "runtime/qprt.h runtime/qprt_isa.h runtime/qprt_*.c base/qp_format.h base/qpt_trace_format.h base/qp_leb.h" \
            "stdio.h stdlib.h string.h unistd.h fcntl.h sys/mman.h bfd.h libelf.h"
    done
    # The public headers: the C library's headers only.
    for f in include/qpt/*.h; do
        [ -f "$f" ] && check "$f" "include/qpt/* qpt.h" "$lowlevel"
    done
    # libqpt/: the public face over every library folder's public header (never BFD,
    # libelf or ptrace itself).
    for f in libqpt/*.[ch]; do
        [ -f "$f" ] && check "$f" "arch/arch.h arch/qp_err.h base/* cfg/cfg.h editor/ed.h editor/elfw.h driver/driver.h report/qp_profile.h report/qp_report.h report/qp_callgraph.h report/qp_trace.h report/qp_cachesim.h dynamic/dyn.h include/qpt/* libqpt/*" \
            "$lowlevel"
    done
    # metrics/: the metric language (part of libqpt, <qpt/qpt_metrics.h>), on libqpt's
    # public headers only (and base/'s clocks, which the timers' readers share with libqpt
    # and dynamic/).
    for f in metrics/*.[ch]; do
        [ -f "$f" ] && check "$f" "include/qpt/qpt.h include/qpt/qpt_metrics.h base/qp_clock.h metrics/*" "$lowlevel"
    done
    # tools/: option parsing and printing through the public headers (DESIGN section 8)
    # and tools/'s own helpers.
    for f in tools/*.[ch]; do
        [ -f "$f" ] && check "$f" "include/qpt/* tools/*" "bfd.h libelf.h gelf.h sys/ptrace.h"
    done
    # examples/: mutators built against the installed library: <qpt/qpt.h>, nothing of
    # the tree.
    for f in examples/*.[ch]; do
        [ -f "$f" ] && check "$f" "" "$lowlevel"
    done
)
# The violations listed as debts pass; a listed debt the code no longer has is stale.
[ -f "$debts" ] || debts=/dev/null
out=$(printf '%s\n' "$out" | awk -v debts="$debts" '
    BEGIN {
        while ((getline l < debts) > 0) {
            sub(/#.*/, "", l)
            if (split(l, w, " ") >= 2) { owed[w[1] " " w[2]] = 1; n++ }
        }
    }
    /^check-includes: / {
        line = $0
        file = $2; sub(/:$/, "", file)
        hdr = $NF; gsub(/[<>"]/, "", hdr)
        if ((file " " hdr) in owed) { seen[file " " hdr] = 1; next }
        print line
    }
    END {
        for (k in owed)
            if (!(k in seen)) {
                split(k, w, " ")
                print "check-includes: " w[1] ": no longer includes " w[2] \
                      " (a stale debt: delete its line from " debts ")"
            }
    }')
if [ -n "$out" ]; then
    echo "$out"
    exit 1
fi
echo "check-includes: every #include follows the layering rules"
exit 0
