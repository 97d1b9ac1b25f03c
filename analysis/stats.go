package analysis

import (
	"strconv"
	"strings"
)

// Temporary reports whether allocation i is temporary in heaptrack's sense:
// freed by its own thread before that thread allocated anything else.
func (m *Model) Temporary(i uint32) bool {
	if m.SummaryOnly || m.FreeThread[i] != m.Thread[i] {
		return false
	}
	t := &m.Threads[m.Thread[i]]
	// The thread's next allocation, by position in its own index.
	k := m.threadPos(t, i)
	if k < 0 {
		return false
	}
	return m.temporaryAt(t, k, i)
}

// temporaryAt is Temporary for allocation i, the k-th of thread t, where
// the caller walks t's index and so knows k without searching for it.
func (m *Model) temporaryAt(t *Thread, k int, i uint32) bool {
	if m.SummaryOnly || m.FreeThread[i] != m.Thread[i] {
		return false
	}
	if k+1 >= len(t.allocs) {
		return true
	}
	// Freed before the next alloc line was read.
	return m.freeAt[i] <= m.pos(t.allocs[k+1])
}

// threadPos finds allocation i in its thread's index (ids grow along it).
func (m *Model) threadPos(t *Thread, i uint32) int {
	lo, hi := 0, len(t.allocs)
	for lo < hi {
		mid := (lo + hi) / 2
		if t.allocs[mid] < i {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(t.allocs) && t.allocs[lo] == i {
		return lo
	}
	return -1
}

// StackPeak is one call stack's highest live byte count over the log.
type StackPeak struct {
	Stack uint32
	Peak  uint64 // highest live bytes of this stack's allocations
	At    uint64 // when (time stamp)
}

// StackPeaks computes, for every stack of the selection, the most bytes its
// allocations held at once: each stack's own maximum, which is not
// heaptrack's per-site "peak consumption" (each site's share of the live
// set at the process's peak, docs/report.md).
// The result is indexed by stack id; stacks absent from sel have Peak 0.
func (m *Model) StackPeaks(sel []uint32) []StackPeak {
	out := make([]StackPeak, m.NumStacks())
	for s := range out {
		out[s].Stack = uint32(s)
	}
	if len(sel) == 0 {
		return out
	}
	// Events in time order: allocations (+) and frees (−), frees first
	// at equal time stamps so that a block replaced in place is not
	// counted twice.
	type ev struct {
		ts   uint64
		id   uint32
		free bool
	}
	evs := make([]ev, 0, 2*len(sel))
	for _, i := range sel {
		evs = append(evs, ev{m.TS[i], i, false})
		if m.FreeThread[i] != NoThread {
			evs = append(evs, ev{m.FreeTS[i], i, true})
		}
	}
	ids := make([]uint32, len(evs))
	for k := range ids {
		ids[k] = uint32(k)
	}
	radixSort(ids, func(k uint32) uint64 {
		if evs[k].free {
			return 0
		}
		return 1
	})
	radixSort(ids, func(k uint32) uint64 { return evs[k].ts })
	live := make([]wide, len(out))
	for _, k := range ids {
		e := evs[k]
		s := m.Stack[e.id]
		if e.free {
			live[s].sub(m.Size[e.id])
			continue
		}
		live[s].add(m.Size[e.id])
		if v := live[s].value(); v > out[s].Peak {
			out[s].Peak, out[s].At = v, e.ts
		}
	}
	return out
}

// StackString is stack s as text, one frame per line as the log wrote it
// (module(symbol+0xoff)): a key that compares stacks across models (diff).
func (m *Model) StackString(s uint32) string {
	var b strings.Builder
	for k, f := range m.Frames(s) {
		if k > 0 {
			b.WriteByte('\n')
		}
		fr := m.Frame(f)
		b.WriteString(fr.Module)
		b.WriteByte('(')
		b.WriteString(fr.Symbol)
		b.WriteString("+0x")
		b.WriteString(strconv.FormatUint(fr.Offset, 16))
		b.WriteByte(')')
		if fr.Module == "" && fr.Symbol == "" {
			b.WriteString("[0x" + strconv.FormatUint(fr.Addr, 16) + "]")
		}
	}
	return b.String()
}
