package report

import (
	"io"

	"github.com/memtrace/memtrace/internal/figures"
)

// Figures are a log's totals as the text report's summary gives them
// (figures.Figures): what memtrace's closing lines say.
type Figures = figures.Figures

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
		StillAllocated: s.alive, Suppressed: r.supd[s].leaks, SuppressedBytes: r.supd[s].bytes, Lost: s.logLost(), End: s.end,
		Untraced: s.untracedN, NotFollowed: s.notFollowedN, Caveat: figures.Caveat(s.logLost(), s.total.Leaks)}
	if s.alive {
		f.LiveWords = s.live.Words()
	}
	return f, r.stopErr()
}
