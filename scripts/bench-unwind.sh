#!/usr/bin/env bash
# The stack walks' cost per malloc+free pair, side by side in one run
# (rounds interleave the modes, so drift on a shared machine hits all of
# them alike; figures are medians over the rounds):
#   untraced   the loop alone
#   floor      empty programs on the same probe points (memtrace --floor)
#   nostack    memtrace without stacks
#   fp         memtrace --stack-depth $DEPTH --stack-unwind fp, the loop built
#              WITH frame pointers (the kernel's frame-pointer walk)
#   dwarf      memtrace --stack-depth $DEPTH, the loop built WITHOUT frame
#              pointers (the DWARF walk over the .eh_frame tables)
# each with the loop called from main (CALLS=0: 5 frames a stack) and $CALLS
# calls deeper. Then, in runs of their own with kernel.bpf_stats_enabled=1
# (restored after): the BPF programs' time per run (bpftool), the walk's
# frames per second, and memtrace's own CPU time.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-300000}
ROUNDS=${ROUNDS:-9}
DEPTH=${DEPTH:-32}
CALLS=${CALLS:-16}
MT=./bin/memtrace
[ -x "$MT" ] || { echo "bench-unwind: build first (make build)" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then echo "bench-unwind: needs root for BPF" >&2; exit 1; fi
tmp=$(mktemp -d)
stats_was=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled="$stats_was"; rm -rf "$tmp"' EXIT
gcc -O2 -fomit-frame-pointer -o "$tmp/nofp" tests/bench/unwind_loop.c
gcc -O2 -fno-omit-frame-pointer -o "$tmp/fp" tests/bench/unwind_loop.c

lost() { sed -n 's/.*summary .*lost=\([0-9]*\).*/\1/p' "$1"; }
declare -A res
lostsum=0
modes=""
for c in 0 "$CALLS"; do
	modes+="untraced/$c floor/$c nostack/$c fp/$c dwarf/$c "
done
for r in $(seq "$ROUNDS"); do
	for c in 0 "$CALLS"; do
		res[untraced/$c]+="$("$tmp/nofp" "$N" "$c") "
		res[floor/$c]+="$($MT --floor -o /dev/null -- "$tmp/nofp" "$N" "$c") "
		res[nostack/$c]+="$($MT --stack-depth 0 -o "$tmp/log" -- "$tmp/nofp" "$N" "$c") "
		res[fp/$c]+="$($MT --stack-depth "$DEPTH" --stack-unwind fp -o "$tmp/log" -- "$tmp/fp" "$N" "$c") "
		l=$(lost "$tmp/log")
		[ "$l" = 0 ] || { echo "round $r: fp/$c lost $l records" >&2; lostsum=$((lostsum + l)); }
		res[dwarf/$c]+="$($MT --stack-depth "$DEPTH" -o "$tmp/log" -- "$tmp/nofp" "$N" "$c") "
		l=$(lost "$tmp/log")
		[ "$l" = 0 ] || { echo "round $r: dwarf/$c lost $l records" >&2; lostsum=$((lostsum + l)); }
		cp "$tmp/log" "$tmp/dwarf$c.log"
	done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
paired() {
	paste <(echo "${res[$1]}" | tr ' ' '\n' | grep -v '^$') <(echo "${res[$2]}" | tr ' ' '\n' | grep -v '^$') |
		awk '{ print $1 / $2 }' | median | awk '{ printf "%.2f", $1 }'
}
frames() { awk '/ malloc /{s=1; n=0; next} s && /#[0-9]/{n++; next} s{print n; exit}' "$1"; }
echo "malloc+free pairs: $N per run, $ROUNDS rounds, --stack-depth $DEPTH, median ns per pair"
for m in $modes; do
	printf "  %-14s %10s ns   (runs: %s)\n" "$m" "$(echo "${res[$m]}" | median)" "${res[$m]}"
done
for c in 0 "$CALLS"; do
	echo "  $((c + 5)) frames a stack (the DWARF log's first malloc has $(frames "$tmp/dwarf$c.log")):"
	echo "    dwarf / fp:      $(paired "dwarf/$c" "fp/$c")x   (target <= 1.3x; median of per-round ratios)"
	echo "    dwarf / nostack: $(paired "dwarf/$c" "nostack/$c")x;  fp / nostack: $(paired "fp/$c" "nostack/$c")x;  nostack / floor: $(paired "nostack/$c" "floor/$c")x"
done
echo "  lost records with stacks, all runs: $lostsum (default buffer)"

# Time inside the BPF programs, from the kernel's own counters, and
# memtrace's own CPU time (getrusage of itself, not of the program):
# memtrace -v prints both at the end.
sysctl -qw kernel.bpf_stats_enabled=1
sample() { # mode build calls
	local mode=$1 bin=$2 c=$3 args=(--stack-depth 0)
	case $mode in
	dwarf) args=(--stack-depth "$DEPTH") ;;
	fp) args=(--stack-depth "$DEPTH" --stack-unwind fp) ;;
	esac
	$MT -v "${args[@]}" -o "$tmp/slog" -- "$bin" $((N * 2)) "$c" >/dev/null 2>"$tmp/serr"
	sed -n "s|^memtrace: program \(mt_[a-z_]*\): \([0-9]*\) runs, \([0-9]*\) ns a run|    $mode/$c \1 \3 ns a run (\2 runs)|p" "$tmp/serr"
	sed -n "s|^memtrace: own CPU \([0-9.]*\) s .* in \([0-9.]*\) s|\1 \2|p" "$tmp/serr" | awk -v m="$mode/$c" -v l="$(lost "$tmp/slog")" -v n=$((N * 2)) \
		'{ printf "    %s memtrace CPU %.2f s in %.2f s (%.0f%% of one CPU, %.0f ns a pair); lost %s\n", m, $1, $2, 100 * $1 / $2, $1 * 1e9 / n, l }'
}
echo "BPF program time (kernel.bpf_stats_enabled=1; mt_session runs at malloc's entry and its return, mt_free_multi at free):"
for c in 0 "$CALLS"; do
	sample nostack "$tmp/nofp" "$c"
	sample fp "$tmp/fp" "$c"
	sample dwarf "$tmp/nofp" "$c"
done | tee "$tmp/prog"
# The walk's own cost: the free program's time with a walk, less its
# time without stacks, over the frames.
fr=$(frames "$tmp/dwarf$CALLS.log")
awk -v c="$CALLS" -v fr="$fr" '
	$1 == "nostack/" c && $2 == "mt_free_multi" { base = $3 }
	$1 == "dwarf/" c && $2 == "mt_free_multi" { dw = $3 }
	$1 == "fp/" c && $2 == "mt_free_multi" { fp = $3 }
	END { if (base && dw && fr) printf "  walk of %d frames: DWARF %.0f ns (%.1f M frames/s), frame pointers %.0f ns\n", fr, dw - base, fr / (dw - base) * 1000, fp - base }' "$tmp/prog"
echo "  load: $(cut -d' ' -f1-3 /proc/loadavg)"
