#!/usr/bin/env bash
# bench-preload: cost per malloc(64)+free pair of the LD_PRELOAD fallback,
# side by side in one run (repetitions interleaved, medians):
#   untraced    the loop alone
#   bare        a bare LD_PRELOAD logger writing 32-byte binary records
#               with write(2) (fallback-preload/bench/bare_logger.c): the floor
#   memtrace    memtrace --preload -o FILE, end to end: binary records in
#               shared memory, converted to the text log by memtrace while
#               the loop runs (the conversion shows here only as contention)
#   stacks      memtrace --preload -o FILE with the default stacks (the
#               frames of every malloc and free; issue 35: at or under
#               heaptrack -r, which keeps the malloc's stack only)
#   text        LD_PRELOAD=memtrace-preload.so MEMTRACK_OUTPUT=FILE: the
#               library formatting and writing text itself (drop-in mode)
#   heaptrack   heaptrack -r (record only; Debian's heaptrack package)
#   base        with MEMTRACE_BASE=BINARY: that memtrace --preload with the
#               default stacks, as "stacks" (another build side by side;
#               MEMTRACE_BASE_LIB names its library, else its embedded one)
# Every traced run logs to a real file. ns per pair is measured inside the
# loop (tests/progs/bench_loop), so start-up and the final drain are apart;
# memtrace's end-to-end wall time is printed too.
# Usage: scripts/bench-preload.sh [PAIRS] [REPS]   (default 1000000 pairs, 7 reps)
# The exit status is 1 when a target printed below is not met.
# The machine's load average is printed before and after: with 2 vCPUs,
# other jobs are measured too; repeat when it is high.
# Needs: gcc, make, go, heaptrack (optional: its column is skipped).
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
# memtrace built from this tree ($MEMTRACE names another one); the library
# is named explicitly, so an older embedded copy is never measured.
if [ -z "${MEMTRACE:-}" ]; then
	if go build -o "$OUT/memtrace" ./cmd/memtrace; then
		MEMTRACE=$OUT/memtrace
	elif [ -x bin/memtrace ]; then
		echo "cmd/memtrace does not build: measuring bin/memtrace (its converter may be older)" >&2
		MEMTRACE=$PWD/bin/memtrace
	else
		echo "cmd/memtrace does not build and there is no bin/memtrace: fix the build or set MEMTRACE" >&2
		exit 1
	fi
fi
export MEMTRACE_PRELOAD_LIB=$LIB

have_heaptrack=1
command -v heaptrack >/dev/null || { have_heaptrack=0; echo "heaptrack not installed (apt-get install heaptrack): its column is skipped" >&2; }

# Each run prints the loop's own ns per pair, wall and the thread's CPU
# ("cpu N"); the last of each is taken, as "WALL CPU".
run_one() {
	case $1 in
	untraced) "$LOOP" "$PAIRS" 64 ;;
	bare) LD_PRELOAD=$OUT/bare_logger.so BARE_OUTPUT=$OUT/bare.bin "$LOOP" "$PAIRS" 64 ;;
	memtrace)
		local t0 t1
		t0=$(date +%s%N)
		"$MEMTRACE" --preload --stack-depth 0 -o "$OUT/memtrace.log" -- "$LOOP" "$PAIRS" 64 2>>"$OUT/memtrace.err"
		t1=$(date +%s%N)
		echo "$(( (t1 - t0) / 1000000 ))" >>"$OUT/wall.ms" ;;
	stacks) "$MEMTRACE" --preload -o "$OUT/stacks.log" -- "$LOOP" "$PAIRS" 64 2>>"$OUT/memtrace.err" ;;
	base)
		if [ -n "${MEMTRACE_BASE_LIB:-}" ]; then
			MEMTRACE_PRELOAD_LIB=$MEMTRACE_BASE_LIB "$MEMTRACE_BASE" --preload -o "$OUT/base.log" -- "$LOOP" "$PAIRS" 64 2>>"$OUT/memtrace.err"
		else
			env -u MEMTRACE_PRELOAD_LIB "$MEMTRACE_BASE" --preload -o "$OUT/base.log" -- "$LOOP" "$PAIRS" 64 2>>"$OUT/memtrace.err"
		fi ;;
	text) LD_PRELOAD=$LIB MEMTRACK_OUTPUT=$OUT/text.log "$LOOP" "$PAIRS" 64 ;;
	heaptrack) heaptrack -r -o "$OUT/heaptrack" "$LOOP" "$PAIRS" 64 2>&1 ;;
	esac | awk '/^[0-9.]+$/ {w = $1} /^cpu [0-9.]+$/ {c = $2} END {print w, c}'
}

