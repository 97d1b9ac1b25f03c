package sizehist

import "testing"

func TestIndexAndLabels(t *testing.T) {
	for _, c := range []struct {
		size uint64
		want string
	}{{0, "≤1B"}, {1, "≤1B"}, {2, "≤2B"}, {3, "≤5B"}, {50, "≤50B"}, {51, "≤100B"}, {1000, "≤1K"}, {1001, "≤2K"},
		{4_999_999, "≤5M"}, {5e18, "≤5E"}, {5e18 + 1, ">5E"}, {^uint64(0), ">5E"}} {
		if got := Label(Index(c.size)); got != c.want {
			t.Errorf("size %d: %s, want %s", c.size, got, c.want)
		}
	}
	for k := 1; k < len(Bounds); k++ {
		if Bounds[k] <= Bounds[k-1] {
			t.Fatalf("bounds not ascending at %d", k)
		}
		if Index(Bounds[k-1]+1) != k || Index(Bounds[k-1]) != k-1 {
			t.Fatalf("bucket %d does not start just above %d", k, Bounds[k-1])
		}
	}
}

func TestHistAddAndUsed(t *testing.T) {
	h := New()
	if _, _, ok := h.Used(); ok {
		t.Fatal("an empty histogram has buckets in use")
	}
	h.Add(100)
	h.Add(90)
	h.Add(5000)
	h.Add(^uint64(0))
	h.Add(^uint64(0))
	if b := h[Index(100)]; b.Count != 2 || b.Bytes != 190 || h[Index(5000)].Count != 1 {
		t.Fatalf("buckets %+v", h)
	}
	if last := h[len(h)-1]; last.Count != 2 || last.Bytes != ^uint64(0) {
		t.Fatalf("the last bucket does not saturate: %+v", last)
	}
	if lo, hi, ok := h.Used(); !ok || lo != Index(90) || hi != len(h)-1 {
		t.Fatalf("Used = %d, %d, %v", lo, hi, ok)
	}
}

func TestHistMerge(t *testing.T) {
	a, b := New(), New()
	a.Add(10)
	b.Add(9)
	b.Add(1 << 20)
	b.Add(^uint64(0))
	a.Add(^uint64(0))
	a.Merge(b)
	if a[Index(10)].Count != 2 || a[Index(10)].Bytes != 19 || a[Index(1<<20)].Count != 1 {
		t.Fatalf("merged %+v", a)
	}
	if last := a[len(a)-1]; last.Count != 2 || last.Bytes != ^uint64(0) {
		t.Fatalf("the last bucket does not saturate: %+v", last)
	}
}
