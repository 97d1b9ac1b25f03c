package analysis

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRoundSizeBounds(t *testing.T) {
	b := RoundSizeBounds
	if !slices.IsSorted(b) || b[0] != 1 || b[1] != 2 || b[2] != 5 || b[3] != 10 || b[len(b)-1] != ^uint64(0) {
		t.Fatalf("bounds %v", b)
	}
}

func TestSizeHistogram(t *testing.T) {
	var l logb
	sizes := []uint64{0, 1, 2, 3, 5, 6, 10, 16, 64, 100, 101, 999, 1000, 1001, 4096, 1 << 20}
	for k, sz := range sizes {
		tid := int64(1 + k%2)
		l.alloc(tid, "t", "malloc", uint64(10+k), sz, uint64(0x1000+k*0x1000000))
	}
	m := load(t, l.b)
	h := m.SizeHistogram(-1)
	count := map[uint64]int64{}
	var n int64
	for _, b := range h {
		if b.Count > 0 {
			count[b.Max] = b.Count
		}
		n += b.Count
	}
	want := map[uint64]int64{1: 2, 2: 1, 5: 2, 10: 2, 20: 1, 100: 2, 200: 1, 1000: 2, 2000: 1, 5000: 1, 2_000_000: 1}
	if n != int64(len(sizes)) || len(count) != len(want) {
		t.Fatalf("buckets %v, want %v", count, want)
	}
	for k, v := range want {
		if count[k] != v {
			t.Fatalf("bucket ≤%d: %d, want %d (all: %v)", k, count[k], v, count)
		}
	}
	if b := h[slices.IndexFunc(h, func(b Bucket) bool { return b.Max == 1000 })]; b.Bytes != 1999 {
		t.Fatalf("bytes of ≤1000: %d", b.Bytes)
	}
	// A process filter counts its threads' allocations only.
	var p0 int64
	for _, b := range m.SizeHistogram(0) {
		p0 += b.Count
	}
	if p0 != int64(len(sizes)) { // one process: both threads are its
		t.Fatalf("process 0: %d", p0)
	}
}

// LiveSeriesBy's classes add up to LiveSeries, and each equals LiveAt
// summed by brute force.
func TestLiveSeriesByMatchesLiveAt(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	var l logb
	type blk struct{ ptr, size uint64 }
	var live []blk
	next := uint64(0x10000)
	for ts := uint64(1); ts < 600; ts++ {
		if len(live) > 0 && r.IntN(2) == 0 {
			k := r.IntN(len(live))
			l.free(1, "main", "free", ts, live[k].size, live[k].ptr)
			live = slices.Delete(live, k, k+1)
			continue
		}
		sz := uint64(1 + r.IntN(300))
		l.alloc(1, "main", "malloc", ts, sz, next).frame(0, []string{"_Z1av", "_Z1bv", "_Z1cv"}[r.IntN(3)], 1)
		live = append(live, blk{next, sz})
		next += sz
	}
	m := load(t, l.b)
	times := []uint64{0, 5, 50, 51, 200, 333, 599, 1000}
	class := func(i uint32) int {
		fr := m.Frames(m.Stack[i])
		switch m.Frame(fr[0]).Symbol {
		case "_Z1av":
			return 0
		case "_Z1bv":
			return 1
		}
		return -1 // c: left out
	}
	got := m.LiveSeriesBy(-1, times, 2, class)
	for c := range 2 {
		for k, ts := range times {
			var want uint64
			for i := range m.TS {
				if class(uint32(i)) == c && m.LiveAt(uint32(i), ts) {
					want += m.Size[i]
				}
			}
			if got[c][k] != want {
				t.Fatalf("class %d at %d: %d, want %d", c, ts, got[c][k], want)
			}
		}
	}
	all := m.LiveSeries(-1, times)
	rest := m.LiveSeriesBy(-1, times, 1, func(i uint32) int {
		if class(i) < 0 {
			return 0
		}
		return -1
	})
	for k := range times {
		if got[0][k]+got[1][k]+rest[0][k] != all[k] {
			t.Fatalf("at %d: the classes add to %d, LiveSeries %d", times[k], got[0][k]+got[1][k]+rest[0][k], all[k])
		}
	}
	if all[3] == 0 {
		t.Fatal("nothing live at ts 51: the test tests nothing")
	}
}
