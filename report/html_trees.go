package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/internal/ranking"
)

// The call trees of the HTML report, heaptrack_gui's two: top-down (from
// the program's entry to the allocating calls: where the cost comes from)
// and bottom-up (from the allocating calls to their callers: who
// allocates). Each node adds up the figures of the sites whose stacks pass
// through it; a search field (report.js) keeps the rows that match, their
// callers and callees.

const (
	treeMinFrac  = 0.001 // a node below this share of the root in every column is left out
	treeMaxNodes = 4000  // per tree: the page stays light; the rest is counted
)

type treeNode struct {
	name string // the frame's label: function and call site
	fn   string // its function
	f    figs
	kids []*treeNode
	idx  map[string]int
}

func (n *treeNode) kid(name string) *treeNode {
	if n.idx == nil {
		n.idx = map[string]int{}
	}
	if i, ok := n.idx[name]; ok {
		return n.kids[i]
	}
	k := &treeNode{name: name}
	n.idx[name] = len(n.kids)
	n.kids = append(n.kids, k)
	return k
}

// callTree is the top-down tree (bottomUp false) or the bottom-up one of
// the merged section's sites.
func (r *htmlPage) callTree(bottomUp bool) *treeNode {
	root := &treeNode{name: "all"}
	ids := make([]int32, 0, len(r.all.bySite))
	for id := range r.all.bySite {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the same page for the same logs
	for _, id := range ids {
		f := figsOf(r.all.bySite[id])
		path, fns := r.htmlPath(id), r.htmlFuncs(id) // outermost first
		if bottomUp {
			path, fns = slices.Clone(path), slices.Clone(fns)
			slices.Reverse(path)
			slices.Reverse(fns)
		}
		root.f.add(f)
		n := root
		for k, name := range path {
			n = n.kid(name)
			n.fn = fns[k]
			n.f.add(f)
		}
	}
	return root
}

var treeCols = []struct {
	fig   int
	title string
}{{fCalls, "calls"}, {fBytes, "allocated"}, {fTemp, "temporary"}, {fPeak, "peak"}, {fLeaked, "leaked"}}

// treeCells is a row's figures, one cell per column.
func treeCells(f *figs) string {
	cells := ""
	for _, c := range treeCols {
		v := strconv.FormatInt(f[c.fig], 10)
		if c.fig == fBytes || c.fig == fPeak || c.fig == fLeaked {
			v = bytesOf(f[c.fig], false)
		}
		cells += `<span class="c">` + esc(v) + `</span>`
	}
	return cells
}

// treeValues is a row's figures for the script's sorting: data-v.
func treeValues(f *figs) string {
	vs := make([]string, len(treeCols))
	for k, c := range treeCols {
		vs[k] = strconv.FormatInt(f[c.fig], 10)
	}
	return strings.Join(vs, ",")
}

// selfOf is what node n costs itself: its figures less its callees' (in
// the bottom-up tree, less its callers'), the allocations whose stacks
// end at it.
func selfOf(n *treeNode) figs {
	self := n.f
	for i := range self {
		// A maximum does not come apart into a node's and its callees'.
		if ranking.Figure(i).Merge() == ranking.Max {
			self[i] = 0
			continue
		}
		for _, k := range n.kids {
			self[i] -= k.f[i]
		}
	}
	return self
}

func (r *htmlPage) writeTree(w io.Writer, id string, root *treeNode, sortFig int, visible bool) {
	style := ""
	if !visible {
		style = ` style="display:none"`
	}
	fmt.Fprintf(w, `<div class="tree" id="tree-%s"%s><div class="row head">`, id, style)
	for k, c := range treeCols {
		cls := "c"
		if c.fig == sortFig {
			cls += " key"
		}
		title := c.title
		if c.fig == fLeaked {
			title = r.leakedWord()
		}
		fmt.Fprintf(w, `<span class="%s" data-col="%d" title="sort by %s">%s</span>`, cls, k, esc(title), esc(title))
	}
	fmt.Fprintln(w, `<span class="n">function</span></div>`)
	keep := func(f *figs) bool {
		for _, c := range treeCols {
			if t := root.f[c.fig]; t > 0 && float64(f[c.fig]) >= treeMinFrac*float64(t) {
				return true
			}
		}
		return false
	}
	shown, cut := 0, 0
	// open: the rows open at first, from the top down to the first
	// branch, where the cost divides.
	var walk func(n *treeNode, d int, open bool)
	walk = func(n *treeNode, d int, open bool) {
		kids := slices.Clone(n.kids)
		slices.SortFunc(kids, func(a, b *treeNode) int {
			return cmp.Or(cmp.Compare(b.f[sortFig], a.f[sortFig]), cmp.Compare(b.f[fCalls], a.f[fCalls]), cmp.Compare(a.name, b.name))
		})
		var self figs
		hasSelf := false
		if n != root {
			self = selfOf(n)
			for _, v := range self {
				hasSelf = hasSelf || v != 0
			}
		}
		// Opened further down while the row leads to one callee only.
		kept := 0
		for _, k := range kids {
			if keep(&k.f) {
				kept++
			}
		}
		fmt.Fprintln(w, "<ul>")
		for _, k := range kids {
			if !keep(&k.f) || shown >= treeMaxNodes {
				cut++
				continue
			}
			shown++
			cells := treeCells(&k.f)
			// Indented by depth in the name column: the figures stay in
			// columns whatever the depth.
			name := `<span class="n" style="padding-left:` + strconv.Itoa(4+14*d) + `px" title="` + esc(k.name) + `">` + esc(k.name) + `</span>`
			if len(k.kids) == 0 {
				fmt.Fprintf(w, `<li data-n="%s" data-f="%s" data-v="%s"><div class="row leaf">%s%s</div></li>`+"\n", esc(k.name), esc(k.fn), treeValues(&k.f), cells, name)
				continue
			}
			kopen := open && (n == root || kept == 1)
			attr := ""
			if kopen {
				attr = " open"
			}
			fmt.Fprintf(w, `<li data-n="%s" data-f="%s" data-v="%s" data-open="%t"><details%s><summary class="row">%s%s</summary>`+"\n", esc(k.name), esc(k.fn), treeValues(&k.f), kopen, attr, cells, name)
			walk(k, d+1, kopen)
			fmt.Fprintln(w, "</details></li>")
		}
		if hasSelf {
			if keep(&self) && shown < treeMaxNodes {
				shown++
				fmt.Fprintf(w, `<li class="self" data-n="" data-v="%s"><div class="row leaf self">%s<span class="n" style="padding-left:%dpx" title="allocations made in %s itself">self</span></div></li>`+"\n",
					treeValues(&self), treeCells(&self), 4+14*d, esc(n.name))
			} else {
				cut++
			}
		}
		fmt.Fprintln(w, "</ul>")
	}
	walk(root, 0, true)
	if cut > 0 {
		fmt.Fprintf(w, "<p class=\"hint\">%d smaller nodes left out (under %.1f%% of every column, or past %d rows).</p>\n", cut, treeMinFrac*100, treeMaxNodes)
	}
	fmt.Fprintln(w, "</div>")
}

func (r *htmlPage) htmlTrees(w io.Writer) {
	if len(r.all.bySite) == 0 {
		return
	}
	fig, _ := costOf(r.opt.cost)
	fmt.Fprintln(w, `<section id="trees"><h2>Call trees</h2><p class="tabs trees">`)
	fmt.Fprintln(w, `<button type="button" data-tree="td" class="on">top-down</button><button type="button" data-tree="bu">bottom-up</button>`)
	fmt.Fprintln(w, `<input type="search" id="tree-search" placeholder="search functions" aria-label="search functions"> <span id="tree-count" class="hint"></span></p>`)
	fmt.Fprintln(w, `<p class="hint">Top-down: from main (or a thread's start routine) to the allocating calls; bottom-up: from the allocating calls to their callers. A row is a function at a call site (file:line, or +0x offset without line tables), inlined calls included; it adds up the call stacks through it, and its "self" row is what is left of it when its callees' rows are taken away. Click a column's title to sort by it (calls and temporary count calls, the others bytes); double-click a function to see its callers and callees. The search keeps the rows whose function contains the text, with their callers and callees.</p>`)
	r.writeTree(w, "td", r.callTree(false), fig, true)
	r.writeTree(w, "bu", r.callTree(true), fig, false)
	fmt.Fprintln(w, "</section>")
}
