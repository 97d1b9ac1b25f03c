#!/usr/bin/env bash
# bench-viewer.sh: memview at the scale of real logs (issue 4).
#
# Generates a 4-million-event log (8 threads, a quarter of the events with 4
# frames, 1 % of allocations leaked) in a temporary directory, then measures,
# side by side in one run:
#   1. grep -c ptr= LOG  vs  memview --dump-threads LOG  (wall time, ratio, peak RSS)
#   2. opening the log as the TUI does (full model: load time, peak RSS)
#   3. keypress → redraw latency at that size (Go benchmark, SimulationScreen)
#   4. follow mode against a writer at full speed (lag after the writer ends)
#
# Environment: EVENTS (default 4000000), RUNS (default 5), GO (default go),
# KEEP=1 keeps the temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
EVENTS=${EVENTS:-4000000}
RUNS=${RUNS:-5}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/memview-bench.XXXXXX")
if [[ "${KEEP:-}" != 1 ]]; then trap 'rm -rf "$tmp"' EXIT; fi

echo "== memview benchmark ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"
$GO build -o "$tmp/memview" ./cmd/memview
$GO build -o "$tmp/genlog" ./cmd/memtrace-genlog
$GO build -o "$tmp/rusage" scripts/rusage.go

log="$tmp/big.log"
"$tmp/genlog" -events "$EVENTS" -threads 8 -stack-frac 0.25 -depth 4 -leak-frac 0.01 -o "$log"
echo "log: $EVENTS events, $(wc -l <"$log") lines, $(($(stat -c %s "$log") / 1048576)) MB"
cat "$log" >/dev/null # page cache, for both contenders alike

# measure CMD...: one run, prints wall seconds and peak RSS MB. Output goes
# to a file, not /dev/null: GNU grep stops at the first match when its
# output is /dev/null.
measure() {
	"$tmp/rusage" "$@" 2>"$tmp/rusage.err" >"$tmp/out"
	sed -n 's/^rusage wall_s=\([0-9.]*\) maxrss_mb=\([0-9]*\)$/\1 \2/p' "$tmp/rusage.err"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo
echo "== 1. grep -c ptr= vs memview --dump-threads ($RUNS runs each, interleaved)"
: >"$tmp/grep.t"
: >"$tmp/dump.t"
: >"$tmp/dump.rss"
for i in $(seq "$RUNS"); do
	read -r gt grss < <(measure grep -c ptr= "$log")
	read -r dt drss < <(measure "$tmp/memview" --dump-threads "$log")
	echo "  run $i: grep ${gt}s (${grss} MB)   memview --dump-threads ${dt}s (${drss} MB)"
	echo "$gt" >>"$tmp/grep.t"
	echo "$dt" >>"$tmp/dump.t"
	echo "$drss" >>"$tmp/dump.rss"
done
g=$(median <"$tmp/grep.t")
d=$(median <"$tmp/dump.t")
r=$(sort -g "$tmp/dump.rss" | tail -1)
awk -v g="$g" -v d="$d" -v r="$r" 'BEGIN {
	printf "  median: grep %.3fs, memview --dump-threads %.3fs: ratio %.2fx (target <= 5x); peak RSS %d MB (target <= 300 MB)\n", g, d, d / g, r }'

echo
echo "== 2. opening the log in the TUI (full model, as memview LOG loads it)"
for i in $(seq 3); do
	"$tmp/memview" --load-stats "$log" | sed 's/^/  /'
done

echo
echo "== 3. keypress → redraw at this size (model + render into a 200x60 SimulationScreen)"
MEMTRACE_BENCH_LOG="$log" $GO test -run '^$' -bench 'Keypress|Search' -benchtime 20x ./viewer |
	awk '/^Benchmark/ { printf "  %-40s %8.2f ms\n", $1, $3 / 1e6 }'

echo
echo "== 4. follow mode vs a writer at full speed (2M events, flushed every 1000)"
live="$tmp/live.log"
: >"$live"
"$tmp/memview" --follow-bench "$live" >"$tmp/follow.out" &
fpid=$!
t0=$(date +%s%N)
"$tmp/genlog" -events 2000000 -threads 8 -follow -o "$live"
t1=$(date +%s%N)
wait "$fpid"
read -r _ caught _ allocs _ bytes <"$tmp/follow.out"
awk -v t0="$t0" -v t1="$t1" -v c="$caught" -v b="$bytes" -v n="$allocs" 'BEGIN {
	w = (t1 - t0) / 1e9; lag = (c - t1) / 1e9; if (lag < 0) lag = 0
	printf "  writer: %.2fs for %d MB (%.0f MB/s); memview caught up %.3fs after the writer ended (%d allocations)\n", w, b / 1048576, b / 1048576 / w, lag, n }'
