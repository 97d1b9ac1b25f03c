package intern

import (
	"math/bits"
	"slices"
)

// Seqs interns sequences of uint32. Id 0 is the empty sequence; the
// others are numbered from 1 in the order they were first interned.
type Seqs struct {
	flat []uint32 // the sequences back to back
	off  []uint32 // id → start in flat; len(off) = Len()+1
	// slots: the upper 32 bits of a sequence's hash, then its id; 0 is
	// empty (the empty sequence is never in the table). A power of two
	// long, at most three quarters full; nil after Compact until needed.
	slots []uint64
}

// NewSeqs returns a table holding the empty sequence alone.
func NewSeqs() Seqs { return Seqs{off: []uint32{0, 0}} }

// Len is the number of sequences, the empty one included.
func (s *Seqs) Len() int { return len(s.off) - 1 }

// Get is sequence id (do not modify); nil for an id not in the table.
func (s *Seqs) Get(id uint32) []uint32 {
	if int(id)+1 >= len(s.off) {
		return nil
	}
	return s.flat[s.off[id]:s.off[id+1]]
}

// hash mixes a sequence's ids in order, so that the same ids in another
// order hash apart.
func hash(seq []uint32) uint64 {
	h := uint64(len(seq)) * 0x9e3779b97f4a7c15
	for _, v := range seq {
		hi, lo := bits.Mul64(h^uint64(v), 0xbf58476d1ce4e5b9)
		h = hi ^ lo
	}
	return h
}

// place puts id, of hash h, in the first free slot of its run.
func place(slots []uint64, h uint64, id uint32) {
	mask := uint64(len(slots) - 1)
	i := h & mask
	for slots[i] != 0 {
		i = (i + 1) & mask
	}
	slots[i] = h>>32<<32 | uint64(id)
}

// Find is the id of seq, if it is in the table.
func (s *Seqs) Find(seq []uint32) (uint32, bool) {
	if len(seq) == 0 {
		return 0, true
	}
	s.index(0)
	h := hash(seq)
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := s.slots[i]
		if v == 0 {
			return 0, false
		}
		if v>>32 == h>>32 && slices.Equal(s.Get(uint32(v)), seq) {
			return uint32(v), true
		}
	}
}

// Intern returns the id of seq, adding a copy of it when new.
func (s *Seqs) Intern(seq []uint32) uint32 {
	if id, ok := s.Find(seq); ok {
		return id
	}
	s.index(1)
	id := uint32(len(s.off) - 1)
	s.flat = append(s.flat, seq...)
	s.off = append(s.off, uint32(len(s.flat)))
	place(s.slots, hash(seq), id)
	return id
}

// index makes the table ready for more sequences than it holds: grown (or
// built again after Compact) when it would be over three quarters full.
func (s *Seqs) index(more int) {
	n := len(s.off) - 2 + more // sequences in the table, the empty one not
	if n*4 <= len(s.slots)*3 && len(s.slots) > 0 {
		return
	}
	size := max(len(s.slots), 1024)
	for n*4 > size*3 {
		size *= 2
	}
	s.slots = make([]uint64, size)
	for id := uint32(1); int(id) < len(s.off)-1; id++ {
		place(s.slots, hash(s.Get(id)), id)
	}
}

// Compact gives back the spare capacity and the lookup table, for a table
// that is only read from now on; Find and Intern build it again.
func (s *Seqs) Compact() {
	s.flat = clip(s.flat)
	s.off = clip(s.off)
	s.slots = nil
}

// Size is the memory the table holds.
func (s *Seqs) Size() int { return 4*(cap(s.flat)+cap(s.off)) + 8*len(s.slots) }

// clip is x in memory of its length: a copy when it has spare capacity.
func clip(x []uint32) []uint32 {
	if cap(x) == len(x) {
		return x
	}
	return append(make([]uint32, 0, len(x)), x...)
}
