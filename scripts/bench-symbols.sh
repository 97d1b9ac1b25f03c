#!/bin/sh
# Symbolization throughput (frames per second), cold and warm cache, next to
# binutils addr2line over the same addresses in the same run.
#   BENCHTIME (default 2s) is passed to -benchtime.
set -eu
cd "$(dirname "$0")/.."
BENCHTIME=${BENCHTIME:-2s}
out=$(go test ./symbols -run '^$' -bench 'BenchmarkResolve|BenchmarkAddr2lineBaseline' -benchtime "$BENCHTIME" -count 1)
echo "$out" | grep -E '^(Benchmark|goos|goarch|cpu|ok|FAIL)' || true
echo "$out" | awk '
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	for (i = 2; i < NF; i++) if ($(i+1) == "frames/s") fps[name] = $i
}
END {
	print ""
	printf "%-22s %15s\n", "symbols benchmark", "frames/s"
	split("ResolveCold ResolveWarm ResolveSourceCold ResolveSourceWarm Addr2lineBaseline", order, " ")
	for (i = 1; i <= 5; i++) if (order[i] in fps) printf "%-22s %15.0f\n", order[i], fps[order[i]]
	if (fps["Addr2lineBaseline"] > 0) {
		print ""
		printf "source lines, cold cache vs addr2line -f -i: %.1fx\n", fps["ResolveSourceCold"] / fps["Addr2lineBaseline"]
		printf "source lines, warm cache vs addr2line -f -i: %.1fx\n", fps["ResolveSourceWarm"] / fps["Addr2lineBaseline"]
	}
	if (fps["ResolveCold"] > 0)
		printf "symbols, warm vs cold cache: %.1fx\n", fps["ResolveWarm"] / fps["ResolveCold"]
}'
