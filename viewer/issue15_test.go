package viewer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/logfmt"
)

// siteLog has three call sites whose order differs by total, count and
// rate: big (1 block of 9000 B), many (12 of 10 B over 2 s) and mid (3 of
// 500 B within 50 µs), each allocated by the threads given.
func siteLog() []byte {
	var b []byte
	ts := uint64(1000)
	add := func(tid int64, name, sym string, size uint64) {
		ts += 10
		b = logfmt.AppendAlloc(b, tid, name, "malloc", ts, size, size, 0x10000+ts*16)
		b = logfmt.AppendFrame(b, 0, "./app", sym, 0x10, 0x401000)
	}
	add(1, "main", "big_site", 9000)
	for i := range 3 {
		add(int64(2+i), fmt.Sprintf("pool-%d", i), "mid_site", 500)
	}
	for range 12 {
		add(1, "main", "many_site", 10)
		ts += 2_000_000 / 12
	}
	return b
}

// groupRows is the call-site names of the group list, top to bottom.
func (h *harness) groupRows() []string {
	var out []string
	for y := 5; y < 30; y++ {
		r := h.listRow(y)
		for _, s := range []string{"big_site", "mid_site", "many_site"} {
			if strings.Contains(r, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

func TestGroupSortReordersRows(t *testing.T) {
	h := newHarness(t, siteLog(), Options{})
	h.keys("\\")
	want := func(label string, order ...string) {
		t.Helper()
		h.contains("Sort: " + label)
		if got := h.groupRows(); strings.Join(got, " ") != strings.Join(order, " ") {
			t.Fatalf("sort %s: rows %v, want %v\n%s", label, got, order, h.screen())
		}
	}
	want("Total ▼", "big_site", "mid_site", "many_site")
	h.keys("s")
	want("Count ▼", "many_site", "mid_site", "big_site")
	h.keys("S")
	want("Count ▲", "big_site", "mid_site", "many_site")
	h.keys("S")
	// Rate: only many_site spans enough time to have one (mid's 3 blocks
	// span 20 µs); the ones without a rate sort lowest.
	h.keys("s")
	if got := h.groupRows(); got[0] != "many_site" {
		t.Fatalf("sort Rate ▼: rows %v\n%s", got, h.screen())
	}
	h.contains("Sort: Rate ▼")
	h.keys("s")
	want("Total ▼", "big_site", "mid_site", "many_site")
	h.keys("S")
	want("Total ▲", "many_site", "mid_site", "big_site")
}

func TestRateOnlyOverAMeaningfulSpan(t *testing.T) {
	h := newHarness(t, siteLog(), Options{})
	h.keys("\\")
	var many, mid string
	for _, r := range h.rows() {
		if strings.Contains(r, "many_site") {
			many = r
		}
		if strings.Contains(r, "mid_site") {
			mid = r
		}
	}
	// many: 120 B over 11 gaps of 2 s/12.
	gs := h.m.Groups(h.m.Select(&h.a.q, nil), 0, false, analysis.GroupByTotal, true)
	var span uint64
	for _, g := range gs {
		if h.a.firstFrame(g.Stack) == "many_site" {
			span = g.Last - g.First
		}
	}
	wantRate := Bytes(uint64(120/(float64(span)/1e6))) + "/s"
	if !strings.Contains(many, wantRate) {
		t.Fatalf("many_site row lacks rate %s: %q", wantRate, many)
	}
	// mid: 1500 B in 20 µs would be 75 MB/s: no rate.
	if strings.Contains(mid, "/s") || !strings.Contains(mid, " - ") {
		t.Fatalf("mid_site shows a rate over 20 µs: %q", mid)
	}
	// The detail says why.
	for h.a.firstFrame(h.a.groups[h.a.gcursor].Stack) != "mid_site" {
		h.keys("j")
	}
	h.contains("Rate    : - (span too short)")
}

func TestGroupNamesAllItsThreads(t *testing.T) {
	h := newHarness(t, siteLog(), Options{})
	h.keys("\\")
	h.contains("mid_site  [pool-0, pool-1, pool-2]")
	h.contains("big_site  [main]")
	for h.a.firstFrame(h.a.groups[h.a.gcursor].Stack) != "mid_site" {
		h.keys("j")
	}
	h.contains("Threads : pool-0, pool-1, pool-2")
	// With a thread filter the group is that thread's only.
	for !strings.Contains(h.screen(), "Thread: pool-1") {
		h.keys("t")
	}
	h.contains("mid_site  [pool-1]")
	h.lacks("pool-0, pool-1")
}

func TestGroupOfManyThreadsSaysHowMany(t *testing.T) {
	var b []byte
	for i := range 9 {
		b = logfmt.AppendAlloc(b, int64(10+i), fmt.Sprintf("lt-%d", i), "malloc", uint64(100+i), 64, 64, uint64(0x1000+i*0x100))
		b = logfmt.AppendFrame(b, 0, "./app", "shared_site", 0x10, 0x401000)
	}
	h := newHarness(t, b, Options{})
	h.keys("\\")
	h.contains("shared_site  [9 threads]")
	h.contains("Threads : lt-0, lt-1, lt-2, lt-3, lt-4")
}

func TestRangeEndKeepsThePageFull(t *testing.T) {
	h := newHarness(t, testLog(), Options{})
	h.keys("g[G") // range start at the first record, cursor to the last
	rows := h.a.listRows
	for h.a.cursor != h.a.top {
		h.keys("k") // the cursor up to the top row of the page
	}
	at := h.selectedPtr()
	h.keys("]") // range end here: the selection shrinks to cursor+1 rows
	h.contains("▶◀ RANGE")
	if n := len(h.a.sel); n <= rows {
		t.Fatalf("the range keeps %d rows, not more than a page (%d): the test shows nothing", n, rows)
	}
	// Every row of the list pane holds a record, the cursor, on the
	// same record, on the last.
	last := 5 + rows - 1
	for y := 5; y <= last; y++ {
		if h.listRow(y) == "" {
			t.Fatalf("row %d blank after ] with %d records:\n%s", y, len(h.a.sel), h.screen())
		}
	}
	if _, _, attr := h.style(2, last).Decompose(); attr&tcell.AttrReverse == 0 {
		t.Fatalf("the cursor is not on the page's last row %d:\n%s", last, h.screen())
	}
	if got := strings.Fields(h.listRow(last))[1]; got != at {
		t.Fatalf("] moved the cursor from %s to %s", at, got)
	}
}

func TestSearchPromptOpensEmpty(t *testing.T) {
	h := newHarness(t, testLog(), Options{})
	h.keys("/Parser")
	h.press(tcell.KeyEnter, 0)
	h.contains("30 shown")
	h.keys("/")
	prompt := h.rows()[39]
	if !strings.Contains(prompt, "Search: _") || !strings.Contains(prompt, "↑: Parser") {
		t.Fatalf("the / prompt is not empty with the last search on ↑: %q", prompt)
	}
	h.keys("Cache")
	h.press(tcell.KeyEnter, 0)
	h.contains("Search: Cache")
	h.contains("30 shown") // not "ParserCache", which matches nothing
	for _, i := range h.a.sel {
		if !strings.Contains(h.a.firstFrame(h.m.Stack[i]), "Cache") {
			t.Fatalf("record %d does not match Cache", i)
		}
	}
	h.keys("/")
	h.press(tcell.KeyUp, 0) // recalls Cache
	h.keys("::insert")
	h.press(tcell.KeyEnter, 0)
	h.contains("Search: Cache::insert")
	h.contains("30 shown")
	h.keys("/")
	h.press(tcell.KeyEnter, 0) // empty clears
	h.lacks("Search:")
	h.contains("60 shown")
}

// manyThreads: main (the process, tid 500) and 49 workers, one allocation
// each; main's name sorts in the middle.
func manyThreads() []byte {
	var b []byte
	for i := range 50 {
		tid, name := int64(501+i), fmt.Sprintf("worker-%02d", i)
		if i == 49 {
			tid, name = 500, "main"
		}
		b = logfmt.AppendAlloc(b, tid, name, "malloc", uint64(100+i), uint64(16*(i+1)), 0, uint64(0x1000+i*0x1000))
	}
	return b
}

func TestThreadTableScrollsVisibly(t *testing.T) {
	h := newHarness(t, manyThreads(), Options{})
	rows := h.rows()
	thY := -1
	for y, r := range rows {
		if strings.Contains(r, "Allocated") {
			thY = y
		}
	}
	n := 38 - thY // thread rows between the header and the bottom border
	h.contains(fmt.Sprintf("rows 1–%d of 50 ↓", n))
	if !strings.Contains(rows[thY+1], "main") {
		t.Fatalf("name order puts main first here: %q", rows[thY+1])
	}
	// The scroll bar's thumb sits at the top of the right border.
	if c, _, _ := h.sim.Get(129, thY+1); c != "┃" {
		t.Fatalf("no scroll thumb at the top: %q", c)
	}
	h.keys("ll") // focus the thread pane
	h.keys("G")
	h.contains(fmt.Sprintf("rows %d–50 of 50 ↑", 51-n))
	last := h.rows()[38]
	if !strings.Contains(last, "worker-48") {
		t.Fatalf("the last thread is not on the last row: %q", last)
	}
	if _, _, attr := h.style(2, 38).Decompose(); attr&tcell.AttrReverse == 0 {
		t.Fatal("the selected thread is not highlighted on the last row")
	}
	if c, _, _ := h.sim.Get(129, 38); c != "┃" {
		t.Fatalf("no scroll thumb at the bottom: %q", c)
	}
	h.keys("g")
	h.contains(fmt.Sprintf("rows 1–%d of 50 ↓", n))
	// Unfocused, the pane shows the thread of the thread filter.
	h.keys("l")
	h.keys("T") // the last thread in name order
	h.contains("Thread: worker-48")
	if !strings.Contains(h.rows()[38], "▸worker-48") {
		t.Fatalf("the filtered thread is off the table:\n%s", h.screen())
	}
}
