package agent

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
)

// recorder is an Observer that writes down every call.
type recorder struct{ calls []string }

func (r *recorder) Alloc(pid uint32, ptr, size, stack, ts uint64) {
	r.calls = append(r.calls, fmt.Sprintf("alloc %d %#x %d s%d", pid, ptr, size, stack))
}
func (r *recorder) Free(pid uint32, ptr, ts uint64) {
	r.calls = append(r.calls, fmt.Sprintf("free %d %#x", pid, ptr))
}
func (r *recorder) Stack(id uint64, frames []Frame) {
	r.calls = append(r.calls, fmt.Sprintf("stack %d %d", id, len(frames)))
}
func (r *recorder) Fork(parent, child uint32) {
	r.calls = append(r.calls, fmt.Sprintf("fork %d %d", parent, child))
}
func (r *recorder) Exec(pid uint32)        { r.calls = append(r.calls, fmt.Sprintf("exec %d", pid)) }
func (r *recorder) ProcessExit(pid uint32) { r.calls = append(r.calls, fmt.Sprintf("exit %d", pid)) }
func (r *recorder) Lost(n uint64)          { r.calls = append(r.calls, fmt.Sprintf("lost %d", n)) }

// The observer sees exactly what the log says is allocated and freed, in
// log order: no block below --min-size, no free of one it never saw, a
// realloc as a free and an alloc, and the process tree.
func TestObserverSeesWhatIsLogged(t *testing.T) {
	for _, noText := range []bool{false, true} {
		observerSeesWhatIsLogged(t, noText)
	}
}

// With noText (-o none) no line is formatted or written, and the
// observer's calls are the same.
func observerSeesWhatIsLogged(t *testing.T, noText bool) {
	var buf bytes.Buffer
	obs := &recorder{}
	s := New(Config{Out: &buf, MinSize: 10, Observer: obs, NoText: noText})
	s.AddProcess(1, false)
	s.procs[1].scanned = true
	s.ResolvedStack(7, []Frame{{Module: "/bin/app", Symbol: "f", Offset: 4, Addr: 0x1004}, {Module: "/bin/app", Symbol: "main", Offset: 9, Addr: 0x2009}})
	withStack := ev(100, 1, event.KindAlloc, logfmt.OpMalloc, 0xa0, 100, "main")
	withStack.Stack = 7
	fork := ev(600, 1, event.KindFork, 0, 2, 0, "main")
	exec := ev(700, 2, event.KindExec, 0, 0, 0, "child")
	exec.TGID = 2
	exit := ev(800, 1, event.KindExit, 0, 0, 0, "main")
	for _, e := range []*event.Event{
		withStack,
		ev(200, 1, event.KindFree, logfmt.OpFree, 0xa0, 0, "main"),       // a realloc: its free,
		ev(200, 1, event.KindAlloc, logfmt.OpRealloc, 0xa8, 300, "main"), // then its block
		ev(300, 1, event.KindAlloc, logfmt.OpMalloc, 0xb0, 5, "main"),    // below --min-size
		ev(400, 1, event.KindFree, logfmt.OpFree, 0xb0, 0, "main"),       // its free
		ev(500, 1, event.KindFree, logfmt.OpFree, 0xdead, 0, "main"),     // never seen
		fork, exec, exit,
	} {
		s.Add(e)
	}
	s.Drain(true)
	s.Lost(3, 900)
	s.Flush()
	want := []string{"stack 7 2", "alloc 1 0xa0 100 s7", "free 1 0xa0", "alloc 1 0xa8 300 s0", "fork 1 2", "exec 2", "exit 1", "lost 3"}
	if got := strings.Join(obs.calls, "; "); got != strings.Join(want, "; ") {
		t.Fatalf("noText %v: observer calls\n got %s\nwant %s", noText, got, strings.Join(want, "; "))
	}
	if noText {
		if buf.Len() != 0 {
			t.Fatalf("noText: %d bytes written:\n%s", buf.Len(), buf.String())
		}
		return
	}
	// And the log says the same of the blocks.
	var logged []string
	for _, r := range events(parse(t, buf.Bytes())) {
		if r.kind != logfmt.KindExit {
			logged = append(logged, fmt.Sprintf("%s %#x %d", r.op, r.ptr, r.size))
		}
	}
	if got := strings.Join(logged, "; "); got != "malloc 0xa0 100; free 0xa0 100; realloc 0xa8 300" {
		t.Fatalf("log: %s", got)
	}
}
