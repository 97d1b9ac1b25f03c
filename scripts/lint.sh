#!/usr/bin/env bash
# lint: the hygiene gate of make test. Each check says what to run to fix it.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
fail=0
gofiles=$(git ls-files '*.go' | grep -v '_bpfel\.go$')
unformatted=$(gofmt -l $gofiles 2>&1 || true)
if [ -n "$unformatted" ]; then
	echo "lint: not gofmt'ed (run gofmt -w on them):" >&2
	echo "$unformatted" >&2
	fail=1
fi
misgrouped=$("$GO" tool goimports -local github.com/memtrace/memtrace -l $gofiles 2>&1 || true)
if [ -n "$misgrouped" ]; then
	echo "lint: imports not in goimports' order (run go tool goimports -local github.com/memtrace/memtrace -w on them):" >&2
	echo "$misgrouped" >&2
	fail=1
fi
if ! ./scripts/importgroups.sh $gofiles >&2; then
	echo "lint: imports not in three groups, standard library, third-party, github.com/memtrace/memtrace (join the groups, then run goimports as above)" >&2
	fail=1
fi
if ! "$GO" mod tidy -diff >/dev/null 2>&1; then
	echo "lint: go.mod/go.sum are not tidy: run go mod tidy" >&2
	"$GO" mod tidy -diff >&2 || true
	fail=1
fi
for arch in amd64 arm64 arm; do
	if ! GOARCH=$arch GOARM=7 CGO_ENABLED=0 "$GO" vet ./... >&2; then
		echo "lint: go vet fails for GOARCH=$arch" >&2
		fail=1
	fi
done
if ! "$GO" tool staticcheck ./... >&2; then
	echo "lint: staticcheck found the problems above" >&2
	fail=1
fi
exit $fail
