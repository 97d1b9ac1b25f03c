package analysis

import (
	"math"
	"math/bits"
)

// MaxBytes is where every byte figure of the model stops: sums saturate
// there instead of wrapping, and it still fits the int64 that deltas,
// JSON and pprof use, so no figure can turn negative on the way out.
// logfmt refuses sizes above logfmt.MaxSize, so it takes more than 2^7
// blocks of the largest possible size to get here.
const MaxBytes = math.MaxInt64

// satAdd is a+b, at most MaxBytes. Only for sums that never go down: a
// saturated sum that is later reduced would be wrong, so those are wide.
func satAdd(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 || s > MaxBytes {
		return MaxBytes
	}
	return s
}

// satAddInt is a+b for signed figures (deltas), within ±MaxBytes.
func satAddInt(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return -math.MaxInt64
	case s == math.MinInt64:
		return -math.MaxInt64
	}
	return s
}

// wide is a byte sum that goes up and down (live bytes): 128 bits, so
// that it is exact for any 2^32 blocks of logfmt.MaxSize bytes, read out
// saturated.
type wide struct{ hi, lo uint64 }

func (w *wide) add(v uint64) {
	var c uint64
	w.lo, c = bits.Add64(w.lo, v, 0)
	w.hi += c
}

func (w *wide) sub(v uint64) {
	var b uint64
	w.lo, b = bits.Sub64(w.lo, v, 0)
	w.hi -= b
}

// addWide adds o to w.
func (w *wide) addWide(o wide) {
	var c uint64
	w.lo, c = bits.Add64(w.lo, o.lo, 0)
	w.hi += o.hi + c
}

// minus is w-o.
func (w wide) minus(o wide) wide {
	var b uint64
	w.lo, b = bits.Sub64(w.lo, o.lo, 0)
	w.hi = w.hi - o.hi - b
	return w
}

// value is the sum within [0, MaxBytes]: a broken log cannot make it
// negative nor wrap it.
func (w wide) value() uint64 {
	switch {
	case int64(w.hi) < 0:
		return 0
	case w.hi != 0 || w.lo > MaxBytes:
		return MaxBytes
	}
	return w.lo
}

// signed is the sum as an int64 within ±MaxBytes.
func (w wide) signed() int64 {
	if int64(w.hi) < 0 {
		n := wide{}.minus(w)
		return -int64(n.value())
	}
	return int64(w.value())
}

// scaleIndex is v*n/span without overflow, for v < span: the bucket of a
// time stamp when the span of the log is cut into n buckets.
func scaleIndex(v, n, span uint64) int {
	if span == 0 {
		return 0
	}
	hi, lo := bits.Mul64(v, n)
	if hi >= span {
		return int(n - 1)
	}
	q, _ := bits.Div64(hi, lo, span)
	return int(q)
}

// SatAdd is a+b for byte figures, at most MaxBytes: the report adds
// figures of several processes and logs with the model's rule.
func SatAdd(a, b uint64) uint64 { return satAdd(a, b) }

// SatAddSigned is a+b for signed figures (deltas), within ±MaxBytes.
func SatAddSigned(a, b int64) int64 { return satAddInt(a, b) }
