#!/bin/sh
# Install qpt's build dependencies from Debian's archive (needs root or sudo), then
# configure and build. Used by README's two commands and by CI.
set -eu
cd "$(dirname "$0")"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
PKGS="build-essential autoconf automake libtool pkg-config binutils-dev libelf-dev libdw-dev \
libzydis-dev liblzma-dev libzstd-dev zstd zlib1g-dev check clang lld g++ gfortran gdb valgrind file openmpi-bin libopenmpi-dev bpftrace lcov bolt-16 golang-go graphviz jq sqlite3 lua5.4 python3 strace \
gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user libc6-dbg"
missing=
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
[ -x configure ] || autoreconf -fi
[ -f Makefile ] || ./configure --enable-werror ${QP_CONFIGURE_FLAGS:-}
make -j2 >/dev/null
echo "setup: built tools/qpt-rewrite"
