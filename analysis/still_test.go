package analysis

import (
	"bytes"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// TestStillAllocated: a process is let go running (still allocated) only
// when the log says so; with every process (-1), only when all were; and
// StackSuppressed matches as SuppressedLeaks counts.
func TestStillAllocated(t *testing.T) {
	header := logfmt.AppendHeader(nil, logfmt.Header{Version: "1", PID: 5, Comm: "app", Mode: "bpf"})
	attach := func(pid int64) []byte {
		return logfmt.AppendProc(nil, logfmt.Proc{Event: logfmt.ProcAttach, PID: pid, Comm: "app"})
	}
	thread := func(pid int64) []byte {
		return logfmt.AppendThread(nil, logfmt.Thread{TID: pid, PID: pid, Name: "app"})
	}
	alloc := func(pid int64, ptr uint64) []byte {
		b := logfmt.AppendAlloc(nil, pid, "app", "malloc", 1, 10, 10, ptr)
		return logfmt.AppendFrame(b, 0, "/usr/lib/x86_64-linux-gnu/libc.so.6", "__nss_module_allocate", 0x40, 0x7f2000040)
	}
	exit := logfmt.AppendProc(nil, logfmt.Proc{Event: logfmt.ProcExit, PID: 6, TS: 2, HasStatus: true})
	summary := logfmt.AppendSummary(nil, logfmt.Summary{Events: 2, Allocs: 2})
	for _, c := range []struct {
		name      string
		log       [][]byte
		all, five bool
	}{
		{"both detached", [][]byte{header, attach(5), attach(6), thread(5), thread(6), alloc(5, 0x100), alloc(6, 0x200), summary}, true, true},
		{"one exited", [][]byte{header, attach(5), attach(6), thread(5), thread(6), alloc(5, 0x100), alloc(6, 0x200), exit, summary}, false, true},
		{"started, cut short", [][]byte{header, thread(5), alloc(5, 0x100)}, true, true},
		{"started, interrupted", [][]byte{header, thread(5), alloc(5, 0x100), summary}, true, true},
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
		if got := m.StillAllocated(-1); got != c.all {
			t.Errorf("%s: StillAllocated(-1) %v, want %v", c.name, got, c.all)
		}
		if got := m.StillAllocated(int32(p)); got != c.five {
			t.Errorf("%s: StillAllocated(pid 5) %v, want %v", c.name, got, c.five)
		}
		if m.StillAllocated(int32(len(m.Procs))) {
			t.Errorf("%s: a process out of range is still allocated", c.name)
		}
		sups := BuiltinSuppressions()
		if st := m.Stack[0]; !m.StackSuppressed(sups, st) || m.StackSuppressed(nil, st) || m.StackSuppressed(sups, 0) {
			t.Errorf("%s: StackSuppressed of glibc's NSS stack", c.name)
		}
	}
}
