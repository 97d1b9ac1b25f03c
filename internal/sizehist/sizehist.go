package sizehist

import (
	"math/bits"
	"sort"
	"strconv"
)

// Bounds are the buckets' upper bounds, ascending: bucket k holds the
// sizes in (Bounds[k-1], Bounds[k]], bucket 0 the sizes 0 and 1; the last
// bound, ^uint64(0), holds what is above 5 EB.
var Bounds = func() []uint64 {
	var out []uint64
	for p := uint64(1); p <= 1e18; p *= 10 {
		out = append(out, p, 2*p, 5*p)
	}
	return append(out, ^uint64(0))
}()

// Index is the bucket of an allocation of size bytes.
func Index(size uint64) int {
	return sort.Search(len(Bounds), func(k int) bool { return Bounds[k] >= size })
}

// Round writes a bound in the unit the histogram uses, 1000-based bytes
// with only the digits it has: "1B", "500B", "2K", "5M".
func Round(v uint64) string {
	if v < 1000 {
		return strconv.FormatUint(v, 10) + "B"
	}
	const prefixes = "KMGTPE"
	u, i := uint64(1000), 0
	for v/u >= 1000 && i < len(prefixes)-1 {
		u *= 1000
		i++
	}
	return strconv.FormatFloat(float64(v)/float64(u), 'f', -1, 64) + prefixes[i:i+1]
}

// Label names bucket k by its bound: "≤50B", "≤2K"; ">5E" for the last,
// which has none.
func Label(k int) string {
	if k >= len(Bounds)-1 {
		return ">" + Round(Bounds[len(Bounds)-2])
	}
	return "≤" + Round(Bounds[k])
}

// Unit says what the labels count, for an axis title.
const Unit = "bytes requested; K = 1000 B, M = 1000 K"

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
