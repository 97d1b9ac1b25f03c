package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// The caller/callee view, heaptrack_gui's: pick a function, see what it
// costs (inclusive: every stack through it; self: the stacks it ends)
// and, with their costs, the functions that called it and the functions
// it called. Functions are named without their call sites, inlined ones
// included; the figures go to the page as JSON and the script draws the
// tables of the function picked.

const ccMaxFuncs = 3000 // functions in the view: the page stays light

// ccFunc is one function of the view, as the page's JSON has it.
type ccFunc struct {
	Name    string    `json:"n"`
	Incl    []int64   `json:"i"`
	Self    []int64   `json:"s"`
	Callers [][]int64 `json:"up"`   // [function index, figures…]
	Callees [][]int64 `json:"down"` // idem
}

type ccData struct {
	Cols  []string `json:"cols"`
	Bytes []bool   `json:"bytes"`
	Key   int      `json:"key"`
	Funcs []ccFunc `json:"fns"`
	Start int      `json:"start"`
}

// colFigs is f's figures in the trees' columns.
func colFigs(f *figs) []int64 {
	out := make([]int64, len(treeCols))
	for k, c := range treeCols {
		out[k] = f[c.fig]
	}
	return out
}

// callerCallee sums the merged section's sites by function and by call
// edge; a site counts once for a function (and an edge) however often its
// stack passes through it: recursion does not count twice.
func (r *htmlPage) callerCallee() (names []string, incl, self map[string]*figs, up, down map[string]map[string]*figs) {
	incl, self = map[string]*figs{}, map[string]*figs{}
	up, down = map[string]map[string]*figs{}, map[string]map[string]*figs{}
	add := func(m map[string]*figs, k string, f *figs) {
		p := m[k]
		if p == nil {
			p = &figs{}
			m[k] = p
		}
		p.add(*f)
	}
	edge := func(m map[string]map[string]*figs, a, b string, f *figs) {
		if m[a] == nil {
			m[a] = map[string]*figs{}
		}
		add(m[a], b, f)
	}
	ids := make([]int32, 0, len(r.all.bySite))
	for id := range r.all.bySite {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	type pair struct{ a, b string }
	for _, id := range ids {
		f := figsOf(r.all.bySite[id])
		path := r.htmlFuncs(id) // outermost first
		seen := map[string]bool{}
		seenEdge := map[pair]bool{}
		for k, fn := range path {
			if !seen[fn] {
				seen[fn] = true
				add(incl, fn, &f)
			}
			if k > 0 {
				if e := (pair{path[k-1], fn}); !seenEdge[e] {
					seenEdge[e] = true
					edge(up, fn, path[k-1], &f)
					edge(down, path[k-1], fn, &f)
				}
			}
		}
		add(self, path[len(path)-1], &f)
	}
	for n := range incl {
		names = append(names, n)
	}
	return names, incl, self, up, down
}

func (r *htmlPage) htmlCallerCallee(w io.Writer) {
	if len(r.all.bySite) == 0 {
		return
	}
	fig, _ := costOf(r.opt.cost)
	key := slices.IndexFunc(treeCols, func(c struct {
		fig   int
		title string
	}) bool {
		return c.fig == fig
	})
	names, incl, self, up, down := r.callerCallee()
	var total figs
	for _, c := range r.all.bySite {
		total.add(figsOf(c))
	}
	keep := func(f *figs) bool {
		for _, c := range treeCols {
			if t := total[c.fig]; t > 0 && float64(f[c.fig]) >= treeMinFrac*float64(t) {
				return true
			}
		}
		return false
	}
	names = slices.DeleteFunc(names, func(n string) bool { return !keep(incl[n]) })
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(incl[b][fig], incl[a][fig]), cmp.Compare(incl[b][fCalls], incl[a][fCalls]), cmp.Compare(a, b))
	})
	left := 0
	if len(names) > ccMaxFuncs {
		left = len(names) - ccMaxFuncs
		names = names[:ccMaxFuncs]
	}
	index := map[string]int{}
	for k, n := range names {
		index[n] = k
	}
	d := ccData{Key: key}
	for _, c := range treeCols {
		title := c.title
		if c.fig == fLeaked {
			title = r.leakedWord()
		}
		d.Cols = append(d.Cols, title)
		d.Bytes = append(d.Bytes, c.fig == fBytes || c.fig == fPeak || c.fig == fLeaked)
	}
	edges := func(m map[string]*figs) [][]int64 {
		out := [][]int64{} // [] in the JSON, not null
		for n, f := range m {
			if k, ok := index[n]; ok {
				out = append(out, append([]int64{int64(k)}, colFigs(f)...))
			}
		}
		slices.SortFunc(out, func(a, b []int64) int { return cmp.Or(cmp.Compare(b[1+key], a[1+key]), cmp.Compare(a[0], b[0])) })
		return out
	}
	best := int64(-1)
	for k, n := range names {
		s := self[n]
		if s == nil {
			s = &figs{}
		}
		d.Funcs = append(d.Funcs, ccFunc{Name: n, Incl: colFigs(incl[n]), Self: colFigs(s), Callers: edges(up[n]), Callees: edges(down[n])})
		// The view opens on the function that costs most itself.
		if s[fig] > best {
			best, d.Start = s[fig], k
		}
	}
	data, err := json.Marshal(d) // escapes <, > and &: safe in a script element
	if err != nil {
		return
	}
	fmt.Fprintln(w, `<section id="callers"><h2>Callers and callees</h2>`)
	fmt.Fprintln(w, `<p class="tabs"><label>function <select id="cc-fn" aria-label="function"></select></label></p>`)
	fmt.Fprintf(w, `<p class="hint">A function's cost over every call stack through it (inclusive) and in the stacks that end in it (self); the functions that called it and that it called, with the cost of the stacks through each call. Double-click a row of the call trees, or click a caller or callee, to see that function. Functions under %.1f%% of every column are left out`, treeMinFrac*100)
	if left > 0 {
		fmt.Fprintf(w, ", and %d more past the first %d", left, ccMaxFuncs)
	}
	fmt.Fprintln(w, `.</p>`)
	fmt.Fprintln(w, `<div id="cc-view"></div>`)
	fmt.Fprintf(w, "<script type=\"application/json\" id=\"cc-data\">%s</script>\n", data)
	fmt.Fprintln(w, "</section>")
}
