#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn --trace=FILE.json: the Chrome trace is JSON in the Trace Event Format (python3's json
# reads it; Perfetto and chrome://tracing load that format), with counter events ("ph":"C")
# per procedure; the calls so far never decrease and end at most at the final table's
# count; a procedure called once appears and drops back to 0; with --time, the share of
# each interval spent inside (from its timer); a trace path that cannot be written fails
# before the session, and the trace is written to a new temporary file beside FILE
# (never a predictable name) and renamed. Skips without ptrace or python3.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
DYN=${DYN:-$top_builddir/tools/dyn}
dir=$top_builddir/tests/dyn-trace.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fails=0
qp_have python3 || { echo "SKIP: no python3"; exit 77; }
"$DYN" run --count main -- true >/dev/null 2>&1 || { echo "SKIP: dyn cannot trace here"; exit 77; }
gcc -O1 -o "$dir/tick" "$top_srcdir/tests/qp/tick.c" || exit 99
"$DYN" run --count leaf --count rare --trace="$dir/t.json" -- "$dir/tick" >"$dir/out" 2>"$dir/err" ||
    bad "dyn failed: $(cat "$dir/err")"
final=$(awk '$2 == "leaf" { print $1 }' "$dir/out")
[ "$final" = 60000 ] && ok "final count 60000" || bad "final count '$final'"
python3 - "$dir/t.json" "$final" >"$dir/check" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
assert all(e["ph"] == "C" and "ts" in e and "pid" in e for e in ev), "not counter events"
leaf = [e for e in ev if e["name"] == "leaf(int)" or e["name"] == "leaf"]
calls = [e["args"]["calls"] for e in leaf]
assert len(leaf) >= 3, "too few samples of leaf: %d" % len(leaf)
assert calls == sorted(calls), "calls decrease"
assert calls[-1] <= int(sys.argv[2]), "more calls than the final count"
ts = [e["ts"] for e in ev]
assert ts == sorted(ts), "time goes back"
rare = [e for e in ev if e["name"].startswith("rare")]
assert len(rare) == 2 and rare[0]["args"]["calls/s"] > 0 and rare[1]["args"]["calls/s"] == 0, rare
print("events", len(ev))
PY
[ $? -eq 0 ] && ok "trace: $(cat "$dir/check")" || bad "trace: $(cat "$dir/check")"
# With a timer: each event also says which share of the interval was spent inside.
"$DYN" run --time chunk --trace="$dir/w.json" -- "$dir/tick" >/dev/null 2>"$dir/err" || bad "dyn --time failed: $(cat "$dir/err")"
python3 - "$dir/w.json" >"$dir/check" 2>&1 <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
ins = [e["args"]["inside %"] for e in ev if e["name"].startswith("chunk")]
assert len(ins) >= 3 and all(0 <= v <= 100 for v in ins), ins
print("inside %% of chunk: %.2f..%.2f" % (min(ins), max(ins)))
PY
[ $? -eq 0 ] && ok "timer: $(cat "$dir/check")" || bad "timer: $(cat "$dir/check")"
[ -z "$(ls "$dir" | grep '^t\.json.')" ] && ok "no temporary file left after a complete trace" ||
    bad "left behind: $(ls "$dir" | grep '^t\.json.')"
"$DYN" run --count leaf --trace=/nonexistent/t.json -- "$dir/tick" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] && grep -q "/nonexistent/t.json" "$dir/err" && ok "unwritable trace refused first" ||
    bad "unwritable trace: $(cat "$dir/err")"
# The temporary file has an unpredictable name: a link planted at the name an older dyn
# used (FILE.part) is left alone, its target kept, and the trace is written.
echo keep >"$dir/victim"
ln -s "$dir/victim" "$dir/l.json.part"
"$DYN" run --count leaf --trace="$dir/l.json" -- "$dir/tick" >/dev/null 2>"$dir/err" &&
    [ "$(cat "$dir/victim")" = keep ] && python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$dir/l.json" &&
    ok "a link planted at FILE.part is not followed" || bad "link at FILE.part: $(cat "$dir/err")"
[ $fails -eq 0 ] || exit 1
echo "dyn-trace: all checks passed"
exit 0
