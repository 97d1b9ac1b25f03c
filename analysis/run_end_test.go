package analysis

import (
	"bytes"
	"testing"

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
		{"cut", [][]byte{header, thread, alloc}, "", true},
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
