package analysis

import "github.com/memtrace/memtrace/internal/peak"

// The figures of `memtrace report`, computed on the one model that memview
// also shows. The definitions (docs/report.md has them for users):
//
//   - Events are taken in time-stamp order, ties in read order. A memtrace
//     log is written in time order, so this is its log order; in memtrack's
//     per-thread buffered logs it is the order in which things happened,
//     and within one thread it is exactly that thread's read order.
//   - A temporary allocation is one freed by the thread that made it before
//     that thread allocates again (Model.Temporary).
//   - A process's peak is the maximum of its live bytes over its events in
//     that order (the first time it is reached), counted by internal/peak
//     as the agent's snapshots and --report-dir files are; the blocks live
//     at that moment are the peak's live set (mem_monitor's peak snapshot).
//   - A leak is an allocation whose Status is StatusLeak (docs/spec.md §4.3); one
//     whose Status is StatusUnknown (its free lost with records the
//     tracer dropped) is counted apart, as Unknown.
//   - Byte figures saturate at MaxBytes (sat.go).

// CostFigures are the report's figures for a set of allocations.
type CostFigures struct {
	Calls        int64  // allocation calls
	Bytes        uint64 // their bytes
	Temporary    int64  // of those, temporary allocations
	TempBytes    uint64
	PeakCount    int64 // blocks live at the peak
	PeakBytes    uint64
	Leaks        int64 // leaked blocks
	LeakedBytes  uint64
	Unknown      int64 // not freed in the log, their frees lost (StatusUnknown)
	UnknownBytes uint64
}

// Add adds o's figures to c.
func (c *CostFigures) Add(o *CostFigures) {
	c.Calls += o.Calls
	c.Bytes = satAdd(c.Bytes, o.Bytes)
	c.Temporary += o.Temporary
	c.TempBytes = satAdd(c.TempBytes, o.TempBytes)
	c.PeakCount += o.PeakCount
	c.PeakBytes = satAdd(c.PeakBytes, o.PeakBytes)
	c.Leaks += o.Leaks
	c.LeakedBytes = satAdd(c.LeakedBytes, o.LeakedBytes)
	c.Unknown += o.Unknown
	c.UnknownBytes = satAdd(c.UnknownBytes, o.UnknownBytes)
}

// IsZero reports whether every figure is zero.
func (c *CostFigures) IsZero() bool { return *c == CostFigures{} }

// NoOp is StackCost.Op for allocations that have frames.
const NoOp = ^uint8(0)

// StackCost is the figures of one call stack in one process. Allocations
// without frames (Stack 0) are split by their op, so that a log without
// stacks still ranks malloc against new; Op is NoOp for every other stack.
type StackCost struct {
	Stack uint32
	Op    uint8
	CostFigures
}

// ProcCosts is one process's figures and its call stacks.
type ProcCosts struct {
	Proc int32
	CostFigures
	PeakTS          uint64 // time stamp at which the peak was first reached
	FirstTS, LastTS uint64 // span of its allocations and their frees (and thread exits)
	Stacks          []StackCost
	// Mmap is the figures of its mappings (mmap, mremap) alone: the rest
	// is the malloc family's (heap_split.go). HeapPeak is the malloc
	// family's own peak, at HeapPeakTS: what a tracer of the heap alone
	// (heaptrack) reports.
	Mmap       CostFigures
	HeapPeak   uint64
	HeapPeakTS uint64
}

// Costs is the result of ReportCosts.
type Costs struct {
	Procs []ProcCosts // in Model.Procs order, processes without allocations left out
	peak  []uint64    // bitset by allocation id: live at its process's peak
}

// AtPeak reports whether allocation id is live at its process's peak.
func (c *Costs) AtPeak(id uint32) bool { return bitGet(c.peak, id) }

func bitGet(b []uint64, i uint32) bool { return int(i>>6) < len(b) && b[i>>6]&(1<<(i&63)) != 0 }
func bitSet(b []uint64, i uint32)      { b[i>>6] |= 1 << (i & 63) }
func bitClear(b []uint64, i uint32)    { b[i>>6] &^= 1 << (i & 63) }

const freeEvent = uint32(1) << 31

