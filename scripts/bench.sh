#!/usr/bin/env bash
# make bench: every area's benchmark driver, one after the other, then the
# rows the drivers printed as `ROW|what|memtrace|reference|ratio|target|met`
# (or NOT MET) gathered into one table: the speed issue's table, each row
# measured side by side with its reference in the same driver's run.
# BENCH="preload bpf" runs only scripts/bench-preload.sh and bench-bpf.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
all="reader bpf unwind stacks preload churn viewer symbols report live sample fleet release"
status=0
rows=$(mktemp)
out=$(mktemp)
trap 'rm -f "$rows" "$out"' EXIT
for n in ${BENCH:-$all}; do
	s=scripts/bench-$n.sh
	[ -x "$s" ] || { echo "bench: no driver $s" >&2; status=1; continue; }
	echo "== $s"
	# The driver's own output stays on the terminal as it comes; its rows
	# are kept for the table.
	"$s" 2>&1 | tee "$out"
	[ "${PIPESTATUS[0]}" = 0 ] || status=1
	grep '^ROW|' "$out" >>"$rows"
done
echo
echo "== the rows (medians, side by side in each driver's run)"
echo "| what | memtrace | reference | ratio | target | |"
echo "|---|---|---|---|---|---|"
while IFS='|' read -r _ what m ref ratio target verdict; do
	echo "| $what | $m | $ref | $ratio | $target | $verdict |"
	[ "$verdict" = met ] || status=1
done <"$rows"
[ -s "$rows" ] || echo "(no rows)"
exit $status
