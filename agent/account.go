package agent

import (
	"strings"

	"github.com/memtrace/memtrace/internal/peak"
	"github.com/memtrace/memtrace/symbols"
)

// Per-process figures for snapshots and per-process reports: current and
// peak bytes and the call stacks live at the peak, counted by internal/peak,
// the model `memtrace report` counts with too, so that a snapshot, a
// --report-dir file and the report of the same log agree.

// StackCost is what one call stack holds live.
type StackCost = peak.Cost

type procStats struct {
	*peak.Stacks
	allocs     uint64
	allocBytes uint64
}

func (s *Session) stats(pid uint32) *procStats {
	if s.pstats == nil {
		s.pstats = map[uint32]*procStats{}
	}
	ps := s.pstats[pid]
	if ps == nil {
		ps = &procStats{Stacks: peak.NewStacks(s.cfg.PeakTopN)}
		s.pstats[pid] = ps
	}
	return ps
}

func (s *Session) account(pid uint32, ts, ptr, size, stack uint64) {
	ps := s.stats(pid)
	ps.allocs++
	ps.allocBytes += size
	ps.Alloc(ptr, size, stack, ts)
}

func (s *Session) unaccount(pid uint32, ptr uint64) {
	s.stats(pid).Free(ptr)
}

// StackText names a stack's frames, innermost first, demangled, for
// snapshots and reports: "f < g < main".
func (s *Session) StackText(id uint64, max int) string {
	si := s.stacks[id]
	if si == nil {
		return "(no stack: use --stack-depth)"
	}
	if !si.resolved {
		s.resolve(si)
	}
	var parts []string
	for i, f := range si.frames {
		if i == max {
			parts = append(parts, "...")
			break
		}
		name := f.Symbol
		if name == "" {
			name = displayPath(f.Module)
		} else {
			name = symbols.Demangle(name)
		}
		parts = append(parts, name)
	}
	if len(parts) == 0 {
		return "(unresolved)"
	}
	return strings.Join(parts, " < ")
}
