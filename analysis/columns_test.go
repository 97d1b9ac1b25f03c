package analysis

import (
	"bytes"
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/memtrace/memtrace/logfmt"
)

// Per allocation the model keeps TS, Size, Ptr, FreeTS (8 bytes each),
// Thread, Stack, FreeThread, FreeStack, freeAt (4), Op, FreeOp (1) and a
// superseded bit: 54.125 bytes, plus 4 in its thread's index. Columns grow
// by an eighth (columns.go), so what they hold is at most 12.5 % more.
const (
	columnWidth    = 54.125
	maxBytesPerRow = (columnWidth + 4) * 1.125
)

// The columns' bytes per allocation, from their capacities, stay at the
// figure above: a new column, a wider one, or growth by append's quarter
// (5M allocations took 533 MB RSS that way) fails here.
func TestColumnBytesPerAllocation(t *testing.T) {
	for _, n := range []int{160_000, 420_000} {
		r := rand.New(rand.NewPCG(uint64(n), 3))
		data := writeEvents(genHistory(r, n, 4), false, r, false)
		m := load(t, data)
		if m.Len() < n/3 {
			t.Fatalf("%d events: only %d allocations", n, m.Len())
		}
		// Every per-allocation column is counted: the model's struct
		// has no other slice that grows with the allocations.
		width := float64(m.columnBytes()-threadIndexBytes(m)) / float64(cap(m.TS))
		if width > columnWidth+0.01 {
			t.Errorf("%d allocations: columns are %.3f bytes wide, want at most %.3f", m.Len(), width, columnWidth)
		}
		per := float64(m.columnBytes()) / float64(m.Len())
		t.Logf("%d allocations: %.2f column bytes each (capacity %d)", m.Len(), per, cap(m.TS))
		if per > maxBytesPerRow {
			t.Errorf("%d allocations: %.2f column bytes each, want at most %.2f", m.Len(), per, maxBytesPerRow)
		}
		for _, c := range []int{cap(m.Size), cap(m.Ptr), cap(m.FreeTS), cap(m.Thread), cap(m.Stack), cap(m.FreeThread), cap(m.FreeStack), cap(m.freeAt), cap(m.Op), cap(m.FreeOp)} {
			if c > cap(m.TS)+cap(m.TS)/8 {
				t.Errorf("a column has capacity %d for %d allocations (TS: %d)", c, m.Len(), cap(m.TS))
			}
		}
	}
}

func threadIndexBytes(m *Model) int {
	n := 0
	for i := range m.Threads {
		n += int(unsafe.Sizeof(uint32(0))) * cap(m.Threads[i].allocs)
	}
	return n
}

func TestNextCapGrowsByAnEighth(t *testing.T) {
	for _, c := range []int{0, 1, 255, 1 << 19, 1 << 20, 5_000_000} {
		n := nextCap(c)
		if n <= c {
			t.Errorf("nextCap(%d) = %d, does not grow", c, n)
		}
		if c >= 1<<16 && n > c+c/8 {
			t.Errorf("nextCap(%d) = %d, more than an eighth", c, n)
		}
	}
	var s []uint64
	for i := range 3 << 20 {
		if len(s) == cap(s) {
			regrow(&s, nextCap(cap(s)))
		}
		s = append(s, uint64(i))
	}
	for i, v := range s {
		if v != uint64(i) {
			t.Fatalf("regrow lost element %d: %d", i, v)
		}
	}
}

// readOrderSeeds add to the loader's corpus logs in time order whose
// frees and allocations share time stamps (a realloc in place, a block
// freed and taken again in one µs), where read order alone decides.
func readOrderSeeds() [][]byte {
	out := [][]byte{[]byte("[memtrace] header pid=1 mode=bpf\n" +
		"[memtrack] tid=1 (m) malloc ts=1 size=8 total=8 ptr=0x10\n" +
		"[memtrack] tid=2 (w) malloc ts=1 size=8 total=8 ptr=0x20\n" +
		"[memtrack] tid=1 (m) free ts=1 size=8 ptr=0x10\n" +
		"[memtrack] tid=1 (m) malloc ts=1 size=16 total=8 ptr=0x10\n" +
		"[memtrack] tid=2 (w) free ts=2 size=8 ptr=0x20\n" +
		"[memtrack] tid=2 (w) free ts=2 size=8 ptr=0x30\n")}
	for _, s := range fuzzSeeds {
		out = append(out, []byte(s))
	}
	r := rand.New(rand.NewPCG(7, 7))
	out = append(out, writeEvents(genHistory(r, 300, 3), false, r, false))
	return out
}

