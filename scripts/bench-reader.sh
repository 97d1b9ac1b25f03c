#!/usr/bin/env bash
# bench-reader.sh: the log reader of memview and memtrace report against
# the disk's speed (issue 35): on a ~600 MB log, side by side in one run,
# interleaved, RUNS times each:
#   grep -c ptr= LOG (warm page cache)
#   memview --dump-threads LOG
#   memtrace report LOG
# and the medians, as seconds, MB/s of log text and ratios to grep, with
# the CPU seconds (user and system) beside: the machine may be shared, and
# the ratio, taken side by side, is what is held to LIMIT. Two
# logs of the same size: memtrace's (time-ordered, with a header) and
# memtrack's (per-thread buffered, frees without size=, which the reader
# keeps and re-matches at the end: memtrace-genlog -memtrack).
#
# Environment: MB (default 600, the size of each log), RUNS (default 5),
# SHAPES (default "memtrace memtrack"), GO (default go), LIMIT (default 4:
# exit 1 when a median ratio of the memtrace-shaped log is above it),
# BASE=DIR also times DIR/memview and DIR/memtrace (another build, for a
# before/after in the same run), KEEP=1 keeps the temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
MB=${MB:-600}
RUNS=${RUNS:-5}
SHAPES=${SHAPES:-memtrace memtrack}
LIMIT=${LIMIT:-4}
BASE=${BASE:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/reader-bench.XXXXXX")
if [[ "${KEEP:-}" != 1 ]]; then trap 'rm -rf "$tmp"' EXIT; fi

echo "== log reader benchmark ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"
make -s build >/dev/null
$GO build -o "$tmp/genlog" ./cmd/memtrace-genlog
$GO build -o "$tmp/rusage" scripts/rusage.go

# measure CMD...: one run; prints wall seconds, peak RSS MB and CPU
# seconds. Output goes to a file, not /dev/null: GNU grep stops at the
# first match when its output is /dev/null.
measure() {
	"$tmp/rusage" "$@" 2>"$tmp/rusage.err" >"$tmp/out" || { cat "$tmp/rusage.err" >&2; return 1; }
	echo "$(sed -n 's/^rusage wall_s=\([0-9.]*\) maxrss_mb=\([0-9]*\)$/\1 \2/p' "$tmp/rusage.err")" \
		"$(sed -n 's/^rusage cpu_s=\([0-9.]*\)$/\1/p' "$tmp/rusage.err")"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

status=0
for shape in $SHAPES; do
	flags=(-threads 8 -stack-frac 0.25 -depth 4 -leak-frac 0.01)
	[[ $shape == memtrack ]] && flags+=(-memtrack)
	# Events for MB megabytes, from the bytes per event of a small log.
	"$tmp/genlog" "${flags[@]}" -events 100000 -o "$tmp/probe.log"
	events=$((MB * 1048576 * 100000 / $(stat -c %s "$tmp/probe.log")))
	log="$tmp/$shape.log"
	"$tmp/genlog" "${flags[@]}" -events "$events" -o "$log"
	size=$(stat -c %s "$log")
	echo
	echo "== $shape-shaped log: $events events, $(wc -l <"$log") lines, $((size / 1048576)) MB"
	cat "$log" >/dev/null # page cache, for every contender alike

	names=(grep dump report)
	cmds=("grep -c ptr= $log" "bin/memview --dump-threads $log" "bin/memtrace report $log")
	if [[ -n $BASE ]]; then
		names+=(base-dump base-report)
		cmds+=("$BASE/memview --dump-threads $log" "$BASE/memtrace report $log")
	fi
	for n in "${names[@]}"; do : >"$tmp/$n.t"; : >"$tmp/$n.rss"; : >"$tmp/$n.cpu"; done
	for i in $(seq "$RUNS"); do
		line="  run $i:"
		for k in "${!names[@]}"; do
			# shellcheck disable=SC2086 # the command's words
			read -r t rss cpu < <(measure ${cmds[$k]})
			echo "$t" >>"$tmp/${names[$k]}.t"
			echo "$rss" >>"$tmp/${names[$k]}.rss"
			echo "$cpu" >>"$tmp/${names[$k]}.cpu"
			line+=" ${names[$k]} ${t}s (${cpu} CPU-s, ${rss} MB)"
		done
		echo "$line"
	done
	g=$(median <"$tmp/grep.t")
	for n in "${names[@]}"; do
		d=$(median <"$tmp/$n.t")
		r=$(sort -g "$tmp/$n.rss" | tail -1)
		c=$(median <"$tmp/$n.cpu")
		awk -v n="$n" -v g="$g" -v d="$d" -v r="$r" -v s="$size" -v c="$c" 'BEGIN {
			printf "  median %-12s %7.3f s %7.0f MB/s  %5.2fx grep  %6.2f CPU-s  peak %4d MB\n", n, d, s / 1048576 / d, d / g, c, r }'
		if [[ $shape == memtrace && ($n == dump || $n == report) ]] &&
			awk -v g="$g" -v d="$d" -v l="$LIMIT" 'BEGIN { exit !(d / g > l) }'; then
			echo "  $n: above ${LIMIT}x grep"
			status=1
		fi
	done
	rm -f "$log"
done
exit $status
