#!/usr/bin/env bash
# make soak: the long version of the fault loops in make test (issue 21,
# tests/faults_rounds_test.go): TestFaultRounds with ROUNDS (default 200)
# rounds per scenario instead of 20, the signals taking turns. Prints, per
# scenario and fault, the rounds, those that left a process of the
# program's tree stopped, those that left a BPF program or link of memtrace
# behind, and those that failed otherwise (status, result, a memtrace that
# did not exit). SCENARIO=attach-dlopen runs one scenario;
# MEMTRACE_FAULT_SEED replays a run's moments (the log names its seed).
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
ROUNDS=${ROUNDS:-200}
for f in bin/memtrace tests/progs/build/dlloop tests/progs/build/forkexec; do
	[ -x "$f" ] || { echo "soak: $f is missing: run make build progs first" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "soak: needs root for BPF" >&2; exit 1; }
summary=$(mktemp)
log=$(mktemp --suffix=.soak.log)
trap 'rm -f "$summary"' EXIT
echo "soak: $ROUNDS rounds per scenario; go test's output goes to $log"
start=$(date +%s)
MEMTRACE_FAULT_ROUNDS=$ROUNDS MEMTRACE_FAULT_SUMMARY=$summary \
	"$GO" test -count=1 -timeout 8h -run "TestFaultRounds/${SCENARIO:-}" -v ./tests >"$log" 2>&1
status=$?
grep -m1 -o 'seed [0-9]*' "$log" || true
awk 'BEGIN { printf "%-24s %-40s %7s %8s %9s %6s %12s %11s\n", "scenario", "fault", "rounds", "stopped", "leftover", "other", "not-started", "mean-round" }
	{ for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	  printf "%-24s %-40s %7s %8s %9s %6s %12s %11s\n", $1, $2, v["rounds"], v["stopped"], v["leftover"], v["other"], v["not-started"], v["mean-round"] }' "$summary"
echo "soak: $(( $(date +%s) - start )) s, go test exit status $status"
exit $status
