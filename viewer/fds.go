package viewer

import (
	"strconv"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
)

// fdFilter is the descriptor view's own `f` filter: it starts on what is
// still held (open and leaked), which is what the view is for.
type fdFilter uint8

const (
	fdHeld   fdFilter = iota // open or leaked
	fdLeaks                  // leaked only
	fdOpen                   // open, process still running
	fdClosed                 // closed
	fdAll
	numFDFilters
)

func (f fdFilter) String() string {
	return [...]string{"Open+Leaked", "Leaked", "Open", "Closed", "All"}[f]
}

// fdSelect lists the descriptors the view shows, under the process and
// thread filters.
func (a *App) fdSelect() []int {
	m := a.M
	var st analysis.StatusFilter
	switch a.fdFilter {
	case fdLeaks:
		st = analysis.FilterLeaks
	case fdOpen:
		st = analysis.FilterActive
	case fdClosed:
		st = analysis.FilterFreed
	}
	ids := m.SelectFDs(st, a.q.Proc, a.q.Thread)
	if a.fdFilter == fdHeld {
		out := ids[:0]
		for _, i := range ids {
			if m.FDState(i) != analysis.FDStateClosed {
				out = append(out, i)
			}
		}
		ids = out
	}
	return ids
}

// toggleFDs switches the list pane between allocations and descriptors.
func (a *App) toggleFDs() {
	a.fdView = !a.fdView
	a.fcursor, a.ftop = 0, 0
	if a.fdView && len(a.M.Descriptors()) == 0 {
		a.message = "no descriptor lines in this log (trace with --track fd)"
	}
}

func (a *App) fdStyle(i int) (tcell.Style, string) {
	switch a.M.FDState(i) {
	case analysis.FDStateLeak:
		return stRedBold, "[L]"
	case analysis.FDStateClosed:
		return stFreed, "[C]"
	}
	return stGreen, "[O]"
}

func (a *App) fdThreadName(d *analysis.Descriptor) string {
	if d.Thread != analysis.NoThread && int(d.Thread) < len(a.M.Threads) {
		return a.M.Threads[d.Thread].Name
	}
	return strconv.FormatInt(d.TID, 10)
}

// fdTime is a descriptor time stamp on the allocations' axis; descriptor
// lines may come before the first allocation.
func (a *App) fdTime(ts uint64) string {
	if ts < a.M.MinTS {
		return Dur(0)
	}
	return Dur(ts - a.M.MinTS)
}

func (a *App) drawFDs(x0, y0, x1, y1 int) {
	m := a.M
	a.fdSel = a.fdSelect()
	a.put(x0, y0, x1, pad("St.  FD Kind     Call         Time        Thread      Path", x1-x0), a.headStyle(PaneList))
	rows := y1 - y0 - 1
	if a.fcursor >= len(a.fdSel) {
		a.fcursor = len(a.fdSel) - 1
	}
	if a.fcursor < 0 {
		a.fcursor = 0
	}
	a.ftop = scrollTo(a.fcursor, a.ftop, rows, len(a.fdSel))
	ds := m.Descriptors()
	for r := 0; r < rows; r++ {
		k := a.ftop + r
		if k >= len(a.fdSel) {
			break
		}
		i := a.fdSel[k]
		d := &ds[i]
		st, tag := a.fdStyle(i)
		if k == a.fcursor {
			st = st.Reverse(true)
		}
		path := d.Path
		if d.Size > 0 {
			path = Bytes(d.Size) + " " + d.Heap + " " + path
		}
		line := tag + " " + lpad(strconv.FormatInt(d.FD, 10), 3) + " " + pad(d.Kind, 8) + " " + pad(d.Call, 12) + " " + pad(a.fdTime(d.TS), 11) + " " + pad(a.fdThreadName(d), 11) + " " + path
		a.put(x0, y0+1+r, x1, pad(line, x1-x0), st)
	}
	if len(a.fdSel) == 0 {
		a.put(x0+1, y0+2, x1, "no descriptors ("+a.fdFilter.String()+")", stDim)
	}
}

// fdDetail is the detail pane for the descriptor under the cursor.
func (a *App) fdDetail() []styled {
	if a.fcursor >= len(a.fdSel) {
		return nil
	}
	m := a.M
	i := a.fdSel[a.fcursor]
	d := &m.Descriptors()[i]
	var out []styled
	add := func(s string, st tcell.Style) { out = append(out, styled{s, st}) }
	add("── Descriptor ─────────────", stHead)
	add("  FD      : "+strconv.FormatInt(d.FD, 10), stDefault)
	add("  Kind    : "+d.Kind, stDefault)
	add("  Call    : "+d.Call, stDefault)
	if d.Path != "" {
		add("  Path    : "+d.Path, stDefault)
	}
	if d.Cloexec {
		add("  Cloexec : yes", stDefault)
	}
	if d.Size > 0 || d.Buf > 0 {
		add("  Buffer  : #"+strconv.FormatUint(d.Buf, 10)+" "+Bytes(d.Size)+" "+d.Heap, stDefault)
	}
	add("  Opened  : "+a.fdTime(d.TS), stDefault)
	add("  Thread  : "+a.fdThreadName(d)+" ("+strconv.FormatInt(d.TID, 10)+")", stDefault)
	if d.Proc >= 0 && int(d.Proc) < len(m.Procs) {
		add("  Process : "+m.ProcLabel(int(d.Proc)), stDefault)
	}
	st, _ := a.fdStyle(i)
	add("  Status  : "+m.FDState(i).String(), st)
	if d.Closed {
		call := d.CloseCall
		if call == "" {
			call = "not logged (number reused)"
		}
		add("── Close ──────────────────", stHead)
		add("  Call    : "+call, stDefault)
		add("  Time    : "+a.fdTime(d.CloseTS), stDefault)
	}
	if d.Inherited {
		add("  inherited from the parent at fork", stDim)
	}
	if d.TracerLeak {
		add("  listed open at the process's exit", stDim)
	}
	if d.FromLeak {
		add("  its open is not in the log", stDim)
	}
	return out
}
