#!/bin/sh
# checks.sh TESTBIN OUTDIR: runs the matrix's checks (scripts/kernels/checks)
# on the running kernel, natively or inside a guest of run.sh, from tests/
# with the compiled integration tests TESTBIN. Writes OUTDIR/NAME.log (the
# test's output) and one line per line of checks to OUTDIR/results:
#   NAME pass|fail SECONDS
# Exits 0: the results file, not the exit code, says what passed.
# POSIX sh: the arm64 guest's shell is busybox's.
#
# MEMTRACE_KERNEL_CHECKS: only these checks (names, spaces between).
# MEMTRACE_KERNEL_CROSS=TRIPLET (an arm64 guest on an x86-64 host): the
# cross builds are bound over the host's own first: bin/linux-arm64/* over
# bin/, tests/progs/build/TRIPLET over tests/progs/build.
here=$(cd "$(dirname "$0")" && pwd)
testbin=$1
out=$2
mkdir -p "$out"
: >"$out/results"
rm -f "$out"/*.log
cd "$here/../.." || exit 2
if [ -n "${MEMTRACE_KERNEL_CROSS:-}" ]; then
	for f in bin/linux-arm64/*; do
		[ -e "bin/${f##*/}" ] && mount -o bind "$f" "bin/${f##*/}"
	done
	mount -o bind "tests/progs/build/$MEMTRACE_KERNEL_CROSS" tests/progs/build || exit 2
fi
cd tests || exit 2
export MEMTRACE_REQUIRE_BPF=1
# In a guest only /tmp (and the output share) can be written.
[ -n "${MEMTRACE_KERNEL:-}" ] && export TMPDIR=/tmp
now() { cut -d' ' -f1 /proc/uptime; }
echo "kernel $(uname -r) $(uname -m)" >"$out/kernel"
# In a guest, the seconds from the kernel's start to the first check.
[ -n "${MEMTRACE_KERNEL:-}" ] && echo "boot $(now)" >>"$out/kernel"
grep -v '^[[:space:]]*#' "$here/checks" | while read -r name pattern extra; do
	[ -n "$name" ] || continue
	if [ -n "${MEMTRACE_KERNEL_CHECKS:-}" ]; then
		case " $MEMTRACE_KERNEL_CHECKS " in
		*" $name "*) ;;
		*) continue ;;
		esac
	fi
	envs=
	flags=
	for x in $extra; do
		case "$x" in
		-*) flags="$flags $x" ;;
		*=*) envs="$envs $x" ;;
		esac
	done
	start=$(now)
	from=1
	[ -f "$out/$name.log" ] && from=$(($(wc -l <"$out/$name.log") + 1))
	echo "=== checks: $pattern$envs$flags" >>"$out/$name.log"
	# shellcheck disable=SC2086 # envs and flags are words
	env $envs "$testbin" -test.run "$pattern" -test.count=1 -test.v -test.timeout "${MEMTRACE_KERNEL_CHECK_TIMEOUT:-180s}" $flags \
		>>"$out/$name.log" 2>&1 </dev/null
	rc=$?
	secs=$(awk -v s="$start" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }')
	status=pass
	# A run that matched no test passes in go test: a check that ran
	# nothing is a failure here.
	if [ $rc -ne 0 ] || tail -n +"$from" "$out/$name.log" | grep -q '^testing: warning: no tests to run' ||
		! tail -n +"$from" "$out/$name.log" | grep -q '^--- PASS'; then
		status=fail
	fi
	echo "$name $status $secs" >>"$out/results"
	echo "checks: $(uname -r) $(uname -m): $name $status ${secs}s"
done
exit 0
