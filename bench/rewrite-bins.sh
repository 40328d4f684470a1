#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The real-program corpus of the exec editor (`make corpus`, not part of `make check`):
# every ELF executable of a directory (default /usr/bin) is rewritten with
# --driver=none, and `PROG --version` (or `PROG --help` when --version exits non-zero)
# must print the same stdout and stderr and exit with the same status as the original.
# A refusal must be exit status 1 with one line `qpt-rewrite: INPUT: reason`.
#
# Usage: bench/rewrite-bins.sh [path/to/qpt-rewrite] [DIR]
#
# How a program is run, so that the comparison is fair and nothing is touched:
# - "bind" mode (root, and `unshare -m` works): the rewritten file is bind-mounted over
#   the original file in a private mount namespace, so both run from the very same path
#   (argv[0], /proc/self/exe, RPATH $ORIGIN and files found beside the program are the
#   same); the original run bind-mounts the original over itself, for symmetry.  Nothing
#   outside the namespace sees the mount.
#   "copy" mode (otherwise, or MODE=copy): a copy of the original and then the rewritten
#   file are run from the same scratch directory.  Programs that look for files beside
#   themselves behave differently there; the original is also run from DIR and such
#   names are listed as "weak" (the comparison proves less for them).
# - the program is found through PATH, so argv[0] is the bare name; every name in DIR
#   is run (symbolic links too: multi-call programs look at argv[0]), each distinct file
#   is rewritten once;
# - stdin is /dev/null, in a new session (no controlling terminal: programs that open
#   /dev/tty behave the same every time), with a clean environment (HOME, TMPDIR and the
#   working directory are fresh empty scratch directories, LANG=C, TERM=dumb, no
#   DISPLAY), under `timeout` (TIMEOUT seconds; status 124 when it expires);
# - when run as root, the programs run as the user nobody (RUN_AS=root keeps root).
#
# When the first comparison fails, both programs run once more:
# - the original's output varies between its two runs (times, PIDs, random names) and
#   the outputs agree with every digit string replaced by N: "nondeterministic";
# - the outputs agree in both runs once every hexadecimal number of 6 to 16 digits is
#   replaced: "addresses" (the program prints code addresses, e.g. the return address of
#   a Free Pascal runtime error: relocated code has new addresses by design);
# - else DIFFERENT; the outputs are kept and a diff is printed.
#
# Result of each name: identical, nondeterministic, addresses, refused (clean refusal),
# DIFFERENT, or REWRITER FAILED (crash, timeout, or not a one-line refusal).  Exit status
# 0 when nothing is DIFFERENT and the rewriter never failed.
#
# Environment: TIMEOUT (seconds per program run, default 20), REWRITE_TIMEOUT (seconds per
# rewrite, default 600), JOBS (parallel workers, default 2), MODE (bind or copy; default
# bind when possible), KEEP=DIR (keep the scratch tree, with every output, in DIR).
set -u
export LC_ALL=C
QPT=${1:-tools/qpt-rewrite}
DIR=${2:-/usr/bin}
TIMEOUT=${TIMEOUT:-20}
REWRITE_TIMEOUT=${REWRITE_TIMEOUT:-600}
JOBS=${JOBS:-2}
case $QPT in /*) ;; *) QPT=$PWD/$QPT ;; esac
[ -x "$QPT" ] || { echo "rewrite-bins: $QPT: not executable" >&2; exit 2; }
DIR=$(cd "$DIR" && pwd) || exit 2
t_start=$(date +%s)
if [ -n "${KEEP:-}" ]; then
    out=$KEEP && rm -rf "$out" && mkdir -p "$out" || exit 2
    out=$(cd "$out" && pwd)
else
    out=$(mktemp -d /tmp/rewrite-bins.XXXXXX) || exit 2
    trap 'rm -rf "$out"' EXIT
fi
chmod 755 "$out"
mkdir -p "$out/rw" "$out/w" "$out/res" "$out/keep"

RUNAS='' RUNAS_OWNER=''
if [ "$(id -u)" = 0 ] && [ "${RUN_AS:-nobody}" != root ]; then
    RUNAS_OWNER=$(id -u "${RUN_AS:-nobody}"):$(id -g "${RUN_AS:-nobody}") || exit 2
    RUNAS="setpriv --reuid=${RUNAS_OWNER%:*} --regid=${RUNAS_OWNER#*:} --clear-groups"
fi
if [ -z "${MODE:-}" ]; then
    MODE=copy
    if [ "$(id -u)" = 0 ] && : >"$out/probe" &&
        unshare -m --propagation private mount --bind "$out/probe" "$out/probe" 2>/dev/null; then
        MODE=bind
    fi
    rm -f "$out/probe"
fi
export QPT DIR TIMEOUT REWRITE_TIMEOUT RUNAS RUNAS_OWNER MODE out

# ---- the names: NAME, its file, and one id per distinct file --------------------------
nskip=0 nid=0
: >"$out/names"
: >"$out/files"
declare -A fid
for f in "$DIR"/*; do
    [ -f "$f" ] && [ -x "$f" ] || continue
    if [ "$(head -c 4 "$f" 2>/dev/null | od -An -tx1 | tr -d ' \n')" != 7f454c46 ]; then
        nskip=$((nskip + 1)) # scripts
        continue
    fi
    r=$(readlink -f "$f")
    if [ -z "${fid[$r]:-}" ]; then
        fid[$r]=$nid
        nid=$((nid + 1))
        printf '%s\t%s\n' "${fid[$r]}" "$r" >>"$out/files"
    fi
    printf '%s\t%s\n' "${f##*/}" "${fid[$r]}" >>"$out/names"
