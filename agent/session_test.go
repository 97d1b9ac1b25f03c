package agent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
)

type rec struct {
	kind      logfmt.Kind
	tid       int64
	name, op  string
	size, ptr uint64
	total     uint64
	word      string
}

func parse(t *testing.T, b []byte) []rec {
	t.Helper()
	var out []rec
	sc := logfmt.NewScanner(bytes.NewReader(b))
	var l logfmt.Line
	for sc.Scan() {
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("line %q: %v", sc.Line(), err)
		}
		out = append(out, rec{l.Kind, l.TID, string(l.Name), string(l.OpText), l.Size, l.Ptr, l.Total, string(l.Word)})
	}
	return out
}

func ev(ts uint64, tid uint32, kind uint8, op logfmt.Op, ptr, size uint64, comm string) *event.Event {
	e := &event.Event{TS: ts, TGID: 1, TID: tid, Kind: kind, Op: uint8(op), Ptr: ptr, Size: size}
	copy(e.Comm[:], comm)
	return e
}

// events returns only the alloc/free/exit lines.
func events(rs []rec) []rec {
	var out []rec
	for _, r := range rs {
		if r.kind == logfmt.KindAlloc || r.kind == logfmt.KindFree || r.kind == logfmt.KindExit {
			out = append(out, r)
		}
	}
	return out
}

