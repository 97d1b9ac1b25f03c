package agent

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
)

// TestInProcessSemantics: the preload path's events through Emit, as the
// library's own text mode writes them: a free of a block it never saw has
// size 0 (none under --min-size), a munmap of an unknown range is left
// out, what a thread does after its EXIT (TLS destructors) keeps adding to
// its total and writes no second EXIT, and a forgotten tid starts afresh.
func TestInProcessSemantics(t *testing.T) {
	for _, minSize := range []uint64{0, 10} {
		var buf bytes.Buffer
		s := New(Config{Out: &buf, InProcess: true, MinSize: minSize})
		for _, e := range []*event.Event{
			ev(1000, 1, event.KindAlloc, logfmt.OpMalloc, 0xa0, 100, "main"),
			ev(2000, 1, event.KindFree, logfmt.OpFree, 0xdead, 0, "main"),      // never seen: size 0
			ev(3000, 1, event.KindFree, logfmt.OpMunmap, 0xbeef, 4096, "main"), // unknown range: left out
			ev(4000, 1, event.KindExit, 0, 0, 0, "main"),
			ev(5000, 1, event.KindAlloc, logfmt.OpMalloc, 0xb0, 50, "main"), // a TLS destructor's
			ev(6000, 1, event.KindExit, 0, 0, 0, "main"),                    // no second EXIT
		} {
			s.Emit(e)
		}
		s.ForgetThread(1)
		s.Emit(ev(7000, 1, event.KindAlloc, logfmt.OpMalloc, 0xc0, 30, "next"))
		s.Flush()
		want := []rec{
			{kind: logfmt.KindAlloc, tid: 1, name: "main", op: "malloc", size: 100, ptr: 0xa0, total: 100},
			{kind: logfmt.KindFree, tid: 1, name: "main", op: "free", size: 0, ptr: 0xdead},
			{kind: logfmt.KindExit, tid: 1, name: "main", op: "EXIT", total: 100},
			{kind: logfmt.KindAlloc, tid: 1, name: "main", op: "malloc", size: 50, ptr: 0xb0, total: 150},
			{kind: logfmt.KindAlloc, tid: 1, name: "next", op: "malloc", size: 30, ptr: 0xc0, total: 30},
		}
		if minSize > 0 {
			want = append(want[:1], want[2:]...)
		}
		got := events(parse(t, buf.Bytes()))
		if len(got) != len(want) {
			t.Fatalf("min-size %d: got %d lines, want %d:\n%s", minSize, len(got), len(want), buf.String())
		}
		for i := range want {
			g := got[i]
			g.word = ""
			if g != want[i] {
				t.Errorf("min-size %d, line %d: got %+v\nwant %+v", minSize, i, g, want[i])
			}
		}
		if n := strings.Count(buf.String(), "[memtrace] thread tid=1 "); n != 2 {
			t.Errorf("min-size %d: %d thread lines for tid 1, want 2 (the forgotten thread and the new one):\n%s", minSize, n, buf.String())
		}
		if s.Stats.Exits != 1 {
			t.Errorf("min-size %d: Stats.Exits=%d, want 1", minSize, s.Stats.Exits)
		}
	}
}

// TestResolvedStack: frames the source named are written as given, after
// every event that refers to them, and name the stack in StackText.
func TestResolvedStack(t *testing.T) {
	var buf bytes.Buffer
	s := New(Config{Out: &buf, InProcess: true})
	frames := []Frame{
		{Module: "/bin/prog", Symbol: "leaf", Offset: 0x12, Addr: 0x5000},
		{Module: "/lib/libc.so.6", Offset: 0x2724a, Addr: 0x7000},
		{Addr: 0x9000}, // in no module
	}
	s.ResolvedStack(3, frames)
	frames[0].Symbol = "changed" // the session keeps its own copy
	for _, p := range []uint64{0x10, 0x20} {
		e := ev(1000, 1, event.KindAlloc, logfmt.OpMalloc, p, 8, "main")
		e.Stack = 3
		s.Emit(e)
	}
	s.Flush()
	var one []byte
	for i, f := range []Frame{{"/bin/prog", "leaf", 0x12, 0x5000}, {"/lib/libc.so.6", "", 0x2724a, 0x7000}, {"", "", 0, 0x9000}} {
		one = logfmt.AppendFrame(one, i, f.Module, f.Symbol, f.Offset, f.Addr)
	}
	if n := strings.Count(buf.String(), string(one)); n != 2 {
		t.Errorf("the stack's lines appear %d times, want 2 (once per event):\n%s\nwant each time:\n%s", n, buf.String(), one)
	}
	if got, want := s.StackText(3, 12), "leaf < /lib/libc.so.6 < "; got != want {
		t.Errorf("StackText = %q, want %q", got, want)
	}
}

// TestHeaderExecSummary: the header, an exec with the parent and command
// line the library reports, and the summary of what was written, in
// logfmt's layout.
func TestHeaderExecSummary(t *testing.T) {
	var buf bytes.Buffer
	s := New(Config{Out: &buf, InProcess: true})
	start := time.Date(2026, 3, 1, 9, 30, 0, 123456789, time.UTC)
	h := logfmt.Header{Version: "0.1.0", PID: 7, Comm: "prog", Cmd: "prog a b", Start: start, Mode: logfmt.ModePreload}
	s.Header(h)
	in7 := func(e *event.Event) *event.Event { e.TGID = 7; return e }
	s.Emit(in7(ev(1000, 7, event.KindAlloc, logfmt.OpMalloc, 0x10, 8, "prog")))
	s.EmitExec(in7(ev(2000, 7, event.KindExec, 0, 0, 0, "child")), 6, "child --flag")
	// The old image's block is gone with it: the free is of a block the
	// new image's library never saw.
	s.Emit(in7(ev(3000, 7, event.KindFree, logfmt.OpFree, 0x10, 0, "child")))
	s.Summary(42)
	s.Flush()
	want := string(logfmt.AppendHeader(nil, h)) +
		"[memtrace] thread tid=7 pid=7 name=prog\n" +
		string(logfmt.AppendAlloc(nil, 7, "prog", "malloc", 1, 8, 8, 0x10)) +
		string(logfmt.AppendProc(nil, logfmt.Proc{Event: logfmt.ProcExec, PID: 7, PPID: 6, TS: 2, Comm: "child", Cmd: "child --flag"})) +
		"[memtrace] thread tid=7 pid=7 name=child\n" +
		string(logfmt.AppendFree(nil, 7, "child", "free", 3, 0, 0x10)) +
		string(logfmt.AppendSummary(nil, logfmt.Summary{Events: 3, Allocs: 1, Frees: 1, DurationUS: 42}))
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}
