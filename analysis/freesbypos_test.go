package analysis

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFreesByPos: the counting sort gives the order of the comparison
// sort it replaced (by freeAt, ties in id order), on logs in time order
// and buffered ones that Finish re-matches.
func TestFreesByPos(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		r := rand.New(rand.NewPCG(5, 5))
		data := writeEvents(genHistory(r, 50_000, 6), buffered, r, false)
		m := New()
		if err := m.ReadAll(bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		var want []uint32
		for i := range m.TS {
			if m.FreeThread[i] != NoThread {
				want = append(want, uint32(i))
			}
		}
		slices.SortStableFunc(want, func(a, b uint32) int { return int(m.freeAt[a]) - int(m.freeAt[b]) })
		if len(want) == 0 {
			t.Fatal("no frees")
		}
		if got := m.freesByPos(); !slices.Equal(got, want) {
			t.Errorf("buffered %v: freesByPos differs from the sort", buffered)
		}
		if got := m.freesSorted(); !slices.Equal(got, want) {
			t.Errorf("buffered %v: freesSorted differs from the sort", buffered)
		}
	}
}
