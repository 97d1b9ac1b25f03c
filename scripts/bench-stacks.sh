#!/usr/bin/env bash
# The stack path against issue 14's targets, side by side in one run
# (rounds interleave the modes, so drift on a shared machine hits all of
# them alike; figures are medians over the rounds):
#   1. Debian's sqlite3 (no frame pointers) on a $ROWS-row script: untraced,
#      memtrace --floor, memtrace without stacks, --stack-depth 32 (the
#      DWARF walk) to a plain file and to -o FILE.zst, the same with
#      --no-free-stacks to .zst, --sample 512K --stack-depth 32 to a .pb.gz
#      (issue 25), and heaptrack; wall
#      times, stack32/floor (target <= 1.25x), lost records (target 0),
#      .zst bytes per alloc/free line (target <= 8).
#   2. tests/bench/cxx_loop.cc (new/delete, std::string, std::vector) built
#      with frame pointers: untraced, floor, no stacks, --stack-depth 16
#      --stack-unwind fp; ns per iteration timed inside the program
#      (target fp16/floor <= 1.25x).
#   3. Start-up: memtrace -- /bin/true, without stacks and with
#      --stack-depth 32 to .zst, against heaptrack /bin/true (targets <= 0.5x
#      and <= 1.0x).
#   4. About $BIG_EVENTS events with stacks (sqlite3 on a file database, so
#      that its own memory stays small) through -o run.log.zst: memtrace's
#      peak RSS (target <= 150 MB), lost records; then the readers on that
#      log: memtrace report and memview's loader (--load-stats: the model and
#      the sort orders the TUI builds) against zstdcat | grep -c ptr= (target
#      <= 5x, <= 400 MB). BIG_LOG=FILE.zst measures the readers alone on a
#      log made before (PARTS=4; the traced run is then skipped).
#   5. Where the time goes (kernel.bpf_stats_enabled=1, restored after):
#      each mode's phases (-v: start-up, run, end), BPF program time per
#      run, memtrace's own CPU per event (-v), ring
#      buffer bytes per event (from the records' sizes and the log), and
#      with PROFILE=1 a CPU profile of memtrace (MEMTRACE_CPUPROFILE).
#   6. The LD_PRELOAD path on part 1's workload: untraced, heaptrack and
#      memtrace --preload --stack-depth 32 -o run.log.zst, interleaved;
#      wall ms, the traced sqlite3's own wall and CPU (inside memtrace),
#      preload/heaptrack (target <= 0.5x: the script exits 1 when it is
#      not met), and how the library walked its
#      stacks (memtrace -v: over the unwind rows or by backtrace()).
#
# Environment: ROUNDS (default 7), ROWS (20000), CXX_N (50000),
# START_ROUNDS (11, at least 5: part 3 prints make bench's row from their medians), READ_ROUNDS (3: the readers on the big log), BIG_EVENTS (10000000; 0 skips parts 4 and 5's
# big run), PARTS ("1 2 3 4 5 6": the parts to run), PROFILE (0), KEEP=1 keeps the temporary directory, GO (go),
# MEMTRACE_BASE (another memtrace binary: part 6 runs its --preload side by side;
# MEMTRACE_BASE_LIB its library, else its embedded one).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
ROWS=${ROWS:-20000}
CXX_N=${CXX_N:-50000}
START_ROUNDS=${START_ROUNDS:-11}
[ "$START_ROUNDS" -ge 5 ] || { echo "bench-stacks: START_ROUNDS=$START_ROUNDS: give at least 5 (part 3's row is a median)" >&2; exit 1; }
READ_ROUNDS=${READ_ROUNDS:-3}
BIG_EVENTS=${BIG_EVENTS:-10000000}
PROFILE=${PROFILE:-0}
PARTS=${PARTS:-1 2 3 4 5 6}
want() { [[ " $PARTS " == *" $1 "* ]]; }
GO=${GO:-go}
MT=$PWD/bin/memtrace
MV=$PWD/bin/memview
SQLITE=/usr/bin/sqlite3
[ -x "$MT" ] && [ -x "$MV" ] || { echo "bench-stacks: build first (make build)" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then echo "bench-stacks: needs root for BPF" >&2; exit 1; fi
for c in "$SQLITE" heaptrack zstdcat g++; do
	command -v "$c" >/dev/null || { echo "bench-stacks: $c is missing (make deps installs it)" >&2; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-stacks.XXXXXX")
stats_was=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() {
	sysctl -qw kernel.bpf_stats_enabled="$stats_was"
	if [[ "${KEEP:-}" == 1 ]]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
echo "== bench-stacks ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"
g++ -O2 -fno-omit-frame-pointer -o "$tmp/cxx" tests/bench/cxx_loop.cc
$GO build -o "$tmp/rusage" scripts/rusage.go

# sql ROWS: the issue's workload: a table, ROWS inserts of rows with text
# in one transaction, then selects and updates.
sql() {
	awk -v n="$1" 'BEGIN {
		print "create table t(id integer primary key, name text, note text, n integer);"
		print "create index t_name on t(name);"
		print "begin;"
		for (i = 1; i <= n; i++)
			printf "insert into t(name, note, n) values(\x27name-%d\x27, \x27a note of some length for row %d, %s\x27, %d);\n", i, i, (i % 7 ? "plain" : "the seventh row, which is longer than the others"), i % 1000
		print "commit;"
		print "select count(*), sum(n) from t;"
		print "select name, length(note) from t where n = 7 order by name limit 20;"
		print "select n, count(*) from t group by n order by count(*) desc limit 5;"
		print "update t set note = note || \x27 (updated)\x27 where n < 100;"
		print "select count(*) from t where note like \x27%updated%\x27;"
		print "delete from t where n > 900;"
		print "select count(*) from t;"
	}'
}
sql "$ROWS" >"$tmp/rows.sql"

ms() { echo $((($2 - $1) / 1000000)); }
now() { date +%s%N; }
lost() { sed -n 's/.*summary .*lost=\([0-9]*\).*/\1/p' "$1"; }
events() { case $1 in *.zst) zstdcat "$1" ;; *) cat "$1" ;; esac | grep -c 'ptr=' || true; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# paired A B: the median of the per-round ratios A/B.
paired() {
	paste <(echo "${res[$1]}" | tr ' ' '\n' | grep -v '^$') <(echo "${res[$2]}" | tr ' ' '\n' | grep -v '^$') |
		awk '{ print $1 / $2 }' | median | awk '{ printf "%.2f", $1 }'
}
declare -A res
lostsum=0
checklost() { # mode log
	local l
	l=$(lost "$2")
	if [ "$l" != 0 ]; then
		echo "  round $r: $1 lost ${l:-?} records" >&2
		lostsum=$((lostsum + ${l:-1}))
	fi
}

# tracedcalls MODE ERR: a run that traced next to nothing (the program
# not the one traced, the library off) would time as a win; the script
# makes about 60 calls a row.
tracedcalls() {
	local n
	n=$(sed -n 's/^[[:space:]]*calls to allocation functions: \([0-9]*\).*/\1/p' "$2" | tail -1)
	if [ "${n:-0}" -lt $((ROWS * 30)) ]; then
		echo "bench-stacks: $1 traced ${n:-no} calls, expected at least $((ROWS * 30)): see $2" >&2
		exit 1
	fi
}

sq=("$SQLITE" "$tmp/db" ".read $tmp/rows.sql")
if want 1; then
echo
echo "== 1. sqlite3, $ROWS-row script ($(grep -c . "$tmp/rows.sql") statements), wall ms, $ROUNDS rounds"
smodes="untraced floor nostack stack32 stack32zst nofreezst sample512 heaptrack"
for r in $(seq "$ROUNDS"); do
	for m in $smodes; do
		rm -f "$tmp/db" "$tmp/db-journal"
		t0=$(now)
		case $m in
		untraced) "${sq[@]}" >/dev/null ;;
		floor) $MT --floor -o /dev/null -- "${sq[@]}" >/dev/null ;;
		nostack) $MT --stack-depth 0 -o "$tmp/nostack.log" -- "${sq[@]}" >/dev/null ;;
		stack32) $MT --stack-depth 32 -o "$tmp/stack32.log" -- "${sq[@]}" >/dev/null ;;
		stack32zst) $MT --stack-depth 32 -o "$tmp/stack32.log.zst" -- "${sq[@]}" >/dev/null ;;
		nofreezst) $MT --stack-depth 32 --no-free-stacks -o "$tmp/nofree.log.zst" -- "${sq[@]}" >/dev/null ;;
		sample512) $MT --sample 512K --stack-depth 32 -o "$tmp/sample.pb.gz" -- "${sq[@]}" >/dev/null ;;
		heaptrack) heaptrack -o "$tmp/ht" "${sq[@]}" >/dev/null 2>&1 ;;
		esac
		t1=$(now)
		res[$m]+="$(ms "$t0" "$t1") "
		case $m in
		nostack | stack32) checklost "$m" "$tmp/$m.log" ;;
		stack32zst) zstdcat "$tmp/stack32.log.zst" | tail -3 >"$tmp/z.log" && checklost "$m" "$tmp/z.log" ;;
		nofreezst) zstdcat "$tmp/nofree.log.zst" | tail -3 >"$tmp/z.log" && checklost "$m" "$tmp/z.log" ;;
		esac
	done
