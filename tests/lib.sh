# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Shared functions for the test scripts; source it, do not run it. POSIX sh.
#   top_srcdir, top_builddir   set by automake's TESTS_ENVIRONMENT; default "."
#   QPT_REWRITE                the rewriter under test
#   QP_JOBS                    parallel jobs (default: the number of CPUs)
#   build_corpus DIR           compile tests/progs/* in every variant into DIR
#   qp_fail_reason FILE        first line of a failed build's log (for reports)
#   ok MSG, bad MSG            a check passed / failed ("FAIL MSG", counted in $fails)
#   count_lines FILE PATTERN   lines of FILE matching PATTERN (0 when FILE is not there)
#   wait_lines FILE PATTERN N [SECS]   wait until N lines match (10 s by default)

: "${top_srcdir:=.}"
: "${top_builddir:=.}"
QPT_REWRITE=${QPT_REWRITE:-$top_builddir/tools/qpt-rewrite}
QP_PROGS_DIR=$top_srcdir/tests/progs
QP_LIBSH=$top_srcdir/tests/lib.sh
if [ -z "${QP_JOBS:-}" ]; then
    QP_JOBS=$(nproc 2>/dev/null || echo 2)
fi

# True when command $1 exists.
qp_have() {
    command -v "$1" >/dev/null 2>&1
}

# The compilers that build a source of language $1 (c, c++, fortran).
qp_compilers() {
    case $1 in
    c) echo "gcc clang" ;;
    c++) echo "g++ clang++" ;;
    fortran) echo "gfortran" ;;
    esac
}

# The language of source file $1, or nothing when it is not a test program.
qp_lang() {
    case $1 in
    *.c) echo c ;;
    *.cc | *.cpp) echo c++ ;;
    *.f90) echo fortran ;;
    esac
}

# The link variants for compiler $1 and language $2, as "name:flags" words (the flags
# are joined with commas). The matrix is trimmed where a variant adds little and costs
# build time: static-pie is built with gcc only (clang does not support it everywhere).
qp_links() {
    case $1 in
    gcc) echo "pie:-fPIE,-pie nopie:-fno-pie,-no-pie static:-static static-pie:-fPIE,-static-pie" ;;
    *) echo "pie:-fPIE,-pie nopie:-fno-pie,-no-pie static:-static" ;;
    esac
}

QP_OPTS="O0 O2 O3"

# True when a variant is left out to keep the corpus build within about 3 minutes on
# 2 cores: static binaries are mostly libc (libstdc++, libgfortran), the same at every
# level, so C builds them at O0 and O2 only and C++/Fortran at O2 only.
qp_variant_trimmed() { # LANG LINK OPT
    case $1.$2.$3 in
    c.static*.O3 | c++.static*.O[03] | fortran.static*.O[03]) return 0 ;;
    esac
    return 1
}

# Extra flags a program asks for with a line "qpt-build-flags: FLAGS" in its source
# (e.g. -pthread).
qp_extra_flags() {
    sed -n 's/.*qpt-build-flags: *\([^*]*\).*/\1/p' "$1" | head -n 1
}

# Print one build job per line: "OUT SRC COMPILER FLAG...". Variants whose compiler is
# missing are not printed; their count is printed on stderr as "missing N".
qp_corpus_jobs() {
    dir=$1
    missing=0
    for src in "$QP_PROGS_DIR"/*; do
        lang=$(qp_lang "$src")
        [ -n "$lang" ] || continue
        base=${src##*/}
        base=${base%.*}
        extra=$(qp_extra_flags "$src")
        for cc in $(qp_compilers "$lang"); do
            for link in $(qp_links "$cc"); do
                lname=${link%%:*}
                lflags=$(echo "${link#*:}" | tr ',' ' ')
                for opt in $QP_OPTS; do
                    ! qp_variant_trimmed "$lang" "$lname" "$opt" || continue
                    if ! qp_have "$cc"; then
                        missing=$((missing + 1))
                        continue
                    fi
                    # No trailing blank: xargs -L would join the next line to this one.
                    line="$dir/$base.$cc.$opt.$lname $src $cc -g -$opt $lflags"
                    [ -z "$extra" ] || line="$line $extra"
                    echo "$line"
                done
            done
        done
    done
    echo "missing $missing" >&2
}

