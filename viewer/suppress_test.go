package viewer

import (
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// suppLog has two leaks: the program's own 100 bytes, and libstdc++'s
// emergency pool (72,704 bytes, allocated by its constructor under
// _dl_init, as a real C++ run logs it).
func suppLog() []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "9"}, logfmt.KV{Key: "comm", Value: "app"})
	b = logfmt.AppendAlloc(b, 9, "app", "malloc", 1, 72704, 72704, 0x1000)
	b = logfmt.AppendFrame(b, 0, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", "", 0xa57ba, 0x7f00a57ba)
	b = logfmt.AppendFrame(b, 1, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "_dl_init", 0x12, 0x7f1000012)
	b = logfmt.AppendAlloc(b, 9, "app", "malloc", 2, 100, 72804, 0x30000)
	b = logfmt.AppendFrame(b, 0, "./app", "leak_here", 0x10, 0x401010)
	b = logfmt.AppendExit(b, 9, "app", 3, 72804)
	b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcExit, PID: 9, TS: 3, HasStatus: true})
	b = logfmt.AppendSummary(b, logfmt.Summary{})
	return b
}

// TestBuiltinSuppressionsInHeader: memview's leak figure leaves out what
// the report's built-in suppressions hide and counts it beside; with
// NoBuiltinSuppressions (--disable-builtin-suppressions) it is a leak again.
// The thread pane's Leaks column says the same.
func TestBuiltinSuppressionsInHeader(t *testing.T) {
	h := newHarness(t, suppLog(), Options{})
	hd := h.a.HeaderInfo()
	if hd.Leaks != 1 || hd.LeakBytes != 100 || hd.Suppressed != 1 || hd.SuppressedBytes != 72704 {
		t.Fatalf("header %+v: want 1 leak of 100B and 1 suppressed of 72704B", hd)
	}
	h.contains("Leaks: 1  (100B)  +1 suppressed (72.70K)")
	// The thread pane counts as the header does.
	h.contains("  1 (100B)")
	h.lacks("  2 (72.80K)")

	h = newHarness(t, suppLog(), Options{NoBuiltinSuppressions: true})
	hd = h.a.HeaderInfo()
	if hd.Leaks != 2 || hd.LeakBytes != 72804 || hd.Suppressed != 0 {
		t.Fatalf("header without the built-in list %+v: want 2 leaks of 72804B", hd)
	}
	h.contains("  2 (72.80K)")
	if s := h.screen(); strings.Contains(s, "suppressed") {
		t.Fatalf("suppressed shown with the list off:\n%s", s)
	}
}
