package report

import (
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/ranking"
	"github.com/memtrace/memtrace/internal/units"
	"github.com/memtrace/memtrace/logfmt"
)

// num formats a figure; signed (a delta) shows its sign.
func num(v int64, signed bool) string {
	if signed && v > 0 {
		return "+" + strconv.FormatInt(v, 10)
	}
	return strconv.FormatInt(v, 10)
}

func bytesOf(v int64, signed bool) string {
	if signed && v > 0 {
		return "+" + units.Signed(v)
	}
	return units.Signed(v)
}

func secs(us uint64) string { return strconv.FormatFloat(float64(us)/1e6, 'f', 6, 64) + "s" }

func pct(a, b int64) string {
	if b == 0 {
		return "0.00%"
	}
	return strconv.FormatFloat(float64(a)*100/float64(b), 'f', 2, 64) + "%"
}

// stillTitle replaces MEMORY LEAKS for a process that had not exited,
// cutTitle for a log that ends before its process did.
const (
	stillTitle = "STILL ALLOCATED AT DETACH (the process had not exited: blocks live when tracing stopped, not leaks)"
	cutTitle   = "LIVE AT THE CUT (the log ends before the process did: blocks live where it stops, not leaks)"
)

// liveText is how the report names the live blocks of a section whose
// blocks are not leaks (analysis.Live), in every output.
type liveText struct {
	title, htmlTitle string // the leak ranking's
	word             string // "still allocated": the rankings' and trees' column
	summary          string // the summary's label
	why              string // after the figure
}

var liveTexts = map[analysis.Live]liveText{
	analysis.LiveDetached: {stillTitle, htmlStillTitle, "still allocated", "still allocated at detach", "not leaks: the process had not exited"},
	analysis.LiveCut:      {cutTitle, htmlCutTitle, "live at the cut", "live at the cut", "not leaks: the log ends before the process did"},
}

// entryLine is the line above a stack: the ranking's Head, or with sub
// its Sub, the shorter form of the stacks listed under a merged entry.
func entryLine(mt metric, f figs, signed, sub bool) string {
	d := mt.desc()
	tmpl := d.Head
	if sub {
		tmpl = d.Sub
	}
	s, _ := expandLine(tmpl, d, f, signed)
	return s
}

// expandLine fills a ranking's wording (ranking.Ranking.Head) with f; ok
// is false when a placeholder names no figure (left as it is).
func expandLine(tmpl string, d *ranking.Ranking, f figs, signed bool) (s string, ok bool) {
	var b strings.Builder
	ok = true
	for {
		i := strings.IndexByte(tmpl, '{')
		j := strings.IndexByte(tmpl[max(i, 0):], '}')
		if i < 0 || j < 0 {
			b.WriteString(tmpl)
			return b.String(), ok
		}
		b.WriteString(tmpl[:i])
		name := tmpl[i+1 : i+j]
		switch fig, known := figureNamed(name, d); {
		case name == "share":
			if !signed {
				b.WriteString(" (" + pct(f[d.Figure], f[fCalls]) + ")")
			}
		case known:
			b.WriteString(figText(fig, f[fig], signed))
		default:
			b.WriteString(tmpl[i : i+j+1])
			ok = false
		}
		tmpl = tmpl[i+j+1:]
	}
}

// figureNamed is the figure of a wording's placeholder: {cost}, the
// ranking's; {NAME}, the figure of that Name.
func figureNamed(name string, d *ranking.Ranking) (ranking.Figure, bool) {
	if name == "cost" {
		return d.Figure, true
	}
	for f := range ranking.NumFigures {
		if f.Name() == name {
			return f, true
		}
	}
	return 0, false
}

// figText is figure fig's value v as the text shows it.
func figText(fig ranking.Figure, v int64, signed bool) string {
	if fig.Measure() == ranking.Bytes {
		return bytesOf(v, signed)
	}
	return num(v, signed)
}

