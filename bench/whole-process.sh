#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Whole-process counts against callgrind (a benchmark of accuracy, not a test). For each
# workload: the program and every library it loads are rewritten (qpt-rewrite
# --with-libs) into a scratch folder; the rewritten program runs the workload once (its
# standard output and exit status must equal the original's); the ORIGINAL program runs
# it under `valgrind --tool=callgrind`. Compared:
#   - callgrind's total Ir; its part in the dynamic loader (ld-linux-*.so.2, which qp
#     does not rewrite); its part in code it files under no object (`???`: the vDSO, and
#     some PLT entries) and in valgrind's own preload library (not in a native run):
#     "unattributed";
#   - qp's total (`total:` line of `qp report DIR/*.qp`);
#   - qp / (callgrind total - loader - unattributed);
#   - per module: callgrind's self Ir summed by object basename against qp's table of
#     modules;
#   - per procedure: the procedures where the two differ most, in the biggest module and
#     in the others. qp counts PLT stubs in rows of their own, callgrind in the callers
#     (--skip-plt=yes): qp's stub instructions are given back to their callers (qp report
#     --callers). Names are matched by address (aliases: nm of the file and of its
#     separate debug file), and libc's IFUNC variants by family (valgrind's virtual CPU
#     has no AVX-512: under it libc picks __strcmp_avx2 where natively __strcmp_evex
#     runs): such rows read "qp name / callgrind name". Marked "not measured": a
#     procedure qp left in place (qp report -v). "attribution: cancels X": two rows of a
#     module whose differences cancel (callgrind keeps code without a symbol, entered by
#     a tail jump, under the procedure that jumped). What neither can show: x86 `rep` string
#     instructions are counted once by qp and per iteration by callgrind, so memset and
#     memcpy variants using `rep stosb/movsb` come out higher under callgrind.
# The object of each callgrind cost is read from the callgrind output file itself:
# callgrind_annotate prints no object for the entries of inlined files (e.g. ld.so's
# dl_main split over several headers), which would lose part of the loader.
# Prints a markdown table per workload (modules), the largest differences, and a summary
# table. Exit status: 0, or 1 if a rewritten program's output or status differed (or a
# step failed).
#
# Usage: bench/whole-process.sh
# Environment: QPT_REWRITE (tools/qpt-rewrite of this tree), QP (tools/qp),
#   WORKLOADS ("lua jq sqlite3"), SIZE (300000: table entries, range, rows),
#   LUA (bench-workloads/native/lua from bench/workloads.sh, looked for in
#   $QPT_BENCH_DIR/native, then bench-workloads/native in the repository and next to
#   it), JQ (/usr/bin/jq),
#   SQLITE3 (/usr/bin/sqlite3), TOP (5: procedures listed), KEEP (0; 1 keeps the
#   scratch folder), SAME_IFUNC (0; 1 runs the original and the rewritten program with
#   GLIBC_TUNABLES hiding AVX-512 and RTM, so that libc picks the IFUNC variants it picks
#   under valgrind; the differences left are then qp's and callgrind's alone).
#   Heavy steps run under `nice -n 10`, one at a time.
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
QPT_REWRITE=${QPT_REWRITE:-$REPO/tools/qpt-rewrite}
QP=${QP:-$REPO/tools/qp}
WORKLOADS=${WORKLOADS:-lua jq sqlite3}
SIZE=${SIZE:-300000}
TOP=${TOP:-5}
KEEP=${KEEP:-0}
SAME_IFUNC=${SAME_IFUNC:-0}
JQ=${JQ:-/usr/bin/jq}
SQLITE3=${SQLITE3:-/usr/bin/sqlite3}
if [ -z "${LUA:-}" ]; then
    LUA=bench-workloads/native/lua
    for d in ${QPT_BENCH_DIR:-} "$REPO/bench-workloads" "$REPO/../bench-workloads"; do
        [ -x "$d/native/lua" ] && { LUA=$(cd "$d/native" && pwd)/lua; break; }
    done
