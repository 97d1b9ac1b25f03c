package analysis

import (
	"cmp"
	"slices"
)

// A rate in bytes per second is an extrapolation: over a few microseconds
// it turns 3 KB into tens of MB/s. So a group has a rate only when its
// allocations span at least RateMinSpan, or at least RateMinCount of them
// span at least RateMinBurst; otherwise memview shows "-".
const (
	RateMinSpan  = 1_000_000 // µs
	RateMinCount = 10
	RateMinBurst = 100_000 // µs
)

// MeaningfulRate is the group's bytes per second over the span of its
// allocations, and false when that span is too short to say (see
// RateMinSpan).
func (g *Group) MeaningfulRate() (float64, bool) {
	if g.Count < 2 || g.Last <= g.First {
		return 0, false
	}
	span := g.Last - g.First
	if span < RateMinSpan && (g.Count < RateMinCount || span < RateMinBurst) {
		return 0, false
	}
	return float64(g.Total) / (float64(span) / 1e6), true
}

// SortGroupsByRate orders groups by MeaningfulRate (Groups' GroupByRate
// orders by the raw rate); groups without a rate count as the lowest.
func SortGroupsByRate(gs []Group, desc bool) {
	key := func(g *Group) float64 {
		if r, ok := g.MeaningfulRate(); ok {
			return r
		}
		return -1
	}
	slices.SortStableFunc(gs, func(a, b Group) int {
		c := cmp.Compare(key(&a), key(&b))
		if c == 0 {
			c = cmp.Compare(b.Stack, a.Stack) // as Groups breaks ties
		}
		if desc {
			return -c
		}
		return c
	})
}

// maxListedThreads bounds the threads a StackThreads names; N still
// counts them all.
const maxListedThreads = 16

// StackThreads is the threads that made a call stack's allocations within
// a selection: N of them, the first maxListedThreads (by thread index)
// listed.
type StackThreads struct {
	N       int
	Threads []uint32
}

// ThreadsByStack counts, for each call stack in sel, the distinct threads
// that allocated through it: a call site shared by threads is not labelled
// with one of them. One pass; a set per stack only past maxListedThreads.
func (m *Model) ThreadsByStack(sel []uint32) map[uint32]StackThreads {
	type acc struct {
		stack uint32
		ids   []uint32
		set   map[uint32]struct{}
	}
	// Per stack: the last thread seen+1 (runs of one thread cost one
	// compare) and a slot in accs (a slice index, not a map lookup).
	last := make([]uint32, m.NumStacks())
	slot := make([]int32, m.NumStacks())
	var accs []acc
	for _, i := range sel {
		s, t := m.Stack[i], m.Thread[i]
		if int(s) >= len(last) {
			continue // not a stack of this model: nothing to name
		}
		if last[s] == t+1 {
			continue
		}
		last[s] = t + 1
		k := slot[s] - 1
		if k < 0 {
			k = int32(len(accs))
			slot[s] = k + 1
			accs = append(accs, acc{stack: s})
		}
		a := &accs[k]
		if a.set != nil {
			a.set[t] = struct{}{}
			continue
		}
		if slices.Contains(a.ids, t) {
			continue
		}
		a.ids = append(a.ids, t)
		if len(a.ids) > maxListedThreads {
			a.set = make(map[uint32]struct{}, 2*len(a.ids))
			for _, id := range a.ids {
				a.set[id] = struct{}{}
			}
		}
	}
	out := make(map[uint32]StackThreads, len(accs))
	for k := range accs {
		a := &accs[k]
		var st StackThreads
		if a.set != nil {
			st.N = len(a.set)
			for id := range a.set {
				st.Threads = append(st.Threads, id)
			}
		} else {
			st.N = len(a.ids)
			st.Threads = a.ids
		}
		slices.Sort(st.Threads)
		if len(st.Threads) > maxListedThreads {
			st.Threads = st.Threads[:maxListedThreads]
		}
		out[a.stack] = st
	}
	return out
}
