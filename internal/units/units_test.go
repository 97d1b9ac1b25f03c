package units

import (
	"math"
	"testing"
)

// The expectations are heaptrack_print 1.5's own output for these sizes
// (TestBytesMatchHeaptrackPrint checks them against the installed one).
func TestBytes(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0B", 1: "1B", 838: "838B", 999: "999B", 1000: "1000B", 1001: "1.00K", 1024: "1.02K", 1680: "1.68K",
		72704: "72.70K", 468732: "468.73K", 999994: "999.99K", 999995: "1000.00K", 1000000: "1000.00K",
		1000001: "1.00M", 45230000: "45.23M", 2_340_000_000: "2.34G", 1_500_000_000: "1.50G",
		3e12: "3.00T", 1 << 56: "72.06P", math.MaxInt64: "9.22E", math.MaxUint64: "18.45E",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestSigned(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0B", 10: "10B", -64: "-64B", -1680: "-1.68K", 5940: "5.94K",
		math.MaxInt64: "9.22E", math.MinInt64: "-9.22E", -math.MaxInt64: "-9.22E",
	} {
		if got := Signed(n); got != want {
			t.Errorf("Signed(%d) = %q, want %q", n, got, want)
		}
	}
}

// One figure, one text: the formatted value never goes down as the
// number goes up within a unit, and the unit never goes back.
func TestBytesMonotonic(t *testing.T) {
	rank := func(s string) int {
		switch s[len(s)-1] {
		case 'B':
			return 0
		case 'K':
			return 1
		case 'M':
			return 2
		}
		return 3
	}
	prev := Bytes(0)
	for n := uint64(1); n < 3_000_000; n += 997 {
		s := Bytes(n)
		if rank(s) < rank(prev) {
			t.Fatalf("Bytes(%d) = %q after %q", n, s, prev)
		}
		prev = s
	}
}