done
nnames=$(wc -l <"$out/names")
nfiles=$(wc -l <"$out/files")

# ---- rewrite each file once -----------------------------------------------------------
# rw/ID is the output; rw/ID.res is "ok", "refused<TAB>message" or "failed<TAB>why".
rewrite_one() {
    local id=$1 f=$2 st msg
    { timeout -k 5 "$REWRITE_TIMEOUT" "$QPT" --driver=none "$f" -o "$out/rw/$id" \
        >/dev/null 2>"$out/rw/$id.log"; } 2>/dev/null
    st=$?
    msg=$(grep -v '^qpt-rewrite: .*: [0-9]* procedures relocated' "$out/rw/$id.log" | head -n 3)
    if [ $st -eq 0 ] && [ -s "$out/rw/$id" ]; then
        # Same owner, group and mode bits (set-user-ID too) as the original.
        [ "$(id -u)" = 0 ] && chown --reference="$f" "$out/rw/$id" && chmod --reference="$f" "$out/rw/$id"
        echo ok
    elif [ $st -eq 1 ] && [ "$(wc -l <"$out/rw/$id.log")" -eq 1 ] && [ -n "$msg" ] &&
        [ "${msg#qpt-rewrite: "$f": }" != "$msg" ]; then
        printf 'refused\t%s\n' "$msg"
    elif [ $st -eq 124 ] || [ $st -eq 137 ]; then
        printf 'failed\ttimed out after %s s\n' "$REWRITE_TIMEOUT"
    else
        printf 'failed\tstatus %s: %s\n' "$st" "$(echo "$msg" | tr '\n' ' ')"
    fi >"$out/rw/$id.res"
}
export -f rewrite_one
t0=$(date +%s)
tr '\t' '\n' <"$out/files" | tr '\n' '\0' | xargs -0 -r -n 2 -P "$JOBS" bash -c 'rewrite_one "$@"' _
t_rewrite=$(($(date +%s) - t0))

