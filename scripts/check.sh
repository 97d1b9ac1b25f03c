#!/usr/bin/env bash
# make check's tests: every package with -short, the tests package (the
# integration tests, most of them waiting on traced programs) in three
# shards side by side with the other packages, so that the loop uses both
# CPUs of a small machine. make test runs the same tests in one go test.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$GO" test -c -o "$tmp/tests.test" ./tests || exit 1
mapfile -t names < <(cd tests && "$tmp/tests.test" -test.list '.*' | grep '^Test')
shard() { # k n: every nth test name from the kth, as a -test.run pattern
	local out="" i
	for ((i = $1; i < ${#names[@]}; i += $2)); do out+="${out:+|}${names[i]}"; done
	echo "^($out)\$"
}
# More shards than CPUs: the tests wait on traced programs and on the
# kernel as much as they compute, and the last shard decides the time.
shards=${CHECK_SHARDS:-3}
pids=()
start=$SECONDS
timed() { # name command...: runs it, then says how long it took
	local name=$1 t0=$SECONDS rc
	shift
	"$@"
	rc=$?
	echo "$name: $((SECONDS - t0)) s" >>"$tmp/times"
	return $rc
}
# The packages' results come from Go's test cache where nothing they
# depend on changed. Go tracks their Go sources and the files and variables
# the tests read themselves, not what a compiler or program they start
# reads (the C library, the BPF objects, testdata built with gcc, bin/):
# so every other input's hash, with the kernel's release, is made part of
# the cache key through -run, whose second alternative matches no test.
# CHECK_CACHE=0 runs them all (-count=1).
inputs=$({
	uname -r
	git ls-files -co --exclude-standard -z | grep -zv '\.go$' | xargs -0 sha1sum 2>/dev/null
	# bin/kernels: make kernels' test binary and results, no input.
	find bin -path bin/kernels -prune -o -type f -exec sha1sum {} + 2>/dev/null | sort
} | sha1sum | cut -c1-16)
cache=(-run ".|^Inputs_${inputs}\$")
if [ "${CHECK_CACHE:-1}" = 0 ]; then
	cache=(-count=1)
fi
timed packages "$GO" test -short "${cache[@]}" -timeout 10m $("$GO" list ./... | grep -v '/tests$') >"$tmp/pkgs.out" 2>&1 &
pids+=($!)
for ((k = 0; k < shards; k++)); do
	(cd tests && timed "tests shard $((k + 1))" "$tmp/tests.test" -test.short -test.v -test.count=1 -test.timeout=10m -test.run "$(shard $k $shards)" >"$tmp/shard$k.out" 2>&1) &
	pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
cat "$tmp/pkgs.out"
for ((k = 0; k < shards; k++)); do
	if [ "$(tail -n 1 "$tmp/shard$k.out")" = PASS ]; then
		echo "ok  	github.com/memtrace/memtrace/tests (shard $((k + 1)) of $shards)"
	else
		grep -v -e '^=== ' -e '^--- PASS' -e '^    --- PASS' "$tmp/shard$k.out"
		echo "FAIL	github.com/memtrace/memtrace/tests (shard $((k + 1)) of $shards)"
		status=1
	fi
done
# The slowest integration tests: what to look at when the loop grows.
echo "slowest tests (wall, while sharing the CPUs):"
cat "$tmp"/shard*.out | sed -n 's/^--- \(PASS\|FAIL\|SKIP\): \(Test[^ ]*\) (\([0-9.]*\)s)$/\3 \2/p' | sort -rn | head -n 12 | sed 's/^/  /'
echo "check: $((SECONDS - start)) s ($(sort "$tmp/times" | paste -sd, | sed 's/,/, /g'))"
exit $status
