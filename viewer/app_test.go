package viewer

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/logfmt"
)

// testLog: a header, a lost line, three threads, two call sites, leaks,
// frees, 60 records so that paging matters.
func testLog() []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "777"}, logfmt.KV{Key: "comm", Value: "demo"}, logfmt.KV{Key: "cmd", Value: "./demo --run"})
	names := []string{"main", "worker-1", "worker-2"}
	ts := uint64(1000)
	for i := 0; i < 60; i++ {
		tid := int64(100 + i%3)
		ts += 1000
		ptr := uint64(0x5000 + i*0x400) // blocks of up to 1 KB do not overlap

		size := uint64(16 << (i % 7))
		op := "malloc"
		if i%5 == 0 {
			op = "new"
		}
		b = logfmt.AppendAlloc(b, tid, names[i%3], op, ts, size, size, ptr)
		if i%2 == 0 {
			b = logfmt.AppendFrame(b, 0, "./demo", "_ZN4demo5Cache6insertEv", 0x10, 0x401000)
			b = logfmt.AppendFrame(b, 1, "./demo", "main", 0x20, 0x402000)
		} else {
			b = logfmt.AppendFrame(b, 0, "./demo", "_ZN4demo6Parser5parseEv", 0x30, 0x403000)
		}
		// Every third record of the parser site is freed; cache blocks leak.
		if i%2 == 1 && i%3 == 0 {
			ts += 10
			b = logfmt.AppendFree(b, tid, names[i%3], "free", ts, size, ptr)
		}
	}
	b = logfmt.AppendMeta(b, logfmt.WordLost, logfmt.KV{Key: "count", Value: "4"}, logfmt.KV{Key: "total", Value: "4"})
	b = append(b, "[memtrack] tid=bogus\n"...)
	// The tracer's last line: without it the log was cut, and its
	// blocks live at the cut.
	b = logfmt.AppendSummary(b, logfmt.Summary{Lost: 4})
	return b
}

type fakeLines struct{}

func (fakeLines) SourceLine(module, symbol string, off uint64) (string, int, error) {
	if symbol == "main" {
		return "", 0, errors.New("no line info")
	}
	return "demo/" + symbol[len(symbol)-8:] + ".cc", int(off), nil
}

type harness struct {
	t   *testing.T
	sim tcell.SimulationScreen
	a   *App
	m   *analysis.Model
}