// otherPlaces is the cost of the stacks not listed under an entry.
func otherPlaces(mt metric, f figs, n int, signed bool) string {
	return "  and " + figText(mt.desc().Figure, f[mt.fig()], signed) + " from " + strconv.Itoa(n) + " other places"
}

// resolve looks up a frame's source line once.
func (r *report) resolve(f *frameInfo) {
	if f.looked {
		return
	}
	f.looked = true
	if r.cache == nil || f.mixed || f.module == "" || strings.HasPrefix(f.module, "[") {
		return
	}
	file, line, err := r.cache.SourceLine(f.module, f.symbol, f.offset)
	if err == nil && file != "" {
		f.file, f.line = file, line
	}
}

func (r *report) writeFrame(w io.Writer, f *frameInfo, indent string) {
	r.writeFrameNamed(w, f, indent, r.fname(f.name))
}

// writeFrameNamed writes frame f with name as its (physical) function's.
func (r *report) writeFrameNamed(w io.Writer, f *frameInfo, indent, name string) {
	r.resolve(f)
	if len(f.inl) > 1 {
		// heaptrack's layout: the innermost inlined function with its
		// line and module, then the functions it was inlined into, the
		// physical one last, each at the line of its call.
		for j, c := range f.inl {
			n := r.fname(c.name)
			if j == len(f.inl)-1 {
				n = name
			}
			io.WriteString(w, indent+n+"\n")
			if c.file != "" {
				io.WriteString(w, indent+"  at "+c.file+":"+strconv.Itoa(c.line)+"\n")
			}
			if j == 0 && f.module != "" {
				io.WriteString(w, indent+"  in "+f.module+"\n")
			}
		}
		return
	}
	io.WriteString(w, indent+name+"\n")
	if f.file != "" {
		io.WriteString(w, indent+"  at "+f.file+":"+strconv.Itoa(f.line)+"\n")
	}
	if f.module != "" {
		io.WriteString(w, indent+"  in "+f.module+"\n")
	}
}

// noStackHint follows the name of allocations that have no call stack.
func (r *report) noStackHint() string {
	for _, l := range append(append([]*loaded(nil), r.logs...), r.bases...) {
		if l.m.Counts.Frames > 0 {
			return " (no call stack recorded)"
		}
	}
	return " (the log has no call stacks: trace with --stack-depth N)"
}

// writeRanking writes one ranking of es in heaptrack_print's merged form:
// the function that called the allocation function, then its call stacks.
func (r *report) writeRanking(w io.Writer, es iter.Seq[entry], mt metric, signed bool, live analysis.Live) {
	// A process still running when the log ended was let go, not ended,
	// or the log stops before it did: its blocks are alive, and calling
	// them leaks would be wrong.
	lt, still := liveTexts[live]
	still = still && mt.desc().Figure.Class() == ranking.Leaked
	line := func(s string) string {
		if still {
			return strings.Replace(s, " leaked over ", " "+lt.word+" over ", 1)
		}
		return s
	}
	if still {
		io.WriteString(w, lt.title)
	} else {
		io.WriteString(w, mt.desc().Title)
	}
	if signed {
		io.WriteString(w, " (LOG minus BASE)")
	}
	io.WriteString(w, "\n")
	gs := groups(r.t, es, mt, r.opt.limit)
	if len(gs) == 0 {
		io.WriteString(w, "(none)\n")
	}
	heads := r.groupHeads(gs)
	for i, g := range gs {
		io.WriteString(w, line(entryLine(mt, g.head(mt), signed, false))+"\n")
		first := r.t.sites[g.sites[0].site]
		if len(first.fr()) == 0 {
			io.WriteString(w, first.label()+r.noStackHint()+"\n\n")
			continue
		}
		r.writeFrameNamed(w, &first.frames[0], "", heads[i])
		// Call sites: the entry is its first frame, so its stacks go on
		// from the caller, as heaptrack_print's do.
		from := 0
		if !r.t.merge {
			from = 1
		}
		shown := min(len(g.sites), r.opt.subLimit)
		for _, e := range g.sites[:shown] {
			io.WriteString(w, line(entryLine(mt, e.f, signed, true))+"\n")
			s := r.t.sites[e.site]
			n, cut := r.shown(s.fr())
			for k := from; k < n; k++ {
				r.writeFrame(w, &s.frames[k], "    ")
			}
			// A stack that reached main lacks none of the program's
			// frames, wherever the tracer stopped in start-up code.
			if mk := s.truncMark(); mk != "" && !cut {
				io.WriteString(w, "    … "+mk+"\n")
			}
		}
		if rest := len(g.sites) - shown; rest > 0 {
			var f figs
			for _, e := range g.sites[shown:] {
				f.add(e.f)
			}
			io.WriteString(w, otherPlaces(mt, f, rest, signed)+"\n")
		}
		io.WriteString(w, "\n")
	}
	io.WriteString(w, "\n")
}

