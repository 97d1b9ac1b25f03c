package viewer

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/sizehist"
	"github.com/memtrace/memtrace/symbols"
)

// SourceLiner resolves a frame to a source line (symbols.Cache does).
type SourceLiner interface {
	SourceLine(module, symbol string, off uint64) (file string, line int, err error)
}

// Pane is what has the keyboard focus.
type Pane int

const (
	PaneList Pane = iota
	PaneDetail
	PaneThreads
	numPanes
)

// Options configure an App.
type Options struct {
	Source   string // shown in the header: file name, "stdin", host:port
	Live     bool   // the input may grow (-f, stdin, TCP): ● LIVE until it ends
	Size     int64  // bytes of the input when known, for the loading progress
	Progress *atomic.Int64
	Lines    SourceLiner // for L; nil = unavailable
	// NameFrame names a frame the log gave without a function (module
	// and offset from its base) from the module's ELF symbols, as the
	// report does; "" when it cannot. nil: such frames keep module+0xOFF.
	NameFrame func(module string, off uint64) string
	// NoBuiltinSuppressions counts what system libraries keep for good
	// as leaks too (--disable-builtin-suppressions, as in the report).
	NoBuiltinSuppressions bool
}

type tlKey struct {
	version uint64
	n       int
	thread  uint32
	proc    int32
}

type marker struct {
	ts  uint64
	set bool
}

type prompt struct {
	label  string
	text   []rune
	recall string // what ↑ puts back: the / prompt opens empty, its last search one key away
	done   func(a *App, s string)
}

// App is memview's state. All fields are guarded by Mu.
type App struct {
	Mu  sync.Mutex
	M   *analysis.Model
	scr tcell.Screen
	opt Options

	ended   bool  // the input has ended (✕ DONE)
	readErr error // why it ended, if not normally

	supp suppCache // the built-in suppressions' share of the leaks

	q         analysis.Query
	groupMode bool
	groupSort analysis.GroupSort
	groupDesc bool
	thSort    analysis.ThreadSort
	thDesc    bool
	focus     Pane

	sel      []uint32
	groups   []analysis.Group
	selVer   uint64
	selQuery analysis.Query
	selGroup bool
	selValid bool
	// The group list's order and baseline at the last refresh: s, S and b
	// change it without changing the query.
	selGSort analysis.GroupSort
	selGDesc bool
	selBase  uint64
	selHBase bool
	// groupThreads labels each group's threads, from the same selection.
	groupThreads map[uint32]analysis.StackThreads
	lastSearch   string // for ↑ in the / prompt

	cursor, top   int // list or group list, by mode
	gcursor, gtop int
	tcursor, ttop int
	dscroll       int

	hist, noTimeline, srcLines bool
	fdView                     bool     // the list pane shows descriptors (o)
	fdFilter                   fdFilter // its own status filter
	fdSel                      []int    // descriptors shown, at the last draw
	fcursor, ftop              int
	follow                     bool
	markers                    [9]marker
	rangeFrom, rangeTo         uint64
	fromSet, toSet             bool
	baseline                   uint64
	hasBaseline                bool

	prompt  *prompt
	help    bool
	helpTop int
	message string
	quit    bool

	srcCache   map[uint32]string
	elfNames   map[uint32]string         // NameFrame's names, by frame
	callsCache map[uint32][]symbols.Call // frameCalls' answers, by frame
	tlCells    []analysis.Cell           // the timeline, cached until the model or its parameters change
	tlKey      tlKey
	hists      sizehist.Hist // histogram of sel, nil until drawn
	listRows   int           // rows of the list pane at the last draw, for paging
	chart      []uint64      // the A chart's series of sel, nil until drawn
	chartKey   chartKey

	cv     costView // the call tree and icicle views
	flameW int      // the icicle's width at the last draw
	// groupLabels names each group apart (labels.go), by group index.
	groupLabels []siteLabel
}

// New returns an App over model m, drawing on scr.
func New(scr tcell.Screen, m *analysis.Model, opt Options) *App {
	a := &App{M: m, scr: scr, opt: opt, q: analysis.NewQuery(), groupDesc: true, follow: opt.Live, srcCache: map[uint32]string{}}
	a.listRows = 10
	return a
}

// SetEnded marks the input as finished (✕ DONE); err says why when it did
// not end normally.
func (a *App) SetEnded(err error) {
	a.ended, a.readErr = true, err
}

// Quit reports whether the user asked to quit.
func (a *App) Quit() bool { return a.quit }

