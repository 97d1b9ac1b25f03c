package units

import "strconv"

const prefixes = "KMGTPE"

// Bytes formats n as heaptrack_print does: 1000-based, two decimals, no
// space, "B" only below the first unit: "1000B", "1.00K", "468.73K",
// "45.23M". Like heaptrack_print it divides while the figure is above 1000,
// so 999,999 reads "1000.00K" (rounded), not "1.00M": the same text for the
// same number in both tools matters more than the nicer rounding.
func Bytes(n uint64) string {
	if n <= 1000 {
		return strconv.FormatUint(n, 10) + "B"
	}
	v := float64(n)
	i := -1
	for v > 1000 && i < len(prefixes)-1 {
		v /= 1000
		i++
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + prefixes[i:i+1]
}

// Signed formats a signed count (a difference) in Bytes' convention, a minus
// sign before negative figures; callers that show "+" add it themselves, as
// their outputs differ there (the report leaves zero unsigned, memview's
// growth column does not).
func Signed(n int64) string {
	if n < 0 {
		// -uint64 is also right for math.MinInt64.
		return "-" + Bytes(-uint64(n))
	}
	return Bytes(uint64(n))
}
