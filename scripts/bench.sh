#!/usr/bin/env bash
# make bench: every area's benchmark driver, one after the other.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
for s in scripts/bench-reader.sh scripts/bench-bpf.sh scripts/bench-unwind.sh scripts/bench-stacks.sh scripts/bench-preload.sh scripts/bench-viewer.sh scripts/bench-symbols.sh scripts/bench-report.sh scripts/bench-live.sh scripts/bench-sample.sh scripts/bench-fleet.sh scripts/bench-release.sh; do
	[ -x "$s" ] || continue
	echo "== $s"
	"$s" || status=1
done
exit $status