// refresh recomputes the selection when the query or the model changed.
func (a *App) refresh() {
	m := a.M
	if a.selValid && a.selVer == m.Version && a.selQuery == a.q && a.selGroup == a.groupMode &&
		(!a.groupMode || a.selGSort == a.groupSort && a.selGDesc == a.groupDesc && a.selBase == a.baseline && a.selHBase == a.hasBaseline) {
		return
	}
	var keep uint32
	hadKeep := false
	if a.cursor < len(a.sel) {
		keep, hadKeep = a.sel[a.cursor], true
	}
	a.sel = a.dropSuppressed(m.Select(&a.q, a.sel))
	a.hists, a.chart = nil, nil
	if a.groupMode {
		gs := a.groupSort
		if gs == analysis.GroupByGrowth && !a.hasBaseline {
			gs = analysis.GroupByTotal
		}
		var keepStack uint32
		hadG := a.gcursor < len(a.groups)
		if hadG {
			keepStack = a.groups[a.gcursor].Stack
		}
		a.groups = m.Groups(a.sel, a.baseline, a.hasBaseline, gs, a.groupDesc)
		if gs == analysis.GroupByRate {
			analysis.SortGroupsByRate(a.groups, a.groupDesc) // the rates shown, not the raw ones
		}
		a.groupThreads = m.ThreadsByStack(a.sel)
		a.groupLabels = a.labelGroups(a.groups)
		if hadG && !a.follow {
			for k := range a.groups {
				if a.groups[k].Stack == keepStack {
					a.gcursor = k
					break
				}
			}
		}
	}
	switch {
	case a.follow:
		a.cursor = len(a.sel) - 1
	case hadKeep && a.selValid:
		a.cursor = indexOf(a.sel, keep, a.cursor)
	}
	a.clamp()
	a.selVer, a.selQuery, a.selGroup, a.selValid = m.Version, a.q, a.groupMode, true
	a.selGSort, a.selGDesc, a.selBase, a.selHBase = a.groupSort, a.groupDesc, a.baseline, a.hasBaseline
}

// indexOf finds id in sel, looking near hint first; the nearest row when
// it is gone.
func indexOf(sel []uint32, id uint32, hint int) int {
	if hint < len(sel) && sel[hint] == id {
		return hint
	}
	for i, v := range sel {
		if v == id {
			return i
		}
	}
	if hint >= len(sel) {
		return len(sel) - 1
	}
	return hint
}

func (a *App) clamp() {
	if a.cursor >= len(a.sel) {
		a.cursor = len(a.sel) - 1
	}
	if a.cursor < 0 {
		a.cursor = 0
	}
	if a.gcursor >= len(a.groups) {
		a.gcursor = len(a.groups) - 1
	}
	if a.gcursor < 0 {
		a.gcursor = 0
	}
	if n := len(a.M.Threads); a.tcursor >= n {
		a.tcursor = n - 1
	}
	if a.tcursor < 0 {
		a.tcursor = 0
	}
	if a.dscroll < 0 {
		a.dscroll = 0
	}
}

// selected is the allocation under the cursor (in group mode the group's
// example).
func (a *App) selected() (uint32, bool) {
	a.refresh()
	if a.groupMode && !a.hist {
		if a.gcursor < len(a.groups) {
			return a.groups[a.gcursor].Example, true
		}
		return 0, false
	}
	if a.cursor < len(a.sel) {
		return a.sel[a.cursor], true
	}
	return 0, false
}

func (a *App) selectedTS() (uint64, bool) {
	i, ok := a.selected()
	if !ok {
		a.message = "no record selected"
		return 0, false
	}
	return a.M.TS[i], true
}

// move moves the cursor of the focused pane by d rows.
func (a *App) move(d int) {
	a.refresh()
	switch a.focus {
	case PaneDetail:
		a.dscroll += d
	case PaneThreads:
		a.tcursor += d
	default:
		if a.fdView {
			a.fcursor = max(min(a.fcursor+d, len(a.fdSelect())-1), 0)
			return
		}
		if a.groupMode && !a.hist {
			a.gcursor += d
		} else {
			a.cursor += d
		}
		a.dscroll = 0
		if d < 0 && a.follow {
			a.follow = false
		}
	}
	a.clamp()
}

func (a *App) home() {
	a.move(-1 << 30)
}

func (a *App) end() {
	a.move(1 << 30)
}

func (a *App) page() int {
	if a.listRows > 1 {
		return a.listRows - 1
	}
	return 1
}

func (a *App) snap(ts uint64) uint64 {
	d := a.M.Duration()
	best, bestD := ts, uint64(d/20+1)
	for _, mk := range a.markers {
		if !mk.set {
			continue
		}
		dd := mk.ts - ts
		if ts > mk.ts {
			dd = ts - mk.ts
		}
		if dd <= bestD {
			best, bestD = mk.ts, dd
		}
	}
	return best
}

func (a *App) applyRange() {
	a.q.HasRange = a.fromSet && a.toSet
	if a.q.HasRange {
		a.q.From, a.q.To = a.rangeFrom, a.rangeTo
		if a.q.From > a.q.To {
			a.q.From, a.q.To = a.q.To, a.q.From
		}
	}
}

// threadLabel names the thread filter.
func (a *App) threadLabel() string {
	if a.q.Thread == analysis.NoThread || int(a.q.Thread) >= len(a.M.Threads) {
		return "All"
	}
	t := &a.M.Threads[a.q.Thread]
	return t.Name + " (" + strconv.FormatInt(t.TID, 10) + ")"
}

