#!/usr/bin/env bash
# fetch.sh [KVER | arm64/KVER]...: downloads and unpacks the matrix's
# kernels (all of them without arguments: 5.10, 6.1, 6.12, arm64/6.12,
# arm64/6.1, and the arm64 guest's busybox and libraries) into the cache,
# once (docs/kernels.md);
# make deps runs it so that make kernels needs no network.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
[ $# -gt 0 ] || set -- 5.10 6.1 6.12 arm64/6.12 arm64/6.1
arch=${MEMTRACE_KERNEL_ARCH:-amd64}
for k in "$@"; do
	case "$k" in
	arm64/*) MEMTRACE_KERNEL_ARCH=arm64 ;;
	*) MEMTRACE_KERNEL_ARCH=$arch ;;
	esac
	kernel_arch
	kdir=$(kernel_root "${k#arm64/}")
	if [ "$KARCH" != "$(dpkg --print-architecture)" ]; then
		guest_busybox >/dev/null
		root=$(guest_root)
		echo "kernels: $k: $(cat "$kdir/package"), on $(paste -sd, "$root/packages" | sed 's/,/, /g')"
		continue
	fi
	echo "kernels: $k: $(cat "$kdir/package")"
done