done
for m in $smodes; do
	printf "  %-11s %7s ms   (runs: %s)\n" "$m" "$(echo "${res[$m]}" | median)" "${res[$m]}"
done
echo "  stack32 / floor:    $(paired stack32 floor)x   (target <= 1.25x; median of per-round ratios)"
echo "  stack32zst / floor: $(paired stack32zst floor)x;  --no-free-stacks to .zst / floor: $(paired nofreezst floor)x;  nostack / floor: $(paired nostack floor)x"
echo "  --sample 512K --stack-depth 32 / floor: $(paired sample512 floor)x   (issue 25's target <= 1.1x)"
echo "  stack32 / heaptrack: $(paired stack32 heaptrack)x;  floor / heaptrack: $(paired floor heaptrack)x;  heaptrack / untraced: $(paired heaptrack untraced)x"
ev=$(events "$tmp/stack32.log")
zb=$(stat -c %s "$tmp/stack32.log.zst")
pb=$(stat -c %s "$tmp/stack32.log")
zev=$(events "$tmp/stack32.log.zst")
awk -v zb="$zb" -v pb="$pb" -v ev="$zev" -v pev="$ev" 'BEGIN {
	printf "  log with --stack-depth 32: %d alloc/free lines; plain %.1f MB (%.0f B/event), .zst %.2f MB: %.2f B/event (target <= 8)\n", ev, pb / 1e6, pb / pev, zb / 1e6, zb / ev }'
