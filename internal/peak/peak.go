package peak

import (
	"math"
	"math/bits"
	"slices"
)

// MaxBytes is where figures stop; analysis.MaxBytes is the same bound.
const MaxBytes = math.MaxInt64

// Live is one process's live bytes. The zero value is ready to use.
type Live struct {
	hi, lo       uint64 // the current sum, two's complement over 128 bits
	peak, peakTS uint64
}

// Alloc adds a block of size bytes allocated at time ts and reports whether
// it raised the peak. The peak's time is the first time it was reached: an
// equal figure later does not move it.
func (l *Live) Alloc(size, ts uint64) bool {
	var c uint64
	l.lo, c = bits.Add64(l.lo, size, 0)
	l.hi += c
	if v := l.Current(); v > l.peak {
		l.peak, l.peakTS = v, ts
		return true
	}
	return false
}

// Free removes a block of size bytes.
func (l *Live) Free(size uint64) {
	var b uint64
	l.lo, b = bits.Sub64(l.lo, size, 0)
	l.hi -= b
}

// Current is the live bytes now.
func (l *Live) Current() uint64 {
	switch {
	case int64(l.hi) < 0:
		return 0
	case l.hi != 0 || l.lo > MaxBytes:
		return MaxBytes
	}
	return l.lo
}

// Peak is the highest live bytes so far, PeakTS when it was first reached
// (0 before any allocation).
func (l *Live) Peak() uint64   { return l.peak }
func (l *Live) PeakTS() uint64 { return l.peakTS }

// Cost is what one call stack holds live.
type Cost struct {
	Stack  uint64 // the user's stack id
	Bytes  uint64
	Blocks uint64
}

type block struct{ stack, size uint64 }

// Stacks is Live plus the blocks live now by key (a pointer, an
// allocation id), grouped by call stack, and the stacks live at the peak.
// The live set at a peak lasts until the next free (or the next allocation
// that does not raise the peak: a 0-byte block), so it is taken then, not at
// every allocation.
type Stacks struct {
	Live
	topN    int
	blocks  map[uint64]block
	byStack map[uint64]*Cost
	peakTop []Cost
	pending bool   // the live set now is the peak's and not taken yet
	orphans uint64 // blocks whose key was allocated again before a free
}

// NewStacks returns an empty Stacks that keeps the topN stacks holding
// the most bytes at the peak.
func NewStacks(topN int) *Stacks {
	return &Stacks{topN: topN, blocks: map[uint64]block{}, byStack: map[uint64]*Cost{}}
}

// Alloc records a block under key of size bytes from stack, allocated at
// ts. A key that is live already lost its free (records the tracer
// dropped): its block stays live under no key, as the report's model keeps
// such a block (an unknown one) live in the peak.
func (s *Stacks) Alloc(key, size, stack, ts uint64) {
	if _, ok := s.blocks[key]; ok {
		s.orphans++
	}
	if s.Live.Alloc(size, ts) {
		s.pending = true
	} else {
		s.take()
	}
	s.blocks[key] = block{stack, size}
	c := s.byStack[stack]
	if c == nil {
		c = &Cost{Stack: stack}
		s.byStack[stack] = c
	}
	c.Bytes += size
	c.Blocks++
}

// Free releases the block under key and returns its size; a key that is
// not live (allocated before tracing began, or filtered out) changes
// nothing.
func (s *Stacks) Free(key uint64) (size uint64, ok bool) {
	b, ok := s.blocks[key]
	if !ok {
		return 0, false
	}
	s.take()
	delete(s.blocks, key)
	s.Live.Free(b.size)
	if c := s.byStack[b.stack]; c != nil {
		c.Bytes -= b.size
		c.Blocks--
		if c.Blocks == 0 {
			delete(s.byStack, b.stack)
		}
	}
	return b.size, true
}

func (s *Stacks) take() {
	if s.pending {
		s.peakTop = s.Top(s.topN)
		s.pending = false
	}
}

// Blocks is the number of live blocks.
func (s *Stacks) Blocks() uint64 { return uint64(len(s.blocks)) + s.orphans }

// PeakTop is the stacks holding the most bytes at the peak, most first.
func (s *Stacks) PeakTop() []Cost {
	s.take()
	return s.peakTop
}

// Top returns the n stacks holding the most live bytes now, most first,
// ties by stack id.
func (s *Stacks) Top(n int) []Cost {
	out := make([]Cost, 0, len(s.byStack))
	for _, c := range s.byStack {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Cost) int {
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
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out
}
