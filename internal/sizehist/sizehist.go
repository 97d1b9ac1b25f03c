package sizehist

import (
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
