package report

import (
	"github.com/memtrace/memtrace/analysis"
)

// What the text report shows of a stack and how it names frames, for a
// reader (the JSON keeps every frame and full names): stacks up to main
// or a thread's start routine (--full-stacks shows the C library's
// start-up frames too) and C++ template arguments shortened (-t 0,
// --full-names keeps them), both as heaptrack_print does.

// fname is a function name as the text report shows it.
func (r *report) fname(name string) string {
	if r.opt.shorten {
		return analysis.ShortenTemplates(name)
	}
	return name
}

// shown is how many of frames the text report shows, and whether start-up
// frames were left out.
func (r *report) shown(frames []frameInfo) (int, bool) {
	if r.opt.fullStacks {
		return len(frames), false
	}
	names := make([]string, len(frames))
	for k := range frames {
		names[k] = frames[k].name
	}
	return analysis.StackEnd(names)
}

// groupHeads names the first frame of each group: shortened, unless that
// would name two of the groups alike (a template's instances), when
// those keep their full names.
func (r *report) groupHeads(gs []group) []string {
	out := make([]string, len(gs))
	seen := map[string]int{}
	for k, g := range gs {
		fr := r.t.sites[g.sites[0].site].fr()
		if len(fr) == 0 {
			continue
		}
		out[k] = r.fname(fr[0].name)
		seen[out[k]]++
	}
	for k, g := range gs {
		if out[k] != "" && seen[out[k]] > 1 {
			out[k] = r.t.sites[g.sites[0].site].frames[0].name
		}
	}
	return out
}
