package viewer

import (
	"slices"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/internal/sizehist"
	"github.com/memtrace/memtrace/logfmt"
)

// sizesLog allocates one block of each size, from one call site.
func sizesLog(sizes ...uint64) []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "9"}, logfmt.KV{Key: "comm", Value: "t"}, logfmt.KV{Key: "cmd", Value: "./t"})
	for k, sz := range sizes {
		b = logfmt.AppendAlloc(b, 1, "main", "malloc", uint64(1000*(k+1)), sz, sz, uint64(0x10000*(k+1)))
		b = logfmt.AppendFrame(b, 0, "./t", "main", 0x10, 0x401010)
	}
	return logfmt.AppendSummary(b, logfmt.Summary{})
}

// The histogram's buckets are internal/sizehist's (the one definition of
// every view, the HTML report's too), labelled in the 1000-based unit of
// their bounds: 1000 B is in ≤1K, 1001 B in ≤2K, 1 MB + 1 in ≤2M.
func TestHistogramBucketsAreSizehist(t *testing.T) {
	h := newHarness(t, sizesLog(1000, 1000, 1001, 1_000_001), Options{})
	h.press(tcell.KeyRune, 'H')
	want := map[string]string{"≤1K": "2", "≤2K": "1", "≤5K": "0", "≤2M": "1"}
	got := map[string]string{}
	unit := false
	for _, r := range h.rows() {
		if strings.Contains(r, "K = 1000 B") {
			unit = true
		}
		f := strings.Fields(strings.Trim(r, "│"))
		if len(f) >= 2 && strings.HasPrefix(f[0], "≤") {
			got[f[0]] = f[1]
		}
	}
	for l, n := range want {
		if got[l] != n {
			t.Errorf("bucket %s: %q allocations, want %s (rows %v)", l, got[l], n, got)
		}
	}
	if _, ok := got["≤500B"]; ok {
		t.Errorf("a bucket below the first in use is shown: %v", got)
	}
	if !unit {
		t.Error("the histogram does not say its unit (K = 1000 B)")
	}
	if l := sizehist.Label(sizehist.Index(1001)); l != "≤2K" {
		t.Fatalf("sizehist puts 1001 B in %s", l)
	}
}

// keyNames are the names the help gives keys.
var keyNames = map[tcell.Key]string{
	tcell.KeyUp: "↑", tcell.KeyDown: "↓", tcell.KeyLeft: "←", tcell.KeyRight: "→",
	tcell.KeyPgUp: "PgUp", tcell.KeyPgDn: "PgDn", tcell.KeyHome: "Home", tcell.KeyEnd: "End",
	tcell.KeyTab: "Tab", tcell.KeyBacktab: "Shift-Tab", tcell.KeyEnter: "Enter", tcell.KeyEscape: "Esc",
	tcell.KeyBackspace: "Backspace", tcell.KeyBackspace2: "Backspace", tcell.KeyCtrlB: "Ctrl-b", tcell.KeyCtrlF: "Ctrl-f",
}

func keyName(k key) string {
	switch {
	case k.k == tcell.KeyRune && k.r == ' ':
		return "Space"
	case k.k == tcell.KeyRune:
		return string(k.r)
	}
	return keyNames[k.k]
}

// The help names every key each binding has, in the label of its line
// (the views' second keys share the line of the first), and no key that
// it does not have.
func TestHelpNamesEveryBoundKey(t *testing.T) {
	for name, table := range map[string][]binding{"Keys": Keys, "ViewKeys": ViewKeys, "HelpKeys": HelpKeys} {
		label := ""
		named := map[string]bool{}
		check := func() {
			for _, tok := range strings.FieldsFunc(label, func(r rune) bool { return r == ' ' || r == '/' }) {
				if !named[tok] {
					t.Errorf("%s: the help's %q names %q, which none of its keys is", name, label, tok)
				}
			}
		}
		for _, b := range table {
			if b.label != "" {
				if label != "" {
					check()
				}
				label, named = b.label, map[string]bool{}
			}
			toks := strings.FieldsFunc(label, func(r rune) bool { return r == ' ' })
			for _, k := range b.keys {
				n := keyName(k)
				if n == "" || !slices.Contains(toks, n) {
					t.Errorf("%s: key %v (%q) is not named in its help %q", name, k, n, label)
				}
				named[n] = true
			}
		}
		check()
	}
}

