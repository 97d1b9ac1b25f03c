package analysis

import (
	"iter"
	"runtime/debug"
	"slices"
	"unsafe"
)

// The model's columns are grown here, not by append. append grows every
// column in the same call once they are full, so for an instant each one
// exists twice, and the old copies stay resident until the runtime returns
// their pages: memtrace report on 5M allocations peaked at 533 MB RSS for
// 300 MB of columns. Growing them one at a time by an eighth, handing each
// old copy back to the OS before the next, keeps the peak near the
// columns themselves.

// releaseBytes is the size of an old column from which regrow hands its
// memory back at once (a forced collection: cheap, the columns hold no
// pointers).
const releaseBytes = 8 << 20

// nextCap is the capacity a full column of capacity c grows to.
func nextCap(c int) int {
	if c < 1<<16 {
		return max(2*c, 256)
	}
	return c + c/8
}

// regrow gives *s capacity n (at least), keeping its contents.
func regrow[T uint8 | uint32 | uint64](s *[]T, n int) {
	if cap(*s) >= n {
		return
	}
	old := *s
	ns := make([]T, len(old), n)
	adviseHuge(ns)
	prefault(ns, 0, len(old))
	copy(ns, old)
	*s = ns
	var z T
	if cap(old)*int(unsafe.Sizeof(z)) >= releaseBytes {
		debug.FreeOSMemory()
	}
}

// shrink gives *s the capacity of its length when more than an eighth of
// it is unused: the columns were reserved from the file's size (an
// estimate of its allocations) and grow by an eighth: a finished model
// need not keep that slack through the report's passes.
func shrink[T any](s *[]T) {
	old := *s
	if cap(old)-len(old) <= len(old)/8+1024 {
		return
	}
	if release(old[len(old):cap(old)]) {
		*s = old[:len(old):len(old)]
		return
	}
	ns := make([]T, len(old))
	adviseHuge(ns)
	prefault(ns, 0, len(old))
	copy(ns, old)
	*s = ns
}

// sampleText is how much of a log of known size Stream applies before it
// reserves the columns for the whole log (reserveAhead): enough lines to
// tell how many allocations a megabyte of this log holds.
const sampleText = 8 << 20

// reserveAhead reserves the columns, and each thread's index, for the
// whole log once its first sampleText (or sixteenth) is applied, from the
// allocations that text held. Reserving from the size alone had to
// assume the densest log: the columns of a usual one were then half
// empty, and trim copied every column to shrink it.
func (m *Model) reserveAhead() {
	if m.reserved || m.sizeHint <= 0 || m.SummaryOnly || m.textRead < min(sampleText, m.sizeHint/16) {
		return
	}
	m.reserved = true
	m.Reserve(m.expected(len(m.TS), len(m.TS)))
	for i := range m.Threads {
		t := &m.Threads[i]
		regrow(&t.allocs, m.expected(len(t.allocs), len(t.allocs)))
	}
}

// expected is the capacity for a column of n entries from the first
// textRead bytes of a log of sizeHint bytes: n scaled to the whole log,
// a little over, and at least least. Past the size known (a growing
// file) it is least.
func (m *Model) expected(n, least int) int {
	if m.sizeHint <= m.textRead || m.textRead <= 0 {
		return least
	}
	est := float64(n) * float64(m.sizeHint) / float64(m.textRead)
	return max(least, int(min(est+est/32+1024, 1<<31)))
}

// prefaultStep is how many allocations' worth of each column
// prefaultColumns makes resident at a time, ahead of the appends.
const prefaultStep = 1 << 16

// prefaultColumns makes the columns' next prefaultStep entries resident
// (see prefault), called by addAlloc when it reaches m.prefaulted: the
// columns are reserved from an estimate and grow by an eighth, so only
// the part about to be written is asked for.
func (m *Model) prefaultColumns() {
	from := len(m.TS)
	to := from + prefaultStep
	prefault(m.TS, from, to)
	prefault(m.Size, from, to)
	prefault(m.Ptr, from, to)
	prefault(m.FreeTS, from, to)
	prefault(m.Thread, from, to)
	prefault(m.Stack, from, to)
	prefault(m.FreeThread, from, to)
	prefault(m.FreeStack, from, to)
	prefault(m.freeAt, from, to)
	prefault(m.Op, from, to)
	prefault(m.FreeOp, from, to)
	if m.SummaryOnly {
		prefault(m.allocAt, from, to)
	}
	m.prefaulted = to
}

