#!/usr/bin/env bash
# fetch.sh [KVER]...: downloads and unpacks the matrix's kernels (all of
# them without arguments) into the cache, once (docs/kernels.md); make deps
# runs it so that make kernels needs no network.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
KARCH=amd64
KFLAVOUR=amd64
[ $# -gt 0 ] || set -- 5.10 6.1 6.12
for kver in "$@"; do
	kdir=$(kernel_root "$kver")
	echo "kernels: $kver: $(cat "$kdir/package")"
done
