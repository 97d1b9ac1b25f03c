package viewer

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/sizehist"
	"github.com/memtrace/memtrace/symbols"
)

var (
	stDefault = tcell.StyleDefault
	stBorder  = tcell.StyleDefault.Foreground(tcell.ColorSilver)
	stTitle   = tcell.StyleDefault.Bold(true)
	stLive    = tcell.StyleDefault.Foreground(tcell.ColorGreen).Bold(true)
	stDone    = tcell.StyleDefault.Foreground(tcell.ColorRed).Bold(true)
	stGreen   = tcell.StyleDefault.Foreground(tcell.ColorGreen)
	stYellow  = tcell.StyleDefault.Foreground(tcell.ColorYellow)
	stRedBold = tcell.StyleDefault.Foreground(tcell.ColorRed).Bold(true)
	stFreed   = tcell.StyleDefault.Foreground(tcell.ColorYellow).Dim(true)
	stMagenta = tcell.StyleDefault.Foreground(tcell.ColorFuchsia).Bold(true)
	stHead    = tcell.StyleDefault.Bold(true).Underline(true)
	stFocus   = tcell.StyleDefault.Foreground(tcell.ColorAqua).Bold(true).Underline(true)
	stDim     = tcell.StyleDefault.Dim(true)
	stWarn    = tcell.StyleDefault.Foreground(tcell.ColorRed)
	stPrompt  = tcell.StyleDefault.Foreground(tcell.ColorAqua).Bold(true)
	stUnknown = tcell.StyleDefault.Foreground(tcell.ColorOlive).Bold(true)
)

// put writes s from x on row y, not past maxX; it returns the next column.
func (a *App) put(x, y, maxX int, s string, st tcell.Style) int {
	for _, r := range s {
		if x >= maxX {
			break
		}
		a.scr.SetContent(x, y, r, nil, st)
		x++
	}
	return x
}

func (a *App) hline(y, x0, x1 int, l, mid, r rune, split int, splitR rune) {
	a.scr.SetContent(x0, y, l, nil, stBorder)
	for x := x0 + 1; x < x1; x++ {
		c := mid
		if x == split {
			c = splitR
		}
		a.scr.SetContent(x, y, c, nil, stBorder)
	}
	a.scr.SetContent(x1, y, r, nil, stBorder)
}

func (a *App) draw() {
	a.scr.Clear()
	w, h := a.scr.Size()
	if w < 40 || h < 12 {
		a.put(0, 0, w, "terminal too small", stWarn)
		a.put(0, 1, w, "(40x12 needed)", stWarn)
		a.scr.Show()
		return
	}
	a.refresh()
	m := a.M

	// Rows: title, header, timeline, separator, panes, separator, threads, bottom.
	y := 0
	a.hline(0, 0, w-1, '┌', '─', '┐', -1, 0)
	a.drawTitle(w)
	y = 1
	a.vbar(y, w)
	a.drawHeader(y, w)
	y++
	if !a.noTimeline {
		a.vbar(y, w)
		a.drawTimeline(y, w)
		y++
	}
	split := w * 62 / 100
	if a.cv.mode != viewNone {
		split = -1 // the tree and icicle take the whole width
	}
	a.hline(y, 0, w-1, '├', '─', '┤', split, '┬')
	y++
	nth := len(m.ThreadOrder(analysis.ThreadByName, false, a.q.Proc))
	// A quarter of a tall terminal for threads; more scroll, and say so.
	thRows := min(nth, max(6, h/4)) + 1
	if thRows < 2 {
		thRows = 2
	}
	paneBottom := h - 1 - thRows - 1 // row of the lower separator
	if paneBottom-y < 3 {
		paneBottom = y + 3
	}
	for yy := y; yy < paneBottom; yy++ {
		a.scr.SetContent(0, yy, '│', nil, stBorder)
		if split > 0 {
			a.scr.SetContent(split, yy, '│', nil, stBorder)
		}
		a.scr.SetContent(w-1, yy, '│', nil, stBorder)
	}
	a.listRows = paneBottom - y - 1
	switch {
	case a.cv.mode == viewTree:
		a.drawTree(1, y, w-1, paneBottom)
	case a.cv.mode == viewFlame:
		a.drawFlame(1, y, w-1, paneBottom)
	case a.cv.mode == viewAllocs || a.cv.mode == viewTemp:
		a.drawChart(1, y, w-1, paneBottom)
	case a.fdView:
		a.drawFDs(1, y, split, paneBottom)
	case a.hist:
		a.drawHistogram(1, y, split, paneBottom)
	case a.groupMode:
		a.drawGroups(1, y, split, paneBottom)
	default:
		a.drawList(1, y, split, paneBottom)
	}
	if split > 0 {
		a.drawDetail(split+1, y, w-1, paneBottom)
	}
	a.hline(paneBottom, 0, w-1, '├', '─', '┤', split, '┴')
	for yy := paneBottom + 1; yy < h-1; yy++ {
		a.vbar(yy, w)
	}
	a.drawThreads(1, paneBottom+1, w-1, h-1)
	a.hline(h-1, 0, w-1, '└', '─', '┘', -1, 0)
	a.drawBottom(w, h)
	if a.help {
		a.drawHelp(w, h)
	}
	a.scr.Show()
}

