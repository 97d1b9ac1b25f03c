#!/usr/bin/env bash
# bench-report.sh: memtrace report at the scale of real logs (issue 6).
#
# Generates a 4-million-event log (8 threads, a quarter of the events with 4
# frames, 1 % of allocations leaked) in a temporary directory, then measures,
# interleaved, RUNS times each:
#   1. grep -c ptr= LOG  vs  memtrace report LOG (the text report)
#      -> the median ratio; the bound is 5x
#   2. memtrace report LOG with every export at once (--json --folded
#      --massif --pprof --html), for information
#   3. memtrace report LOG -d LOG (two logs read, compared)
# and the peak RSS of each.
#
# Environment: EVENTS (default 4000000), RUNS (default 5), GO (default go),
# LIMIT (default 5: exit 1 when the median ratio of step 1 is above it),
# KEEP=1 keeps the temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
EVENTS=${EVENTS:-4000000}
RUNS=${RUNS:-5}
LIMIT=${LIMIT:-5}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/report-bench.XXXXXX")
if [[ "${KEEP:-}" != 1 ]]; then trap 'rm -rf "$tmp"' EXIT; fi

echo "== memtrace report benchmark ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"
make -s build >/dev/null
$GO build -o "$tmp/genlog" ./cmd/memtrace-genlog
$GO build -o "$tmp/rusage" scripts/rusage.go

log="$tmp/big.log"
"$tmp/genlog" -events "$EVENTS" -threads 8 -stack-frac 0.25 -depth 4 -leak-frac 0.01 -o "$log"
echo "log: $EVENTS events, $(wc -l <"$log") lines, $(($(stat -c %s "$log") / 1048576)) MB"
cat "$log" >/dev/null # page cache, for both contenders alike

# measure CMD...: one run; prints wall seconds and peak RSS MB. Output goes
# to a file, not /dev/null: GNU grep stops at the first match when its
# output is /dev/null.
measure() {
	"$tmp/rusage" "$@" 2>"$tmp/rusage.err" >"$tmp/out"
	sed -n 's/^rusage wall_s=\([0-9.]*\) maxrss_mb=\([0-9]*\)$/\1 \2/p' "$tmp/rusage.err"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

exports=(--json "$tmp/r.json" --folded "$tmp/r.folded" --massif "$tmp/r.massif" --pprof "$tmp/r.pb.gz" --html "$tmp/r.html")
for f in grep text all diff; do : >"$tmp/$f.t"; done
echo
echo "== $RUNS runs each, interleaved: wall seconds (peak RSS MB)"
for i in $(seq "$RUNS"); do
	read -r gt grss < <(measure grep -c ptr= "$log")
	read -r rt rrss < <(measure bin/memtrace report "$log")
	read -r at arss < <(measure bin/memtrace report "$log" "${exports[@]}")
	read -r dt drss < <(measure bin/memtrace report "$log" -d "$log")
	echo "  run $i: grep ${gt}s (${grss})   report ${rt}s (${rrss})   report + all exports ${at}s (${arss})   report -d ${dt}s (${drss})"
	echo "$gt" >>"$tmp/grep.t"
	echo "$rt" >>"$tmp/text.t"
	echo "$at" >>"$tmp/all.t"
	echo "$dt" >>"$tmp/diff.t"
done
g=$(median <"$tmp/grep.t")
r=$(median <"$tmp/text.t")
a=$(median <"$tmp/all.t")
d=$(median <"$tmp/diff.t")
ratio=$(awk -v r="$r" -v g="$g" 'BEGIN { printf "%.2f", r / g }')
echo
echo "median: grep -c ptr= ${g}s, memtrace report ${r}s: ${ratio}x grep (bound ${LIMIT}x)"
echo "        with every export ${a}s ($(awk -v a="$a" -v g="$g" 'BEGIN { printf "%.2f", a / g }')x), with -d LOG ${d}s"
ls -l "$tmp"/r.* | awk '{ printf "        %s %d KB\n", $NF, $5 / 1024 }'
awk -v x="$ratio" -v l="$LIMIT" 'BEGIN { exit !(x <= l) }' || { echo "FAIL: above ${LIMIT}x"; exit 1; }
