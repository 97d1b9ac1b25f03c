# e2e-lib.sh: what e2e-parca.sh and e2e-pyroscope.sh share, sourced after
# each sets E2E (its name, for its lines), ROOT, MEMTRACE and PROG: the
# checks of what the run needs, tests/progs/build/liveleak under memtrace
# --http, what memtrace's own endpoint says, the clean-up, and check.
# shellcheck shell=bash

WANT_LEAK=50000 # liveleak.c: LEAK_N * LEAK_SIZE
WANT_SMALL=3000 # SMALL_N * SMALL_SIZE

say() { printf '%s: %s\n' "$E2E" "$*"; }
die() {
	printf '%s: %s\n' "$E2E" "$*" >&2
	exit 1
}

# e2e_need TOOL...: the builds, the tools and root (memtrace's eBPF path).
e2e_need() {
	local f t
	for f in "$MEMTRACE" "$PROG"; do
		[ -x "$f" ] || die "$f is missing: run make build progs first"
	done
	for t in "$@"; do
		command -v "$t" >/dev/null || die "$t is needed"
	done
	[ "$(id -u)" = 0 ] || die "run as root (memtrace's eBPF path)"
}

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# e2e_start: a work directory W, memtrace --http on MPORT tracing liveleak,
# whose stdin is a FIFO the script holds open (fd 3) until the end; pids[0]
# is memtrace, the server a script starts goes after it. Then what
# memtrace's ?debug=1 (Go's text heap format: in use, then [allocated])
# says: inuse_objs, inuse_bytes, alloc_bytes and the program's prog_pid.
e2e_start() {
	W=$(mktemp -d "/tmp/$E2E.XXXXXX")
	pids=()
	trap e2e_cleanup EXIT
	MPORT=$(freeport)
	mkfifo "$W/stdin"
	exec 3<>"$W/stdin"
	"$MEMTRACE" -o none --http "127.0.0.1:$MPORT" -- "$PROG" <"$W/stdin" >"$W/prog.out" 2>"$W/memtrace.err" &
	pids+=($!)
	for _ in $(seq 100); do
		grep -q leaked "$W/prog.out" 2>/dev/null && break
		sleep 0.1
	done
	grep -q leaked "$W/prog.out" || die "liveleak did not start under memtrace: $(cat "$W/memtrace.err")"
	curl -sf "http://127.0.0.1:$MPORT/debug/pprof/heap?debug=1" >"$W/heap.txt" || die "memtrace's endpoint did not answer"
	read -r inuse_objs inuse_bytes alloc_bytes < <(sed -nE '1s/^heap profile: ([0-9]+): ([0-9]+) \[[0-9]+: ([0-9]+)\].*/\1 \2 \3/p' "$W/heap.txt")
	prog_pid=$(grep -oE '"pid":"[0-9]+"' "$W/heap.txt" | head -1 | grep -oE '[0-9]+')
	say "memtrace ?debug=1: $inuse_objs blocks, $inuse_bytes bytes in use, $alloc_bytes allocated, pid $prog_pid"
	[ -n "$inuse_bytes" ] && [ -n "$prog_pid" ] || die "no heap profile header or pid label in ?debug=1:
$(head -5 "$W/heap.txt")"
}

e2e_cleanup() {
	# EOF on liveleak's stdin ends it, and memtrace with it (a signal
	# would detach and leave it running); the server is stopped.
	exec 3>&- || true
	if [ "${#pids[@]}" -gt 0 ]; then
		for p in "${pids[@]:1}"; do
			kill "$p" 2>/dev/null || true
		done
		for _ in $(seq 50); do
			kill -0 "${pids[0]}" 2>/dev/null || break
			sleep 0.1
		done
		kill "${pids[0]}" 2>/dev/null || true
		wait 2>/dev/null || true
	fi
	if [ "${KEEP:-}" = 1 ]; then say "kept $W"; else rm -rf "$W"; fi
}

fail=0
check() { # name got want
	if [ "$2" = "$3" ]; then
		say "ok   $1: $2"
	else
		say "FAIL $1: $2, want $3"
		fail=1
	fi
}
