package viewer

import (
	"cmp"
	"math/bits"
	"slices"
	"strconv"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/symbols"
)

// The call tree (c) and the icicle (i) views, heaptrack_gui's caller tree
// and flame graph: the cost of every call stack of the model (the report's
// figures, analysis.Model.ReportCosts) added up along its frames, each
// frame a node per call site (symbols.Calls) as in the report's trees.

// Cost is the figure the tree and icicle views add up (C cycles it).
type Cost int

const (
	CostLeaked    Cost = iota // bytes leaked
	CostPeak                  // bytes live at the peak
	CostAllocated             // bytes allocated
	CostCalls                 // allocation calls (a count)
	CostTemporary             // temporary allocations (a count, as heaptrack's)
	numCosts
)

func (c Cost) String() string {
	return [...]string{"leaked", "peak", "allocated", "calls", "temporary"}[c]
}

// format is v in the cost's unit.
func (c Cost) format(v uint64) string {
	if c == CostTemporary || c == CostCalls {
		return strconv.FormatUint(v, 10)
	}
	return Bytes(v)
}

func (c Cost) of(f *analysis.CostFigures) uint64 {
	switch c {
	case CostLeaked:
		return f.LeakedBytes
	case CostPeak:
		return f.PeakBytes
	case CostAllocated:
		return f.Bytes
	case CostCalls:
		return uint64(max(f.Calls, 0))
	}
	return uint64(max(f.Temporary, 0))
}

// TreeNode is one function of a call tree: the cost of the stacks through
// it at this place of the tree.
type TreeNode struct {
	Name   string
	Value  uint64
	Kids   []*TreeNode // by value, highest first, then by name
	Parent *TreeNode
	Frame  uint32 // the first frame met with this name here
	HasFr  bool
	Func   string // the function, without its call site (the icicle's colour)
	At     string // the call's file:line, full path; "" when unknown
	// Self marks the row of what its parent's figure holds beyond its
	// callees' (top-down: what the function allocates itself) or callers'
	// (bottom-up: stacks that start at it); the icicle leaves it a gap.
	Self bool
	idx  map[string]*TreeNode
}

func (n *TreeNode) kid(name string) *TreeNode {
	if k, ok := n.idx[name]; ok {
		return k
	}
	if n.idx == nil {
		n.idx = map[string]*TreeNode{}
	}
	k := &TreeNode{Name: name, Parent: n}
	n.idx[name] = k
	n.Kids = append(n.Kids, k)
	return k
}

// Path is the names from the root's child down to n.
func (n *TreeNode) Path() []string {
	var p []string
	for ; n != nil && n.Parent != nil; n = n.Parent {
		p = append(p, n.Name)
	}
	slices.Reverse(p)
	return p
}

// Find is the node at path below n, or the deepest one of it that exists.
func (n *TreeNode) Find(path []string) *TreeNode {
	for _, name := range path {
		var next *TreeNode
		for _, k := range n.Kids {
			if k.Name == name {
				next = k
				break
			}
		}
		if next == nil {
			return n
		}
		n = next
	}
	return n
}

// Self rows' names.
const (
	SelfName  = "[self]"              // top-down: allocated by the function itself
	StartName = "[stack starts here]" // bottom-up: stacks whose outermost frame it is
)

// BuildTree adds up cost over the call stacks of costs (of process proc,
// every process when proc < 0): top-down from main or a thread's start
// function (the C library's start-up code and thread trampolines left
// out, as the report's stacks stop at main: analysis.StackEnd) to the
// allocating function, or bottom-up from the allocating function to its
// callers, up to main. Where a node's children do not add up to it, a
// Self row holds the rest. Stacks for which drop is true are left out
// (the built-in suppressions, for leaks). name names a frame's function
// (nil: Model.FrameName); calls names a frame as its calls, innermost
// first, each a node named by its label, "Cache::put leaky.cpp:15" (nil:
// one call per frame, named by name alone, so that a function's calls
// from several places are one node).
func BuildTree(m *analysis.Model, costs *analysis.Costs, proc int32, cost Cost, bottomUp bool, drop func(stack uint32) bool, name func(f uint32) string, calls func(f uint32) []symbols.Call) *TreeNode {
	if name == nil {
		name = m.FrameName
	}
	root := &TreeNode{Name: "all"}
	var ids []uint32
	var names []string
	type entry struct {
		f    uint32
		call symbols.Call
	}
	var path []entry
	for p := range costs.Procs {
		pc := &costs.Procs[p]
		if proc >= 0 && pc.Proc != proc {
			continue
		}
		for k := range pc.Stacks {
			sc := &pc.Stacks[k]
			v := cost.of(&sc.CostFigures)
			if v == 0 || drop != nil && sc.Stack != 0 && drop(sc.Stack) {
				continue
			}
			root.Value = analysis.SatAdd(root.Value, v)
			if sc.Stack == 0 {
				n := root.kid("[no stack] " + m.OpName(sc.Op))
				n.Value = analysis.SatAdd(n.Value, v)
				continue
			}
			ids = append(ids[:0], m.Frames(sc.Stack)...)
			names = names[:0]
			for _, f := range ids {
				names = append(names, name(f))
			}
			ids, names = fromMain(m, ids, names, name)
			path = path[:0]
			for k, f := range ids {
				if calls == nil || names[k] != name(f) {
					// A stripped program's main, one node.
					path = append(path, entry{f, symbols.Call{Func: names[k]}})
					continue
				}
				for _, c := range calls(f) {
					path = append(path, entry{f, c})
				}
			}
			if !bottomUp {
				slices.Reverse(path)
			}
			n := root
			for _, e := range path {
				n = n.kid(e.call.Label())
				if !n.HasFr {
					n.Frame, n.HasFr, n.Func = e.f, true, e.call.Func
					if e.call.File != "" {
						n.At = e.call.File + ":" + strconv.Itoa(e.call.Line)
					}
				}
				n.Value = analysis.SatAdd(n.Value, v)
			}
		}
	}
	self := SelfName
	if bottomUp {
		self = StartName
	}
	var sortKids func(n *TreeNode)
	sortKids = func(n *TreeNode) {
		n.idx = nil
		var sum uint64
		for _, k := range n.Kids {
			sum = analysis.SatAdd(sum, k.Value)
		}
		if len(n.Kids) > 0 && sum < n.Value && n.Parent != nil {
			n.Kids = append(n.Kids, &TreeNode{Name: self, Value: n.Value - sum, Parent: n, Self: true})
		}
		slices.SortFunc(n.Kids, func(a, b *TreeNode) int {
			return cmp.Or(cmp.Compare(b.Value, a.Value), cmp.Compare(a.Name, b.Name))
		})
		for _, k := range n.Kids {
			sortKids(k)
		}
	}
	sortKids(root)
	return root
}