# ---- run each name --------------------------------------------------------------------
# run_prog W BINDIR NAME ARG TAG [FILE TARGET]: one run of NAME found in BINDIR, with
# FILE bind-mounted over TARGET; results in W/TAG.{out,err,st}.
run_prog() {
    local w=$1 bindir=$2 name=$3 arg=$4 tag=$5 ns=()
    [ $# -gt 5 ] && ns=(unshare -m --propagation private sh -c \
        'mount --bind "$1" "$2" || exit 125; shift 2; exec "$@"' sh "$6" "$7")
    rm -rf "${w:?}/home" "$w/tmp" "$w/cwd" && mkdir -p "$w/home" "$w/tmp" "$w/cwd"
    [ -n "$RUNAS" ] && chown "$RUNAS_OWNER" "$w/home" "$w/tmp" "$w/cwd"
    { (cd "$w/cwd" && timeout -k 2 "$TIMEOUT" "${ns[@]}" setsid $RUNAS env -i HOME="$w/home" \
        TMPDIR="$w/tmp" PATH="$bindir:/usr/local/bin:/usr/bin:/bin" LANG=C TERM=dumb \
        USER=nobody LOGNAME=nobody "$name" "$arg" </dev/null >"$w/$tag.out" 2>"$w/$tag.err"); } 2>/dev/null
    echo $? >"$w/$tag.st"
}
same() { cmp -s "$1.st" "$2.st" && cmp -s "$1.out" "$2.out" && cmp -s "$1.err" "$2.err"; }
# same_masked A B SED-EXPRESSION
same_masked() {
    local x
    for x in st out err; do
        cmp -s <(sed -E "$3" "$1.$x") <(sed -E "$3" "$2.$x") || return 1
    done
}
NUMBERS='s/[0-9]+/N/g'
ADDRESSES='s/(0x|\$)?[0-9a-fA-F]{6,16}\b/ADDR/g'
export NUMBERS ADDRESSES
run_one() {
    local idx=$1 name=$2 id=$3 w=$out/w/$1 res arg note='' f orig rw bindir
    res=$(cut -f 1 "$out/rw/$id.res")
    if [ "$res" = refused ]; then
        printf 'refused\t%s\t%s\n' "$name" "$(cut -f 2- "$out/rw/$id.res")" >"$out/res/$idx"
        return
    elif [ "$res" != ok ]; then
        printf 'FAILED\t%s\t%s\n' "$name" "$(cut -f 2- "$out/rw/$id.res")" >"$out/res/$idx"
        return
    fi
    f=$(sed -n "$((id + 1))p" "$out/files" | cut -f 2)
    mkdir -p "$w/bin"
    # orig / rw: the arguments of run_prog after ARG TAG that run the original / rewritten.
    if [ "$MODE" = bind ]; then
        orig=("$f" "$f") rw=("$out/rw/$id" "$f")
        bindir=$DIR
    else
        orig=() rw=()
        bindir=$w/bin
    fi
    arg=--version
    run_prog "$w" "$DIR" "$name" $arg o
    if [ "$(cat "$w/o.st")" != 0 ]; then
        arg=--help
        run_prog "$w" "$DIR" "$name" $arg o
    fi
    put() { [ "$MODE" = bind ] || { cp "$1" "$w/bin/$name" && chmod 755 "$w/bin/$name"; }; }
    put "$f"
    run_prog "$w" "$bindir" "$name" $arg c1 "${orig[@]}"
    put "$out/rw/$id"
    run_prog "$w" "$bindir" "$name" $arg r1 "${rw[@]}"
    if [ "$MODE" = copy ] && ! same "$w/o" "$w/c1" && ! same_masked "$w/o" "$w/c1" "$NUMBERS"; then
        note="; copy differs from $DIR/$name"
    fi
    if same "$w/c1" "$w/r1"; then
        printf 'identical\t%s\t%s%s\n' "$name" "$arg" "$note"
    else
        # Once more each, to tell a nondeterministic program from a rewriting error.
        put "$f"
        run_prog "$w" "$bindir" "$name" $arg c2 "${orig[@]}"
        put "$out/rw/$id"
        run_prog "$w" "$bindir" "$name" $arg r2 "${rw[@]}"
        if ! same "$w/c1" "$w/c2" && same_masked "$w/c1" "$w/r1" "$NUMBERS" &&
            same_masked "$w/c2" "$w/r2" "$NUMBERS"; then
            printf 'nondeterministic\t%s\t%s: equal modulo numbers%s\n' "$name" "$arg" "$note"
        elif same_masked "$w/c1" "$w/r1" "$ADDRESSES" && same_masked "$w/c2" "$w/r2" "$ADDRESSES"; then
            printf 'addresses\t%s\t%s: differs only in printed addresses%s\n' "$name" "$arg" "$note"
        else
            printf 'DIFFERENT\t%s\t%s: status %s -> %s%s\n' "$name" "$arg" "$(cat "$w/c1.st")" \
                "$(cat "$w/r1.st")" "$note"
        fi
        mkdir -p "$out/keep/$name"
        cp "$w"/[cr][12].* "$w"/o.* "$out/keep/$name/"
    fi >"$out/res/$idx"
    rm -rf "$w"
}
export -f run_prog same same_masked run_one
t0=$(date +%s)
awk '{ print NR "\t" $0 }' "$out/names" | tr '\t\n' '\0\0' |
    xargs -0 -r -n 3 -P "$JOBS" bash -c 'run_one "$@"' _
