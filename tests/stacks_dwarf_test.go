package tests

// The stack oracle (issue 12): progs/unwind_oracle, built without frame
// pointers, records glibc's DWARF unwinder (backtrace()) right before each
// allocation (progs/unwind_truth.h), and every allocation's stack in the
// log is compared with that record frame for frame, by absolute address,
// together with the event itself (tid, op, size, ptr). The LD_PRELOAD path
// takes its stacks from the same unwinder; the eBPF path's comparisons
// (stacks_dwarf_bpf_test.go, the .eh_frame walk in BPF) use the same
// helpers.
//
// How a record maps onto the log's frames. backtrace() called in F gives
// [pc in F after the backtrace call, F's caller, ...]; the log's frame #0
// is the return address of the allocation call, also in F. So frame #0
// must lie in the same function as the record's frame 0, and from #1 on the
// frames are the record's 1, 2, ... For an allocation made inside a
// library that F called (fopen, std::string::append), the log first has
// one or more frames in that library, then one in F's function, then the
// record's 1, 2, ... A stack ends where the record ends, or at the
// --stack-depth, or at a root frame (__libc_start_call_main, start_thread,
// clone3): the eBPF agent stops at the first root, glibc goes on to _start
// or clone3's own frame.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/symbols"
)

// oracleDepth is the --stack-depth of the oracle runs: more than the
// deepest record (the program's stacks stay below it, so every stack must
// be complete).
const oracleDepth = 64

// oracleRec is one line of the oracle's record (progs/unwind_truth.h).
type oracleRec struct {
	tid            int64
	op             string
	size, sizeHi   uint64 // sizeHi > 0: the size lies in [size, sizeHi]
	ptr            uint64
	kind           string // "d", "i:LIB", "-", "gap"
	pcs            []uint64
	file           string
	line           int
	mainThread     bool // made by its process's main thread
	matchedLogLine int
}

func (r *oracleRec) String() string {
	return fmt.Sprintf("%s:%d (tid %d %s size=%d ptr=%#x %s)", filepath.Base(r.file), r.line, r.tid, r.op, r.size, r.ptr, r.kind)
}

func (r *oracleRec) hasStack() bool { return r.kind == "d" || strings.HasPrefix(r.kind, "i:") }

// readOracle reads one record file.
func readOracle(path string) ([]*oracleRec, int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read the oracle's record: %w", err)
	}
	var out []*oracleRec
	var pid int64
	for i, ln := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(ln)
		bad := fmt.Errorf("%s:%d: bad record %q", path, i+1, ln)
		if i == 0 {
			if len(f) != 2 || f[0] != "pid" {
				return nil, 0, bad
			}
			if pid, err = strconv.ParseInt(f[1], 10, 64); err != nil {
				return nil, 0, bad
			}
			continue
		}
		if len(f) < 5 {
			return nil, 0, bad
		}
		r := &oracleRec{op: f[1], kind: f[4], file: path, line: i + 1}
		var e1, e2, e3, e4 error
		r.tid, e1 = strconv.ParseInt(f[0], 10, 64)
		lo, hi, isRange := strings.Cut(f[2], "-")
		r.size, e2 = strconv.ParseUint(lo, 10, 64)
		if isRange {
			r.sizeHi, e4 = strconv.ParseUint(hi, 10, 64)
		}
		r.ptr, e3 = strconv.ParseUint(strings.TrimPrefix(f[3], "0x"), 16, 64)
		if e1 != nil || e2 != nil || e3 != nil || e4 != nil {
			return nil, 0, bad
		}
		for _, a := range f[5:] {
			v, err := strconv.ParseUint(strings.TrimPrefix(a, "0x"), 16, 64)
			if err != nil {
				return nil, 0, bad
			}
			r.pcs = append(r.pcs, v)
		}
		if r.hasStack() && len(r.pcs) < 2 {
			return nil, 0, fmt.Errorf("%s:%d: a backtrace of %d frames cannot be compared", path, i+1, len(r.pcs))
		}
		r.mainThread = r.tid == pid
		out = append(out, r)
	}
	return out, pid, nil
}

// readOracleRun reads the records a run left: an exec'd-from image's
// (.pre) before the program's own, with a gap for the new image's start,
// and a forked child's (.child).
func readOracleRun(t *testing.T, truth string) []*oracleRec {
	t.Helper()
	var all []*oracleRec
	if _, err := os.Stat(truth + ".pre"); err == nil {
		pre, pid, err := readOracle(truth + ".pre")
		if err != nil {
			t.Fatal(err)
		}
		all = append(pre, &oracleRec{tid: pid, op: "gap", kind: "gap", file: truth + ".pre"})
	}
	recs, _, err := readOracle(truth)
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, recs...)
	if _, err := os.Stat(truth + ".child"); err == nil {
		child, _, err := readOracle(truth + ".child")
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, child...)
	}
	return all
}

