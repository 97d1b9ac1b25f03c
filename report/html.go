package report

import (
	"cmp"
	_ "embed"
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/ranking"
	"github.com/memtrace/memtrace/internal/units"
	"github.com/memtrace/memtrace/logfmt"
)

// The HTML report is one file with no reference to anything outside it:
// the summary, charts of live bytes over time (in total and for the top
// call sites), the size histogram, a flame graph per cost (the --cost one
// shown first), top-down and bottom-up call trees, and the rankings. The
// charts and flame graphs are SVG drawn here (html_charts.go, html_trees.go);
// a few lines of script switch flame graphs, zoom into a frame on click,
// fit the frames' labels and search the trees.

//go:embed report.css
var reportCSS string

//go:embed report.js
var reportJS string

var esc = html.EscapeString

const (
	chartW, chartH     = 960, 280
	chartL, chartR     = 70, 20
	chartT, chartB     = 16, 36
	chartSamples       = 480
	flameW             = 1200
	flameRow           = 17
	flameMinFrac       = 0.0005 // frames narrower than this share of the root are left out
	flameCharPx        = 6.6    // width of one character of the labels (11px monospace)
	flameMaxDepthShown = 256
)

// costTitle is the title of --cost name (ranking.FlameCosts), in the
// report's words for a run let go running: its live blocks are still
// allocated at detach, not leaked.
func (r *htmlPage) costTitle(name string) string {
	for _, c := range ranking.FlameCosts {
		if c.Name != name {
			continue
		}
		if lt, ok := liveTexts[r.all.live]; ok && c.Figure.Class() == ranking.Leaked {
			return "bytes " + lt.summary
		}
		return c.Title
	}
	return ""
}

// leakedWord is the rankings' and trees' "leaked" column, "still
// allocated" for a run let go running.
func (r *htmlPage) leakedWord() string {
	if lt, ok := liveTexts[r.all.live]; ok {
		return lt.word
	}
	return "leaked"
}

// htmlPage is the report while its page is written, with what the page
// looks up once per site.
type htmlPage struct {
	*report
	paths, funcs map[int32][]string // site id → htmlPath, htmlFuncs
}

func (r *report) writeHTML(w io.Writer) error {
	return (&htmlPage{report: r}).write(w)
}

