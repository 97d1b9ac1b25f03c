#!/usr/bin/env bash
# make demo: trace the built-in demo program with eBPF (or the LD_PRELOAD
# fallback where BPF is unavailable), then show what memview and the report
# see in the log.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${DEMO_DIR:-$(mktemp -d)}
gcc -O1 -g -fno-omit-frame-pointer -pthread -o "$out/demo" tests/demo/demo.c
echo "== memtrace --stack-depth 8 -o $out/demo.log -- $out/demo"
./bin/memtrace --stack-depth 8 -o "$out/demo.log" -- "$out/demo"
echo "== the log: $(grep -c 'ptr=' "$out/demo.log") events; first lines:"
head -n 12 "$out/demo.log"
echo "== memview --dump-threads $out/demo.log"
./bin/memview --dump-threads "$out/demo.log"
if ./bin/memtrace report -n 3 "$out/demo.log" >"$out/report.txt" 2>&1; then
	echo "== memtrace report -n 3 $out/demo.log"
	cat "$out/report.txt"
fi
echo
echo "Browse it: ./bin/memview $out/demo.log   (press ? for keys, f for leaks, \\ to group by call site)"
