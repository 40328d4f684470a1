#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# coreutils' own test suite over rewritten coreutils (`make corpus`, not `make check`).
#
#   bench/coreutils-check.sh DIR QPT_REWRITE
#
# 1. fetch   Debian bookworm's coreutils source package with `apt-get source` through a
#            private deb-src list (DIR/apt; no root needed) and unpack it in DIR.
# 2. build   ./configure && make -j$JOBS in the unpacked tree.  The optional libraries of
#            Debian's build (acl, attr, selinux) are installed with apt-get when missing
#            and root (or password-less sudo) is available; otherwise configure simply
#            builds without them.
# 3. check   `make check` with the original programs; every test's result (its .trs
#            file) is kept in DIR/results-original.txt, the logs of the tests that did
#            not pass (and the test-suite.log files) in DIR/logs-original/.
# 4. rewrite every ELF executable of src/ with `QPT_REWRITE --driver=none`; the
#            originals go to DIR/orig-bin/, the rewritten ones take their place with the
#            original's timestamp so that make does not relink them.  Checked by a real
#            `make all` before the run and by cmp after it (make -q cannot tell: automake's
#            lib/config.h <- lib/stamp-h1 rule always looks out of date to it, although
#            its recipe changes nothing).
# 5. check   `make check` again -> DIR/results-rewritten.txt, DIR/logs-rewritten/.
# 6. compare per test.  A regression is a test that passes with the original programs
#            and does not with the rewritten ones.  Each regression is run again alone,
#            with the rewritten and then with the original programs, and reported as
#            "confirmed" (fails again rewritten, passes again original) or "flaky"; a
#            SKIP shows the test's reason.
# 7. restore the original programs (also on error or interrupt).
#
# Stages 1-3 are skipped when their result is already in DIR (delete DIR/.stamp-* or
# DIR/results-original.txt to redo them), so a second run with a new qpt-rewrite costs
# one `make check`.
#
# Environment: JOBS (default 2) for make -j; TEST_TIMEOUT (seconds per test script,
# default 1200, 0 = none; a test that runs longer fails with status 124);
# CHECK_TIMEOUT (seconds per `make check`, default 14400); TEST_USER (when run as root,
# the build and the tests run as this user, default nobody: configure refuses root, and
# the root-only tests that mount and chown are then skipped as on a buildd; PATH loses
# the directories that user cannot search).
#
# Exit status: 0 no confirmed regression, 1 confirmed regressions (or a rewritten program
# was rebuilt behind our back), 2 setup failure.
set -u
export LC_ALL=C
[ $# -eq 2 ] || { echo "usage: $0 DIR QPT_REWRITE" >&2; exit 2; }
DIR=$1
QPT=$2
JOBS=${JOBS:-2}
TEST_TIMEOUT=${TEST_TIMEOUT:-1200}
CHECK_TIMEOUT=${CHECK_TIMEOUT:-14400}
case $QPT in /*) ;; *) QPT=$PWD/$QPT ;; esac
[ -x "$QPT" ] || { echo "$0: $QPT: not executable" >&2; exit 2; }
mkdir -p "$DIR" && DIR=$(cd "$DIR" && pwd) || exit 2
die() { echo "coreutils-check: $*" >&2; exit 2; }
say() { echo "coreutils-check: $(date +%T) $*"; }
t_start=$(date +%s)

# ---- 1. fetch ---------------------------------------------------------------------
APT_OPTS=(-o "Dir::Etc::SourceList=$DIR/apt/deb-src.sources" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$DIR/apt/lists" -o "Dir::Cache=$DIR/apt/cache")
if [ ! -e "$DIR/.stamp-fetched" ]; then
    say "fetching the coreutils source package"
    mkdir -p "$DIR/apt/lists/partial" "$DIR/apt/cache/archives/partial"
    # deb822 format: apt wants the .sources extension.
    cat >"$DIR/apt/deb-src.sources" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt-get "${APT_OPTS[@]}" update >"$DIR/apt.log" 2>&1 || die "apt-get update failed (see $DIR/apt.log)"
    (cd "$DIR" && apt-get "${APT_OPTS[@]}" source coreutils) >>"$DIR/apt.log" 2>&1 ||
        die "apt-get source coreutils failed (needs dpkg-dev; see $DIR/apt.log)"
    touch "$DIR/.stamp-fetched"
fi
SRC=$(ls -d "$DIR"/coreutils-*/ 2>/dev/null | head -n 1)
[ -n "$SRC" ] && [ -x "$SRC/configure" ] || die "no unpacked coreutils tree in $DIR"
SRC=${SRC%/}
VERSION=$(cd "$DIR" && ls coreutils_*.dsc 2>/dev/null | sed 's/coreutils_\(.*\)\.dsc/\1/' | head -n 1)

