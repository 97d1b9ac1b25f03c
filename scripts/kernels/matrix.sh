#!/usr/bin/env bash
# matrix.sh: make kernels. Runs the checks of scripts/kernels/checks on this
# machine's kernel ("host", natively) and on each Debian kernel under QEMU
# (run.sh), prints the table of results and times and writes it to
# bin/kernels/results.md, and exits 1 when a check that scripts/kernels/expect
# says passes on a kernel failed there (docs/kernels.md).
#
# Environment:
#   MEMTRACE_KERNELS         the columns (default: host 6.12 6.1 5.10
#                            arm64/6.12 arm64/6.1)
#   MEMTRACE_KERNEL_CHECKS   only these checks (names from checks, spaces)
#   MEMTRACE_KERNEL_CHECKS_ARM64  the checks of the arm64 columns (default:
#                            exact-nostacks dwarf-stacks attach-exact
#                            preload verifier-budget kernel-limits; the
#                            others build C programs with gcc,
#                            which the arm64 guest's root does not have)
#   MEMTRACE_KERNELS_JOBS    guests booted at once (default 1; each TCG
#                            guest takes one host CPU)
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/scripts/kernels
kernels=${MEMTRACE_KERNELS:-host 6.12 6.1 5.10 arm64/6.12 arm64/6.1}
jobs=${MEMTRACE_KERNELS_JOBS:-1}
out=$root/bin/kernels/out
testbin=$root/bin/kernels/tests.test
go=${GO:-go}
all=$(grep -v '^[[:space:]]*#' "$here/checks" | awk 'NF && !seen[$1]++ { print $1 }' | tr '\n' ' ')
checks=${MEMTRACE_KERNEL_CHECKS:-$all}
arm64_checks=${MEMTRACE_KERNEL_CHECKS_ARM64:-exact-nostacks dwarf-stacks attach-exact preload verifier-budget kernel-limits}

mkdir -p "$root/bin/kernels"
$go test -c -o "$testbin" ./tests || exit 2
# arm64: memtrace, its library, the test programs and the tests built for
# it, bound over the x86-64 ones in the guest (checks.sh).
case " $kernels " in
*" arm64/"*)
	triplet=aarch64-linux-gnu
	mkdir -p bin/linux-arm64
	make -s -C fallback-preload CC=$triplet-gcc OUT="$root/bin/linux-arm64/memtrace-preload.so" &&
		CGO_ENABLED=0 GOARCH=arm64 $go build -o bin/linux-arm64/memtrace ./cmd/memtrace &&
		make -s -C tests/progs CROSS=$triplet &&
		CGO_ENABLED=0 GOARCH=arm64 $go test -c -o "$root/bin/kernels/tests-arm64.test" ./tests || exit 2
	;;
esac
rm -rf "$out"
mkdir -p "$out"

# Fetch first, one at a time: the kernels share the apt state.
for k in $kernels; do
	[ "$k" = host ] || "$here/fetch.sh" "$k" >/dev/null || exit 2
done

# one KVER: the checks on one kernel; OUT/KVER/wall is its boot and run,
# OUT/KVER/selected the checks it was given.
one() {
	local k=$1 d=$out/$1 start rc sel
	mkdir -p "$d"
	start=$(date +%s.%N)
	sel=$checks
	if [ "$k" = host ]; then
		echo "$sel" >"$d/selected"
		MEMTRACE_KERNEL_CHECKS=$sel "$here/checks.sh" "$testbin" "$d"
		rc=$?
	elif [ "${k%%/*}" = arm64 ]; then
		sel=$(for c in $checks; do case " $arm64_checks " in *" $c "*) printf '%s ' "$c" ;; esac; done)
		echo "$sel" >"$d/selected"
		MEMTRACE_KERNEL_ARCH=arm64 MEMTRACE_KERNEL_CROSS=aarch64-linux-gnu MEMTRACE_KERNEL_CHECKS=$sel \
			MEMTRACE_KERNEL_OUT=$d MEMTRACE_KERNEL_TIMEOUT=${MEMTRACE_KERNEL_TIMEOUT:-600} \
			"$here/run.sh" "${k#arm64/}" -- /bin/sh "$here/checks.sh" "$root/bin/kernels/tests-arm64.test" "$d"
		rc=$?
	else
		echo "$sel" >"$d/selected"
		MEMTRACE_KERNEL_CHECKS=$sel MEMTRACE_KERNEL_OUT=$d MEMTRACE_KERNEL_TIMEOUT=${MEMTRACE_KERNEL_TIMEOUT:-600} \
			"$here/run.sh" "$k" -- "$here/checks.sh" "$testbin" "$d"
		rc=$?
	fi
	awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f\n", e - s }' >"$d/wall"
	[ $rc -eq 0 ] || echo "kernels: $k: the run ended with status $rc" >&2
}