// dwarfEvent is an alloc or free line of a log with its frames.
type dwarfEvent struct {
	tid       int64
	kind      logfmt.Kind
	op        string
	size, ptr uint64
	line      int
	frames    []stackFrame
	truncated string
}

// readDwarfLog reads a log's events with their frames (readStacks, with
// the thread and line number of each event).
func readDwarfLog(t *testing.T, path string) (evs []*dwarfEvent, byTID map[int64][]*dwarfEvent) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	byTID = map[int64][]*dwarfEvent{}
	var cur *dwarfEvent
	sc := logfmt.NewScanner(bytes.NewReader(b))
	var l logfmt.Line
	n := 0
	for sc.Scan() {
		n++
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("%s:%d: unreadable line %q: %v", path, n, sc.Line(), err)
		}
		switch l.Kind {
		case logfmt.KindAlloc, logfmt.KindFree:
			cur = &dwarfEvent{tid: l.TID, kind: l.Kind, op: string(l.OpText), size: l.Size, ptr: l.Ptr, line: n}
			evs = append(evs, cur)
			byTID[cur.tid] = append(byTID[cur.tid], cur)
		case logfmt.KindFrame:
			if cur == nil {
				t.Fatalf("%s:%d: frame before any event", path, n)
			}
			if l.FrameIndex != len(cur.frames) {
				t.Fatalf("%s:%d: frame #%d after %d frames", path, n, l.FrameIndex, len(cur.frames))
			}
			cur.frames = append(cur.frames, stackFrame{string(l.Module), string(l.Symbol), l.Offset, l.Addr})
		case logfmt.KindMeta:
			if string(l.Word) == logfmt.WordStack && cur != nil {
				cur.truncated, _ = logfmt.Field(logfmt.Fields(l.Rest), "reason")
			}
		case logfmt.KindExit:
			cur = nil
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs, byTID
}

// rootFuncs are where a thread's stack begins; a tracer may stop there.
var rootFuncs = map[string]bool{
	"__libc_start_call_main": true, "start_thread": true, "clone3": true, "__clone3": true,
}

// frameResolver names log frames and record addresses through the
// symbols package (with the debug files: libc6-dbg names libc's static
// functions), from what a frame line carries: module, symbol and offset.
type frameResolver struct {
	cache *symbols.Cache
	memo  map[string]frameLoc
	// sysroot, when set, is where a guest's files lie under qemu-user
	// (-L, QEMU_LD_PREFIX): a log written under it names /lib/libc.so.6
	// as the guest saw it, which is sysroot's file when that exists
	// (qemu's own rule), else the path itself (the program's, a /tmp file).
	sysroot string
	// cut, when set, says whether a stack that differs from its record
	// is one the walk could not take further for a reason the test has
	// checked (32-bit ARM: crossCut); compareOracle counts those apart.
	cut func(fr *frameResolver, ev *dwarfEvent) bool
}

type frameLoc struct {
	mod   *symbols.Module
	vaddr uint64 // the frame's return address as an ELF address of mod
	fn    string // the function holding the call (vaddr-1)
}

func newFrameResolver() *frameResolver {
	return &frameResolver{cache: symbols.NewCache(nil), memo: map[string]frameLoc{}}
}

