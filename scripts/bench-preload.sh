#!/usr/bin/env bash
# bench-preload: cost per malloc+free pair of the LD_PRELOAD library, side
# by side in one run with the untraced program, a bare 32-byte binary
# logger (the floor) and heaptrack's record-only mode (heaptrack -r).
# Every traced run logs to a real file. Usage:
#   scripts/bench-preload.sh [PAIRS] [REPS]     (default 1000000 pairs, 7 reps)
# memtrace = the library as shipped (a writer thread does the write(2)s);
# memtrace-sync = MEMTRACE_WRITER=0 (each thread writes its own buffers).
# Each run reuses its log file: O_TRUNC drops the last run's dirty pages, so
# that disk writeback of earlier runs does not throttle later ones. Run it
# on an otherwise idle machine: with 2 vCPUs, other load is measured too.
# Needs: gcc, make, heaptrack (Debian package heaptrack).
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-1000000}
REPS=${2:-7}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/memtrace-bench.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

make -s -C fallback-preload OUT="$PWD/bin/memtrace-preload.so"
make -s -C tests/progs build/bench_loop
gcc -O2 -fPIC -shared -ftls-model=initial-exec -o "$OUT/bare_logger.so" fallback-preload/bench/bare_logger.c -ldl
LOOP=$PWD/tests/progs/build/bench_loop
LIB=$PWD/bin/memtrace-preload.so

have_heaptrack=1
command -v heaptrack >/dev/null || { have_heaptrack=0; echo "heaptrack not installed (apt-get install heaptrack): its column is skipped" >&2; }

# Each run prints the loop's own ns per pair (bench_loop measures the loop
# with CLOCK_MONOTONIC); the last number a run prints is taken.
run_one() {
	case $1 in
	untraced) "$LOOP" "$PAIRS" 64 ;;
	memtrace) LD_PRELOAD=$LIB MEMTRACK_OUTPUT=$OUT/memtrace.log "$LOOP" "$PAIRS" 64 ;;
	memtrace-sync) MEMTRACE_WRITER=0 LD_PRELOAD=$LIB MEMTRACK_OUTPUT=$OUT/memtrace-sync.log "$LOOP" "$PAIRS" 64 ;;
	bare) LD_PRELOAD=$OUT/bare_logger.so BARE_OUTPUT=$OUT/bare.bin "$LOOP" "$PAIRS" 64 ;;
	heaptrack) heaptrack -r -o "$OUT/heaptrack" "$LOOP" "$PAIRS" 64 2>&1 | grep -E '^[0-9.]+$' ;;
	esac | grep -E '^[0-9.]+$' | tail -1
}

modes="untraced memtrace memtrace-sync bare"
[ $have_heaptrack = 1 ] && modes="$modes heaptrack"
declare -A all
echo "load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$REPS"); do
	for m in $modes; do
		v=$(run_one "$m")
		all[$m]="${all[$m]:-} $v"
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A med
printf '%-14s %10s   %s\n' mode "ns/pair" "(median of $REPS runs of $PAIRS malloc(64)+free pairs; all runs)"
for m in $modes; do
	med[$m]=$(echo "${all[$m]}" | median)
	printf '%-14s %10.1f   %s\n' "$m" "${med[$m]}" "${all[$m]}"
done
lines=$(wc -l < "$OUT/memtrace.log")
printf 'memtrace log: %s lines, %s bytes (a real file in %s)\n' "$lines" "$(stat -c %s "$OUT/memtrace.log")" "$OUT"
awk -v s="${med[memtrace-sync]}" -v m="${med[memtrace]}" -v b="${med[bare]}" -v u="${med[untraced]}" -v h="${med[heaptrack]:-0}" 'BEGIN {
	printf "memtrace / bare logger:      %.2fx per pair (target <= 2x)\n", m / b
	printf "memtrace / bare, overhead:   %.2fx (cost above untraced)\n", (m - u) / (b - u)
	printf "memtrace-sync / bare logger: %.2fx per pair\n", s / b
	if (h > 0) {
		printf "memtrace / heaptrack -r:     %.2fx per pair (target <= 0.4x)\n", m / h
		printf "memtrace / heaptrack, overhead: %.2fx (cost above untraced)\n", (m - u) / (h - u)
		printf "memtrace-sync / heaptrack -r: %.2fx per pair\n", s / h
	}
}'
