package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
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
	treeOpen     = 2     // levels open at first
)

type treeNode struct {
	name string
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
func (r *report) callTree(bottomUp bool) *treeNode {
	root := &treeNode{name: "all"}
	ids := make([]int32, 0, len(r.all.bySite))
	for id := range r.all.bySite {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the same page for the same logs
	for _, id := range ids {
		f := figsOf(r.all.bySite[id])
		path := foldedFrames(r.t.sites[id]) // outermost first
		if bottomUp {
			path = slices.Clone(path)
			slices.Reverse(path)
		}
		root.f.add(f)
		n := root
		for _, name := range path {
			n = n.kid(name)
			n.f.add(f)
		}
	}
	return root
}

var treeCols = []struct {
	fig   int
	title string
}{{fCalls, "calls"}, {fBytes, "allocated"}, {fTemp, "temporary"}, {fPeak, "peak"}, {fLeaked, "leaked"}}

func (r *report) writeTree(w io.Writer, id string, root *treeNode, sortFig int, visible bool) {
	style := ""
	if !visible {
		style = ` style="display:none"`
	}
	fmt.Fprintf(w, `<div class="tree" id="tree-%s"%s><div class="row head">`, id, style)
	for _, c := range treeCols {
		cls := "c"
		if c.fig == sortFig {
			cls += " key"
		}
		title := c.title
		if c.fig == fLeaked {
			title = r.leakedWord()
		}
		fmt.Fprintf(w, `<span class="%s">%s</span>`, cls, esc(title))
	}
	fmt.Fprintln(w, `<span class="n">function</span></div>`)
	keep := func(n *treeNode) bool {
		for _, c := range treeCols {
			if t := root.f[c.fig]; t > 0 && float64(n.f[c.fig]) >= treeMinFrac*float64(t) {
				return true
			}
		}
		return false
	}
	shown, cut := 0, 0
	var walk func(n *treeNode, d int)
	walk = func(n *treeNode, d int) {
		kids := slices.Clone(n.kids)
		slices.SortFunc(kids, func(a, b *treeNode) int {
			return cmp.Or(cmp.Compare(b.f[sortFig], a.f[sortFig]), cmp.Compare(b.f[fCalls], a.f[fCalls]), cmp.Compare(a.name, b.name))
		})
		fmt.Fprintln(w, "<ul>")
		for _, k := range kids {
			if !keep(k) || shown >= treeMaxNodes {
				cut++
				continue
			}
			shown++
			cells := ""
			for _, c := range treeCols {
				v := strconv.FormatInt(k.f[c.fig], 10)
				if c.fig == fBytes || c.fig == fPeak || c.fig == fLeaked {
					v = bytesOf(k.f[c.fig], false)
				}
				cells += `<span class="c">` + esc(v) + `</span>`
			}
			// Indented by depth in the name column: the figures stay in
			// columns whatever the depth.
			name := `<span class="n" style="padding-left:` + strconv.Itoa(4+14*d) + `px" title="` + esc(k.name) + `">` + esc(k.name) + `</span>`
			if len(k.kids) == 0 {
				fmt.Fprintf(w, `<li data-n="%s"><div class="row leaf">%s%s</div></li>`+"\n", esc(k.name), cells, name)
				continue
			}
			open := ""
			if d < treeOpen {
				open = " open"
			}
			fmt.Fprintf(w, `<li data-n="%s" data-open="%t"><details%s><summary class="row">%s%s</summary>`+"\n", esc(k.name), open != "", open, cells, name)
			walk(k, d+1)
			fmt.Fprintln(w, "</details></li>")
		}
		fmt.Fprintln(w, "</ul>")
	}
	walk(root, 0)
	if cut > 0 {
		fmt.Fprintf(w, "<p class=\"hint\">%d smaller nodes left out (under %.1f%% of every column, or past %d rows).</p>\n", cut, treeMinFrac*100, treeMaxNodes)
	}
	fmt.Fprintln(w, "</div>")
}

func (r *report) htmlTrees(w io.Writer) {
	if len(r.all.bySite) == 0 {
		return
	}
	fig, _ := costOf(r.opt.cost)
	fmt.Fprintln(w, `<section id="trees"><h2>Call trees</h2><p class="tabs trees">`)
	fmt.Fprintln(w, `<button type="button" data-tree="td" class="on">top-down</button><button type="button" data-tree="bu">bottom-up</button>`)
	fmt.Fprintln(w, `<input type="search" id="tree-search" placeholder="search functions" aria-label="search functions"> <span id="tree-count" class="hint"></span></p>`)
	fmt.Fprintln(w, `<p class="hint">Top-down: from the program's entry to the allocating calls; bottom-up: from the allocating calls to their callers. Each row adds up the call stacks through it; the search keeps the rows whose function contains the text, with their callers and callees.</p>`)
	r.writeTree(w, "td", r.callTree(false), fig, true)
	r.writeTree(w, "bu", r.callTree(true), fig, false)
	fmt.Fprintln(w, "</section>")
}
