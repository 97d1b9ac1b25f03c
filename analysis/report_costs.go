package analysis

import (
	"iter"

	"github.com/memtrace/memtrace/internal/peak"
	"github.com/memtrace/memtrace/internal/ranking"
)

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

// CostFigures are the report's figures for a set of allocations. Each
// ranking.Figure is one of them (Figure): the report's rankings pick one.
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
	// Largest is the largest single allocation of each ranking.Class:
	// merged by their maximum, not added up.
	Largest [ranking.NumClasses]uint64
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
	for k := range c.Largest {
		c.Largest[k] = max(c.Largest[k], o.Largest[k])
	}
}

// Figure is c's figure f. Every figure has its case (TestEveryFigure).
func (c *CostFigures) Figure(f ranking.Figure) uint64 {
	switch f {
	case ranking.Calls:
		return uint64(c.Calls)
	case ranking.AllocatedBytes:
		return c.Bytes
	case ranking.TemporaryCalls:
		return uint64(c.Temporary)
	case ranking.TemporaryBytes:
		return c.TempBytes
	case ranking.PeakCount:
		return uint64(c.PeakCount)
	case ranking.PeakBytes:
		return c.PeakBytes
	case ranking.Leaks:
		return uint64(c.Leaks)
	case ranking.LeakedBytes:
		return c.LeakedBytes
	case ranking.LargestBytes, ranking.LargestTemporaryBytes, ranking.LargestPeakBytes, ranking.LargestLeakedBytes:
		return c.Largest[f.Class()]
	default:
		return 0
	}
}

// fate is what became of an allocation at the end of the log.
type fate uint8

const (
	fateFreed   fate = iota
	fateUnknown      // not freed in the log, its free lost (StatusUnknown)
	fateLeaked
)

// count adds one allocation of sz bytes to c: temp, it is temporary;
// atPeak, live at its process's peak.
func (c *CostFigures) count(sz uint64, temp, atPeak bool, f fate) {
	c.Calls++
	c.Bytes = satAdd(c.Bytes, sz)
	c.Largest[ranking.All] = max(c.Largest[ranking.All], sz)
	if temp {
		c.Temporary++
		c.TempBytes = satAdd(c.TempBytes, sz)
		c.Largest[ranking.Temporary] = max(c.Largest[ranking.Temporary], sz)
	}
	if atPeak {
		c.PeakCount++
		c.PeakBytes = satAdd(c.PeakBytes, sz)
		c.Largest[ranking.AtPeak] = max(c.Largest[ranking.AtPeak], sz)
	}
	switch f {
	case fateUnknown:
		c.Unknown++
		c.UnknownBytes = satAdd(c.UnknownBytes, sz)
	case fateLeaked:
		c.Leaks++
		c.LeakedBytes = satAdd(c.LeakedBytes, sz)
		c.Largest[ranking.Leaked] = max(c.Largest[ranking.Leaked], sz)
	}
}

// fateOf is what became of allocation id; leaks, its thread's blocks
// left unfreed are leaks.
func (m *Model) fateOf(id uint32, leaks bool) fate {
	switch {
	case m.FreeThread[id] != NoThread:
		return fateFreed
	case m.IsUnknown(id):
		return fateUnknown
	case leaks:
		return fateLeaked
	}
	return fateFreed
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
	ev := m.eventOrder() // built once: it may sort
	w := m.walkPeaks(ev)
	c.peak = m.peakSet(w, ev)
	f := newFolder(m)
	for p := range m.Procs {
		pc := ProcCosts{Proc: int32(p), PeakTS: w.live[p].PeakTS(), HeapPeak: w.heap[p].Peak(), HeapPeakTS: w.heap[p].PeakTS()}
		if !f.fold(&pc, c, f.byProc[p]) {
			continue
		}
		// The stacks' peak bytes add up to the walk's peak (one live set).
		pc.PeakBytes = w.live[p].Peak()
		c.Procs = append(c.Procs, pc)
	}
	return c
}

// peakWalk is the first pass over the events in time order: each
// process's live bytes, its malloc family's alone, and the event at which
// each reached its peak.
type peakWalk struct {
	live, heap []peak.Live // heap: the malloc family's alone
	peakPos    []int       // the event at which each process first reached its peak; -1: none
	early      []uint64    // bitset by allocation id: freed before the allocation came in order (clock ties across threads)
}