fi
export LC_ALL=C
unset QP_PROFILE
# SAME_IFUNC=1: the native and rewritten runs choose libc's IFUNC variants as under
# valgrind, whose virtual CPU has no AVX-512 (nor RTM): AVX2 instead of EVEX/AVX-512.
if [ "$SAME_IFUNC" = 1 ]; then
    export GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-RTM
fi

say() { echo "whole-process: $*" >&2; }
die() { say "error: $*"; exit 1; }
[ -x "$QPT_REWRITE" ] || die "QPT_REWRITE=$QPT_REWRITE: not an executable"
[ -x "$QP" ] || die "QP=$QP: not an executable"
command -v valgrind >/dev/null || die "valgrind not installed (apt-get install valgrind)"
case $SIZE in '' | *[!0-9]*) die "SIZE=$SIZE: not a number" ;; esac
HAVE_NM=1
command -v nm >/dev/null && command -v readelf >/dev/null || {
    HAVE_NM=0
    say "note: no nm/readelf (binutils): procedures are matched by name only"
}

T=$(mktemp -d "${TMPDIR:-/tmp}/qpt-whole.XXXXXX") || die "mktemp failed"
trap '[ "$KEEP" = 1 ] && say "scratch files kept in $T" || rm -rf "$T"' EXIT

# workload NAME: sets PROG and ARGS (the command line after the program).
workload() {
    case $1 in
    lua)
        PROG=$LUA
        ARGS=(-e "local t={} for i=1,$SIZE do t[i]=tostring(i) end local s=0 for i=1,#t do s=s+#t[i] end print(s)")
        ;;
    jq) PROG=$JQ ARGS=(-n "[range($SIZE)|.*2]|add") ;;
    sqlite3)
        PROG=$SQLITE3
        ARGS=(-batch :memory: "with recursive c(x) as (select 1 union all select x+1 from c limit $SIZE) select sum(x*x%7) from c;")
        ;;
    *) return 1 ;;
    esac
}

# q ARGS...: the command line, quoted for a shell (for messages).
q() { local a s=; for a; do s+=" $(printf '%q' "$a")"; done; echo "${s# }"; }

# cg_self FILE: "object<TAB>function<TAB>self Ir" from a callgrind output file (format:
# valgrind's docs, "Callgrind Format Specification"), then "TOTALS<TAB><TAB>totals:".
cg_self() {
    awk '
    function nm(kind, s,   id) {          # name compression: "(id) name" or "(id)"
        if (s !~ /^\([0-9]+\)/) return s
        id = substr(s, 2, index(s, ")") - 2)
        s = substr(s, index(s, ")") + 1); sub(/^ /, "", s)
        if (s != "") names[kind, id] = s
        return names[kind, id]
    }
    BEGIN { npos = 1; ob = "???"; fn = "???" }
    /^positions:/ { npos = split(substr($0, 11), a, " "); next }
    /^totals:/ { totals = $2; next }
    /^summary:/ { if (totals == "") totals = $2; next }
    /^ob=/ { ob = nm("ob", substr($0, 4)); next }
    /^cob=/ { nm("ob", substr($0, 5)); next }
    /^fn=/ { fn = nm("fn", substr($0, 4)); fob = ob; next }
    /^cfn=/ { nm("fn", substr($0, 5)); next }
    /^calls=/ { skip = 1; next }               # the next cost line is the call'"'"'s inclusive cost
    /^[0-9+*-]/ {
        if (skip) { skip = 0; next }
        n = split($0, f, " "); v = (n > npos) ? f[npos + 1] : 0
        self[fob "\t" fn] += v; sum += v; next
    }
    END {
        for (k in self) if (self[k]) printf "%s\t%.0f\n", k, self[k]
        printf "TOTALS\t%.0f\t%.0f\n", sum, totals
    }' "$1"
}

