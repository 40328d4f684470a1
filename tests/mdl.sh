#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The metric language's MDL side (qpt-metrics(5), issue 33 part 3) on tests/qpt/mdl_prog,
# which prints its own truth ("truth NAME VALUE" on stderr): metrics valued by an
# expression (sum, max, min, avg of an argument, with a unit) over four threads calling
# at once; per procedure per thread and per module per thread (a row per pair); a list
# and a constraint defined once and used by several metrics; memory reads (*E, E[I],
# loadN(E)) with NULL and wild pointers read as 0, never a fault. Each exact against the truth in a rewritten
# file (qp metrics) and live (dyn run); the rewritten program's output is the original's.
set -u
# shellcheck source=tests/lib.sh
. "${top_srcdir:-.}/tests/lib.sh"
B=$top_builddir
D=$B/tests/mdl.d
rm -rf "$D"
mkdir -p "$D" || exit 99
R=$B/tools/qpt-rewrite
Q=$B/tools/qp
DYN=$B/tools/dyn
cp "$B/tests/qpt/mdl_prog" "$D/prog" || exit 99

"$D/prog" >"$D/want.out" 2>"$D/truth" || exit 99
truth() { awk -v n="$1" '$1 == "truth" && $2 == n { print $3 }' "$D/truth"; }

cat >"$D/m.qm" <<'EOF'
# MDL: a list and a constraint, each used by two metrics
list locks = { lock_a, lock_b };
constraint big = arg2 > 4096;
metric sum = sum(arg2) calls(put) total unit "bytes";
metric max = max(arg2) calls(put) total;
metric min = min(arg2) calls(put) total;
metric avg = avg(arg2) calls(put) total;
metric big = count calls(put) where big total;
metric bigmax = max(arg2) calls(put) where big && arg2 < 9000 total;
metric tsum = sum(arg2) calls(put) per thread;
metric pairs = count calls(put) per procedure per thread;
metric lockpairs = count calls(locks) per procedure per thread;
metric locks = count calls(locks) total;
metric modthr = count calls(lock_*) per thread per module;
metric rec = sum(arg1[1]) calls(put_rec) total;
metric tag = max(*(arg1 + 24)) calls(put_rec) total;
metric ch = sum(load1(arg1)) calls(put) total;
metric none = max(arg2) calls(put) where arg2 > 1000000 total;
metric ret = sum(retval) calls(put_rec) total;
metric wild = sum(*(arg2 + 4096)) calls(put) total;
metric noncanon = max(load4(0x800000000000 + arg2)) calls(put) total;
EOF

val() { awk -F, -v m="$2" -v f="$3" '$1 == m && $2 == f { print $4 }' "$1"; }
# The rows of METRIC in a CSV: "FOCUS=VALUE ..." with thread parts cut ("put / thread").
rows() { awk -F, -v m="$2" '$1 == m { sub(/ [0-9a-fx]+( \(.*\))?$/, "", $2); print $2 "=" $4 }' "$1" | sort | tr '\n' ' '; }

