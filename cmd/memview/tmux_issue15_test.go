package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// The memview fixes of issue 15, item 7, read off the real screen.

// sitesLog: big_site (one 9000 B block by main), mid_site (three 500 B
// blocks 10 µs apart, one per pool thread), many_site (twelve 10 B blocks
// by main over 2 s).
func sitesLog() []byte {
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

// listPane is the list pane of a 140-column screen, row by row.
func listPane(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		r := []rune(l)
		if len(r) > 87 {
			r = r[1:86]
		}
		out = append(out, strings.TrimSpace(string(r)))
	}
	return out
}

// siteOrder is the call sites of the group list, top to bottom.
func siteOrder(s string) string {
	var out []string
	for _, l := range listPane(s) {
		if m := regexp.MustCompile(`(big|mid|many)_site`).FindString(l); m != "" {
			out = append(out, m)
		}
	}
	return strings.Join(out, " ")
}

func TestTmuxGroupSortReordersRows(t *testing.T) {
	tm := newTerm(t, bin+" "+writeTemp(t, "sites.log", sitesLog()))
	tm.waitFor("✕ DONE", "16 allocs")
	tm.send("\\")
	for _, step := range []struct{ key, head, order string }{
		{"", "Sort: Total ▼", "big_site mid_site many_site"},
		{"s", "Sort: Count ▼", "many_site mid_site big_site"},
		{"S", "Sort: Count ▲", "big_site mid_site many_site"},
		{"s", "Sort: Rate ▲", "mid_site big_site many_site"}, // no rate is lowest; ties by stack
		{"S", "Sort: Rate ▼", "many_site big_site mid_site"},
		{"s", "Sort: Total ▼", "big_site mid_site many_site"},
	} {
		if step.key != "" {
			tm.send(step.key)
		}
		tm.waitUntil(step.head+" with rows "+step.order, func(s string) bool {
			return strings.Contains(s, step.head) && siteOrder(s) == step.order
		})
	}
	tm.send("q")
	tm.waitGone()
}

func TestTmuxRateAndThreadsOfACallSite(t *testing.T) {
	tm := newTerm(t, bin+" "+writeTemp(t, "sites.log", sitesLog()))
	tm.waitFor("✕ DONE")
	tm.send("\\")
	s := tm.waitFor("Call site", "mid_site")
	var mid, many string
	for _, l := range listPane(s) {
		if strings.Contains(l, "mid_site") {
			mid = l
		}
		if strings.Contains(l, "many_site") {
			many = l
		}
	}
	// 1500 B in 20 µs is no rate; 120 B over 11 gaps of 166,666 µs is.
	if !regexp.MustCompile(`×3 +1\.50K +- +mid_site  \[pool-0, pool-1, pool-2\]$`).MatchString(mid) {
		t.Fatalf("mid_site row: %q", mid)
	}
	if !regexp.MustCompile(`×12 +120B +65B/s +many_site  \[main\]$`).MatchString(many) {
		t.Fatalf("many_site row: %q", many)
	}
	tm.send("q")
	tm.waitGone()
}

func TestTmuxRangeEndKeepsThePageFull(t *testing.T) {
	var b []byte
	for i := range 100 {
		b = logfmt.AppendAlloc(b, 1, "main", "malloc", uint64(100+i*10), 32, 0, uint64(0x100000+i*0x100))
	}
	tm := newTerm(t, bin+" "+writeTemp(t, "r.log", b))
	tm.waitFor("✕ DONE", "100 shown")
	// 140x40 with one thread: 31 list rows. From the last record, up 30:
	// record 69 on the top row; ] there keeps records 0–69.
	keys := []string{"[", "G"}
	for range 30 {
		keys = append(keys, "k")
	}
	tm.send(keys...)
	want := fmt.Sprintf("0x%x", 0x100000+69*0x100)
	tm.waitUntil("record 69 on the top row", func(s string) bool {
		return strings.HasPrefix(listPane(s)[5], "[L] "+want)
	})
	tm.send("]")
	// The header and the list are drawn in one frame but tmux may be
	// captured between its lines: wait for the frame whose list shows the
	// range (nothing past record 69), then judge the page.
	first := fmt.Sprintf("[L] 0x%x", 0x100000+39*0x100)
	var s string
	tm.waitUntil("the range's list", func(sc string) bool {
		s = sc
		if !strings.Contains(sc, "▶◀ RANGE") || !strings.Contains(sc, "70 shown") {
			return false
		}
		for _, r := range listPane(sc)[5:36] {
			var p uint64
			if _, err := fmt.Sscanf(r, "[L] 0x%x", &p); err == nil && p > 0x100000+69*0x100 {
				return false // a record after 69: the old page still
			}
		}
		return true
	})
	rows := listPane(s)
	for y := 5; y <= 35; y++ {
		if !strings.HasPrefix(rows[y], "[L] 0x") {
			t.Fatalf("row %d of the list is blank after ]:\n%s", y, s)
		}
	}
	if !strings.HasPrefix(rows[35], "[L] "+want) || !strings.HasPrefix(rows[5], first) {
		t.Fatalf("the page does not end at the selected record 69:\n%s", s)
	}
	tm.send("q")
	tm.waitGone()
}

func TestTmuxSearchPromptOpensEmpty(t *testing.T) {
	tm := newTerm(t, bin+" "+writeTemp(t, "sites.log", sitesLog()))
	tm.waitFor("✕ DONE")
	tm.send("/", "mid_site", "Enter")
	tm.waitFor("Search: mid_site", "3 shown")
	tm.send("/")
	tm.waitUntil("an empty prompt with the last search on ↑", func(s string) bool {
		return regexp.MustCompile(`Search: _  \(Enter: ok, Esc: cancel, ↑: mid_site\)`).MatchString(s)
	})
	tm.send("many", "Enter")
	tm.waitFor("Search: many", "12 shown")
	tm.send("/", "Up", "Enter")
	tm.waitFor("Search: many", "12 shown")
	tm.send("q")
	tm.waitGone()
}

func TestTmuxThreadTableScrolls(t *testing.T) {
	var b []byte
	for i := range 50 {
		tid, name := int64(501+i), fmt.Sprintf("worker-%02d", i)
		if i == 49 {
			tid, name = 500, "main"
		}
		b = logfmt.AppendAlloc(b, tid, name, "malloc", uint64(100+i), uint64(16*(i+1)), 0, uint64(0x1000+i*0x1000))
	}
	tm := newTerm(t, bin+" "+writeTemp(t, "th.log", b))
	s := tm.waitFor("✕ DONE", "rows 1–10 of 50 ↓")
	lines := strings.Split(s, "\n")
	if !strings.Contains(lines[29], "main") || !strings.HasSuffix(strings.TrimRight(lines[29], " "), "┃") {
		t.Fatalf("the first thread row is not main with the scroll thumb beside it:\n%s", s)
	}
	tm.send("Tab", "Tab", "G")
	s = tm.waitFor("rows 41–50 of 50 ↑")
	if !strings.Contains(strings.Split(s, "\n")[38], "worker-48") {
		t.Fatalf("the last thread is not on screen:\n%s", s)
	}
	tm.send("q")
	tm.waitGone()
}