fb=$(stat -c %s "$tmp/nofree.log.zst")
awk -v b="$fb" -v ev="$zev" 'BEGIN { printf "  --no-free-stacks to .zst: %.2f MB, %.2f B/event\n", b / 1e6, b / ev }'
nb=$(stat -c %s "$tmp/nostack.log")
echo "  log without stacks: $(awk -v b="$nb" -v e="$(events "$tmp/nostack.log")" 'BEGIN { printf "%.0f B/event plain", b / e }')"
echo "  lost records, all runs with a log: $lostsum (default buffer)"

fi
if want 2; then
echo
echo "== 2. C++ loop with frame pointers ($CXX_N iterations), ns per iteration, $ROUNDS rounds"
cmodes="c_untraced c_floor c_nostack c_fp16"
lostsum=0
for r in $(seq "$ROUNDS"); do
	res[c_untraced]+="$("$tmp/cxx" "$CXX_N") "
	res[c_floor]+="$($MT --floor -o /dev/null -- "$tmp/cxx" "$CXX_N") "
	res[c_nostack]+="$($MT --stack-depth 0 -o "$tmp/c.log" -- "$tmp/cxx" "$CXX_N") "
	checklost c_nostack "$tmp/c.log"
	res[c_fp16]+="$($MT --stack-depth 16 --stack-unwind fp -o "$tmp/c.log" -- "$tmp/cxx" "$CXX_N") "
	checklost c_fp16 "$tmp/c.log"
