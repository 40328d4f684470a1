#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The layering rules of ../shared/STYLE.md, checked on every #include (like Valgrind's
# tests/check_headers_and_includes): which folder may include which project header and
# which system header. Prints each violation; fails if there is one.
set -u
top=${top_srcdir:-.}
cd "$top" || exit 99
bad=0
violation() {
    echo "check-includes: $1: $2"
    bad=1
}
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
out=$(
    # base/: byte readers and writers, formats; below every other folder.
    for f in base/*.[ch]; do
        [ -f "$f" ] && check "$f" "base/*" "bfd.h libelf.h gelf.h sys/ptrace.h dis-asm.h"
    done
    for f in arch/*.[ch] arch/*/*.[ch]; do
        [ -f "$f" ] && check "$f" "arch/*" "bfd.h libelf.h gelf.h sys/ptrace.h dis-asm.h"
    done
    # patch/: the point model, the flags rule, the trampoline builder; on arch/ only.
    for f in patch/*.[ch]; do
        [ -f "$f" ] && check "$f" "arch/*.h patch/*" "bfd.h libelf.h gelf.h sys/ptrace.h dis-asm.h"
    done
    for f in cfg/*.[ch]; do
        [ -f "$f" ] || continue
        forb="libelf.h gelf.h sys/ptrace.h dis-asm.h"
        [ "$f" = cfg/cfg_bfd.c ] || forb="$forb bfd.h"
        check "$f" "arch/arch.h arch/qp_err.h base/* cfg/*" "$forb"
    done
    # driver/: what to measure where; never report/ (reading profiles), never elfutils.
    for f in driver/*.[ch]; do
        [ -f "$f" ] && check "$f" "arch/arch.h arch/qp_err.h base/* cfg/cfg.h driver/* editor/ed.h patch/patch.h" \
            "bfd.h libelf.h gelf.h sys/ptrace.h dis-asm.h elfutils/libdw.h dwarf.h"
    done
    # report/: reading what was measured. The formats come from base/ and driver/'s
    # qp_desc.h, nothing else of driver/; exit back-traces need libdw's CFI reader:
    # qp_backtrace.c only.
    for f in report/*.[ch]; do
        [ -f "$f" ] || continue
        forb="bfd.h sys/ptrace.h dis-asm.h"
        [ "$f" = report/qp_backtrace.c ] || forb="$forb libelf.h gelf.h elfutils/libdw.h dwarf.h"
        check "$f" "arch/arch.h arch/qp_err.h base/* cfg/cfg.h driver/qp_desc.h report/*" \
            "$forb"
    done
    for f in editor/*.[ch]; do
        [ -f "$f" ] || continue
        case $f in
        editor/elfw*) check "$f" "arch/arch.h arch/qp_err.h base/* cfg/cfg.h editor/* runtime/qprt.h" "bfd.h sys/ptrace.h" ;;
        *) check "$f" "arch/arch.h arch/qp_err.h base/* cfg/cfg.h editor/ed* patch/patch.h" "bfd.h libelf.h gelf.h sys/ptrace.h" ;;
        esac
    done
    # runtime/: freestanding, no system headers but the compiler's own.
    for f in runtime/*.[ch]; do
        [ -f "$f" ] && check "$f" "runtime/qprt.h runtime/qprt_isa.h base/qp_format.h base/qpt_trace_format.h base/qp_bytes.h" \
            "stdio.h stdlib.h string.h unistd.h fcntl.h sys/mman.h bfd.h libelf.h"
    done
    for f in dynamic/*.[ch]; do
        [ -f "$f" ] && check "$f" "arch/arch.h arch/qp_err.h base/* cfg/cfg.h editor/ed.h patch/patch.h dynamic/* driver/drv_hist.h" \
            "bfd.h libelf.h gelf.h"
    done
    # The public header: the C library's headers only.
    for f in include/qpt/*.h; do
        [ -f "$f" ] && check "$f" "include/qpt/*" "bfd.h libelf.h gelf.h sys/ptrace.h dis-asm.h"
    done
    # libqpt/: the public face over every library folder (never BFD, libelf or ptrace
    # itself).
    for f in libqpt/*.[ch]; do
        [ -f "$f" ] && check "$f" "arch/arch.h arch/qp_err.h base/* cfg/cfg.h editor/ed.h editor/elfw.h driver/qp_desc.h driver/driver.h driver/drv_hist.h report/qp_profile.h report/qp_report.h dynamic/dyn.h include/qpt/qpt.h include/qpt/qpt_rewrite.h libqpt/*" \
            "bfd.h libelf.h gelf.h sys/ptrace.h dis-asm.h"
    done
    # metrics/: the metric language, on libqpt's public header only (and base/'s clocks,
    # which the timers' readers share with libqpt and dynamic/).
    for f in metrics/*.[ch]; do
        [ -f "$f" ] && check "$f" "include/qpt/qpt.h base/qp_clock.h metrics/*" \
            "bfd.h libelf.h gelf.h sys/ptrace.h dis-asm.h"
    done
    # Thin tools (DESIGN.md section 8): qpt-rewrite.c on the public headers only, and on
    # tool_cli.h, whose helpers need no library internals (system headers only).
    for f in tools/*.[ch]; do
        [ -f "$f" ] || continue
        case $f in
        tools/qpt-rewrite.c) check "$f" "include/qpt/* tools/tool_cli.h" "bfd.h libelf.h gelf.h sys/ptrace.h dis-asm.h"; continue ;;
        tools/tool_cli.h) check "$f" "" "bfd.h libelf.h gelf.h sys/ptrace.h dis-asm.h"; continue ;;
        esac
        check "$f" "arch/arch.h arch/qp_err.h cfg/cfg.h editor/ed.h editor/elfw.h driver/drv.h driver/driver.h base/qp_format.h driver/qp_desc.h report/qp_profile.h report/qp_flow.h report/qp_backtrace.h report/qp_report.h report/qp_callgraph.h report/qp_trace.h report/qp_cachesim.h dynamic/dyn.h include/qpt/qpt.h include/qpt/qpt_rewrite.h metrics/qm.h tools/*" \
            "bfd.h libelf.h gelf.h sys/ptrace.h"
    done
)
if [ -n "$out" ]; then
    echo "$out"
    exit 1
fi
echo "check-includes: every #include follows the layering rules"
exit 0