func newHarness(t *testing.T, log []byte, opt Options) *harness {
	t.Helper()
	m := analysis.New()
	m.Demangle = func(s string) string {
		return strings.NewReplacer("_ZN4demo5Cache6insertEv", "demo::Cache::insert()", "_ZN4demo6Parser5parseEv", "demo::Parser::parse()").Replace(s)
	}
	if err := m.ReadAll(bytes.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	sim := tcell.NewSimulationScreen("UTF-8")
	if err := sim.Init(); err != nil {
		t.Fatal(err)
	}
	sim.SetSize(130, 40)
	if opt.Source == "" {
		opt.Source = "test.log"
	}
	h := &harness{t: t, sim: sim, a: New(sim, m, opt), m: m}
	t.Cleanup(sim.Fini)
	h.a.Draw()
	return h
}

// press injects one key into the simulation screen and lets the app
// handle what the screen delivers. It returns false once the app quit.
func (h *harness) press(k tcell.Key, r rune) bool {
	h.t.Helper()
	h.sim.InjectKey(k, r, tcell.ModNone)
	for {
		ev := h.sim.PollEvent()
		if ev == nil {
			h.t.Fatal("screen closed")
		}
		if _, ok := ev.(*tcell.EventKey); ok {
			return h.a.HandleEvent(ev)
		}
		h.a.HandleEvent(ev)
	}
}

func (h *harness) keys(s string) {
	h.t.Helper()
	for _, r := range s {
		h.press(tcell.KeyRune, r)
	}
}

func (h *harness) rows() []string {
	cells, w, hh := h.sim.GetContents()
	out := make([]string, hh)
	for y := 0; y < hh; y++ {
		var sb strings.Builder
		for x := 0; x < w; x++ {
			c := cells[y*w+x]
			if len(c.Runes) == 0 {
				sb.WriteByte(' ')
			} else {
				sb.WriteString(string(c.Runes))
			}
		}
		out[y] = sb.String()
	}
	return out
}

func (h *harness) screen() string { return strings.Join(h.rows(), "\n") }

func (h *harness) contains(s string) {
	h.t.Helper()
	if !strings.Contains(h.screen(), s) {
		h.t.Fatalf("screen lacks %q:\n%s", s, h.screen())
	}
}

func (h *harness) lacks(s string) {
	h.t.Helper()
	if strings.Contains(h.screen(), s) {
		h.t.Fatalf("screen has %q:\n%s", s, h.screen())
	}
}

func (h *harness) style(x, y int) tcell.Style {
	cells, w, _ := h.sim.GetContents()
	return cells[y*w+x].Style
}

// cursorRow is the list row shown in reverse video, -1 if none.
func (h *harness) cursorRow() int {
	for y := 4; y < 33; y++ {
		if _, _, attr := h.style(2, y).Decompose(); attr&tcell.AttrReverse != 0 {
			return y
		}
	}
	return -1
}

// listRow returns the text of the list pane at screen row y.
func (h *harness) listRow(y int) string {
	r := []rune(h.rows()[y])
	return strings.TrimSpace(string(r[1 : 130*62/100]))
}

func (h *harness) selectedPtr() string {
	f := strings.Fields(h.listRow(h.cursorRow()))
	return f[1]
}

func TestHeaderShowsSourceCountsLostAndProcess(t *testing.T) {
	h := newHarness(t, testLog(), Options{})
	h.contains("✕ DONE")
	h.contains("test.log")
	h.contains("pid 777 ./demo --run")
	h.contains("60 allocs")
	h.contains("60 shown")
	h.contains("Lost: 4")
	h.contains("Skipped: 1 bad lines")
	n, b := h.m.Leaks()
	// The log reports lost records: a leak may be a lost free.
	h.contains(fmt.Sprintf("Leaks: ≤%d  (%s)", n, Bytes(b)))
	h.contains("Follow: OFF [F]")
	h.contains("Sort: Time ▲")
	if n != 50 {
		t.Fatalf("test log has %d leaks, want 50", n)
	}
}

func TestRowColoursAndStatusColumn(t *testing.T) {
	h := newHarness(t, testLog(), Options{})
	rows := h.rows()
	var sawL, sawF bool
	for y := 5; y < 30; y++ {
		row := rows[y]
		st := h.style(2, y)
		fg, _, attr := st.Decompose()
		switch {
		case strings.Contains(row, "│[L]"):
			sawL = true
			if fg != tcell.ColorRed || attr&tcell.AttrBold == 0 {
				t.Fatalf("leak row %d not red bold: %v %v", y, fg, attr)
			}
		case strings.Contains(row, "│[F]"):
			sawF = true
			if fg != tcell.ColorYellow || attr&tcell.AttrDim == 0 {
				t.Fatalf("freed row %d not dim yellow: %v %v", y, fg, attr)
			}
		}
	}
	if !sawL || !sawF {
		t.Fatalf("no [L] or [F] rows:\n%s", h.screen())
	}
}

// Every key of the table, driven through the simulation screen.
func TestEveryKey(t *testing.T) {
	pressed := map[string]bool{}
	h := newHarness(t, testLog(), Options{Lines: fakeLines{}})
	press := func(k tcell.Key, r rune) bool {
		for _, b := range Keys {
			for _, kk := range b.keys {
				if kk.k == k && (k != tcell.KeyRune || kk.r == r) {
					pressed[b.label] = true
				}
			}
		}
		return h.press(k, r)
	}
	typeText := func(s string) {
		for _, r := range s {
			h.press(tcell.KeyRune, r) // prompt input, not key-table keys
		}
		h.press(tcell.KeyEnter, 0)
	}

	// Navigation.
	if h.cursorRow() != 5 {
		t.Fatalf("cursor starts at row %d", h.cursorRow())
	}
	first := h.selectedPtr()
	press(tcell.KeyDown, 0)
	press(tcell.KeyRune, 'j')
	if h.cursorRow() != 7 {
		t.Fatalf("↓ j: cursor at %d", h.cursorRow())
	}
	h.contains("Ptr     : " + h.selectedPtr())
	press(tcell.KeyUp, 0)
	press(tcell.KeyRune, 'k')
	if h.selectedPtr() != first {
		t.Fatalf("↑ k did not return to %s", first)
	}
	press(tcell.KeyPgDn, 0)
	pg := h.a.page()
	if h.a.cursor != pg {
		t.Fatalf("PgDn: cursor %d want %d", h.a.cursor, pg)
	}
	press(tcell.KeyCtrlF, 0)
	if h.a.cursor != 2*pg {
		t.Fatalf("Ctrl-f: cursor %d", h.a.cursor)
	}
	press(tcell.KeyCtrlB, 0)
	press(tcell.KeyPgUp, 0)
	if h.a.cursor != 0 {
		t.Fatalf("Ctrl-b PgUp: cursor %d", h.a.cursor)
	}
	press(tcell.KeyRune, 'G')
	h.contains(fmt.Sprintf("Ptr     : 0x%x", 0x5000+59*0x400))
	press(tcell.KeyHome, 0)
	if h.selectedPtr() != first {
		t.Fatal("Home")
	}
	press(tcell.KeyEnd, 0)
	h.contains(fmt.Sprintf("Ptr     : 0x%x", 0x5000+59*0x400))
	press(tcell.KeyRune, 'g')
	if h.selectedPtr() != first {
		t.Fatal("g")
	}

	// Focus cycling: the focused pane's title is drawn in aqua.
	thY := 0
	for y, r := range h.rows() {
		if strings.Contains(r, "Allocated") {
			thY = y
		}
	}
	focusOf := func() Pane {
		for p, xy := range map[Pane][2]int{PaneList: {1, 4}, PaneDetail: {130*62/100 + 1, 4}, PaneThreads: {1, thY}} {
			if fg, _, _ := h.style(xy[0], xy[1]).Decompose(); fg == tcell.ColorAqua {
				return p
			}
		}
		return -1
	}
	if focusOf() != PaneList {
		t.Fatalf("focus starts at %v", focusOf())
	}
	press(tcell.KeyTab, 0)
	if focusOf() != PaneDetail {
		t.Fatalf("Tab → %v", focusOf())
	}
	press(tcell.KeyRight, 0)
	if focusOf() != PaneThreads {
		t.Fatalf("→ → %v", focusOf())
	}
	press(tcell.KeyRune, 'l')
	if focusOf() != PaneList {
		t.Fatalf("l → %v", focusOf())
	}
	press(tcell.KeyLeft, 0)
	if focusOf() != PaneThreads {
		t.Fatalf("← → %v", focusOf())
	}
	// Thread pane: s cycles its sort, S reverses, Enter filters by thread.
	press(tcell.KeyRune, 's')
	h.contains("[sort: TID ▲]")
	press(tcell.KeyRune, 'S')
	h.contains("[sort: TID ▼]")
	press(tcell.KeyEnter, 0) // first row = highest TID = worker-2
	h.contains("Thread: worker-2 (102)")
	h.contains("20 shown")
	press(tcell.KeyRune, 'h')
	press(tcell.KeyBacktab, 0)
	if focusOf() != PaneDetail {
		t.Fatalf("h Backtab → %v", focusOf())
	}
	h.sim.SetSize(130, 16)  // a short screen, so that the detail overflows
	press(tcell.KeyDown, 0) // scrolls the detail pane
	if h.a.dscroll != 1 || strings.Contains(h.screen(), "── Allocation") || !strings.Contains(h.screen(), "Op      :") {
		t.Fatalf("detail scroll %d:\n%s", h.a.dscroll, h.screen())
	}
	press(tcell.KeyUp, 0)
	h.contains("── Allocation")
	h.sim.SetSize(130, 40)
	press(tcell.KeyRune, 'l')
	press(tcell.KeyRune, 'l') // back to the list

	// Thread filter cycling.
	press(tcell.KeyRune, 't') // worker-2 → All (last thread wraps)
	h.contains("Thread: All")
	press(tcell.KeyRune, 't')
	h.contains("Thread: main (100)")
	h.contains("20 shown")
	// The timeline is labelled with the thread.
	if !strings.Contains(h.rows()[2], "main") {
		t.Fatalf("timeline not labelled: %q", h.rows()[2])
	}
	press(tcell.KeyRune, 'T')
	h.contains("Thread: All")

	// Filter cycle.
	press(tcell.KeyRune, 'f')
	h.contains("Filter: Leaks")
	h.contains("50 shown")
	h.lacks("│[F]")
	press(tcell.KeyRune, 'f')
	h.contains("Filter: Active")
	h.contains("0 shown")
	press(tcell.KeyRune, 'f')
	h.contains("Filter: Freed")
	h.contains("10 shown")
	press(tcell.KeyRune, 'f')
	h.contains("Filter: All")

	// Minimum lifetime: freed blocks live 10 µs, leaks until the end.
	press(tcell.KeyRune, 'a')
	h.contains("Min lifetime (s): ")
	typeText("0.0001")
	h.contains("Age≥0.0001s")
	h.contains("49 shown") // all leaks but the last record, which lived 0 µs
	press(tcell.KeyRune, 'a')
	typeText("0")
	h.lacks("Age≥")
	press(tcell.KeyRune, 'a')
	typeText("soon")
	h.contains("not a number of seconds: soon")

	// Search over frames (demangled), thread, op, pointer.
	press(tcell.KeyRune, '/')
	typeText("parser::PARSE")
	h.contains("Search: parser::PARSE")
	h.contains("30 shown")
	press(tcell.KeyRune, '/')
	for range len("parser::PARSE") {
		h.press(tcell.KeyBackspace2, 0)
	}
	typeText("0x5c00")
	h.contains("1 shown")
	h.contains("0x5c00")
	press(tcell.KeyRune, '/')
	h.press(tcell.KeyCtrlU, 0)
	typeText("new")
	h.contains("12 shown")
	press(tcell.KeyRune, '/')
	h.press(tcell.KeyCtrlU, 0)
	h.press(tcell.KeyEnter, 0)
	h.lacks("Search:")
	press(tcell.KeyRune, '/')
	h.press(tcell.KeyRune, 'x')
	h.press(tcell.KeyEscape, 0) // Esc cancels a prompt, does not quit
	h.lacks("Search:")

	// Delta mode from record 10.
	for range 10 {
		press(tcell.KeyRune, 'j')
	}
	press(tcell.KeyRune, 'm')
	h.contains("▶ DELTA since")
	h.contains("50 shown")
	if !strings.ContainsRune(h.rows()[2], '|') {
		t.Fatalf("no delta baseline on the timeline: %q", h.rows()[2])
	}
	press(tcell.KeyRune, 'm')
	h.lacks("DELTA")
	h.contains("60 shown")

	// Markers.
	press(tcell.KeyRune, 'M')
	h.contains("marker M1")
	tl := h.rows()[2]
	x := strings.IndexRune(string([]rune(tl)), '1')
	if x < 0 {
		t.Fatalf("no marker 1 on the timeline: %q", tl)
	}
	mx := []rune(tl)
	var col int
	for i, r := range mx {
		if r == '1' {
			col = i
			break
		}
	}
	if fg, _, _ := h.style(col, 2).Decompose(); fg != tcell.ColorFuchsia {
		t.Fatalf("marker not magenta: %v", fg)
	}
	for range 30 {
		press(tcell.KeyRune, 'j')
	}
	press(tcell.KeyRune, 'M')
	h.contains("marker M2")

	// Range: ] here (snaps to M2), [ near M1.
	press(tcell.KeyRune, ']')
	h.contains("RANGE: set the other end")
	for range 31 {
		press(tcell.KeyRune, 'k')
	}
	press(tcell.KeyRune, '[')
	h.contains("▶◀ RANGE")
	h.contains("31 shown") // records 10..40 inclusive
	if !strings.ContainsRune(h.rows()[2], '[') && !strings.ContainsRune(h.rows()[2], '1') {
		t.Fatalf("no range bracket: %q", h.rows()[2])
	}
	press(tcell.KeyRune, 'R')
	h.lacks("RANGE")
	h.contains("60 shown")
	press(tcell.KeyRune, 'D')
	h.contains("deleted marker M1")
	press(tcell.KeyRune, 'D')
	h.contains("deleted marker M2")
	press(tcell.KeyRune, 'D')
	h.contains("no markers")

	// Group mode with the monotonic-growth indicator.
	press(tcell.KeyRune, 'g')
	press(tcell.KeyRune, '\\')
	h.contains("Call site")
	h.contains("60 shown in 2 groups")
	h.contains("Sort: Total ▼")
	h.contains("▲ ×30")
	h.contains("demo::Cache::insert()")
	h.contains("Rate/s")
	press(tcell.KeyRune, 's')
	h.contains("Sort: Count ▼")
	press(tcell.KeyRune, 's')
	h.contains("Sort: Rate ▼")
	press(tcell.KeyRune, 'S')
	h.contains("Sort: Rate ▲")
	press(tcell.KeyRune, 's')
	h.contains("Sort: Total ▲")
	press(tcell.KeyRune, 'S')
	// Enter on a group: back to its example record.
	press(tcell.KeyRune, 'j')
	ex := h.a.groups[1].Example
	press(tcell.KeyEnter, 0)
	h.lacks("Call site")
	if h.a.sel[h.a.cursor] != ex {
		t.Fatalf("Enter: cursor on %d, want example %d", h.a.sel[h.a.cursor], ex)
	}
	// Enter on a record: its group.
	st := h.m.Stack[ex]
	press(tcell.KeyEnter, 0)
	h.contains("Call site")
	if h.a.groups[h.a.gcursor].Stack != st {
		t.Fatal("Enter did not select the record's group")
	}
	press(tcell.KeyRune, '\\')
	h.lacks("Call site")

	// Baseline: growth by call site since the mark.
	press(tcell.KeyRune, 'b')
	h.contains("Baseline")
	press(tcell.KeyRune, '\\')
	h.contains("Growth")
	h.contains("Sort: Growth ▼")
	h.contains("+0B") // nothing happened since the end of a finished log
	press(tcell.KeyRune, 'b')
	h.lacks("Baseline")
	press(tcell.KeyRune, '\\')

	// Direct sorts.
	press(tcell.KeyRune, '2')
	h.contains("Sort: Size ▲")
	press(tcell.KeyRune, 'g')
	if !strings.Contains(h.listRow(5), "16B") {
		t.Fatalf("smallest first: %q", h.listRow(5))
	}
	press(tcell.KeyRune, '3')
	h.contains("Sort: Thread ▲")
	press(tcell.KeyRune, 'g')
	if !strings.HasSuffix(h.listRow(5), "main") {
		t.Fatalf("thread order: %q", h.listRow(5))
	}
	press(tcell.KeyRune, '1')
	h.contains("Sort: Time ▲")
	press(tcell.KeyRune, 's')
	h.contains("Sort: Size ▲")
	press(tcell.KeyRune, 'S')
	h.contains("Sort: Size ▼")
	press(tcell.KeyRune, 'g')
	if !strings.Contains(h.listRow(5), "1.02K") {
		t.Fatalf("largest first: %q", h.listRow(5))
	}
	press(tcell.KeyRune, '1')
	press(tcell.KeyRune, 'S')

	// Histogram.
	press(tcell.KeyRune, 'H')
	h.contains("Size          Count")
	// Sizes 16 B … 1 KiB: the buckets in use, in the 1000-based unit of
	// their bounds (internal/sizehist).
	h.contains("≤20B ")
	h.contains("≤2K ")
	h.lacks("≤5K")
	press(tcell.KeyRune, 'H')
	h.lacks("Size          Count")

	// Export.
	out := filepath.Join(t.TempDir(), "export.txt")
	press(tcell.KeyRune, 'W')
	h.contains("Export to: memview-export.txt")
	h.press(tcell.KeyCtrlU, 0)
	typeText(out)
	h.contains("exported 60 rows")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 62 || !strings.Contains(string(data), "demo::Cache::insert()") {
		t.Fatalf("export has %d lines:\n%s", n, data)
	}
	press(tcell.KeyRune, 'W')
	h.press(tcell.KeyCtrlU, 0)
	typeText(out) // exists: asks first
	h.contains("exists; overwrite? (y/N)")
	typeText("n")
	h.contains("export cancelled")
	press(tcell.KeyRune, 'f') // Leaks only, then overwrite
	press(tcell.KeyRune, 'W')
	h.press(tcell.KeyCtrlU, 0)
	typeText(out)
	typeText("y")
	h.contains("exported 50 rows")
	press(tcell.KeyRune, 'f')
	press(tcell.KeyRune, 'f')
	press(tcell.KeyRune, 'f')
	press(tcell.KeyRune, 'W')
	h.press(tcell.KeyCtrlU, 0)
	typeText(filepath.Join(t.TempDir(), "no", "such", "dir", "x"))
	h.contains("export: open")

	// Timeline toggle.
	if !strings.ContainsAny(h.rows()[2], "▁▂▃▄▅▆▇█") {
		t.Fatalf("no sparkline: %q", h.rows()[2])
	}
	press(tcell.KeyRune, 'Z')
	if strings.ContainsAny(h.rows()[2], "▁▂▃▄▅▆▇█") {
		t.Fatal("Z did not hide the timeline")
	}
	press(tcell.KeyRune, 'Z')

	// Source lines through the SourceLiner.
	press(tcell.KeyRune, 'g')
	h.contains("./demo+0x10")
	press(tcell.KeyRune, 'L')
	h.contains("demo/insertEv.cc:16")
	h.contains("./demo (no line info)")
	press(tcell.KeyRune, 'L')
	h.contains("./demo+0x10")

	// Follow.
	press(tcell.KeyRune, 'F')
	h.contains("Follow: ON [F]")
	press(tcell.KeyRune, 'F')

	// Descriptor view: this log has no fd lines, the view says so and o
	// brings the list back.
	press(tcell.KeyRune, 'o')
	h.contains("no descriptor lines in this log")
	h.contains("0 descriptors shown")
	press(tcell.KeyRune, 'o')
	h.contains("60 shown")

	// The call tree and the icicle (tree_test.go tests them in full).
	press(tcell.KeyRune, 'c')
	h.contains("Call tree top-down, leaked")
	press(tcell.KeyRune, 'u')
	h.contains("Call tree bottom-up, leaked")
	press(tcell.KeyRune, 'C')
	h.contains("Call tree bottom-up, peak")
	press(tcell.KeyRune, 'u')
	press(tcell.KeyRune, 'i')
	h.contains("Icicle top-down, peak")
	press(tcell.KeyRune, 'i')
	h.contains("60 shown")
	for range numCosts - 1 {
		h.press(tcell.KeyRune, 'C')
	}

	// The charts over time (issue33_test.go tests them in full).
	press(tcell.KeyRune, 'A')
	h.contains("Allocations over time")
	press(tcell.KeyRune, 'A')
	h.contains("Temporary allocations over time")
	press(tcell.KeyRune, 'A')
	h.contains("60 shown")

	// Process filter with one process.
	press(tcell.KeyRune, 'p')
	h.contains("the log holds one process")

	// Help, generated from the key table; scrolls; any key closes.
	press(tcell.KeyRune, '?')
	h.contains("memview keys")
	h.contains("delta mode")
	h.press(tcell.KeyPgDn, 0)
	h.contains("quit")
	h.press(tcell.KeyRune, 'x')
	h.lacks("memview keys")

	// Quit: q and Esc.
	if press(tcell.KeyRune, 'q') {
		t.Fatal("q did not quit")
	}
	h2 := newHarness(t, testLog(), Options{})
	if h2.press(tcell.KeyEscape, 0) {
		t.Fatal("Esc did not quit")
	}
	pressed["q / Esc"] = true

	for _, b := range Keys {
		if !pressed[b.label] {
			t.Errorf("key %q is not exercised by this test", b.label)
		}
	}
}

func TestHelpComesFromTheKeyTable(t *testing.T) {
	lines := HelpLines()
	views := 0
	for _, b := range ViewKeys {
		if b.label != "" {
			views++
		}
	}
	if len(lines) != len(Keys)+2+views {
		t.Fatalf("%d help lines for %d bindings and %d of the views", len(lines), len(Keys), views)
	}
	seen := map[key]string{}
	for i, b := range Keys {
		if !strings.HasPrefix(lines[i], b.label) || !strings.Contains(lines[i], b.help) {
			t.Fatalf("help line %q does not describe %q", lines[i], b.label)
		}
		for _, k := range b.keys {
			if other, dup := seen[k]; dup {
				t.Fatalf("key %v bound twice (%s, %s)", k, other, b.label)
			}
			seen[k] = b.label
		}
	}
}

func TestProcessFilter(t *testing.T) {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "10"}, logfmt.KV{Key: "comm", Value: "parent"})
	b = logfmt.AppendMeta(b, logfmt.WordThread, logfmt.KV{Key: "tid", Value: "20"}, logfmt.KV{Key: "pid", Value: "20"}, logfmt.KV{Key: "name", Value: "child"})
	b = logfmt.AppendMeta(b, logfmt.WordProc, logfmt.KV{Key: "event", Value: "fork"}, logfmt.KV{Key: "pid", Value: "20"}, logfmt.KV{Key: "ppid", Value: "10"}, logfmt.KV{Key: "comm", Value: "kid"})
	b = logfmt.AppendAlloc(b, 10, "parent", "malloc", 1, 10, 10, 0x10)
	b = logfmt.AppendAlloc(b, 20, "child", "malloc", 2, 20, 20, 0x10)
	b = logfmt.AppendAlloc(b, 20, "child", "malloc", 3, 30, 50, 0x20)
	h := newHarness(t, b, Options{})
	h.contains("Proc: All")
	h.keys("p")
	h.contains("Proc: 10 parent")
	h.contains("1 shown")
	h.keys("p")
	h.contains("Proc: 20 kid")
	h.contains("2 shown")
	h.keys("p")
	h.contains("Proc: All")
	h.contains("3 shown")
}

