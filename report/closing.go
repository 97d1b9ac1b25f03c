package report

import "io"

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
	// detach, a Ctrl-C): the leaks are blocks still allocated.
	StillAllocated bool
	Suppressed     int64
	Lost           int64
	// End is how the run ended ("exited with status 0"), "" for several
	// processes or when the log does not say.
	End string
}

// LogFigures reads the log at path as `memtrace report path` does and
// returns its summary's figures; warnings go to stderr.
func LogFigures(path string, stderr io.Writer) (Figures, error) {
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
	return Figures{Calls: s.total.Calls, PeakBytes: s.total.PeakBytes, Leaks: s.total.Leaks, LeakedBytes: s.total.LeakedBytes,
		StillAllocated: s.alive, Suppressed: r.supd[s].leaks, Lost: s.logLost(), End: s.end}, nil
}