// fromMain is a stack (innermost first) up to main or the function the C
// library's start-up code or a thread trampoline called
// (analysis.StackEnd); a frame of the start-up code's module that the log
// and the ELF symbols leave unnamed (a stripped libc's
// __libc_start_call_main, between __libc_start_main and main) is start-up
// code too, and an unnamed frame that __libc_start_call_main called is
// main.
func fromMain(m *analysis.Model, ids []uint32, names []string, name func(uint32) string) ([]uint32, []string) {
	n, cut := analysis.StackEnd(names)
	if !cut || n >= len(ids) || n == 0 {
		return ids[:n], names[:n]
	}
	if stop := names[n-1]; stop == "main" || stop == "__static_initialization_and_destruction_0" {
		return ids[:n], names[:n]
	}
	unnamed := func(f uint32) bool { return m.Frame(f).Symbol == "" && name(f) == m.FrameName(f) }
	if names[n] == "__libc_start_call_main" && unnamed(ids[n-1]) {
		// It calls nothing but main (and exit): a stripped program's
		// main, one node whatever offset in it made the call.
		names[n-1] = "main"
		return ids[:n], names[:n]
	}
	mod := m.Frame(ids[n]).Module
	for n > 1 {
		if m.Frame(ids[n-1]).Module != mod || !unnamed(ids[n-1]) {
			break
		}
		n--
	}
	return ids[:n], names[:n]
}

// TreeRow is one visible row of a call tree.
type TreeRow struct {
	Node  *TreeNode
	Depth int
	Open  bool
}

// pathKey is a node's place in its tree, as a map key.
func pathKey(n *TreeNode) string {
	var b []byte
	for _, s := range n.Path() {
		b = append(append(b, s...), 0)
	}
	return string(b)
}

// TreeRows is the rows of root's tree shown when the nodes in open (by
// pathKey) are expanded.
func TreeRows(root *TreeNode, open map[string]bool) []TreeRow {
	var out []TreeRow
	var walk func(n *TreeNode, d int, key string)
	walk = func(n *TreeNode, d int, key string) {
		for _, k := range n.Kids {
			kk := key + k.Name + "\x00"
			o := open[kk] && len(k.Kids) > 0
			out = append(out, TreeRow{Node: k, Depth: d, Open: o})
			if o {
				walk(k, d+1, kk)
			}
		}
	}
	walk(root, 0, "")
	return out
}

// FlameBox is one frame of the icicle: its node, its columns [X, X+W) and
// its row (0: the zoomed node).
type FlameBox struct {
	Node  *TreeNode
	X, W  int
	Depth int
}

// FlameLayout lays out root's subtree in width columns and at most rows
// rows: root spans them all, and each node's callees share its columns in
// proportion to their cost (what it allocates itself is the gap on the
// right). A node that rounds to no column is left out, with its
// callees.
func FlameLayout(root *TreeNode, width, rows int) []FlameBox {
	if root == nil || root.Value == 0 || width <= 0 || rows <= 0 {
		return nil
	}
	out := []FlameBox{{Node: root, X: 0, W: width}}
	for k := 0; k < len(out); k++ {
		b := out[k]
		if b.Depth+1 >= rows {
			continue
		}
		var cum uint64
		for _, c := range b.Node.Kids {
			if c.Self {
				continue // a gap, right of the callees
			}
			x0 := b.X + share(b.W, cum, b.Node.Value)
			cum = min(analysis.SatAdd(cum, c.Value), b.Node.Value)
			x1 := b.X + share(b.W, cum, b.Node.Value)
			if x1-x0 >= 1 {
				out = append(out, FlameBox{Node: c, X: x0, W: x1 - x0, Depth: b.Depth + 1})
			}
		}
	}
	return out
}

// share is w·v/total rounded to the nearest, without overflow (v ≤
// total): a callee of half a column or more gets one.
func share(w int, v, total uint64) int {
	hi, lo := bits.Mul64(uint64(w), v)
	lo, c := bits.Add64(lo, total/2, 0)
	q, _ := bits.Div64(hi+c, lo, total)
	return int(q)
}
