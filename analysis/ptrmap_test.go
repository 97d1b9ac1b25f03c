package analysis

import (
	"math/rand/v2"
	"testing"
)

// TestPtrMapAgainstMap drives ptrMap and a Go map with the same random
// sets and removals (few distinct addresses, so that runs collide, wrap
// and are shifted back) and compares every lookup.
func TestPtrMapAgainstMap(t *testing.T) {
	for _, keys := range []int{8, 100, 5000} {
		rng := rand.New(rand.NewPCG(1, uint64(keys)))
		var pm ptrMap
		want := map[uint64]int32{}
		key := func() uint64 {
			k := uint64(rng.IntN(keys))
			if k == 1 {
				return 0 // address 0, kept apart
			}
			return 0x55aa00000000 + k*16
		}
		for step := range 200000 {
			k := key()
			switch rng.IntN(3) {
			case 0, 1:
				v := int32(step)
				pm.set(k, v)
				want[k] = v
			case 2:
				pm.del(k)
				delete(want, k)
			}
			if step%97 == 0 {
				for c := range keys + 2 {
					k := 0x55aa00000000 + uint64(c)*16
					if c == 1 {
						k = 0
					}
					got, ok := pm.get(k)
					w, wok := want[k]
					if ok != wok || got != w {
						t.Fatalf("%d keys, step %d: get(%#x) = %d, %v; want %d, %v", keys, step, k, got, ok, w, wok)
					}
				}
				if pm.len() != len(want) {
					t.Fatalf("%d keys, step %d: len %d, want %d", keys, step, pm.len(), len(want))
				}
			}
		}
	}
}

func BenchmarkPtrMap(b *testing.B) {
	var pm ptrMap
	for i := range b.N {
		k := 0x55aa00000000 + uint64(i)*48
		pm.set(k, int32(i))
		if i >= 1000 {
			pm.del(k - 1000*48)
		}
	}
}

// threadOf is the current incarnation of tid, for the tests.
func (m *Model) threadOf(tid int64) uint32 {
	i, _ := m.threadIdx.get(uint64(tid))
	return uint32(i)
}
