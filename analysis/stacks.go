package analysis

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// The stack store. A stack is its frame ids back to back in one slice
// (frames are interned once, frames.go), found again through an open
// addressing table of hash tags and ids over that slice: no key of its own
// per stack. A map keyed by the stack's frame ids as a string held every
// stack twice (the key text and the flat slice) beside a map entry and a
// string header, most of a reader's heap on a log of a million distinct
// stacks.
type stackStore struct {
	flat []uint32 // frames of all stacks, back to back
	off  []uint32 // stack id → start in flat; len(off) = stacks+1
	// slots: the upper 32 bits of a stack's hash, then its id; 0 is
	// empty (stack 0, the empty one, is never in the table). A power of
	// two long, at most three quarters full.
	slots []uint64
}

func newStackStore() stackStore { return stackStore{off: []uint32{0, 0}} }

// frames is stack id's frames.
func (s *stackStore) frames(id uint32) []uint32 { return s.flat[s.off[id]:s.off[id+1]] }

// hashFrames mixes a stack's frame ids, each multiplied in with its
// position's bits carried over, so that equal frames in another order
// hash apart.
func hashFrames(frames []uint32) uint64 {
	h := uint64(len(frames)) * 0x9e3779b97f4a7c15
	for _, f := range frames {
		hi, lo := bits.Mul64(h^uint64(f), 0xbf58476d1ce4e5b9)
		h = hi ^ lo
	}
	return h
}

// place puts stack id, of hash h, in the first free slot of its run.
func (s *stackStore) place(h uint64, id uint32) {
	mask := uint64(len(s.slots) - 1)
	i := h & mask
	for s.slots[i] != 0 {
		i = (i + 1) & mask
	}
	s.slots[i] = h>>32<<32 | uint64(id)
}

// intern returns the id of a non-empty sequence of frames, adding it when new.
func (s *stackStore) intern(frames []uint32) uint32 {
	h := hashFrames(frames)
	if len(s.slots) > 0 {
		mask := uint64(len(s.slots) - 1)
		for i := h & mask; ; i = (i + 1) & mask {
			v := s.slots[i]
			if v == 0 {
				break
			}
			if v>>32 == h>>32 && slices.Equal(s.frames(uint32(v)), frames) {
				return uint32(v)
			}
		}
	}
	id := uint32(len(s.off) - 1)
	s.flat = append(s.flat, frames...)
	s.off = append(s.off, uint32(len(s.flat)))
	if int(id)*4 > len(s.slots)*3 { // stacks 1 to id in the table once this one is
		old := s.slots
		s.slots = make([]uint64, max(2*len(old), 1024))
		for _, v := range old {
			if v != 0 {
				s.place(hashFrames(s.frames(uint32(v))), uint32(v))
			}
		}
	}
	s.place(h, id)
	return id
}

// size is the memory the store holds.
func (s *stackStore) size() int { return 4*(cap(s.flat)+cap(s.off)) + 8*len(s.slots) }

// internFrame returns the id of a frame, keyed by its raw text (module,
// symbol, offset and address as written), so that a known frame costs one
// map lookup and no allocation.
func (m *Model) internFrame(key, module, symbol []byte, off, addr uint64) uint32 {
	if len(key) == 0 {
		if id, ok := m.frameAddr[addr]; ok {
			return id
		}
		id := m.frames.addAddr(addr)
		m.frameAddr[addr] = id
		return id
	}
	if id, ok := m.frames.find(key); ok {
		return id
	}
	return m.frames.add(key, module, symbol, off, addr)
}

// internStack returns the id of a sequence of frames; 0 is the empty stack.
func (m *Model) internStack(frames []uint32) uint32 {
	if len(frames) == 0 {
		return 0
	}
	return m.stacks.intern(frames)
}

// InternStack interns a stack given as frames; for tests and for callers
// that build models without a log.
func (m *Model) InternStack(frames []Frame) uint32 {
	ids := make([]uint32, len(frames))
	for i, f := range frames {
		key := []byte(f.Module + "(" + f.Symbol + ")")
		key = binary.LittleEndian.AppendUint64(key, f.Offset)
		key = binary.LittleEndian.AppendUint64(key, f.Addr)
		ids[i] = m.internFrame(key, []byte(f.Module), []byte(f.Symbol), f.Offset, f.Addr)
	}
	return m.internStack(ids)
}

// assignStack gives the open frames to their event. With final false the
// frames stay open, since the rest of them may arrive with the next read.
func (m *Model) assignStack(final bool) {
	if m.target == noTarget {
		m.openFrames = m.openFrames[:0]
		m.openTrunc, m.openCut = 0, false
		return
	}
	s := m.internStack(m.openFrames)
	if final {
		switch {
		case m.openTrunc != 0:
			m.noteTruncated(s, m.openTrunc)
		case m.openCut:
			m.noteTruncated(s, m.truncReason(ReasonMaxFrames))
		}
		m.openTrunc, m.openCut = 0, false
	}
	switch {
	case m.target < 0:
		k := ^m.target
		m.Orphans.Stack[k] = s
		if c := m.Orphans.Claimed[k]; c >= 0 {
			m.FreeStack[c] = s
		}
	case m.openFree:
		m.FreeStack[m.target] = s
	default:
		m.Stack[m.target] = s
	}
	if final {
		m.openFrames = m.openFrames[:0]
		m.target = noTarget
	}
}
