package viewer

import (
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/logfmt"
)

// sqliteLog is issue 33's sqlite3 shape: every allocation through one
// wrapper, two callers of it (ParserAlloc, VdbeMakeReady), each reached
// through one frame of its own from two deeper frames that both callers
// share by name. The frames are logged without functions, as a stripped
// library's are.
func sqliteLog() []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "9"}, logfmt.KV{Key: "comm", Value: "sqlite3"}, logfmt.KV{Key: "cmd", Value: "sqlite3"})
	lib, exe := "/usr/lib/libsqlite3.so.0.8.6", "/usr/bin/sqlite3"
	ts, ptr := uint64(1000), uint64(0x1000)
	for _, caller := range []uint64{0x1111, 0x2222} { // ParserAlloc, VdbeMakeReady
		for _, deep := range []uint64{0x2846f, 0x3000} {
			ts, ptr = ts+1000, ptr+0x100
			b = logfmt.AppendAlloc(b, 1, "main", "malloc", ts, 10, 10, ptr)
			b = logfmt.AppendFrame(b, 0, lib, "", 0xa7504, 0x7000_0000+0xa7504)
			b = logfmt.AppendFrame(b, 1, lib, "", caller, 0x7000_0000+caller)
			b = logfmt.AppendFrame(b, 2, lib, "", 0x5555, 0x7000_5555)
			b = logfmt.AppendFrame(b, 3, exe, "", deep, 0x400000+deep)
			b = logfmt.AppendFrame(b, 4, exe, "", 0xa7a1, 0x40a7a1)
		}
	}
	return logfmt.AppendSummary(b, logfmt.Summary{})
}

// Groups that part at a frame the short label elides and meet again on
// the same names read apart: the frame where they part is kept.
func TestGroupLabelsTellApartWhereStacksPart(t *testing.T) {
	h := newHarness(t, sqliteLog(), Options{})
	h.sim.SetSize(220, 40)
	h.press(tcell.KeyRune, '\\')
	h.contains("libsqlite3.so.0.8.6+0xa7504 ← libsqlite3.so.0.8.6+0x1111 ← … ← sqlite3+0x2846f")
	h.contains("libsqlite3.so.0.8.6+0xa7504 ← libsqlite3.so.0.8.6+0x2222 ← … ← sqlite3+0x2846f")
	// Narrower, the labels give way where they tell least and still
	// differ.
	for _, w := range []int{220, 130} {
		h.sim.SetSize(w, 40)
		h.a.Draw()
		labelsDiffer(t, h)
	}
}

func labelsDiffer(t *testing.T, h *harness) {
	t.Helper()
	var rows []string
	w, _ := h.sim.Size()
	for _, r := range h.rows() {
		if r := string([]rune(r)[1 : w*62/100]); strings.Contains(r, "×1") {
			rows = append(rows, r)
		}
	}
	if len(rows) != 4 {
		t.Fatalf("groups: %q", rows)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		i := strings.Index(r, "  …")
		if k := strings.Index(r, "  libsqlite3"); k >= 0 && (i < 0 || k < i) {
			i = k
		}
		j := strings.LastIndex(r, "  [")
		if j < 0 {
			j = len(r) // the threads column is off screen
		}
		if i < 0 || j < i {
			t.Fatalf("row %q", r)
		}
		l := r[i:j]
		if seen[l] {
			t.Errorf("two groups labelled %q:\n%s", l, strings.Join(rows, "\n"))
		}
		seen[l] = true
	}
}

func TestSiteLabelFitKeepsBothEnds(t *testing.T) {
	names := []string{"alloc", "a", "b", "c", "d", "tell"}
	l := makeLabel(names, []int{0, 1, 3, 5}, true)
	if got := l.String(); got != "alloc ← a ← … ← c ← … ← tell" {
		t.Fatalf("label %q", got)
	}
	if got := l.fit(22); got != "alloc ← a ← … ← tell" {
		t.Fatalf("fit(22) = %q", got)
	}
	// An allocating function every other group shares gives way first.
	l = makeLabel([]string{"libx.so.1.2+0x10", "a", "b", "tell"}, []int{0, 1, 3}, false)
	if got := l.fit(30); got != "libx+0x10 ← a ← … ← tell" {
		t.Fatalf("fit(30) = %q", got)
	}
	if got := l.fit(15); got != "… ← a ← … ← tell" {
		t.Fatalf("fit(15) = %q", got)
	}
	if got := l.fit(100); got != l.String() {
		t.Fatalf("fit(100) = %q", got)
	}
}

// Two functions (a, b) each call s from two places: each pair has the
// same names and parts by s's offset, and the two pairs part by name at
// a and b, before s. Each label keeps both, the name and the offset.
func TestGroupLabelsSameNamesInTwoFamilies(t *testing.T) {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "9"}, logfmt.KV{Key: "comm", Value: "t"}, logfmt.KV{Key: "cmd", Value: "./t"})
	ts := uint64(1000)
	for _, caller := range []string{"a", "b"} {
		for _, off := range []uint64{0x1, 0x2} {
			ts += 1000
			b = logfmt.AppendAlloc(b, 1, "main", "malloc", ts, 10, 10, ts)
			b = logfmt.AppendFrame(b, 0, "./t", "w", 0x10, 0x401010)
			b = logfmt.AppendFrame(b, 1, "./t", caller, 0x10, 0x402010)
			b = logfmt.AppendFrame(b, 2, "./t", "s", off, 0x403000+off)
			b = logfmt.AppendFrame(b, 3, "./t", "main", 0x10, 0x404010)
		}
	}
	b = logfmt.AppendSummary(b, logfmt.Summary{})
	h := newHarness(t, b, Options{})
	h.press(tcell.KeyRune, '\\')
	for _, l := range []string{"w ← a ← s+0x1  [", "w ← a ← s+0x2  [", "w ← b ← s+0x1  [", "w ← b ← s+0x2  ["} {
		h.contains(l)
	}
}
