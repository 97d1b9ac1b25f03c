package analysis

// ptrMap maps an address to an allocation id (a process's live blocks,
// looked up, added and removed once for each alloc and free line), or a
// tid to its thread (looked up for each line). It is
// an open addressing table with linear probing, where a Go map spent
// most of its time hashing and in its control words: the keys are
// spread by one multiplication (Fibonacci hashing, which takes the
// product's top bits, so the low zero bits of aligned addresses do not
// matter), and a removal shifts the run after it back instead of
// leaving a tombstone. Nothing iterates over it: its order is no one's.
type ptrMap struct {
	keys  []uint64 // 0 is an empty slot; address 0 is kept apart (zero)
	vals  []int32
	n     int  // keys in the table, zero not counted
	shift uint // 64 - log2(len(keys))

	hasZero bool
	zero    int32
}

const (
	ptrMapMin  = 64
	ptrMapMult = 0x9E3779B97F4A7C15
)

func (t *ptrMap) home(k uint64) int { return int((k * ptrMapMult) >> t.shift) }

// get is the id at address k.
func (t *ptrMap) get(k uint64) (int32, bool) {
	if k == 0 {
		return t.zero, t.hasZero
	}
	if t.n == 0 {
		return 0, false
	}
	mask := len(t.keys) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			return t.vals[i], true
		case 0:
			return 0, false
		}
	}
}

// set makes v the id at address k.
func (t *ptrMap) set(k uint64, v int32) {
	if k == 0 {
		t.zero, t.hasZero = v, true
		return
	}
	if (t.n+1)*4 > len(t.keys)*3 {
		t.grow()
	}
	mask := len(t.keys) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			t.vals[i] = v
			return
		case 0:
			t.keys[i], t.vals[i] = k, v
			t.n++
			return
		}
	}
}

// del removes address k.
func (t *ptrMap) del(k uint64) {
	if k == 0 {
		t.zero, t.hasZero = 0, false
		return
	}
	if t.n == 0 {
		return
	}
	mask := len(t.keys) - 1
	i := t.home(k)
	for t.keys[i] != k {
		if t.keys[i] == 0 {
			return
		}
		i = (i + 1) & mask
	}
	// Shift back every key of the run after i that its probe from home
	// would no longer reach across the hole.
	for j := (i + 1) & mask; t.keys[j] != 0; j = (j + 1) & mask {
		h := t.home(t.keys[j])
		reachable := h > i && h <= j
		if j < i { // the run wrapped around the end
			reachable = h > i || h <= j
		}
		if !reachable {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	t.keys[i], t.vals[i] = 0, 0
	t.n--
}

// len is the number of addresses held.
func (t *ptrMap) len() int {
	if t.hasZero {
		return t.n + 1
	}
	return t.n
}

func (t *ptrMap) grow() {
	size := max(2*len(t.keys), ptrMapMin)
	keys, vals := t.keys, t.vals
	t.keys, t.vals = make([]uint64, size), make([]int32, size)
	t.shift = 64
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
	mask := size - 1
	for o, k := range keys {
		if k == 0 {
			continue
		}
		i := t.home(k)
		for t.keys[i] != 0 {
			i = (i + 1) & mask
		}
		t.keys[i], t.vals[i] = k, vals[o]
	}
}
