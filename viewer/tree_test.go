package viewer

import (
	"slices"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/symbols"
)

// treeLog is one thread's history, worked out by hand below:
//
//	A malloc 100  wrap ← f ← main   leaked
//	B malloc  50  wrap ← g ← main   leaked
//	C malloc  30  other ← main      freed before the next allocation: temporary
//	D malloc  20  wrap ← f ← main   leaked
//
// Live bytes run 100, 150, 180, 150, 170: the peak (180) holds A, B, C.
func treeLog() []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "9"}, logfmt.KV{Key: "comm", Value: "tree"}, logfmt.KV{Key: "cmd", Value: "./tree"})
	stack := func(names ...string) {
		for k, n := range names {
			b = logfmt.AppendFrame(b, k, "./tree", n, uint64(0x10*(k+1)), uint64(0x401000+0x100*k))
		}
	}
	b = logfmt.AppendAlloc(b, 1, "main", "malloc", 1000, 100, 100, 0x1000)
	stack("wrap", "f", "main")
	b = logfmt.AppendAlloc(b, 1, "main", "malloc", 2000, 50, 150, 0x2000)
	stack("wrap", "g", "main")
	b = logfmt.AppendAlloc(b, 1, "main", "malloc", 3000, 30, 180, 0x3000)
	stack("other", "main")
	b = logfmt.AppendFree(b, 1, "main", "free", 3500, 30, 0x3000)
	b = logfmt.AppendAlloc(b, 1, "main", "malloc", 4000, 20, 170, 0x4000)
	stack("wrap", "f", "main")
	return logfmt.AppendSummary(b, logfmt.Summary{})
}

func treeModel(t *testing.T) (*analysis.Model, *analysis.Costs) {
	t.Helper()
	h := newHarness(t, treeLog(), Options{})
	return h.m, h.m.ReportCosts()
}

// flat renders a tree as "depth name value" lines, every node.
func flat(n *TreeNode) []string {
	var out []string
	var walk func(n *TreeNode, d int)
	walk = func(n *TreeNode, d int) {
		for _, k := range n.Kids {
			out = append(out, strings.Repeat(" ", d)+k.Name+" "+Cost(0).format(k.Value))
			walk(k, d+1)
		}
	}
	walk(n, 0)
	return out
}

