package intern

import (
	"hash/maphash"
	"unsafe"
)

// chunk is the size of an arena chunk of Strings: large enough that its
// few allocations cost nothing, small enough that a small table does not
// pay for it.
const chunk = 256 << 10

// Strings interns strings, numbered from 0 in the order they were first
// interned. Their text is kept in arena chunks that are never written
// again, so a string it returns stays valid as long as the table.
type Strings struct {
	// at is where each string starts: its chunk, then its offset in it.
	// It ends where the next one starts, or at its chunk's end: a string
	// header each would be twice the size.
	at     []uint64
	chunks [][]byte
	seed   maphash.Seed
	// slots: the upper 32 bits of a string's hash, then its id + 1; 0 is
	// empty. A power of two long, at most three quarters full.
	slots []uint64
}

// NewStrings returns an empty table.
func NewStrings() Strings { return Strings{seed: maphash.MakeSeed()} }

// Len is the number of strings.
func (t *Strings) Len() int { return len(t.at) }

// Get is string id, sharing the table's memory.
func (t *Strings) Get(id uint32) string {
	at := t.at[id]
	c := t.chunks[at>>32]
	end := len(c)
	if int(id)+1 < len(t.at) && t.at[id+1]>>32 == at>>32 {
		end = int(uint32(t.at[id+1]))
	}
	start := int(uint32(at))
	if start == end {
		return ""
	}
	return unsafe.String(&c[start], end-start)
}

// Intern returns the id of b's text, adding a copy of it when new.
func (t *Strings) Intern(b []byte) uint32 {
	h := maphash.Bytes(t.seed, b)
	if len(t.slots) == 0 && len(t.at) > 0 {
		t.reindex()
	}
	if len(t.slots) > 0 {
		mask := uint64(len(t.slots) - 1)
		for i := h & mask; ; i = (i + 1) & mask {
			v := t.slots[i]
			if v == 0 {
				break
			}
			if v>>32 == h>>32 && t.Get(uint32(v)-1) == string(b) {
				return uint32(v) - 1
			}
		}
	}
	if (len(t.at)+1)*4 > len(t.slots)*3 {
		t.slots = make([]uint64, max(2*len(t.slots), 1024))
		t.reindex()
	}
	id := uint32(len(t.at))
	t.at = append(t.at, t.put(b))
	t.place(h, id)
	return id
}

// reindex puts every string in the table, made large enough for them
// when it is not.
func (t *Strings) reindex() {
	size := max(len(t.slots), 1024)
	for len(t.at)*4 > size*3 {
		size *= 2
	}
	if size != len(t.slots) {
		t.slots = make([]uint64, size)
	}
	for id := range t.at {
		t.place(maphash.String(t.seed, t.Get(uint32(id))), uint32(id))
	}
}

// Compact gives back the lookup table, for a table that is only read from
// now on; Intern builds it again.
func (t *Strings) Compact() { t.slots = nil }

// place puts string id, of hash h, in the first free slot of its run.
func (t *Strings) place(h uint64, id uint32) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = h>>32<<32 | uint64(id+1)
}

// put copies b into the arena and returns where it starts. Strings follow
// each other in the arena in the order of their ids.
func (t *Strings) put(b []byte) uint64 {
	n := len(t.chunks)
	if n == 0 || len(t.chunks[n-1])+len(b) > cap(t.chunks[n-1]) {
		t.chunks = append(t.chunks, make([]byte, 0, max(chunk, len(b))))
		n++
	}
	c := &t.chunks[n-1]
	at := uint64(n-1)<<32 | uint64(len(*c))
	*c = append(*c, b...)
	return at
}
