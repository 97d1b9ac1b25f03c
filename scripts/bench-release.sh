#!/usr/bin/env bash
# bench-release: how long a held process stays stopped after memtrace is
# killed by SIGKILL, with the kernel side's release at memtrace's exit and
# with the watchdog process alone (tests/release_bench_test.go).
# ROUNDS (default 30) rounds of each, killed while the target is held at a
# dlopen (-p --stack-depth 16).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
MEMTRACE_RELEASE_ROUNDS=${ROUNDS:-30} go test -count=1 -run '^TestReleaseLatency$' -v ./tests | grep -E '^release |FAIL|^ok'