func (a *App) vbar(y, w int) {
	a.scr.SetContent(0, y, '│', nil, stBorder)
	a.scr.SetContent(w-1, y, '│', nil, stBorder)
}

func sep(x, y, maxX int, a *App) int {
	return a.put(x, y, maxX, "  │  ", stBorder)
}

func (a *App) drawTitle(w int) {
	m := a.M
	h := a.header()
	x := a.put(2, 0, w-2, " ", stBorder)
	x = a.put(x, 0, w-2, h.State.String(), [...]tcell.Style{StateLoading: stYellow, StateLive: stLive, StateDone: stDone}[h.State])
	x = a.put(x, 0, w-2, "  "+a.opt.Source, stTitle)
	if m.Header.Seen && (m.Header.Comm != "" || m.Header.Cmd != "") {
		cmd := m.Header.Cmd
		if cmd == "" {
			cmd = m.Header.Comm
		}
		x = sep(x, 0, w-2, a)
		x = a.put(x, 0, w-2, "pid "+strconv.FormatInt(m.Header.PID, 10)+" "+cmd, stDefault)
	}
	x = sep(x, 0, w-2, a)
	x = a.put(x, 0, w-2, strconv.Itoa(m.Len())+" allocs", stDefault)
	x = sep(x, 0, w-2, a)
	shown := len(a.sel)
	if a.fdView {
		x = a.put(x, 0, w-2, strconv.Itoa(len(a.fdSelect()))+" descriptors shown", stDefault)
	} else if a.groupMode {
		x = a.put(x, 0, w-2, strconv.Itoa(shown)+" shown in "+strconv.Itoa(len(a.groups))+" groups", stDefault)
	} else {
		x = a.put(x, 0, w-2, strconv.Itoa(shown)+" shown", stDefault)
	}
	if h.Lost > 0 {
		x = sep(x, 0, w-2, a)
		x = a.put(x, 0, w-2, "Lost: "+strconv.FormatInt(h.Lost, 10), stWarn)
	}
	if s := h.SkippedText(); s != "" {
		x = sep(x, 0, w-2, a)
		x = a.put(x, 0, w-2, s, stWarn)
	}
	if s := h.TruncatedText(); s != "" {
		x = sep(x, 0, w-2, a)
		x = a.put(x, 0, w-2, s, stYellow)
	}
	if s := h.ShortHint(); s != "" {
		x = sep(x, 0, w-2, a)
		x = a.put(x, 0, w-2, s, stWarn)
	}
	if !m.Done && !a.ended && a.opt.Progress != nil && a.opt.Size > 0 && !a.opt.Live {
		pct := a.opt.Progress.Load() * 100 / a.opt.Size
		x = sep(x, 0, w-2, a)
		x = a.put(x, 0, w-2, "Loading "+strconv.FormatInt(pct, 10)+"%", stYellow)
	}
	if a.readErr != nil {
		x = sep(x, 0, w-2, a)
		x = a.put(x, 0, w-2, a.readErr.Error(), stWarn)
	}
	a.put(x, 0, w-2, " ", stBorder)
}