# The build and the tests run as TEST_USER when we are root (see the head comment;
# configure refuses to run as root).
RUNAS=()
if [ "$(id -u)" = 0 ] && [ "${TEST_USER:-nobody}" != root ]; then
    u=${TEST_USER:-nobody}
    uid=$(id -u "$u") && gid=$(id -g "$u") || die "no user $u"
    # PATH without the directories that user cannot search (root's ~/.local/bin...):
    # execvp would fail with EACCES there, and env-S.pl expects ENOENT.
    p=
    for d in $(echo "$PATH" | tr : ' '); do
        setpriv --reuid="$uid" --regid="$gid" --clear-groups test -x "$d" 2>/dev/null && p=$p${p:+:}$d
    done
    RUNAS=(setpriv --reuid="$uid" --regid="$gid" --clear-groups env PATH="$p")
    chown -R "$uid:$gid" "$DIR"
fi
mkdir -p "$DIR/home"
[ ${#RUNAS[@]} -gt 0 ] && chown "$uid:$gid" "$DIR/home"

# ---- 2. build ---------------------------------------------------------------------
if [ ! -e "$DIR/.stamp-built" ]; then
    deps="libacl1-dev libattr1-dev libselinux1-dev libgmp-dev"
    missing=$(for p in $deps; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
    if [ -n "$missing" ]; then
        if [ "$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=none; fi
        if [ "$SUDO" != none ]; then
            say "installing" $missing
            DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends \
                $missing >>"$DIR/apt.log" 2>&1 || say "could not install them; building without"
        else
            say "not installed (no root): $(echo $missing); configure builds without them"
        fi
    fi
    say "configure && make -j$JOBS in $SRC"
    (cd "$SRC" && "${RUNAS[@]}" env HOME="$DIR/home" sh -c "./configure --quiet && make -j$JOBS") \
        >"$DIR/build.log" 2>&1 </dev/null ||
        die "build failed (see $DIR/build.log)"
    touch "$DIR/.stamp-built"
fi

# The per-test timeout, as make arguments (/usr/bin/timeout: the tests put src/ first
# in PATH).
tmo=()
if [ "$TEST_TIMEOUT" != 0 ]; then
    T="/usr/bin/timeout -k 30 $TEST_TIMEOUT"
    tmo=("SH_LOG_COMPILER=$T \$(SHELL)"
         "PL_LOG_COMPILER=$T \$(TESTSUITE_PERL) \$(TESTSUITE_PERL_OPTIONS)"
         "XPL_LOG_COMPILER=$T \$(TESTSUITE_PERL) -T \$(TESTSUITE_PERL_OPTIONS)")
fi

# One `make check`; NAME is original or rewritten.  Every test's result is written to
# DIR/results-NAME.txt as "TEST RESULT" (TEST relative to the tree, RESULT the
# :test-result: of its .trs file, or NONE when the test left no .trs file).
run_check() {
    local name=$1 t0 rc
    # Forget the previous run's results so that a test that did not run cannot count.
    find "$SRC/tests" "$SRC/gnulib-tests" -name '*.trs' -print | sed 's/\.trs$//' |
        while read -r b; do rm -f "$b.trs" "$b.log"; done
    rm -f "$SRC/tests/test-suite.log" "$SRC/gnulib-tests/test-suite.log"
    say "make check ($name programs)"
    t0=$(date +%s)
    (cd "$SRC" && timeout -k 60 "$CHECK_TIMEOUT" "${RUNAS[@]}" env HOME="$DIR/home" \
        make -k -j"$JOBS" check VERBOSE=no "${tmo[@]}" </dev/null) >"$DIR/check-$name.log" 2>&1
    rc=$?
    say "make check ($name) exit $rc, $(($(date +%s) - t0)) s"
    collect "$name"
}

# All tests of both suites, from the lists make knows (so that a test that left no .trs
# file shows up as NONE).
list_tests() {
    (cd "$SRC" && "${RUNAS[@]}" make -s --no-print-directory -f Makefile -f - print-tests <<'EOF'
print-tests: ; @printf '%s\n' $(TESTS)
EOF
    ) | sed -n 's|^\./||; /./p'
    (cd "$SRC/gnulib-tests" && "${RUNAS[@]}" make -s --no-print-directory -f Makefile -f - print-tests <<'EOF'
print-tests: ; @printf '%s\n' $(TESTS)
EOF
    ) | sed -n 's|^\./||; /./s|^|gnulib-tests/|p'
}

# TEST -> its .log/.trs name without the suffix (the extensions of TEST_EXTENSIONS are
# dropped: .sh .pl .xpl in tests/, none in gnulib-tests/).
log_base() {
    case $1 in
    gnulib-tests/*) echo "$1" ;;
    *.sh | *.pl | *.xpl) echo "${1%.*}" ;;
    *) echo "$1" ;;
    esac
}

collect() {
    local name=$1 t b r
    rm -rf "$DIR/logs-$name" && mkdir -p "$DIR/logs-$name"
    list_tests | sort -u | while read -r t; do
        b=$(log_base "$t")
        if [ -f "$SRC/$b.trs" ]; then
            r=$(sed -n 's/^:test-result: //p' "$SRC/$b.trs" | head -n 1)
            [ -n "$r" ] || r=NONE
        else
            r=NONE
        fi
        echo "$t $r"
        if [ "$r" != PASS ] && [ -f "$SRC/$b.log" ]; then
            mkdir -p "$DIR/logs-$name/${b%/*}" && cp "$SRC/$b.log" "$DIR/logs-$name/$b.log"
        fi
    done >"$DIR/results-$name.txt"
    cp "$SRC/tests/test-suite.log" "$DIR/logs-$name/tests-test-suite.log" 2>/dev/null
    cp "$SRC/gnulib-tests/test-suite.log" "$DIR/logs-$name/gnulib-tests-test-suite.log" 2>/dev/null
}

totals() { # FILE PREFIX: "N tests: P pass, F fail, S skip, ..."
    awk -v pre="$2" '
        (pre == "gnulib-tests/") != ($1 ~ /^gnulib-tests\//) { next }
        { n++; c[$2]++ }
        END { printf "%d tests: %d pass, %d fail, %d skip, %d xfail, %d xpass, %d error, %d no result\n",
              n, c["PASS"], c["FAIL"], c["SKIP"], c["XFAIL"], c["XPASS"], c["ERROR"], c["NONE"] }' "$1"
}

# ---- 3. original run --------------------------------------------------------------
cd "$SRC" || exit 2
if [ ! -s "$DIR/results-original.txt" ]; then
    run_check original
else
    say "reusing $DIR/results-original.txt"
fi

# The programs the build made: every ELF executable in src/ (not the shared library
# libstdbuf.so, which qpt-rewrite would refuse).
progs=()
while IFS= read -r -d '' f; do
    case $f in *.so) continue ;; esac
    [ "$(head -c 4 "$f" | tr -d '\0' | tail -c 3)" = ELF ] && progs+=("${f#"$SRC"/}")
done < <(find "$SRC/src" -maxdepth 1 -type f -perm -u+x -print0 | sort -z)
[ ${#progs[@]} -gt 0 ] || die "no programs in $SRC/src"

# `make all` must leave every program as it is: FROM is the directory with the expected
# copies (orig-bin or rewritten-bin).
make_keeps() {
    local from=$1 p bad=()
    (cd "$SRC" && "${RUNAS[@]}" env HOME="$DIR/home" make -j"$JOBS" all </dev/null) \
        >"$DIR/make-all.log" 2>&1 || { echo "make all failed (see $DIR/make-all.log)"; return 1; }
    for p in "${progs[@]}"; do cmp -s "$SRC/$p" "$from/$p" || bad+=("$p"); done
    [ ${#bad[@]} -eq 0 ] || { echo "make all rebuilt: ${bad[*]}"; return 1; }
}

# ---- 4. rewrite -------------------------------------------------------------------
restore() {
    local p
    for p in "${progs[@]}"; do
        [ -f "$DIR/orig-bin/$p" ] && cp -p "$DIR/orig-bin/$p" "$SRC/$p"
    done
}
rm -rf "$DIR/orig-bin" "$DIR/rewritten-bin"
mkdir -p "$DIR/orig-bin/src" "$DIR/rewritten-bin/src"
trap 'restore; exit 130' INT TERM HUP
trap 'restore' EXIT
nrew=0 refused=()
: >"$DIR/rewrite.log"
t0=$(date +%s)
for p in "${progs[@]}"; do
    cp -p "$SRC/$p" "$DIR/orig-bin/$p"
    if "$QPT" --driver=none "$DIR/orig-bin/$p" -o "$DIR/rewritten-bin/$p" >>"$DIR/rewrite.log" 2>&1; then
        touch -r "$DIR/orig-bin/$p" "$DIR/rewritten-bin/$p"
        nrew=$((nrew + 1))
    else
        refused+=("$p: $(tail -n 1 "$DIR/rewrite.log")")
        cp -p "$DIR/orig-bin/$p" "$DIR/rewritten-bin/$p"
    fi
done
t_rew=$(($(date +%s) - t0))
for p in "${progs[@]}"; do
    cp -p "$DIR/rewritten-bin/$p" "$SRC/$p"
    [ ${#RUNAS[@]} -gt 0 ] && chown "$uid:$gid" "$SRC/$p"
done
say "rewrote $nrew of ${#progs[@]} programs in $t_rew s (${#refused[@]} refused)"
make_keeps "$DIR/rewritten-bin" || die "the rewritten programs do not survive make"

# ---- 5. rewritten run -------------------------------------------------------------
run_check rewritten
rebuilt=()
for p in "${progs[@]}"; do
    cmp -s "$SRC/$p" "$DIR/rewritten-bin/$p" || rebuilt+=("$p")
done

# ---- 6. compare; rerun regressions alone ------------------------------------------
rerun() { # TEST -> its result when run alone
    local t=$1 dir=. tt=$1 b
    case $t in gnulib-tests/*) dir=gnulib-tests tt=${t#gnulib-tests/} ;; esac
    b=$(log_base "$t")
    rm -f "$SRC/$b.trs" "$SRC/$b.log"
    (cd "$SRC/$dir" && "${RUNAS[@]}" env HOME="$DIR/home" \
        make -k check TESTS="$tt" SUBDIRS=. VERBOSE=no "${tmo[@]}" </dev/null) >/dev/null 2>&1
    sed -n 's/^:test-result: //p' "$SRC/$b.trs" 2>/dev/null | head -n 1 | grep . || echo NONE
}
regress=() improved=() confirmed=0 why=
while read -r t r1 r2; do
    if [ "$r1" = PASS ] && [ "$r2" != PASS ]; then
        a=$(rerun "$t")
        for p in "${progs[@]}"; do cp -p "$DIR/orig-bin/$p" "$SRC/$p"; done
        b=$(rerun "$t")
        for p in "${progs[@]}"; do cp -p "$DIR/rewritten-bin/$p" "$SRC/$p"; done
        if [ "$a" != PASS ] && [ "$b" = PASS ]; then
            verdict=confirmed; confirmed=$((confirmed + 1))
        else
            verdict="flaky (alone: rewritten $a, original $b)"
        fi
        why=$(grep -a -m 1 'skipped test:' "$DIR/logs-rewritten/$(log_base "$t").log" 2>/dev/null |
            sed 's/^[^:]*: skipped test: */: /')
        regress+=("$t: original PASS, rewritten $r2${why}; $verdict")
    elif [ "$r1" != PASS ] && [ "$r2" = PASS ]; then
        improved+=("$t: original $r1, rewritten PASS")
    fi
done < <(join "$DIR/results-original.txt" "$DIR/results-rewritten.txt")

# ---- 7. restore and report --------------------------------------------------------
restore
trap - EXIT INT TERM HUP
make_keeps "$DIR/orig-bin" || echo "coreutils-check: warning: after restoring, make all changed programs"

echo
echo "coreutils-check: coreutils $VERSION, ${#progs[@]} programs built in src/:" \
    "$nrew rewritten, ${#refused[@]} refused ($t_rew s)"
for x in "${refused[@]}"; do echo "  refused: $x"; done
for s in original rewritten; do
    echo "  $s: coreutils tests: $(totals "$DIR/results-$s.txt" "")"
    echo "  $s: gnulib tests:    $(totals "$DIR/results-$s.txt" gnulib-tests/)"
done
echo "  regressions (PASS with the original, not with the rewritten): ${#regress[@]}, confirmed alone: $confirmed"
for x in "${regress[@]}"; do echo "    $x"; done
if [ ${#improved[@]} -gt 0 ]; then
    echo "  passed only with the rewritten programs: ${#improved[@]}"
    for x in "${improved[@]}"; do echo "    $x"; done
fi
if [ ${#rebuilt[@]} -gt 0 ]; then
    echo "  ERROR: make replaced rewritten programs during the run: ${rebuilt[*]}"
fi
echo "  results: $DIR/results-{original,rewritten}.txt, failing logs in $DIR/logs-*/"
echo "  wall time: $(($(date +%s) - t_start)) s"
[ $confirmed -eq 0 ] && [ ${#rebuilt[@]} -eq 0 ]
