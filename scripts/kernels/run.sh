#!/usr/bin/env bash
# run.sh KVER -- CMD...: boots Debian's stock kernel KVER (5.10, 6.1 or
# 6.12; arm64: 6.1 or 6.12) under QEMU (TCG) with this machine's root as the guest's / (9p,
# read-only) and runs CMD as root in the caller's working directory, with
# the caller's environment. CMD's stdout and stderr come back as they are
# written, and run.sh exits with CMD's exit code (docs/kernels.md).
#
# Environment:
#   MEMTRACE_KERNEL_OUT      a host directory shared writable at the same
#                            path in the guest (results); created if missing
#   MEMTRACE_KERNEL_TIMEOUT  seconds before the guest is killed (default 900)
#   MEMTRACE_KERNEL_SMP      vCPUs (default 2), MEMTRACE_KERNEL_MEM (2G)
#   MEMTRACE_KERNEL_VERBOSE  1: the guest's console on stderr as it runs
#   MEMTRACE_KERNEL_ARCH     amd64 (default) or arm64 (qemu-system-aarch64)
#   MEMTRACE_KERNELS_CACHE   where the kernels are kept (default
#                            /var/cache/memtrace-kernels)
# Exit codes besides CMD's: 2 bad use or no kernel, 124 the guest timed out,
# 125 the guest ended without running CMD to its end (its console's tail is
# printed).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
	echo "usage: $0 KVER -- CMD [ARG]...  (KVER: 5.10, 6.1 or 6.12; MEMTRACE_KERNEL_ARCH=arm64: 6.1 or 6.12)" >&2
	exit 2
}
[ $# -ge 3 ] && [ "$2" = -- ] || usage
kver=$1
shift 2
kernel_arch
kernel_suite "$kver" >/dev/null || usage
# The guest's machine. On arm64 the host's root holds no arm64 programs:
# the guest's / is then a tmpfs with an arm64 busybox, Debian's arm64
# libc6, libc6-dbg, libstdc++6 and libgcc-s1 as /lib and /usr/lib
# (guest_root, fetched by fetch.sh) and the host's other top-level
# directories (/etc, /work, ...) bound in (init, "cross"). Without that
# tree (no network when make deps ran), the cross toolchain's libraries
# (libc6-dev-arm64-cross) as /lib: no debug symbols for libc.
case "$KARCH" in
amd64)
	qemu=(qemu-system-x86_64 -cpu max)
	ttyS=ttyS0
	cross=
	;;
arm64)
	qemu=(qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on)
	ttyS=ttyAMA0
	cross=$KERNELS_CACHE/$KARCH/root
	if [ ! -f "$cross/packages" ] && ! (guest_root >/dev/null); then
		cross=/usr/aarch64-linux-gnu
		echo "kernels: no Debian $KARCH libraries in $KERNELS_CACHE/$KARCH/root (see above): the guest runs on $cross/lib, whose libc has no debug symbols" >&2
	fi
	[ -e "$cross/lib/ld-linux-aarch64.so.1" ] || kdie "no $cross/lib: make deps installs libc6-dev-arm64-cross"
	;;
esac
command -v "${qemu[0]}" >/dev/null || kdie "no ${qemu[0]}: make deps installs qemu-system-x86 and qemu-system-arm"

kdir=$(kernel_root "$kver")
kernel_files "$kdir"

w=$(mktemp -d "${TMPDIR:-/tmp}/memtrace-kernel.XXXXXX")
qpid=
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null
	rm -rf "$w"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build_initramfs "$KMODS" "$w/initramfs.cpio"
mkdir "$w/ctl"
: >"$w/ctl/stdout"
: >"$w/ctl/stderr"