done
for m in $cmodes; do
	printf "  %-11s %9s ns   (runs: %s)\n" "$m" "$(echo "${res[$m]}" | median)" "${res[$m]}"
done
echo "  events per iteration: $(awk -v e="$(events "$tmp/c.log")" -v n="$CXX_N" 'BEGIN { printf "%.1f", e / (n + 1000) }')"
echo "  fp16 / floor: $(paired c_fp16 c_floor)x   (target <= 1.25x);  nostack / floor: $(paired c_nostack c_floor)x;  fp16 / nostack: $(paired c_fp16 c_nostack)x"
echo "  lost records: $lostsum"

fi
if want 3; then
echo
echo "== 3. start-up: /bin/true, wall ms, $START_ROUNDS rounds"
for r in $(seq "$START_ROUNDS"); do
	t0=$(now)
	$MT --stack-depth 0 -o "$tmp/true.log" -- /bin/true
	t1=$(now)
	$MT --stack-depth 32 -o "$tmp/true.log.zst" -- /bin/true
	t2=$(now)
	heaptrack -o "$tmp/httrue" /bin/true >/dev/null 2>&1
	t3=$(now)
	/bin/true
	t4=$(now)
	res[s_memtrace]+="$(ms "$t0" "$t1") "
	res[s_stack32]+="$(ms "$t1" "$t2") "
	res[s_heaptrack]+="$(ms "$t2" "$t3") "
	res[s_true]+="$(( ($t4 - $t3) / 1000 )) "
done
printf "  %-11s %7s ms   (runs: %s)\n" memtrace "$(echo "${res[s_memtrace]}" | median)" "${res[s_memtrace]}"
printf "  %-11s %7s ms   (runs: %s)\n" stack32 "$(echo "${res[s_stack32]}" | median)" "${res[s_stack32]}"
printf "  %-11s %7s ms   (runs: %s)\n" heaptrack "$(echo "${res[s_heaptrack]}" | median)" "${res[s_heaptrack]}"
echo "  untraced: $(echo "${res[s_true]}" | median) us"
echo "  memtrace / heaptrack: $(paired s_memtrace s_heaptrack)x   (target <= 0.5x); --stack-depth 32 .zst / heaptrack: $(paired s_stack32 s_heaptrack)x (target <= 1.0x)"
# make bench's row (scripts/bench.sh): the medians in seconds and the
# median of the rounds' ratios, as the line above.
awk -v m="$(echo "${res[s_memtrace]}" | median)" -v h="$(echo "${res[s_heaptrack]}" | median)" -v r="$(paired s_memtrace s_heaptrack)" \
	'BEGIN { printf "ROW|memtrace -- /bin/true vs heaptrack|%.3f s|%.3f s|%sx|<=0.5x|%s\n", m / 1000, h / 1000, r, (r <= 0.5 ? "met" : "NOT MET") }'
$MT -v --stack-depth 32 -o "$tmp/true.log.zst" -- /bin/true 2>"$tmp/true.err" || true
echo "  memtrace -v --stack-depth 32 on /bin/true:"
sed 's/^/    /' "$tmp/true.err"

fi
# measure CMD...: one run: "wall_s maxrss_mb". Output to a file, not
# /dev/null: GNU grep stops at the first match when its output is /dev/null.
measure() {
	"$tmp/rusage" "$@" 2>"$tmp/rusage.err" >"$tmp/out" || { cat "$tmp/rusage.err" >&2; return 1; }
	sed -n 's/^rusage wall_s=\([0-9.]*\) maxrss_mb=\([0-9]*\)$/\1 \2/p' "$tmp/rusage.err"
}

