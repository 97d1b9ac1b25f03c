package analysis

import (
	"fmt"
	"slices"
	"testing"
)

func TestMeaningfulRate(t *testing.T) {
	for _, c := range []struct {
		count       int64
		first, last uint64
		total       uint64
		ok          bool
	}{
		{2, 0, 50, 3200, false},                    // 3.2 KB in 50 µs: 64 MB/s is no rate
		{1, 0, 0, 100, false},                      // one allocation has no span
		{9, 0, RateMinSpan - 1, 900, false},        // < 10 allocations, < 1 s
		{10, 0, RateMinBurst - 1, 1000, false},     // 10, but under 100 ms
		{10, 0, RateMinBurst, 1000, true},          // 10 over 100 ms
		{2, 0, RateMinSpan, 2_000_000, true},       // 2 over 1 s
		{3, 5_000_000, 7_000_000, 4_000_000, true}, // 2 MB/s
		{50, 1_000, 1_000 + RateMinSpan, 50, true}, // any count over 1 s
		{50, 1_000, 1_000 + RateMinBurst/2, 50, false},
	} {
		g := Group{Count: c.count, First: c.first, Last: c.last, Total: c.total}
		r, ok := g.MeaningfulRate()
		if ok != c.ok {
			t.Errorf("%+v: ok=%v, want %v", c, ok, c.ok)
			continue
		}
		if ok {
			want := float64(c.total) / (float64(c.last-c.first) / 1e6)
			if r != want {
				t.Errorf("%+v: rate %v, want %v", c, r, want)
			}
		} else if r != 0 {
			t.Errorf("%+v: rate %v without ok", c, r)
		}
	}
}

func TestSortGroupsByRate(t *testing.T) {
	gs := []Group{
		{Stack: 1, Count: 2, First: 0, Last: 10, Total: 1 << 30},     // absurd: no rate
		{Stack: 2, Count: 2, First: 0, Last: 2_000_000, Total: 2000}, // 1000 B/s
		{Stack: 3, Count: 20, First: 0, Last: 200_000, Total: 2000},  // 10000 B/s
		{Stack: 4, Count: 2, First: 0, Last: 5, Total: 10},           // no rate
	}
	SortGroupsByRate(gs, true)
	var got []uint32
	for _, g := range gs {
		got = append(got, g.Stack)
	}
	// No rate sorts lowest; ties by stack as Groups breaks them.
	if want := []uint32{3, 2, 1, 4}; !slices.Equal(got, want) {
		t.Fatalf("desc: %v, want %v", got, want)
	}
	SortGroupsByRate(gs, false)
	got = got[:0]
	for _, g := range gs {
		got = append(got, g.Stack)
	}
	if want := []uint32{4, 1, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("asc: %v, want %v", got, want)
	}
}

func TestThreadsByStack(t *testing.T) {
	m := queryModel(t)
	all := sel(m, NewQuery())
	ts := m.ThreadsByStack(all)
	name := func(st StackThreads) []string {
		var out []string
		for _, id := range st.Threads {
			out = append(out, m.Threads[id].Name)
		}
		slices.Sort(out)
		return out
	}
	got := map[string][]string{}
	for _, g := range m.Groups(all, 0, false, GroupByTotal, true) {
		st := ts[g.Stack]
		if st.N != len(st.Threads) {
			t.Fatalf("stack %d: N %d, %d listed", g.Stack, st.N, len(st.Threads))
		}
		label := "none"
		if fr := m.Frames(g.Stack); len(fr) > 0 {
			label = m.Frame(fr[0]).Symbol
		}
		got[label] = name(st)
	}
	want := map[string][]string{"_Z3foov": {"main", "w1", "w2"}, "_Z3barv": {"w1"}, "none": {"main"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("threads by stack %v, want %v", got, want)
	}
	// A selection of one thread: that thread only.
	q := NewQuery()
	q.Thread = m.Thread[1]
	for s, st := range m.ThreadsByStack(sel(m, q)) {
		if st.N != 1 || st.Threads[0] != m.Thread[1] {
			t.Fatalf("stack %d under a thread filter: %+v", s, st)
		}
	}
}

func TestThreadsByStackMany(t *testing.T) {
	var l logb
	for i := range 40 {
		// Each thread four times, twice in a row and again 20 allocations
		// later: neither the last-thread shortcut nor the set counts a
		// thread twice.
		for range 2 {
			l.alloc(int64(100+i%20), fmt.Sprintf("t%d", i%20), "malloc", uint64(10+i), 8, uint64(0x1000+i*16)).frame(0, "_Z3foov", 1)
		}
	}
	m := load(t, l.b)
	ts := m.ThreadsByStack(sel(m, NewQuery()))
	if len(ts) != 1 {
		t.Fatalf("%d stacks", len(ts))
	}
	for _, st := range ts {
		if st.N != 20 || len(st.Threads) != maxListedThreads || !slices.IsSorted(st.Threads) {
			t.Fatalf("20 threads: %+v", st)
		}
	}
}