func rate(n int64, us uint64) string {
	if us == 0 {
		return ""
	}
	return " (" + strconv.FormatInt(int64(float64(n)/(float64(us)/1e6)), 10) + "/s)"
}

// writeSummary writes heaptrack_print's summary block for s, and what the
// reader could not use.
func (r *report) writeSummary(w io.Writer, s *section) {
	t := &s.total
	if s.end != "" {
		fmt.Fprintf(w, "run: %s\n", s.end)
	}
	fmt.Fprintf(w, "total runtime: %s.\n", secs(s.runtime))
	fmt.Fprintf(w, "calls to allocation functions: %d%s\n", t.Calls, rate(t.Calls, s.runtime))
	fmt.Fprintf(w, "temporary memory allocations: %d%s\n", t.Temporary, rate(t.Temporary, s.runtime))
	fmt.Fprintf(w, "peak heap memory consumption: %s", units.Bytes(t.PeakBytes))
	switch {
	case s.procs > 1:
		fmt.Fprintf(w, " (the sum of %d processes' own peaks)\n", s.procs)
	case t.PeakBytes > 0:
		fmt.Fprintf(w, " after %s\n", secs(s.peakTS))
	default:
		fmt.Fprintln(w)
	}
	if l := peakSplitLine(s); l != "" {
		fmt.Fprintln(w, l)
	}
	if lt, ok := liveTexts[s.live]; ok {
		fmt.Fprintf(w, "%s: %s (%d blocks; %s)\n", lt.summary, units.Bytes(t.LeakedBytes), t.Leaks, lt.why)
	} else {
		fmt.Fprintf(w, "total memory leaked: %s (%d leaks)\n", units.Bytes(t.LeakedBytes), t.Leaks)
	}
	if l := leakSplitLine(s); l != "" {
		fmt.Fprintln(w, l)
	}
	if t.Unknown > 0 {
		fmt.Fprintln(w, unknownLine(t))
	}
	if sp := r.supd[s]; sp.leaks > 0 {
		fmt.Fprintln(w, analysis.SuppressedLine(sp.leaks, sp.bytes))
	}
	if l := fdSummaryLine(s); l != "" {
		fmt.Fprintln(w, l)
	}
	r.writeNotes(w, s)
}

// unknownLine counts the blocks whose frees were lost (analysis.StatusUnknown).
func unknownLine(t *analysis.CostFigures) string {
	return fmt.Sprintf("%d blocks, %s: unknown (records lost): not freed in the log, but their memory was allocated again, so their frees were among the lost records; not counted as leaks",
		t.Unknown, units.Bytes(t.UnknownBytes))
}