func TestLiveModeFollowsNewRecords(t *testing.T) {
	log := testLog()
	// Cut before the 31st allocation line.
	cut, allocs := 0, 0
	for _, line := range bytes.SplitAfter(log, []byte("\n")) {
		if bytes.Contains(line, []byte("total=")) {
			allocs++
			if allocs == 31 {
				break
			}
		}
		cut += len(line)
	}
	m := analysis.New()
	sim := tcell.NewSimulationScreen("UTF-8")
	if err := sim.Init(); err != nil {
		t.Fatal(err)
	}
	defer sim.Fini()
	sim.SetSize(130, 40)
	a := New(sim, m, Options{Source: "stdin", Live: true})
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	sr := analysis.NewStreamReader(pr, nil)
	batches := make(chan struct{}, 1000)
	done := make(chan error, 1)
	go func() {
		done <- m.Stream(sr, analysis.StreamOptions{Lock: &a.Mu, OnBatch: func() { batches <- struct{}{} }})
	}()
	if _, err := pw.Write(log[:cut]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, a, func() bool { return m.Len() == 30 })
	a.Draw()
	h := &harness{t: t, sim: sim, a: a, m: m}
	h.contains("● LIVE")
	h.contains("Follow: ON [F]")
	h.contains(fmt.Sprintf("Ptr     : 0x%x", 0x5000+29*0x400))
	h.contains("Leaks: 0") // nothing has exited or ended yet
	pw.Write(log[cut:])
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	a.Mu.Lock()
	a.SetEnded(nil)
	a.Mu.Unlock()
	a.Draw()
	h.contains("✕ DONE")
	h.contains("60 allocs")
	h.contains(fmt.Sprintf("Ptr     : 0x%x", 0x5000+59*0x400))
	h.contains("Leaks: ≤50")
}

