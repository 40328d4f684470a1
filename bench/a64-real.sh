#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Debian's own arm64 programs rewritten and run under qemu (issue 34; `make corpus`).
# Usage: a64-real.sh WORKDIR QPT-REWRITE QP
# Downloads coreutils, lua5.4 and sqlite3 for arm64 with their libraries into WORKDIR
# (apt-get with a private source list and state: the machine's dpkg architectures are
# not touched), then:
#  - rewrites 18 coreutils programs, lua5.4 and sqlite3 with --driver=none, qp and naive
#    and runs each on a workload (coreutils on a 5,000-line file, lua on a script of
#    recursion, table.sort and string matching, sqlite3 on an SQL script with a
#    recursive CTE, an index, grouping): stdout, stderr and exit status must equal the
#    original's;
#  - rewrites libsqlite3.so.0 and libgmp.so.10 with --driver=none and runs sqlite3 and
#    factor against them;
#  - counts the instructions of lua5.4 on a small script (qemu's -d in_asm,exec,nochain:
#    the size of each translated block times its runs, the whole process): native, none,
#    qp, naive, and the same for sqlite3 with its library rewritten (none).
# Exit status: 0 pass, 1 a difference, 77 skip (no qemu-aarch64, no network).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
W=$1 REWRITE=$(cd "$(dirname "$2")" && pwd)/${2##*/} QP=$(cd "$(dirname "$3")" && pwd)/${3##*/}
command -v qemu-aarch64 > /dev/null || { echo "a64-real: no qemu-aarch64: skipped"; exit 77; }
[ -d /usr/aarch64-linux-gnu ] || { echo "a64-real: no /usr/aarch64-linux-gnu: skipped"; exit 77; }
mkdir -p "$W/apt/lists/partial" "$W/apt/cache/archives/partial" "$W/debs" "$W/run" || exit 1
W=$(cd "$W" && pwd)
echo "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" > "$W/apt/sources.list"
touch "$W/apt/status"
APT="-o Dir::Etc::SourceList=$W/apt/sources.list -o Dir::Etc::SourceParts=/dev/null
 -o Dir::State::Lists=$W/apt/lists -o Dir::Cache=$W/apt/cache -o APT::Architecture=arm64
 -o APT::Architectures::=arm64 -o Dir::State::status=$W/apt/status"
R=$W/debs/root
if [ ! -x "$R/usr/bin/sqlite3" ]; then
    # shellcheck disable=SC2086
    apt-get $APT -qq update > /dev/null 2>&1 || { echo "a64-real: apt-get update failed: skipped"; exit 77; }
    # shellcheck disable=SC2086
    (cd "$W/debs" && apt-get $APT -qq download coreutils lua5.4 sqlite3 libsqlite3-0 \
        libreadline8 libtinfo6 zlib1g libgmp10 libselinux1 libpcre2-8-0 libacl1 libattr1 \
        > /dev/null 2>&1) || { echo "a64-real: apt-get download failed: skipped"; exit 77; }
    for d in "$W"/debs/*.deb; do dpkg-deb -x "$d" "$R" || exit 1; done
fi
LIBS=$R/usr/lib/aarch64-linux-gnu:$R/lib/aarch64-linux-gnu
run() { qemu-aarch64 -L /usr/aarch64-linux-gnu -E "LD_LIBRARY_PATH=$LP" "$@"; }
where() { if [ -e "$R/bin/$1" ]; then echo "$R/bin/$1"; else echo "$R/usr/bin/$1"; fi; }
cd "$W/run" || exit 1
seq 1 5000 | awk '{ print ($1 * 7919) % 10007, "line", $1 }' > input.txt
cat > bench.lua <<'EOF'
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
local N = tonumber(arg[1] or "20000")
local t = {}
for i = 1, N do t[i] = (i * 7919) % 10007 end
table.sort(t)
local s = {}
for i = 1, N // 10 do s[#s+1] = string.format("%d:%s", i, string.rep("x", i % 7)) end
local str = table.concat(s, ",")
local cnt = 0
for w in string.gmatch(str, "%d+") do cnt = cnt + tonumber(w) end
print(fib(N == 20000 and 22 or 17), t[1], t[N], #str, cnt)
EOF
cat > bench.sql <<'EOF'
create table t(a integer primary key, b text, c real);
with recursive r(i) as (select 1 union all select i+1 from r where i < 5000)
insert into t select i, printf('row%05d', (i*7919)%10007), i*1.5 from r;
create index tb on t(b);
select count(*), sum(c), min(b), max(b) from t;
select b from t where a % 997 = 0 order by b;
select substr(b,1,4), count(*) from t group by 1;
EOF
# program, then its arguments; "<FILE" as the last word: its standard input
cat > cmds.txt <<'EOF'
sort input.txt
sort -n -k1 input.txt
wc input.txt
cat input.txt
head -n 20 input.txt
tail -n 20 input.txt
md5sum input.txt
sha256sum input.txt
base64 input.txt
tr a-z A-Z <input.txt
cut -d' ' -f1 input.txt
uniq -c input.txt
seq 1 3 1000
factor 1234567891 600851475143 97
expr length abcdef + 3
od -A x -t x1z input.txt
date -u -d @0
printf %s-%d: a 1 b 2
lua5.4 bench.lua
sqlite3 -batch :memory: <bench.sql
EOF
fail=0
# same DRV LINE: the original and the rewritten program of LINE print and exit alike
same() {
    local drv=$1 b args inp=/dev/null
    read -r b args <<< "$2"
    case $args in *"<"*) inp=${args##*<}; args=${args%<*} ;; esac
    LP=$LIBS
    # shellcheck disable=SC2086
    run "$(where "$b")" $args < "$inp" > o1 2> e1
    local r1=$?
    # shellcheck disable=SC2086
    QP_PROFILE=$W/$drv/$b.qp run "$W/$drv/$b" $args < "$inp" > o2 2> e2
    local r2=$?
    sed -i "s|$W/$drv/$b|$(where "$b")|g" e2
    if [ $r1 -ne $r2 ] || ! cmp -s o1 o2 || ! cmp -s e1 e2; then
        echo "FAIL: $drv: $2: differs (exit $r1, $r2)"
        fail=1
        return 1
    fi
}
for drv in none qp naive; do
    mkdir -p "$W/$drv"
    ok=0 n=0
    while read -r line; do
        b=${line%% *}
        n=$((n + 1))
        if [ ! -e "$W/$drv/$b" ] &&
            ! "$REWRITE" --driver=$drv "$(where "$b")" -o "$W/$drv/$b" 2> "$W/$drv/$b.log"; then
            echo "FAIL: $drv: $b: $(tail -n 1 "$W/$drv/$b.log")"
            fail=1
            continue
        fi
        same $drv "$line" && ok=$((ok + 1))
    done < cmds.txt
    echo "a64-real: $drv: $ok of $n runs identical"
done
"$QP" report --limit 5 "$W/qp/lua5.4.qp" 2>&1 | sed -n '1,9p'
# Libraries, null rewrite
mkdir -p "$W/libs"
for l in libsqlite3.so.0 libgmp.so.10; do
    "$REWRITE" --driver=none "$R/usr/lib/aarch64-linux-gnu/$l" -o "$W/libs/$l" 2> "$W/libs/$l.log" ||
        { echo "FAIL: none: $l: $(tail -n 1 "$W/libs/$l.log")"; fail=1; exit $fail; }
done
LP=$LIBS
run "$R/usr/bin/sqlite3" -batch :memory: < bench.sql > o1 2>&1
run "$R/usr/bin/factor" 1234567891 600851475143 123456789012345678901234567890 >> o1 2>&1
LP=$W/libs:$LIBS
run "$R/usr/bin/sqlite3" -batch :memory: < bench.sql > o2 2>&1
run "$R/usr/bin/factor" 1234567891 600851475143 123456789012345678901234567890 >> o2 2>&1
if cmp -s o1 o2; then
    echo "a64-real: libsqlite3.so.0, libgmp.so.10 (none) under sqlite3 and factor: identical"
else
    echo "FAIL: libsqlite3.so.0 or libgmp.so.10 rewritten with none: sqlite3 or factor differs"
    fail=1
fi
# Instructions executed (the whole process, ld.so and libc included)
count() { # LOG: the sum over executed blocks of their instructions
    python3 "$HERE/../tests/qemu-icount.py" "$1"
}
if command -v python3 > /dev/null; then
    LP=$LIBS
    line="lua5.4 (bench.lua 4000), instructions:"
    for v in native none qp naive; do
        b=$W/$v/lua5.4
        [ $v = native ] && b=$R/usr/bin/lua5.4
        QP_PROFILE=$W/run/count.$v.qp run -d in_asm,exec,nochain -D "$W/run/q.log" "$b" bench.lua 4000 > /dev/null
        line="$line $v $(count "$W/run/q.log")"
        rm -f "$W/run/q.log"
    done
    echo "a64-real: $line"
    line="sqlite3 (bench.sql), instructions:"
    for v in native none; do
        LP=$LIBS
        [ $v = none ] && LP=$W/libs:$LIBS
        run -d in_asm,exec,nochain -D "$W/run/q.log" "$R/usr/bin/sqlite3" -batch :memory: < bench.sql > /dev/null
        line="$line $v $(count "$W/run/q.log")"
        rm -f "$W/run/q.log"
    done
    echo "a64-real: $line (libsqlite3.so.0 rewritten)"
fi
exit $fail
