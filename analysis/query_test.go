package analysis

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// queryModel: three threads, sizes and times chosen so every filter has a
// known answer.
//
//	id ts  thread size ptr  fate
//	0  10  main   100  a0   freed at 20 by main      stack foo
//	1  11  w1     200  b0   leak                     stack foo
//	2  12  w1     50   c0   freed at 50 by w2        stack bar
//	3  30  w2     400  d0   leak                     stack foo
//	4  40  main   10   e0   leak                     no stack
func queryModel(t *testing.T) *Model {
	var l logb
	l.alloc(1, "main", "malloc", 10, 100, 0xa0).frame(0, "_Z3foov", 1)
	l.alloc(2, "w1", "new", 11, 200, 0xb0).frame(0, "_Z3foov", 1)
	l.alloc(2, "w1", "malloc", 12, 50, 0xc0).frame(0, "_Z3barv", 2)
	l.free(1, "main", "free", 20, 100, 0xa0)
	l.alloc(3, "w2", "malloc", 30, 400, 0xd0).frame(0, "_Z3foov", 1)
	l.alloc(1, "main", "strdup", 40, 10, 0xe0)
	l.free(3, "w2", "free", 50, 50, 0xc0)
	return load(t, l.b)
}

func sel(m *Model, q Query) []uint32 { return m.Select(&q, nil) }

func TestSelectFiltersAndSorts(t *testing.T) {
	m := queryModel(t)
	th := func(name string) uint32 {
		for i := range m.Threads {
			if m.Threads[i].Name == name {
				return uint32(i)
			}
		}
		t.Fatalf("no thread %s", name)
		return 0
	}
	cases := []struct {
		name string
		q    func(q *Query)
		want []uint32
	}{
		{"all by time", func(q *Query) {}, []uint32{0, 1, 2, 3, 4}},
		{"time desc", func(q *Query) { q.Desc = true }, []uint32{4, 3, 2, 1, 0}},
		{"by size", func(q *Query) { q.Sort = SortSize }, []uint32{4, 2, 0, 1, 3}},
		{"by thread", func(q *Query) { q.Sort = SortThread }, []uint32{0, 4, 1, 2, 3}},
		{"leaks", func(q *Query) { q.Status = FilterLeaks }, []uint32{1, 3, 4}},
		{"freed", func(q *Query) { q.Status = FilterFreed }, []uint32{0, 2}},
		{"active (none at the end of a log)", func(q *Query) { q.Status = FilterActive }, nil},
		{"thread w1", func(q *Query) { q.Thread = th("w1") }, []uint32{1, 2}},
		{"thread w1 by size desc", func(q *Query) { q.Thread = th("w1"); q.Sort = SortSize; q.Desc = true }, []uint32{1, 2}},
		{"since 12", func(q *Query) { q.Since, q.HasSince = 12, true }, []uint32{2, 3, 4}},
		{"range 11..30", func(q *Query) { q.From, q.To, q.HasRange = 11, 30, true }, []uint32{1, 2, 3}},
		{"lifetime ≥ 30µs", func(q *Query) { q.MinAge = 30 }, []uint32{1, 2}},
		{"search frame", func(q *Query) { q.Search = "BAR" }, []uint32{2}},
		{"search thread", func(q *Query) { q.Search = "w2" }, []uint32{2, 3}}, // 2 was freed by w2
		{"search op", func(q *Query) { q.Search = "strdup" }, []uint32{4}},
		{"search pointer", func(q *Query) { q.Search = "0xd0" }, []uint32{3}},
		{"leaks of main", func(q *Query) { q.Status = FilterLeaks; q.Thread = th("main") }, []uint32{4}},
	}
	for _, c := range cases {
		q := NewQuery()
		c.q(&q)
		if got := sel(m, q); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v want %v", c.name, got, c.want)
		}
	}
}

