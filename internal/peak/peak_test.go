package peak

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestLive(t *testing.T) {
	var l Live
	steps := []struct {
		alloc    bool
		size, ts uint64
		raised   bool
		cur      uint64
		peak, at uint64
	}{
		{true, 100, 10, true, 100, 100, 10},
		{true, 50, 11, true, 150, 150, 11},
		{false, 100, 0, false, 50, 150, 11},
		{true, 100, 13, false, 150, 150, 11}, // equal: the first time stays the peak's
		{true, 1, 14, true, 151, 151, 14},
		{false, 151, 0, false, 0, 151, 14},
		{true, 0, 16, false, 0, 151, 14},
	}
	for i, s := range steps {
		raised := false
		if s.alloc {
			raised = l.Alloc(s.size, s.ts)
		} else {
			l.Free(s.size)
		}
		if raised != s.raised || l.Current() != s.cur || l.Peak() != s.peak || l.PeakTS() != s.at {
			t.Fatalf("step %d: raised %v current %d peak %d at %d, want %+v", i, raised, l.Current(), l.Peak(), l.PeakTS(), s)
		}
	}
}

// A broken log (frees of more than was allocated, sums beyond 2^64) reads
// within [0, MaxBytes] and comes back exactly once the sum is sane again.
func TestLiveSaturates(t *testing.T) {
	var l Live
	l.Free(10)
	if l.Current() != 0 {
		t.Fatalf("negative sum reads %d", l.Current())
	}
	l.Alloc(15, 1)
	if l.Current() != 5 || l.Peak() != 5 {
		t.Fatalf("after -10+15: current %d peak %d", l.Current(), l.Peak())
	}
	for range 3 {
		l.Alloc(math.MaxUint64, 2)
	}
	if l.Current() != MaxBytes || l.Peak() != MaxBytes || l.PeakTS() != 2 {
		t.Fatalf("over 2^64: current %d peak %d at %d", l.Current(), l.Peak(), l.PeakTS())
	}
	for range 3 {
		l.Free(math.MaxUint64)
	}
	if l.Current() != 5 {
		t.Fatalf("back down: current %d", l.Current())
	}
}

type op struct {
	free             bool
	key, size, stack uint64
}

// replayPeak is the definition, computed the slow way: the live set by
// stack after the event that first reached the highest live bytes. A key
// allocated again before its free keeps its old block live for good (its
// free was lost); a free releases the key's newest block.
func replayPeak(ops []op, topN int) (peak, at uint64, top []Cost) {
	replay := func(ops []op, each func(i int, cur uint64)) map[uint64]*Cost {
		live := map[uint64]op{}
		by := map[uint64]*Cost{}
		var cur uint64
		for i, o := range ops {
			if o.free {
				if b, ok := live[o.key]; ok {
					delete(live, o.key)
					cur -= b.size
					by[b.stack].Bytes -= b.size
					by[b.stack].Blocks--
				}
				continue
			}
			live[o.key] = o
			cur += o.size
			if by[o.stack] == nil {
				by[o.stack] = &Cost{Stack: o.stack}
			}
			by[o.stack].Bytes += o.size
			by[o.stack].Blocks++
			each(i, cur)
		}
		return by
	}
	pos := -1
	replay(ops, func(i int, cur uint64) {
		if cur > peak {
			peak, at, pos = cur, uint64(i), i
		}
	})
	for _, c := range replay(ops[:pos+1], func(int, uint64) {}) {
		if c.Blocks > 0 {
			top = append(top, *c)
		}
	}
	slices.SortFunc(top, func(a, b Cost) int {
		if a.Bytes != b.Bytes {
			if a.Bytes > b.Bytes {
				return -1
			}
			return 1
		}
		return int(a.Stack) - int(b.Stack)
	})
	return peak, at, top[:min(topN, len(top))]
}

// TestStacksPeakMatchesReplay: on random sequences (0-byte blocks, frees
// of unknown keys, keys allocated twice) the live set Stacks took lazily is
// the one a replay up to the peak finds, and so are the peak and its time.
func TestStacksPeakMatchesReplay(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for iter := range 2000 {
		var ops []op
		for range 1 + r.IntN(60) {
			o := op{free: r.IntN(3) == 0, key: uint64(r.IntN(12)), stack: uint64(r.IntN(4))}
			if r.IntN(5) > 0 {
				o.size = uint64(1 + r.IntN(100))
			}
			ops = append(ops, o)
		}
		topN := 1 + r.IntN(5)
		s := NewStacks(topN)
		for i, o := range ops {
			if o.free {
				s.Free(o.key)
			} else {
				s.Alloc(o.key, o.size, o.stack, uint64(i))
			}
		}
		peak, at, top := replayPeak(ops, topN)
		got := s.PeakTop()
		if s.Peak() != peak || (peak > 0 && s.PeakTS() != at) || !slices.Equal(got, top) {
			t.Fatalf("iteration %d, ops %+v:\npeak %d at %d top %+v\nwant %d at %d top %+v", iter, ops, s.Peak(), s.PeakTS(), got, peak, at, top)
		}
	}
}

func TestStacksNow(t *testing.T) {
	s := NewStacks(10)
	s.Alloc(1, 100, 7, 1)
	s.Alloc(2, 300, 8, 2)
	s.Alloc(3, 50, 7, 3)
	if n, ok := s.Free(2); !ok || n != 300 {
		t.Fatalf("free of a live key: %d %v", n, ok)
	}
	if n, ok := s.Free(2); ok || n != 0 {
		t.Fatalf("second free of a key: %d %v", n, ok)
	}
	s.Alloc(1, 20, 8, 4) // key 1's free was lost: its 100 bytes stay live
	if s.Current() != 170 || s.Blocks() != 3 {
		t.Fatalf("current %d blocks %d", s.Current(), s.Blocks())
	}
	if got, want := s.Top(10), []Cost{{7, 150, 2}, {8, 20, 1}}; !slices.Equal(got, want) {
		t.Fatalf("top %+v want %+v", got, want)
	}
	if got, want := s.PeakTop(), []Cost{{8, 300, 1}, {7, 150, 2}}; !slices.Equal(got, want) || s.Peak() != 450 || s.PeakTS() != 3 {
		t.Fatalf("peak %d at %d top %+v want %+v", s.Peak(), s.PeakTS(), got, want)
	}
	if got := s.Top(1); len(got) != 1 || got[0].Stack != 7 {
		t.Fatalf("top 1: %+v", got)
	}
}
