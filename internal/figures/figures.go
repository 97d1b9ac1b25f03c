package figures

import "fmt"

// Figures are a log's totals as the text report's summary gives them
// (every process added up, the built-in suppressions applied): what
// memtrace's closing lines say. The agent computes them as it writes the
// log (agent.Session.Figures), the report from the finished log
// (report.LogFigures); the two must agree.
type Figures struct {
	Calls       int64
	PeakBytes   uint64
	Leaks       int64
	LeakedBytes uint64
	// StillAllocated: no process had exited when the log ended (a
	// detach, a Ctrl-C), or the log ends before they did: the leaks are
	// blocks still allocated, LiveWords says how (Live.Words).
	StillAllocated bool
	LiveWords      string
	// Suppressed and SuppressedBytes are the leaks the built-in
	// suppressions took out of Leaks and LeakedBytes.
	Suppressed      int64
	SuppressedBytes uint64
	Lost            int64
	// End is how the run ended ("exited with status 0"), "" for several
	// processes or when the log does not say.
	End string
	// Untraced counts the processes the log names as untraced (their
	// allocations are not in it), NotFollowed those of them that are
	// children memtrace was not asked to follow.
	Untraced, NotFollowed int64
	// Caveat is what the figures miss, the report's words, "" when the
	// tracer lost nothing: with lost records every figure is short of
	// them and a leak may be a block whose free was lost.
	Caveat string
}

// Caveat is Figures.Caveat for lost records of a log with leaks.
func Caveat(lost, leaks int64) string {
	if lost <= 0 {
		return ""
	}
	c := fmt.Sprintf("%d records lost: every figure above misses them", lost)
	if leaks > 0 {
		c += ", and a leak may be a block whose free was among them"
	}
	return c
}

// Diff names the first figure in which a and b differ, with both values,
// or returns "" when they agree.
func Diff(a, b Figures) string {
	type field struct {
		name string
		x, y any
	}
	for _, f := range []field{
		{"calls", a.Calls, b.Calls}, {"peak bytes", a.PeakBytes, b.PeakBytes}, {"leaks", a.Leaks, b.Leaks},
		{"leaked bytes", a.LeakedBytes, b.LeakedBytes}, {"still allocated", a.StillAllocated, b.StillAllocated},
		{"live words", a.LiveWords, b.LiveWords}, {"suppressed leaks", a.Suppressed, b.Suppressed},
		{"suppressed bytes", a.SuppressedBytes, b.SuppressedBytes}, {"lost", a.Lost, b.Lost},
		{"end", a.End, b.End}, {"untraced", a.Untraced, b.Untraced}, {"not followed", a.NotFollowed, b.NotFollowed},
		{"caveat", a.Caveat, b.Caveat},
	} {
		if f.x != f.y {
			return fmt.Sprintf("%s: %v against %v", f.name, f.x, f.y)
		}
	}
	return ""
}
