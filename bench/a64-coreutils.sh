#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# coreutils' own test suite over Debian's arm64 coreutils, original and rewritten with
# --driver=none and --driver=qp, every program run under qemu-aarch64 (issue 34;
# `make corpus`, not `make check`).
#
#   bench/a64-coreutils.sh DIR QPT_REWRITE [VARIANT...]
#
# VARIANTs are run in order, default "original none qp"; "original" is always run first
# (its results are kept and reused: delete DIR/.stamp-original-all to redo it).
#
# 1. fetch   through a private apt state in DIR/apt (the machine's dpkg architectures
#            and lists are not touched): bookworm's coreutils source package, and the
#            arm64 .debs of coreutils and of the libraries it needs (libc6 included),
#            unpacked into DIR/pkg (the programs) and DIR/sys (the libraries only).
# 2. build   the source natively (./configure && make): the test suite's harness, its
#            helper programs (getlimits...) and the x86-64 programs that Debian's arm64
#            package does not have.
# 3. wrap    every program of src/ that the arm64 package has (ginstall is its install)
#            is replaced by bench/a64-wrap.c, an x86-64 stand-in that runs the arm64
#            program under qemu-aarch64 with the same argv[0] (see that file); with the
#            native program's timestamp, so that make does not rebuild it.  The arm64
#            programs of a variant are in DIR/a64/VARIANT; src/.a64 points to the one
#            in use.
# 4. check   for each variant, `make check SUBDIRS=.` (coreutils' tests; gnulib's unit
#            tests run no program of src/ and are left out) -> DIR/results-VARIANT.txt,
#            the logs of the tests that did not pass in DIR/logs-VARIANT/.
# 5. compare each rewritten variant with the original per test; a test that passes with
#            the original and not rewritten is run again alone with both and reported
#            "confirmed" or "flaky".  For qp: the profiles written and any "qp:" line
#            of the runtime in the tests' logs.
# 6. restore the native programs (also on error or interrupt).
#
# One run at a time per DIR (a lock, DIR/.lock).
#
# Environment: JOBS (make -j, default 2); TEST_TIMEOUT (seconds per test script,
# default 1800, 0 = none); CHECK_TIMEOUT (seconds per `make check`, default 21600);
# TEST_USER (when root, the build and tests run as this user, default nobody, as in
# bench/coreutils-check.sh); A64_TESTS (a list of tests to run instead of all of them,
# e.g. "tests/misc/cat-proc.sh tests/ls/abmon-align.sh"); A64_PARALLEL=1 (the sets' runs
# at the same time - the original too when it is not reused - each in an overlay of
# the tree: needs root; tail takes
# overlayfs for a remote file system and polls, so tail-2/inotify-dir-recreate and
# inotify-rotate-resources fail there, and pass when run again alone in the tree).
#
# Exit status: 0 no confirmed regression, 1 confirmed regressions, 2 setup failure,
# 77 skipped (no qemu-aarch64 or aarch64 gcc, no network).
set -u
export LC_ALL=C
[ $# -ge 2 ] || { echo "usage: $0 DIR QPT_REWRITE [VARIANT...]" >&2; exit 2; }
DIR=$1
QPT=$2
shift 2
VARIANTS=("$@")
[ ${#VARIANTS[@]} -gt 0 ] || VARIANTS=(original none qp)
JOBS=${JOBS:-2}
TEST_TIMEOUT=${TEST_TIMEOUT:-1800}
CHECK_TIMEOUT=${CHECK_TIMEOUT:-21600}
HERE=$(cd "$(dirname "$0")" && pwd)
case $QPT in /*) ;; *) QPT=$PWD/$QPT ;; esac
[ -x "$QPT" ] || { echo "$0: $QPT: not executable" >&2; exit 2; }
command -v qemu-aarch64 >/dev/null || { echo "a64-coreutils: no qemu-aarch64: skipped"; exit 77; }
mkdir -p "$DIR" && DIR=$(cd "$DIR" && pwd) || exit 2
die() { echo "a64-coreutils: $*" >&2; exit 2; }
# One run per DIR: a second one would swap the programs (DIR/a64/VARIANT rebuilt, the
# native ones restored into src/) under the first one's tests, which then fail (27 of
# the first full original run did so). The inner runs of A64_PARALLEL belong to the run
# that holds the lock.
if [ -z "${A64_INNER:-}" ]; then
    exec 9>>"$DIR/.lock" && flock -n 9 || die "$DIR: another a64-coreutils.sh runs on it"
fi
say() { echo "a64-coreutils: $(date +%T) $*"; }
t_start=$(date +%s)

# ---- 1. fetch ---------------------------------------------------------------------
APT=(-o "Dir::Etc::SourceList=$DIR/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$DIR/apt/lists" -o "Dir::Cache=$DIR/apt/cache"
     -o APT::Architecture=arm64 -o APT::Architectures::=arm64
     -o "Dir::State::status=$DIR/apt/status")
DEBS="coreutils libc6 libgcc-s1 libacl1 libattr1 libgmp10 libpcre2-8-0 libselinux1"
if [ ! -e "$DIR/.stamp-fetched" ]; then
    say "fetching coreutils' source and the arm64 packages"
    mkdir -p "$DIR/apt/lists/partial" "$DIR/apt/cache/archives/partial" "$DIR/debs"
    touch "$DIR/apt/status"
    k=signed-by=/usr/share/keyrings/debian-archive-keyring.gpg
    printf '%s\n' "deb [arch=arm64 $k] http://deb.debian.org/debian bookworm main" \
        "deb-src [$k] http://deb.debian.org/debian bookworm main" >"$DIR/apt/sources.list"
    apt-get "${APT[@]}" -qq update >"$DIR/apt.log" 2>&1 ||
        { echo "a64-coreutils: apt-get update failed (see $DIR/apt.log): skipped"; exit 77; }
    # shellcheck disable=SC2086
    (cd "$DIR/debs" && apt-get "${APT[@]}" -qq download $DEBS) >>"$DIR/apt.log" 2>&1 ||
        { echo "a64-coreutils: apt-get download failed (see $DIR/apt.log): skipped"; exit 77; }
    (cd "$DIR" && apt-get "${APT[@]}" -qq source coreutils) >>"$DIR/apt.log" 2>&1 ||
        die "apt-get source coreutils failed (needs dpkg-dev; see $DIR/apt.log)"
    rm -rf "$DIR/pkg" "$DIR/sys"
    for d in "$DIR"/debs/*.deb; do
        case ${d##*/} in
        coreutils_*) dpkg-deb -x "$d" "$DIR/pkg" ;;
        *) dpkg-deb -x "$d" "$DIR/sys" ;;
        esac || die "cannot unpack $d"
    done
    # Only the libraries: nothing of /etc or /usr/share reaches the programs.
    rm -rf "$DIR/sys/etc" "$DIR/sys/usr/share"
    touch "$DIR/.stamp-fetched"
