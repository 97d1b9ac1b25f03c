#!/usr/bin/env bash
# make check's tests: every package with -short, and the tests package (the
# integration tests, most of them waiting on traced programs) one test per
# process from a queue that CHECK_SHARDS workers take from, beside the
# other packages, so that the loop uses both CPUs of a small machine. The
# queue starts with the tests that took longest the last time (their times
# are kept in bin/check/times), so that no worker is left with a long test
# at the end. CHECK_FULL=1 runs make test's tests the same way: without
# -short (every test in full), no cached package results, its own times
# file (docs/development.md: why make test does not use it yet).
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$GO" test -c -o "$tmp/tests.test" ./tests || exit 1
mapfile -t names < <(cd tests && "$tmp/tests.test" -test.list '.*' | grep '^Test')
times=bin/check/times
short=(-short)
tshort=-test.short
tmo=10m
if [ "${CHECK_FULL:-0}" = 1 ]; then
	times=bin/check/times-full
	short=()
	tshort=-test.short=false
	tmo=30m
fi
mkdir -p bin/check "$tmp/out"
# Longest first by the last run's seconds; a test not timed yet goes first.
# Without a last run (a clean clone: CI), scripts/check-first names the
# tests that took longest when it was written, longest first, and the
# others follow.
first=/dev/null
[ -s "$times" ] || first=scripts/check-first
mapfile -t names < <(printf '%s\n' "${names[@]}" | awk -v f="$times" -v s="$first" '
	BEGIN {
		while ((getline l <f) > 0) { split(l, a, " "); secs[a[2]] = a[1] }
		n = 0
		while ((getline l <s) > 0) secs[l] = 2e9 - n++
	}
	{ print ($1 in secs ? secs[$1] : 1e9), $1 }' | sort -k1,1gr -s | cut -d' ' -f2)
# More workers than CPUs: the tests wait on traced programs and on the
# kernel as much as they compute.
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
# reads (the C library, the BPF objects, testdata built with gcc): so every
# other input's hash, with the kernel's release, is made part of the cache
# key through -run, whose second alternative matches no test. bin/ is not
# an input: no package's test runs what is there (cmd/memtrace's install
# test builds its own), and all of it is made from the sources hashed here
# or tracked by Go, so a change to one package's Go code reruns only the
# packages that depend on it. The documents (*.md) are not inputs either:
# the tests that read one read it themselves (Go tracks it), and the one
# program that reads them for a test, cmd/memtrace's make install, copies
# them for a test that looks only at which there are (the directory's
# listing, which Go tracks): an edited document reran every package.
# CHECK_CACHE=0 runs them all (-count=1).
inputs=$({
	uname -r
	git ls-files -co --exclude-standard -z | grep -zv -e '\.go$' -e '\.md$' | xargs -0 sha1sum 2>/dev/null
} | sha1sum | cut -c1-16)
cache=(-run ".|^Inputs_${inputs}\$")
if [ "${CHECK_CACHE:-1}" = 0 ] || [ "${CHECK_FULL:-0}" = 1 ]; then
	cache=(-count=1)
fi
# CHECK_LINT=1 (make check) runs scripts/lint.sh beside the tests: it
# reads and compiles what they do not, and run before them it held the
# whole loop up for its wall.
if [ "${CHECK_LINT:-0}" = 1 ]; then
	timed lint ./scripts/lint.sh >"$tmp/lint.out" 2>&1 &
	pids+=($!)
fi
timed packages "$GO" test "${short[@]}" "${cache[@]}" -timeout "$tmo" $("$GO" list ./... | grep -v '/tests$') >"$tmp/pkgs.out" 2>&1 &
pids+=($!)
# one NAME: runs test NAME alone, its output in $tmp/out/NAME, its wall
# seconds and CPU seconds (user and system of the test and of every
# process it started and waited for: memtrace, the traced programs, the
# compilers) in $tmp/out/NAME.time.
one() {
	local TIMEFORMAT='%R %U %S'
	{ time (cd tests && "$tmp/tests.test" "$tshort" -test.v -test.count=1 -test.timeout="$tmo" -test.run "^$1\$" >"$tmp/out/$1" 2>&1); } 2>"$tmp/out/$1.rusage"
	awk '{ printf "%.2f %.2f\n", $1, $2 + $3 }' "$tmp/out/$1.rusage" >"$tmp/out/$1.time"
}
export -f one
export tmp tmo tshort
printf '%s\n' "${names[@]}" | timed "tests ($shards workers)" xargs -P "$shards" -I{} bash -c 'one "$1"' _ {} &
pids+=($!)
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ -s "$tmp/lint.out" ] && cat "$tmp/lint.out"
cat "$tmp/pkgs.out"
failed=0
for n in "${names[@]}"; do
	if [ "$(tail -n 1 "$tmp/out/$n" 2>/dev/null)" != PASS ]; then
		grep -v -e '^=== ' -e '^--- PASS' -e '^    --- PASS' "$tmp/out/$n" 2>/dev/null
		echo "FAIL	github.com/memtrace/memtrace/tests $n"
		failed=1
	fi
done
# bin/check/times: "wall name cpu" a line (the queue's order reads the
# first two).
for n in "${names[@]}"; do
	[ -s "$tmp/out/$n.time" ] && read -r w c <"$tmp/out/$n.time" && echo "$w $n $c"
done >"$times.new" && mv "$times.new" "$times"
if [ $failed = 0 ]; then
	echo "ok  	github.com/memtrace/memtrace/tests (${#names[@]} tests, $shards workers)"
else
	status=1
fi
# The slowest integration tests: what to look at when the loop grows.
echo "slowest tests (wall s, while sharing the CPUs; CPU s):"
sort -rn "$times" | head -n 12 | awk '{ printf "  %s %s (CPU %s)\n", $1, $2, $3 }'
echo "costliest tests (CPU s: the test, memtrace and the programs it ran):"
sort -k3,3gr "$times" | head -n 12 | awk '{ printf "  %s %s\n", $3, $2 }'
awk '{ c += $3 } END { printf "tests package: %.0f CPU s over %d tests\n", c, NR }' "$times"
# The CPU of everything this script ran (the build of the tests, the
# packages, the tests): the figure a shared machine does not distort.
times >"$tmp/cpu"
cpu=$(tr 'ms\n' '   ' <"$tmp/cpu" | awk '{ printf "%.0f", $5 * 60 + $6 + $7 * 60 + $8 }')
echo "check: $((SECONDS - start)) s, $cpu CPU s ($(sort "$tmp/times" | paste -sd, | sed 's/,/, /g'))"
exit $status
