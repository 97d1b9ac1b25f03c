#!/usr/bin/env bash
# bench-churn: threads and processes that come and go (session 26), side
# by side in one run (rounds interleave the modes; medians, wall ms):
#   1. tests/bench/churn.c: $THREADS threads one after another, each a
#      malloc and a free: untraced, heaptrack, memtrace --preload
#      --stack-depth 8 and the eBPF path with --stack-depth 8. Rows:
#      --preload against heaptrack (target <= 0.5x) and against untraced
#      (target <= 2x: the library's cost per thread, its chunk and its
#      table of stacks sent, stays small beside a thread's own start).
#   2. A shell loop of $CHILDREN fork+exec children (/bin/true) under
#      memtrace --follow: with DWARF stacks (the default walk, whose dlopen
#      hook each child needs) against --stack-depth 0 (target <= 1.5x:
#      the hook's attach and close must not serialize the children).
# Every traced run must have traced: the closing lines' calls are checked.
# Environment: ROUNDS (5), THREADS (20000), CHILDREN (100).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-20000}
CHILDREN=${CHILDREN:-100}
MT=$PWD/bin/memtrace
[ -x "$MT" ] || { echo "bench-churn: build first (make build)" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then echo "bench-churn: needs root for BPF" >&2; exit 1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -pthread -o "$tmp/churn" tests/bench/churn.c
printf 'i=0; while [ $i -lt %d ]; do /bin/true; i=$((i+1)); done\n' "$CHILDREN" >"$tmp/loop.sh"

ms() { echo $((($2 - $1) / 1000000)); }
now() { date +%s%N; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
paired() {
	paste <(echo "${res[$1]}" | tr ' ' '\n' | grep -v '^$') <(echo "${res[$2]}" | tr ' ' '\n' | grep -v '^$') |
		awk '{ print $1 / $2 }' | median | awk '{ printf "%.2f", $1 }'
}
# traced MODE ERR MIN: a run that traced fewer calls than MIN would time
# as a win.
traced() {
	local n
	n=$(sed -n 's/^[[:space:]]*calls to allocation functions: \([0-9]*\).*/\1/p' "$2" | tail -1)
	if [ "${n:-0}" -lt "$3" ]; then
		echo "bench-churn: $1 traced ${n:-no} calls, expected at least $3: see $2" >&2
		exit 1
	fi
}
declare -A res
echo "== bench-churn ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"

echo
echo "== 1. $THREADS threads one after another, wall ms, $ROUNDS rounds"
modes="untraced heaptrack preload bpf"
for r in $(seq "$ROUNDS"); do
	for m in $modes; do
		t0=$(now)
		case $m in
		untraced) "$tmp/churn" "$THREADS" ;;
		heaptrack) heaptrack -o "$tmp/ht" "$tmp/churn" "$THREADS" >/dev/null 2>&1 ;;
		preload) "$MT" --preload --stack-depth 8 -o "$tmp/p.log.zst" -- "$tmp/churn" "$THREADS" >/dev/null 2>"$tmp/p.err" ;;
		bpf) "$MT" --stack-depth 8 -o "$tmp/b.log.zst" -- "$tmp/churn" "$THREADS" >/dev/null 2>"$tmp/b.err" ;;
		esac
		t1=$(now)
		res[$m]+="$(ms "$t0" "$t1") "
		case $m in
		preload) traced preload "$tmp/p.err" "$THREADS" ;;
		bpf) traced bpf "$tmp/b.err" "$THREADS" ;;
		esac
	done
done
for m in $modes; do
	printf "  %-10s %7s ms   (runs: %s)\n" "$m" "$(echo "${res[$m]}" | median)" "${res[$m]}"
done
r1=$(paired preload heaptrack)
r2=$(paired preload untraced)
echo "  preload / heaptrack ${r1}x, preload / untraced ${r2}x, bpf / untraced $(paired bpf untraced)x"
v1=$(awk -v r="$r1" 'BEGIN { print (r <= 0.5) ? "met" : "NOT MET" }')
v2=$(awk -v r="$r2" 'BEGIN { print (r <= 2) ? "met" : "NOT MET" }')

echo
echo "== 2. a shell loop of $CHILDREN fork+exec children under --follow, wall ms, $ROUNDS rounds"
fmodes="f_untraced f_dwarf f_nostack"
for r in $(seq "$ROUNDS"); do
	for m in $fmodes; do
		t0=$(now)
		case $m in
		f_untraced) sh "$tmp/loop.sh" ;;
		f_dwarf) "$MT" --follow -o "$tmp/f.log" -- sh "$tmp/loop.sh" >/dev/null 2>"$tmp/f.err" ;;
		f_nostack) "$MT" --follow --stack-depth 0 -o "$tmp/f0.log" -- sh "$tmp/loop.sh" >/dev/null 2>"$tmp/f0.err" ;;
		esac
		t1=$(now)
		res[$m]+="$(ms "$t0" "$t1") "
		case $m in
		f_dwarf) traced f_dwarf "$tmp/f.err" "$CHILDREN" ;;
		f_nostack) traced f_nostack "$tmp/f0.err" "$CHILDREN" ;;
		esac
	done
done
for m in $fmodes; do
	printf "  %-10s %7s ms   (runs: %s)\n" "${m#f_}" "$(echo "${res[$m]}" | median)" "${res[$m]}"
done
r3=$(paired f_dwarf f_nostack)
echo "  dwarf / no stacks ${r3}x, no stacks / untraced $(paired f_nostack f_untraced)x"
v3=$(awk -v r="$r3" 'BEGIN { print (r <= 1.5) ? "met" : "NOT MET" }')
echo "  load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ROW|$THREADS threads one after another, --preload --stack-depth 8 vs heaptrack, wall ms|$(echo "${res[preload]}" | median)|$(echo "${res[heaptrack]}" | median)|${r1}x|<=0.5x|$v1"
echo "ROW|$THREADS threads one after another, --preload --stack-depth 8 vs untraced, wall ms|$(echo "${res[preload]}" | median)|$(echo "${res[untraced]}" | median)|${r2}x|<=2x|$v2"
echo "ROW|--follow over $CHILDREN fork+exec children, DWARF stacks vs --stack-depth 0, wall ms|$(echo "${res[f_dwarf]}" | median)|$(echo "${res[f_nostack]}" | median)|${r3}x|<=1.5x|$v3"
[ "$v1" = met ] && [ "$v2" = met ] && [ "$v3" = met ]
