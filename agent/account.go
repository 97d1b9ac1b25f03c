package agent

import (
	"slices"
	"strings"

	"github.com/memtrace/memtrace/symbols"
)

// Per-process figures for snapshots and per-process reports: current and
// peak bytes, and the call stacks holding the live bytes at the peak. The
// live set at a peak is the one just before the first free that follows
// it, so it is taken then (or at exit), not at every allocation.

// StackCost is what one call stack holds live.
type StackCost struct {
	Stack  uint64 // 0: no stack captured
	Bytes  uint64
	Blocks uint64
}

type procStats struct {
	cur, peak  uint64
	peakTS     uint64
	peakDirty  bool
	blocks     map[uint64]uint64 // live ptr -> stack id
	byStack    map[uint64]*StackCost
	peakTop    []StackCost
	allocs     uint64
	allocBytes uint64
}

func (s *Session) stats(pid uint32) *procStats {
	if s.pstats == nil {
		s.pstats = map[uint32]*procStats{}
	}
	ps := s.pstats[pid]
	if ps == nil {
		ps = &procStats{blocks: map[uint64]uint64{}, byStack: map[uint64]*StackCost{}}
		s.pstats[pid] = ps
	}
	return ps
}

func (s *Session) account(pid uint32, ts, ptr, size, stack uint64) {
	ps := s.stats(pid)
	ps.cur += size
	ps.allocs++
	ps.allocBytes += size
	if ps.cur > ps.peak {
		ps.peak, ps.peakTS, ps.peakDirty = ps.cur, ts, true
	}
	ps.blocks[ptr] = stack
	sc := ps.byStack[stack]
	if sc == nil {
		sc = &StackCost{Stack: stack}
		ps.byStack[stack] = sc
	}
	sc.Bytes += size
	sc.Blocks++
}

func (s *Session) unaccount(pid uint32, ts, ptr, size uint64) {
	ps := s.stats(pid)
	stack, ok := ps.blocks[ptr]
	if !ok {
		return
	}
	if ps.peakDirty {
		ps.peakTop = ps.top(s.cfg.PeakTopN)
		ps.peakDirty = false
	}
	delete(ps.blocks, ptr)
	ps.cur -= size
	if sc := ps.byStack[stack]; sc != nil {
		sc.Bytes -= size
		sc.Blocks--
		if sc.Blocks == 0 {
			delete(ps.byStack, stack)
		}
	}
}

// top returns the n stacks holding the most live bytes now.
func (ps *procStats) top(n int) []StackCost {
	out := make([]StackCost, 0, len(ps.byStack))
	for _, sc := range ps.byStack {
		out = append(out, *sc)
	}
	slices.SortFunc(out, func(a, b StackCost) int {
		switch {
		case a.Bytes > b.Bytes:
			return -1
		case a.Bytes < b.Bytes:
			return 1
		case a.Stack < b.Stack:
			return -1
		case a.Stack > b.Stack:
			return 1
		}
		return 0
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
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
		name := f.symbol
		if name == "" {
			name = displayPath(f.module)
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