if want 4 && [ "$BIG_EVENTS" -gt 0 ] && [ -z "${BIG_LOG:-}" ]; then
	echo
	# sqlite3's events per row, from part 1's log, sizes the big script.
	[ -n "${ev:-}" ] || ev=$((ROWS * 60)) # part 1 skipped: sqlite3's 60 events a row
	big_rows=$(awk -v e="$ev" -v r="$ROWS" -v want="$BIG_EVENTS" 'BEGIN { printf "%d", want / (e / r) }')
	sql "$big_rows" >"$tmp/big.sql"
	echo "== 4. about $BIG_EVENTS events with --stack-depth 32 through -o run.log.zst (sqlite3, $big_rows rows, file database)"
	rm -f "$tmp/db"
	read -r uw urss < <(measure "$SQLITE" "$tmp/db" ".read $tmp/big.sql")
	rm -f "$tmp/db"
	sysctl -qw kernel.bpf_stats_enabled=1
	big=$tmp/run.log.zst
	read -r bw brss < <(measure "$MT" -v --stack-depth 32 -o "$big" -- "$SQLITE" "$tmp/db" ".read $tmp/big.sql")
	cp "$tmp/rusage.err" "$tmp/big.err"
	sysctl -qw kernel.bpf_stats_enabled="$stats_was"
	# One pass over the decompressed log (14 GB with 32-frame stacks):
	# events, frees, distinct stacks, plain bytes, lost.
	#
	# Ring-buffer bytes: every record has an 8-byte header and is rounded
	# up to 8; an event with a stack (frees have theirs too) is 56 bytes,
	# one without 24 when packed; each distinct stack is one
	# 3072-byte mt_stack record (counted here by distinct frame lists in
	# the log, so a stack the kernel sent again is missed: a lower bound).
	zstdcat "$big" | awk '
		{ bytes += length($0) + 1 }
		/^\[memtrack\] tid=.*ptr=/ { if (cur != "") seen[cur] = 1; cur = ""; ev++; if (/ (free|delete|delete\[\]|munmap) /) fr++; inev = 1; next }
		/^\[memtrack\]   #[0-9]/ { if (inev) { if (cur == "") ws++; sub(/ \[0x[0-9a-f]+\]$/, ""); cur = cur "|" $0 } ; next }
		/summary / { for (i = 1; i <= NF; i++) if ($i ~ /^lost=/) lost = substr($i, 6) }
		{ if (cur != "") seen[cur] = 1; cur = ""; inev = 0 }
		END {
			if (cur != "") seen[cur] = 1
			for (s in seen) ns++
			print ev, fr, ns, bytes, lost, ws
		}' >"$tmp/big.stats"
	read -r bev bfr bns bplain blost bws <"$tmp/big.stats"
	echo "  untraced ${uw}s (sqlite3's peak RSS ${urss} MB); traced ${bw}s, $bev alloc/free lines, lost ${blost:-?}"
	echo "  memtrace peak RSS: ${brss} MB (target <= 150 MB; the larger of memtrace and sqlite3)"
	awk -v b="$(stat -c %s "$big")" -v e="$bev" -v p="$bplain" 'BEGIN {
		printf "  .zst %.1f MB, %.2f B/event (plain it would be %.0f MB, %.0f B/event)\n", b / 1e6, b / e, p / 1e6, p / e }'
	awk -v ev="$bev" -v fr="$bfr" -v ns="$bns" -v ws="$bws" 'BEGIN {
		bytes = ws * (56 + 8) + (ev - ws) * (24 + 8) + ns * (3072 + 8)
		printf "  ring buffer: %d events (%d frees, %d with a stack), %d distinct stacks: about %.1f bytes per event (%.1f of it stack records)\n", ev, fr, ws, ns, bytes / ev, ns * 3080 / ev }'
	echo "  from memtrace -v:"
	grep '^memtrace: \(program\|own CPU\|unwind\)' "$tmp/big.err" | sed 's/^/    /'
	"$MT" -v --stack-depth 32 -o "$tmp/t.log" -- /bin/true 2>"$tmp/t.err" >/dev/null
	base=$(sed -n 's|^memtrace: own CPU \([0-9.]*\) s .*|\1|p' "$tmp/t.err")
	sed -n 's|^memtrace: own CPU \([0-9.]*\) s (user \([0-9.]*\), system \([0-9.]*\)) in \([0-9.]*\) s|\1 \2 \3 \4|p' "$tmp/big.err" |
		awk -v e="$bev" -v b="$base" '{ printf "    memtrace CPU per event: %.0f ns beyond start-up (%.2f s of %.2f; user %.2f, system %.2f); %.0f%% of one CPU\n", ($1 - b) * 1e9 / e, b, $1, $2, $3, 100 * ($1 - b) / $4 }'