# syms OBJECT MODULE: "S<TAB>module<TAB>name<TAB>address" for the functions of OBJECT
# and of its separate debug file (/usr/lib/debug/.build-id/xx/yyyy.debug).
syms() {
    [ "$HAVE_NM" = 1 ] && [ -f "$1" ] || return 0
    local id dbg=
    id=$(readelf -n "$1" 2>/dev/null | awk '/Build ID:/ { print $3; exit }')
    [ -n "$id" ] && [ -f "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ] &&
        dbg=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
    {
        nm -D --defined-only --format=posix "$1" 2>/dev/null
        [ -n "$dbg" ] && nm --defined-only --format=posix "$dbg" 2>/dev/null
        nm --defined-only --format=posix "$1" 2>/dev/null
    } | awk -v m="$2" '$2 ~ /^[TtWwiI]$/ && NF >= 3 {
        n = $1; sub(/@.*/, "", n); a = tolower($3); sub(/^0+/, "", a); if (a == "") a = "0"
        print "S\t" m "\t" n "\t" a }' | sort -u
}

# An awk function: 1234567 -> 1,234,567.
C3='function c3(v,   s, r, g) { g = v < 0 ? "-" : ""; s = sprintf("%.0f", v < 0 ? -v : v); r = ""
    while (length(s) > 3) { r = "," substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) }
    return g s r }'