// hostPath is where a log's module lies here (fr.sysroot).
func (fr *frameResolver) hostPath(module string) string {
	if fr.sysroot != "" && module != "" {
		if p := filepath.Join(fr.sysroot, module); fileExists(p) {
			return p
		}
	}
	return module
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (fr *frameResolver) locate(f stackFrame) frameLoc {
	key := fmt.Sprintf("%s|%s|%x", f.module, f.symbol, f.off)
	if l, ok := fr.memo[key]; ok {
		return l
	}
	var l frameLoc
	if m, err := fr.cache.Open(fr.hostPath(f.module)); err == nil && f.module != "" {
		v := f.off // no symbol: OFF is from the load base, the ELF address
		ok := true
		if f.symbol != "" {
			sv, err := m.SymbolValue(f.symbol)
			ok = err == nil
			v = sv + f.off
		}
		if ok && v > 0 {
			l = frameLoc{mod: m, vaddr: v}
			l.fn, _, _ = m.Symbol(v - 1)
		}
	}
	fr.memo[key] = l
	return l
}

// funcOf names a log frame's function ("" when it cannot be resolved).
func (fr *frameResolver) funcOf(f stackFrame) string { return fr.locate(f).fn }

// sameFunction says whether addr, an absolute return address of the same
// process, lies in the function of log frame f (in f's module, at f's load
// base).
func (fr *frameResolver) sameFunction(f stackFrame, addr uint64) (bool, string, string) {
	l := fr.locate(f)
	if l.mod == nil || l.fn == "" {
		return false, "", ""
	}
	base := f.addr - l.vaddr
	other, _, err := l.mod.Symbol(addr - base - 1)
	if err != nil {
		return false, l.fn, ""
	}
	return other == l.fn, l.fn, other
}

func (fr *frameResolver) describe(f stackFrame) string {
	s := fmt.Sprintf("%#x %s(%s+%#x)", f.addr, filepath.Base(f.module), f.symbol, f.off)
	if fn := fr.funcOf(f); fn != "" && fn != f.symbol {
		s += " = " + fn
	}
	return s
}

// inLibrary says whether a frame is in the library lib (a soname): the
// LD_PRELOAD path names the file as the dynamic linker opened it
// (libstdc++.so.6), the eBPF path as it is mapped (libstdc++.so.6.0.30).
func inLibrary(f stackFrame, lib string) bool {
	b := filepath.Base(f.module)
	return b == lib || strings.HasPrefix(b, lib+".")
}

// stackMismatch compares an event's log frames with its record. It returns
// "" when they agree, else what differs.
func (fr *frameResolver) stackMismatch(ev *dwarfEvent, r *oracleRec, depth int) string {
	L, B := ev.frames, r.pcs
	if len(L) == 0 {
		return "the log has no frames"
	}
	p := 1
	if strings.HasPrefix(r.kind, "i:") {
		lib := strings.TrimPrefix(r.kind, "i:")
		j := 0
		for j < len(L) && inLibrary(L[j], lib) {
			j++
		}
		if j == 0 {
			return fmt.Sprintf("frame #0 is %s, not in %s where the allocation was made", fr.describe(L[0]), lib)
		}
		if j == len(L) {
			if len(L) == depth {
				return ""
			}
			return fmt.Sprintf("all %d frames are in %s: the stack stops there (last %s)", len(L), lib, fr.describe(L[j-1]))
		}
		p = j + 1
	}
	if ok, got, want := fr.sameFunction(L[p-1], B[0]); !ok {
		return fmt.Sprintf("frame #%d %s is in %q, the unwinder's frame 0 (%#x) in %q", p-1, fr.describe(L[p-1]), got, B[0], want)
	}
	want := B[1:]
	got := L[p:]
	if len(got) > len(want) {
		return fmt.Sprintf("%d frames, the unwinder gave %d (frame #%d %s is extra)", len(L), p+len(want), p+len(want), fr.describe(L[p+len(want)]))
	}
	for i := range got {
		if got[i].addr != want[i] {
			return fmt.Sprintf("frame #%d is %s, the unwinder's frame %d is %#x", p+i, fr.describe(got[i]), i+1, want[i])
		}
	}
	switch {
	case len(got) == len(want), len(L) == depth:
		return ""
	case rootFuncs[fr.funcOf(L[len(L)-1])]:
		return ""
	}
	return fmt.Sprintf("the stack stops after frame #%d %s (truncated=%q); the unwinder has %d more frames, next %#x",
		len(L)-1, fr.describe(L[len(L)-1]), ev.truncated, len(want)-len(got), want[len(got)])
}

// oracleResult is one run's comparison.
type oracleResult struct {
	events, eventsMatched int // records (gaps left out) and those found in the log
	stacks, stacksMatched int // allocation records and those whose stacks match
	cut                   int // stacks that differ where fr.cut allows it
	threads               int
	errs                  []string
}

func (o *oracleResult) fail(format string, a ...any) {
	if len(o.errs) < 30 {
		o.errs = append(o.errs, fmt.Sprintf(format, a...))
	}
}

// compareOracle matches every record with its event, thread by thread in
// call order (the next event with the same op, size and ptr: between two
// records the log must hold nothing else, but after a gap record or before
// a thread's first one), then compares the stacks of the allocations.
func compareOracle(fr *frameResolver, byTID map[int64][]*dwarfEvent, recs []*oracleRec, depth int) *oracleResult {
	res := &oracleResult{}
	perTID := map[int64][]*oracleRec{}
	var tids []int64
	for _, r := range recs {
		if _, ok := perTID[r.tid]; !ok {
			tids = append(tids, r.tid)
		}
		perTID[r.tid] = append(perTID[r.tid], r)
	}
	res.threads = len(tids)
	liveSize := map[uint64]uint64{} // ptr -> the size the log gave its allocation
	for _, tid := range tids {
		evs := byTID[tid]
		cur := 0
		gapOpen := true
		for _, r := range perTID[tid] {
			if r.op == "gap" {
				gapOpen = true
				continue
			}
			res.events++
			if r.hasStack() {
				res.stacks++
			}
			j := cur
			for ; j < len(evs); j++ {
				e := evs[j]
				if e.op != r.op || e.ptr != r.ptr {
					continue
				}
				switch {
				case r.sizeHi == 0 && e.size == r.size:
				case r.sizeHi > 0 && e.size >= r.size && e.size <= r.sizeHi &&
					(e.kind == logfmt.KindAlloc || e.size == liveSize[e.ptr]):
				default:
					continue
				}
				break
			}
			if j == len(evs) {
				res.fail("record %v: no such event in the log after line %d", r, lineAfter(evs, cur))
				continue
			}
			if !gapOpen {
				for k := cur; k < j; k++ {
					res.fail("record %v: log line %d (%s size=%d ptr=%#x) comes before it and is not in the record",
						r, evs[k].line, evs[k].op, evs[k].size, evs[k].ptr)
				}
			}
			e := evs[j]
			cur, gapOpen = j+1, false
			res.eventsMatched++
			r.matchedLogLine = e.line
			if e.kind == logfmt.KindAlloc {
				liveSize[e.ptr] = e.size
			}
			if !r.hasStack() {
				continue
			}
			if why := fr.stackMismatch(e, r, depth); why != "" {
				if fr.cut != nil && fr.cut(fr, e) {
					res.cut++
					continue
				}
				res.fail("record %v, log line %d: %s", r, e.line, why)
				continue
			}
			res.stacksMatched++
		}
	}
	return res
}

func lineAfter(evs []*dwarfEvent, i int) int {
	if i > 0 && i <= len(evs) {
		return evs[i-1].line
	}
	return 0
}

// checkOracle compares a run's log with its records and fails t on any
// difference; it logs how many stacks matched.
func checkOracle(t *testing.T, r *run, depth int, wantThreads int) (*oracleResult, []*oracleRec, map[int64][]*dwarfEvent) {
	t.Helper()
	return checkOracleWith(t, newFrameResolver(), r, depth, wantThreads)
}

// checkOracleWith is checkOracle naming frames through fr (a guest's
// files under qemu-user: fr.sysroot).
func checkOracleWith(t *testing.T, fr *frameResolver, r *run, depth int, wantThreads int) (*oracleResult, []*oracleRec, map[int64][]*dwarfEvent) {
	t.Helper()
	recs := readOracleRun(t, r.truth)
	_, byTID := readDwarfLog(t, r.log)
	res := compareOracle(fr, byTID, recs, depth)
	t.Logf("%d of %d allocation stacks match the DWARF unwinder's; %d of %d events found (tid, op, size, ptr); %d threads",
		res.stacksMatched, res.stacks, res.eventsMatched, res.events, res.threads)
	if res.cut > 0 {
		t.Logf("%d stacks cut at a caller the unwinder cannot step past, as allowed here", res.cut)
	}
	for _, e := range res.errs {
		t.Error(e)
	}
	if res.stacks == 0 {
		t.Error("the program recorded no allocation")
	}
	if res.threads < wantThreads {
		t.Errorf("records from %d threads, want at least %d", res.threads, wantThreads)
	}
	if t.Failed() {
		t.Logf("log %s, stderr: %s", r.log, r.stderr.String())
		keep(t, r)
	}
	return res, recs, byTID
}

// checkLibraryStacks: the allocations made inside libc and libstdc++ by
// the main thread (fopen's FILE, the first read's buffer, std::string's
// growth) have stacks that go from the library through the program to
// main, and the workers' through it to start_thread.
func checkLibraryStacks(t *testing.T, recs []*oracleRec, byTID map[int64][]*dwarfEvent) {
	t.Helper()
	fr := newFrameResolver()
	byLine := map[int]*dwarfEvent{}
	for _, evs := range byTID {
		for _, e := range evs {
			byLine[e.line] = e
		}
	}
	seen := map[string]int{}
	for _, r := range recs {
		if !strings.HasPrefix(r.kind, "i:") || r.matchedLogLine == 0 {
			continue
		}
		e := byLine[r.matchedLogLine]
		lib := strings.TrimPrefix(r.kind, "i:")
		var names []string
		inLib, reached := 0, false
		want := "start_thread"
		if r.mainThread {
			want = "main"
		}
		for i, f := range e.frames {
			fn := fr.funcOf(f)
			names = append(names, fn)
			if i == inLib && inLibrary(f, lib) {
				inLib++
			}
			if fn == want && i > inLib {
				reached = true
			}
		}
		if inLib == 0 || !reached {
			t.Errorf("record %v, log line %d: frames %v: want frames in %s, then the program, then %s",
				r, e.line, names, lib, want)
			continue
		}
		if r.mainThread {
			seen[lib]++
		}
	}
	if seen["libc.so.6"] < 2 || seen["libstdc++.so.6"] < 3 {
		t.Errorf("main-thread allocations inside the libraries checked: %v, want 2 in libc.so.6 (fopen, first read), 3 in libstdc++.so.6", seen)
	}
}

// oracleBinary returns the oracle program, checked to have no frame
// pointer: no function of its own (crt's aside) sets one up.
func oracleBinary(t *testing.T) string {
	t.Helper()
	exe := need(t, "tests/progs/build/unwind_oracle")
	need(t, "tests/progs/build/unwind_dl.so")
	return exe
}

// crtFuncs come from gcc's and glibc's start files, not from the oracle's
// sources.
var crtFuncs = map[string]bool{"__do_global_dtors_aux": true, "frame_dummy": true, "register_tm_clones": true,
	"deregister_tm_clones": true, "_start": true, "_init": true, "_fini": true}

// framePointerFuncs lists the functions of an ELF file that set up a frame
// pointer (push %rbp; mov %rsp,%rbp).
func framePointerFuncs(t *testing.T, file string) []string {
	t.Helper()
	out, err := command("objdump", "-d", "--no-show-raw-insn", file).Output()
	if err != nil {
		t.Fatalf("objdump -d %s: %v", file, err)
	}
	var found []string
	fn, prevPush := "", false
	for _, ln := range strings.Split(string(out), "\n") {
		if strings.HasSuffix(ln, ">:") {
			if i := strings.Index(ln, "<"); i >= 0 {
				fn = ln[i+1 : len(ln)-2]
			}
			prevPush = false
			continue
		}
		f := strings.Fields(ln)
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		insn := strings.Join(f[1:], " ")
		if prevPush && insn == "mov %rsp,%rbp" && !crtFuncs[fn] {
			found = append(found, fn)
		}
		prevPush = insn == "push %rbp"
	}
	return found
}

// TestDwarfOracleNoFramePointers: the oracle's code really has no frame
// pointers, or its stacks would prove nothing about DWARF unwinding.
func TestDwarfOracleNoFramePointers(t *testing.T) {
	exe := oracleBinary(t)
	for _, f := range []string{exe, filepath.Join(filepath.Dir(exe), "unwind_dl.so")} {
		if fns := framePointerFuncs(t, f); len(fns) > 0 {
			t.Errorf("%s: functions with a frame pointer: %v (build with -fomit-frame-pointer)", f, fns)
		}
	}
	// The check sees a frame pointer where there is one.
	bin := buildWith(t, "gcc", "withfp", deepSrc, "-O2", "-fno-omit-frame-pointer")
	if fns := framePointerFuncs(t, bin); len(fns) < 20 || !strings.Contains(" "+strings.Join(fns, " ")+" ", " main ") {
		t.Errorf("a -fno-omit-frame-pointer build shows %d functions with a frame pointer (%v), want main and f1..f19 at least", len(fns), fns)
	}
}

// oracleScenarios are the program's arguments: the plain run, with a
// dlopen'ed library, through a fork, across an exec.
var oracleScenarios = []struct {
	name string
	args []string
}{
	{"plain", nil},
	{"dlopen", []string{"dlopen"}},
	{"fork", []string{"fork"}},
	{"exec", []string{"exec", "dlopen"}},
}

// followFor is --follow where the program's arguments make it fork: on
// both paths a child is traced only with it.
func followFor(args []string) []string {
	for _, a := range args {
		if a == "fork" {
			return []string{"--follow"}
		}
	}
	return nil
}

// oracleThreads is how many threads record: four workers and main, twice
// with a forked child.
func oracleThreads(args []string) int {
	for _, a := range args {
		if a == "fork" {
			return 10
		}
	}
	return 5
}

// TestDwarfOraclePreload: the LD_PRELOAD path's stacks equal the record
// in every frame, for every allocation of every scenario, and the event
// lines are the recorded ones; for both of the library's walks: over the
// unwind rows memtrace builds (at least 90 % of the stacks, -v says: on
// a loaded machine a process's first stacks through a new file may come
// before its table and take backtrace()), and glibc's backtrace() alone
// (MEMTRACE_WALK=backtrace).
func TestDwarfOraclePreload(t *testing.T) {
	memtrace := need(t, "bin/memtrace")
	exe := oracleBinary(t)
	for _, walk := range []string{"rows", "backtrace"} {
		for _, sc := range oracleScenarios {
			t.Run(walk+"/"+sc.name, func(t *testing.T) {
				if testing.Short() && walk == "backtrace" && sc.name != "plain" {
					t.Skip("-short: backtrace() alone over the plain scenario; make test runs every scenario")
				}
				r := newRun(t)
				args := append(append([]string{"-v", "--preload", "--stack-depth", strconv.Itoa(oracleDepth), "-o", r.log}, followFor(sc.args)...), "--", exe)
				args = append(args, sc.args...)
				// The pause lets the tables be built before the first
				// stacks on a loaded machine (make test's packages run
				// side by side): the test is of the walk, not of the
				// race with the build, which takes backtrace() exactly.
				r.runMemtraceEnv(t, memtrace, []string{"MEMTRACE_WALK=" + walk, "UNWIND_ORACLE_PAUSE_MS=300"}, args...)
				rows, bt := preloadWalks(t, r.stderr.String())
				if walk == "rows" && (rows == 0 || bt*10 > rows+bt) || walk == "backtrace" && (rows != 0 || bt == 0) {
					t.Fatalf("MEMTRACE_WALK=%s: %d stacks over the rows, %d by backtrace()", walk, rows, bt)
				}
				_, recs, byTID := checkOracle(t, r, oracleDepth, oracleThreads(sc.args))
				checkLibraryStacks(t, recs, byTID)
			})
		}
	}
}

// TestDwarfOraclePreloadStackIDs: a thread sends each stack once and then
// its id alone (docs/preload.md, "Stacks"); with a table of 64 ids,
// 2,048 distinct stacks twice over make the library forget, evict and
// send ids again with other frames, and still every frame of every event
// equals the record. Events do come by id (-v), or the test would prove
// nothing of the ids.
func TestDwarfOraclePreloadStackIDs(t *testing.T) {
	memtrace := need(t, "bin/memtrace")
	exe := oracleBinary(t)
	for _, ids := range []string{"64", ""} {
		t.Run("ids="+ids, func(t *testing.T) {
			r := newRun(t)
			args := []string{"-v", "--preload", "--stack-depth", strconv.Itoa(oracleDepth), "-o", r.log, "--", exe, "many"}
			r.runMemtraceEnv(t, memtrace, []string{"MEMTRACE_STACK_IDS=" + ids, "UNWIND_ORACLE_PAUSE_MS=300"}, args...)
			sent, byID := preloadStackIDs(t, r.stderr.String())
			_, recs, byTID := checkOracle(t, r, oracleDepth, oracleThreads(nil))
			checkLibraryStacks(t, recs, byTID)
			// Each of the fan's 2,048 stacks (its mallocs' and its
			// frees') is sent in the first pass; with 64 ids, in the
			// second again; with the whole table, most of the second
			// pass goes by id.
			if sent < 2048 || ids == "64" && (sent < 4096 || byID == 0) || ids == "" && byID < 1024 {
				t.Errorf("MEMTRACE_STACK_IDS=%s: %d events sent their frames, %d an id alone", ids, sent, byID)
			}
		})
	}
}

// TestPreloadStackTableThreadChurn: a thread's stack table goes with the
// thread, and the frees its process's later key destructors make (after
// the library's own) do not map another one: 3,000 threads one after
// another, each with such a free, leave the address space as it was but
// for the C library's own (a table kept per ended thread would add a GB).
func TestPreloadStackTableThreadChurn(t *testing.T) {
	memtrace := need(t, "bin/memtrace")
	exe := need(t, "tests/progs/build/threadchurn")
	r := newRun(t)
	r.runMemtraceEnv(t, memtrace, nil, "--preload", "--stack-depth", "8", "-o", r.log, "--", exe)
	var before, after int64
	for _, ln := range strings.Split(r.stderr.String(), "\n") {
		if _, err := fmt.Sscanf(ln, "vmsize %d %d", &before, &after); err == nil {
			break
		}
	}
	if before <= 0 || after <= 0 {
		t.Fatalf("threadchurn printed no sizes:\n%s", r.stderr.String())
	}
	if grew := after - before; grew > 256<<10 {
		t.Errorf("the address space grew by %d KiB over 3,000 ended threads", grew)
	}
	log, err := os.ReadFile(r.log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "free "); n < 6000 {
		t.Errorf("%d free lines, want at least 6000 (each thread's two)", n)
	}
	// A thread takes an ended thread's table of stacks sent (the
	// library keeps a few): a slot left from the last thread would send
	// an id this thread's stream never defined.
	if n := strings.Count(string(log), "stack missing=1"); n > 0 {
		t.Errorf("%d events without their stack (an id the reader never got)", n)
	}
	events, framed := 0, 0
	prevEvent := false
	for _, ln := range strings.Split(string(log), "\n") {
		if prevEvent && strings.HasPrefix(ln, "[memtrack]   #0 ") {
			framed++
		}
		prevEvent = strings.Contains(ln, " ptr=0x")
		if prevEvent {
			events++
		}
	}
	if framed != events {
		t.Errorf("%d of %d malloc and free lines have frames", framed, events)
	}
}

// TestPreloadStacksMemoryPerThread: what the library keeps per thread for
// stacks (its walk record, its table of stacks sent) stays small for a
// thread of few stacks: 100 threads alive at once with 128 stacks each
// hold at most 100 KiB more each with --stack-depth 32 than without
// stacks (a table of its full size took about 150 KiB a thread). The
// region's chunks, shared memory, are not counted: a thread whose records
// outgrow its small first chunk takes a large one, which stacks do here.
func TestPreloadStacksMemoryPerThread(t *testing.T) {
	memtrace := need(t, "bin/memtrace")
	exe := need(t, "tests/progs/build/threadstacks")
	grew := func(depth string) int64 {
		r := newRun(t)
		r.runMemtraceEnv(t, memtrace, nil, "--preload", "--stack-depth", depth, "-o", r.log, "--", exe)
		var before, after int64
		for _, ln := range strings.Split(r.stderr.String(), "\n") {
			if _, err := fmt.Sscanf(ln, "rss %d %d", &before, &after); err == nil {
				return after - before
			}
		}
		t.Fatalf("threadstacks printed no sizes:\n%s", r.stderr.String())
		return 0
	}
	plain, stacks := grew("0"), grew("32")
	if per := (stacks - plain) / 100; per > 100 {
		t.Errorf("with stacks each thread holds %d KiB more (%d KiB in all against %d without)", per, stacks, plain)
	}
}

// preloadStackIDs reads memtrace -v's count of events that sent their
// frames and of those that sent an id alone.
func preloadStackIDs(t *testing.T, stderr string) (sent, byID int) {
	t.Helper()
	preloadStacksPart(t, stderr, "%d sent with their frames, %d by id", &sent, &byID)
	return sent, byID
}

// preloadWalks reads memtrace -v's count of the library's stacks by walk.
func preloadWalks(t *testing.T, stderr string) (rows, backtrace int) {
	t.Helper()
	for _, ln := range strings.Split(stderr, "\n") {
		if _, err := fmt.Sscanf(ln, "memtrace: preload stacks: %d over unwind rows, %d by backtrace()", &rows, &backtrace); err == nil {
			return rows, backtrace
		}
	}
	t.Fatalf("memtrace -v says nothing of the preload stacks:\n%s", stderr)
	return 0, 0
}

// TestDwarfOracleCatchesMismatch: the comparison fails a log whose frames
// differ from the record in one address, that stops early, or whose event
// differs, so a passing run means something.
func TestDwarfOracleCatchesMismatch(t *testing.T) {
	memtrace := need(t, "bin/memtrace")
	exe := oracleBinary(t)
	r := newRun(t)
	r.runMemtrace(t, memtrace, []string{"--preload", "--stack-depth", strconv.Itoa(oracleDepth), "-o", r.log, "--", exe})
	recs := readOracleRun(t, r.truth)
	fr := newFrameResolver()
	fresh := func() map[int64][]*dwarfEvent {
		_, byTID := readDwarfLog(t, r.log)
		return byTID
	}
	base := compareOracle(fr, fresh(), recs, oracleDepth)
	if len(base.errs) > 0 || base.stacksMatched != base.stacks {
		t.Fatalf("the unaltered log does not match (%d of %d): %v", base.stacksMatched, base.stacks, base.errs)
	}
	lineOfRec := map[*oracleRec]int{}
	for _, rec := range recs {
		lineOfRec[rec] = rec.matchedLogLine
	}
	// One allocation event of a worker deep in the recursion, one inside
	// libc.
	var deep, inner *oracleRec
	for _, rec := range recs {
		if rec.kind == "d" && !rec.mainThread && len(rec.pcs) > 40 && deep == nil {
			deep = rec
		}
		if rec.kind == "i:libc.so.6" && inner == nil {
			inner = rec
		}
	}
	if deep == nil || inner == nil {
		t.Fatal("the record has no deep or libc-internal allocation")
	}
	eventOf := func(byTID map[int64][]*dwarfEvent, rec *oracleRec) *dwarfEvent {
		for _, e := range byTID[rec.tid] {
			if e.line == lineOfRec[rec] {
				return e
			}
		}
		t.Fatalf("record %v has no event", rec)
		return nil
	}
	for _, c := range []struct {
		name   string
		rec    *oracleRec
		change func(e *dwarfEvent)
	}{
		{"one outer frame off by one", deep, func(e *dwarfEvent) { e.frames[17].addr++ }},
		{"two frames swapped", deep, func(e *dwarfEvent) { e.frames[5], e.frames[6] = e.frames[6], e.frames[5] }},
		{"frame #0 in another function", deep, func(e *dwarfEvent) { e.frames[0] = e.frames[1] }},
		{"stops at frame 12", deep, func(e *dwarfEvent) { e.frames = e.frames[:12] }},
		{"frame-pointer stack (frame #0 only)", deep, func(e *dwarfEvent) { e.frames = e.frames[:1] }},
		{"a frame too many", deep, func(e *dwarfEvent) { e.frames = append(e.frames, e.frames[3]) }},
		{"libc frames missing", inner, func(e *dwarfEvent) {
			for len(e.frames) > 0 && inLibrary(e.frames[0], "libc.so.6") {
				e.frames = e.frames[1:]
			}
		}},
		{"library stack stops in libc", inner, func(e *dwarfEvent) { e.frames = e.frames[:1] }},
		{"size", deep, func(e *dwarfEvent) { e.size++ }},
		{"ptr", deep, func(e *dwarfEvent) { e.ptr += 16 }},
		{"op", deep, func(e *dwarfEvent) { e.op = "calloc" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			byTID := fresh()
			c.change(eventOf(byTID, c.rec))
			res := compareOracle(fr, byTID, recs, oracleDepth)
			if len(res.errs) == 0 {
				t.Fatalf("a log with %s passes the comparison", c.name)
			}
			t.Logf("caught: %s", res.errs[0])
		})
	}
}

// rootShare counts a log's allocation stacks that reach a root frame
// (__libc_start_call_main, start_thread, clone3), and the innermost-
// outermost function of those that do not, by count.
func rootShare(t *testing.T, path string) (reached, total int, stops map[string]int) {
	t.Helper()
	evs, _ := readDwarfLog(t, path)
	fr := newFrameResolver()
	requireLibcNames(t, fr, evs)
	stops = map[string]int{}
	for _, e := range evs {
		if e.kind != logfmt.KindAlloc {
			continue
		}
		total++
		ok := false
		for _, f := range e.frames {
			if rootFuncs[fr.funcOf(f)] {
				ok = true
				break
			}
		}
		if ok {
			reached++
			continue
		}
		last := "(no frames)"
		if n := len(e.frames); n > 0 {
			last = fmt.Sprintf("%s in %s after %d frames (truncated=%q)", fr.funcOf(e.frames[n-1]), filepath.Base(e.frames[n-1].module), n, e.truncated)
		}
		stops[last]++
	}
	return reached, total, stops
}

// requireLibcNames fails t unless libc's static functions have names
// here: Debian's libc.so.6 has only its dynamic symbols, and
// __libc_start_call_main and start_thread are named by its debug file.
func requireLibcNames(t *testing.T, fr *frameResolver, evs []*dwarfEvent) {
	t.Helper()
	for _, e := range evs {
		for _, f := range e.frames {
			if !inLibrary(f, "libc.so.6") {
				continue
			}
			m, err := fr.cache.Open(f.module)
			if err != nil {
				t.Fatalf("open %s: %v", f.module, err)
			}
			if _, err := m.SymbolValue("__libc_start_call_main"); err != nil {
				t.Fatalf("%s: no name for __libc_start_call_main (%v): install libc6-dbg", f.module, err)
			}
			return
		}
	}
}

// requireRootShare fails t unless at least 99 % of the log's allocation
// stacks reach a root frame.
func requireRootShare(t *testing.T, path, what string) {
	t.Helper()
	reached, total, stops := rootShare(t, path)
	t.Logf("%s: %d of %d allocation stacks reach __libc_start_call_main, start_thread or clone3", what, reached, total)
	if total < 1000 {
		t.Errorf("%s: only %d allocations, want a workload of thousands", what, total)
	}
	if reached*100 < total*99 {
		t.Errorf("%s: %d of %d stacks (%.1f %%) reach a root frame, want ≥ 99 %%", what, reached, total, 100*float64(reached)/float64(total))
		n := 0
		for s, c := range stops {
			if n++; n > 10 {
				break
			}
			t.Logf("  %d stop at %s", c, s)
		}
	}
}

// debianPrograms are Debian's own binaries (built without frame pointers)
// and their workloads: the program's arguments and its standard input.
type debianProgram struct {
	name, stdin string
	args        []string
}

func debianPrograms(t *testing.T) []debianProgram {
	t.Helper()
	var sql strings.Builder
	sql.WriteString("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);\nBEGIN;\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&sql, "INSERT INTO t(name, v) VALUES('row-%d-%s', %d.5);\n", i, strings.Repeat("x", i%40), i)
	}
	sql.WriteString("COMMIT;\nCREATE INDEX ti ON t(name);\nSELECT count(*), sum(v) FROM t WHERE name LIKE 'row-1%';\n")
	db := filepath.Join(t.TempDir(), "t.db")
	const py = `import json
d = [{"k%d" % i: list(range(i % 200)), "s": "v" * (i % 300)} for i in range(3000)]
s = json.dumps(d)
assert json.loads(s) == d
print(len(s))`
	for _, p := range []string{"/usr/bin/sqlite3", "/usr/bin/python3.11"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing (apt-get install -y sqlite3 python3.11)", p)
		}
	}
	return []debianProgram{
		{"sqlite3", sql.String(), []string{"/usr/bin/sqlite3", db}},
		{"python3.11", "", []string{"/usr/bin/python3.11", "-c", py}},
	}
}

// traceWithStdin runs memtrace with args, the program reading stdin.
func traceWithStdin(t *testing.T, stdin string, args ...string) {
	t.Helper()
	cmd := command(need(t, "bin/memtrace"), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := runCmd(t, cmd, runLimit); err != nil {
		t.Fatalf("memtrace %v: %v\n%s", args, err, out.String())
	}
}

// TestDwarfRootsPreload: the ≥ 99 % measure on Debian's sqlite3 and
// python3.11 holds for the LD_PRELOAD path's stacks (the bar the eBPF path
// must reach in TestDwarfRootsBPF).
func TestDwarfRootsPreload(t *testing.T) {
	if testing.Short() {
		t.Skip("traces Debian's sqlite3 and python3.11 with 127-frame stacks: make test runs it")
	}
	for _, p := range debianPrograms(t) {
		t.Run(p.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			traceWithStdin(t, p.stdin, append([]string{"--preload", "--stack-depth", "127", "-o", log, "--"}, p.args...)...)
			requireRootShare(t, log, p.name+" (preload)")
		})
	}
}