func (a *App) drawHeader(y, w int) {
	m := a.M
	mx := w - 1
	filter := a.q.Status.String()
	h := a.header()
	if a.q.Status == analysis.FilterLeaks {
		if h.StillAllocated {
			filter = h.LiveTitle()
		}
		if h.Suppressed > 0 {
			// The rows leave them out: say so where the rows are chosen.
			filter += " (" + strconv.FormatInt(h.Suppressed, 10) + " suppressed)"
		}
	}
	if a.fdView {
		filter = "FDs " + a.fdFilter.String()
	}
	x := a.put(2, y, mx, "Filter: "+filter, stDefault)
	x = sep(x, y, mx, a)
	x = a.put(x, y, mx, "Thread: "+a.threadLabel(), stDefault)
	if len(m.Procs) > 1 {
		x = sep(x, y, mx, a)
		x = a.put(x, y, mx, "Proc: "+a.procLabel(), stDefault)
	}
	x = sep(x, y, mx, a)
	x = a.put(x, y, mx, "Sort: "+a.sortLabel(), stDefault)
	x = sep(x, y, mx, a)
	st := stDefault
	if h.Leaks > 0 {
		st = stRedBold
	}
	x = a.put(x, y, mx, h.LeaksText(), st)
	if s := h.UnknownText(); s != "" {
		x = sep(x, y, mx, a)
		x = a.put(x, y, mx, s, stYellow)
	}
	if h.Untraced != "" {
		x = sep(x, y, mx, a)
		x = a.put(x, y, mx, h.Untraced, stYellow)
	}
	if nfd := m.FDLeakCount(a.q.Proc); nfd > 0 {
		x = sep(x, y, mx, a)
		x = a.put(x, y, mx, "FD leaks: "+strconv.Itoa(nfd), stRedBold)
	}
	x = sep(x, y, mx, a)
	f := "OFF"
	if a.follow {
		f = "ON"
	}
	x = a.put(x, y, mx, "Follow: "+f+" [F]", stDefault)
	if a.q.MinAge > 0 {
		x = sep(x, y, mx, a)
		x = a.put(x, y, mx, "Age≥"+strconv.FormatFloat(float64(a.q.MinAge)/1e6, 'g', -1, 64)+"s", stYellow)
	}
	if a.q.Search != "" {
		x = sep(x, y, mx, a)
		x = a.put(x, y, mx, "Search: "+a.q.Search, stYellow)
	}
	if a.q.HasSince {
		x = sep(x, y, mx, a)
		x = a.put(x, y, mx, "▶ DELTA since "+Dur(a.q.Since-m.MinTS), stYellow)
	}
	if a.q.HasRange {
		x = sep(x, y, mx, a)
		x = a.put(x, y, mx, "▶◀ RANGE "+Dur(a.q.From-m.MinTS)+"–"+Dur(a.q.To-m.MinTS), stYellow)
	} else if a.fromSet || a.toSet {
		x = sep(x, y, mx, a)
		x = a.put(x, y, mx, "RANGE: set the other end", stDim)
	}
	if a.hasBaseline {
		x = sep(x, y, mx, a)
		a.put(x, y, mx, "Baseline "+Dur(a.baseline-m.MinTS), stMagenta)
	}
}

func (a *App) sortLabel() string {
	arrow := func(desc bool) string {
		if desc {
			return " ▼"
		}
		return " ▲"
	}
	if a.groupMode && !a.hist {
		gs := a.groupSort
		if gs == analysis.GroupByGrowth && !a.hasBaseline {
			gs = analysis.GroupByTotal
		}
		return gs.String() + arrow(a.groupDesc)
	}
	return a.q.Sort.String() + arrow(a.q.Desc)
}

var sparks = []rune("▁▂▃▄▅▆▇█")

func (a *App) drawTimeline(y, w int) {
	m := a.M
	label := Dur(m.Duration())
	if a.q.Thread != analysis.NoThread && int(a.q.Thread) < len(m.Threads) {
		label += " " + m.Threads[a.q.Thread].Name
	}
	n := w - 4 - runeLen(label) - 1
	if n < 4 {
		return
	}
	key := tlKey{m.Version, n, a.q.Thread, a.q.Proc}
	if a.tlKey != key || a.tlCells == nil {
		a.tlCells, a.tlKey = m.Timeline(n, a.q.Thread, a.q.Proc), key
	}
	cells := a.tlCells
	var max int64
	for _, c := range cells {
		if c.Live > max {
			max = c.Live
		}
	}
	col := func(ts uint64) int { return m.TimeBucket(ts, n) }
	over := map[int]struct {
		r  rune
		st tcell.Style
	}{}
	if a.q.HasSince {
		over[col(a.q.Since)] = struct {
			r  rune
			st tcell.Style
		}{'|', stYellow}
	}
	if a.fromSet {
		over[col(a.rangeFrom)] = struct {
			r  rune
			st tcell.Style
		}{'[', stTitle}
	}
	if a.toSet {
		over[col(a.rangeTo)] = struct {
			r  rune
			st tcell.Style
		}{']', stTitle}
	}
	for k, mk := range a.markers {
		if mk.set {
			over[col(mk.ts)] = struct {
				r  rune
				st tcell.Style
			}{rune('1' + k), stMagenta}
		}
	}
	for i, c := range cells {
		x := 2 + i
		if o, ok := over[i]; ok {
			a.scr.SetContent(x, y, o.r, nil, o.st)
			continue
		}
		lvl := 0
		if max > 0 && c.Live > 0 {
			lvl = int(c.Live * int64(len(sparks)-1) / max)
		}
		st := stGreen
		if c.Net < 0 {
			st = stYellow
		}
		a.scr.SetContent(x, y, sparks[lvl], nil, st)
	}
	a.put(2+n+1, y, w-1, label, stDefault)
}

