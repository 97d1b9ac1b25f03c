package analysis

import "encoding/binary"

// Stacks are interned by their frame ids in an intern.Seqs, frames once
// in the frame store (frames.go): a map keyed by the stack's frame ids as a
// string held every stack twice (the key text and the flat slice) beside a
// map entry and a string header, most of a reader's heap on a log of a
// million distinct stacks.

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
	return m.stacks.Intern(frames)
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
