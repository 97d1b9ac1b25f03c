package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/sizehist"
	"github.com/memtrace/memtrace/internal/units"
)

// The HTML report's charts: axes with round ticks, live bytes over time in
// total and for the top call sites, and the size histogram. The figures
// come from analysis (LiveSeries, LiveSeriesBy, SizeHistogram).

const (
	siteSeries = 8 // call sites drawn over time
	histH      = 260
)

// niceStep is the round step, 1, 2 or 5 × 10^k, that cuts span into at
// most n parts: ticks people read at a glance (200K, 400K), not a fifth of
// the maximum (483.44K, 966.88K).
func niceStep(span float64, n int) float64 {
	if span <= 0 || n <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw*(1-1e-12) {
			return m * p
		}
	}
	return 10 * p
}

// roundBytes writes a tick's byte count in the unit people read
// (internal/units: 1000-based, B K M G …) with only the digits it has:
// "0B", "500B", "1K", "1.2M"; the histogram's labels are written alike.
func roundBytes(v uint64) string { return sizehist.Round(v) }

// byteTicks are the round ticks from 0 to at least top, at most about n
// steps apart, and the axis's top (the last tick).
func byteTicks(top uint64, n int) (ticks []uint64, axisTop uint64) {
	step := uint64(max(niceStep(float64(max(top, 1)), n), 1))
	axisTop = (max(top, 1) + step - 1) / step * step
	for v := uint64(0); v <= axisTop; v += step {
		ticks = append(ticks, v)
		if v > axisTop-step {
			break // no wrap-around at the top of uint64
		}
	}
	return ticks, axisTop
}

// countTicks is byteTicks for counts: "0", "20", "40".
func countTicks(top int64, n int) ([]int64, int64) {
	step := int64(max(niceStep(float64(max(top, 1)), n), 1))
	axisTop := (max(top, 1) + step - 1) / step * step
	var ticks []int64
	for v := int64(0); v <= axisTop; v += step {
		ticks = append(ticks, v)
	}
	return ticks, axisTop
}

// timeTick is a tick of the time axis: at µs since tracing started, with
// its label in one unit for the axis (µs, ms or s), as many decimals as
// the step has.
type timeTick struct {
	at    uint64
	label string
}

func timeTicks(end uint64, n int) []timeTick {
	unit, per := "s", 1e6
	switch {
	case end < 2_000:
		unit, per = "µs", 1
	case end < 2_000_000:
		unit, per = "ms", 1e3
	}
	step := niceStep(float64(end)/per, n)
	dec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	var out []timeTick
	for k := 0; ; k++ {
		v := float64(k) * step
		at := uint64(math.Round(v * per))
		if at > end {
			break
		}
		out = append(out, timeTick{at, strconv.FormatFloat(v, 'f', dec, 64) + unit})
	}
	return out
}

// chartFrame is the plot area of a chart of bytes over time.
type chartFrame struct {
	end, top uint64
}

func (f chartFrame) x(t uint64) float64 {
	return chartL + float64(t)/float64(max(f.end, 1))*float64(chartW-chartL-chartR)
}

func (f chartFrame) y(v uint64) float64 {
	ph := float64(chartH - chartT - chartB)
	return chartT + ph - float64(v)/float64(max(f.top, 1))*ph
}

// writeAxes opens the chart's SVG and draws its grid and round ticks for
// bytes up to top over [0, end].
func writeAxes(w io.Writer, label string, top, end uint64) chartFrame {
	return writeAxesOf(w, label, top, end, roundBytes)
}

// countTick writes a tick of a count axis: "0", "2000", "1.5M".
func countTick(v uint64) string {
	if v < 1_000_000 {
		return strconv.FormatUint(v, 10)
	}
	return strings.TrimSuffix(roundBytes(v), "B")
}

