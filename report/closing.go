package report

import (
	"fmt"
	"io"
)

// Figures are a log's totals as the text report's summary gives them
// (every process added up, the built-in suppressions applied): what
// memtrace's closing lines say, so that they cannot disagree with
// `memtrace report` on the same log.
type Figures struct {
	Calls       int64
	PeakBytes   uint64
	Leaks       int64
	LeakedBytes uint64
	// StillAllocated: no process had exited when the log ended (a
	// detach, a Ctrl-C), or the log ends before they did: the leaks are
	// blocks still allocated, LiveWords says how (analysis.Live.Words).
	StillAllocated bool
	LiveWords      string
	Suppressed     int64
	Lost           int64
	// End is how the run ended ("exited with status 0"), "" for several
	// processes or when the log does not say.
	End string
	// Caveat is what the figures miss, the report's words, "" when the
	// tracer lost nothing: with lost records every figure is short of
	// them and a leak may be a block whose free was lost.
	Caveat string
}

// lostCaveat is Figures.Caveat for lost records of a section with leaks.
func lostCaveat(lost, leaks int64) string {
	if lost <= 0 {
		return ""
	}
	c := fmt.Sprintf("%d records lost: every figure above misses them", lost)
	if leaks > 0 {
		c += ", and a leak may be a block whose free was among them"
	}
	return c
}

// LogFigures reads the log at path as `memtrace report path` does and
// returns its summary's figures; warnings go to stderr. A log whose
// reading stopped early (cut, damaged) gives the figures of what came
// before and the error.
func LogFigures(path string, stderr io.Writer) (Figures, error) {
	defer lowGC()()
	o, err := parseArgs([]string{"--progress", "0", path}, io.Discard)
	if err != nil {
		return Figures{}, err
	}
	r, err := build(o, stderr)
	if r != nil && r.cache != nil {
		defer r.cache.Close()
	}
	if err != nil {
		return Figures{}, err
	}
	s := r.all
	f := Figures{Calls: s.total.Calls, PeakBytes: s.total.PeakBytes, Leaks: s.total.Leaks, LeakedBytes: s.total.LeakedBytes,
		StillAllocated: s.alive, Suppressed: r.supd[s].leaks, Lost: s.logLost(), End: s.end, Caveat: lostCaveat(s.logLost(), s.total.Leaks)}
	if s.alive {
		f.LiveWords = s.live.Words()
	}
	return f, r.stopErr()
}