fi
if want 4 && { [ "$BIG_EVENTS" -gt 0 ] || [ -n "${BIG_LOG:-}" ]; }; then
	big=${BIG_LOG:-$tmp/run.log.zst}
	echo
	echo "== readers on ${BIG_LOG:-that log} ($READ_ROUNDS rounds, interleaved): wall s, peak RSS MB"
	for r in $(seq "$READ_ROUNDS"); do
		read -r gt _ < <(measure bash -c "zstdcat '$big' | grep -c ptr=")
		read -r rt rr < <(measure "$MT" report "$big")
		read -r vt vr < <(measure "$MV" --load-stats "$big")
		res[r_grep]+="$gt "
		res[r_report]+="$rt "
		res[r_view]+="$vt "
		res[r_report_rss]+="$rr "
		res[r_view_rss]+="$vr "
		echo "  round $r: zstdcat|grep ${gt}s   report ${rt}s ${rr} MB   memview load ${vt}s ${vr} MB ($(cat "$tmp/out"))"
	done
	echo "  median: zstdcat|grep $(echo "${res[r_grep]}" | median)s; report $(echo "${res[r_report]}" | median)s = $(paired r_report r_grep)x, peak $(echo "${res[r_report_rss]}" | tr ' ' '\n' | sort -g | tail -1) MB; memview $(echo "${res[r_view]}" | median)s = $(paired r_view r_grep)x, peak $(echo "${res[r_view_rss]}" | tr ' ' '\n' | sort -g | tail -1) MB (targets <= 5x, <= 400 MB)"
fi

if want 5; then
echo
echo "== 5. where the time goes: sqlite3 $ROWS rows, kernel.bpf_stats_enabled=1"
sysctl -qw kernel.bpf_stats_enabled=1
for m in nostack stack32 stack32zst; do
	args=(--stack-depth 0)
	out=$tmp/p.log
	case $m in
	stack32) args=(--stack-depth 32) ;;
	stack32zst) args=(--stack-depth 32) out=$tmp/p.log.zst ;;
	esac
	rm -f "$tmp/db"
	prof=()
	[ "$PROFILE" = 1 ] && prof=(env MEMTRACE_CPUPROFILE="$tmp/$m.pprof")
	"${prof[@]}" "$MT" -v "${args[@]}" -o "$out" -- "${sq[@]}" >/dev/null 2>"$tmp/p.err"
	e=$(events "$out")
	# The start-up's own CPU (chiefly the verifier, in memtrace's system
	# time) is not per event: subtract that of /bin/true with the same flags.
	"$MT" -v "${args[@]}" -o "$tmp/t.log" -- /bin/true 2>"$tmp/t.err" >/dev/null
	base=$(sed -n 's|^memtrace: own CPU \([0-9.]*\) s .*|\1|p' "$tmp/t.err")
	sed -n "s|^memtrace: phases: |  $m: phases: |p" "$tmp/p.err"
	sed -n "s|^memtrace: program \(mt_[a-z_]*\): \([0-9]*\) runs, \([0-9]*\) ns a run|  $m: \1 \3 ns a run (\2 runs)|p" "$tmp/p.err"
	sed -n 's|^memtrace: own CPU \([0-9.]*\) s (user \([0-9.]*\), system \([0-9.]*\)) in \([0-9.]*\) s|\1 \2 \3 \4|p' "$tmp/p.err" |
		awk -v e="$e" -v m="$m" -v b="$base" '{ printf "  %s: memtrace CPU %.2f s (user %.2f, system %.2f), of it start-up %.2f s (/bin/true): %.0f ns per event beyond start-up, %d events\n", m, $1, $2, $3, b, ($1 - b) * 1e9 / e, e }'
	if [ "$PROFILE" = 1 ]; then
		echo "  $m: top of memtrace's CPU profile ($tmp/$m.pprof):"
		$GO tool pprof -top -nodecount 15 "$MT" "$tmp/$m.pprof" 2>/dev/null | sed -n '/flat%/,$p' | sed 's/^/    /'
	fi
