package figures

import "strconv"

// Live is what the blocks a process still had when its log ended are.
type Live uint8

const (
	// LiveLeaked: the process exited, or the log does not say otherwise
	// (memtrack's logs): its live blocks are leaks, as docs/spec.md §4.3
	// counts them.
	LiveLeaked Live = iota
	// LiveDetached: the log says the process was let go running (a -p
	// detach, a Ctrl-C): its blocks are still allocated at detach.
	LiveDetached
	// LiveCut: the log ends before the process did (no summary line of
	// the tracer, a compressed stream cut or damaged, a read error): its
	// blocks were live at the cut, and what became of them is not in
	// the log.
	LiveCut
)

// Words name the blocks for people, as every reader prints them.
func (l Live) Words() string {
	switch l {
	case LiveDetached:
		return "still allocated at detach"
	case LiveCut:
		return "live at the cut"
	}
	return "leaked"
}

// LogEnd is what EndOf needs of a log: whether it was cut, the
// records its tracer lost, and whether its header and summary were read.
type LogEnd struct {
	Cut           bool
	Lost          int64
	Header, Ended bool
}

// ProcEnd is what the log's process lines say of a process's end (proc
// event=exit status=/signal=, event=attach).
type ProcEnd struct {
	Exited     bool
	HasStatus  bool
	ExitStatus int
	ExitSignal string
	Attached   bool
}

// EndOf says how process pr's run ended in a log that ended as l, and
// what its live blocks are (analysis.Model.ProcEnd words the cases): the
// one decision, which the agent makes too for the log it writes.
func EndOf(pr ProcEnd, l LogEnd) (text string, live Live) {
	switch {
	case pr.Exited && pr.ExitSignal != "":
		return "killed by " + pr.ExitSignal, LiveLeaked
	case pr.Exited && pr.HasStatus:
		return "exited with status " + strconv.Itoa(pr.ExitStatus), LiveLeaked
	case pr.Exited:
		return "exited", LiveLeaked
	case l.Cut:
		return "cut short (the log ends before the process did)", LiveCut
	case pr.Attached && l.Lost > 0:
		return "detached (or exited: the tracer lost records, an exit line may be among them)", LiveDetached
	case pr.Attached:
		return "detached", LiveDetached
	case l.Lost > 0 && l.Header:
		return "not known (no exit line, and the tracer lost records: the exit may be among them)", LiveLeaked
	case l.Ended && l.Header:
		return "interrupted", LiveDetached
	}
	return "", LiveLeaked
}