// cycleThread moves the thread filter through All and every thread of the
// process filter, in name order.
func (a *App) cycleThread(d int) {
	order := a.M.ThreadOrder(analysis.ThreadByName, false, a.q.Proc)
	cur := -1
	for k, t := range order {
		if uint32(t) == a.q.Thread {
			cur = k
		}
	}
	// Positions: -1 = All, 0..n-1 threads.
	n := len(order)
	next := cur + d
	if next >= n {
		next = -1
	} else if next < -1 {
		next = n - 1
	}
	if next < 0 {
		a.q.Thread = analysis.NoThread
	} else {
		a.q.Thread = uint32(order[next])
	}
	a.cursor, a.gcursor = 0, 0
}

func (a *App) cycleProc(d int) {
	n := len(a.M.Procs)
	if n < 2 {
		a.message = "the log holds one process"
		return
	}
	next := int(a.q.Proc) + d
	if next >= n {
		next = -1
	} else if next < -1 {
		next = n - 1
	}
	a.q.Proc = int32(next)
	if a.q.Thread != analysis.NoThread && a.q.Proc >= 0 && a.M.Threads[a.q.Thread].Proc != a.q.Proc {
		a.q.Thread = analysis.NoThread
	}
	a.cursor, a.gcursor = 0, 0
}

func (a *App) procLabel() string {
	if a.q.Proc < 0 || int(a.q.Proc) >= len(a.M.Procs) {
		return "All"
	}
	return a.M.ProcLabel(int(a.q.Proc))
}

// enter: in the list, jump to the group of the selected record; in group
// mode, back to the group's example record; in the thread pane, filter by
// the thread under the cursor.
func (a *App) enter() {
	a.refresh()
	if a.focus == PaneThreads {
		order := a.M.ThreadOrder(a.thSort, a.thDesc, a.q.Proc)
		if a.tcursor < len(order) {
			a.q.Thread = uint32(order[a.tcursor])
			a.focus = PaneList
			a.cursor = 0
		}
		return
	}
	if a.groupMode {
		if a.gcursor >= len(a.groups) {
			return
		}
		ex := a.groups[a.gcursor].Example
		a.groupMode = false
		a.refresh()
		a.cursor = indexOf(a.sel, ex, 0)
		a.follow = false
		return
	}
	if a.cursor >= len(a.sel) {
		return
	}
	st := a.M.Stack[a.sel[a.cursor]]
	a.groupMode = true
	a.hist = false
	a.refresh()
	for k := range a.groups {
		if a.groups[k].Stack == st {
			a.gcursor = k
		}
	}
	a.follow = false
}

func (a *App) startPrompt(label, initial string, done func(a *App, s string)) {
	a.prompt = &prompt{label: label, text: []rune(initial), done: done}
}

func (a *App) promptKey(ev *tcell.EventKey) {
	p := a.prompt
	switch ev.Key() {
	case tcell.KeyEscape:
		a.prompt = nil
	case tcell.KeyEnter:
		a.prompt = nil
		p.done(a, string(p.text))
	case tcell.KeyBackspace, tcell.KeyBackspace2:
		if len(p.text) > 0 {
			p.text = p.text[:len(p.text)-1]
		}
	case tcell.KeyCtrlU:
		p.text = p.text[:0]
	case tcell.KeyUp:
		if p.recall != "" {
			p.text = []rune(p.recall)
		}
	case tcell.KeyRune:
		if len(p.text) < 256 {
			p.text = append(p.text, ev.Rune())
		}
	}
}

// HandleEvent processes one tcell event and redraws. It returns false once
// the user quit.
func (a *App) HandleEvent(ev tcell.Event) bool {
	a.Mu.Lock()
	defer a.Mu.Unlock()
	switch ev := ev.(type) {
	case *tcell.EventKey:
		a.message = ""
		switch {
		case a.prompt != nil:
			a.promptKey(ev)
		case a.help:
			a.helpKey(ev)
		case a.viewKey(ev):
		default:
			a.dispatch(ev)
		}
	case *tcell.EventResize:
		a.scr.Sync()
	}
	if a.quit {
		return false
	}
	a.draw()
	return true
}

// Draw redraws the screen.
func (a *App) Draw() {
	a.Mu.Lock()
	defer a.Mu.Unlock()
	a.draw()
}

// Run is the event loop. Redraws for new data arrive as interrupt events
// (see Notify).
func (a *App) Run() {
	a.Draw()
	for {
		ev := a.scr.PollEvent()
		if ev == nil {
			return
		}
		if !a.HandleEvent(ev) {
			return
		}
	}
}

// Notify asks for a redraw from another goroutine (the loader), at most
// every 100 ms.
func (a *App) Notify() {
	a.scr.PostEvent(tcell.NewEventInterrupt(nil))
}