fi
SRC=$(ls -d "$DIR"/coreutils-*/ 2>/dev/null | head -n 1)
[ -n "$SRC" ] && [ -x "$SRC/configure" ] || die "no unpacked coreutils tree in $DIR"
SRC=${SRC%/}
VERSION=$(cd "$DIR" && ls coreutils_*.dsc 2>/dev/null | sed 's/coreutils_\(.*\)\.dsc/\1/' | head -n 1)
LDSO=$DIR/sys/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1
[ -f "$LDSO" ] || die "no arm64 ld.so in $DIR/sys"

# The build and the tests run as TEST_USER when we are root (configure refuses root;
# the root-only tests are then skipped as on a buildd).
RUNAS=()
if [ "$(id -u)" = 0 ] && [ "${TEST_USER:-nobody}" != root ]; then
    u=${TEST_USER:-nobody}
    uid=$(id -u "$u") && gid=$(id -g "$u") || die "no user $u"
    p=
    for d in $(echo "$PATH" | tr : ' '); do
        setpriv --reuid="$uid" --regid="$gid" --clear-groups test -x "$d" 2>/dev/null && p=$p${p:+:}$d
    done
    RUNAS=(setpriv --reuid="$uid" --regid="$gid" --clear-groups env PATH="$p")
    [ -z "${A64_INNER:-}" ] && chown -R "$uid:$gid" "$DIR"