done
sysctl -qw kernel.bpf_stats_enabled="$stats_was"
echo "  load: $(cut -d' ' -f1-3 /proc/loadavg)"
fi

if want 6; then
echo
echo "== 6. --preload, sqlite3 $ROWS-row script, wall ms, $ROUNDS rounds"
pmodes="p_untraced p_heaptrack p_preload"
# MEMTRACE_BASE=BINARY: another build's --preload side by side (p_base).
[ -n "${MEMTRACE_BASE:-}" ] && pmodes="$pmodes p_base"
for r in $(seq "$ROUNDS"); do
	for m in $pmodes; do
		rm -f "$tmp/db" "$tmp/db-journal"
		t0=$(now)
		case $m in
		p_untraced) "${sq[@]}" >/dev/null ;;
		p_heaptrack) heaptrack -o "$tmp/htp" "${sq[@]}" >/dev/null 2>&1 ;;
		# --follow: time(1) forks sqlite3, and --preload traces only
		# memtrace's own child without it (tracedcalls checks).
		p_preload) $MT -v --preload --follow --stack-depth 32 -o "$tmp/pre.log.zst" -- /usr/bin/time -f "sqlite3 %e %U %S" "${sq[@]}" >/dev/null 2>"$tmp/pre.err" ;;
		p_base) MEMTRACE_PRELOAD_LIB=${MEMTRACE_BASE_LIB:-} "$MEMTRACE_BASE" -v --preload --stack-depth 32 -o "$tmp/base.log.zst" -- "${sq[@]}" >/dev/null 2>"$tmp/base.err" ;;
		esac
		t1=$(now)
		res[$m]+="$(ms "$t0" "$t1") "
		if [ "$m" = p_preload ]; then
			read -r _ pw pu ps < <(grep '^sqlite3 ' "$tmp/pre.err")
			res[p_inner]+="$(awk -v w="$pw" 'BEGIN { printf "%d", w * 1000 }') "
			res[p_cpu]+="$(awk -v u="$pu" -v s="$ps" 'BEGIN { printf "%d", (u + s) * 1000 }') "
			zstdcat "$tmp/pre.log.zst" | tail -3 >"$tmp/z.log" && checklost p_preload "$tmp/z.log"
			tracedcalls p_preload "$tmp/pre.err"
		fi
		[ "$m" = p_base ] && tracedcalls p_base "$tmp/base.err"
	done
done
for m in $pmodes; do
	printf "  %-11s %7s ms   (runs: %s)\n" "${m#p_}" "$(echo "${res[$m]}" | median)" "${res[$m]}"
done
echo "  the traced sqlite3 itself: wall $(echo "${res[p_inner]}" | median) ms, CPU $(echo "${res[p_cpu]}" | median) ms (runs: ${res[p_cpu]})"
p6_ratio=$(paired p_preload p_heaptrack)
p6_verdict=$(awk -v r="$p6_ratio" 'BEGIN { print (r <= 0.5) ? "met" : "NOT MET" }')
echo "  preload / heaptrack: ${p6_ratio}x   (target <= 0.5x, issue 35); heaptrack / untraced: $(paired p_heaptrack p_untraced)x"
grep '^memtrace: \(preload stacks\|phases\)' "$tmp/pre.err" | sed 's/^/  /'
if [ -n "${MEMTRACE_BASE:-}" ]; then
	echo "  preload / base ($MEMTRACE_BASE): $(paired p_preload p_base)x; base / heaptrack: $(paired p_base p_heaptrack)x"
	grep '^memtrace: phases' "$tmp/base.err" | sed 's/^/  base: /'
fi
echo "  load: $(cut -d' ' -f1-3 /proc/loadavg)"
# The row make bench gathers (figures: medians of the rounds; ratio: the
# median of the rounds' own ratios).
echo "ROW|sqlite3 $ROWS-row script, --preload --stack-depth 32 -o .zst vs heaptrack, wall ms|$(echo "${res[p_preload]}" | median)|$(echo "${res[p_heaptrack]}" | median)|${p6_ratio}x|<=0.5x|$p6_verdict"
[ "$p6_verdict" = met ] || exit 1
fi