// truncLine says how many call stacks were cut short, and why.
func truncLine(ts []analysis.Truncation) string {
	stacks, events := analysis.TruncatedTotal(ts)
	var parts []string
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("%s: %d stacks, %d events", t.Reason, t.Stacks, t.Events))
	}
	return fmt.Sprintf("truncated call stacks: %d stacks in %d events (%s); marked [truncated: REASON] in the rankings", stacks, events, strings.Join(parts, "; "))
}

func (r *report) writeNotes(w io.Writer, s *section) {
	if s.lost > 0 {
		fmt.Fprintf(w, "LOST EVENTS: %d (the tracer could not keep up: every figure above misses them)\n", s.lost)
	}
	if lost := s.logLost(); lost > 0 && s.total.Leaks > 0 {
		fmt.Fprintf(w, "leaks may be overstated: a leak above may be a block whose free was among the %d lost records\n", lost)
	}
	if len(s.truncs) > 0 {
		fmt.Fprintln(w, truncLine(s.truncs))
	}
	for _, u := range s.untraced {
		fmt.Fprintln(w, u)
	}
	if s.skippedFrames > 0 {
		fmt.Fprintf(w, "frame lines skipped: %d (more than %d after one event, more than any tracer writes)\n", s.skippedFrames, logfmt.MaxFrames)
	}
	for _, st := range s.stopped {
		fmt.Fprintf(w, "READ STOPPED: %s; the report covers what was read before\n", st)
	}
	if len(s.stopped) == 0 && s.cutLogs > 0 {
		fmt.Fprintln(w, "the log ends without memtrace's summary line (memtrace was killed, or the log is still being written): the report covers what it holds")
	}
	if s.garbage > 0 {
		fmt.Fprintf(w, "unreadable lines skipped: %d\n", s.garbage)
	}
	if s.unmatched > 0 {
		fmt.Fprintf(w, "frees of blocks not seen allocated (made before tracing started, or lost): %d\n", s.unmatched)
	}
	if s.total.Calls == 0 && s.log != nil && (!s.fdOnly || s.lines > 0) {
		fmt.Fprintln(w, analysis.EmptyLogHint(s.log.name, s.lines, s.events))
	}
}

func (r *report) writeSection(w io.Writer, s *section) {
	es := sectionEntries(s)
	for mt := range numMetrics() {
		if r.opt.show[mt] {
			r.writeRanking(w, es, mt, false, s.live)
		}
	}
	r.writeFDLeaks(w, s)
	r.writeSummary(w, s)
}

// exeLine names the real file of a section's process when the header
// gives it (exe=: the process was started by another name, through a
// link): the file the stacks' "in FILE" lines name, as perf names a DSO
// and heaptrack a module; the title and command keep the name it was
// started by.
func exeLine(s *section) string {
	if s == nil || s.log == nil {
		return ""
	}
	h := &s.log.m.Header
	if h.Exe == "" || s.pid != h.PID {
		return ""
	}
	return fmt.Sprintf("program file: %s (the file stacks name; started as %s)\n", h.Exe, s.comm)
}

// The legends of peakLegend, for one process and for several.
const (
	peakLegendOne = "peak figures: the peak is the most bytes the process had live at once; " +
		"a stack's peak consumption is its bytes live at that moment (as heaptrack_print counts it), not its own maximum\n"
	peakLegendMulti = "peak figures: a process's peak is the most bytes it had live at once, a merged section's the sum of its processes' own; " +
		"a stack's peak consumption is its bytes live at its process's peak (as heaptrack_print counts it), not its own maximum\n"
)

// peakLegend says which peak each peak figure of the text is: the
// summary's is the process's maximum, an entry's what its stacks held then
// (heaptrack_print's too: its second pass copies each stack's live bytes
// when the total reaches its peak), not the stack's own maximum, which a
// reader could take it for. "" when no ranking with those figures is shown.
func (r *report) peakLegend() string {
	if !r.opt.showsPeakFigures() {
		return ""
	}
	if r.multi() || r.all.procs > 1 || (r.base != nil && r.base.procs > 1) {
		return peakLegendMulti
	}
	return peakLegendOne
}

