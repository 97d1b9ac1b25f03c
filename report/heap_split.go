package report

import (
	"fmt"

	"github.com/memtrace/memtrace/internal/units"
)

// The summary's peak and leaks split between the malloc family and
// mappings (mmap, mremap): heaptrack traces the former only, so its peak
// is the malloc family's own, which the split line gives as well.

// peakSplitLine is the line under the peak: its blocks by kind, and the
// malloc family's own peak; "" when the split is not known.
func peakSplitLine(s *section) string {
	if !s.split || s.total.Calls == 0 {
		return ""
	}
	h := s.total.Minus(&s.mmap)
	if s.mmap.Calls == 0 {
		// The malloc family's own peak is the peak: heaptrack's figure.
		return fmt.Sprintf("  of which malloc family %s, mmap 0B (no mapping in the log)", units.Bytes(h.PeakBytes))
	}
	l := fmt.Sprintf("  of which malloc family %s, mmap %s; the malloc family alone peaks at %s", units.Bytes(h.PeakBytes), units.Bytes(s.mmap.PeakBytes), units.Bytes(s.heapPeak))
	switch {
	case s.procs > 1:
		l += " (the sum of the processes' own)"
	case s.heapPeak > 0:
		l += " after " + secs(s.heapPeakTS)
	}
	return l + " (heaptrack, which does not trace mmap, reports that one)"
}

// leakSplitLine is the line under the leaks (or the blocks still
// allocated): the malloc family's blocks and the mappings.
func leakSplitLine(s *section) string {
	if !s.split || s.total.Calls == 0 {
		return ""
	}
	h := s.total.Minus(&s.mmap)
	return fmt.Sprintf("  of which malloc family %s (%d blocks), mmap %s (%d mappings)", units.Bytes(h.LeakedBytes), h.Leaks, units.Bytes(s.mmap.LeakedBytes), s.mmap.Leaks)
}