// trim shrinks the finished model's columns and frame records.
func (m *Model) trim() {
	shrink(&m.TS)
	shrink(&m.Size)
	shrink(&m.Ptr)
	shrink(&m.FreeTS)
	shrink(&m.Thread)
	shrink(&m.Stack)
	shrink(&m.FreeThread)
	shrink(&m.FreeStack)
	shrink(&m.freeAt)
	shrink(&m.allocAt)
	shrink(&m.Op)
	shrink(&m.FreeOp)
	m.frames.compact()
	m.stacks.Compact()
}

// pos is allocation i's read position: the number of alloc lines read
// before it.
func (m *Model) pos(i uint32) uint32 {
	if int(i) < len(m.allocAt) {
		return m.allocAt[i]
	}
	return i
}

// ColumnBytes is the memory the model's per-allocation columns hold (their
// capacities, the per-thread indexes included), for the test that keeps
// it from growing back.
func (m *Model) columnBytes() int {
	n := 8*(cap(m.TS)+cap(m.Size)+cap(m.Ptr)+cap(m.FreeTS)) +
		4*(cap(m.Thread)+cap(m.Stack)+cap(m.FreeThread)+cap(m.FreeStack)+cap(m.freeAt)+cap(m.allocAt)) +
		cap(m.Op) + cap(m.FreeOp) + 8*cap(m.superseded)
	for i := range m.Threads {
		n += 4 * cap(m.Threads[i].allocs)
	}
	return n
}

// eventOrder yields the allocations and their matched frees in the
// report's order, numbered from 0: an allocation is its id, a free is its
// allocation's id with freeEvent set. Read order comes from the
// allocations' ids and the frees' freeAt (frees read between the same two
// alloc lines in id order: their order among themselves changes no
// figure); orphan frees are left out. A log in time order costs 4 bytes a
// free here, not the 4 an event of a materialized order plus an index.
func (m *Model) eventOrder() iter.Seq2[int, uint32] {
	n := len(m.TS)
	frees := m.freesByPos()
	if m.OutOfOrder {
		ev := make([]uint32, 0, n+len(frees))
		for e := range m.readOrder(frees) {
			ev = append(ev, e)
		}
		// Stable: ties stay in read order.
		radixSort(ev, func(e uint32) uint64 {
			if e&freeEvent != 0 {
				return m.FreeTS[e&^freeEvent]
			}
			return m.TS[e]
		})
		return slices.All(ev)
	}
	return func(yield func(int, uint32) bool) {
		k := 0
		for e := range m.readOrder(frees) {
			if !yield(k, e) {
				return
			}
			k++
		}
	}
}

// freesByPos lists the freed allocations by freeAt, ties in id order: a
// counting sort (freeAt is a read position, at most the number of
// allocations), two passes in id order, where sorting took one pass per
// byte of the positions, each looking freeAt up out of order.
func (m *Model) freesByPos() []uint32 {
	n := len(m.TS)
	start := make([]uint32, n+2) // start[p+1]: frees at position p, then where they go
	prefault(start, 0, len(start))
	nf := 0
	for i := range n {
		if m.FreeThread[i] == NoThread {
			continue
		}
		p := int(m.freeAt[i])
		if p > n {
			return m.freesSorted()
		}
		start[p+1]++
		nf++
	}
	for p := 1; p < len(start); p++ {
		start[p] += start[p-1]
	}
	frees := make([]uint32, nf)
	prefault(frees, 0, nf)
	for i := range n {
		if m.FreeThread[i] != NoThread {
			p := m.freeAt[i]
			frees[start[p]] = uint32(i)
			start[p]++
		}
	}
	return frees
}

// freesSorted is freesByPos by sorting, for positions past the count.
func (m *Model) freesSorted() []uint32 {
	var frees []uint32
	for i := range m.TS {
		if m.FreeThread[i] != NoThread {
			frees = append(frees, uint32(i))
		}
	}
	// The radix sort is stable, and frees is in id order.
	radixSort(frees, func(a uint32) uint64 { return uint64(m.freeAt[a]) })
	return frees
}

// readOrder merges the allocations with frees (sorted by freeAt) in the
// order the lines were read.
func (m *Model) readOrder(frees []uint32) iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		j := 0
		for i := 0; i <= len(m.TS); i++ {
			for j < len(frees) && int(m.freeAt[frees[j]]) <= i {
				if !yield(frees[j] | freeEvent) {
					return
				}
				j++
			}
			if i < len(m.TS) && !yield(uint32(i)) {
				return
			}
		}
	}
}