func TestGroupsAndBaseline(t *testing.T) {
	m := queryModel(t)
	all := sel(m, NewQuery())
	gs := m.Groups(all, 0, false, GroupByTotal, true)
	if len(gs) != 3 {
		t.Fatalf("%d groups", len(gs))
	}
	foo := gs[0]
	if foo.Count != 3 || foo.Total != 700 || foo.LiveCount != 2 || foo.LiveBytes != 600 || foo.Freed != 1 || foo.Monotonic {
		t.Fatalf("foo group %+v", foo)
	}
	if foo.Example != 0 || foo.First != 10 || foo.Last != 30 {
		t.Fatalf("foo example/span %+v", foo)
	}
	if r := foo.Rate(); r != 700/(20e-6) {
		t.Fatalf("rate %v", r)
	}
	leaks := sel(m, Query{Status: FilterLeaks, Thread: NoThread, Proc: -1})
	lg := m.Groups(leaks, 0, false, GroupByCount, true)
	if !lg[0].Monotonic || lg[0].Count != 2 {
		t.Fatalf("leak group of foo should be monotonic: %+v", lg[0])
	}
	// Baseline at ts 15: foo had a0 (100) and b0 (200) live; now b0 and d0 (600).
	bg := m.Groups(all, 15, true, GroupByGrowth, true)
	if bg[0].Stack != foo.Stack || bg[0].Growth != 300 || bg[0].AtBaseline != 300 {
		t.Fatalf("growth %+v", bg[0])
	}
	// bar: c0 live at 15 (50), freed since: -50; ascending growth puts it first.
	asc := m.Groups(all, 15, true, GroupByGrowth, false)
	if asc[0].Growth != -50 {
		t.Fatalf("ascending growth %+v", asc[0])
	}
}

func TestHistogramTimelinePeak(t *testing.T) {
	m := queryModel(t)
	h := m.Histogram(sel(m, NewQuery()))
	if h[0].Count != 1 || h[0].Bytes != 10 || h[1].Count != 1 || h[2].Count != 2 || h[2].Bytes != 300 || h[3].Count != 1 {
		t.Fatalf("histogram %+v", h)
	}
	cells := m.Timeline(41, NoThread, -1) // one cell per µs from 10 to 50
	if cells[0].Live != 100 || cells[10].Net != -100 || cells[40].Live != 610 {
		t.Fatalf("timeline %+v", cells)
	}
	var net int64
	for _, c := range cells {
		net += c.Net
	}
	if _, live := m.Live(); uint64(net) != live {
		t.Fatalf("timeline net %d, live %d", net, live)
	}
	w1 := m.Timeline(41, m.threadOf(2), -1)
	if w1[len(w1)-1].Live != 200 {
		t.Fatalf("w1 timeline ends at %d", w1[len(w1)-1].Live)
	}
	if p, ts := m.Peak(); p != 660 || ts != 40 {
		t.Fatalf("peak %d at %d", p, ts)
	}
}

func TestThreadOrder(t *testing.T) {
	m := queryModel(t)
	names := func(idx []int) (s []string) {
		for _, i := range idx {
			s = append(s, m.Threads[i].Name)
		}
		return
	}
	if got := names(m.ThreadOrder(ThreadByName, false, -1)); !slices.Equal(got, []string{"main", "w1", "w2"}) {
		t.Fatalf("by name %v", got)
	}
	if got := names(m.ThreadOrder(ThreadByLeaks, true, -1)); !slices.Equal(got, []string{"w2", "w1", "main"}) {
		t.Fatalf("by leaks %v", got)
	}
	if got := names(m.ThreadOrder(ThreadByAllocated, false, -1)); !slices.Equal(got, []string{"main", "w1", "w2"}) {
		t.Fatalf("by allocated %v", got)
	}
}

// Orders extended by merging on append must equal orders built at once.
func TestOrderExtendsOnAppend(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	log := writeEvents(genHistory(r, 4000, 3), true, r, false)
	whole := load(t, log)
	m := New()
	half := bytes.LastIndexByte(log[:len(log)/2], '\n') + 1
	applyText(m, log[:half])
	for k := SortKey(0); k < numSortKeys; k++ {
		m.Order(k)
	}
	applyText(m, log[half:])
	m.Finish()
	for k := SortKey(0); k < numSortKeys; k++ {
		a, b := m.Order(k), whole.Order(k)
		if len(a) != len(b) {
			t.Fatalf("%v: len %d vs %d", k, len(a), len(b))
		}
		key := m.sortKeyFunc(k)
		for i := 1; i < len(a); i++ {
			if key(a[i-1]) > key(a[i]) {
				t.Fatalf("%v: not sorted at %d", k, i)
			}
		}
	}
}