// The overlay does what its title says: its own keys scroll it and q
// quits; any other key closes it, and does nothing else.
func TestHelpOverlayKeysAsTitled(t *testing.T) {
	h := newHarness(t, testLog(), Options{})
	h.sim.SetSize(130, 20) // shorter than the help: it scrolls
	h.press(tcell.KeyRune, '?')
	intro := strings.Join(helpIntro(1000), " ")
	for _, b := range HelpKeys {
		if !strings.Contains(intro, b.label+": "+b.help) {
			t.Errorf("the help's first lines do not say %q: %q", b.label+": "+b.help, intro)
		}
	}
	h.contains("In this help: ↑ / k: scroll up")
	if !strings.Contains(intro, helpClose) {
		t.Errorf("the help does not say %q", helpClose)
	}
	h.press(tcell.KeyPgDn, 0)
	if h.a.helpTop == 0 || !h.a.help {
		t.Fatalf("PgDn: help %v at %d", h.a.help, h.a.helpTop)
	}
	top := h.a.helpTop
	h.press(tcell.KeyRune, 'k')
	h.press(tcell.KeyUp, 0)
	if h.a.helpTop != top-2 || !h.a.help {
		t.Fatalf("k, ↑: help %v at %d, was %d", h.a.help, h.a.helpTop, top)
	}
	for _, k := range []key{rk('?'), {tcell.KeyRight, 0}, rk('c'), {tcell.KeyEnter, 0}, {tcell.KeyEscape, 0}} {
		if !h.a.help {
			h.press(tcell.KeyRune, '?')
		}
		if !h.press(k.k, k.r) {
			t.Fatalf("%s quit", keyName(k))
		}
		if h.a.help || h.a.cv.mode != viewNone || h.a.focus != PaneList || h.a.groupMode {
			t.Fatalf("%s: help %v, view %v, focus %v, groups %v", keyName(k), h.a.help, h.a.cv.mode, h.a.focus, h.a.groupMode)
		}
		h.lacks("memview keys")
	}
	h.press(tcell.KeyRune, '?')
	if h.press(tcell.KeyRune, 'q') {
		t.Fatal("q in the help did not quit")
	}
}

// mainLog: start-up code around main (named, and a stripped libc's
// unnamed __libc_start_call_main), a thread's trampoline, main allocating
// itself and a stack that starts at f.
//
//	A 100  wrap ← f ← main ← __libc_start_call_main ← __libc_start_main ← _start
//	B  30  main ← libc.so.6+0x2724a ← __libc_start_main ← app+0xa7a1
//	C  50  wrap ← worker ← start_thread ← clone3
//	D  10  wrap ← f
//	E   5  app+0x100 ← __libc_start_call_main ← __libc_start_main ← _start: a stripped main
func mainLog() []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "9"}, logfmt.KV{Key: "comm", Value: "app"}, logfmt.KV{Key: "cmd", Value: "./app"})
	type fr struct{ mod, sym string }
	ts := uint64(1000)
	alloc := func(tid int64, size uint64, frames ...fr) {
		ts += 1000
		b = logfmt.AppendAlloc(b, tid, "main", "malloc", ts, size, size, ts*16)
		for k, f := range frames {
			b = logfmt.AppendFrame(b, k, f.mod, f.sym, uint64(0x100*(k+1)), uint64(0x400000+0x100*k))
		}
	}
	app, libc := "./app", "/lib/libc.so.6"
	alloc(1, 100, fr{app, "wrap"}, fr{app, "f"}, fr{app, "main"}, fr{libc, "__libc_start_call_main"}, fr{libc, "__libc_start_main"}, fr{app, "_start"})
	alloc(1, 30, fr{app, "main"}, fr{libc, ""}, fr{libc, "__libc_start_main"}, fr{app, ""})
	alloc(2, 50, fr{app, "wrap"}, fr{app, "worker"}, fr{libc, "start_thread"}, fr{libc, "clone3"})
	alloc(1, 10, fr{app, "wrap"}, fr{app, "f"})
	alloc(1, 5, fr{app, ""}, fr{libc, "__libc_start_call_main"}, fr{libc, "__libc_start_main"}, fr{app, "_start"})
	return logfmt.AppendSummary(b, logfmt.Summary{})
}