// rowStyle colours a record as memview does: leaks red, freed dim yellow,
// live by age (new green, middle yellow, old red); a block of a process let
// go running is still allocated at detach ([S], yellow), not a leak.
func (a *App) rowStyle(i uint32) (tcell.Style, string) {
	m := a.M
	switch m.Status(i) {
	case analysis.StatusLeak:
		switch a.liveOf(m.Threads[m.Thread[i]].Proc) {
		case analysis.LiveDetached:
			// Let go running (a detach, a Ctrl-C): not a leak.
			return stYellow, "[S]"
		case analysis.LiveCut:
			// The log ends before its process did.
			return stYellow, "[C]"
		}
		return stRedBold, "[L]"
	case analysis.StatusFreed:
		return stFreed, "[F]"
	case analysis.StatusUnknown:
		return stUnknown, "[?]"
	}
	d := m.Duration()
	if d == 0 {
		return stGreen, "[A]"
	}
	age := float64(m.MaxTS-m.TS[i]) / float64(d)
	switch {
	case age <= 0.30:
		return stGreen, "[A]"
	case age <= 0.75:
		return stYellow, "[A]"
	}
	return stRedBold, "[A]"
}

func (a *App) headStyle(p Pane) tcell.Style {
	if a.focus == p {
		return stFocus
	}
	return stHead
}

// scrollTo keeps cursor within [top, top+rows) of n rows, and the page
// full: after the rows shrank (a range, a filter) the cursor's row must not
// sit at the top with blank rows below while rows above it are hidden.
func scrollTo(cursor, top, rows, n int) int {
	if cursor < top {
		top = cursor
	}
	if cursor >= top+rows {
		top = cursor - rows + 1
	}
	top = min(top, n-rows)
	if top < 0 {
		top = 0
	}
	return top
}

func (a *App) drawList(x0, y0, x1, y1 int) {
	m := a.M
	a.put(x0, y0, x1, pad("St. Pointer             Op        Time        Size      Thread", x1-x0), a.headStyle(PaneList))
	rows := y1 - y0 - 1
	a.top = scrollTo(a.cursor, a.top, rows, len(a.sel))
	for r := 0; r < rows; r++ {
		k := a.top + r
		if k >= len(a.sel) {
			break
		}
		i := a.sel[k]
		st, tag := a.rowStyle(i)
		if k == a.cursor {
			st = st.Reverse(true)
		}
		line := tag + " " + pad(Ptr(m.Ptr[i]), 19) + " " + pad(m.OpName(m.Op[i]), 9) + " " + pad(Dur(m.TS[i]-m.MinTS), 11) + " " + pad(Bytes(m.Size[i]), 9) + " " + m.Threads[m.Thread[i]].Name
		a.put(x0, y0+1+r, x1, pad(line, x1-x0), st)
	}
	if len(a.sel) == 0 {
		msg := "no records"
		if !m.Done && !a.ended {
			msg = "no records yet"
		}
		a.put(x0+1, y0+2, x1, msg, stDim)
		if h := a.header(); h.Hint != "" {
			a.putWrapped(x0+1, y0+4, x1, y1, h.Hint, stWarn)
		}
	}
}

// putWrapped writes s from row y, wrapped at spaces to the width x0..x1,
// not below row y1.
func (a *App) putWrapped(x0, y, x1, y1 int, s string, st tcell.Style) {
	w := x1 - x0
	for s != "" && y < y1 && w > 0 {
		line := s
		if runeLen(line) > w {
			line = cut(s, w)
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				line = line[:i]
			}
		}
		a.put(x0, y, x1, line, st)
		s = strings.TrimLeft(s[len(line):], " ")
		y++
	}
}

func (a *App) firstFrame(stack uint32) string {
	fr := a.M.Frames(stack)
	if len(fr) == 0 {
		return "(no stack)"
	}
	return a.M.FrameName(fr[0])
}