func TestBucketOf(t *testing.T) {
	for _, sz := range []uint64{0, 1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1023, 1024, 1025, 4096, 1 << 20, 1<<20 + 1, 1 << 40, ^uint64(0)} {
		k := 0
		for sz > SizeBuckets[k] {
			k++
		}
		if got := bucketOf(sz); got != k {
			t.Errorf("bucketOf(%d) = %d, want %d", sz, got, k)
		}
	}
}

// Select (parallel, binary-searched, compiled) against a plain reference
// on a model large enough for the parallel path.
func TestSelectMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	m := load(t, writeEvents(genHistory(r, 300_000, 5), false, r, false))
	if m.Len() < 2*65536 {
		t.Fatalf("model too small for the parallel path: %d", m.Len())
	}
	span := m.MaxTS - m.MinTS
	for k := 0; k < 60; k++ {
		q := NewQuery()
		q.Status = StatusFilter(r.IntN(int(NumStatusFilters)))
		q.Sort = SortKey(r.IntN(int(numSortKeys)))
		q.Desc = r.IntN(2) == 0
		if r.IntN(2) == 0 {
			q.Thread = uint32(r.IntN(len(m.Threads)))
		}
		if r.IntN(3) == 0 {
			q.Since, q.HasSince = m.MinTS+uint64(r.Int64N(int64(span))), true
		}
		if r.IntN(3) == 0 {
			a, b := m.MinTS+uint64(r.Int64N(int64(span))), m.MinTS+uint64(r.Int64N(int64(span)))
			q.From, q.To, q.HasRange = min(a, b), max(a, b), true
		}
		if r.IntN(4) == 0 {
			q.MinAge = uint64(r.IntN(50))
		}
		switch r.IntN(5) {
		case 0:
			q.Search = "f1"
		case 1:
			q.Search = "3a"
		case 2:
			q.Search = "0x1"
		}
		got := m.Select(&q, nil)
		want := refSelect(m, &q)
		if !slices.Equal(got, want) {
			t.Fatalf("query %+v: %d records, reference %d", q, len(got), len(want))
		}
	}
}

func refSelect(m *Model, q *Query) []uint32 {
	var out []uint32
	for i := range m.TS {
		id := uint32(i)
		if q.Thread != NoThread && m.Thread[id] != q.Thread || q.HasSince && m.TS[id] < q.Since ||
			q.HasRange && (m.TS[id] < q.From || m.TS[id] > q.To) || q.MinAge > 0 && m.Lifetime(id) < q.MinAge {
			continue
		}
		st := m.Status(id)
		if q.Status == FilterLeaks && st != StatusLeak || q.Status == FilterActive && st != StatusActive || q.Status == FilterFreed && st != StatusFreed ||
			q.Status == FilterUnknown && st != StatusUnknown {
			continue
		}
		if q.Search != "" {
			ok := false
			text := fmt.Sprintf("0x%x %s %s", m.Ptr[id], m.Threads[m.Thread[id]].Name, m.OpName(m.Op[id]))
			if m.FreeThread[id] != NoThread {
				text += " " + m.Threads[m.FreeThread[id]].Name
				for _, f := range m.Frames(m.FreeStack[id]) {
					text += " " + m.FrameName(f)
				}
			}
			for _, f := range m.Frames(m.Stack[id]) {
				text += " " + m.FrameName(f)
			}
			ok = strings.Contains(text, q.Search)
			if !ok {
				continue
			}
		}
		out = append(out, id)
	}
	key := m.sortKeyFunc(q.Sort)
	slices.SortStableFunc(out, func(a, b uint32) int {
		if c := cmp.Compare(key(a), key(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(m.TS[a], m.TS[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	if q.Desc {
		slices.Reverse(out)
	}
	return out
}

func TestPrecomputeOrders(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	log := writeEvents(genHistory(r, 5000, 3), true, r, false)
	a, b := load(t, log), load(t, log)
	var mu sync.Mutex
	a.PrecomputeOrders(&mu)
	for k := SortKey(0); k < numSortKeys; k++ {
		if a.orders[k].n != a.Len() {
			t.Fatalf("%v not precomputed", k)
		}
		if !slices.Equal(a.Order(k), b.Order(k)) {
			t.Fatalf("%v: precomputed order differs from Order", k)
		}
	}
}