fi
mkdir -p "$DIR/home"
[ ${#RUNAS[@]} -gt 0 ] && chown "$uid:$gid" "$DIR/home"

# ---- 2. build ---------------------------------------------------------------------
if [ ! -e "$DIR/.stamp-built" ]; then
    say "configure && make -j$JOBS in $SRC (the native harness)"
    (cd "$SRC" && "${RUNAS[@]}" env HOME="$DIR/home" sh -c "./configure --quiet && make -j$JOBS") \
        >"$DIR/build.log" 2>&1 </dev/null || die "build failed (see $DIR/build.log)"
    touch "$DIR/.stamp-built"
fi

# ---- 3. the arm64 program sets and the stand-ins ------------------------------------
# src/NAME -> the arm64 package's file for it, or nothing.
arm_of() {
    local n=$1 d
    [ "$n" = ginstall ] && n=install
    for d in bin usr/bin usr/sbin; do
        [ -f "$DIR/pkg/$d/$n" ] && { echo "$DIR/pkg/$d/$n"; return; }
    done
}
progs=() native_only=()
while IFS= read -r -d '' f; do
    case $f in *.so) continue ;; esac
    [ "$(head -c 4 "$f" | tr -d '\0' | tail -c 3)" = ELF ] || continue
    n=${f##*/}
    if [ -n "$(arm_of "$n")" ]; then progs+=("$n"); else native_only+=("$n"); fi
done < <(find "$SRC/src" -maxdepth 1 -type f -perm -u+x -print0 | sort -z)
[ ${#progs[@]} -gt 0 ] || die "no programs in $SRC/src"

WRAP=$DIR/a64-wrap

# make_set VARIANT: DIR/a64/VARIANT/NAME for every program, each with its ld.so link
# and libstdbuf.so beside (stdbuf looks for it beside /proc/self/exe first).
refused=()
make_set() {
    local v=$1 s=$DIR/a64/$1 n a
    rm -rf "$s" && mkdir -p "$s/.ld" || return 1
    cp "$DIR/pkg/usr/libexec/coreutils/libstdbuf.so" "$s/.ld/"
    : >"$s/rewrite.log"
    for n in "${progs[@]}"; do
        a=$(arm_of "$n")
        ln -f "$LDSO" "$s/.ld/$n" || return 1
        if [ "$v" = original ]; then
            cp -p "$a" "$s/$n"
        elif ! "$QPT" --driver="$v" "$a" -o "$s/$n" >>"$s/rewrite.log" 2>&1; then
            refused+=("$v: $n: $(tail -n 1 "$s/rewrite.log")")
            cp -p "$a" "$s/$n"
        fi
    done
    [ ${#RUNAS[@]} -gt 0 ] && chown -R "$uid:$gid" "$s"
    return 0
}

check_pid= inner_pids=()
stop_checks() { # the running `make check`s (their own process groups) and inner runs
    local p
    [ -n "$check_pid" ] && kill -TERM -- "-$check_pid" 2>/dev/null
    for p in "${inner_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    [ ${#inner_pids[@]} -gt 0 ] && wait
}
restore() {
    local n
    for n in "${progs[@]}"; do
        [ -f "$DIR/native-bin/$n" ] && cp -p "$DIR/native-bin/$n" "$SRC/src/$n"
    done
    rm -f "$SRC/src/.a64" "$SRC/src/.a64-sys"
}
make_keeps() { # `make all` must leave every stand-in as it is
    local n bad=()
    (cd "$SRC" && "${RUNAS[@]}" env HOME="$DIR/home" make -j"$JOBS" all </dev/null) \
        >"$DIR/make-all.log" 2>&1 || { echo "make all failed (see $DIR/make-all.log)"; return 1; }
    for n in "${progs[@]}"; do cmp -s "$SRC/src/$n" "$WRAP" || bad+=("$n"); done
    [ ${#bad[@]} -eq 0 ] || { echo "make all rebuilt: ${bad[*]}"; return 1; }
}
if [ -z "${A64_INNER:-}" ]; then
    gcc -O2 -static -o "$WRAP" "$HERE/a64-wrap.c" || die "cannot build $HERE/a64-wrap.c"
    rm -rf "$DIR/native-bin" && mkdir -p "$DIR/native-bin"
    trap 'stop_checks; restore; exit 130' INT TERM HUP
    trap 'stop_checks; restore' EXIT
    for n in "${progs[@]}"; do
        cp -p "$SRC/src/$n" "$DIR/native-bin/$n"
        cp "$WRAP" "$SRC/src/$n" && touch -r "$DIR/native-bin/$n" "$SRC/src/$n"
        [ ${#RUNAS[@]} -gt 0 ] && chown "$uid:$gid" "$SRC/src/$n"
    done
    ln -sfn "$DIR/sys" "$SRC/src/.a64-sys"
    make_keeps || die "the stand-ins do not survive make"
fi

# ---- 4. check -----------------------------------------------------------------------
tmo=()
if [ "$TEST_TIMEOUT" != 0 ]; then
    T="/usr/bin/timeout -k 30 $TEST_TIMEOUT"
    tmo=("SH_LOG_COMPILER=$T \$(SHELL)"
         "PL_LOG_COMPILER=$T \$(TESTSUITE_PERL) \$(TESTSUITE_PERL_OPTIONS)"
         "XPL_LOG_COMPILER=$T \$(TESTSUITE_PERL) -T \$(TESTSUITE_PERL_OPTIONS)")
fi
sel=()
[ -n "${A64_TESTS:-}" ] && sel=("TESTS=$A64_TESTS")

list_tests() {
    if [ -n "${A64_TESTS:-}" ]; then printf '%s\n' $A64_TESTS; return; fi
    (cd "$SRC" && "${RUNAS[@]}" make -s --no-print-directory -f Makefile -f - print-tests <<'EOF'
print-tests: ; @printf '%s\n' $(TESTS)
EOF
    ) | sed -n 's|^\./||; /./p'
}
log_base() { case $1 in *.sh | *.pl | *.xpl) echo "${1%.*}" ;; *) echo "$1" ;; esac; }

collect() { # VARIANT [RUN] -> DIR/results-RUN.txt ("TEST RESULT"), DIR/logs-RUN/
    local v=$1 t b r n=${2:-$1} ql=$DIR/qp-lines.txt
    [ "$n" = "$v" ] || ql=$DIR/qp-lines-$n.txt
    rm -rf "$DIR/logs-$n" && mkdir -p "$DIR/logs-$n"
    [ "$v" = qp ] && : >"$ql"
    list_tests | sort -u | while read -r t; do
        b=$(log_base "$t")
        r=NONE
        [ -f "$SRC/$b.trs" ] && r=$(sed -n 's/^:test-result: //p' "$SRC/$b.trs" | head -n 1)
        [ -n "$r" ] || r=NONE
        echo "$t $r"
        if [ "$r" != PASS ] && [ -f "$SRC/$b.log" ]; then
            mkdir -p "$DIR/logs-$n/${b%/*}" && cp "$SRC/$b.log" "$DIR/logs-$n/$b.log"
        fi
        # The runtime's own lines, in any test's log.
        [ "$v" = qp ] && [ -f "$SRC/$b.log" ] && grep -a -m 3 '^qp: ' "$SRC/$b.log" |
            sed "s|^|    $t: |" >>"$ql"
    done >"$DIR/results-$n.txt"
    cp "$SRC/tests/test-suite.log" "$DIR/logs-$n/tests-test-suite.log" 2>/dev/null
}

use_set() { ln -sfn "$DIR/a64/$1" "$SRC/src/.a64"; }

run_check() { # VARIANT [RUN: the name of its results, default VARIANT]
    local v=$1 n=${2:-$1} t0 rc
    find "$SRC/tests" -name '*.trs' -print | sed 's/\.trs$//' |
        while read -r b; do rm -f "$b.trs" "$b.log"; done
    rm -f "$SRC/tests/test-suite.log"
    use_set "$v"
    say "make check ($v programs)"
    t0=$(date +%s)
    # timeout puts the check in a process group of its own: killed by the traps too.
    (cd "$SRC" && exec timeout -k 60 "$CHECK_TIMEOUT" "${RUNAS[@]}" env HOME="$DIR/home" \
        make -k -j"$JOBS" check SUBDIRS=. VERBOSE=no "${sel[@]}" "${tmo[@]}" </dev/null) \
        >"$DIR/check-$n.log" 2>&1 &
    check_pid=$!
    wait $check_pid
    rc=$?
    check_pid=
    echo "$n $(($(date +%s) - t0))" >>"$DIR/times.txt"
    say "make check ($n) exit $rc, $(($(date +%s) - t0)) s"
    collect "$v" "$n"
}

rerun() { # TEST VARIANT -> the test's result when run alone with VARIANT's programs
    local t=$1 b
    b=$(log_base "$t")
    use_set "$2"
    rm -f "$SRC/$b.trs" "$SRC/$b.log"
    (cd "$SRC" && "${RUNAS[@]}" env HOME="$DIR/home" \
        make -k check TESTS="$t" SUBDIRS=. VERBOSE=no "${tmo[@]}" </dev/null) >/dev/null 2>&1
    sed -n 's/^:test-result: //p' "$SRC/$b.trs" 2>/dev/null | head -n 1 | grep . || echo NONE
}

totals() {
    awk '{ n++; c[$2]++ }
        END { printf "%4d tests: %3d pass, %2d fail, %3d skip, %d xfail, %d error, %d no result\n",
              n, c["PASS"], c["FAIL"], c["SKIP"], c["XFAIL"], c["ERROR"], c["NONE"] }' "$1"
}

# A64_PARALLEL=1: each rewritten set's `make check` runs at the same time as the
# others, in a private mount namespace where an overlay over the tree (upper layer in
# DIR/ovl-VARIANT) keeps its logs apart; the same paths, so the tests and the stand-ins
# see nothing else. This script runs itself there with A64_INNER=VARIANT. By hand, a
# set's tests can be shared between runs of different A64_RUN names (each with its
# A64_TESTS; results in DIR/results-RUN.txt), e.g. to use a second core for one set.
if [ -n "${A64_INNER:-}" ]; then
    run=${A64_RUN:-$A64_INNER}
    o=$DIR/ovl-$run
    rm -rf "$o" && mkdir -p "$o/upper" "$o/work" || exit 2
    chown --reference="$SRC" "$o/upper" && chmod --reference="$SRC" "$o/upper" || exit 2
    mount -t overlay "a64-$run" -o "lowerdir=$SRC,upperdir=$o/upper,workdir=$o/work" \
        "$SRC" || die "cannot mount an overlay on $SRC (A64_PARALLEL=0 runs one at a time)"
    trap 'stop_checks; exit 130' INT TERM HUP
    cd "$SRC" && run_check "$A64_INNER" "$run"
    exit 0
fi
cd "$SRC" || exit 2
make_set original || die "cannot make the original set"
# The original run is reused when it had every test (.stamp-original-all), or every
# test of A64_TESTS.
have_original() {
    [ -s "$DIR/results-original.txt" ] || return 1
    [ -z "${A64_TESTS:-}" ] && { [ -e "$DIR/.stamp-original-all" ]; return; }
    local t
    for t in $A64_TESTS; do grep -q "^$t " "$DIR/results-original.txt" || return 1; done
}
if have_original; then
    say "reusing $DIR/results-original.txt"
else
    rm -f "$DIR/.stamp-original-all" "$DIR/results-original.txt"
    # With A64_PARALLEL=1 the original runs beside the rewritten sets, in its own
    # overlay: the same load for all three (and the same tail/overlayfs failures).
    if [ "${A64_PARALLEL:-0}" = 1 ]; then
        parallel_sets=(original)
    else
        run_check original
        [ -z "${A64_TESTS:-}" ] && touch "$DIR/.stamp-original-all"
    fi
fi
report=()
confirmed=0
[ -n "${parallel_sets+x}" ] || parallel_sets=()
for v in "${VARIANTS[@]}"; do
    [ "$v" = original ] && continue
    t0=$(date +%s)
    make_set "$v" || die "cannot make the $v set"
    say "rewrote ${#progs[@]} programs with --driver=$v in $(($(date +%s) - t0)) s"
    [ "${A64_PARALLEL:-0}" = 1 ] || run_check "$v"
done
if [ "${A64_PARALLEL:-0}" = 1 ]; then
    for v in "${VARIANTS[@]}"; do
        [ "$v" = original ] || parallel_sets+=("$v")
    done
    for v in "${parallel_sets[@]}"; do
        say "make check ($v programs), in an overlay of the tree"
        A64_INNER=$v unshare -m bash "$0" "$DIR" "$QPT" >"$DIR/inner-$v.log" 2>&1 &
        inner_pids+=($!)
    done
    wait
    inner_pids=()
    [ "${parallel_sets[0]:-}" = original ] && [ -z "${A64_TESTS:-}" ] &&
        [ -s "$DIR/results-original.txt" ] && touch "$DIR/.stamp-original-all"
fi
for v in "${VARIANTS[@]}"; do
    [ "$v" = original ] && continue
    [ -f "$DIR/results-$v.txt" ] || { report+=("$v: no results (see $DIR/inner-$v.log)"); continue; }
    while read -r t r1 r2; do
        [ "$r1" = "$r2" ] && continue
        if [ "$r1" = PASS ]; then
            a=$(rerun "$t" "$v")
            b=$(rerun "$t" original)
            if [ "$a" != PASS ] && [ "$b" = PASS ]; then
                verdict=confirmed confirmed=$((confirmed + 1))
            else
                verdict="flaky (alone: $v $a, original $b)"
            fi
            report+=("$v: $t: original PASS, $v $r2; $verdict")
        else
            report+=("$v: $t: original $r1, $v $r2")
        fi
    done < <(join "$DIR/results-original.txt" "$DIR/results-$v.txt")
done

# ---- 6. restore and report ----------------------------------------------------------
restore
trap - EXIT INT TERM HUP

echo
echo "a64-coreutils: coreutils $VERSION (Debian arm64), ${#progs[@]} programs under" \
    "qemu-aarch64; native (not in the arm64 package): ${native_only[*]:-none}"
for x in "${refused[@]}"; do echo "  refused (run unrewritten): $x"; done
vs=(original)
for v in "${VARIANTS[@]}"; do [ "$v" = original ] || vs+=("$v"); done
for v in "${vs[@]}"; do
    [ -f "$DIR/results-$v.txt" ] || continue
    s=$(awk -v v="$v" '$1 == v { print $2 }' "$DIR/times.txt" 2>/dev/null | tail -n 1)
    printf '  %-9s %s (%s s)\n' "$v:" "$(totals "$DIR/results-$v.txt")" "${s:-?}"
done
echo "  differences from the original: ${#report[@]}, confirmed regressions: $confirmed"
for x in "${report[@]}"; do echo "    $x"; done
if [ -d "$DIR/a64/qp" ]; then
    echo "  qp: $(ls "$DIR"/a64/qp/.ld/*.qp 2>/dev/null | wc -l) programs wrote profiles" \
        "($DIR/a64/qp/.ld/NAME.qp)"
fi
if [ -s "$DIR/qp-lines.txt" ]; then
    echo "  qp runtime lines in the tests' logs:"
    cat "$DIR/qp-lines.txt"
fi
echo "  results: $DIR/results-*.txt, failing logs in $DIR/logs-*/"
echo "  wall time: $(($(date +%s) - t_start)) s"
[ $confirmed -eq 0 ]
