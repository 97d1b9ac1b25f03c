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
# C, C++ and BPF sources in .clang-format's style (FORMAT_BPF=0 leaves
# bpf/ out, for a branch that reshapes it). bpf/include/ is vendored and
# never formatted.
FORMAT_BPF=${FORMAT_BPF:-1}
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-19}
cfiles=$(git ls-files 'fallback-preload/c/*.[ch]' 'tests/progs/*.c' 'tests/progs/*.cc' 'tests/progs/*.h' \
	'tests/bench/*.c' 'tests/bench/*.cc' 'tests/bench/*.h')
if [ "$FORMAT_BPF" = 1 ]; then
	cfiles="$cfiles $(git ls-files 'bpf/*.c' 'bpf/*.h' | grep -v '^bpf/include/')"
fi
if ! command -v "$CLANG_FORMAT" >/dev/null; then
	echo "lint: $CLANG_FORMAT is not installed: run make deps (or apt-get install clang-format-19)" >&2
	fail=1
else
	# One clang-format over every file (one start-up, not one a file);
	# only when it finds something are the files taken one by one, to
	# name them.
	misformatted=
	if ! "$CLANG_FORMAT" --dry-run --Werror $cfiles >/dev/null 2>&1; then
		misformatted=$(for f in $cfiles; do "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"; done)
		[ -n "$misformatted" ] || misformatted="$CLANG_FORMAT failed over: $cfiles"
	fi
	if [ -n "$misformatted" ]; then
		echo "lint: not clang-formatted (run $CLANG_FORMAT -i on them):" >&2
		echo "$misformatted" >&2
		fail=1
	fi
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