check() { # CSV WHAT
    local c=$1 w=$2 e=""
    [ "$(val "$c" sum total)" = "$(truth sum)" ] || e="$e sum"
    [ "$(val "$c" max total)" = "$(truth max)" ] || e="$e max"
    [ "$(val "$c" min total)" = "$(truth min)" ] || e="$e min"
    [ "$(val "$c" avg total)" = "$(truth avg)" ] || e="$e avg"
    [ "$(val "$c" big total)" = "$(truth big)" ] || e="$e big"
    [ "$(val "$c" bigmax total)" = 8999 ] || e="$e bigmax"
    [ "$(val "$c" none total)" = "" ] || e="$e none"
    # each thread's sum, whichever thread it is
    [ "$(awk -F, '$1 == "tsum" { print $4 }' "$c" | sort -n | tr '\n' ' ')" = \
        "$(for t in 0 1 2 3; do truth thread${t}_sum; done | sort -n | tr '\n' ' ')" ] || e="$e tsum"
    [ "$(rows "$c" pairs)" = "put / thread=20000 put / thread=20000 put / thread=20000 put / thread=20000 " ] || e="$e pairs"
    [ "$(rows "$c" lockpairs | tr ' ' '\n' | grep -c '=200$')" = 8 ] &&
        [ "$(awk -F, '$1 == "lockpairs"' "$c" | wc -l)" = 8 ] || e="$e lockpairs"
    [ "$(val "$c" locks total)" = "$(truth locks)" ] || e="$e locks"
    [ "$(awk -F, '$1 == "modthr" && $2 ~ /^module .*mdl_prog.c \/ thread / && $4 == 600' "$c" | wc -l)" = 4 ] || e="$e modthr"
    [ "$(val "$c" rec total)" = "$(truth rec_sum)" ] || e="$e rec"
    [ "$(val "$c" tag total)" = "$(truth tag_max)" ] || e="$e tag"
    [ "$(val "$c" ret total)" = "$(truth ret_sum)" ] || e="$e ret"
    # wild pointers (below 64 KiB, non-canonical): read as 0, the program unharmed
    [ "$(val "$c" wild total)" = 0 ] && [ "$(val "$c" noncanon total)" = 0 ] || e="$e wild"
    [ "$(val "$c" ch total)" = $((116 * $(truth calls))) ] || e="$e ch"
    [ -z "$e" ] && ok "$w: exact against the truth" || { bad "$w:$e"; cat "$c"; }
}

# A file: rewrite, run, qp metrics.
if "$R" --metrics "$D/m.qm" "$D/prog" -o "$D/prog.inst" 2>"$D/rw.err"; then
    "$D/prog.inst" >"$D/got.out" 2>/dev/null
    st=$?
    [ $st = 0 ] && cmp -s "$D/want.out" "$D/got.out" && ok "the rewritten program's output is the original's" ||
        bad "the rewritten program ($st): $(cat "$D/got.out")"
    "$Q" metrics --csv "$D/prog.inst.qp" >"$D/file.csv" 2>&1
    check "$D/file.csv" "qpt-rewrite --metrics, qp metrics --csv"
    "$Q" metrics "$D/prog.inst.qp" >"$D/file.txt" 2>&1
    grep -Eq "^sum +$(truth sum) bytes +total$" "$D/file.txt" && grep -Eq '^none +- +total$' "$D/file.txt" &&
        ok "qp metrics (text): the unit after the value, '-' for a max of no call" ||
        { bad "qp metrics text"; cat "$D/file.txt"; }
    "$Q" metrics --json "$D/prog.inst.qp" >"$D/file.json" &&
        python3 -c 'import json,sys; r={x["metric"]: x for x in json.load(open(sys.argv[1]))}; assert r["sum"]["unit"] == "bytes" and r["min"]["value"] < 0 and r["none"]["value"] is None' "$D/file.json" 2>/dev/null &&
        ok "qp metrics --json: unit, a negative min, null for no call" || { bad "qp metrics --json"; cat "$D/file.json"; }
    "$Q" metrics --aggregate --csv "$D/prog.inst.qp" >"$D/agg.csv" 2>&1
    [ "$(val "$D/agg.csv" pairs "sum: put / threads")" = "$(truth calls)" ] &&
        [ "$(val "$D/agg.csv" pairs "min: put / threads")" = 20000 ] &&
        [ "$(val "$D/agg.csv" tsum "min: threads")" = "$(for t in 0 1 2 3; do truth thread${t}_sum; done | sort -n | head -n 1)" ] &&
        ok "qp metrics --aggregate: over the threads of each procedure" || { bad "--aggregate"; cat "$D/agg.csv"; }
else
    bad "qpt-rewrite --metrics: $(cat "$D/rw.err")"
fi