func (r *htmlPage) write(w io.Writer) error {
	title := "memtrace report: " + logNames(r.logs)
	fmt.Fprintf(w, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<style>\n%s</style>\n</head>\n<body>\n", esc(title), reportCSS)
	fmt.Fprintf(w, "<h1>memtrace report</h1>\n<p class=\"sub\">%s", esc(logNames(r.logs)))
	if r.all.cmd != "" {
		fmt.Fprintf(w, " &middot; <code>%s</code>", esc(r.all.cmd))
	}
	fmt.Fprintln(w, "</p>")
	r.htmlSummary(w)
	r.htmlChart(w)
	r.htmlSiteChart(w)
	r.htmlCountCharts(w)
	r.htmlHistogram(w)
	r.htmlFlames(w)
	r.htmlTrees(w)
	r.htmlCallerCallee(w)
	r.htmlRankings(w)
	r.htmlFDLeaks(w)
	if r.base != nil {
		r.htmlDiff(w)
	}
	fmt.Fprintf(w, "<script>\n%s</script>\n</body>\n</html>\n", reportJS)
	return nil
}

func (r *htmlPage) htmlSummary(w io.Writer) {
	s := r.all
	t := &s.total
	fmt.Fprintln(w, `<section id="summary"><h2>Summary</h2><table class="kv">`)
	row := func(k, v string) { fmt.Fprintf(w, "<tr><th>%s</th><td>%s</td></tr>\n", esc(k), v) }
	if s.end != "" {
		row("run", esc(s.end))
	}
	row("total runtime", esc(secs(s.runtime)))
	row("calls to allocation functions", esc(strconv.FormatInt(t.Calls, 10)+rate(t.Calls, s.runtime)))
	row("temporary memory allocations", esc(strconv.FormatInt(t.Temporary, 10)+rate(t.Temporary, s.runtime)))
	peak := units.Bytes(t.PeakBytes)
	if s.procs > 1 {
		peak += " (the sum of " + strconv.Itoa(s.procs) + " processes' own peaks)"
	} else if t.PeakBytes > 0 {
		peak += " after " + secs(s.peakTS)
	}
	row("peak heap memory consumption", esc(peak))
	if lt, ok := liveTexts[s.live]; ok {
		row(lt.summary, esc(fmt.Sprintf("%s (%d blocks; %s)", units.Bytes(t.LeakedBytes), t.Leaks, lt.why)))
	} else {
		row("total memory leaked", esc(fmt.Sprintf("%s (%d leaks)", units.Bytes(t.LeakedBytes), t.Leaks)))
	}
	if t.Unknown > 0 {
		row("unknown (records lost)", `<span class="warn">`+esc(fmt.Sprintf("%d blocks, %s: not freed in the log, but their memory was allocated again, so their frees were lost; not counted as leaks", t.Unknown, units.Bytes(t.UnknownBytes)))+"</span>")
	}
	if lost := s.logLost(); lost > 0 && t.Leaks > 0 {
		row("leaks may be overstated", `<span class="warn">`+esc(fmt.Sprintf("a leak may be a block whose free was among the %d lost records", lost))+"</span>")
	}
	if sp := r.supd[s]; sp.leaks > 0 {
		row("suppressed leaks", esc(analysis.SuppressedFigure(sp.leaks, sp.bytes)+"; --print-suppressions lists them, --disable-builtin-suppressions counts the built-in ones as leaks"))
	}
	if s.lost > 0 {
		row("LOST EVENTS", `<span class="warn">`+esc(fmt.Sprintf("%d: the tracer could not keep up, every figure misses them", s.lost))+"</span>")
	}
	if s.garbage > 0 {
		row("unreadable lines skipped", esc(strconv.FormatInt(s.garbage, 10)))
	}
	if s.unmatched > 0 {
		row("frees of blocks not seen allocated", esc(strconv.FormatInt(s.unmatched, 10)))
	}
	if len(s.truncs) > 0 {
		stacks, events := analysis.TruncatedTotal(s.truncs)
		var b strings.Builder
		fmt.Fprintf(&b, "%d stacks in %d events", stacks, events)
		for _, tr := range s.truncs {
			fmt.Fprintf(&b, "; %s: %d stacks, %d events", tr.Reason, tr.Stacks, tr.Events)
		}
		row("truncated call stacks", esc(b.String()))
	}
	for _, u := range s.untraced {
		row("untraced processes", `<span class="warn">`+esc(u)+"</span>")
	}
	if s.skippedFrames > 0 {
		row("frame lines skipped", esc(fmt.Sprintf("%d (more than %d after one event)", s.skippedFrames, logfmt.MaxFrames)))
	}
	if s.fdSeen {
		row("file descriptors leaked", esc(strconv.Itoa(len(s.fdLeaks))))
	}
	if t.Calls == 0 {
		row("note", `<span class="warn">no allocation in these logs</span>`)
	}
	fmt.Fprintln(w, "</table>")
	if r.multi() {
		fmt.Fprintln(w, `<table class="grid"><tr><th>process</th><th>run</th><th>calls</th><th>temporary</th><th>peak</th><th>leaked</th><th>leaks</th><th>fd leaks</th><th>runtime</th></tr>`)
		for _, p := range r.secs {
			leaked := units.Bytes(p.total.LeakedBytes)
			if lt, ok := liveTexts[p.live]; ok && p.total.Leaks > 0 {
				leaked += " (" + lt.word + ")"
			}
			fmt.Fprintf(w, "<tr><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%s</td></tr>\n", esc(p.title), esc(p.end), p.total.Calls, p.total.Temporary,
				units.Bytes(p.total.PeakBytes), esc(leaked), p.total.Leaks, len(p.fdLeaks), secs(p.runtime))
		}
		fmt.Fprintln(w, "</table>")
	}
	fmt.Fprintln(w, "</section>")
}

var palette = []string{"#d9480f", "#1c7ed6", "#2f9e44", "#ae3ec9", "#f59f00", "#0ca678", "#e64980", "#5c7cfa"}

func (r *htmlPage) htmlChart(w io.Writer) {
	fmt.Fprintln(w, `<section id="timeline"><h2>Live heap over time</h2>`)
	secs, end := r.timed()
	if len(secs) == 0 || end == 0 {
		fmt.Fprintln(w, "<p>No allocation to draw.</p></section>")
		return
	}
	times := make([]uint64, chartSamples)
	for k := range times {
		times[k] = spread(end, k, chartSamples-1)
	}
	series := make([][]uint64, len(secs))
	var top uint64
	for i, s := range secs {
		series[i] = s.log.m.LiveSeries(s.proc, times)
		for _, v := range series[i] {
			top = max(top, v)
		}
		top = max(top, s.total.PeakBytes)
	}
	f := writeAxes(w, "live heap bytes over time", top, end)
	for i, s := range secs {
		col := palette[i%len(palette)]
		fmt.Fprintf(w, `<polyline class="live" fill="none" stroke="%s" stroke-width="1.6" points="%s"><title>%s</title></polyline>`+"\n", col, f.points(times, series[i]), esc(s.title))
		if s.total.PeakBytes > 0 {
			px, py := f.x(s.peakTS), f.y(s.total.PeakBytes)
			fmt.Fprintf(w, `<circle class="peak" cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s</title></circle>`+"\n", px, py, col,
				esc(fmt.Sprintf("peak of %s: %s after %s", s.title, units.Bytes(s.total.PeakBytes), secs2(s.peakTS))))
			anchor := "start"
			if px > chartW/2 {
				anchor = "end"
				px -= 8
			} else {
				px += 8
			}
			fmt.Fprintf(w, `<text class="lbl" x="%.1f" y="%.1f" text-anchor="%s">peak %s</text>`+"\n", px, max(py, chartT+10), anchor, esc(units.Bytes(s.total.PeakBytes)))
		}
	}
	fmt.Fprintln(w, "</svg>")
	if len(secs) > 1 {
		fmt.Fprint(w, `<p class="legend">`)
		for i, s := range secs {
			fmt.Fprintf(w, `<span><i style="background:%s"></i>%s</span> `, palette[i%len(palette)], esc(s.title))
		}
		fmt.Fprintln(w, "</p>")
	}
	fmt.Fprintln(w, "</section>")
}

func secs2(us uint64) string { return strconv.FormatFloat(float64(us)/1e6, 'f', 3, 64) + "s" }

// flameNode is a frame of the flame graph: its callees are its children.
type flameNode struct {
	name  string
	value int64
	kids  []*flameNode
	idx   map[string]int
}

func (n *flameNode) kid(name string) *flameNode {
	if n.idx == nil {
		n.idx = map[string]int{}
	}
	if i, ok := n.idx[name]; ok {
		return n.kids[i]
	}
	k := &flameNode{name: name}
	n.idx[name] = len(n.kids)
	n.kids = append(n.kids, k)
	return k
}

func (r *htmlPage) flameTree(fig int) *flameNode {
	root := &flameNode{name: "all"}
	secs := []*section{r.all}
	if r.multi() {
		secs = r.secs
	}
	for _, s := range secs {
		top := root
		if r.multi() {
			top = root.kid(s.title)
		}
		for id, c := range s.bySite {
			v := figsOf(c)[fig]
			if v <= 0 {
				continue
			}
			root.value += v
			n := top
			if n != root {
				n.value += v
			}
			for _, f := range r.htmlPath(id) {
				n = n.kid(f)
				n.value += v
			}
		}
	}
	return root
}

func hue(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	// Warm colours, as flamegraph.pl's default palette.
	return fmt.Sprintf("hsl(%d,%d%%,%d%%)", 5+v%45, 70+(v>>8)%20, 55+(v>>16)%10)
}

// fit cuts a label to the width of its frame, with an ellipsis; the
// script fits it again to the width the browser measures, and the frame's
// title holds the full name.
func fit(name string, px float64) string {
	n := int((px - 6) / flameCharPx)
	if n < 2 {
		return ""
	}
	rs := []rune(name)
	if len(rs) <= n {
		return name
	}
	return string(rs[:n-1]) + "…"
}

func (r *htmlPage) writeFlame(w io.Writer, name string, fig int, visible bool) {
	root := r.flameTree(fig)
	style := ""
	if !visible {
		style = ` style="display:none"`
	}
	fmt.Fprintf(w, `<div class="flame" id="flame-%s"%s>`+"\n", name, style)
	if root.value == 0 {
		fmt.Fprintf(w, "<p>Nothing to draw: no %s.</p></div>\n", esc(r.costTitle(name)))
		return
	}
	// Lay out: x and width as fractions of the root, depth from the root.
	type box struct {
		n    *flameNode
		x, w float64
		d    int
	}
	var boxes []box
	depth := 0
	var walk func(n *flameNode, x float64, d int)
	walk = func(n *flameNode, x float64, d int) {
		wf := float64(n.value) / float64(root.value)
		if (wf < flameMinFrac && d > 0) || d > flameMaxDepthShown {
			return
		}
		boxes = append(boxes, box{n, x, wf, d})
		depth = max(depth, d)
		kids := slices.Clone(n.kids)
		slices.SortFunc(kids, func(a, b *flameNode) int { return cmp.Compare(a.name, b.name) })
		for _, k := range kids {
			walk(k, x, d+1)
			x += float64(k.value) / float64(root.value)
		}
	}
	walk(root, 0, 0)
	h := (depth + 1) * flameRow
	unit := costUnit(fig)
	fmt.Fprintf(w, `<svg class="fg" data-w="%d" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="flame graph of %s">`+"\n", flameW, flameW, h, flameW, h, esc(r.costTitle(name)))
	for _, b := range boxes {
		px := b.x * flameW
		pw := b.w * flameW
		y := h - (b.d+1)*flameRow
		label := b.n.name
		val := strconv.FormatInt(b.n.value, 10) + " " + unit
		if unit == "bytes" {
			val = units.Signed(b.n.value)
		}
		fill := hue(label)
		if b.d == 0 {
			fill = "#b8b8b8"
		}
		fmt.Fprintf(w, `<g class="f" data-x="%.6f" data-w="%.6f" data-d="%d" data-n="%s"><title>%s (%s, %s)</title><rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" rx="1"/><text x="%.2f" y="%d">%s</text></g>`+"\n",
			b.x, b.w, b.d, esc(label), esc(label), esc(val), esc(pct(b.n.value, root.value)), px, y, max(pw-0.5, 0.1), flameRow-1, fill, px+3, y+12, esc(fit(label, pw)))
	}
	fmt.Fprintln(w, "</svg></div>")
}

func (r *htmlPage) htmlFlames(w io.Writer) {
	fmt.Fprintln(w, `<section id="flamegraph"><h2>Flame graph</h2><p class="tabs">`)
	for _, fc := range ranking.FlameCosts {
		c, cls := fc.Name, ""
		if c == r.opt.cost {
			cls = ` class="on"`
		}
		fmt.Fprintf(w, `<button type="button" data-cost="%s"%s>%s</button>`+"\n", c, cls, esc(r.costTitle(c)))
	}
	fmt.Fprintln(w, `</p><p class="hint">Callers below, callees above; the width is the cost. Click a frame to zoom, the bottom bar to zoom out.</p>`)
	for _, c := range ranking.FlameCosts {
		r.writeFlame(w, c.Name, int(c.Figure), c.Name == r.opt.cost)
	}
	fmt.Fprintln(w, "</section>")
}

// htmlStack writes a site's stack, folded under label (its name among
// the table's rows, siteLabels).
func (r *htmlPage) htmlStack(w io.Writer, st *site, label string) {
	if len(st.fr()) == 0 {
		fmt.Fprintf(w, "<code>%s</code>%s", esc(st.label()), esc(r.noStackHint()))
		return
	}
	mark := ""
	if mk := st.truncMark(); mk != "" {
		mark = ` <span class="trunc">` + esc(mk) + "</span>"
	}
	fmt.Fprintf(w, "<details><summary><code>%s</code>%s</summary><ol class=\"stack\">", esc(label), mark)
	for k := range st.frames {
		hs := r.expand(&st.frames[k])
		for j, h := range hs {
			fmt.Fprintf(w, "<li><code>%s</code>", esc(h.Func+h.Off))
			if j < len(hs)-1 {
				fmt.Fprint(w, ` <span class="inl">inlined</span>`)
			}
			if h.File != "" {
				fmt.Fprintf(w, " <span class=\"at\" title=\"%s\">at %s</span>", esc(h.File), esc(h.At()))
			}
			if h.module != "" && j == 0 {
				fmt.Fprintf(w, " <span class=\"in\">in %s</span>", esc(h.module))
			}
			fmt.Fprint(w, "</li>")
		}
	}
	if mark != "" {
		fmt.Fprintf(w, "<li class=\"trunc\">…%s</li>", mark)
	}
	fmt.Fprint(w, "</ol></details>")
}

// htmlStillTitle replaces "Memory leaks" for a run let go running.
const htmlStillTitle = "Still allocated at detach (the process had not exited: blocks live when tracing stopped, not leaks)"

// htmlCutTitle replaces "Memory leaks" for a log that ends before its
// process did.
const htmlCutTitle = "Live at the cut (the log ends before the process did: blocks live where it stops, not leaks)"

func (r *htmlPage) htmlTable(w io.Writer, es []entry, mt metric, signed bool) {
	list := rank(r.t, es, mt, r.opt.limit)
	if len(list) == 0 {
		fmt.Fprintln(w, "<p>None.</p>")
		return
	}
	sts := make([]*site, len(list))
	for i, e := range list {
		sts[i] = r.t.sites[e.site]
	}
	labels := r.htmlSiteLabels(sts)
	// A ranking by a figure not among every entry's has a column of its
	// own.
	d := mt.desc()
	own := ""
	if !d.Figure.Entry() {
		own = "<th>" + esc(d.Column) + "</th>"
	}
	fmt.Fprintf(w, `<table class="grid rank"><tr><th>#</th><th>calls</th><th>allocated</th><th>temporary</th><th>peak</th><th>%s</th>%s<th>call stack (innermost first)</th></tr>`+"\n", esc(r.leakedWord()), own)
	for i, e := range list {
		cell := func(k int, v string) string {
			if k == mt.fig() {
				return "<td class=\"key\">" + v + "</td>"
			}
			return "<td>" + v + "</td>"
		}
		fmt.Fprintf(w, "<tr><td>%d</td>%s%s%s%s%s", i+1,
			cell(fCalls, num(e.f[fCalls], signed)), cell(fBytes, bytesOf(e.f[fBytes], signed)), cell(fTemp, num(e.f[fTemp], signed)),
			cell(fPeak, bytesOf(e.f[fPeak], signed)), cell(fLeaked, bytesOf(e.f[fLeaked], signed)+" ("+num(e.f[fLeaks], signed)+")"))
		if own != "" {
			fmt.Fprint(w, cell(mt.fig(), figText(d.Figure, e.f[mt.fig()], signed)))
		}
		fmt.Fprint(w, "<td>")
		r.htmlStack(w, sts[i], labels[i])
		fmt.Fprintln(w, "</td></tr>")
	}
	fmt.Fprintln(w, "</table>")
}

func (r *htmlPage) htmlRankings(w io.Writer) {
	fmt.Fprintln(w, `<section id="rankings"><h2>Rankings by call stack</h2>`)
	es := entriesOf(r.all)
	for mt := range numMetrics() {
		if r.opt.show[mt] {
			title := mt.desc().HTMLTitle
			if lt, ok := liveTexts[r.all.live]; ok && mt.desc().Figure.Class() == ranking.Leaked {
				title = lt.htmlTitle
			}
			fmt.Fprintf(w, "<h3 id=\"rank-%d\">%s</h3>\n", mt, esc(title))
			r.htmlTable(w, es, mt, false)
		}
	}
	fmt.Fprintln(w, "</section>")
}

func (r *htmlPage) htmlDiff(w io.Writer) {
	fmt.Fprintf(w, "<section id=\"diff\"><h2>Compared with %s</h2>\n", esc(logNames(r.bases)))
	a, b := &r.all.total, &r.base.total
	fmt.Fprintln(w, `<table class="grid"><tr><th></th><th>these logs</th><th>base</th><th>difference</th></tr>`)
	row := func(k string, x, y int64, bytes bool) {
		f := num
		if bytes {
			f = bytesOf
		}
		fmt.Fprintf(w, "<tr><th>%s</th><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(k), f(x, false), f(y, false), f(x-y, true))
	}
	row("calls to allocation functions", a.Calls, b.Calls, false)
	row("temporary memory allocations", a.Temporary, b.Temporary, false)
	row("peak heap memory consumption", int64(a.PeakBytes), int64(b.PeakBytes), true)
	row("total memory leaked", int64(a.LeakedBytes), int64(b.LeakedBytes), true)
	fmt.Fprintln(w, "</table>")
	es := diffEntries(r.all, r.base)
	for mt := range numMetrics() {
		if r.opt.show[mt] {
			fmt.Fprintf(w, "<h3>%s: these logs minus base</h3>\n", esc(mt.desc().HTMLTitle))
			r.htmlTable(w, es, mt, true)
		}
	}
	fmt.Fprintln(w, "</section>")
}