# compare DIR WORKLOAD: everything after the runs; prints the workload's section and
# appends its row to $T/summary.md. Files in $W (set by the caller).
compare() {
    local d=$1 wl=$2 qptotal
    "$QP" report -v "$d"/*.qp >"$W/qp.txt" 2>"$W/qp.err" || { say "$wl: qp report failed: $(head -c 300 "$W/qp.err")"; return 1; }
    "$QP" report --csv "$d"/*.qp >"$W/qp.csv" 2>>"$W/qp.err" || { say "$wl: qp report --csv failed"; return 1; }
    qptotal=$(awk '/^total: [0-9]+ instructions/ { print $2; exit }' "$W/qp.txt")
    [ -n "$qptotal" ] || { say "$wl: no 'total:' line in qp report's output"; return 1; }
    cg_self "$W/callgrind.out" >"$W/cg.self"

    # qp's modules (name, instructions), from the table of modules.
    awk '/^ % insns/ { t = 1; next } t && /^total:/ { exit }
         t && $1 ~ /^[0-9.]+$/ && NF >= 7 { print "M\t" $6 "\t" $2 }' "$W/qp.txt" >"$W/in.txt"
    # Symbols (for aliases) of every object callgrind saw that is one of qp's modules.
    local obj base m mods
    mods=$(awk '$1 == "M" { print $2 }' "$W/in.txt")
    cut -f1 "$W/cg.self" | sort -u | while IFS= read -r obj; do
        base=${obj##*/}
        for m in $mods; do
            if [ "$base" = "$m" ] || [ "${base#"$m".}" != "$base" ]; then syms "$obj" "$m"; break; fi
        done
    done >>"$W/in.txt"
    # qp's procedures; the ones it did not measure (qp report -v).
    awk -F, 'NR > 1 { n = NF; name = $2; for (i = 3; i <= n - 3; i++) name = name "," $i
        if (name ~ /^".*"$/) { name = substr(name, 2, length(name) - 2); gsub(/""/, "\"", name) }
        print "Q\t" $1 "\t" name "\t" $(n - 1) "\t" $n }' "$W/qp.csv" >>"$W/in.txt"
    awk '/^Not measured in / { m = $4; sub(/:$/, "", m); t = 1; next }
         t && /^  [^ ].* at 0x[0-9a-f]+:/ { s = substr($0, 3); n = substr(s, 1, index(s, " at 0x") - 1)
            print "N\t" m "\t" n; next }
         { t = 0 }' "$W/qp.txt" >>"$W/in.txt"
    # PLT stubs: their instructions go back to the callers (callgrind counts them there).
    local mod name ins lim
    lim=$(awk -v t="$qptotal" 'BEGIN { l = t / 1000000; print (l < 100 ? 100 : int(l)) }')
    awk -F'\t' -v lim="$lim" '$1 == "Q" && $5 ~ /\^/ && $4 + 0 >= lim { print $4 "\t" $2 "\t" $3 }' "$W/in.txt" |
        sort -t "$(printf '\t')" -k1,1nr | head -n 150 |
        while IFS=$(printf '\t') read -r ins mod name; do
            "$QP" report --callers="$mod:$name" "$d"/*.qp 2>/dev/null |
                awk -v m="$mod" -v s="$name" -v ins="$ins" '
                /^Callers of / { next }
                $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9.]+$/ && $3 ~ /^[0-9]+$/ && NF >= 4 {
                    c = $4; for (i = 5; i <= NF; i++) c = c " " $i
                    if (c ~ / \(tail calls\)$/) tail += $1
                    sub(/ \(.*\)$/, "", c); rows[c] += $1; calls += $1 }
                END { if (!calls) exit
                    # instructions per call: the row total over the calls seen here
                    for (c in rows) printf "P\t%s\t%s\t%s\t%.0f\n", m, s, c, rows[c] * ins / calls
                    if (tail) printf "T\t%s\t%s\t%.0f\n", m, s, tail * ins / calls }'
        done >>"$W/in.txt"

    awk -F'\t' -v wl="$wl" -v top="$TOP" -v qptotal="$qptotal" -v out="$W" '
    function strip(n) {                      # callgrind: recursion levels, versions, 0x0000000000001d390
        sub(/\047[0-9]+$/, "", n); if (n !~ /@plt$/) sub(/@.*$/, "", n)
        if (n ~ /^0x[0-9a-f]+$/) { n = substr(n, 3); sub(/^0+/, "", n); n = "sub_" (n == "" ? "0" : n) }
        return n
    }
    function family(c,   t, n, i, j, p) {   # __memmove_avx_unaligned_erms -> __memmove_*
        n = split(c, t, "_")
        for (i = 2; i <= n; i++)
            if (t[i] ~ /^(sse2|sse3|ssse3|sse4|sse42|avx|avx2|avx512|avx512f|avx512bw|avx512dq|evex|evex512|fma|fma4|erms)$/) {
                p = t[1]; for (j = 2; j < i; j++) p = p "_" t[j]
                if (p ~ /[a-z]/) return p "_*"
            }
        return c
    }
    function canonical(m, name,   n, a) {    # module SUBSEP the name of the address
        n = strip(name); a = ""
        if (n ~ /^sub_[0-9a-f]+$/) a = substr(n, 5)
        else if ((m SUBSEP n) in addr && !((m SUBSEP n) in amb)) a = addr[m, n]
        if (a != "") n = ((m SUBSEP a) in canon) ? canon[m, a] : "sub_" a
        return m SUBSEP n
    }
    function key(m, name, plt,   c) {   # module SUBSEP the name, IFUNC variants as one
        if (plt) return m SUBSEP "plt:" name
        split(canonical(m, name), c, SUBSEP)
        return m SUBSEP family(c[2])
    }
    function h(v,   s) {                     # 1234567 -> 1.23 M
        s = v < 0 ? "-" : "+"; v = v < 0 ? -v : v
        if (v >= 1e6) return sprintf("%s%.2f M", s, v / 1e6)
        if (v >= 1e3) return sprintf("%s%.1f K", s, v / 1e3)
        return sprintf("%s%d", s, v)
    }
    function c3(v,   s, r, g) {              # 1234567 -> 1,234,567
        g = v < 0 ? "-" : ""; s = sprintf("%.0f", v < 0 ? -v : v); r = ""
        while (length(s) > 3) { r = "," substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) }
        return g s r
    }
    FNR == 1 { file++ }
    file == 1 && $1 == "M" { qpmod[$2] = $3; mods[++nm] = $2; next }
    file == 1 && $1 == "S" {
        if (($2 SUBSEP $3) in addr && addr[$2, $3] != $4) amb[$2, $3] = 1
        addr[$2, $3] = $4
        k = $2 SUBSEP $4; n = $3
        if (!(k in canon) || (canon[k] ~ /^__(GI|EI)_/ && n !~ /^__(GI|EI)_/) ||
            (n < canon[k] && !(n ~ /^__(GI|EI)_/ && canon[k] !~ /^__(GI|EI)_/))) canon[k] = n
        next
    }
    file == 1 && $1 == "Q" {
        plt = $5 ~ /\^/; k = key($2, $3, plt); qp[k] += $4; keys[k] = 1
        if ($4 > 0 && (!((k, "qp") in nameof) || $4 > namev[k, "qp"])) { nameof[k, "qp"] = plt ? $3 : strip($3); namev[k, "qp"] = $4 }
        next
    }
    file == 1 && $1 == "N" { notm[canonical($2, $3)] = 1; next }
    file == 1 && $1 == "P" {
        k = key($2, $4, 0); qp[k] += $5; keys[k] = 1; moved += $5
        if (!((k, "qp") in nameof)) { nameof[k, "qp"] = strip($4); namev[k, "qp"] = 0 }
        qp[key($2, $3, 1)] -= $5
        next
    }
    file == 1 && $1 == "T" { tailplt += $4; next }
    file == 2 && $1 == "TOTALS" { cgsum = $2; cgtot = $3; next }
    file == 2 {
        obj = $1; b = obj; sub(/.*\//, "", b); v = $3
        if (b ~ /^ld-linux.*\.so/ || b ~ /^ld64\.so/) { loader += v; next }
        if (b == "???" || b ~ /^vgpreload_/) { unattr += v; unattrobj[b] += v; next }
        m = ""
        for (i = 1; i <= nm; i++) if (b == mods[i] || index(b, mods[i] ".") == 1) { m = mods[i]; break }
        if (m == "") { other[b] += v; othersum += v; next }
        cgmod[m] += v
        k = key(m, $2, 0); cg[k] += v; keys[k] = 1
        if (canonical(m, $2) in notm) cgnotm[k] += v
        if (!((k, "cg") in nameof) || v > namev[k, "cg"]) { nameof[k, "cg"] = strip($2); namev[k, "cg"] = v }
        next
    }
    END {
        if (cgsum != cgtot) printf "whole-process: %s: note: callgrind self costs sum to %s, its totals: line says %s\n", wl, c3(cgsum), c3(cgtot) > "/dev/stderr"
        big = ""; for (i = 1; i <= nm; i++) if (big == "" || qpmod[mods[i]] > qpmod[big]) big = mods[i]
        base = cgtot - loader - unattr
        ratio = base > 0 ? qptotal / base : 0

        printf "\n### %s\n\n", wl
        printf "| module | callgrind Ir | qp | qp - callgrind | qp/callgrind |\n|---|---:|---:|---:|---:|\n"
        for (i = 1; i <= nm; i++) { m = mods[i]
            printf "| %s | %s | %s | %s | %s |\n", m, c3(cgmod[m]), c3(qpmod[m]), h(qpmod[m] - cgmod[m]),
                cgmod[m] ? sprintf("%.4f", qpmod[m] / cgmod[m]) : "-" }
        printf "| (dynamic loader) | %s | - | | |\n", c3(loader)
        for (b in unattrobj) printf "| (%s) | %s | - | | |\n", b == "???" ? "no object: ???" : "valgrind: " b, c3(unattrobj[b])
        for (b in other) printf "| %s (not rewritten) | %s | - | | |\n", b, c3(other[b])
        printf "| **total** | %s | %s | %s | |\n", c3(cgtot), c3(qptotal), h(qptotal - cgtot)
        printf "\nqp / (callgrind - loader - unattributed) = %s / %s = **%.4f** (%s%%): %s\n",
            c3(qptotal), c3(base), ratio, sprintf("%+.2f", (ratio - 1) * 100),
            (ratio >= 0.99 && ratio <= 1.01) ? "within 1%" : "NOT within 1%"
        if (moved) printf "(%s instructions of qp'"'"'s PLT stub rows were given back to their callers, as callgrind counts them", c3(moved)
        if (moved && tailplt) printf "; %s of them in stubs entered by tail jumps: callgrind files some such under ???", c3(tailplt)
        if (moved) printf ")\n"

        for (k in cgnotm) notmsum += cgnotm[k]
        if (notmsum && base - notmsum > 0)
            printf "Without what qp left in place (callgrind: %s in procedures qp did not measure): qp / (callgrind - loader - unattributed - those) = **%.4f** (%s%%)\n",
                c3(notmsum), qptotal / (base - notmsum), sprintf("%+.2f", (qptotal / (base - notmsum) - 1) * 100)

        # per-procedure differences, biggest first
        n = 0
        for (k in keys) { d = qp[k] - cg[k]; if (d == 0) continue
            split(k, kk, SUBSEP); nmq = nameof[k, "qp"]; nmc = nameof[k, "cg"]
            nmx = (nmq != "" && nmc != "" && nmq != nmc) ? nmq " / " nmc : (nmq != "" ? nmq : nmc)
            note = ""
            if (cgnotm[k] == cg[k] && cg[k] > 0) note = "not measured by qp"
            else if (cgnotm[k] > 0) note = "of which not measured by qp: " c3(cgnotm[k])
            else if (cg[k] == 0 && kk[2] ~ /^plt:/) note = "PLT stub calls not traced to a caller"
            else if (cg[k] == 0) note = "only in qp"
            else if (qp[k] == 0) note = "only in callgrind"
            if (nmq != "" && nmc != "" && nmq != nmc && kk[2] ~ /_\*$/) note = note (note ? "; " : "") "IFUNC variant"
            if (d < 0 && qp[k] > 0 && (nmq " " nmc) ~ /(mem(set|cpy|move|pcpy)|bzero).*_erms/)
                note = note (note ? "; " : "") "rep stosb/movsb: callgrind counts every iteration"
            line[++n] = sprintf("%.0f\t%s\t%s\t%.0f\t%.0f\t%.0f\t%s", d < 0 ? -d : d, kk[1], nmx, qp[k], cg[k], d, note)
        }
        for (i = 1; i <= n; i++) print line[i] > (out "/diffs.tsv")
        close(out "/diffs.tsv")
        printf "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.6f\t%s\n", wl, cgtot, loader, unattr, qptotal, ratio, big > (out "/sum.tsv")
    }' "$W/in.txt" "$W/cg.self" || return 1

    local row big
    big=$(cut -f7 "$W/sum.tsv")
    touch "$W/diffs.tsv"
    # Differences that cancel within a module (same size within 3%, opposite signs) are where the two
    # file the same instructions under different procedures: callgrind keeps a procedure
    # without a symbol, entered by a tail jump, under the procedure that jumped.
    sort -t "$(printf '\t')" -k1,1nr "$W/diffs.tsv" | awk -F'\t' -v OFS='\t' '
        { r[NR] = $0; a[NR] = $1; m[NR] = $2; n[NR] = $3; d[NR] = $6 }
        END {
            for (i = 1; i <= NR && i <= 300; i++) {
                if (i in pair) continue
                for (j = i + 1; j <= NR && j <= 3000; j++) {
                    if ((j in pair) || m[j] != m[i] || d[i] * d[j] >= 0) continue
                    x = d[i] + d[j]; if (x < 0) x = -x
                    if (x <= 100 + a[i] * 0.03) { pair[i] = j; pair[j] = i; break }
                }
            }
            for (i = 1; i <= NR; i++) {
                if (!(i in pair)) { print r[i]; continue }
                split(r[i], f, "\t")
                f[7] = (f[7] != "" ? f[7] "; " : "") "attribution: cancels `" n[pair[i]] "`"
                print f[1], f[2], f[3], f[4], f[5], f[6], f[7], "cancels"
            }
        }' >"$W/diffs.sorted"
    table() { # table TITLE: rows on stdin
        echo
        echo "$1"
        echo
        echo "| module | procedure | qp | callgrind | qp - callgrind | note |"
        echo "|---|---|---:|---:|---:|---|"
        awk -F'\t' "$C3"'{ printf "| %s | `%s` | %s | %s | %s%s | %s |\n", $2, $3, c3($4), c3($5), ($6 > 0) ? "+" : "", c3($6), $7 }'
    }
    awk -F'\t' -v b="$big" '$2 == b' "$W/diffs.sorted" | head -n "$TOP" |
        table "Largest differences in the biggest module ($big):"
    awk -F'\t' -v b="$big" '$2 != b' "$W/diffs.sorted" | head -n "$TOP" |
        table "Largest differences in the other modules:"
    # summary row: the 3 largest differences over all modules that do not cancel
    row=$(awk -F'\t' '$8 == "" && ++k <= 3 { d = $6 + 0; s = (d < 0) ? "-" : "+"; d = (d < 0) ? -d : d
            v = (d >= 1e6) ? sprintf("%.2f M", d / 1e6) : ((d >= 1e3) ? sprintf("%.1f K", d / 1e3) : d)
            printf("%s%s `%s` %s%s%s", (k > 1) ? "; " : "", $2, $3, s, v, ($7 != "") ? " (" $7 ")" : "") }' "$W/diffs.sorted")
    awk -F'\t' -v diffs="$row" "$C3"'
        { printf "| %s | %s | %s | %s | %s | %.4f | %s |\n", $1, c3($2), c3($3), c3($4), c3($5), $6, diffs }' \
        "$W/sum.tsv" >>"$T/summary.md"
}

rc=0
for wl in $WORKLOADS; do
    workload "$wl" || { say "$wl: unknown workload (known: lua jq sqlite3): skipped"; continue; }
    if [ ! -x "$PROG" ]; then say "$wl: $PROG not found: skipped"; continue; fi
    W=$T/$wl
    D=$W/d
    mkdir -p "$W"
    P=${PROG##*/}
    say "$wl: $(q "$PROG" "${ARGS[@]}")"

    st=0
    "$PROG" "${ARGS[@]}" </dev/null >"$W/native.out" 2>"$W/native.err" || st=$?
    if ! nice -n 10 "$QPT_REWRITE" --with-libs "$PROG" -o "$D" >"$W/rewrite.log" 2>&1; then
        say "$wl: FAILED: qpt-rewrite --with-libs: $(tail -n 3 "$W/rewrite.log")"
        say "  reproduce: $(q "$QPT_REWRITE" --with-libs "$PROG" -o /tmp/"$P".d)"
        rc=1; continue
    fi
    say "$wl: $(tail -n 1 "$W/rewrite.log" | sed 's/^qpt-rewrite: //')"
    qst=0
    SECONDS=0
    nice -n 10 "$D/$P" "${ARGS[@]}" </dev/null >"$W/qp.out" 2>"$W/qp.run.err" || qst=$?
    if [ $qst != $st ] || ! cmp -s "$W/native.out" "$W/qp.out"; then
        say "$wl: FAILED: the rewritten program's output or status differs from the original's (status $qst, original $st; $(cmp "$W/native.out" "$W/qp.out" 2>&1 | head -n 1))"
        diff "$W/native.out" "$W/qp.out" | head -n 10 >&2
        say "  reproduce: $(q "$QPT_REWRITE" --with-libs "$PROG" -o /tmp/"$P".d) && $(q /tmp/"$P".d/"$P" "${ARGS[@]}")"
        rc=1; continue
    fi
    say "$wl: rewritten run: same output and status ($st), ${SECONDS}s"
    SECONDS=0
    vst=0
    nice -n 10 valgrind --tool=callgrind --callgrind-out-file="$W/callgrind.out" \
        "$PROG" "${ARGS[@]}" </dev/null >"$W/cg.out" 2>"$W/cg.err" || vst=$?
    if [ ! -s "$W/callgrind.out" ]; then
        say "$wl: FAILED: valgrind wrote no profile (status $vst): $(tail -n 3 "$W/cg.err")"
        rc=1; continue
    fi
    cmp -s "$W/native.out" "$W/cg.out" || say "$wl: note: the output under valgrind differs from the native run's"
    say "$wl: callgrind run: ${SECONDS}s"
    [ "$SAME_IFUNC" = 1 ] && say "$wl: (native and rewritten runs with GLIBC_TUNABLES=$GLIBC_TUNABLES)"
    compare "$D" "$wl" || { say "$wl: FAILED: comparison"; rc=1; }
done

[ -s "$T/summary.md" ] || say "no workload was compared"
if [ -s "$T/summary.md" ]; then
    echo
    echo "### Summary (unattributed: callgrind's code of no object, ???, and valgrind's preload library$([ "$SAME_IFUNC" = 1 ] && echo "; SAME_IFUNC=1"))"
    echo
    echo "| workload | callgrind total | loader | unattributed | qp total | qp/(callgrind - loader - unattributed) | largest differences (qp - callgrind) |"
    echo "|---|---:|---:|---:|---:|---:|---|"
    cat "$T/summary.md"
fi
exit $rc
