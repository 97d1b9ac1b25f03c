package analysis

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/memtrace/memtrace/logfmt"
)

// TestRunEnd reads each way a run ends from the log's lines, old exit
// lines (no status) included.
func TestRunEnd(t *testing.T) {
	alloc := logfmt.AppendAlloc(nil, 5, "app", "malloc", 1, 10, 10, 0x100)
	summary := logfmt.AppendSummary(nil, logfmt.Summary{Events: 1, Allocs: 1})
	exit := func(p logfmt.Proc) []byte {
		p.Event, p.PID, p.TS = logfmt.ProcExit, 5, 2
		return logfmt.AppendProc(nil, p)
	}
	attach := logfmt.AppendProc(nil, logfmt.Proc{Event: logfmt.ProcAttach, PID: 5, Comm: "app"})
	header := logfmt.AppendHeader(nil, logfmt.Header{Version: "1", PID: 5, Comm: "app", Mode: "bpf"})
	thread := logfmt.AppendThread(nil, logfmt.Thread{TID: 5, PID: 5, Name: "app"})
	lost := logfmt.AppendLost(nil, logfmt.Lost{Count: 3, Total: 3, TS: 1})
	lostSummary := logfmt.AppendSummary(nil, logfmt.Summary{Events: 1, Allocs: 1, Lost: 3})
	for _, c := range []struct {
		name   string
		log    [][]byte
		want   string
		exited bool
	}{
		{"status", [][]byte{thread, alloc, exit(logfmt.Proc{HasStatus: true, Status: 3}), summary}, "exited with status 3", true},
		{"status 0", [][]byte{thread, alloc, exit(logfmt.Proc{HasStatus: true}), summary}, "exited with status 0", true},
		{"signal", [][]byte{thread, alloc, exit(logfmt.Proc{Signal: "SIGSEGV"}), summary}, "killed by SIGSEGV", true},
		{"old exit line", [][]byte{thread, alloc, exit(logfmt.Proc{}), summary}, "exited", true},
		{"detached", [][]byte{attach, thread, alloc, summary}, "detached", false},
		{"interrupted", [][]byte{header, thread, alloc, summary}, "interrupted", false},
		{"no header (memtrack)", [][]byte{thread, alloc, summary}, "", true},
		{"cut", [][]byte{header, thread, alloc}, "cut short (the log ends before the process did)", false},
		{"cut after the exit", [][]byte{header, thread, alloc, exit(logfmt.Proc{HasStatus: true, Status: 1})}, "exited with status 1", true},
		{"attached, cut", [][]byte{header, attach, thread, alloc}, "cut short (the log ends before the process did)", false},
		// The exit line may be among the lost records: the log does not
		// prove an interrupt, and the blocks stay leaks.
		{"lost, no exit line", [][]byte{header, thread, alloc, lost, summary}, "not known (no exit line, and the tracer lost records: the exit may be among them)", true},
		{"lost, exit line", [][]byte{header, thread, alloc, lost, exit(logfmt.Proc{Signal: "SIGKILL"}), summary}, "killed by SIGKILL", true},
		{"lost, attached", [][]byte{header, attach, thread, alloc, lost, summary}, "detached (or exited: the tracer lost records, an exit line may be among them)", false},
		{"lost in the summary only", [][]byte{header, thread, alloc, lostSummary}, "not known (no exit line, and the tracer lost records: the exit may be among them)", true},
	} {
		m := New()
		if err := m.ReadAll(bytes.NewReader(bytes.Join(c.log, nil))); err != nil {
			t.Fatal(err)
		}
		p := -1
		for i := range m.Procs {
			if m.Procs[i].PID == 5 {
				p = i
			}
		}
		got, exited := m.RunEnd(p)
		if got != c.want || exited != c.exited {
			t.Errorf("%s: %q %v, want %q %v", c.name, got, exited, c.want, c.exited)
		}
	}
}

// TestInputCut: a stream that stops with an error (a cut or damaged
// compressed log, EIO) is cut, even a memtrack log without a header; its
// blocks are live at the cut, where the same log read to its end has
// leaks; the error says after which line it stopped.
func TestInputCut(t *testing.T) {
	log := logfmt.AppendAlloc(nil, 5, "app", "malloc", 1, 10, 10, 0x100)
	log = logfmt.AppendAlloc(log, 5, "app", "malloc", 2, 10, 20, 0x200)
	whole := New()
	if err := whole.ReadAll(bytes.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	if n, _ := whole.Leaks(); n != 2 || whole.Cut() || whole.LiveOf(-1) != LiveLeaked {
		t.Fatalf("a whole memtrack log: %d leaks, cut %v, %v", n, whole.Cut(), whole.LiveOf(-1))
	}
	m := New()
	boom := errors.New("boom")
	err := m.ReadAll(io.MultiReader(bytes.NewReader(log), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "stopped after line 2 ") {
		t.Fatalf("err %v, want boom after line 2", err)
	}
	if !m.InputCut || !m.Cut() || m.LiveOf(-1) != LiveCut || !m.StillAllocated(-1) || m.Len() != 2 {
		t.Fatalf("a stream cut by an error: InputCut %v, Cut %v, %v, %d allocations", m.InputCut, m.Cut(), m.LiveOf(-1), m.Len())
	}
	if text, live := m.ProcEnd(0); live != LiveCut || !strings.HasPrefix(text, "cut short") {
		t.Fatalf("ProcEnd %q %v", text, live)
	}
	if LiveCut.Words() != "live at the cut" || LiveDetached.Words() != "still allocated at detach" {
		t.Fatal("the words changed: the readers and docs/report.md use them")
	}
}