func TestTreeFigures(t *testing.T) {
	m, c := treeModel(t)
	cases := []struct {
		cost     Cost
		bottomUp bool
		total    uint64
		want     []string
	}{
		{CostLeaked, false, 170, []string{"main 170B", " f 120B", "  wrap 120B", " g 50B", "  wrap 50B"}},
		{CostLeaked, true, 170, []string{"wrap 170B", " f 120B", "  main 120B", " g 50B", "  main 50B"}},
		{CostPeak, false, 180, []string{"main 180B", " f 100B", "  wrap 100B", " g 50B", "  wrap 50B", " other 30B"}},
		{CostAllocated, true, 200, []string{"wrap 170B", " f 120B", "  main 120B", " g 50B", "  main 50B", "other 30B", " main 30B"}},
		{CostTemporary, false, 1, []string{"main 1B", " other 1B"}},
	}
	for _, tc := range cases {
		root := BuildTree(m, c, -1, tc.cost, tc.bottomUp, nil, nil, nil)
		if root.Value != tc.total {
			t.Errorf("%v bottomUp=%v: total %d, want %d", tc.cost, tc.bottomUp, root.Value, tc.total)
		}
		if got := flat(root); !slices.Equal(got, tc.want) {
			t.Errorf("%v bottomUp=%v:\n%s\nwant\n%s", tc.cost, tc.bottomUp, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
	// Dropping a stack (as the built-in suppressions do) takes its cost
	// out of every node on its way.
	var fStack uint32
	for s := uint32(1); int(s) < m.NumStacks(); s++ {
		if n := m.StackNames(s); len(n) == 3 && n[1] == "f" {
			fStack = s
		}
	}
	root := BuildTree(m, c, -1, CostLeaked, false, func(s uint32) bool { return s == fStack }, nil, nil)
	if got, want := flat(root), []string{"main 50B", " g 50B", "  wrap 50B"}; !slices.Equal(got, want) {
		t.Errorf("dropped f: %q", got)
	}
}

func TestTreeRowsOpenAndClose(t *testing.T) {
	m, c := treeModel(t)
	root := BuildTree(m, c, -1, CostAllocated, false, nil, nil, nil)
	names := func(rows []TreeRow) string {
		var s []string
		for _, r := range rows {
			s = append(s, strings.Repeat(">", r.Depth)+r.Node.Name)
		}
		return strings.Join(s, " ")
	}
	open := map[string]bool{}
	if got := names(TreeRows(root, open)); got != "main" {
		t.Fatalf("closed: %s", got)
	}
	open["main\x00"] = true
	if got := names(TreeRows(root, open)); got != "main >f >g >other" {
		t.Fatalf("main open: %s", got)
	}
	open[pathKey(root.Find([]string{"main", "g"}))] = true
	if got := names(TreeRows(root, open)); got != "main >f >g >>wrap >other" {
		t.Fatalf("g open: %s", got)
	}
}

func TestFlameLayout(t *testing.T) {
	m, c := treeModel(t)
	type box struct {
		name    string
		x, w, d int
	}
	lay := func(root *TreeNode, w, rows int) []box {
		var out []box
		for _, b := range FlameLayout(root, w, rows) {
			out = append(out, box{b.Node.Name, b.X, b.W, b.Depth})
		}
		return out
	}
	// Allocated, 200 B in 34 columns: main all of it; f 120 B (20.4
	// columns: 20), g to 34·170/200 = 28.9 (29), other the rest.
	root := BuildTree(m, c, -1, CostAllocated, false, nil, nil, nil)
	want := []box{{"all", 0, 34, 0}, {"main", 0, 34, 1}, {"f", 0, 20, 2}, {"g", 20, 9, 2}, {"other", 29, 5, 2}, {"wrap", 0, 20, 3}, {"wrap", 20, 9, 3}}
	if got := lay(root, 34, 10); !slices.Equal(got, want) {
		t.Fatalf("allocated:\n%v\nwant\n%v", got, want)
	}
	// Three rows: the deepest row is left out.
	if got := lay(root, 34, 3); !slices.Equal(got, want[:5]) {
		t.Fatalf("3 rows: %v", got)
	}
	// Zoomed to g: g has every column, its callee all of them too.
	g := root.Find([]string{"main", "g"})
	if got := lay(g, 34, 10); !slices.Equal(got, []box{{"g", 0, 34, 0}, {"wrap", 0, 34, 1}}) {
		t.Fatalf("zoomed to g: %v", got)
	}
	// Leaked, 170 B: in 3 columns f has 2.1 (2), g the last; in one
	// column f has 0.7 (1), g none: it is left out, with its callee.
	leak := BuildTree(m, c, -1, CostLeaked, false, nil, nil, nil)
	if got := lay(leak, 3, 10); !slices.Equal(got, []box{{"all", 0, 3, 0}, {"main", 0, 3, 1}, {"f", 0, 2, 2}, {"g", 2, 1, 2}, {"wrap", 0, 2, 3}, {"wrap", 2, 1, 3}}) {
		t.Fatalf("leaked in 3 columns: %v", got)
	}
	if got := lay(leak, 1, 10); !slices.Equal(got, []box{{"all", 0, 1, 0}, {"main", 0, 1, 1}, {"f", 0, 1, 2}, {"wrap", 0, 1, 3}}) {
		t.Fatalf("leaked in 1 column: %v", got)
	}
}

type treeLines struct{}

func (treeLines) SourceLine(module, symbol string, off uint64) (string, int, error) {
	return "tree.c", int(off), nil
}

// selectedRow is the text of the row drawn in reverse video.
func (h *harness) selectedRow() string {
	for y, r := range h.rows() {
		if _, _, attr := h.style(3, y).Decompose(); attr&tcell.AttrReverse != 0 && y > 3 {
			return strings.TrimSpace(strings.Trim(r, "│"))
		}
	}
	return ""
}

// The views on screen: the tree opens, closes and follows the cost and
// the direction; the icicle moves, zooms in and out; groups are named
// apart.
func TestTreeAndIcicleViews(t *testing.T) {
	h := newHarness(t, treeLog(), Options{Lines: treeLines{}})
	h.press(tcell.KeyRune, '\\')
	// Each frame at its line; f is the frame that tells the group apart.
	h.contains("wrap tree.c:16 ← f tree.c:32  [")
	h.contains("wrap tree.c:16 ← g tree.c:32  [")
	h.contains("other tree.c:16  [")
	h.press(tcell.KeyRune, '\\')

	h.press(tcell.KeyRune, 'c')
	h.contains("Call tree top-down, leaked: 170B in all")
	if r := h.selectedRow(); r != "170B 100.0%  ▾ main tree.c:48" {
		t.Fatalf("first row %q", r)
	}
	// Open down to the first branch: main calls f and g, which stay
	// closed.
	h.contains("120B  70.6%    ▸ f tree.c:32")
	h.contains("50B  29.4%    ▸ g tree.c:32")
	h.lacks("wrap")
	h.contains("▸ main tree.c:48  at tree.c:48")
	h.press(tcell.KeyEnter, 0) // close main
	h.lacks("f tree.c:32")
	h.contains("▸ main tree.c:48")
	h.press(tcell.KeyRight, 0) // open it
	h.contains("▸ f tree.c:32")
	h.press(tcell.KeyRight, 0) // main is open: down to f
	if r := h.selectedRow(); !strings.HasSuffix(r, "▸ f tree.c:32") {
		t.Fatalf("→ on an open node: %q", r)
	}
	h.press(tcell.KeyRight, 0)                      // open f
	h.contains("120B  70.6%        wrap tree.c:16") // a leaf
	h.press(tcell.KeyLeft, 0)                       // close f
	h.contains("▸ f tree.c:32")
	h.press(tcell.KeyLeft, 0) // to its caller
	if r := h.selectedRow(); !strings.HasSuffix(r, "▾ main tree.c:48") {
		t.Fatalf("← on a closed node: %q", r)
	}
	h.press(tcell.KeyRune, '-')
	h.lacks("▾")
	h.press(tcell.KeyRune, '+')
	h.contains("▾ main tree.c:48")
	h.contains("▾ f tree.c:32")
	h.contains("▾ g tree.c:32")
	h.press(tcell.KeyRune, 'C')
	h.contains("Call tree top-down, peak: 180B in all")
	// main at another line is a tree of its own (the tree's opened
	// nodes kept: it is closed).
	h.contains("30B  16.7%  ▸ main tree.c:32")
	h.press(tcell.KeyRune, 'u')
	h.contains("Call tree bottom-up, peak: 180B in all")
	if r := h.selectedRow(); r != "150B  83.3%  ▾ wrap tree.c:16" {
		t.Fatalf("bottom-up first row %q", r)
	}
	h.press(tcell.KeyEscape, 0)
	h.contains("Detail [↑↓ scroll]")

	h.press(tcell.KeyRune, 'u')
	h.press(tcell.KeyRune, 'i')
	h.contains("Icicle top-down, peak: 180B in all   zoom: all")
	h.contains("▸ all  180B (100.0%)")
	h.press(tcell.KeyDown, 0)
	h.contains("▸ main tree.c:48  150B (83.3%)  at tree.c:48")
	h.press(tcell.KeyDown, 0) // the widest callee
	h.contains("▸ f tree.c:32  100B (55.6%)  at tree.c:32")
	h.press(tcell.KeyRight, 0)
	h.contains("▸ g tree.c:32  50B (27.8%)")
	h.press(tcell.KeyEnter, 0)
	h.contains("zoom: all ▸ main tree.c:48 ▸ g tree.c:32")
	rows := h.rows()
	// Zoomed to g: g and its callee span the whole width (128 columns
	// inside the borders).
	if g, w := "g tree.c:32", "wrap tree.c:16"; !strings.Contains(rows[5], "│"+g+strings.Repeat(" ", 127-len(g))+"▕│") || !strings.Contains(rows[6], "│"+w+strings.Repeat(" ", 127-len(w))+"▕│") {
		t.Fatalf("zoomed icicle:\n%s\n%s", rows[5], rows[6])
	}
	h.press(tcell.KeyBackspace2, 0)
	h.contains("zoom: all ▸ main tree.c:48 ")
	h.press(tcell.KeyEscape, 0)
	h.contains("zoom: all ")
	h.press(tcell.KeyEscape, 0) // out of the whole: the records
	h.contains("Detail [↑↓ scroll]")
}

// Groups of the same function names are told apart by the offset of the
// first frame that differs; frames logged without a function are named
// by Options.NameFrame, in the groups and the tree alike.
func TestGroupNamesSameFunctionsAndELFNames(t *testing.T) {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "9"}, logfmt.KV{Key: "comm", Value: "t"}, logfmt.KV{Key: "cmd", Value: "./t"})
	site := func(ts, ptr, fOff uint64) {
		b = logfmt.AppendAlloc(b, 1, "main", "malloc", ts, 10, 10, ptr)
		b = logfmt.AppendFrame(b, 0, "/lib/libx.so", "", 0xa750, 0x7000a750)
		b = logfmt.AppendFrame(b, 1, "./t", "f", fOff, 0x401000+fOff)
		b = logfmt.AppendFrame(b, 2, "./t", "main", 0x30, 0x402030)
	}
	site(1000, 0x1000, 0x20)
	site(2000, 0x2000, 0x24)
	b = logfmt.AppendSummary(b, logfmt.Summary{})
	named := func(module string, off uint64) string {
		if module == "/lib/libx.so" && off == 0xa750 {
			return "x_malloc"
		}
		return ""
	}
	for _, tc := range []struct {
		name  func(string, uint64) string
		alloc string
	}{{nil, "libx.so+0xa750"}, {named, "x_malloc"}} {
		h := newHarness(t, b, Options{NameFrame: tc.name})
		h.press(tcell.KeyRune, '\\')
		h.contains(tc.alloc + " ← f+0x20  ")
		h.contains(tc.alloc + " ← f+0x24  ")
		h.press(tcell.KeyRune, 'c')
		h.press(tcell.KeyRune, 'u')
		h.contains("20B 100.0%  ▾ " + tc.alloc)
		// The tree tells f's two call sites apart too.
		h.press(tcell.KeyRune, '+')
		h.contains("10B  50.0%    ▾ f+0x20")
		h.contains("10B  50.0%    ▾ f+0x24")
	}
}

func TestShortName(t *testing.T) {
	for in, want := range map[string]string{
		"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_mutate(unsigned long, unsigned long, char const*, unsigned long)": "std::__cxx11::basic_string<…>::_M_mutate(…)",
		"demo::Cache::insert()":                      "demo::Cache::insert()",
		"main":                                       "main",
		"std::operator<< <char>(int)":                "std::operator<< <char>(int)", // unpaired: whole
		"f(std::vector<int>) const":                  "f(…) const",
		"libsqlite3.so.0+0xa7504":                    "libsqlite3.so.0+0xa7504",
		"std::map<int, int>::operator[](int const&)": "std::map<…>::operator[](…)",
	} {
		if got := shortName(in); got != want {
			t.Errorf("shortName(%q) = %q, want %q", in, got, want)
		}
	}
}

type chainLines struct{ treeLines }

func (chainLines) SourceFrames(module, symbol string, off uint64) ([]symbols.SourceFrame, error) {
	return []symbols.SourceFrame{{Function: "inlined", File: "/usr/include/inl.h", Line: 7}, {Function: symbol, File: "/src/" + symbol + ".c", Line: int(off)}}, nil
}

// A frame in inlined code is its calls: the inlined function at its
// line, then the physical function at the line of the call, in the
// groups and the tree alike.
func TestGroupCallLine(t *testing.T) {
	h := newHarness(t, treeLog(), Options{Lines: chainLines{}})
	h.press(tcell.KeyRune, '\\')
	// Every stack starts with the inlined function, shared by all: "…".
	h.contains("… ← wrap wrap.c:16 ← … ← f f.c:32  [")
	h.contains("inlined inl.h:7 ← other other.c:16  [")
	h.press(tcell.KeyRune, '\\')
	h.press(tcell.KeyRune, 'c')
	h.press(tcell.KeyRune, '+')
	h.contains("▾ main main.c:48")
	h.contains("▾ inlined inl.h:7")
	h.contains("▾ f f.c:32")
}

// A fresh tree opens as the report's: down to the first branch, however
// deep, and no further.
func TestTreeOpensToFirstBranch(t *testing.T) {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "9"}, logfmt.KV{Key: "comm", Value: "t"}, logfmt.KV{Key: "cmd", Value: "./t"})
	for k, leaf := range []string{"c", "d"} {
		b = logfmt.AppendAlloc(b, 1, "main", "malloc", uint64(1000*(k+1)), 10, 10, uint64(0x1000*(k+1)))
		for j, fn := range []string{"x", leaf, "b", "a", "main"} {
			b = logfmt.AppendFrame(b, j, "./t", fn, 0x10, uint64(0x401000+0x100*j))
		}
	}
	b = logfmt.AppendSummary(b, logfmt.Summary{})
	h := newHarness(t, b, Options{})
	h.press(tcell.KeyRune, 'c')
	h.contains("▾ main+0x10")
	h.contains("▾ a+0x10")
	h.contains("▾ b+0x10")
	h.contains("▸ c+0x10")
	h.contains("▸ d+0x10")
	h.lacks("x+0x10")
}
