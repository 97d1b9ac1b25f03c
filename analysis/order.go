package analysis

import (
	"cmp"
	"slices"
	"sync"
)

// SortKey orders the allocation list.
type SortKey uint8

const (
	SortTime SortKey = iota
	SortSize
	SortThread
	numSortKeys
)

func (k SortKey) String() string {
	return [...]string{"Time", "Size", "Thread"}[k]
}

// order is a cached permutation of allocation ids sorted by one key,
// extended by merging when allocations are appended.
type order struct {
	ids     []uint32
	n       int // allocations covered
	nameRev uint64
}

func (m *Model) invalidateOrders() {
	for i := range m.orders {
		m.orders[i] = order{}
	}
}

// Order returns all allocation ids sorted by key (ascending, ties in time
// then read order). The slice is cached: do not modify it.
func (m *Model) Order(key SortKey) []uint32 {
	o := &m.orders[key]
	n := len(m.TS)
	if key == SortThread && o.nameRev != m.nameRev {
		*o = order{}
	}
	if o.n == n {
		return o.ids
	}
	if key == SortTime && !m.OutOfOrder && o.n == 0 {
		// Log order is time order: the identity.
		o.ids = make([]uint32, n, n+n/4)
		for i := range o.ids {
			o.ids[i] = uint32(i)
		}
		o.n = n
		return o.ids
	}
	tail := make([]uint32, n-o.n)
	for i := range tail {
		tail[i] = uint32(o.n + i)
	}
	keyf := m.sortKeyFunc(key)
	if key != SortTime {
		// Stable radix passes over time order give ties in time order.
		radixSort(tail, func(i uint32) uint64 { return m.TS[i] })
	}
	radixSort(tail, keyf)
	switch {
	case o.n == 0:
		o.ids = tail
	case key == SortTime && !m.OutOfOrder:
		// In a log in time order, what was appended comes after.
		o.ids = append(o.ids, tail...)
	default:
		o.ids = mergeSorted(o.ids, tail, func(a, b uint32) int {
			if c := cmp.Compare(keyf(a), keyf(b)); c != 0 {
				return c
			}
			if c := cmp.Compare(m.TS[a], m.TS[b]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
	}
	o.n, o.nameRev = n, m.nameRev
	return o.ids
}

func (m *Model) sortKeyFunc(key SortKey) func(uint32) uint64 {
	switch key {
	case SortSize:
		return func(i uint32) uint64 { return m.Size[i] }
	case SortThread:
		rank := m.threadRanks()
		return func(i uint32) uint64 { return uint64(rank[m.Thread[i]]) }
	}
	return func(i uint32) uint64 { return m.TS[i] }
}

// threadRanks orders threads by name, then tid.
func (m *Model) threadRanks() []uint32 {
	idx := make([]int, len(m.Threads))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := cmp.Compare(m.Threads[a].Name, m.Threads[b].Name); c != 0 {
			return c
		}
		return cmp.Compare(m.Threads[a].TID, m.Threads[b].TID)
	})
	rank := make([]uint32, len(idx))
	for r, i := range idx {
		rank[i] = uint32(r)
	}
	return rank
}

func mergeSorted(a, b []uint32, less func(a, b uint32) int) []uint32 {
	out := make([]uint32, 0, len(a)+len(b)+len(b)/2)
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if less(b[j], a[i]) < 0 {
			out = append(out, b[j])
			j++
		} else {
			out = append(out, a[i])
			i++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// radixSort sorts ids stably by key with LSD byte passes, skipping bytes
// in which all keys agree: a few passes over millions of ids instead of a
// comparison sort. Keys are looked up again in every pass rather than
// kept beside the ids: for memview's orders of 5M allocations that is
// 20 MB of scratch instead of 100.
func radixSort(ids []uint32, key func(uint32) uint64) {
	n := len(ids)
	if n < 2 {
		return
	}
	if n < 256 {
		slices.SortStableFunc(ids, func(a, b uint32) int { return cmp.Compare(key(a), key(b)) })
		return
	}
	var or, and uint64 = 0, ^uint64(0)
	for _, id := range ids {
		k := key(id)
		or |= k
		and &= k
	}
	diff := or ^ and
	if diff == 0 {
		return
	}
	src, dst := ids, make([]uint32, n)
	for shift := uint(0); shift < 64; shift += 8 {
		if (diff>>shift)&0xff == 0 {
			continue
		}
		var count [257]int
		for _, id := range src {
			count[((key(id)>>shift)&0xff)+1]++
		}
		for i := 1; i < 257; i++ {
			count[i] += count[i-1]
		}
		for _, id := range src {
			b := (key(id) >> shift) & 0xff
			dst[count[b]] = id
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &ids[0] {
		copy(ids, src)
	}
}

// PrecomputeOrders builds every sort order of a finished model without
// holding lock (the model no longer changes once Done, and readers only
// read), then installs them under lock: the first sort by size in the
// viewer then costs no more than any other key.
func (m *Model) PrecomputeOrders(lock sync.Locker) {
	lock.Lock()
	done, n, rev := m.Done, len(m.TS), m.nameRev
	lock.Unlock()
	if !done || m.SummaryOnly {
		return
	}
	// One order at a time, each from the time order: on 5M allocations
	// the three built at once, each with its own scratch, took memview
	// from 300 to 575 MB.
	var built [numSortKeys][]uint32
	byTime := make([]uint32, n)
	for i := range byTime {
		byTime[i] = uint32(i)
	}
	if m.OutOfOrder {
		radixSort(byTime, func(i uint32) uint64 { return m.TS[i] })
	}
	built[SortTime] = byTime
	for k := SortTime + 1; k < numSortKeys; k++ {
		if k == SortThread && len(m.Threads) <= 1 {
			// One thread: its order is the time order (orders are
			// read only, so they can share it).
			built[k] = byTime
			continue
		}
		// Stable passes over time order give ties in time order.
		ids := slices.Clone(byTime)
		radixSort(ids, m.sortKeyFunc(k))
		built[k] = ids
	}
	lock.Lock()
	defer lock.Unlock()
	if len(m.TS) != n || m.nameRev != rev {
		return // changed meanwhile: Order builds what it needs
	}
	for k := range built {
		if m.orders[k].n != n {
			m.orders[k] = order{ids: built[k], n: n, nameRev: rev}
		}
	}
}