modes="untraced bare memtrace stacks text"
[ $have_heaptrack = 1 ] && modes="$modes heaptrack"
[ -n "${MEMTRACE_BASE:-}" ] && modes="$modes base"
declare -A all cpu
echo "load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
for r in $(seq "$REPS"); do
	for m in $modes; do
		read -r v c < <(run_one "$m")
		all[$m]="${all[$m]:-} $v"
		cpu[$m]="${cpu[$m]:-} $c"
	done
done
echo "load average after the runs:  $(cut -d' ' -f1-3 /proc/loadavg)"

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A med cmed
printf '%-10s %9s %9s   %s\n' mode "ns/pair" "cpu ns" "(medians of $REPS runs of $PAIRS malloc(64)+free pairs; all runs: wall / the loop thread's CPU)"
for m in $modes; do
	med[$m]=$(echo "${all[$m]}" | median)
	cmed[$m]=$(echo "${cpu[$m]}" | median)
	printf '%-10s %9.1f %9.1f   %s /%s\n' "$m" "${med[$m]}" "${cmed[$m]}" "${all[$m]}" "${cpu[$m]}"
done
printf 'memtrace end to end (start, loop, conversion, exit): median %s ms\n' "$(tr '\n' ' ' <"$OUT/wall.ms" | median)"
if [ -n "${MEMTRACE_BASE:-}" ]; then
	awk -v s="${med[stacks]}" -v cs="${cmed[stacks]}" -v b="${med[base]}" -v cb="${cmed[base]}" 'BEGIN {
		printf "stacks / base (%s): %.2fx wall, %.2fx the loop thread CPU\n", ENVIRON["MEMTRACE_BASE"], s / b, cs / cb }'
fi
lines=$(wc -l <"$OUT/memtrace.log")
lost=$(grep -c '^\[memtrace\] lost ' "$OUT/memtrace.log" || true)
printf 'memtrace log: %s lines, %s bytes, %s lost lines (a real file in %s)\n' "$lines" "$(stat -c %s "$OUT/memtrace.log")" "$lost" "$OUT"
awk -v m="${med[memtrace]}" -v s="${med[stacks]}" -v cs="${cmed[stacks]}" -v cm="${cmed[memtrace]}" -v ch="${cmed[heaptrack]:-0}" -v t="${med[text]}" -v b="${med[bare]}" -v u="${med[untraced]}" -v h="${med[heaptrack]:-0}" 'BEGIN {
	bad = 0
	v = (m <= 2 * b) ? "met" : "NOT met"
	bad += v != "met"
	printf "memtrace / bare logger:   %.2fx per pair (target <= 2x: %s)\n", m / b, v
	printf "memtrace / bare, cost above untraced: %.2fx\n", (m - u) / (b - u)
	printf "text     / bare logger:   %.2fx per pair\n", t / b
	printf "stacks   / no stacks:     %.2fx per pair (%.1f ns above; the loop thread CPU: %.1f ns above)\n", s / m, s - m, cs - cm
	if (h > 0) {
		v = (m <= 0.4 * h) ? "met" : "NOT met"
		bad += v != "met"
		printf "memtrace / heaptrack -r:  %.2fx per pair (target <= 0.4x: %s)\n", m / h, v
		printf "memtrace / heaptrack, cost above untraced: %.2fx\n", (m - u) / (h - u)
		printf "text     / heaptrack -r:  %.2fx per pair\n", t / h
		printf "malloc+free loop, --preload default stacks vs heaptrack -r, wall: %.1f vs %.1f ns a pair, %.2fx\n", s, h, s / h
		v = (cs <= ch) ? "met" : "NOT met"
		printf "malloc+free loop, --preload default stacks vs heaptrack -r: %.1f vs %.1f ns a pair (the loop thread CPU), %.2fx (target <= 1x: %s)\n", cs, ch, cs / ch, v
		# The row make bench gathers: met when both the loop thread CPU
		# and the wall time are at or under heaptrack -r; the ratio is
		# the larger of the two.
		r = (cs / ch > s / h) ? cs / ch : s / h
		v = (r <= 1) ? "met" : "NOT MET"
		bad += v != "met"
		printf "ROW|malloc+free loop (frame pointers; 3 frames), --preload default stacks vs heaptrack -r, ns a pair (loop thread CPU, wall)|%.1f cpu, %.1f wall|%.1f cpu, %.1f wall|%.2fx|<=1.0x|%s\n", cs, s, ch, h, r, v
	}
	exit bad ? 1 : 0
}'
