package viewer

import (
	"strconv"
	"strings"
)

// The charts over time (A), heaptrack_gui's "Allocations" and "Temporary
// Allocations": how many of the visible records were allocated up to each
// moment of the log, and how many of them were temporary (freed by the
// thread that made them before it allocated again: heaptrack's definition,
// analysis.Model.Temporary, the report's figure). Cumulative, as
// heaptrack's charts are; the time axis is the timeline's.

// chartKind is which chart the A view shows.
type chartKind int

const (
	chartAllocs chartKind = iota
	chartTemporary
)

func (c chartKind) String() string {
	return [...]string{"Allocations", "Temporary allocations"}[c]
}

type chartKey struct {
	kind chartKind
	n    int
}

// chartSeries is the chart's cumulative counts in n columns of the log's
// span, over the visible records, cached until the selection changes
// (refresh clears it) or the width does.
func (a *App) chartSeries(kind chartKind, n int) []uint64 {
	k := chartKey{kind, n}
	if a.chart != nil && a.chartKey == k {
		return a.chart
	}
	m := a.M
	out := make([]uint64, n)
	for _, i := range a.sel {
		if kind == chartTemporary && !m.Temporary(i) {
			continue
		}
		out[m.TimeBucket(m.TS[i], n)]++
	}
	for c := 1; c < n; c++ {
		out[c] += out[c-1]
	}
	a.chart, a.chartKey = out, k
	return out
}

// eighths are the bar tops in eighths of a row.
var eighths = []rune(" ▁▂▃▄▅▆▇█")

func (a *App) drawChart(x0, y0, x1, y1 int) {
	m := a.M
	kind := chartAllocs
	if a.cv.mode == viewTemp {
		kind = chartTemporary
	}
	yw := 8 // the value axis' labels
	n := x1 - x0 - yw - 1
	rows := y1 - y0 - 3 // title, time axis, hint
	if n < 4 || rows < 2 {
		return
	}
	s := a.chartSeries(kind, n)
	top := s[n-1]
	title := kind.String() + " over time, cumulative, of the visible records: " + strconv.FormatUint(top, 10)
	if kind == chartTemporary {
		all := uint64(len(a.sel))
		title += " of " + strconv.FormatUint(all, 10) + " (" + a.pct(top, all) + ")"
	}
	a.put(x0, y0, x1, pad(title, x1-x0), a.headStyle(PaneList))
	for r := range rows {
		y := y0 + 1 + r
		switch r {
		case 0:
			a.put(x0, y, x0+yw, lpad(strconv.FormatUint(top, 10), yw-1), stDim)
		case rows / 2:
			a.put(x0, y, x0+yw, lpad(strconv.FormatUint(top/2, 10), yw-1), stDim)
		case rows - 1:
			a.put(x0, y, x0+yw, lpad("0", yw-1), stDim)
		}
		a.scr.SetContent(x0+yw, y, '┤', nil, stDim)
	}
	if top > 0 {
		for c, v := range s {
			// The bar's height in eighths of a row.
			h := int(v * uint64(rows*8) / top)
			for r := range rows {
				fill := min(max(h-(rows-1-r)*8, 0), 8)
				if fill > 0 {
					a.scr.SetContent(x0+yw+1+c, y0+1+r, eighths[fill], nil, stGreen)
				}
			}
		}
	}
	// The time axis: the start, the middle and the end of the log.
	y := y0 + 1 + rows
	axis := []rune(strings.Repeat("─", n))
	a.put(x0+yw+1, y, x1, string(axis), stDim)
	d := m.Duration()
	a.put(x0+yw+1, y, x1, "0", stDim)
	mid := Dur(d / 2)
	a.put(x0+yw+1+n/2-runeLen(mid)/2, y, x1, mid, stDim)
	end := Dur(d)
	a.put(x1-runeLen(end), y, x1, end, stDim)
	a.put(x0, y1-1, x1, pad(" ▸ A: next chart (allocations → temporary → back)  Esc: back to the records", x1-x0), stDim)
}