# cmd.sh: the caller's working directory and environment, then CMD, quoted
# for the host's /bin/sh that runs it in the guest.
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
{
	printf 'cd %s || exit 126\n' "$(q "$PWD")"
	printf 'exec env -i'
	while IFS= read -r -d '' kv; do
		case "${kv%%=*}" in
		PWD | OLDPWD | SHLVL | _) continue ;;
		esac
		printf ' %s' "$(q "$kv")"
	done < <(env -0)
	printf ' %s' "$(q MEMTRACE_KERNEL="$kver")"
	for a in "$@"; do
		printf ' %s' "$(q "$a")"
	done
	printf '\n'
} >"$w/ctl/cmd.sh"

# The guest's /tmp is a tmpfs: the host's directories under /tmp that the
# run needs (the caller's working directory, this checkout) are bound back
# over it (init, "keep").
for p in "$PWD" "$(cd "$(dirname "$0")/../.." && pwd -P)"; do
	p=$(cd "$p" && pwd -P)
	case "$p" in
	/tmp/?*)
		rel=${p#/tmp/}
		echo "/tmp/${rel%%/*}"
		;;
	esac
done | sort -u >"$w/ctl/keep"

share_out=()
if [ -n "${MEMTRACE_KERNEL_OUT:-}" ]; then
	mkdir -p "$MEMTRACE_KERNEL_OUT"
	out=$(cd "$MEMTRACE_KERNEL_OUT" && pwd -P)
	printf '%s' "$out" >"$w/ctl/out"
	share_out=(-fsdev "local,id=out,path=$out,security_model=passthrough"
		-device virtio-9p-pci,fsdev=out,mount_tag=out)
fi

console=$w/console.log
quiet=quiet
[ "${MEMTRACE_KERNEL_VERBOSE:-0}" = 1 ] && quiet=
# TCG with one host thread: multi-threaded TCG crashed a 6.12 guest while
# it patched its own text. mitigations=off: the guest is a test box, and
# the mitigations cost TCG dearly. random.trust_cpu: getrandom never waits.
timeout -k 5 "${MEMTRACE_KERNEL_TIMEOUT:-900}" "${qemu[@]}" \
	-accel tcg,thread=single -m "${MEMTRACE_KERNEL_MEM:-2G}" -smp "${MEMTRACE_KERNEL_SMP:-2}" \
	-nographic -monitor none -serial "file:$console" -no-reboot \
	-kernel "$KIMAGE" -initrd "$w/initramfs.cpio" \
	-append "console=$ttyS panic=-1 mitigations=off random.trust_cpu=on${cross:+ memtrace.cross=$cross} $quiet" \
	-fsdev "local,id=root,path=/,security_model=passthrough,readonly=on,multidevs=remap" \
	-device virtio-9p-pci,fsdev=root,mount_tag=root \
	-fsdev "local,id=ctl,path=$w/ctl,security_model=passthrough" \
	-device virtio-9p-pci,fsdev=ctl,mount_tag=ctl \
	"${share_out[@]}" \
	-device virtio-rng-pci </dev/null >"$w/qemu.out" 2>&1 &
qpid=$!

# CMD's output as the guest writes it (9p without a cache writes through).
tail -q -f -s 0.2 --pid="$qpid" "$w/ctl/stdout" &
t1=$!
tail -q -f -s 0.2 --pid="$qpid" "$w/ctl/stderr" >&2 &
t2=$!
if [ "${MEMTRACE_KERNEL_VERBOSE:-0}" = 1 ]; then
	: >>"$console"
	tail -q -f -s 0.2 --pid="$qpid" "$console" >&2 &
fi
set +e
wait "$qpid"
qrc=$?
set -e
qpid=
wait "$t1" "$t2" 2>/dev/null || true

if [ -s "$w/ctl/rc" ]; then
	exit "$(cat "$w/ctl/rc")"
fi
if [ "$qrc" = 124 ]; then
	echo "kernels: $kver: the guest did not end within ${MEMTRACE_KERNEL_TIMEOUT:-900}s; its console's last lines:" >&2
else
	echo "kernels: $kver: the guest ended without CMD's exit code (qemu exit $qrc); its console's last lines:" >&2
fi
tail -n 40 "$console" >&2 || true
tail -n 5 "$w/qemu.out" >&2 || true
exit $((qrc == 124 ? 124 : 125))
