package viewer

import (
	"bytes"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/logfmt"
)

// listPtrs is the pointers of the list's rows, top to bottom.
func (h *harness) listPtrs() []uint64 {
	var out []uint64
	for _, id := range h.a.sel {
		out = append(out, h.m.Ptr[id])
	}
	return out
}

// TestLeaksFilterDropsSuppressed: the Leaks filter's rows leave out the
// blocks the built-in suppressions hide (libstdc++'s pool), the filter says
// how many, and --disable-builtin-suppressions lists them again.
func TestLeaksFilterDropsSuppressed(t *testing.T) {
	h := newHarness(t, suppLog(), Options{})
	h.keys("f")
	h.contains("Filter: Leaks (1 suppressed)")
	if got := h.listPtrs(); len(got) != 1 || got[0] != 0x30000 {
		t.Fatalf("Leaks rows %#x, want only the program's 0x30000\n%s", got, h.screen())
	}
	h.contains("0x30000")
	h.lacks("0x1000 ")
	h.keys("f") // Active: what is not a leak; the suppressed block is a leak
	if got := h.listPtrs(); len(got) != 0 {
		t.Fatalf("Active rows %#x, want none", got)
	}

	h = newHarness(t, suppLog(), Options{NoBuiltinSuppressions: true})
	h.keys("f")
	h.contains("Filter: Leaks ")
	h.lacks("suppressed")
	if got := h.listPtrs(); len(got) != 2 || got[0] != 0x1000 || got[1] != 0x30000 {
		t.Fatalf("Leaks rows without the list %#x, want 0x1000 and 0x30000", got)
	}
}

// detachLog is a process attached with -p that still ran when memtrace let
// go (no exit line, then the summary): one block freed, two live.
func detachLog(exit bool) []byte {
	b := logfmt.AppendHeader(nil, logfmt.Header{Version: "1", PID: 5, Comm: "app", Mode: "bpf"})
	b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcAttach, PID: 5, Comm: "app"})
	b = logfmt.AppendThread(b, logfmt.Thread{TID: 5, PID: 5, Name: "app"})
	b = logfmt.AppendAlloc(b, 5, "app", "malloc", 1, 100, 100, 0x100)
	b = logfmt.AppendFrame(b, 0, "./app", "keep", 0x10, 0x401010)
	b = logfmt.AppendAlloc(b, 5, "app", "malloc", 2, 200, 300, 0x200)
	b = logfmt.AppendFrame(b, 0, "./app", "keep", 0x10, 0x401010)
	b = logfmt.AppendAlloc(b, 5, "app", "malloc", 3, 50, 350, 0x300)
	b = logfmt.AppendFrame(b, 0, "./app", "gone", 0x10, 0x401020)
	b = logfmt.AppendFree(b, 5, "app", "free", 4, 50, 0x300)
	if exit {
		b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcExit, PID: 5, TS: 5, HasStatus: true})
	}
	return logfmt.AppendSummary(b, logfmt.Summary{Events: 4, Allocs: 3, Frees: 1})
}

// TestStillAllocatedAtDetach: when the log says the process was let go
// running, memview calls its live blocks still allocated at detach (the
// header, the filter, the rows' tag and the detail), not leaks; the same
// blocks after an exit are leaks.
func TestStillAllocatedAtDetach(t *testing.T) {
	h := newHarness(t, detachLog(false), Options{})
	hd := h.a.HeaderInfo()
	if !hd.StillAllocated || hd.Leaks != 2 || hd.LeakBytes != 300 {
		t.Fatalf("header %+v: want 2 blocks of 300B still allocated", hd)
	}
	h.contains("Still allocated at detach: 2  (300B)")
	h.lacks("Leaks: ")
	h.keys("f")
	h.contains("Filter: Still allocated at detach")
	if got := h.listPtrs(); len(got) != 2 || got[0] != 0x100 || got[1] != 0x200 {
		t.Fatalf("rows %#x, want 0x100 and 0x200", got)
	}
	var tags []string
	for _, r := range h.rows() {
		if i := strings.Index(r, "] 0x"); i >= 2 {
			tags = append(tags, r[i-2:i+1])
		}
	}
	if strings.Join(tags, " ") != "[S] [S]" {
		t.Fatalf("row tags %q, want [S] [S]\n%s", tags, h.screen())
	}
	h.contains("Status  : STILL ALLOCATED AT DETACH")
	h.lacks("[L]")

	h = newHarness(t, detachLog(true), Options{})
	if hd := h.a.HeaderInfo(); hd.StillAllocated || hd.Leaks != 2 {
		t.Fatalf("exited: header %+v: want 2 leaks", hd)
	}
	h.contains("Leaks: 2  (300B)")
	h.keys("f")
	h.contains("Filter: Leaks")
	h.contains("[L] 0x")
	h.contains("Status  : LEAK")
	h.lacks("still allocated")
	h.lacks("Still allocated")
}

// TestStillAllocatedOnlyOnceEnded: while a -p run's log still grows (not
// read to its end, no summary), its process has not been let go: memview
// says Leaks, not still allocated at detach.
func TestStillAllocatedOnlyOnceEnded(t *testing.T) {
	log := detachLog(false)
	log = log[:bytes.LastIndex(log[:len(log)-1], []byte("\n"))+1] // the summary line out
	h := newHarness(t, log, Options{Live: true})
	h.a.Mu.Lock()
	h.m.Done = false // still following
	h.a.Mu.Unlock()
	h.a.Draw()
	if hd := h.a.HeaderInfo(); hd.StillAllocated {
		t.Fatalf("live header %+v: still allocated before the log ended", hd)
	}
	h.contains("Leaks: ")
	h.lacks("Still allocated")
}

// TestLiveAtTheCut: a log that ends before its process did (no summary
// line: memtrace killed, the file cut) shows the blocks live at the cut,
// as the report words them (the header, the filter, the rows' tag [C] and
// the detail), not leaks.
func TestLiveAtTheCut(t *testing.T) {
	log := detachLog(false)
	log = log[:bytes.LastIndex(log[:len(log)-1], []byte("\n"))+1] // the summary line out
	h := newHarness(t, log, Options{})
	hd := h.a.HeaderInfo()
	if !hd.StillAllocated || hd.Live != analysis.LiveCut || hd.Leaks != 2 {
		t.Fatalf("header %+v: want 2 blocks live at the cut", hd)
	}
	h.contains("Live at the cut: 2  (300B)")
	h.lacks("Leaks: ")
	h.keys("f")
	h.contains("Filter: Live at the cut")
	h.contains("[C] 0x")
	h.lacks("[L]")
	h.contains("Status  : LIVE AT THE CUT")
}
