#!/usr/bin/env bash
# cross: build memtrace, memview and memtrace-preload.so for ARM with
# Debian's cross compilers (gcc-aarch64-linux-gnu, gcc-arm-linux-gnueabihf):
#   bin/linux-arm64/{memtrace,memview,memtrace-preload.so}
#   bin/linux-arm/{memtrace,memview,memtrace-preload.so}
# The library is built first so that memtrace embeds it (fallback-preload/lib/).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
build() { # goarch triplet [extra env]
	local goarch=$1 triplet=$2 out=bin/linux-$1
	shift 2
	if ! command -v "$triplet-gcc" >/dev/null; then
		echo "cross: $triplet-gcc is missing: run make deps (Debian package gcc-$triplet)" >&2
		exit 1
	fi
	mkdir -p "$out"
	make -s -C fallback-preload CC="$triplet-gcc" OUT="$PWD/$out/memtrace-preload.so"
	for cmd in memtrace memview; do
		env CGO_ENABLED=0 GOOS=linux GOARCH="$goarch" "$@" "$GO" build -o "$out/$cmd" "./cmd/$cmd"
	done
	echo "cross: built $out/ (memtrace, memview, memtrace-preload.so)"
}
build arm64 aarch64-linux-gnu
build arm arm-linux-gnueabihf GOARM=7
