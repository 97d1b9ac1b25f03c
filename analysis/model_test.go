package analysis

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// logb builds logs through logfmt, the one writer.
type logb struct{ b []byte }

func (l *logb) alloc(tid int64, name, op string, ts, size, ptr uint64) *logb {
	l.b = logfmt.AppendAlloc(l.b, tid, name, op, ts, size, size, ptr)
	return l
}
func (l *logb) free(tid int64, name, op string, ts, size, ptr uint64) *logb {
	l.b = logfmt.AppendFree(l.b, tid, name, op, ts, size, ptr)
	return l
}
func (l *logb) exit(tid int64, name string, ts uint64) *logb {
	l.b = logfmt.AppendExit(l.b, tid, name, ts, 0)
	return l
}
func (l *logb) frame(i int, sym string, off uint64) *logb {
	l.b = logfmt.AppendFrame(l.b, i, "./app", sym, off, 0x1000+off)
	return l
}
func (l *logb) meta(word string, kv ...string) *logb {
	var kvs []logfmt.KV
	for i := 0; i+1 < len(kv); i += 2 {
		kvs = append(kvs, logfmt.KV{Key: kv[i], Value: kv[i+1]})
	}
	l.b = logfmt.AppendMeta(l.b, word, kvs...)
	return l
}
func (l *logb) raw(s string) *logb { l.b = append(l.b, s...); return l }

func load(t testing.TB, b []byte) *Model {
	t.Helper()
	m := New()
	if err := m.ReadAll(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	return m
}

func statuses(m *Model) string {
	var s []string
	for i := range m.TS {
		s = append(s, fmt.Sprintf("%x:%s", m.Ptr[i], m.Status(uint32(i))))
	}
	return strings.Join(s, " ")
}

func TestLeakRules(t *testing.T) {
	var l logb
	l.alloc(1, "main", "malloc", 10, 100, 0xa0) // freed by main
	l.alloc(2, "worker", "new", 11, 200, 0xb0)  // freed by main after worker exited: not a leak
	l.alloc(2, "worker", "malloc", 12, 300, 0xc0)
	l.exit(2, "worker", 13)
	l.free(1, "main", "free", 14, 100, 0xa0)
	l.free(1, "main", "delete", 15, 200, 0xb0)
	l.alloc(1, "main", "calloc", 16, 50, 0xd0) // never freed: leak at end of log
	m := load(t, l.b)
	if got, want := statuses(m), "a0:freed b0:freed c0:leak d0:leak"; got != want {
		t.Fatalf("statuses %q, want %q", got, want)
	}
	n, b := m.Leaks()
	if n != 2 || b != 350 {
		t.Fatalf("leaks %d/%d, want 2/350", n, b)
	}
	w := &m.Threads[m.threadOf(2)]
	if w.Allocs != 2 || w.AllocBytes != 500 || w.Frees != 1 || w.FreedBytes != 200 || w.LiveBytes != 300 || w.FreeCalls != 0 {
		t.Fatalf("worker stats %+v", *w)
	}
	if mt := &m.Threads[m.threadOf(1)]; mt.FreeCalls != 2 {
		t.Fatalf("main free calls %d", mt.FreeCalls)
	}
	if m.FreeThread[1] != m.threadOf(1) || m.FreeOp[1] != uint8(logfmt.OpDelete) {
		t.Fatalf("free of b0 recorded as thread %d op %d", m.FreeThread[1], m.FreeOp[1])
	}
}

// Before the end of a live log, a block is a leak only once its thread has
// exited, and a free after the exit cancels it.
func TestLiveLeakCancellation(t *testing.T) {
	m := New()
	var l logb
	l.alloc(2, "w", "malloc", 1, 10, 0x10).alloc(1, "main", "malloc", 2, 20, 0x20)
	applyText(m, l.b)
	if m.Status(0) != StatusActive || m.Status(1) != StatusActive {
		t.Fatalf("live log: %s", statuses(m))
	}
	l.b = l.b[:0]
	l.exit(2, "w", 3)
	applyText(m, l.b)
	if m.Status(0) != StatusLeak || m.Status(1) != StatusActive {
		t.Fatalf("after exit: %s", statuses(m))
	}
	l.b = l.b[:0]
	l.free(1, "main", "free", 4, 10, 0x10)
	applyText(m, l.b)
	if m.Status(0) != StatusFreed {
		t.Fatalf("after cross-thread free: %s", statuses(m))
	}
	if n, _ := m.Leaks(); n != 0 {
		t.Fatalf("leaks %d after cancellation", n)
	}
	m.Finish()
	if m.Status(1) != StatusLeak {
		t.Fatalf("at end: %s", statuses(m))
	}
}

// applyText applies complete lines without finishing the model.
func applyText(m *Model, text []byte) {
	b := &batch{data: make([]byte, 0, len(text)+1)}
	sc := logfmt.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		b.add(sc.Line())
	}
	b.parse()
	b.flush = true
	m.apply(b)
}

