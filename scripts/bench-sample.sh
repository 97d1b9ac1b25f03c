#!/usr/bin/env bash
# --sample's cost (issue 25, docs/sampling.md): tests/progs/sample_churn
# (three sites, 16 B to 8 KiB blocks, about 105 MB live, then STEPS
# free+malloc pairs) timed inside the program, so that no tracer's
# start-up counts, in these modes, rounds interleaved so that drift on a
# shared machine hits all alike; figures are medians over the rounds:
#   untraced
#   floor       memtrace --floor (empty programs on the same probes)
#   sample512   memtrace --sample 512K --stack-depth 32 -o FILE.pb.gz
#   sample64    memtrace --sample 64K --stack-depth 32 -o FILE.pb.gz
#   full32      memtrace --stack-depth 32 -o none --http 127.0.0.1:0: every
#               event and its stack into the same live model
#   pre512      memtrace --preload --sample 512K --stack-depth 32 -o FILE.pb.gz
#   prefull32   memtrace --preload --stack-depth 32 -o none --http 127.0.0.1:0
# and the ratios to the floor and to untraced (medians of per-round
# ratios).
# Environment: ROUNDS (default 7), STEPS (1000000).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
STEPS=${STEPS:-1000000}
MT=$PWD/bin/memtrace
PROG=$PWD/tests/progs/build/sample_churn
[ -x "$MT" ] && [ -x "$PROG" ] || { echo "bench-sample: build first (make build progs)" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then echo "bench-sample: needs root for BPF" >&2; exit 1; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-sample.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "== bench-sample ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"

# ns ARGS...: the churn's own time in ns, from its stderr line.
ns() {
	"$@" 2>&1 >/dev/null | awk '$1 == "sample_churn:" { print $2 }'
}
declare -A res
modes="untraced floor sample512 sample64 full32 pre512 prefull32"
for r in $(seq "$ROUNDS"); do
	res[untraced]+="$(ns "$PROG" "$r" "$STEPS") "
	res[floor]+="$(ns "$MT" --floor -o /dev/null -- "$PROG" "$r" "$STEPS") "
	res[sample512]+="$(ns "$MT" --sample 512K --stack-depth 32 -o "$tmp/s512.pb.gz" -- "$PROG" "$r" "$STEPS") "
	res[sample64]+="$(ns "$MT" --sample 64K --stack-depth 32 -o "$tmp/s64.pb.gz" -- "$PROG" "$r" "$STEPS") "
	res[full32]+="$(ns "$MT" --stack-depth 32 -o none --http 127.0.0.1:0 -- "$PROG" "$r" "$STEPS") "
	res[pre512]+="$(ns "$MT" --preload --sample 512K --stack-depth 32 -o "$tmp/p512.pb.gz" -- "$PROG" "$r" "$STEPS") "
	res[prefull32]+="$(ns "$MT" --preload --stack-depth 32 -o none --http 127.0.0.1:0 -- "$PROG" "$r" "$STEPS") "
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# paired A B: the median of the per-round ratios A/B.
paired() {
	paste <(echo "${res[$1]}" | tr ' ' '\n' | grep -v '^$') <(echo "${res[$2]}" | tr ' ' '\n' | grep -v '^$') |
		awk '{ print $1 / $2 }' | median | awk '{ printf "%.2f", $1 }'
}
events=$(( 61000 + 2 * STEPS ))
echo "sample_churn: $events events a run ($STEPS free+malloc pairs), $ROUNDS rounds; median ms of the program's own allocation time"
for m in $modes; do
	printf "  %-10s %8.1f ms  %6.0f ns/event   (runs, ns: %s)\n" "$m" "$(echo "${res[$m]}" | median | awk '{print $1/1e6}')" \
		"$(echo "${res[$m]}" | median | awk -v e="$events" '{print $1/e}')" "${res[$m]}"
done
echo "  sample512 / floor: $(paired sample512 floor)x   sample512 / untraced: $(paired sample512 untraced)x"
echo "  sample64 / floor:  $(paired sample64 floor)x   sample64 / untraced:  $(paired sample64 untraced)x"
echo "  full32 / floor:    $(paired full32 floor)x   full32 / untraced:    $(paired full32 untraced)x"
echo "  floor / untraced:  $(paired floor untraced)x"
echo "  --preload: pre512 / untraced: $(paired pre512 untraced)x   prefull32 / untraced: $(paired prefull32 untraced)x"
echo "  load: $(cut -d' ' -f1-3 /proc/loadavg)"
