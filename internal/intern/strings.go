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
	strs   []string // sharing the chunks' memory
	chunks [][]byte
	seed   maphash.Seed
	// slots: the upper 32 bits of a string's hash, then its id + 1; 0 is
	// empty. A power of two long, at most three quarters full.
	slots []uint64
}

// NewStrings returns an empty table.
func NewStrings() Strings { return Strings{seed: maphash.MakeSeed()} }

// Len is the number of strings.
func (t *Strings) Len() int { return len(t.strs) }

// Get is string id.
func (t *Strings) Get(id uint32) string { return t.strs[id] }

// Intern returns the id of b's text, adding a copy of it when new.
func (t *Strings) Intern(b []byte) uint32 {
	h := maphash.Bytes(t.seed, b)
	if len(t.slots) == 0 && len(t.strs) > 0 {
		t.reindex()
	}
	if len(t.slots) > 0 {
		mask := uint64(len(t.slots) - 1)
		for i := h & mask; ; i = (i + 1) & mask {
			v := t.slots[i]
			if v == 0 {
				break
			}
			if v>>32 == h>>32 && t.strs[uint32(v)-1] == string(b) {
				return uint32(v) - 1
			}
		}
	}
	if (len(t.strs)+1)*4 > len(t.slots)*3 {
		t.slots = make([]uint64, max(2*len(t.slots), 1024))
		t.reindex()
	}
	id := uint32(len(t.strs))
	t.strs = append(t.strs, t.put(b))
	t.place(h, id)
	return id
}

// reindex puts every string in the table, made large enough for them
// when it is not.
func (t *Strings) reindex() {
	size := max(len(t.slots), 1024)
	for len(t.strs)*4 > size*3 {
		size *= 2
	}
	if size != len(t.slots) {
		t.slots = make([]uint64, size)
	}
	for id, str := range t.strs {
		t.place(maphash.String(t.seed, str), uint32(id))
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

// put copies b into the arena.
func (t *Strings) put(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	n := len(t.chunks)
	if n == 0 || len(t.chunks[n-1])+len(b) > cap(t.chunks[n-1]) {
		t.chunks = append(t.chunks, make([]byte, 0, max(chunk, len(b))))
		n++
	}
	c := &t.chunks[n-1]
	at := len(*c)
	*c = append(*c, b...)
	return unsafe.String(&(*c)[at], len(b))
}
