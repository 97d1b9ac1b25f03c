package viewer

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
)

// key is one physical key: a special key, or a rune.
type key struct {
	k tcell.Key
	r rune
}

func rk(r rune) key { return key{tcell.KeyRune, r} }

// binding is one row of the key table: the keys, the label and text of the
// help overlay, and the action.
type binding struct {
	keys  []key
	label string
	help  string
	do    func(a *App)
}

// Keys is memview's key table. dispatch looks keys up here and the help
// overlay is generated from it, so the two cannot disagree.
var Keys []binding

func init() {
	Keys = slices.Concat(navKeys(), filterKeys(), timeKeys(), viewKeys(), settingKeys())
}

// navKeys are the rows of Keys that move and change the focus.
func navKeys() []binding {
	return []binding{
		{[]key{{tcell.KeyUp, 0}, rk('k')}, "↑ / k", "move up (list, detail scroll, thread summary)", func(a *App) { a.move(-1) }},
		{[]key{{tcell.KeyDown, 0}, rk('j')}, "↓ / j", "move down", func(a *App) { a.move(1) }},
		{[]key{{tcell.KeyPgUp, 0}, {tcell.KeyCtrlB, 0}}, "PgUp / Ctrl-b", "page up", func(a *App) { a.move(-a.page()) }},
		{[]key{{tcell.KeyPgDn, 0}, {tcell.KeyCtrlF, 0}}, "PgDn / Ctrl-f", "page down", func(a *App) { a.move(a.page()) }},
		{[]key{{tcell.KeyHome, 0}, rk('g')}, "Home / g", "jump to top", func(a *App) { a.home() }},
		{[]key{{tcell.KeyEnd, 0}, rk('G')}, "End / G", "jump to bottom", func(a *App) { a.end() }},
		{[]key{{tcell.KeyTab, 0}, {tcell.KeyRight, 0}, rk('l')}, "Tab / → / l", "focus forward: list → detail → threads", func(a *App) { a.focus = (a.focus + 1) % numPanes }},
		{[]key{{tcell.KeyLeft, 0}, {tcell.KeyBacktab, 0}, rk('h')}, "← / h / Shift-Tab", "focus backward", func(a *App) { a.focus = (a.focus + numPanes - 1) % numPanes }},
	}
}

// filterKeys are the filters of the records: status, lifetime, search.
func filterKeys() []binding {
	return []binding{
		{[]key{rk('f')}, "f", "filter: All → Leaks → Active → Freed (→ Unknown, with lost records) (descriptors: Open+Leaked → Leaked → Open → Closed → All)", func(a *App) {
			if a.fdView {
				a.fdFilter = (a.fdFilter + 1) % numFDFilters
				a.fcursor = 0
				return
			}
			a.q.Status = (a.q.Status + 1) % analysis.NumStatusFilters
			if n, _ := a.M.Unknown(); a.q.Status == analysis.FilterUnknown && n == 0 {
				a.q.Status = analysis.FilterAll // only a log with lost records has them
			}
			a.cursor, a.gcursor = 0, 0
		}},
		{[]key{rk('a')}, "a", "minimum lifetime in seconds (0 = off)", func(a *App) {
			a.startPrompt("Min lifetime (s)", "", func(a *App, s string) {
				s = strings.TrimSpace(s)
				if s == "" {
					a.q.MinAge = 0
					return
				}
				v, err := strconv.ParseFloat(s, 64)
				if err != nil || v < 0 {
					a.message = "not a number of seconds: " + s
					return
				}
				a.q.MinAge = uint64(v * 1e6)
			})
		}},
		{[]key{rk('/')}, "/", "search frames, thread, op, pointer (the prompt opens empty, ↑ recalls the last search; empty clears)", func(a *App) {
			// Empty, so that typing starts a new search; ↑ recalls the last.
			a.startPrompt("Search", "", func(a *App, s string) {
				a.q.Search = strings.TrimSpace(s)
				if a.q.Search != "" {
					a.lastSearch = a.q.Search
				}
				a.cursor, a.gcursor = 0, 0
			})
			a.prompt.recall = a.lastSearch
		}},
	}
}