func TestFreeWithoutSizeAndReallocInPlace(t *testing.T) {
	var l logb
	l.alloc(1, "m", "malloc", 1, 64, 0x40)
	l.raw("[memtrack] tid=1      (m              ) free       ts=2            ptr=0x40\n")
	l.alloc(1, "m", "realloc", 2, 128, 0x40) // realloc in place: free p then alloc p, same µs
	l.free(1, "m", "free", 3, 128, 0x40)
	m := load(t, l.b)
	if got := statuses(m); got != "40:freed 40:freed" {
		t.Fatalf("statuses %q", got)
	}
	th := &m.Threads[0]
	if th.FreedBytes != 192 || th.LiveBytes != 0 {
		t.Fatalf("freed %d live %d: a free without size= takes the allocation's size", th.FreedBytes, th.LiveBytes)
	}
	if m.Counts.UnmatchedFrees != 0 {
		t.Fatalf("unmatched %d", m.Counts.UnmatchedFrees)
	}
}

func TestFramesAndInterning(t *testing.T) {
	var l logb
	l.alloc(1, "m", "malloc", 1, 8, 0x10).frame(0, "_Z3foov", 4).frame(1, "main", 9)
	l.alloc(1, "m", "malloc", 2, 8, 0x20).frame(0, "_Z3foov", 4).frame(1, "main", 9)
	l.free(1, "m", "free", 3, 8, 0x10).frame(0, "_Z3barv", 1)
	l.alloc(1, "m", "malloc", 4, 8, 0x30)
	l.raw("[memtrack]   #0  [0xdead]\n")
	m := load(t, l.b)
	if m.Stack[0] == 0 || m.Stack[0] != m.Stack[1] {
		t.Fatalf("equal stacks not interned: %d %d", m.Stack[0], m.Stack[1])
	}
	if m.FreeStack[0] == 0 || m.FreeStack[0] == m.Stack[0] {
		t.Fatalf("free stack %d", m.FreeStack[0])
	}
	fr := m.Frames(m.Stack[0])
	if len(fr) != 2 || m.Frame(fr[0]).Symbol != "_Z3foov" || m.Frame(fr[1]).Symbol != "main" || m.Frame(fr[0]).Offset != 4 {
		t.Fatalf("frames %v", fr)
	}
	if got := m.Frames(m.Stack[2]); len(got) != 1 || m.Frame(got[0]).Addr != 0xdead {
		t.Fatalf("bare frame: %v", got)
	}
	if m.NumFrames() != 4 {
		t.Fatalf("%d distinct frames, want 4", m.NumFrames())
	}
	m.Demangle = func(s string) string { return strings.ReplaceAll(s, "_Z3foov", "foo()") }
	if got := m.FrameName(fr[0]); got != "foo()" {
		t.Fatalf("frame name %q", got)
	}
}

func TestGarbageCountedNeverFatal(t *testing.T) {
	var l logb
	l.raw("hello from the program\n")
	l.alloc(1, "m", "malloc", 1, 8, 0x10)
	l.raw("[memtrack] tid=5 (main\n")                                                         // truncated
	l.raw("[memtrack] tid=5      (main           ) malloc     ts=1 size=2\n")                 // no ptr
	l.raw("\x00\xff[memtrack] \xfe\n")                                                        // binary
	l.raw("[memtrack]   #0  ./app(_Z3foov+0x1) [0x10]\n")                                     // frame after alloc: fine
	l.raw("[memtrack] tid=7      (x              ) malloc     ts=9 size=1  total=1  ptr=0x5") // no newline at end
	m := load(t, l.b)
	if m.Counts.Malformed != 3 || m.Counts.Other != 1 || m.Len() != 2 {
		t.Fatalf("counts %+v len %d", m.Counts, m.Len())
	}
	if m.Counts.Garbage() != 3 {
		t.Fatalf("garbage %d", m.Counts.Garbage())
	}
}

