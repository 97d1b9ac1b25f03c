package analysis

import "github.com/memtrace/memtrace/internal/figures"

// Live is what the blocks a process still had when its log ended are:
// the figures package's, whose one decision (figures.EndOf) the agent
// makes too for the log it writes.
type Live = figures.Live

const (
	LiveLeaked   = figures.LiveLeaked
	LiveDetached = figures.LiveDetached
	LiveCut      = figures.LiveCut
)

// Cut reports whether the log ends before its tracer ended it: the input
// stopped early (Model.InputCut), or a memtrace log (its header read) has
// no summary line, the tracer's last. While a log is still being written
// (memview -f) this is true until its summary comes.
func (m *Model) Cut() bool {
	return m.InputCut || (m.Header.Seen && !m.Ended)
}

// ProcEnd says how process p's run ended in the log, and what its live
// blocks are. text, as the report words it: "exited with status 0",
// "killed by SIGSEGV" (the exit line's status= or signal=, which memtrace
// writes for the program it started), "exited" (an exit line without
// either: an attached process, an older log), "cut short" (the log ends
// before the process did, see Cut), "not known" (no exit line, and the
// tracer lost records: the exit may be among them), "detached" (attached
// with -p, still running when memtrace let go), "interrupted" (started by
// memtrace, still running at a Ctrl-C: a memtrace log that ends with its
// summary but no exit line), or "" when the log does not say (memtrack's
// logs have no exit lines).
//
// Only what the log proves moves a block out of the leaks: an exit line
// makes them leaks whatever else the log says; a log that ends before
// the process did leaves them live at the cut; and a missing exit line
// proves a detach only when the tracer lost nothing (with lost records
// a started program's blocks stay leaks, with the caveat every reader
// gives for lost records, and its end is "not known"). An attached
// process is the exception: letting it go running is how a -p run ends,
// so without an exit line it was detached, and with lost records the
// text says that an exit may be among them.
func (m *Model) ProcEnd(p int) (text string, live Live) {
	if p < 0 || p >= len(m.Procs) {
		return "", LiveLeaked
	}
	pr := &m.Procs[p]
	return figures.EndOf(figures.ProcEnd{Exited: pr.Exited, HasStatus: pr.HasStatus, ExitStatus: pr.ExitStatus, ExitSignal: pr.ExitSignal, Attached: pr.Attached},
		figures.LogEnd{Cut: m.Cut(), Lost: m.LostEvents, Header: m.Header.Seen, Ended: m.Ended})
}

// RunEnd is ProcEnd's text, and exited false when the log says process
// p's live blocks are not leaks (still allocated at detach, or live at
// the cut).
func (m *Model) RunEnd(p int) (text string, exited bool) {
	text, live := m.ProcEnd(p)
	return text, live == LiveLeaked
}

// LiveOf is what the live blocks of proc (-1: of every process) are: not
// leaks only when they are not for each of those processes. A log mixing
// exited and running processes says LiveLeaked for -1: its figure holds
// real leaks. Cut wins over detached: the log ends early either way.
func (m *Model) LiveOf(proc int32) Live {
	if proc >= 0 {
		if int(proc) >= len(m.Procs) {
			return LiveLeaked
		}
		_, l := m.ProcEnd(int(proc))
		return l
	}
	out := LiveLeaked
	for p := range m.Procs {
		_, l := m.ProcEnd(p)
		if l == LiveLeaked {
			return LiveLeaked
		}
		out = max(out, l)
	}
	return out
}

// StillAllocated reports whether the live blocks of proc (-1: of every
// process) are not leaks: still allocated at detach, or live at the cut
// (LiveOf says which).
func (m *Model) StillAllocated(proc int32) bool { return m.LiveOf(proc) != LiveLeaked }
