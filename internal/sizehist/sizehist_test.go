package sizehist

import "testing"

// Every size lands in the bucket whose bounds hold it, and the labels name
// the bounds in the 1024-based units they are whole numbers of.
func TestIndexAndLabels(t *testing.T) {
	for _, sz := range []uint64{0, 1, 15, 16, 17, 63, 64, 65, 1000, 1023, 1024, 1025, 4096, 4097, 1 << 20, 1<<20 + 1, 1 << 30, 1<<30 + 1, ^uint64(0)} {
		k := Index(sz)
		if sz > Bounds[k] || k > 0 && sz <= Bounds[k-1] {
			t.Errorf("Index(%d) = %d: bounds (%d, %d]", sz, k, Bounds[max(k-1, 0)], Bounds[k])
		}
	}
	want := []string{"≤16 B", "≤64 B", "≤256 B", "≤1 KiB", "≤4 KiB", "≤16 KiB", "≤64 KiB", "≤256 KiB", "≤1 MiB", "≤4 MiB", "≤16 MiB", "≤64 MiB", "≤256 MiB", "≤1 GiB", ">1 GiB"}
	if len(Bounds) != len(want) {
		t.Fatalf("%d buckets, want %d", len(Bounds), len(want))
	}
	for k, w := range want {
		if got := Label(k); got != w {
			t.Errorf("Label(%d) = %q, want %q", k, got, w)
		}
	}
}

func TestHistAddAndUsed(t *testing.T) {
	h := New()
	if _, _, ok := h.Used(); ok {
		t.Fatal("an empty histogram has buckets in use")
	}
	h.Add(100)
	h.Add(200)
	h.Add(5000)
	h.Add(^uint64(0))
	h.Add(^uint64(0))
	if h[2].Count != 2 || h[2].Bytes != 300 || h[5].Count != 1 {
		t.Fatalf("buckets %+v", h)
	}
	if last := h[len(h)-1]; last.Count != 2 || last.Bytes != ^uint64(0) {
		t.Fatalf("the last bucket does not saturate: %+v", last)
	}
	if lo, hi, ok := h.Used(); !ok || lo != 2 || hi != len(h)-1 {
		t.Fatalf("Used = %d, %d, %v", lo, hi, ok)
	}
}

func TestHistMerge(t *testing.T) {
	a, b := New(), New()
	a.Add(10)
	b.Add(12)
	b.Add(1 << 20)
	b.Add(^uint64(0))
	a.Add(^uint64(0))
	a.Merge(b)
	if a[0].Count != 2 || a[0].Bytes != 22 || a[Index(1<<20)].Count != 1 {
		t.Fatalf("merged %+v", a)
	}
	if last := a[len(a)-1]; last.Count != 2 || last.Bytes != ^uint64(0) {
		t.Fatalf("the last bucket does not saturate: %+v", last)
	}
}
