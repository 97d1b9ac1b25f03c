package sizehist

import (
	"math/bits"
	"strconv"
)

// Bounds are the buckets' upper bounds, inclusive: bucket k holds the
// sizes in (Bounds[k-1], Bounds[k]], bucket 0 the sizes up to 16 B; the
// last, ^uint64(0), holds every size above 1 GiB.
var Bounds = func() []uint64 {
	var out []uint64
	for b := uint64(16); b <= 1<<30; b *= 4 {
		out = append(out, b)
	}
	return append(out, ^uint64(0))
}()

// Index is the bucket of size.
func Index(size uint64) int {
	if size <= 16 {
		return 0
	}
	// 16·4^k ≥ size: k = ceil((log2(size) - 4) / 2).
	k := (bits.Len64(size-1) - 3) / 2
	return min(k, len(Bounds)-1)
}

// Label names bucket k by its bound in 1024-based units: "≤16 B", "≤1 KiB",
// "≤256 MiB"; the last, which has none, "> 1 GiB".
func Label(k int) string {
	if k >= len(Bounds)-1 {
		return ">" + Size(Bounds[len(Bounds)-2])
	}
	return "≤" + Size(Bounds[k])
}

// Size writes a bound, a power of two, in the largest 1024-based unit it
// is a whole number of.
func Size(b uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	u := 0
	for b >= 1024 && b%1024 == 0 && u < len(units)-1 {
		b /= 1024
		u++
	}
	return strconv.FormatUint(b, 10) + " " + units[u]
}

// Bucket is one bar: the allocations of sizes up to Max, their count and
// bytes.
type Bucket struct {
	Max   uint64
	Count int64
	Bytes uint64
}

// Hist is a histogram, one Bucket per bound.
type Hist []Bucket

// New is an empty histogram.
func New() Hist {
	h := make(Hist, len(Bounds))
	for k := range h {
		h[k].Max = Bounds[k]
	}
	return h
}

// Add counts one allocation of size bytes; bytes saturate.
func (h Hist) Add(size uint64) {
	b := &h[Index(size)]
	b.Count++
	if s, c := bits.Add64(b.Bytes, size, 0); c == 0 {
		b.Bytes = s
	} else {
		b.Bytes = ^uint64(0)
	}
}

// Used is the range [lo, hi] of buckets from the first that holds an
// allocation to the last, ok false when none does: what a chart shows.
func (h Hist) Used() (lo, hi int, ok bool) {
	lo, hi = -1, -1
	for k := range h {
		if h[k].Count > 0 {
			if lo < 0 {
				lo = k
			}
			hi = k
		}
	}
	return lo, hi, lo >= 0
}

// Merge adds o's counts to h (the report's sections, one per process);
// bytes saturate.
func (h Hist) Merge(o Hist) {
	for k := range min(len(h), len(o)) {
		h[k].Count += o[k].Count
		if s, c := bits.Add64(h[k].Bytes, o[k].Bytes, 0); c == 0 {
			h[k].Bytes = s
		} else {
			h[k].Bytes = ^uint64(0)
		}
	}
}