func TestMetaLines(t *testing.T) {
	var l logb
	l.meta("header", "pid", "100", "comm", "app", "cmd", "./app -x", "version", "1")
	l.meta("thread", "tid", "100", "pid", "100", "name", "app")
	l.meta("thread", "tid", "200", "pid", "200", "name", "child")
	l.meta("proc", "event", "fork", "pid", "200", "ppid", "100", "comm", "child")
	l.alloc(100, "app", "malloc", 1, 10, 0x10)
	l.alloc(200, "child", "malloc", 2, 20, 0x10) // same address, other process
	l.free(100, "app", "free", 3, 10, 0x10)
	l.meta("lost", "count", "5", "total", "5")
	l.meta("lost", "count", "2", "total", "7")
	l.meta("proc", "event", "exit", "pid", "200", "status", "0")
	l.meta("notice", "msg", "hello there")
	l.meta("unknownword", "x", "1")
	m := load(t, l.b)
	if !m.Header.Seen || m.Header.PID != 100 || m.Header.Cmd != "./app -x" || m.Header.Comm != "app" {
		t.Fatalf("header %+v", m.Header)
	}
	if m.LostEvents != 7 {
		t.Fatalf("lost %d", m.LostEvents)
	}
	if len(m.Procs) != 2 || m.Threads[1].Proc != 1 || m.Procs[1].PPID != 100 || !m.Procs[1].Exited {
		t.Fatalf("procs %+v threads %+v", m.Procs, m.Threads)
	}
	if m.Status(0) != StatusFreed || m.Status(1) != StatusLeak {
		t.Fatalf("per-process matching: %s", statuses(m))
	}
	if len(m.Notices) != 1 || m.Notices[0] != "hello there" {
		t.Fatalf("notices %q", m.Notices)
	}
	q := NewQuery()
	q.Proc = 1
	if sel := m.Select(&q, nil); len(sel) != 1 || sel[0] != 1 {
		t.Fatalf("process filter %v", sel)
	}
	if got := m.ThreadOrder(ThreadByName, false, 1); len(got) != 1 || got[0] != 1 {
		t.Fatalf("threads of proc 1: %v", got)
	}
}

func TestTidReuseAfterExit(t *testing.T) {
	var l logb
	l.alloc(5, "a", "malloc", 1, 10, 0x10).exit(5, "a", 2)
	l.alloc(5, "b", "malloc", 3, 10, 0x20)
	m := load(t, l.b)
	if len(m.Threads) != 2 || m.Threads[1].Name != "b" || m.Thread[1] != 1 {
		t.Fatalf("threads %+v", m.Threads)
	}
}

// genEvents makes a random, consistent allocation history over nthreads
// threads, in time order, with per-thread event lists for memtrack-style
// buffering.
type gev struct {
	tid         int64
	free        bool
	ts, sz, ptr uint64
	stack       int
}

func genHistory(r *rand.Rand, n, nthreads int) []gev {
	var evs []gev
	type blk struct{ ptr, sz uint64 }
	var live []blk
	freeList := []uint64{}
	next := uint64(0x1000)
	ts := uint64(0)
	for len(evs) < n {
		// Time stamps are distinct across threads (else no reader could
		// order an unordered log); within a thread a realloc in place
		// logs a free and an alloc of one address at the same µs.
		ts++
		tid := int64(1 + r.IntN(nthreads))
		if len(live) > 0 && r.IntN(8) == 0 {
			k := r.IntN(len(live))
			b := live[k]
			sz := uint64(1 + r.IntN(100))
			evs = append(evs, gev{tid, true, ts, b.sz, b.ptr, 0}, gev{tid, false, ts, sz, b.ptr, 1})
			live[k].sz = sz
			continue
		}
		if len(live) > 0 && r.IntN(2) == 0 {
			k := r.IntN(len(live))
			b := live[k]
			live = append(live[:k], live[k+1:]...)
			evs = append(evs, gev{tid, true, ts, b.sz, b.ptr, r.IntN(3)})
			freeList = append(freeList, b.ptr)
			continue
		}
		var p uint64
		if len(freeList) > 0 && r.IntN(3) > 0 {
			k := r.IntN(len(freeList))
			p = freeList[k]
			freeList = append(freeList[:k], freeList[k+1:]...)
		} else {
			p = next
			next += 0x10
		}
		sz := uint64(1 + r.IntN(100))
		live = append(live, blk{p, sz})
		evs = append(evs, gev{tid, false, ts, sz, p, r.IntN(3)})
	}
	return evs
}