// writeAxesOf is writeAxes with the y ticks written by tick.
func writeAxesOf(w io.Writer, label string, top, end uint64, tick func(uint64) string) chartFrame {
	ticks, axisTop := byteTicks(top, 5)
	f := chartFrame{end: end, top: axisTop}
	fmt.Fprintf(w, `<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`+"\n", chartW, chartH, chartW, chartH, esc(label))
	for _, v := range ticks {
		fmt.Fprintf(w, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/><text class="ax ytick" x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			chartL, chartW-chartR, f.y(v), f.y(v), chartL-6, f.y(v)+4, esc(tick(v)))
	}
	for _, t := range timeTicks(end, 6) {
		fmt.Fprintf(w, `<line class="tick" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><text class="ax xtick" x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
			f.x(t.at), f.x(t.at), f.y(0), f.y(0)+4, f.x(t.at), chartH-chartB+16, esc(t.label))
	}
	fmt.Fprintf(w, `<line class="axis" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`+"\n", chartL, chartW-chartR, f.y(0), f.y(0))
	fmt.Fprintf(w, `<text class="ax" x="%d" y="%d" text-anchor="middle">time since tracing started</text>`+"\n", chartL+(chartW-chartL-chartR)/2, chartH-4)
	return f
}

func (f chartFrame) points(times, vs []uint64) string {
	var b strings.Builder
	for k, v := range vs {
		fmt.Fprintf(&b, "%.1f,%.1f ", f.x(times[k]), f.y(v))
	}
	return b.String()
}

// topSites are the call sites the site chart draws: the largest at the
// peak, then (when fewer had bytes live there) the most bytes allocated.
func (r *htmlPage) topSites(n int) []int32 {
	type cand struct {
		id          int32
		peak, bytes int64
	}
	var cs []cand
	for id, c := range r.all.bySite {
		f := figsOf(c)
		if f[fBytes] > 0 {
			cs = append(cs, cand{id, f[fPeak], f[fBytes]})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		return cmp.Or(cmp.Compare(b.peak, a.peak), cmp.Compare(b.bytes, a.bytes), cmp.Compare(a.id, b.id))
	})
	var out []int32
	for _, c := range cs[:min(n, len(cs))] {
		out = append(out, c.id)
	}
	return out
}

// siteSeriesOf is the live bytes at times of each of sites, summed over
// the sections secs.
func (r *htmlPage) siteSeriesOf(secs []*section, sites []int32, times []uint64) [][]uint64 {
	cls := map[int32]int{}
	for k, id := range sites {
		cls[id] = k
	}
	out := make([][]uint64, len(sites))
	for k := range out {
		out[k] = make([]uint64, len(times))
	}
	for _, s := range secs {
		m := s.log.m
		byStack := make([]int32, m.NumStacks()) // class+2 per stack: 0 not looked up yet
		class := func(i uint32) int {
			st := m.Stack[i]
			if st != 0 && int(st) < len(byStack) && byStack[st] != 0 {
				return int(byStack[st]) - 2
			}
			c := -1
			if k, ok := cls[r.t.siteOfAlloc(m, s.log.sites, i)]; ok {
				c = k
			}
			if st != 0 && int(st) < len(byStack) {
				byStack[st] = int32(c + 2)
			}
			return c
		}
		for k, ser := range m.LiveSeriesBy(s.proc, times, len(sites), class) {
			for j, v := range ser {
				out[k][j] += v
			}
		}
	}
	return out
}

func (r *htmlPage) htmlSiteChart(w io.Writer) {
	secs, end := r.timed()
	sites := r.topSites(siteSeries)
	if len(secs) == 0 || end == 0 || len(sites) == 0 {
		return
	}
	fmt.Fprintf(w, "<section id=\"sites-over-time\"><h2>Live bytes over time by call site</h2>\n<p class=\"hint\">The %d call sites with the most bytes live at the peak (then the most allocated), each its own line; the total is the chart above.</p>\n", len(sites))
	times := make([]uint64, chartSamples)
	for k := range times {
		times[k] = spread(end, k, chartSamples-1)
	}
	series := r.siteSeriesOf(secs, sites, times)
	var top uint64
	for _, s := range series {
		top = max(top, slices.Max(s))
	}
	var sts []*site
	for _, id := range sites {
		sts = append(sts, r.t.sites[id])
	}
	labels := r.htmlSiteLabels(sts)
	f := writeAxes(w, "live bytes over time of the top call sites", top, end)
	for k := range sites {
		col := palette[k%len(palette)]
		fmt.Fprintf(w, `<polyline class="site" data-site="%d" data-max="%d" fill="none" stroke="%s" stroke-width="1.6" points="%s"><title>%s</title></polyline>`+"\n",
			k, slices.Max(series[k]), col, f.points(times, series[k]), esc(labels[k]))
	}
	fmt.Fprintln(w, "</svg>")
	fmt.Fprint(w, `<ol class="legend sites">`)
	for k, id := range sites {
		fmt.Fprintf(w, `<li data-site="%d"><i style="background:%s"></i><span class="at">max %s live</span> <code title="%s">%s</code></li>`, k, palette[k%len(palette)],
			esc(units.Bytes(slices.Max(series[k]))), esc(r.htmlCallers(r.t.sites[id])), esc(labels[k]))
	}
	fmt.Fprintln(w, "</ol></section>")
}

// sizeHistogram is the allocations of secs by size (internal/sizehist's
// buckets, every view's), from the first bucket used to the last.
func sizeHistogram(secs []*section) []analysis.Bucket {
	all := make([]analysis.Bucket, len(sizehist.Bounds))
	for k := range all {
		all[k].Max = sizehist.Bounds[k]
	}
	for _, s := range secs {
		m := s.log.m
		if m.SummaryOnly {
			continue
		}
		for i, sz := range m.Size {
			if s.proc >= 0 && m.Threads[m.Thread[i]].Proc != s.proc {
				continue
			}
			b := &all[sizehist.Index(sz)]
			b.Count++
			if b.Bytes > ^uint64(0)-sz {
				b.Bytes = ^uint64(0) // saturates, as the model's sums do
			} else {
				b.Bytes += sz
			}
		}
	}
	lo := slices.IndexFunc(all, func(b analysis.Bucket) bool { return b.Count > 0 })
	if lo < 0 {
		return nil
	}
	hi := len(all) - 1
	for all[hi].Count == 0 {
		hi--
	}
	return all[lo : hi+1]
}

// bucketLabel names a bucket by its bound: "≤50B", "≤2K"; ">5E" for the
// last, which has none.
func bucketLabel(b analysis.Bucket) string {
	return sizehist.Label(sizehist.Index(b.Max))
}

func (r *htmlPage) htmlHistogram(w io.Writer) {
	secs, _ := r.timed()
	hs := sizeHistogram(secs)
	if len(hs) == 0 {
		return
	}
	fmt.Fprintln(w, `<section id="histogram"><h2>Allocation sizes</h2><p class="hint">Calls to allocation functions by requested size, in buckets with round bounds; a bar's bytes are in its tooltip.</p>`)
	var top int64
	for _, b := range hs {
		top = max(top, b.Count)
	}
	ticks, axisTop := countTicks(top, 5)
	pw, ph := float64(chartW-chartL-chartR), float64(histH-chartT-chartB)
	y := func(v int64) float64 { return chartT + ph - float64(v)/float64(axisTop)*ph }
	band := pw / float64(len(hs))
	fmt.Fprintf(w, `<svg class="chart hist" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="allocations by size">`+"\n", chartW, histH, chartW, histH)
	for _, v := range ticks {
		fmt.Fprintf(w, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/><text class="ax ytick" x="%d" y="%.1f" text-anchor="end">%d</text>`+"\n",
			chartL, chartW-chartR, y(v), y(v), chartL-6, y(v)+4, v)
	}
	for k, b := range hs {
		x := chartL + float64(k)*band
		bw := max(band*0.8, 1)
		fmt.Fprintf(w, `<g class="bar" data-max="%d" data-count="%d" data-bytes="%d"><title>%s: %d calls, %s</title><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#1c7ed6"/>`,
			b.Max, b.Count, b.Bytes, esc(bucketLabel(b)), b.Count, esc(units.Bytes(b.Bytes)), x+band*0.1, y(b.Count), bw, y(0)-y(b.Count))
		if b.Count > 0 {
			fmt.Fprintf(w, `<text class="lbl" x="%.1f" y="%.1f" text-anchor="middle">%d</text>`, x+band/2, y(b.Count)-3, b.Count)
		}
		fmt.Fprintf(w, `<text class="ax" x="%.1f" y="%d" text-anchor="middle">%s</text></g>`+"\n", x+band/2, histH-chartB+16, esc(bucketLabel(b)))
	}
	fmt.Fprintf(w, `<line class="axis" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`+"\n", chartL, chartW-chartR, y(0), y(0))
	fmt.Fprintf(w, `<text class="ax" x="%d" y="%d" text-anchor="middle">requested size (%s)</text>`+"\n", chartL+int(pw)/2, histH-4, sizehist.Unit)
	fmt.Fprintln(w, "</svg></section>")
}

// countSeries is, at each of times (ascending), how many allocations of
// section s had been made by then, in total and of them temporary
// (analysis.Model.Temporary, heaptrack's definition: freed by its thread
// before that thread allocated again): heaptrack_gui's "Allocations" and
// "Temporary Allocations" charts, cumulative as theirs.
func countSeries(s *section, times []uint64) (calls, temps []uint64) {
	calls, temps = make([]uint64, len(times)), make([]uint64, len(times))
	m := s.log.m
	if len(times) == 0 || m.SummaryOnly {
		return calls, temps
	}
	for i, ts := range m.TS {
		if s.proc >= 0 && m.Threads[m.Thread[i]].Proc != s.proc {
			continue
		}
		k := sort.Search(len(times), func(k int) bool { return times[k] >= ts })
		if k == len(times) {
			continue
		}
		calls[k]++
		if m.Temporary(uint32(i)) {
			temps[k]++
		}
	}
	for k := 1; k < len(times); k++ {
		calls[k] += calls[k-1]
		temps[k] += temps[k-1]
	}
	return calls, temps
}

func joinUints(vs []uint64) string {
	var b strings.Builder
	for k, v := range vs {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(v, 10))
	}
	return b.String()
}

// htmlCountCharts draws the allocations and the temporary allocations over
// time, one line per process.
func (r *htmlPage) htmlCountCharts(w io.Writer) {
	secs, end := r.timed()
	if len(secs) == 0 || end == 0 {
		return
	}
	times := make([]uint64, chartSamples)
	for k := range times {
		times[k] = spread(end, k, chartSamples-1)
	}
	calls := make([][]uint64, len(secs))
	temps := make([][]uint64, len(secs))
	for i, s := range secs {
		calls[i], temps[i] = countSeries(s, times)
	}
	for _, c := range []struct {
		id, title, hint string
		series          [][]uint64
	}{
		{"allocations-over-time", "Allocations over time", "Calls to allocation functions made since tracing started (cumulative), as heaptrack_gui's Allocations chart.", calls},
		{"temporary-over-time", "Temporary allocations over time", "Temporary allocations made since tracing started (cumulative): blocks freed by their thread before it allocated anything else, heaptrack's definition.", temps},
	} {
		var top uint64
		for _, ser := range c.series {
			top = max(top, slices.Max(ser))
		}
		fmt.Fprintf(w, "<section id=\"%s\"><h2>%s</h2>\n<p class=\"hint\">%s</p>\n", c.id, esc(c.title), esc(c.hint))
		f := writeAxesOf(w, strings.ToLower(c.title), top, end, countTick)
		fmt.Fprintf(w, `<g class="data" data-times="%s"></g>`+"\n", joinUints(times))
		for i, s := range secs {
			col := palette[i%len(palette)]
			last := c.series[i][len(times)-1]
			fmt.Fprintf(w, `<polyline class="count" data-v="%s" fill="none" stroke="%s" stroke-width="1.6" points="%s"><title>%s: %d</title></polyline>`+"\n",
				joinUints(c.series[i]), col, f.points(times, c.series[i]), esc(s.title), last)
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
}