// The model's read order (eventOrder, Temporary) agrees with the lines as
// an independent scan reads them: every free it matched is a free line
// read after exactly freeAt alloc lines, each allocation and matched free
// comes once, and in a log in time order Temporary is "freed by its
// thread before that thread's next alloc line".
func FuzzReadOrder(f *testing.F) {
	for _, s := range readOrderSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := load(t, b)
		type freeLine struct {
			at, ts, ptr uint64
			tid         int64
		}
		frees := map[freeLine]bool{}
		sc := logfmt.NewScanner(bytes.NewReader(b))
		var l logfmt.Line
		var allocs uint64
		for sc.Scan() {
			if l.Parse(sc.Line()) != nil {
				continue
			}
			switch l.Kind {
			case logfmt.KindAlloc:
				allocs++
			case logfmt.KindFree:
				frees[freeLine{allocs, l.TS, l.Ptr, l.TID}] = true
			}
		}
		if uint64(m.Len()) != allocs {
			t.Fatalf("model has %d allocations, the scan %d alloc lines", m.Len(), allocs)
		}
		for i := range m.TS {
			if m.FreeThread[i] == NoThread {
				continue
			}
			k := freeLine{uint64(m.freeAt[i]), m.FreeTS[i], m.Ptr[i], m.Threads[m.FreeThread[i]].TID}
			if !frees[k] {
				t.Fatalf("allocation %d: freed at position %d, ts %d, by tid %d: no such free line", i, k.at, k.ts, k.tid)
			}
		}
		seenA := make([]bool, m.Len())
		seenF := make([]bool, m.Len())
		var order []uint32
		for k, e := range m.eventOrder() {
			if k != len(order) {
				t.Fatalf("event %d numbered %d", len(order), k)
			}
			order = append(order, e)
			id, free := e&^freeEvent, e&freeEvent != 0
			seen := seenA
			if free {
				seen = seenF
			}
			if seen[id] {
				t.Fatalf("event %#x twice", e)
			}
			seen[id] = true
			if free && m.FreeThread[id] == NoThread {
				t.Fatalf("free of live allocation %d", id)
			}
		}
		for i := range m.TS {
			if !seenA[i] || seenF[i] != (m.FreeThread[i] != NoThread) {
				t.Fatalf("allocation %d: in the order %v, its free %v", i, seenA[i], seenF[i])
			}
		}
		if m.OutOfOrder {
			return
		}
		// In read order: is allocation i freed by its thread before the
		// thread's next allocation?
		at := make([]int, m.Len())
		for k, e := range order {
			if e&freeEvent == 0 {
				at[e] = k
			}
		}
		freedAt := make([]int, m.Len())
		for k, e := range order {
			if e&freeEvent != 0 {
				freedAt[e&^freeEvent] = k
			}
		}
		for th := range m.Threads {
			ids := m.ThreadAllocs(th)
			for j, i := range ids {
				want := m.FreeThread[i] == m.Thread[i] && (j+1 == len(ids) || freedAt[i] < at[ids[j+1]])
				if got := m.Temporary(i); got != want {
					t.Fatalf("allocation %d: Temporary %v, read order says %v", i, got, want)
				}
			}
		}
	})
}

// PrecomputeOrders on logs in time order (the identity time order, and
// the thread order shared with it when there is one thread) gives what a
// stable sort by key, then time, then id gives.
func TestPrecomputeOrdersInTimeOrder(t *testing.T) {
	for _, threads := range []int{1, 3} {
		r := rand.New(rand.NewPCG(5, uint64(threads)))
		m := load(t, writeEvents(genHistory(r, 6000, threads), false, r, false))
		if m.OutOfOrder || len(m.Threads) != threads {
			t.Fatalf("%d threads: out of order %v, %d threads", threads, m.OutOfOrder, len(m.Threads))
		}
		var mu sync.Mutex
		m.PrecomputeOrders(&mu)
		for k := SortKey(0); k < numSortKeys; k++ {
			if m.orders[k].n != m.Len() {
				t.Fatalf("%v not precomputed", k)
			}
			key := m.sortKeyFunc(k)
			want := make([]uint32, m.Len())
			for i := range want {
				want[i] = uint32(i)
			}
			slices.SortStableFunc(want, func(a, b uint32) int {
				if c := cmp.Compare(key(a), key(b)); c != 0 {
					return c
				}
				return cmp.Compare(m.TS[a], m.TS[b])
			})
			if !slices.Equal(m.Order(k), want) {
				t.Fatalf("%d threads: %v order differs from a stable sort", threads, k)
			}
		}
	}
}