t_run=$(($(date +%s) - t0))

# ---- report ---------------------------------------------------------------------------
shopt -s nullglob
cat /dev/null "$out"/res/* | sort -t "$(printf '\t')" -k 2 >"$out/results"
count() { awk -F '\t' -v c="$1" '$1 == c' "$out/results" | wc -l; }
nrw=$(cat /dev/null "$out"/rw/*.res | grep -c '^ok')
nref=$(cat /dev/null "$out"/rw/*.res | grep -c '^refused')
nfail=$(cat /dev/null "$out"/rw/*.res | grep -c '^failed')
for c in refused FAILED DIFFERENT addresses nondeterministic; do
    awk -F '\t' -v c="$c" '$1 == c { printf "%s: %s/%s: %s\n", c, ENVIRON["DIR"], $2, $3 }' "$out/results"
done
awk -F '\t' '$1 == "identical" && /copy differs/ { printf "weak: %s/%s: %s\n", ENVIRON["DIR"], $2, $3 }' "$out/results"
while IFS="$(printf '\t')" read -r c name rest; do
    d=$out/keep/$name
    echo "--- $c $DIR/$name (< original, > rewritten; first run)"
    for x in st out err; do
        diff -a "$d/c1.$x" "$d/r1.$x" | grep -a '^[<>]' | head -n 6 | cut -c 1-160 |
            tr -c '[:print:]\n' '?' | sed "s/^/  $x: /"
    done
done < <(awk -F '\t' '$1 == "DIFFERENT" || $1 == "addresses"' "$out/results")
echo "rewrite-bins: $DIR: $nnames ELF names ($nfiles distinct files; $nskip non-ELF names skipped); mode $MODE"
echo "rewrite-bins: files: $nrw rewritten, $nref refused with a message, $nfail rewriter failures; rewriting took $t_rewrite s"
echo "rewrite-bins: names: $(count identical) identical, $(count nondeterministic) nondeterministic (equal modulo numbers)," \
    "$(count addresses) differing only in printed addresses, $(count refused) refused," \
    "$(count DIFFERENT) DIFFERENT, $(count FAILED) rewriter failed"
[ "$MODE" = copy ] && echo "rewrite-bins: $(grep -c 'copy differs from' "$out/results") weak: the copy does not behave like $DIR/NAME"
echo "rewrite-bins: running took $t_run s; wall time $(($(date +%s) - t_start)) s (JOBS=$JOBS, TIMEOUT=$TIMEOUT)"
[ "$(count DIFFERENT)" -eq 0 ] && [ "$(count FAILED)" -eq 0 ]