# Live: dyn run with the same file.
if [ -x "$DYN" ]; then
    out=$("$DYN" run --metrics "$D/m.qm" -o "$D/live.csv" -- "$D/prog" 2>&1)
    if echo "$out" | grep -q "ermission"; then
        echo "skip dyn: no ptrace permission"
    else
        check "$D/live.csv" "dyn run --metrics"
    fi
    # per procedure per thread, live: a row per thread of tick, exact; the threads named
    # by id and name in id order when the session saw them alive (it reads ids about 50
    # times a second: on a loaded machine a thread may end unseen, "0x... (ended)")
    out=$("$DYN" run -e 'count calls(tick) per procedure per thread' -- "$B/tests/qpt/named_threads" 2>&1)
    if ! echo "$out" | grep -q "ermission"; then
        rows=$(echo "$out" | grep '^count calls(tick) per procedure per thread ')
        counts=$(echo "$rows" | awk '{ print $7 }' | sort -n | tr '\n' ' ')
        foci=$(echo "$rows" | awk '$8 == "tick" && $9 == "/" && $10 == "thread"' | wc -l)
        named=$(echo "$rows" | awk '$NF ~ /^\(worker[0-3]\)$/ { print $7 "/" $NF }' | tr '\n' ' ')
        tids=$(echo "$rows" | awk '$NF ~ /^\(/ && $NF != "(ended)" { print $(NF - 1) }' | tr '\n' ' ')
        sorted=$(echo "$tids" | tr ' ' '\n' | grep . | sort -n | tr '\n' ' ')
        want_named=$(for k in 0 1 2 3; do echo "$rows" | grep -q "(worker$k)\$" && echo "$((k * 100 + 100))/(worker$k)"; done | tr '\n' ' ')
        [ "$counts" = "7 100 200 300 400 " ] && [ "$foci" = 5 ] && [ "$named" = "$want_named" ] &&
            [ "$tids" = "$sorted" ] &&
            ok "dyn: per procedure per thread, 'tick / thread TID (NAME)' rows exact, named ones in id order" ||
            bad "dyn per procedure per thread: $out"
    fi
fi

# Errors: line and column, exit 2, nothing written.
err() { # WANT TEXT...: the first line of qpt-rewrite's message for a file of TEXT
    printf '%s\n' "${@:2}" >"$D/e.qm"
    out=$("$R" --metrics "$D/e.qm" "$D/prog" -o "$D/x.inst" 2>&1 | head -n 1)
    [ "$out" = "qpt-rewrite: $D/e.qm:$1" ] && [ ! -e "$D/x.inst" ] && ok "error: $1" || bad "error: want '$1', got '$out'"
}
err "2:20: a second focus: only 'per procedure' or 'per module' combine, with 'per thread'" \
    'metric a = count calls(put)' '    per thread per call site;'
err "1:40: a second focus: 'total' combines with none" 'metric a = count calls(put) per thread total;'
err "2:6: 'big' is defined twice" 'list big = { put };' 'list big = { put_rec };'
err "2:35: 'locks' is a list of procedures, not a value" 'list locks = { lock_a };' \
    'metric a = count calls(put) where locks;'
err "1:52: no procedure matches 'nope, lock_zz'" 'list l = { nope, lock_zz }; metric a = count calls(l);'
err "1:41: a unit is up to 15 letters, digits and _ / % . -" 'metric a = sum(arg2) calls(put) unit "by tes";'
err "1:37: a row per value is for counts (a timer's value at its stop is not known; sum, max... keep two words a row)" \
    'metric a = max(arg2) calls(put) per arg1;'
err "1:16: an argument with retval: a count that reads retval is made at the returns, where the arguments are gone" \
    'metric a = sum(arg1[0] + retval) calls(put);'
err "1:27: a timer's unit is ns" 'metric a = time wall(put) unit "s";'

# A constraint of a --metrics file used by a later -e: an error in it is shown in the
# file, at its definition.
printf '# definitions\nconstraint c = nope > 1;\n' >"$D/defs.qm"
out=$("$R" --metrics "$D/defs.qm" -e 'count calls(put) where arg2 > 0 && c' "$D/prog" -o "$D/x.inst" 2>&1)
st=$?
[ $st = 2 ] && [ "$(echo "$out" | head -n 1)" = "qpt-rewrite: $D/defs.qm:2:16: no variable 'nope' in the program (a stripped program has only its dynamic symbols)" ] &&
    [ "$(echo "$out" | sed -n 2p)" = "    constraint c = nope > 1;" ] && [ ! -e "$D/x.inst" ] &&
    ok "an error in a constraint used by -e: shown at its definition in the file" || bad "constraint error ($st): $out"

[ "$fails" -eq 0 ] || exit 1
rm -rf "$D"
exit 0
