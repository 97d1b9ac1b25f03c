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