# Build one variant (run by xargs): prints "built", "failed" or "uptodate" and a name.
# A failed build leaves OUT.failed (its log) so that it is not retried until the
# source changes.
qp_build_one() {
    out=$1
    src=$2
    shift 2
    # test -nt is not in POSIX but every sh we meet (dash, bash, busybox) has it.
    # shellcheck disable=SC3013
    if [ "$out" -nt "$src" ]; then
        echo "uptodate $out"
        return 0
    fi
    # shellcheck disable=SC3013
    if [ "$out.failed" -nt "$src" ]; then
        echo "failed $out"
        return 0
    fi
    rm -f "$out" "$out.failed"
    # gfortran writes module files into the current directory unless told otherwise.
    case $1 in
    gfortran*)
        mkdir -p "$out.mod"
        set -- "$@" -J "$out.mod"
        ;;
    esac
    if "$@" -o "$out.tmp" "$src" >"$out.log" 2>&1; then
        mv "$out.tmp" "$out"
        rm -f "$out.log"
        echo "built $out"
    else
        rm -f "$out.tmp"
        mv "$out.log" "$out.failed"
        echo "failed $out"
    fi
    [ ! -d "$out.mod" ] || rm -rf "$out.mod"
}

# The first line of the log of a failed build of $1.
qp_fail_reason() {
    grep -m 1 -i 'error' "$1.failed" 2>/dev/null || head -n 1 "$1.failed"
}

# build_corpus DIR: compile every program of tests/progs with every applicable
# compiler, optimisation level and linkage into DIR/NAME.COMPILER.OPT.LINK, in parallel,
# skipping targets newer than their source. Writes DIR/MANIFEST (the binaries that exist,
# one per line) and prints a one-line summary. Returns 0 even when variants fail to
# build (they are counted); returns 1 when nothing could be built.
build_corpus() {
    dir=$1
    mkdir -p "$dir" || return 1
    jobs=$dir/.jobs
    results=$dir/.results
    qp_corpus_jobs "$dir" >"$jobs" 2>"$dir/.missing"
    missing=$(sed -n 's/^missing //p' "$dir/.missing")
    start=$(date +%s)
    # Each line becomes the arguments of one qp_build_one call.
    # shellcheck disable=SC2016 # expanded by the inner sh
    xargs -P "$QP_JOBS" -L 1 sh -c '. "$0"; qp_build_one "$@"' "$QP_LIBSH" \
        <"$jobs" >"$results"
    end=$(date +%s)
    built=$(grep -c '^built ' "$results")
    uptodate=$(grep -c '^uptodate ' "$results")
    failed=$(grep -c '^failed ' "$results")
    sed -n 's/^\(built\|uptodate\) //p' "$results" | sort >"$dir/MANIFEST"
    sed -n 's/^failed //p' "$results" | sort >"$dir/FAILED"
    total=$(wc -l <"$dir/MANIFEST")
    echo "corpus: $built built, $uptodate up to date, $((failed + missing)) skipped" \
        "($failed failed to build, $missing compiler missing); $total binaries in $dir" \
        "($((end - start)) s)"
    [ "$total" -gt 0 ]
}

# A check's outcome: "ok   MSG", or "FAIL MSG" counted in $fails (exit 1 when not 0).
fails=0
ok() {
    echo "ok   $*"
}
bad() {
    echo "FAIL $*"
    fails=$((fails + 1))
}

# dyn_setup NAME: the dyn tests' start. $dir is tests/NAME.d, emptied; $fails is 0; a
# target ($tpid) and a dyn ($dpid) left running in the background are killed at exit.
dyn_setup() {
    dir=$top_builddir/tests/$1.d
    rm -rf "$dir"
    mkdir -p "$dir" || exit 99
    fails=0 tpid= dpid=
    trap 'exec 7>&- 2>/dev/null; [ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null; [ -n "$tpid" ] && kill "$tpid" 2>/dev/null' EXIT
}

# dyn_build_qtlib DIR: tests/dynlib's library DIR/libqt.so and its program DIR/main
# (linked to it, found beside it); exit 77 without gcc, 99 when they do not build.
dyn_build_qtlib() {
    qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
    gcc -O2 -fPIC -shared -o "$1/libqt.so" "$top_srcdir/tests/dynlib/lib.c" || exit 99
    gcc -O2 -o "$1/main" "$top_srcdir/tests/dynlib/main.c" -L"$1" -lqt -Wl,-rpath,'$ORIGIN' ||
        exit 99
}

# dyn_serve DIR: DIR/main (dyn_build_qtlib) serving requests from the FIFO DIR/in on
# descriptor 7, its output in DIR/serve.out, its pid in $tpid; exit 1 when never ready.
# dyn_req N: it does the work of N and answers (a failure when it does not).
dyn_serve() {
    mkfifo "$1/in" || exit 99
    "$1/main" serve <"$1/in" >"$1/serve.out" 2>&1 &
    tpid=$!
    exec 7>"$1/in"
    serve_dir=$1 nreq=0
    wait_lines "$1/serve.out" '^ready' 1 || { bad "serve: never ready"; exit 1; }
}
dyn_req() {
    echo "$1" >&7
    nreq=$((nreq + 1))
    wait_lines "$serve_dir/serve.out" '^done' $nreq || bad "serve: no answer to request $nreq"
}

