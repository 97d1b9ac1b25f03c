package analysis

import (
	"cmp"
	"slices"

	"github.com/memtrace/memtrace/logfmt"
)

// Lost records. When the tracer's ring buffer is full it drops records and
// says how many ([memtrace] lost). A dropped free leaves its block live in
// the log, so without more care every such block would be reported as a
// leak. A block is known to have been freed when a later allocation of the
// same kind in its process got memory the block still held: the allocator
// does not hand out memory in use. Such a block is superseded (a bit per
// allocation id), and IsUnknown says what becomes of it.
//
// Superseded is decided in two steps: while the log is read, a later
// allocation at the same address (cheap, and what a reused tcache or
// fastbin chunk looks like); once the log has ended and only when it
// reports lost records, a later allocation overlapping any byte of the
// block (memory coalesced and split again). Heap blocks and mappings are
// kept apart: a program's own allocator may hand out blocks inside a
// region it mmapped, and that proves nothing.

// isMapping tells mappings (mmap, mremap) from heap blocks.
func isMapping(op uint8) bool {
	return op == uint8(logfmt.OpMmap) || op == uint8(logfmt.OpMremap)
}

// markSuperseded records that allocation id's free is missing from the log.
func (m *Model) markSuperseded(id uint32) {
	if bitGet(m.superseded, id) || m.FreeThread[id] != NoThread {
		return
	}
	bitSet(m.superseded, id)
	t := &m.Threads[m.Thread[id]]
	t.supCount++
	t.sup.add(m.Size[id])
}

// supersede marks what a new allocation of kind op at a live address
// proves freed: old (the address's current block) or, when old is of the
// other kind, the newest block of op's kind among dups. The blocks under
// those were marked when they were covered in turn.
func (m *Model) supersede(old int32, dups []int32, op uint8) {
	kind := isMapping(op)
	if isMapping(m.Op[old]) == kind {
		m.markSuperseded(uint32(old))
		return
	}
	for k := len(dups) - 1; k >= 0; k-- {
		if isMapping(m.Op[dups[k]]) == kind {
			m.markSuperseded(uint32(dups[k]))
			return
		}
	}
}

// supersedeTop is supersede for rematch's stack of live blocks of one
// address, newest last.
func (m *Model) supersedeTop(live []int32, op uint8) {
	kind := isMapping(op)
	for k := len(live) - 1; k >= 0; k-- {
		if isMapping(m.Op[live[k]]) == kind {
			m.markSuperseded(uint32(live[k]))
			return
		}
	}
}

// overlapGroup is the blocks of one process and kind still live at the end.
type overlapGroup struct {
	cands  []uint32 // allocation ids, by address
	coords []uint64 // the ends of their ranges, sorted, distinct
	tree   []uint32 // over the elementary ranges between coords: newest allocation (rank+1) touching each
	size   int      // leaves of tree
}

// blockEnd is the end of allocation i's range: at least one byte, so that
// malloc(0)'s unique pointer counts, and no wrap at the top of memory.
func (m *Model) blockEnd(i uint32) uint64 {
	p, z := m.Ptr[i], max(m.Size[i], 1)
	if e := p + z; e > p {
		return e
	}
	return ^uint64(0)
}

// markOverlaps marks the blocks still live at the end of a log with lost
// records that a later allocation of the same kind overlaps. Per process
// and kind, the candidates' ranges cut the address space into elementary
// ranges; every allocation records its time rank on the ranges it
// touches (range maximum, in a segment tree); a candidate is superseded
// when a range it covers was touched by an allocation newer than it.
// O(allocations × log candidates).
func (m *Model) markOverlaps() {
	if m.LostEvents <= 0 || m.SummaryOnly || len(m.TS) == 0 || uint64(len(m.TS)) >= 1<<32-1 {
		return
	}
	// A group per process and kind: slot 2*proc (+1 for mappings).
	slot := func(i uint32) int {
		k := 2 * int(max(m.Threads[m.Thread[i]].Proc, 0))
		if isMapping(m.Op[i]) {
			k++
		}
		return k
	}
	groups := make([]*overlapGroup, 2*max(len(m.Procs), 1))
	found := false
	for i := range m.TS {
		id := uint32(i)
		if m.FreeThread[id] != NoThread || m.Ptr[id] == 0 || bitGet(m.superseded, id) {
			continue
		}
		k := slot(id)
		if groups[k] == nil {
			groups[k] = &overlapGroup{}
		}
		groups[k].cands = append(groups[k].cands, id)
		found = true
	}
	if !found {
		return
	}
	// Time rank: the log's order when it is in time order, else by time
	// stamp and read order.
	var rank []uint32
	if m.OutOfOrder {
		rank = make([]uint32, len(m.TS))
		for r, id := range m.Order(SortTime) {
			rank[id] = uint32(r)
		}
	}
	rankOf := func(i uint32) uint32 {
		if rank != nil {
			return rank[i] + 1
		}
		return i + 1
	}
	for _, g := range groups {
		if g == nil {
			continue
		}
		for _, c := range g.cands {
			g.coords = append(g.coords, m.Ptr[c], m.blockEnd(c))
		}
		slices.Sort(g.coords)
		g.coords = slices.Compact(g.coords)
		g.size = 1
		for g.size < len(g.coords)-1 {
			g.size <<= 1
		}
		g.tree = make([]uint32, 2*g.size)
	}
	// The elementary ranges [coords[t], coords[t+1]) that [a, e) touches.
	span := func(g *overlapGroup, a, e uint64) (int, int) {
		lo, _ := slices.BinarySearchFunc(g.coords, a, func(c, a uint64) int { // first coord > a
			if c <= a {
				return -1
			}
			return 1
		})
		hi, _ := slices.BinarySearch(g.coords, e) // first coord >= e
		return max(lo-1, 0), min(hi, len(g.coords)-1)
	}
	for i := range m.TS {
		id := uint32(i)
		if m.Ptr[id] == 0 {
			continue
		}
		g := groups[slot(id)]
		if g == nil {
			continue
		}
		lo, hi := span(g, m.Ptr[id], m.blockEnd(id))
		v := rankOf(id)
		for l, r := lo+g.size, hi+g.size; l < r; l, r = l>>1, r>>1 {
			if l&1 == 1 {
				g.tree[l] = max(g.tree[l], v)
				l++
			}
			if r&1 == 1 {
				r--
				g.tree[r] = max(g.tree[r], v)
			}
		}
	}
	for _, g := range groups {
		if g == nil {
			continue
		}
		// Push the marks down to the leaves, then build range maxima.
		for n := 1; n < g.size; n++ {
			g.tree[2*n] = max(g.tree[2*n], g.tree[n])
			g.tree[2*n+1] = max(g.tree[2*n+1], g.tree[n])
		}
		for n := g.size - 1; n >= 1; n-- {
			g.tree[n] = max(g.tree[2*n], g.tree[2*n+1])
		}
		slices.SortFunc(g.cands, func(a, b uint32) int { return cmp.Compare(m.Ptr[a], m.Ptr[b]) })
		for _, c := range g.cands {
			lo, hi := span(g, m.Ptr[c], m.blockEnd(c))
			var newest uint32
			for l, r := lo+g.size, hi+g.size; l < r; l, r = l>>1, r>>1 {
				if l&1 == 1 {
					newest = max(newest, g.tree[l])
					l++
				}
				if r&1 == 1 {
					r--
					newest = max(newest, g.tree[r])
				}
			}
			if newest > rankOf(c) {
				m.markSuperseded(c)
			}
		}
	}
}