func (m *Model) walkPeaks(ev iter.Seq2[int, uint32]) *peakWalk {
	words := (len(m.TS) + 63) / 64
	np := len(m.Procs)
	w := &peakWalk{live: make([]peak.Live, np), heap: make([]peak.Live, np), peakPos: make([]int, np), early: make([]uint64, words)}
	for p := range w.peakPos {
		w.peakPos[p] = -1
	}
	seen := make([]uint64, words)
	for k, e := range ev {
		id := e &^ freeEvent
		p := m.Threads[m.Thread[id]].Proc
		if e&freeEvent == 0 {
			if bitGet(w.early, id) {
				continue
			}
			bitSet(seen, id)
			if w.live[p].Alloc(m.Size[id], m.TS[id]) {
				w.peakPos[p] = k
			}
			if !isMapping(m.Op[id]) {
				w.heap[p].Alloc(m.Size[id], m.TS[id])
			}
			continue
		}
		if !bitGet(seen, id) {
			bitSet(w.early, id)
			continue
		}
		w.live[p].Free(m.Size[id])
		if !isMapping(m.Op[id]) {
			w.heap[p].Free(m.Size[id])
		}
	}
	return w
}

// peakSet is the live set at each process's peak, a bitset by allocation
// id: the events replayed up to it.
func (m *Model) peakSet(w *peakWalk, ev iter.Seq2[int, uint32]) []uint64 {
	set := make([]uint64, len(w.early))
	last := -1
	for _, k := range w.peakPos {
		last = max(last, k)
	}
	for k, e := range ev {
		if k > last {
			break
		}
		id := e &^ freeEvent
		if k > w.peakPos[m.Threads[m.Thread[id]].Proc] {
			continue
		}
		if e&freeEvent != 0 {
			bitClear(set, id)
		} else if !bitGet(w.early, id) {
			bitSet(set, id)
		}
	}
	return set
}

// folder folds allocations per process and stack: a slot per stack id,
// reset between processes, so that no map is touched per allocation.
type folder struct {
	m      *Model
	slot   []int32 // stack id → its StackCost + 1
	opSlot [256]int32
	byProc [][]int // each process's threads
}

func newFolder(m *Model) *folder {
	f := &folder{m: m, slot: make([]int32, m.NumStacks()), byProc: make([][]int, len(m.Procs))}
	for t := range m.Threads {
		if p := m.Threads[t].Proc; p >= 0 && int(p) < len(m.Procs) {
			f.byProc[p] = append(f.byProc[p], t)
		}
	}
	return f
}

// fold sets pc's span, figures and stacks from the allocations of
// threads; false: they made none.
func (f *folder) fold(pc *ProcCosts, c *Costs, threads []int) bool {
	m := f.m
	var stacks []StackCost
	first := true
	for _, t := range threads {
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
			k := f.slotOf(&stacks, m.Stack[id], m.Op[id])
			sz, temp, atPeak, fate := m.Size[id], m.Temporary(id), bitGet(c.peak, id), m.fateOf(id, leaks)
			if isMapping(m.Op[id]) {
				pc.Mmap.count(sz, temp, atPeak, fate)
			}
			stacks[k].count(sz, temp, atPeak, fate)
		}
	}
	for k := range stacks {
		sc := &stacks[k]
		if sc.Stack == 0 {
			f.opSlot[sc.Op] = 0
		} else {
			f.slot[sc.Stack] = 0
		}
		pc.CostFigures.Add(&sc.CostFigures)
	}
	pc.Stacks = stacks
	return len(stacks) > 0
}

// slotOf is the place in stacks of stack s (of op, for allocations
// without frames), added when it has none yet.
func (f *folder) slotOf(stacks *[]StackCost, s uint32, op uint8) int32 {
	p, key := &f.opSlot[op], StackCost{Op: op}
	if s != 0 {
		p, key = &f.slot[s], StackCost{Stack: s, Op: NoOp}
	}
	if *p == 0 {
		*stacks = append(*stacks, key)
		*p = int32(len(*stacks))
	}
	return *p - 1
}