# expect_eq WHAT GOT WANT: ok when GOT is WANT, else bad.
expect_eq() {
    if [ "$2" = "$3" ]; then ok "$1 = $3"; else bad "$1: got '$2', want '$3'"; fi
}

# dyn_skip_untraced ERRFILE: exit 77 when ERRFILE (dyn's stderr of a probe run) says
# that ptrace is not allowed here.
dyn_skip_untraced() {
    if grep -q -i -e 'ptrace' -e 'not permitted' "$1"; then
        echo "SKIP: dyn cannot trace here: $(head -n 1 "$1")"
        exit 77
    fi
}

# The executable mappings of the files of process $1 (the program, libc, the loader), as
# a hash of their bytes.
text_of() {
    python3 - "$1" <<'PY'
import hashlib, sys
pid = sys.argv[1]
h = hashlib.sha256()
with open('/proc/%s/maps' % pid) as maps, open('/proc/%s/mem' % pid, 'rb') as mem:
    for line in maps:
        f = line.split()
        if len(f) >= 6 and f[1][2] == 'x' and f[5].startswith('/'):
            lo, hi = (int(x, 16) for x in f[0].split('-'))
            mem.seek(lo)
            h.update(mem.read(hi - lo))
print(h.hexdigest())
PY
}

# wait_untraced PID: until no thread of PID is traced (a killed tracer's threads may
# still be exiting when its first thread shows as a zombie), at most 10 s.
wait_untraced() {
    _i=0
    while [ $_i -lt 200 ] && grep -qs '^TracerPid:[[:space:]]*[1-9]' /proc/"$1"/task/*/status; do
        sleep 0.05
        _i=$((_i + 1))
    done
}

# maps_of PID: PID's mappings, "range perms path" a line, but for the one page dyn's
# loader guard leaves after a session on purpose (doc/dyn.1: its trampoline retired, all
# `ret`s, an anonymous r-x page: a thread may still return into it from a signal handler).
maps_of() {
    awk '{ print $1, $2, $6 }' /proc/"$1"/maps | while read -r _r _p _f; do
        _lo=$((0x${_r%-*}))
        _hi=$((0x${_r#*-}))
        if [ "$_p" = r-xp ] && [ -z "$_f" ] && [ $((_hi - _lo)) = 4096 ] &&
            [ "$(dd if=/proc/"$1"/mem bs=88 count=1 iflag=skip_bytes skip=$_lo 2>/dev/null |
                od -An -v -tx1 | tr -d ' \n')" = "$(printf 'c3%.0s' $(seq 88))" ]; then
            continue
        fi
        echo "$_r $_p $_f"
    done
}

# dyn_wait_start: "$P wait $dir/stop" started (tpid), its code and mappings noted
# (for dyn_detached_clean and dyn_killed_clean).
dyn_wait_start() {
    rm -f "$dir/stop"
    "$P" wait "$dir/stop" >"$dir/wait.out" &
    tpid=$!
    sleep 0.3
    _before=$(text_of $tpid)
    _maps=$(maps_of $tpid)
}

# dyn_detached_clean A ERR: after a dyn detached from $tpid, its code and mappings are
# as dyn_wait_start found them (fails are counted as "(A)", with dyn's stderr ERR).
dyn_detached_clean() {
    [ "$_before" = "$(text_of $tpid)" ] || bad "($1) the code differs after the detach"
    _now=$(maps_of $tpid)
    [ "$_maps" = "$_now" ] ||
        bad "($1) mappings left after the detach: $(echo "$_maps" >"$dir/maps.a"; echo "$_now" >"$dir/maps.b"; diff "$dir/maps.a" "$dir/maps.b" | tr '\n' ';') $(cat "$2")"
}

# dyn_wait_for FILE WORD: until WORD is in FILE (a dyn's stderr, written as it goes), at
# most 20 s.
dyn_wait_for() {
    _i=0
    until grep -q "$2" "$1" 2>/dev/null; do
        _i=$((_i + 1))
        [ $_i -gt 400 ] && break
        sleep 0.05
    done
}

# dyn_killed_clean A: kill -9 the dyn $dpid (attached to $tpid, its points in): the
# program lives on and `dyn clean` puts its code back as dyn_wait_start found it.
dyn_killed_clean() {
    sleep 0.2
    kill -9 $dpid
    wait $dpid 2>/dev/null
    dpid=
    sleep 0.5
    kill -0 $tpid 2>/dev/null || bad "($1) the program died with dyn"
    "$DYN" clean $tpid >"$dir/clean.out" 2>"$dir/clean.err" ||
        bad "($1) dyn clean: $(cat "$dir/clean.err")"
    [ "$_before" = "$(text_of $tpid)" ] || bad "($1) the code differs after dyn clean"
}

# dyn_wait_end: the program of dyn_wait_start told to stop; it ends with "ok same" and
# status 0.
dyn_wait_end() {
    touch "$dir/stop"
    wait $tpid
    _trc=$?
    tpid=
    [ $_trc -eq 0 ] || bad "program exit status $_trc"
    [ "$(cat "$dir/wait.out")" = "ok same" ] || bad "program: $(cat "$dir/wait.out")"
}

# dyn_leaves_no_trace A B NPROCS ROW: "$P wait $dir/stop" started; dyn attached with
# $WHAT for 0.5 s (NPROCS procedures instrumented, none refused, ROW counted: its count
# first, then its time with --time) and detached: its code and mappings as they were
# (check A; dyn's output left in $dir/att.out and att.err); attached again and killed
# with -9: the program lives on and `dyn clean` puts its code back (check B); then the
# program ends with "ok same" and status 0. Sets tpid and dpid while they run (for the
# caller's trap).
dyn_leaves_no_trace() {
    dyn_wait_start
    # A point refused because a thread was inside its bytes at every moment dyn tried
    # (a tight loop through them) says "try again": as a user would, up to 3 times.
    _t=0
    while :; do
        # shellcheck disable=SC2086
        "$DYN" attach $tpid $WHAT --duration 0.5 >"$dir/att.out" 2>"$dir/att.err" ||
            bad "($1) attach: $(cat "$dir/att.err")"
        grep -q "$3 procedures instrumented, 0 refused" "$dir/att.err" ||
            ! grep -q "try again" "$dir/att.err" || [ $_t -ge 3 ] || { _t=$((_t + 1)); continue; }
        break
    done
    grep -q "$3 procedures instrumented, 0 refused" "$dir/att.err" ||
        bad "($1) refused: $(cat "$dir/att.err")"
    grep -E -q "^ +[1-9][0-9]*( +[0-9.]+)? +$4\$" "$dir/att.out" ||
        bad "($1) counts: $(cat "$dir/att.out")"
    dyn_detached_clean "$1" "$dir/att.err"
    _t=0
    while :; do
        # shellcheck disable=SC2086
        "$DYN" attach $tpid $WHAT >"$dir/kill.out" 2>"$dir/kill.err" &
        dpid=$!
        dyn_wait_for "$dir/kill.err" instrumented
        if ! grep -q "$3 procedures instrumented" "$dir/kill.err" && grep -q "try again" "$dir/kill.err" &&
            [ $_t -lt 3 ]; then
            kill -TERM $dpid # (dyn detaches: the code as it was)
            wait $dpid 2>/dev/null
            _t=$((_t + 1))
            continue
        fi
        break
    done
    grep -q "$3 procedures instrumented" "$dir/kill.err" || bad "($2) attach: $(cat "$dir/kill.err")"
    dyn_killed_clean "$2"
    dyn_wait_end
}

# dyn_timed_exactly PROC N MS: "$P N MS" (N calls of PROC, one in five sleeping MS ms)
# run under dyn with $WHAT (one procedure, none refused): PROC's row has N calls and a
# time within [N/5 * MS, twice that] ms; fails are counted as "(a)".
dyn_timed_exactly() {
    "$DYN" run -v $WHAT -- "$P" "$2" "$3" >"$dir/run.out" 2>"$dir/run.err"
    grep -q "^ok n=$2" "$dir/run.out" || bad "(a) results: $(cat "$dir/run.out" "$dir/run.err")"
    grep -q '1 procedures instrumented, 0 refused' "$dir/run.err" ||
        bad "(a) refused: $(cat "$dir/run.err")"
    awk -v p="$1" -v n="$2" -v ms="$3" '
        $NF == p { seen++
            if ($1 != n) { print "FAIL (a) calls: " $0; bad = 1 }
            if ($2 < n / 5 * ms || $2 > n / 5 * ms * 2) { print "FAIL (a) time: " $0; bad = 1 } }
        END { if (seen != 1) { print "FAIL (a) row missing"; bad = 1 }; exit bad }' \
        "$dir/run.out" || fails=$((fails + 1))
}

# The lines of file $1 that match pattern $2: 0 when the file is not there (yet).
count_lines() {
    _n=$(grep -c -- "$2" "$1" 2>/dev/null)
    echo "${_n:-0}"
}

# Wait until file $1 has $3 lines matching $2 (what a process in the background writes),
# $4 seconds at most (10); false when they did not come.
wait_lines() {
    _i=0
    _max=$(( ${4:-10} * 20 ))
    while [ "$(count_lines "$1" "$2")" -lt "$3" ] && [ $_i -lt $_max ]; do
        sleep 0.05
        _i=$((_i + 1))
    done
    [ "$(count_lines "$1" "$2")" -ge "$3" ]
}
