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
