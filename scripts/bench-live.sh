#!/usr/bin/env bash
# The live endpoint (--http, -o none; issue 16):
#   1. what it costs the traced program per malloc+free pair, side by side
#      with the floor (empty probes) and memtrace writing a log: the loop
#      of scripts/bench-bpf.sh, rounds interleaved, medians;
#   2. the 10-minute soak: TestLiveSoak with MEMTRACE_SOAK=10m (a program
#      doing ~100k allocations a second over a steady live set, memtrace's
#      RSS sampled from /proc, bounded growth asserted);
#   3. the same soak with --sample 512K --stack-depth 32 (TestSampleSoak,
#      issue 25): memtrace's CPU share of one core (target <= 5 %) and
#      its RSS over the soak.
# SOAK=0 skips the soak; SOAK=2m shortens it.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-300000}
ROUNDS=${ROUNDS:-7}
SOAK=${SOAK:-10m}
MT=./bin/memtrace
[ -x "$MT" ] || { echo "bench-live: build first (make build progs)" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then echo "bench-live: needs root for BPF" >&2; exit 1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -fno-omit-frame-pointer -o "$tmp/loop" tests/bench/loop.c

declare -A res
modes="untraced floor log live log-stack8 live-stack8"
for r in $(seq "$ROUNDS"); do
	res[untraced]+="$("$tmp/loop" "$N") "
	res[floor]+="$($MT --floor -o /dev/null -- "$tmp/loop" "$N") "
	res[log]+="$($MT --stack-depth 0 -o "$tmp/log" -- "$tmp/loop" "$N") "
	res[live]+="$($MT --stack-depth 0 -o none --http 127.0.0.1:0 -- "$tmp/loop" "$N" 2>/dev/null) "
	res[log-stack8]+="$($MT --stack-depth 8 -o "$tmp/log8" -- "$tmp/loop" "$N") "
	res[live-stack8]+="$($MT --stack-depth 8 -o none --http 127.0.0.1:0 -- "$tmp/loop" "$N" 2>/dev/null) "
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A med
echo "malloc+free pairs: $N per run, $ROUNDS rounds, median ns per pair"
for m in $modes; do
	med[$m]=$(echo "${res[$m]}" | median)
	printf "  %-14s %10s ns   (runs: %s)\n" "$m" "${med[$m]}" "${res[$m]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
per_event() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (a - b) / 2 }'; }
echo "  live / floor: $(ratio "${med[live]}" "${med[floor]}")x, log / floor: $(ratio "${med[log]}" "${med[floor]}")x"
echo "  per event over the floor: live $(per_event "${med[live]}" "${med[floor]}") ns, log $(per_event "${med[log]}" "${med[floor]}") ns; over untraced: live $(per_event "${med[live]}" "${med[untraced]}") ns"
echo "  with 8 frames: live $(per_event "${med[live-stack8]}" "${med[untraced]}") ns, log $(per_event "${med[log-stack8]}" "${med[untraced]}") ns per event over untraced"
echo "  load: $(cut -d' ' -f1-3 /proc/loadavg)"

if [ "$SOAK" != 0 ]; then
	echo "soak: TestLiveSoak for $SOAK"
	MEMTRACE_REQUIRE_BPF=1 MEMTRACE_SOAK=$SOAK go test ./tests -run '^TestLiveSoak$' -v -count=1 -timeout 30m | grep -E 'soak|PASS|FAIL|ok'
	echo "sampled soak: TestSampleSoak for $SOAK"
	MEMTRACE_REQUIRE_BPF=1 MEMTRACE_SOAK=$SOAK go test ./tests -run '^TestSampleSoak$' -v -count=1 -timeout 30m | grep -E 'soak|PASS|FAIL|ok'
fi