// timeKeys are the delta mode, the markers and the time range.
func timeKeys() []binding {
	return []binding{
		{[]key{rk('m')}, "m", "delta mode: only what was allocated since the selected record", func(a *App) {
			if a.q.HasSince {
				a.q.HasSince = false
				return
			}
			if ts, ok := a.selectedTS(); ok {
				a.q.Since, a.q.HasSince = ts, true
			}
		}},
		{[]key{rk('M')}, "M", "add a marker (1-9) at the selected record", func(a *App) {
			ts, ok := a.selectedTS()
			if !ok {
				return
			}
			for k := range a.markers {
				if !a.markers[k].set {
					a.markers[k] = marker{ts, true}
					a.message = "marker M" + strconv.Itoa(k+1) + " at " + Dur(ts-a.M.MinTS)
					return
				}
			}
			a.message = "all nine markers are set: D deletes one"
		}},
		{[]key{rk('D')}, "D", "delete the marker nearest the selected record", func(a *App) {
			ts, ok := a.selectedTS()
			if !ok {
				return
			}
			best, bestD := -1, uint64(0)
			for k, mk := range a.markers {
				if !mk.set {
					continue
				}
				d := mk.ts - ts
				if ts > mk.ts {
					d = ts - mk.ts
				}
				if best < 0 || d < bestD {
					best, bestD = k, d
				}
			}
			if best < 0 {
				a.message = "no markers"
				return
			}
			a.markers[best].set = false
			a.message = "deleted marker M" + strconv.Itoa(best+1)
		}},
		{[]key{rk('[')}, "[", "range start at the selected record (snaps to a marker)", func(a *App) {
			if ts, ok := a.selectedTS(); ok {
				a.rangeFrom, a.fromSet = a.snap(ts), true
				a.applyRange()
			}
		}},
		{[]key{rk(']')}, "]", "range end; with both ends only that window is shown", func(a *App) {
			if ts, ok := a.selectedTS(); ok {
				a.rangeTo, a.toSet = a.snap(ts), true
				a.applyRange()
			}
		}},
		{[]key{rk('R')}, "R", "clear the range (markers stay)", func(a *App) {
			a.fromSet, a.toSet = false, false
			a.applyRange()
		}},
	}
}

// viewKeys choose what the list pane shows and in which order: groups,
// threads, processes, sorts, the other views.
func viewKeys() []binding {
	return []binding{
		{[]key{rk('\\')}, "\\", "group mode: fold records by call stack", func(a *App) {
			a.cv.mode = viewNone
			a.groupMode = !a.groupMode
			a.hist = false
			a.gcursor = 0
		}},
		{[]key{{tcell.KeyEnter, 0}}, "Enter", "list: go to the record's group; groups: back to its example; threads: filter by thread", func(a *App) { a.enter() }},
		{[]key{rk('t')}, "t", "thread filter forward", func(a *App) { a.cycleThread(1) }},
		{[]key{rk('T')}, "T", "thread filter backward", func(a *App) { a.cycleThread(-1) }},
		{[]key{rk('p')}, "p", "process filter (logs of several processes)", func(a *App) { a.cycleProc(1) }},
		{[]key{rk('s')}, "s", "sort: list Time→Size→Thread, groups Total→Count→Rate(→Growth), threads Name→…→Leaks", func(a *App) { a.cycleSort() }},
		{[]key{rk('S')}, "S", "reverse the sort of the focused pane", func(a *App) { a.reverseSort() }},
		{[]key{rk('1')}, "1", "sort the list by time", func(a *App) { a.q.Sort = analysis.SortTime }},
		{[]key{rk('2')}, "2", "sort the list by size", func(a *App) { a.q.Sort = analysis.SortSize }},
		{[]key{rk('3')}, "3", "sort the list by thread", func(a *App) { a.q.Sort = analysis.SortThread }},
		{[]key{rk('o')}, "o", "descriptor view: open and leaked file descriptors (--track fd) instead of the list", func(a *App) { a.cv.mode = viewNone; a.toggleFDs() }},
		{[]key{rk('H')}, "H", "size histogram of the visible records (buckets ≤1B, ≤2B, ≤5B … ≤5E, >5E; K = 1000 B) instead of the list", func(a *App) { a.hist, a.cv.mode = !a.hist, viewNone }},
		{[]key{rk('c')}, "c", "call tree of the cost (C), top-down or bottom-up (u), with expand/collapse (keys below); again: back", func(a *App) { a.setView(viewTree) }},
		{[]key{rk('i')}, "i", "icicle (flame graph, callers above) of the cost (C), with zoom (keys below); again: back", func(a *App) { a.setView(viewFlame) }},
		{[]key{rk('A')}, "A", "charts over time: allocations → temporary allocations (freed before their thread allocates again) → back; Esc: back", func(a *App) {
			switch a.cv.mode {
			case viewAllocs:
				a.cv.mode = viewTemp
			case viewTemp:
				a.cv.mode = viewNone
			default:
				a.setView(viewAllocs)
			}
		}},
	}
}

