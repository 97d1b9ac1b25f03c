package analysis

import "github.com/memtrace/memtrace/internal/figures"

// The leak suppressions are the figures package's, which the agent uses
// too: one definition of what a suppression hides, for the closing
// lines, the report, memview and --report-dir.
type (
	Suppression = figures.Suppression
	SuppFrame   = figures.SuppFrame
)

// The suppressions' functions, under the names the readers use.
var (
	NewSuppression      = figures.NewSuppression
	BuiltinSuppressions = figures.BuiltinSuppressions
	MatchSuppression    = figures.MatchSuppression
	SuppressedLine      = figures.SuppressedLine
	SuppressedFigure    = figures.SuppressedFigure
)

// SuppressedLeaks is the number and bytes of the leaks (StatusLeak) whose
// stacks sups suppress, with frames named as FrameName names them: what
// memview takes out of its leak figure, as the report does.
func (m *Model) SuppressedLeaks(sups []*Suppression) (n int64, bytes uint64) {
	m.eachSuppressedLeak(sups, func(id uint32) {
		n++
		bytes = satAdd(bytes, m.Size[id])
	})
	return n, bytes
}

// eachSuppressedLeak calls f with each leaked record a suppression of sups
// takes out, deciding each stack once.
func (m *Model) eachSuppressedLeak(sups []*Suppression, f func(id uint32)) {
	if len(sups) == 0 {
		return
	}
	byStack := map[uint32]bool{}
	var fr []SuppFrame
	for i := range m.TS {
		id := uint32(i)
		st := m.Stack[id]
		if st == 0 || m.Status(id) != StatusLeak {
			continue
		}
		sup, ok := byStack[st]
		if !ok {
			sup, fr = m.stackSuppressed(sups, st, fr[:0])
			byStack[st] = sup
		}
		if sup {
			f(id)
		}
	}
}

// ThreadSuppressedLeaks is SuppressedLeaks per thread, indexed as
// m.Threads: the per-thread table takes them out of each thread's leaks,
// as the report takes them out of its total.
func (m *Model) ThreadSuppressedLeaks(sups []*Suppression) (n []int64, bytes []uint64) {
	n, bytes = make([]int64, len(m.Threads)), make([]uint64, len(m.Threads))
	m.eachSuppressedLeak(sups, func(id uint32) {
		t := m.Thread[id]
		n[t]++
		bytes[t] = satAdd(bytes[t], m.Size[id])
	})
	return n, bytes
}

// StackSuppressed reports whether sups suppress a leak with stack st:
// memview drops such blocks from its Leaks filter, as the report does
// (callers cache the answer by stack; it demangles every frame).
func (m *Model) StackSuppressed(sups []*Suppression, st uint32) bool {
	if st == 0 || len(sups) == 0 {
		return false
	}
	sup, _ := m.stackSuppressed(sups, st, nil)
	return sup
}

func (m *Model) stackSuppressed(sups []*Suppression, st uint32, fr []SuppFrame) (bool, []SuppFrame) {
	for _, f := range m.Frames(st) {
		x := m.Frame(f)
		fr = append(fr, SuppFrame{Name: m.FrameName(f), Mangled: x.Symbol, Module: x.Module})
	}
	return MatchSuppression(sups, fr) != nil, fr
}