func (a *App) drawGroups(x0, y0, x1, y1 int) {
	m := a.M
	head := "     ×N         Total      Rate/s  "
	if a.hasBaseline {
		head += "   Growth  "
	}
	head += "Call site"
	a.put(x0, y0, x1, pad(head, x1-x0), a.headStyle(PaneList))
	rows := y1 - y0 - 1
	a.gtop = scrollTo(a.gcursor, a.gtop, rows, len(a.groups))
	for r := 0; r < rows; r++ {
		k := a.gtop + r
		if k >= len(a.groups) {
			break
		}
		g := &a.groups[k]
		var st tcell.Style
		switch {
		case g.LiveCount > 0 && g.Freed == 0:
			st = stRedBold
		case g.LiveCount > 0:
			st = stYellow
		default:
			st = stFreed
		}
		if k == a.gcursor {
			st = st.Reverse(true)
		}
		x := x0
		if g.Monotonic {
			ms := stRedBold
			if k == a.gcursor {
				ms = ms.Reverse(true)
			}
			x = a.put(x, y0+1+r, x1, "▲", ms)
		} else {
			x = a.put(x, y0+1+r, x1, " ", st)
		}
		rate := "-"
		if r, ok := g.MeaningfulRate(); ok {
			rate = Bytes(uint64(r)) + "/s"
		}
		line := " ×" + pad(strconv.FormatInt(g.Count, 10), 8) + lpad(Bytes(g.Total), 10) + "  " + lpad(rate, 11) + "  "
		if a.hasBaseline {
			line += lpad(SBytes(g.Growth), 9) + "  "
		}
		var tail string
		if r := m.StackTruncation(g.Stack); r != "" {
			tail += " …[truncated: " + r + "]"
		}
		tail += "  [" + a.groupThreadsLabel(g, 32) + "]"
		if k < len(a.groupLabels) {
			// The label gives way in its middle, so that the frame that
			// tells it apart stays on screen.
			line += a.groupLabels[k].fit(max(x1-x-runeLen(line)-runeLen(tail), 24))
		} else {
			line += a.firstFrame(g.Stack)
		}
		line += tail
		a.put(x, y0+1+r, x1, pad(line, x1-x), st)
	}
	if len(a.groups) == 0 {
		a.put(x0+1, y0+2, x1, "no records", stDim)
	}
}

// groupThreadsLabel names the threads of group g's call site: its one
// thread, the names when they fit in w columns, else "N threads".
func (a *App) groupThreadsLabel(g *analysis.Group, w int) string {
	m := a.M
	st, ok := a.groupThreads[g.Stack]
	if !ok || st.N <= 1 {
		return m.Threads[g.Thread].Name
	}
	n := strconv.Itoa(st.N) + " threads"
	if len(st.Threads) < st.N {
		return n
	}
	names := make([]string, len(st.Threads))
	for k, t := range st.Threads {
		names[k] = m.Threads[t].Name
	}
	slices.Sort(names)
	if s := strings.Join(names, ", "); runeLen(s) <= w {
		return s
	}
	return n
}

func (a *App) drawHistogram(x0, y0, x1, y1 int) {
	m := a.M
	a.put(x0, y0, x1, pad("Size          Count       Bytes  (visible records; K = 1000 B)", x1-x0), a.headStyle(PaneList))
	if a.hists == nil {
		a.hists = sizehist.New()
		for _, i := range a.sel {
			a.hists.Add(m.Size[i])
		}
	}
	hs := a.hists
	lo, hi, ok := hs.Used()
	if !ok {
		a.put(x0+1, y0+2, x1, "no records", stDim)
		return
	}
	var top int64
	for _, b := range hs {
		top = max(top, b.Count)
	}
	// The buckets from the first in use to the last, as the report's
	// chart shows them.
	for k := lo; k <= hi; k++ {
		b := hs[k]
		y := y0 + 1 + k - lo
		if y >= y1 {
			break
		}
		x := a.put(x0, y, x1, pad(sizehist.Label(k), 11)+lpad(strconv.FormatInt(b.Count, 10), 8)+lpad(Bytes(b.Bytes), 12)+"  ", stDefault)
		barW := x1 - x - 1
		if barW > 0 && top > 0 {
			n := int(b.Count * int64(barW) / top)
			if n == 0 && b.Count > 0 {
				n = 1
			}
			a.put(x, y, x1, strings.Repeat("█", n), stGreen)
		}
	}
}