func TestSessionSemantics(t *testing.T) {
	var buf bytes.Buffer
	s := New(Config{Out: &buf, MinSize: 10})
	s.AddProcess(1, false)
	s.procs[1].scanned = true
	in := []*event.Event{
		ev(100, 1, event.KindAlloc, logfmt.OpMalloc, 0xa0, 100, "main"),
		// realloc in place, as both captures send it: free then alloc,
		// same ptr, the free's size from the live table
		ev(200, 1, event.KindFree, logfmt.OpFree, 0xa0, 0, "main"),
		ev(200, 1, event.KindAlloc, logfmt.OpRealloc, 0xa0, 300, "main"),
		ev(300, 1, event.KindAlloc, logfmt.OpMalloc, 0xb0, 5, "main"),    // below --min-size
		ev(400, 2, event.KindFree, logfmt.OpFree, 0xb0, 0, "worker"),     // its free is dropped too
		ev(500, 2, event.KindFree, logfmt.OpFree, 0xa0, 0, "worker"),     // cross-thread free: size known
		ev(550, 2, event.KindFree, logfmt.OpFree, 0xdead, 0, "worker"),   // unknown block in launch mode: not the program's
		ev(600, 1, event.KindFree, logfmt.OpRealloc, 0xc0, 0, "renamed"), // realloc(p, 0) of an unknown block
		ev(700, 2, event.KindExit, 0, 0, 0, "worker"),
		ev(800, 3, event.KindExit, 0, 0, 0, "idle"), // never logged: no EXIT line
	}
	// Out of order on arrival: the session puts them in time order.
	for _, i := range []int{1, 2, 0, 3, 5, 4, 6, 7, 9, 8} {
		s.Add(in[i])
	}
	s.Drain(true)
	s.Flush()
	got := events(parse(t, buf.Bytes()))
	want := []rec{
		{kind: logfmt.KindAlloc, tid: 1, name: "main", op: "malloc", size: 100, ptr: 0xa0, total: 100},
		{kind: logfmt.KindFree, tid: 1, name: "main", op: "free", size: 100, ptr: 0xa0},
		{kind: logfmt.KindAlloc, tid: 1, name: "main", op: "realloc", size: 300, ptr: 0xa0, total: 400},
		{kind: logfmt.KindFree, tid: 2, name: "worker", op: "free", size: 300, ptr: 0xa0},
		{kind: logfmt.KindExit, tid: 2, name: "worker", op: "EXIT"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		g := got[i]
		g.word = ""
		if g != want[i] {
			t.Errorf("line %d: got %+v\nwant %+v", i, g, want[i])
		}
	}
	// Each thread is announced with its process, and the rename too.
	if !strings.Contains(buf.String(), "[memtrace] thread tid=2 pid=1 name=worker") || !strings.Contains(buf.String(), "name=renamed") {
		t.Errorf("thread lines missing:\n%s", buf.String())
	}
}

// TestSessionLateReleaseInsideCall: thread 1's mremap moves its mapping
// away from 0xa000; thread 2 maps 0xa000 and unmaps it before thread 1,
// preempted inside mremap past the merge window, sends the munmap timed
// at the call. The munmap is still logged (written late), as is a
// realloc's late free of a heap block whose address another thread took,
// and a late munmap does not take the newer mapping's place; a munmap of
// a range never seen stays out (a file mapping).
func TestSessionLateReleaseInsideCall(t *testing.T) {
	var buf bytes.Buffer
	s := New(Config{Out: &buf})
	s.AddProcess(1, false)
	s.procs[1].scanned = true
	send := func(es ...*event.Event) {
		for _, e := range es {
			s.Add(e)
		}
		s.Drain(true) // the window has passed: what is queued goes out
	}
	send(ev(100_000, 1, event.KindAlloc, logfmt.OpMmap, 0xa000, 4096, "one"),
		ev(110_000, 1, event.KindAlloc, logfmt.OpMalloc, 0xb0, 300, "one"))
	send(ev(300_000, 2, event.KindAlloc, logfmt.OpMmap, 0xa000, 4096, "two"),
		ev(310_000, 2, event.KindFree, logfmt.OpMunmap, 0xa000, 4096, "two"),
		ev(320_000, 2, event.KindAlloc, logfmt.OpMalloc, 0xb0, 64, "two"),
		ev(330_000, 2, event.KindFree, logfmt.OpFree, 0xb0, 0, "two"))
	send(ev(200_000, 1, event.KindFree, logfmt.OpMunmap, 0xa000, 4096, "one"),
		ev(210_000, 1, event.KindFree, logfmt.OpFree, 0xb0, 0, "one"),
		ev(400_000, 1, event.KindAlloc, logfmt.OpMremap, 0xc000, 8192, "one"),
		ev(410_000, 1, event.KindAlloc, logfmt.OpRealloc, 0xd0, 600, "one"),
		ev(420_000, 1, event.KindFree, logfmt.OpMunmap, 0xe000, 4096, "one"))
	// A plain munmap held up the same way, while thread 2's mapping at
	// the address is still live: each thread's munmap is its own.
	send(ev(500_000, 1, event.KindAlloc, logfmt.OpMmap, 0xf000, 4096, "one"))
	send(ev(700_000, 2, event.KindAlloc, logfmt.OpMmap, 0xf000, 8192, "two"))
	send(ev(600_000, 1, event.KindFree, logfmt.OpMunmap, 0xf000, 4096, "one"))
	send(ev(800_000, 2, event.KindFree, logfmt.OpMunmap, 0xf000, 8192, "two"))
	s.Flush()
	var twoF []rec
	for _, r := range events(parse(t, buf.Bytes())) {
		if r.tid == 2 && r.ptr == 0xf000 {
			r.word, r.total = "", 0
			twoF = append(twoF, r)
		}
	}
	if len(twoF) != 2 || twoF[1].op != "munmap" || twoF[1].size != 8192 {
		t.Errorf("thread 2 at 0xf000: got %+v, want its mmap and its munmap", twoF)
	}
	var ones []rec
	for _, r := range events(parse(t, buf.Bytes())) {
		if r.tid == 1 {
			r.word, r.total = "", 0
			ones = append(ones, r)
		}
	}
	want := []rec{
		{kind: logfmt.KindAlloc, tid: 1, name: "one", op: "mmap", size: 4096, ptr: 0xa000},
		{kind: logfmt.KindAlloc, tid: 1, name: "one", op: "malloc", size: 300, ptr: 0xb0},
		{kind: logfmt.KindFree, tid: 1, name: "one", op: "munmap", size: 4096, ptr: 0xa000},
		{kind: logfmt.KindFree, tid: 1, name: "one", op: "free", size: 300, ptr: 0xb0},
		{kind: logfmt.KindAlloc, tid: 1, name: "one", op: "mremap", size: 8192, ptr: 0xc000},
		{kind: logfmt.KindAlloc, tid: 1, name: "one", op: "realloc", size: 600, ptr: 0xd0},
		{kind: logfmt.KindAlloc, tid: 1, name: "one", op: "mmap", size: 4096, ptr: 0xf000},
		{kind: logfmt.KindFree, tid: 1, name: "one", op: "munmap", size: 4096, ptr: 0xf000},
	}
	if len(ones) != len(want) {
		t.Fatalf("thread 1: got %d lines, want %d:\n%s", len(ones), len(want), buf.String())
	}
	for i := range want {
		if ones[i] != want[i] {
			t.Errorf("thread 1 line %d: got %+v\nwant %+v", i, ones[i], want[i])
		}
	}
	if s.InOrder() {
		t.Error("events written late, but the session says every one was in order")
	}
}

// TestSessionAttachedUnknownFree: after an attach, a free of a block from
// before it is logged with size 0 (docs/spec.md §2.1).
func TestSessionAttachedUnknownFree(t *testing.T) {
	var buf bytes.Buffer
	s := New(Config{Out: &buf})
	s.AddProcess(1, true)
	s.procs[1].scanned = true
	s.Add(ev(10, 1, event.KindFree, logfmt.OpFree, 0xabc, 0, "main"))
	s.Drain(true)
	s.Flush()
	got := events(parse(t, buf.Bytes()))
	if len(got) != 1 || got[0].size != 0 || got[0].ptr != 0xabc {
		t.Fatalf("got %+v", got)
	}
}

// TestSessionLauncherExcluded: the launcher's calls before its exec of the
// program are not logged.
func TestSessionLauncherExcluded(t *testing.T) {
	var buf bytes.Buffer
	s := New(Config{Out: &buf})
	s.AddLaunched(1)
	s.procs[1].scanned = true
	s.Released(1, 50)
	s.Add(ev(10, 1, event.KindExec, 0, 0, 0, "memtrace"))                   // the launcher's own exec
	s.Add(ev(60, 1, event.KindAlloc, logfmt.OpMalloc, 0x1, 16, "memtrace")) // the launcher after release
	s.Add(ev(70, 1, event.KindExec, 0, 0, 0, "app"))
	s.Add(ev(80, 1, event.KindAlloc, logfmt.OpMalloc, 0x2, 32, "app"))
	s.Drain(true)
	s.Flush()
	got := events(parse(t, buf.Bytes()))
	if len(got) != 1 || got[0].ptr != 0x2 || got[0].name != "app" {
		t.Fatalf("got %+v\n%s", got, buf.String())
	}
}