// settingKeys are the tree and icicle settings, export, display toggles,
// the baseline, help and quit.
func settingKeys() []binding {
	return []binding{
		{[]key{rk('C')}, "C", "cost of the tree and icicle: leaked → peak → allocated → calls → temporary", func(a *App) { a.cv.cost = (a.cv.cost + 1) % numCosts }},
		{[]key{rk('u')}, "u", "tree and icicle: top-down (from main or a thread's start function) ↔ bottom-up (from the allocating function)", func(a *App) {
			a.cv.bottomUp = !a.cv.bottomUp
			a.cv.zoom, a.cv.sel, a.cv.curPath, a.cv.opened = nil, nil, nil, false
		}},
		{[]key{rk('W')}, "W", "export the visible records (or groups) to a text file", func(a *App) {
			a.startPrompt("Export to", "memview-export.txt", func(a *App, s string) { a.export(strings.TrimSpace(s)) })
		}},
		{[]key{rk('Z')}, "Z", "hide/show the timeline", func(a *App) { a.noTimeline = !a.noTimeline }},
		{[]key{rk('L')}, "L", "source lines (file:line) in the detail pane", func(a *App) {
			a.srcLines = !a.srcLines
			if a.srcLines && a.opt.Lines == nil {
				a.message = "source lines unavailable in this build"
			}
		}},
		{[]key{rk('F')}, "F", "auto-follow new records", func(a *App) { a.follow = !a.follow }},
		{[]key{rk('b')}, "b", "baseline: group view shows growth per call site since now (again: clear)", func(a *App) {
			if a.hasBaseline {
				a.hasBaseline = false
				if a.groupSort == analysis.GroupByGrowth {
					a.groupSort = analysis.GroupByTotal
				}
				return
			}
			a.baseline, a.hasBaseline = a.M.MaxTS, true
			a.groupSort = analysis.GroupByGrowth
			a.message = "baseline at " + Dur(a.M.MaxTS-a.M.MinTS) + ": \\ shows growth per call site"
		}},
		{[]key{rk('?')}, "?", "this help", func(a *App) { a.help = true }},
		{[]key{rk('q'), {tcell.KeyEscape, 0}}, "q / Esc", "quit", func(a *App) { a.quit = true }},
	}
}

// HelpKeys are the keys of the help overlay while it is shown; any other
// key closes it. The overlay's title is written from this table.
var HelpKeys = []binding{
	{[]key{{tcell.KeyUp, 0}, rk('k')}, "↑ / k", "scroll up", func(a *App) { a.helpTop-- }},
	{[]key{{tcell.KeyDown, 0}, rk('j')}, "↓ / j", "scroll down", func(a *App) { a.helpTop++ }},
	{[]key{{tcell.KeyPgUp, 0}}, "PgUp", "page up", func(a *App) { a.helpTop -= 10 }},
	{[]key{{tcell.KeyPgDn, 0}}, "PgDn", "page down", func(a *App) { a.helpTop += 10 }},
	{[]key{rk('q')}, "q", "quit", func(a *App) { a.help, a.helpTop, a.quit = false, 0, true }},
}

// helpClose is what any key not in HelpKeys does to the overlay.
const helpClose = "any other key closes"

func (a *App) helpKey(ev *tcell.EventKey) {
	if b := lookup(HelpKeys, ev); b != nil {
		b.do(a)
		return
	}
	a.help, a.helpTop = false, 0
}

// helpIntro is the overlay's first lines: its own keys, from HelpKeys,
// wrapped at w columns.
func helpIntro(w int) []string {
	var parts []string
	for _, b := range HelpKeys {
		parts = append(parts, b.label+": "+b.help)
	}
	words := strings.Fields("In this help: " + strings.Join(parts, ", ") + "; " + helpClose + ".")
	var out []string
	line := ""
	for _, wd := range words {
		if line != "" && runeLen(line)+1+runeLen(wd) > w {
			out, line = append(out, line), ""
		}
		if line != "" {
			line += " "
		}
		line += wd
	}
	return append(out, line, "")
}

// lookup is the binding of table that ev's key has, nil when none.
func lookup(table []binding, ev *tcell.EventKey) *binding {
	k, r := ev.Key(), ev.Rune()
	for i := range table {
		for _, kk := range table[i].keys {
			if kk.k == k && (k != tcell.KeyRune || kk.r == r) {
				return &table[i]
			}
		}
	}
	return nil
}

func (a *App) dispatch(ev *tcell.EventKey) {
	k := ev.Key()
	r := ev.Rune()
	for i := range Keys {
		for _, kk := range Keys[i].keys {
			if kk.k == k && (k != tcell.KeyRune || kk.r == r) {
				Keys[i].do(a)
				return
			}
		}
	}
}

func (a *App) cycleSort() {
	switch {
	case a.focus == PaneThreads:
		a.thSort = (a.thSort + 1) % analysis.NumThreadSorts
	case a.groupMode && !a.hist:
		n := analysis.GroupByGrowth
		if a.hasBaseline {
			n = analysis.NumGroupSorts
		}
		a.groupSort = (a.groupSort + 1) % n
	default:
		a.q.Sort = (a.q.Sort + 1) % 3
	}
}

func (a *App) reverseSort() {
	switch {
	case a.focus == PaneThreads:
		a.thDesc = !a.thDesc
	case a.groupMode && !a.hist:
		a.groupDesc = !a.groupDesc
	default:
		a.q.Desc = !a.q.Desc
	}
}

// HelpLines is the help overlay's text, from the key table, then the
// tree and icicle views' own keys.
func HelpLines() []string {
	out := make([]string, 0, len(Keys)+len(ViewKeys)+2)
	width := func(t []binding) int {
		w := 0
		for _, b := range t {
			w = max(w, runeLen(b.label)+2)
		}
		return w
	}
	w := width(Keys)
	for _, b := range Keys {
		out = append(out, pad(b.label, w)+b.help)
	}
	out = append(out, "", "In the call tree (c) and the icicle (i):")
	w = width(ViewKeys)
	for _, b := range ViewKeys {
		if b.label != "" { // a key described with the one before it
			out = append(out, pad(b.label, w)+b.help)
		}
	}
	return out
}
