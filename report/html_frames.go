package report

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/symbols"
)

// The frames the HTML report shows: each logged frame expanded into its
// inlined calls (the innermost inlined function first, as the text report
// and heaptrack do), each named by its function and its call site, so that
// an inlined Cache::put is its own frame and two calls that differ only by
// address are two: "Cache::put leaky.cpp:15" where the line is known,
// "sqlite3VdbeExec+0x1a2" where it is not. Start-up frames (_start,
// __libc_start_main, a thread's trampoline) are left out as in the text
// report: stacks start at main or at the thread's start routine.

// hframe is one function of a shown stack: a symbols.Call, the one
// naming of call sites memview's groups and trees share.
type hframe struct {
	symbols.Call // Func shortened as the text report's (--shorten-templates)
	module       string
}

// label is the frame's name in trees, flame graphs and labels: the
// function and where it was at the call.
func (h *hframe) label() string { return h.Label() }

// expand is frame f as the functions it stands for, innermost first
// (symbols.Calls).
func (r *htmlPage) expand(f *frameInfo) []hframe {
	r.resolve(f)
	var chain []symbols.SourceFrame
	switch {
	case len(f.inl) > 1:
		chain = make([]symbols.SourceFrame, len(f.inl))
		for j, c := range f.inl {
			chain[j] = symbols.SourceFrame{Function: c.name, File: c.file, Line: c.line}
		}
	case f.file != "":
		chain = []symbols.SourceFrame{{File: f.file, Line: f.line}}
	}
	off := ""
	switch {
	case f.mixed:
		// Merged frames at several offsets: the function is all there is.
	case f.symbol != "":
		off = "+0x" + strconv.FormatUint(f.offset, 16)
	case f.mangled != "" && f.module != "":
		// Named from the module's symbol table: the offset is the module's.
		off = " (" + filepath.Base(f.module) + "+0x" + strconv.FormatUint(f.offset, 16) + ")"
	}
	calls := symbols.Calls(chain, f.name, off)
	out := make([]hframe, len(calls))
	for j, c := range calls {
		c.Func = r.fname(c.Func)
		out[j] = hframe{Call: c, module: f.module}
	}
	return out
}

// shownFrames is site s's frames as the HTML shows them, innermost first,
// start-up frames left out.
func (r *htmlPage) shownFrames(s *site, keep bool) []hframe {
	var fr []frameInfo
	if keep {
		fr = s.fr()
	} else {
		fr = s.frTemp()
	}
	n, _ := r.shown(fr)
	var out []hframe
	for k := range fr[:n] {
		out = append(out, r.expand(&fr[k])...)
	}
	return out
}

// htmlPath is site id's stack as the labels of its frames, outermost
// first, for the trees, flame graphs and the caller/callee view; looked up
// once per site.
func (r *htmlPage) htmlPath(id int32) []string {
	if p, ok := r.paths[id]; ok {
		return p
	}
	s := r.t.sites[id]
	var p []string
	if hs := r.shownFrames(s, false); len(hs) == 0 {
		p = []string{"[no stack]", frameText(s.r().op)}
	} else {
		p = make([]string, len(hs))
		for k := range hs {
			p[len(hs)-1-k] = hs[k].label()
		}
	}
	if r.paths == nil {
		r.paths = map[int32][]string{}
	}
	r.paths[id] = p
	return p
}

// htmlFuncs is site id's stack as function names (no call site),
// outermost first, for the caller/callee view.
func (r *htmlPage) htmlFuncs(id int32) []string {
	if p, ok := r.funcs[id]; ok {
		return p
	}
	s := r.t.sites[id]
	var p []string
	if hs := r.shownFrames(s, false); len(hs) == 0 {
		p = []string{"[no stack]", frameText(s.r().op)}
	} else {
		p = make([]string, len(hs))
		for k := range hs {
			p[len(hs)-1-k] = hs[k].Func
		}
	}
	if r.funcs == nil {
		r.funcs = map[int32][]string{}
	}
	r.funcs[id] = p
	return p
}

// htmlSiteLabels names each of sts by its innermost shown frame and, where
// others among sts share it, the first frame that tells it apart
// (analysis.DistinctLabels), with call sites: two rows never read alike
// when their stacks differ.
func (r *htmlPage) htmlSiteLabels(sts []*site) []string {
	stacks := make([][]string, len(sts))
	for k, st := range sts {
		for _, h := range r.shownFrames(st, true) {
			stacks[k] = append(stacks[k], h.label())
		}
	}
	out := analysis.DistinctLabels(stacks)
	for k, st := range sts {
		if out[k] == "" {
			out[k] = st.label()
		}
	}
	return out
}

// htmlCallers is the tooltip of a site: its shown frames, innermost first.
func (r *htmlPage) htmlCallers(st *site) string {
	hs := r.shownFrames(st, true)
	if len(hs) == 0 {
		return st.label()
	}
	names := make([]string, len(hs))
	for k := range hs {
		names[k] = hs[k].label()
	}
	return strings.Join(names, " ← ")
}