// detailLines builds the detail pane's text for the selection.
func (a *App) detailLines() []styled {
	m := a.M
	if a.fdView {
		return a.fdDetail()
	}
	var out []styled
	add := func(s string, st tcell.Style) { out = append(out, styled{s, st}) }
	if a.groupMode && !a.hist {
		if a.gcursor >= len(a.groups) {
			return nil
		}
		g := &a.groups[a.gcursor]
		add("── Call site ──────────────", stHead)
		add("  Allocs  : "+strconv.FormatInt(g.Count, 10), stDefault)
		add("  Total   : "+Bytes(g.Total), stDefault)
		add("  Live    : "+strconv.FormatInt(g.LiveCount, 10)+" ("+Bytes(g.LiveBytes)+")", stDefault)
		add("  Freed   : "+strconv.FormatInt(g.Freed, 10), stDefault)
		add("  Span    : "+Dur(g.First-m.MinTS)+" – "+Dur(g.Last-m.MinTS), stDefault)
		if r, ok := g.MeaningfulRate(); ok {
			add("  Rate    : "+Bytes(uint64(r))+"/s", stDefault)
		} else {
			add("  Rate    : - (span too short)", stDim)
		}
		add("  Threads : "+a.groupThreadsLabel(g, 1<<20), stDefault)
		if g.Monotonic {
			add("  ▲ live bytes never decrease", stRedBold)
		}
		if a.hasBaseline {
			add("  Growth  : "+SBytes(g.Growth)+" since baseline", stMagenta)
		}
		out = append(out, a.stackLines("Stack", g.Stack)...)
		return out
	}
	i, ok := a.selected()
	if !ok {
		return nil
	}
	st := m.Status(i)
	t := &m.Threads[m.Thread[i]]
	add("── Allocation ─────────────", stHead)
	add("  Op      : "+m.OpName(m.Op[i]), stDefault)
	add("  Ptr     : "+Ptr(m.Ptr[i]), stDefault)
	add("  Size    : "+Bytes(m.Size[i])+" ("+strconv.FormatUint(m.Size[i], 10)+")", stDefault)
	add("  Time    : "+Dur(m.TS[i]-m.MinTS), stDefault)
	add("  Thread  : "+t.Name+" ("+strconv.FormatInt(t.TID, 10)+")", stDefault)
	if len(m.Procs) > 1 {
		add("  Process : "+m.ProcLabel(int(t.Proc)), stDefault)
	}
	sst, _ := a.rowStyle(i)
	status := strings.ToUpper(st.String())
	if st == analysis.StatusLeak {
		switch a.liveOf(t.Proc) {
		case analysis.LiveDetached:
			status = "STILL ALLOCATED AT DETACH (the process had not exited)"
		case analysis.LiveCut:
			status = "LIVE AT THE CUT (the log ends before the process did)"
		}
	}
	add("  Status  : "+status, sst)
	switch {
	case st == analysis.StatusUnknown:
		add("  its memory was allocated again: free lost", stDim)
	case st != analysis.StatusFreed && m.LostEvents > 0:
		add("  records lost: its free may be one", stDim)
	}
	add("  Lifetime: "+Dur(m.Lifetime(i)), stDefault)
	if st == analysis.StatusFreed {
		ft := &m.Threads[m.FreeThread[i]]
		add("── Free ───────────────────", stHead)
		add("  Op      : "+m.OpName(m.FreeOp[i]), stDefault)
		add("  Time    : "+Dur(m.FreeTS[i]-m.MinTS), stDefault)
		add("  Thread  : "+ft.Name+" ("+strconv.FormatInt(ft.TID, 10)+")", stDefault)
	}
	out = append(out, a.stackLines("Stack", m.Stack[i])...)
	if st == analysis.StatusFreed && m.FreeStack[i] != 0 {
		out = append(out, a.stackLines("Free stack", m.FreeStack[i])...)
	}
	return out
}

type styled struct {
	s  string
	st tcell.Style
}

func (a *App) stackLines(title string, stack uint32) []styled {
	m := a.M
	out := []styled{{"── " + title + " ─────────────", stHead}}
	cut := m.StackTruncation(stack)
	if cut != "" {
		out[0] = styled{"── " + title + ", truncated: " + cut + " ──", stHead}
	}
	frames := m.Frames(stack)
	if len(frames) == 0 {
		return append(out, styled{"  (no frames in the log)", stDim})
	}
	for k, f := range frames {
		fr := m.Frame(f)
		num := "  #" + strconv.Itoa(k) + " "
		loc := fr.Module
		if fr.Symbol != "" || fr.Offset != 0 {
			loc += "+0x" + strconv.FormatUint(fr.Offset, 16)
		}
		if a.srcLines {
			if s := a.sourceLine(f); s != "" {
				loc = s
			}
			// In inlined code, the inlined functions first, each at its
			// line, as the report lists them; the frame's own function
			// then at the line of the call.
			if calls := a.frameCalls(f); len(calls) > 1 {
				for _, c := range calls[:len(calls)-1] {
					out = append(out, styled{num + c.Func + " (inlined)", stDefault})
					if c.File != "" {
						out = append(out, styled{"     " + c.File + ":" + strconv.Itoa(c.Line), stDim})
					}
				}
				if c := calls[len(calls)-1]; c.File != "" {
					loc = c.File + ":" + strconv.Itoa(c.Line)
				}
			}
		}
		out = append(out, styled{num + m.FrameName(f), stDefault}, styled{"     " + loc, stDim})
	}
	if cut != "" {
		out = append(out, styled{"  … truncated: " + cut + " (the frames above are all there are)", stYellow})
	}
	return out
}

// frameSource is frame f's file:line, false when it cannot be looked up.
func (a *App) frameSource(f uint32) (string, bool) {
	s := a.sourceLine(f)
	if s == "" || strings.HasSuffix(s, " (no line info)") {
		return "", false
	}
	return s, true
}