// The top-down tree starts at main and at the thread's start function, as
// its help says; a row holds what a node's children leave of it; calls
// are a cost.
func TestTreeFromMainWithSelfRows(t *testing.T) {
	h := newHarness(t, mainLog(), Options{})
	m := h.m
	costs := m.ReportCosts()
	td := BuildTree(m, costs, -1, CostAllocated, false, nil, nil, nil)
	want := []string{
		"main 135B", " f 100B", "  wrap 100B", " [self] 35B",
		"worker 50B", " wrap 50B",
		"f 10B", " wrap 10B",
	}
	if got := flat(td); !slices.Equal(got, want) {
		t.Errorf("top-down:\n got %q\nwant %q", got, want)
	}
	bu := BuildTree(m, costs, -1, CostAllocated, true, nil, nil, nil)
	want = []string{
		"wrap 160B", " f 110B", "  main 100B", "  [stack starts here] 10B", " worker 50B",
		"main 35B",
	}
	if got := flat(bu); !slices.Equal(got, want) {
		t.Errorf("bottom-up:\n got %q\nwant %q", got, want)
	}
	calls := BuildTree(m, costs, -1, CostCalls, false, nil, nil, nil)
	if calls.Value != 5 || calls.Kids[0].Name != "main" || calls.Kids[0].Value != 3 {
		t.Errorf("calls: %d in all, first %s %d", calls.Value, calls.Kids[0].Name, calls.Kids[0].Value)
	}
	// The icicle leaves the self row a gap.
	for _, bx := range FlameLayout(td, 130, 10) {
		if bx.Node.Self {
			t.Errorf("the icicle draws %s", bx.Node.Name)
		}
	}

	// On screen, without lines, each call site by its offset: main
	// calling f (A) and main allocating itself (B) are two; the stripped
	// main is one node.
	h.press(tcell.KeyRune, 'c')
	h.contains("Call tree top-down, leaked: 195B in all")
	h.contains("100B  51.3%  ▾ main+0x300")
	h.contains("100B  51.3%    ▾ f+0x200")
	h.contains("30B  15.4%    main+0x100")
	h.contains("5B   2.6%    main ")
	h.press(tcell.KeyRune, 'C')
	h.press(tcell.KeyRune, 'C')
	h.press(tcell.KeyRune, 'C')
	h.contains("Call tree top-down, calls: 5 in all")
	h.contains("1  20.0%  ▾ main+0x300")
}

// tempLog: one thread; A is freed before the thread allocates again
// (temporary), B after C was allocated (not), C and D never.
func tempLog() []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "9"}, logfmt.KV{Key: "comm", Value: "t"}, logfmt.KV{Key: "cmd", Value: "./t"})
	alloc := func(ts, ptr uint64) {
		b = logfmt.AppendAlloc(b, 1, "main", "malloc", ts, 10, 10, ptr)
		b = logfmt.AppendFrame(b, 0, "./t", "main", 0x10, 0x401010)
	}
	alloc(1000, 0xa000)
	b = logfmt.AppendFree(b, 1, "main", "free", 1500, 10, 0xa000)
	alloc(2000, 0xb000)
	alloc(3000, 0xc000)
	b = logfmt.AppendFree(b, 1, "main", "free", 3500, 10, 0xb000)
	alloc(10000, 0xd000)
	return logfmt.AppendSummary(b, logfmt.Summary{})
}

// A shows the allocations, then the temporary allocations, over time,
// cumulative, over the log's span; A again and Esc go back.
func TestChartsOverTime(t *testing.T) {
	h := newHarness(t, tempLog(), Options{})
	h.press(tcell.KeyRune, 'A')
	h.contains("Allocations over time, cumulative, of the visible records: 4")
	if got, want := h.a.chartSeries(chartAllocs, 10), []uint64{1, 2, 3, 3, 3, 3, 3, 3, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("allocations: %v, want %v", got, want)
	}
	// The last column is the whole height: its top row is a full block.
	top := h.rows()[5]
	if r := []rune(top); r[len(r)-2] != '█' {
		t.Errorf("the last column's top: %q", top)
	}
	h.press(tcell.KeyRune, 'A')
	h.contains("Temporary allocations over time, cumulative, of the visible records: 1 of 4 (25.0%)")
	if got, want := h.a.chartSeries(chartTemporary, 10), []uint64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("temporary: %v, want %v", got, want)
	}
	h.press(tcell.KeyRune, 'A')
	h.lacks("over time")
	h.press(tcell.KeyRune, 'A')
	if !h.press(tcell.KeyEscape, 0) {
		t.Fatal("Esc in a chart quit")
	}
	h.lacks("over time")
	// The filters apply: the leaks (C, D) hold no temporary allocation.
	h.press(tcell.KeyRune, 'f')
	h.press(tcell.KeyRune, 'A')
	h.press(tcell.KeyRune, 'A')
	h.contains("Temporary allocations over time, cumulative, of the visible records: 0 of 2")
}
