package analysis

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
)

type matchEv struct {
	ptr  uint64
	ts   uint64
	at   uint64 // read order: 2*position+1 for an allocation, 2*freeAt for a free
	proc int32
	ref  int32 // allocation id, or ^index into the free list
}

type freeRec struct {
	ts, size uint64
	hasSize  bool
	ptr      uint64
	thread   uint32
	op       uint8
	stack    uint32
	at       uint32 // Model.freeAt
}

// cmpMatchEv orders a process's events at one address by time stamp,
// then read order.
func cmpMatchEv(a, b matchEv) int {
	if c := cmp.Compare(a.proc, b.proc); c != 0 {
		return c
	}
	if c := cmp.Compare(a.ptr, b.ptr); c != 0 {
		return c
	}
	if c := cmp.Compare(a.ts, b.ts); c != 0 {
		return c
	}
	if c := cmp.Compare(a.at, b.at); c != 0 {
		return c
	}
	// Frees read between the same two alloc lines: in the order they
	// were listed, so that the result does not depend on the sort.
	return cmp.Compare(b.ref, a.ref)
}

// parallelSortMin is the fewest events sortMatchEvs splits between two
// goroutines: below it the split costs more than it saves.
const parallelSortMin = 1 << 15

// sortMatchEvs sorts evs by cmpMatchEv, on two CPUs when there are: it
// splits evs in place around the median of a sample (one pass, no copy),
// then sorts the two sides at once. The sort is most of the re-matching
// of a log that is not in time order (memtrack's), which ends its reading
// with the other CPU idle. The order is total (refs differ), so the result
// is the one a single sort gives.
func sortMatchEvs(evs []matchEv) {
	if len(evs) < parallelSortMin || runtime.GOMAXPROCS(0) < 2 {
		slices.SortFunc(evs, cmpMatchEv)
		return
	}
	var sample [255]matchEv
	for k := range sample {
		sample[k] = evs[k*(len(evs)-1)/(len(sample)-1)]
	}
	slices.SortFunc(sample[:], cmpMatchEv)
	pivot := sample[len(sample)/2]
	i := 0
	for j := range evs {
		if cmpMatchEv(evs[j], pivot) < 0 {
			evs[i], evs[j] = evs[j], evs[i]
			i++
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		slices.SortFunc(evs[:i], cmpMatchEv)
	}()
	slices.SortFunc(evs[i:], cmpMatchEv)
	wg.Wait()
}

// rematch redoes free matching for a log that is not in time order: per
// (process, address), events sorted by time stamp and read order (which is
// exact within a thread) pair each free with the allocation live before it.
func (m *Model) rematch() {
	// Slots recycled in summary mode before the log went out of order
	// hold pairs that are final.
	skip := make([]bool, len(m.TS))
	for _, id := range m.freeSlots {
		skip[id] = true
	}
	m.freeSlots = nil
	nf := 0
	for i := range m.TS {
		if m.FreeThread[i] != NoThread && !skip[i] {
			nf++
		}
	}
	frees := make([]freeRec, 0, nf+len(m.Orphans.TS))
	for i := range m.TS {
		if m.FreeThread[i] != NoThread && !skip[i] {
			frees = append(frees, freeRec{m.FreeTS[i], m.Size[i], true, m.Ptr[i], m.FreeThread[i], m.FreeOp[i], m.FreeStack[i], m.freeAt[i]})
		}
	}
	o := &m.Orphans
	for k := range o.TS {
		if o.Claimed[k] < 0 {
			frees = append(frees, freeRec{o.TS[k], o.Size[k], o.HasSize[k], o.Ptr[k], o.Thread[k], o.Op[k], o.Stack[k], o.at[k]})
		}
	}
	evs := make([]matchEv, 0, len(m.TS)+len(frees))
	for i := range m.TS {
		if m.Ptr[i] != 0 && !skip[i] {
			evs = append(evs, matchEv{m.Ptr[i], m.TS[i], 2*uint64(m.pos(uint32(i))) + 1, m.Threads[m.Thread[i]].Proc, int32(i)})
		}
	}
	for k := range frees {
		evs = append(evs, matchEv{frees[k].ptr, frees[k].ts, 2 * uint64(frees[k].at), m.Threads[frees[k].thread].Proc, ^int32(k)})
	}
	sortMatchEvs(evs)

	// Reset every free-derived figure, then rebuild it from the matching.
	for i := range m.TS {
		if skip[i] {
			continue
		}
		if m.FreeThread[i] != NoThread {
			t := &m.Threads[m.Thread[i]]
			t.Frees--
			t.subFreed(m.Size[i])
			t.LiveCount++
			t.addLive(m.Size[i])
		}
		m.FreeTS[i], m.FreeThread[i], m.FreeStack[i], m.FreeOp[i], m.freeAt[i] = 0, NoThread, 0, 0, 0
	}
	// Which blocks a later allocation superseded is decided again, in
	// time order, with the pairs.
	clear(m.superseded)
	for i := range m.Threads {
		m.Threads[i].supCount, m.Threads[i].sup = 0, wide{}
	}
	for i := range m.Procs {
		p := &m.Procs[i]
		p.live, p.dup, p.pending, p.lastFreed = ptrMap{}, nil, nil, nil
	}
	*o = Orphans{}
	m.Counts.UnmatchedFrees = 0
	// setFreed below must not track lastFreed or recycle: matching is final.
	m.OutOfOrder = false
	defer func() { m.OutOfOrder = true }()
	summary := m.SummaryOnly
	m.SummaryOnly = false
	defer func() { m.SummaryOnly = summary }()

	var live []int32
	for k := 0; k < len(evs); {
		j := k
		live = live[:0]
		for j < len(evs) && evs[j].proc == evs[k].proc && evs[j].ptr == evs[k].ptr {
			e := evs[j]
			if e.ref >= 0 {
				m.supersedeTop(live, m.Op[e.ref])
				live = append(live, e.ref)
			} else {
				f := &frees[^e.ref]
				if n := len(live); n > 0 {
					id := uint32(live[n-1])
					live = live[:n-1]
					m.setFreed(id, f.thread, f.op, f.ts, f.stack)
					m.freeAt[id] = f.at
				} else {
					m.addOrphan(f)
				}
			}
			j++
		}
		if len(live) > 0 {
			p := &m.Procs[evs[k].proc]
			p.live.set(evs[k].ptr, live[len(live)-1])
			if len(live) > 1 {
				if p.dup == nil {
					p.dup = map[uint64][]int32{}
				}
				p.dup[evs[k].ptr] = append([]int32(nil), live[:len(live)-1]...)
			}
		}
		k = j
	}
	m.invalidateOrders()
}

func (m *Model) addOrphan(f *freeRec) {
	o := &m.Orphans
	o.TS = append(o.TS, f.ts)
	o.Size = append(o.Size, f.size)
	o.HasSize = append(o.HasSize, f.hasSize)
	o.Ptr = append(o.Ptr, f.ptr)
	o.Thread = append(o.Thread, f.thread)
	o.Op = append(o.Op, f.op)
	o.Stack = append(o.Stack, f.stack)
	o.Claimed = append(o.Claimed, -1)
	o.at = append(o.at, f.at)
	m.Counts.UnmatchedFrees++
	if f.ptr != 0 {
		p := &m.Procs[m.Threads[f.thread].Proc]
		if p.pending == nil {
			p.pending = map[uint64][]int32{}
		}
		p.pending[f.ptr] = append(p.pending[f.ptr], int32(len(o.TS)-1))
	}
}