func writeEvents(evs []gev, buffered bool, r *rand.Rand, noSize bool) []byte {
	var out []byte
	bufs := map[int64][]byte{}
	for _, e := range evs {
		var line []byte
		name := fmt.Sprintf("t%d", e.tid)
		if e.free {
			if noSize {
				line = fmt.Appendf(nil, "[memtrack] tid=%-6d (%-15s) %-10s ts=%-12d ptr=0x%x\n", e.tid, name, "free", e.ts, e.ptr)
			} else {
				line = logfmt.AppendFree(nil, e.tid, name, "free", e.ts, e.sz, e.ptr)
			}
		} else {
			line = logfmt.AppendAlloc(nil, e.tid, name, "malloc", e.ts, e.sz, 0, e.ptr)
		}
		for k := 0; k < e.stack; k++ {
			line = logfmt.AppendFrame(line, k, "./app", fmt.Sprintf("f%d", k+e.stack), uint64(k), 0x100)
		}
		if !buffered {
			out = append(out, line...)
			continue
		}
		bufs[e.tid] = append(bufs[e.tid], line...)
		if len(bufs[e.tid]) > 200+r.IntN(2000) {
			out = append(out, bufs[e.tid]...)
			bufs[e.tid] = nil
		}
	}
	for tid := int64(1); tid <= int64(len(bufs)); tid++ {
		out = append(out, bufs[tid]...)
	}
	return out
}

type fingerprint struct {
	status []string
	thread []string
}

func fp(m *Model) fingerprint {
	var f fingerprint
	if !m.SummaryOnly {
		for i := range m.TS {
			f.status = append(f.status, fmt.Sprintf("%d/%x/%d:%s:%d:%d", m.TS[i], m.Ptr[i], m.Threads[m.Thread[i]].TID, m.Status(uint32(i)), m.FreeTS[i], len(m.Frames(m.Stack[i]))))
		}
		slices.Sort(f.status)
	}
	for i := range m.Threads {
		t := &m.Threads[i]
		f.thread = append(f.thread, fmt.Sprintf("%d %d %d %d %d %d %d %d", t.TID, t.Allocs, t.AllocBytes, t.Frees, t.FreedBytes, t.LiveCount, t.LiveBytes, t.FreeCalls))
	}
	slices.Sort(f.thread)
	return f
}

// memtrack's per-thread buffering reorders lines; the result must be the
// same as for the log in time order, in both full and summary mode.
func TestUnorderedLogMatchesOrdered(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		evs := genHistory(r, 3000, 4)
		ordered := writeEvents(evs, false, r, false)
		want := fp(load(t, ordered))
		for _, noSize := range []bool{false, true} {
			unordered := writeEvents(evs, true, r, noSize)
			m := load(t, unordered)
			if !m.OutOfOrder {
				t.Fatalf("seed %d: buffered log not detected as unordered", seed)
			}
			got := fp(m)
			if !slices.Equal(got.status, want.status) || !slices.Equal(got.thread, want.thread) {
				t.Fatalf("seed %d noSize %v: unordered result differs\n got %v\nwant %v", seed, noSize, diff(got.status, want.status), got.thread)
			}
			s := New()
			s.SummaryOnly = true
			if err := s.ReadAll(bytes.NewReader(unordered)); err != nil {
				t.Fatal(err)
			}
			if gs := fp(s); !slices.Equal(gs.thread, want.thread) {
				t.Fatalf("seed %d: summary mode threads\n got %v\nwant %v", seed, gs.thread, want.thread)
			}
		}
	}
}

func diff(a, b []string) string {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			if i < len(b) {
				return a[i] + " vs " + b[i]
			}
			return a[i]
		}
	}
	return "length"
}

// Summary mode recycles storage but must give the figures of full mode.
func TestSummaryModeMatchesFull(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	log := logfmt.AppendMeta(nil, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "1"})
	log = append(log, writeEvents(genHistory(r, 20000, 6), false, r, false)...)
	full := load(t, log)
	s := New()
	s.SummaryOnly = true
	if err := s.ReadAll(bytes.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	if a, b := fp(full).thread, fp(s).thread; !slices.Equal(a, b) {
		t.Fatalf("summary %v\nfull %v", b, a)
	}
	if s.Len() >= full.Len()/2 {
		t.Fatalf("summary mode kept %d of %d allocations", s.Len(), full.Len())
	}
	fn, fb := full.Leaks()
	sn, sb := s.Leaks()
	if fn != sn || fb != sb || fn == 0 {
		t.Fatalf("leaks full %d/%d summary %d/%d", fn, fb, sn, sb)
	}
}

