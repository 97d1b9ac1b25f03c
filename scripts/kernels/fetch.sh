#!/usr/bin/env bash
# fetch.sh [KVER]...: downloads and unpacks the matrix's kernels (all of
# them without arguments) into the cache, once (docs/kernels.md); make deps
# runs it so that make kernels needs no network. MEMTRACE_KERNEL_ARCH=arm64:
# the arm64 kernels (6.1 and 6.12).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
kernel_arch
[ $# -gt 0 ] || set -- 5.10 6.1 6.12
for kver in "$@"; do
	kdir=$(kernel_root "$kver")
	echo "kernels: $kver: $(cat "$kdir/package")"
done