func (r *report) writeText(w io.Writer) error {
	if r.base != nil {
		r.writeDiff(w)
	} else if r.multi() {
		if l := r.peakLegend(); l != "" {
			fmt.Fprintln(w, l)
		}
		for _, s := range r.secs {
			fmt.Fprintf(w, "========== %s ==========\n", strings.ToUpper(s.title))
			if s.cmd != "" {
				fmt.Fprintf(w, "command: %s\n", s.cmd)
			}
			fmt.Fprint(w, exeLine(s))
			fmt.Fprintln(w)
			r.writeSection(w, s)
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "========== %s ==========\n\n", strings.ToUpper(r.all.title))
		r.writeSection(w, r.all)
	} else {
		s := r.all
		fmt.Fprintf(w, "memtrace report of %s\n", s.title)
		if s.cmd != "" {
			fmt.Fprintf(w, "command: %s\n", s.cmd)
		}
		if len(r.secs) == 1 {
			fmt.Fprint(w, exeLine(r.secs[0]))
		}
		fmt.Fprint(w, r.peakLegend())
		fmt.Fprintln(w)
		r.writeSection(w, s)
	}
	if r.opt.printSupps {
		r.writeSuppressions(w)
	}
	return nil
}

func (r *report) writeSuppressions(w io.Writer) {
	fmt.Fprintln(w, "\nSUPPRESSIONS")
	if len(r.sups) == 0 {
		fmt.Fprintln(w, "(none: --suppressions FILE adds some; the built-in ones are off)")
		return
	}
	var n int64
	var b uint64
	for _, sp := range r.sups {
		where := "built-in: " + sp.Why
		if sp.File != "" {
			where = fmt.Sprintf("%s:%d", sp.File, sp.Line)
		}
		fmt.Fprintf(w, "%s  (%s) matched %d leaks, %s, in %d call stacks\n", sp.Text(), where, sp.leaks, units.Bytes(sp.bytes), sp.sites)
		n += sp.leaks
		b += sp.bytes
	}
	fmt.Fprintf(w, "suppressed in total: %s\n", analysis.SuppressedFigure(n, b))
}

// writeDiff writes every ranking as LOG minus BASE, and the summary with
// both figures and their difference.
func (r *report) writeDiff(w io.Writer) {
	fmt.Fprintf(w, "memtrace report: %s compared with %s\n%s\n", logNames(r.logs), logNames(r.bases), r.peakLegend())
	es := slices.Values(diffEntries(r.all, r.base))
	for mt := range numMetrics() {
		if r.opt.show[mt] {
			r.writeRanking(w, es, mt, true, mergeLive(r.all.live, r.base.live))
		}
	}
	a, b := &r.all.total, &r.base.total
	fmt.Fprintf(w, "total runtime: %s (base %s).\n", secs(r.all.runtime), secs(r.base.runtime))
	line := func(name string, after, before int64, bytes bool) {
		f := func(v int64, signed bool) string { return num(v, signed) }
		if bytes {
			f = bytesOf
		}
		fmt.Fprintf(w, "%s: %s (base %s, %s)\n", name, f(after, false), f(before, false), f(after-before, true))
	}
	line("calls to allocation functions", a.Calls, b.Calls, false)
	line("temporary memory allocations", a.Temporary, b.Temporary, false)
	line("peak heap memory consumption", int64(a.PeakBytes), int64(b.PeakBytes), true)
	line("total memory leaked", int64(a.LeakedBytes), int64(b.LeakedBytes), true)
	line("leaks", a.Leaks, b.Leaks, false)
	r.writeNotes(w, r.all)
	if r.base.lost > 0 {
		fmt.Fprintf(w, "LOST EVENTS in the base: %d\n", r.base.lost)
	}
}

func logNames(ls []*loaded) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.name)
	}
	return strings.Join(s, ", ")
}
