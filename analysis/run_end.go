package analysis

import "strconv"

// RunEnd says how process p's run ended in the log, as the report words
// it: "exited with status 0", "killed by SIGSEGV" (the exit line's status=
// or signal=, which memtrace writes for the program it started), "exited"
// (an exit line without either: an attached process, an older log),
// "detached" (attached with -p, still running when memtrace let go),
// "interrupted" (started by memtrace, still running at a Ctrl-C: a
// memtrace log that ends with its summary but no exit line), or "" when the
// log does not say (memtrack's logs have no exit lines; a log without its
// summary was cut short). exited is false only when the log says the
// process was let go running: its live blocks are still allocated, not
// leaked; otherwise they are leaks, as docs/spec.md §4.3-4.4 count them.
func (m *Model) RunEnd(p int) (text string, exited bool) {
	if p < 0 || p >= len(m.Procs) {
		return "", false
	}
	pr := &m.Procs[p]
	switch {
	case pr.Exited && pr.ExitSignal != "":
		return "killed by " + pr.ExitSignal, true
	case pr.Exited && pr.HasStatus:
		return "exited with status " + strconv.Itoa(pr.ExitStatus), true
	case pr.Exited:
		return "exited", true
	case pr.Attached:
		return "detached", false
	case m.Ended && m.Header.Seen:
		return "interrupted", false
	}
	return "", true
}

// StillAllocated reports whether the live blocks of proc (-1: of every
// process) are still allocated at detach rather than leaked: the log says
// each of those processes was let go running (RunEnd's exited is false).
// A log mixing exited and running processes says false for -1: its
// figure holds real leaks.
func (m *Model) StillAllocated(proc int32) bool {
	if proc >= 0 {
		_, exited := m.RunEnd(int(proc))
		return int(proc) < len(m.Procs) && !exited
	}
	for p := range m.Procs {
		if _, exited := m.RunEnd(p); exited {
			return false
		}
	}
	return len(m.Procs) > 0
}