# The host alone first: its checks time what they measure.
running=0
for k in $kernels; do
	if [ "$k" = host ]; then
		one host
		continue
	fi
	one "$k" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait

# The table: a row per check, a column per kernel.
expect() { # CHECK KERNEL -> pass|fail (pass when not listed)
	awk -v c="$1" -v k="$2" '
		/^[[:space:]]*#/ || NF == 0 { next }
		$1 == "check" { for (i = 2; i <= NF; i++) col[$i] = i; next }
		$1 == c && (k in col) { print $(col[k]); found = 1; exit }
		END { if (!found) print "pass" }' "$here/expect"
}
checks=$(for c in $all; do case " $checks " in *" $c "*) echo "$c" ;; esac; done)
bad=0
fixed=
table=$root/bin/kernels/results.md
{
	printf '| check |'
	for k in $kernels; do
		rel=$(sed -n 's/^kernel //p' "$out/$k/kernel" 2>/dev/null)
		printf ' %s (%s) |' "$k" "${rel:-no boot}"
	done
	printf '\n|---|'
	for k in $kernels; do printf -- '---|'; done
	printf '\n'
	for c in $checks; do
		printf '| %s |' "$c"
		for k in $kernels; do
			# A check of several lines: failed if one did, their time.
			read -r st secs < <(awk -v c="$c" '$1 == c { n++; if ($2 != "pass") f = 1; t += $3 }
				END { if (n) printf "%s %.1f\n", f ? "fail" : "pass", t }' "$out/$k/results" 2>/dev/null)
			if [ -z "$st" ] && [ -f "$out/$k/selected" ] && ! grep -qw -- "$c" "$out/$k/selected"; then
				printf ' – |'
				continue
			fi
			st=${st:-fail}
			want=$(expect "$c" "$k")
			case "$st/$want" in
			pass/pass) cell="pass" ;;
			pass/*) cell="**pass** (expect says fail)"
				fixed="$fixed $c@$k" ;;
			fail/fail) cell="fail (expected)" ;;
			*) cell="**FAIL**"
				bad=1 ;;
			esac
			printf ' %s %ss |' "$cell" "${secs:-?}"
		done
		printf '\n'
	done
	printf '| boot + checks |'
	for k in $kernels; do
		boot=$(sed -n 's/^boot //p' "$out/$k/kernel" 2>/dev/null)
		printf ' %ss%s |' "$(cat "$out/$k/wall" 2>/dev/null || echo ?)" "${boot:+ (boot ${boot}s)}"
	done
	printf '\n'
} >"$table"
echo
cat "$table"
echo
echo "kernels: the table is in $table, each check's output in $out/KERNEL/CHECK.log"
if [ -n "$fixed" ]; then
	echo "kernels: passing now where scripts/kernels/expect says fail:$fixed; mark them pass there" >&2
fi
if [ $bad -ne 0 ]; then
	echo "kernels: a check failed that scripts/kernels/expect says passes (**FAIL** above)" >&2
	exit 1
fi