// ReportCosts computes the report's figures per process and per call stack
// (see the definitions at the top of this file). It is O(events) and reads
// the model only. A summary-only model has no events: it gives nothing.
func (m *Model) ReportCosts() *Costs {
	c := &Costs{}
	if m.SummaryOnly || len(m.TS) == 0 || uint64(len(m.TS)) >= uint64(freeEvent) {
		return c
	}
	n := len(m.TS)
	words := (n + 63) / 64
	c.peak = make([]uint64, words)
	seen := make([]uint64, words)
	early := make([]uint64, words) // freed before the allocation came in order (clock ties across threads)
	ev := m.eventOrder()

	np := len(m.Procs)
	live := make([]peak.Live, np)
	heap := make([]peak.Live, np) // the malloc family's alone
	peakPos := make([]int, np)
	for p := range peakPos {
		peakPos[p] = -1
	}
	for k, e := range ev {
		id := e &^ freeEvent
		p := m.Threads[m.Thread[id]].Proc
		if e&freeEvent == 0 {
			if bitGet(early, id) {
				continue
			}
			bitSet(seen, id)
			if live[p].Alloc(m.Size[id], m.TS[id]) {
				peakPos[p] = k
			}
			if !isMapping(m.Op[id]) {
				heap[p].Alloc(m.Size[id], m.TS[id])
			}
			continue
		}
		if !bitGet(seen, id) {
			bitSet(early, id)
			continue
		}
		live[p].Free(m.Size[id])
		if !isMapping(m.Op[id]) {
			heap[p].Free(m.Size[id])
		}
	}
	// The live set at each process's peak: replay up to it.
	last := -1
	for _, k := range peakPos {
		last = max(last, k)
	}
	for k, e := range ev {
		if k > last {
			break
		}
		id := e &^ freeEvent
		if k > peakPos[m.Threads[m.Thread[id]].Proc] {
			continue
		}
		if e&freeEvent != 0 {
			bitClear(c.peak, id)
		} else if !bitGet(early, id) {
			bitSet(c.peak, id)
		}
	}

	// Fold per process and stack: a slot per stack id, reset between
	// processes, so that no map is touched per allocation.
	slot := make([]int32, m.NumStacks())
	var opSlot [256]int32
	byProc := make([][]int, np)
	for t := range m.Threads {
		if p := m.Threads[t].Proc; p >= 0 && int(p) < np {
			byProc[p] = append(byProc[p], t)
		}
	}
	for p := range np {
		pc := ProcCosts{Proc: int32(p), PeakTS: live[p].PeakTS(), HeapPeak: heap[p].Peak(), HeapPeakTS: heap[p].PeakTS()}
		var stacks []StackCost
		first := true
		for _, t := range byProc[p] {
			th := &m.Threads[t]
			if len(th.allocs) == 0 {
				continue
			}
			pc.LastTS = max(pc.LastTS, th.ExitTS)
			leaks := m.threadLeaks(th)
			for _, id := range th.allocs {
				if ts := m.TS[id]; first || ts < pc.FirstTS {
					pc.FirstTS, first = ts, false
				}
				pc.LastTS = max(pc.LastTS, m.TS[id])
				if m.FreeThread[id] != NoThread {
					pc.LastTS = max(pc.LastTS, m.FreeTS[id])
				}
				s := m.Stack[id]
				var k int32
				if s == 0 {
					k = opSlot[m.Op[id]] - 1
					if k < 0 {
						k = int32(len(stacks))
						opSlot[m.Op[id]] = k + 1
						stacks = append(stacks, StackCost{Op: m.Op[id]})
					}
				} else {
					k = slot[s] - 1
					if k < 0 {
						k = int32(len(stacks))
						slot[s] = k + 1
						stacks = append(stacks, StackCost{Stack: s, Op: NoOp})
					}
				}
				sc := &stacks[k]
				sz := m.Size[id]
				if isMapping(m.Op[id]) {
					pc.Mmap.Add(m.allocFigures(id, bitGet(c.peak, id), leaks))
				}
				sc.Calls++
				sc.Bytes = satAdd(sc.Bytes, sz)
				if m.Temporary(id) {
					sc.Temporary++
					sc.TempBytes = satAdd(sc.TempBytes, sz)
				}
				if bitGet(c.peak, id) {
					sc.PeakCount++
					sc.PeakBytes = satAdd(sc.PeakBytes, sz)
				}
				switch {
				case m.FreeThread[id] != NoThread:
				case m.IsUnknown(id):
					sc.Unknown++
					sc.UnknownBytes = satAdd(sc.UnknownBytes, sz)
				case leaks:
					sc.Leaks++
					sc.LeakedBytes = satAdd(sc.LeakedBytes, sz)
				}
			}
		}
		if len(stacks) == 0 {
			continue
		}
		for k := range stacks {
			sc := &stacks[k]
			if sc.Stack == 0 {
				opSlot[sc.Op] = 0
			} else {
				slot[sc.Stack] = 0
			}
			pc.CostFigures.Add(&sc.CostFigures)
		}
		// The stacks' peak bytes add up to the walk's peak (one live set).
		pc.PeakBytes = live[p].Peak()
		pc.Stacks = stacks
		c.Procs = append(c.Procs, pc)
	}
	return c
}