func waitFor(t *testing.T, a *App, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		a.Mu.Lock()
		ok := cond()
		a.Mu.Unlock()
		if ok {
			return
		}
		timeSleep()
	}
	t.Fatal("timed out waiting for the model")
}

func TestTinyTerminalAndGarbageLog(t *testing.T) {
	h := newHarness(t, []byte("\x00garbage\n[memtrack] tid=1 (x\n[memtrace] \n"), Options{})
	h.contains("no records")
	h.contains("Skipped: 2 bad lines")
	for _, r := range "jkGgfmM[]\\HZ?" {
		h.press(tcell.KeyRune, r)
	}
	h.sim.SetSize(20, 5)
	h.press(tcell.KeyRune, 'x')
	h.contains("terminal too small")
}

func TestFormats(t *testing.T) {
	cases := map[string]string{
		Bytes(512): "512B", Bytes(1536): "1.54K", Bytes(3 << 20): "3.15M", Bytes(5 << 30): "5.37G",
		Dur(267): "0.267ms", Dur(1234000): "1.234s", Ptr(0): "(nil)", Ptr(0x7f00): "0x7f00",
		SBytes(-2048): "-2.05K", SBytes(10): "+10B", SBytes(0): "+0B",
		Bytes(3 << 40): "3.30T", Bytes(1 << 56): "72.06P", Bytes(analysis.MaxBytes): "9.22E", SBytes(math.MinInt64): "-9.22E",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q want %q", got, want)
		}
	}
}

func TestDumpThreads(t *testing.T) {
	m := analysis.New()
	m.SummaryOnly = true
	if err := m.ReadAll(bytes.NewReader(testLog())); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteThreadTable(&out, m); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"worker-1", "TOTAL", "4 events LOST", "1 unreadable lines skipped"} {
		if !strings.Contains(s, want) {
			t.Fatalf("table lacks %q:\n%s", want, s)
		}
	}
	fields := strings.Fields(strings.Split(s, "\n")[4]) // TOTAL row
	if fields[0] != "TOTAL" || fields[1] != "60" || fields[6] != "50" {
		t.Fatalf("totals %q", fields)
	}
}