// labelGroups names groups apart (labels.go). Each group's stack is read
// as its calls (frameCalls): an inlined function is a frame of its own,
// and each frame is named with its line where it is known
// ("Cache::put leaky.cpp:15"); its offset follows its function's name
// where a group of the same names has another frame there.
func (a *App) labelGroups(gs []analysis.Group) []siteLabel {
	m := a.M
	type entry struct {
		f    uint32
		call symbols.Call
	}
	stacks := make([][]entry, len(gs))
	names := make([][]string, len(gs))
	nameIDs := make([][]int32, len(gs))
	ids := make([][]uint32, len(gs))
	intern := map[string]int32{}
	entryIDs := map[[2]uint32]uint32{} // (frame, index in its calls) → an id for partFrames
	firstName := map[string]int32{}    // stacks by their allocating function's name
	for k := range gs {
		for _, f := range m.Frames(gs[k].Stack) {
			for j, c := range a.frameCalls(f) {
				stacks[k] = append(stacks[k], entry{f, c})
				n := shortName(c.Func)
				if at := c.At(); at != "" {
					n += " " + at
				}
				id, ok := intern[n]
				if !ok {
					id = int32(len(intern))
					intern[n] = id
				}
				e := [2]uint32{f, uint32(j)}
				eid, ok := entryIDs[e]
				if !ok {
					eid = uint32(len(entryIDs))
					entryIDs[e] = eid
				}
				names[k], nameIDs[k], ids[k] = append(names[k], n), append(nameIDs[k], id), append(ids[k], eid)
			}
		}
		if len(names[k]) > 0 {
			firstName[names[k][0]]++
		}
	}
	kept, off := partFrames(nameIDs, ids)
	out := make([]siteLabel, len(gs))
	for k := range gs {
		st := stacks[k]
		if len(st) == 0 {
			out[k] = siteLabel{frames: []string{"(no stack)"}, gap: []bool{false}, part: []bool{true}}
			continue
		}
		nm, cloned := names[k], false
		for x, j := range kept[k] {
			e := st[j]
			// A frame named by module and offset has its offset in its
			// name already.
			if off[k][x] && (m.Frame(e.f).Symbol != "" || a.frameName(e.f) != m.FrameName(e.f)) {
				if !cloned {
					nm, cloned = slices.Clone(nm), true
				}
				nm[j] = shortName(e.call.Func) + "+0x" + strconv.FormatUint(m.Frame(e.f).Offset, 16)
				if at := e.call.At(); at != "" {
					nm[j] += " " + at
				}
			}
		}
		out[k] = makeLabel(nm, kept[k], firstName[names[k][0]] < 2)
	}
	return out
}

func (a *App) sourceLine(f uint32) string {
	if a.opt.Lines == nil {
		return ""
	}
	if s, ok := a.srcCache[f]; ok {
		return s
	}
	fr := a.M.Frame(f)
	file, line, err := a.opt.Lines.SourceLine(fr.Module, fr.Symbol, fr.Offset)
	s := ""
	if err == nil && file != "" {
		s = file + ":" + strconv.Itoa(line)
	} else {
		s = fr.Module + " (no line info)"
	}
	a.srcCache[f] = s
	return s
}

func (a *App) drawDetail(x0, y0, x1, y1 int) {
	a.put(x0, y0, x1, pad("Detail [↑↓ scroll]", x1-x0), a.headStyle(PaneDetail))
	lines := a.detailLines()
	rows := y1 - y0 - 1
	if a.dscroll > len(lines)-rows {
		a.dscroll = max(len(lines)-rows, 0)
	}
	for r := 0; r < rows; r++ {
		k := a.dscroll + r
		if k >= len(lines) {
			break
		}
		a.put(x0+1, y0+1+r, x1, lines[k].s, lines[k].st)
	}
}

