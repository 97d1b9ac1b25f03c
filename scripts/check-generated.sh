#!/usr/bin/env bash
# make check-generated: regenerate the BPF objects, the man pages, the
# shell completions (internal/cli's tables), the op lists (internal/ops)
# and the preload ABI's Go constants and fail if they differ from
# the committed ones (same clang, same headers: the build is
# deterministic).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gen=$( (find . -name '*_bpfel.go' -o -name '*_bpfel.o' | grep -v '^./.git/'; ls ./docs/man/*.1 ./completions/* ./bpf/mt_ops.h ./fallback-preload/c/mt_ops.h ./logfmt/op_gen.go ./tracer/funcs_gen.go ./fallback-preload/abi_gen.go) | sort)
for f in $gen; do mkdir -p "$tmp/$(dirname "$f")"; cp "$f" "$tmp/$f"; done
go generate ./...
status=0
for f in $gen; do
	if ! cmp -s "$f" "$tmp/$f"; then
		echo "check-generated: $f differs from its source; run make generate and commit" >&2
		status=1
	fi
done
[ $status = 0 ] && echo "check-generated: $(echo "$gen" | wc -l) generated files match their sources"
exit $status