// slowReader hands out a few bytes at a time and says "nothing more for
// now" in between, as a followed file does.
type slowReader struct {
	data []byte
	pos  int
	r    *rand.Rand
	dry  bool
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.dry || s.pos >= len(s.data) {
		s.dry = false
		return 0, io.EOF
	}
	n := min(len(p), 1+s.r.IntN(300), len(s.data)-s.pos)
	copy(p, s.data[s.pos:s.pos+n])
	s.pos += n
	s.dry = s.r.IntN(3) == 0
	return n, nil
}

func (s *slowReader) Wait(stop <-chan struct{}) bool { return s.pos < len(s.data) }

// Live mode (appends in small pieces, frames split from their event across
// reads) must end with the same model as a one-shot load.
func TestIncrementalEqualsOneShot(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	log := writeEvents(genHistory(r, 5000, 3), true, r, true)
	want := fp(load(t, log))
	m := New()
	calls := 0
	if err := m.Stream(&slowReader{data: log, r: r}, StreamOptions{OnBatch: func() { calls++ }, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	got := fp(m)
	if !slices.Equal(got.status, want.status) || !slices.Equal(got.thread, want.thread) {
		t.Fatalf("incremental differs: %s", diff(got.status, want.status))
	}
	if calls < 10 {
		t.Fatalf("only %d batches: the reader did not stream", calls)
	}
}

func TestStreamReaderEndsMidLine(t *testing.T) {
	var l logb
	l.alloc(1, "m", "malloc", 1, 8, 0x10).alloc(1, "m", "malloc", 2, 8, 0x20)
	text := l.b[:len(l.b)-10] // cut inside the last line
	var saved bytes.Buffer
	sr := NewStreamReader(bytes.NewReader(text), &saved)
	m := New()
	if err := m.Stream(sr, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if m.Len() != 1 || m.Counts.Malformed != 1 || !m.Done {
		t.Fatalf("len %d counts %+v done %v", m.Len(), m.Counts, m.Done)
	}
	if !bytes.Equal(saved.Bytes(), text) {
		t.Fatalf("tee saved %d bytes of %d", saved.Len(), len(text))
	}
}

func TestRadixSortStable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 10, 255, 256, 5000} {
		keys := make([]uint64, n)
		for i := range keys {
			keys[i] = uint64(r.IntN(50)) << uint(r.IntN(40))
		}
		ids := make([]uint32, n)
		for i := range ids {
			ids[i] = uint32(i)
		}
		want := slices.Clone(ids)
		slices.SortStableFunc(want, func(a, b uint32) int {
			if keys[a] < keys[b] {
				return -1
			}
			if keys[a] > keys[b] {
				return 1
			}
			return 0
		})
		radixSort(ids, func(i uint32) uint64 { return keys[i] })
		if !slices.Equal(ids, want) {
			t.Fatalf("n=%d: radix sort differs from stable sort", n)
		}
	}
}

// Two writers interleaved inside lines (no O_APPEND atomicity): what can be
// read is read, the rest counted, nothing matched wrongly.
func TestInterleavedLines(t *testing.T) {
	a := string(logfmt.AppendAlloc(nil, 1, "a", "malloc", 1, 10, 10, 0x10))
	b := string(logfmt.AppendAlloc(nil, 2, "b", "malloc", 2, 20, 20, 0x20))
	f := string(logfmt.AppendFree(nil, 1, "a", "free", 3, 10, 0x10))
	mixed := a[:40] + b + a[40:] + f
	m := load(t, []byte(mixed))
	// Line 1 (a's head + b) does not parse, line 2 (a's tail) is not a log
	// line, line 3 frees an address whose allocation was lost.
	if m.Counts.Lines != 3 || m.Counts.Malformed != 1 || m.Counts.Other != 1 || m.Len() != 0 || m.Counts.UnmatchedFrees != 1 {
		t.Fatalf("len %d counts %+v", m.Len(), m.Counts)
	}
}