func (a *App) drawThreads(x0, y0, x1, y1 int) {
	m := a.M
	order := m.ThreadOrder(a.thSort, a.thDesc, a.q.Proc)
	rows := y1 - y0 - 1
	if a.focus != PaneThreads && a.q.Thread != analysis.NoThread {
		// Unfocused, the pane keeps the filtered thread in view.
		for k, ti := range order {
			if uint32(ti) == a.q.Thread {
				a.tcursor = k
			}
		}
	}
	a.ttop = scrollTo(a.tcursor, a.ttop, rows, len(order))
	head := pad("Thread", 16) + lpad("TID", 8) + lpad("Allocated", 12) + lpad("Freed", 12) + lpad("Net(live)", 12) + "  Leaks" + "   [sort: " + a.thSort.String()
	if a.thDesc {
		head += " ▼]"
	} else {
		head += " ▲]"
	}
	head += threadsPosition(a.ttop, rows, len(order))
	a.put(x0, y0, x1, pad(head, x1-x0), a.headStyle(PaneThreads))
	supN, supB := a.suppressed()
	for r := 0; r < rows; r++ {
		k := a.ttop + r
		if k >= len(order) {
			break
		}
		ti := order[k]
		t := &m.Threads[ti]
		// The suppressed leaks left out, as the header leaves them out.
		ln, lb, _, _ := threadLeaks(m, ti, supN, supB)
		leaks := strconv.FormatInt(ln, 10)
		if ln > 0 {
			leaks += " (" + Bytes(lb) + ")"
		}
		name := t.Name
		if uint32(ti) == a.q.Thread {
			name = "▸" + name
		}
		line := pad(name, 16) + lpad(strconv.FormatInt(t.TID, 10), 8) + lpad(Bytes(t.AllocBytes), 12) + lpad(Bytes(t.FreedBytes), 12) + lpad(Bytes(t.LiveBytes), 12) + "  " + leaks
		st := stDefault
		if ln > 0 {
			st = stRedBold
		}
		if a.focus == PaneThreads && k == a.tcursor {
			st = st.Reverse(true)
		}
		a.put(x0, y0+1+r, x1, pad(line, x1-x0), st)
	}
	// A scroll bar in the right border: where the rows shown sit.
	if len(order) > rows && rows > 0 {
		a0 := a.ttop * rows / len(order)
		a1 := max((a.ttop+rows)*rows/len(order), a0+1)
		for r := 0; r < rows; r++ {
			c := '│'
			if r >= a0 && r < a1 {
				c = '┃'
			}
			a.scr.SetContent(x1, y0+1+r, c, nil, stTitle)
		}
	}
}

// threadsPosition is the thread table's scroll position, "  rows 7–12 of
// 50 ↑↓", "" when every row is shown.
func threadsPosition(top, rows, n int) string {
	if n <= rows {
		return ""
	}
	s := "  rows " + strconv.Itoa(top+1) + "–" + strconv.Itoa(min(top+rows, n)) + " of " + strconv.Itoa(n) + " "
	if top > 0 {
		s += "↑"
	}
	if top+rows < n {
		s += "↓"
	}
	return s
}

func (a *App) drawBottom(w, h int) {
	y := h - 1
	switch {
	case a.prompt != nil:
		x := a.put(2, y, w-2, " "+a.prompt.label+": ", stPrompt)
		x = a.put(x, y, w-2, string(a.prompt.text), stDefault)
		a.scr.SetContent(x, y, '_', nil, stPrompt.Blink(true))
		hint := "  (Enter: ok, Esc: cancel) "
		if a.prompt.recall != "" {
			hint = "  (Enter: ok, Esc: cancel, ↑: " + a.prompt.recall + ") "
		}
		a.put(x+1, y, w-2, hint, stDim)
	case a.message != "":
		a.put(2, y, w-2, " "+a.message+" ", stYellow)
	default:
		a.put(2, y, w-2, " ?:help  f:filter  \\:group  /:search  t:thread  s:sort  q:quit ", stDim)
	}
}

func (a *App) drawHelp(w, h int) {
	lines := HelpLines()
	bw := 0
	for _, l := range lines {
		bw = max(bw, runeLen(l))
	}
	bw = min(bw+4, w-2)
	lines = append(helpIntro(bw-4), lines...)
	bh := min(len(lines)+2, h-2)
	x0 := (w - bw) / 2
	y0 := (h - bh) / 2
	for y := y0; y < y0+bh; y++ {
		for x := x0; x < x0+bw; x++ {
			a.scr.SetContent(x, y, ' ', nil, stDefault)
		}
	}
	rows := bh - 2
	a.helpTop = max(min(a.helpTop, len(lines)-rows), 0)
	a.hline(y0, x0, x0+bw-1, '┌', '─', '┐', -1, 0)
	a.put(x0+2, y0, x0+bw-2, " memview keys ", stTitle)
	for k := 0; k < rows; k++ {
		a.scr.SetContent(x0, y0+1+k, '│', nil, stBorder)
		a.scr.SetContent(x0+bw-1, y0+1+k, '│', nil, stBorder)
		if a.helpTop+k < len(lines) {
			a.put(x0+2, y0+1+k, x0+bw-2, lines[a.helpTop+k], stDefault)
		}
	}
	a.hline(y0+bh-1, x0, x0+bw-1, '└', '─', '┘', -1, 0)
	if a.helpTop+rows < len(lines) {
		a.put(x0+2, y0+bh-1, x0+bw-2, " ↓ more ", stDim)
	}
	if a.helpTop > 0 {
		a.put(x0+bw-10, y0, x0+bw-2, " ↑ more ", stDim)
	}
}
