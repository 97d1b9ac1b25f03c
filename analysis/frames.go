package analysis

import (
	"bytes"
	"hash/maphash"
	"unsafe"
)

// The frame store. A log of a million distinct frames (a JIT, a program of
// many small libraries) made frames the largest part of a reader's heap:
// a Frame of two strings, its key text as a string of its own and that
// string again as a map key. Here a frame is a packed record whose key
// text (the symbol is part of it, its module is kept once) is appended to
// arena chunks that are never written again, and the table is an open
// addressing one of slots holding a hash tag and the frame's id
// (docs/report.md, "Memory", has the figures).

// frameRec is one interned frame.
type frameRec struct {
	key       uint64 // the key text's place in the arena (put); without its module when pre
	keyLen    uint32 // its length, pre in the top bit
	symAt     uint32 // the symbol, from the key's start (it may follow the key)
	symLen    uint32
	mod       uint32 // index into frameStore.mods
	off, addr uint64
}

// frameArenaChunk is the size of an arena chunk: large enough that its
// few allocations cost nothing, small enough that a tiny log does not pay
// for it.
const frameArenaChunk = 256 << 10

// frameStore holds the interned frames of a model.
type frameStore struct {
	recs   []frameRec
	chunks [][]byte
	seed   maphash.Seed
	// slots: the upper 32 bits of a key text's hash, then its frame's id
	// + 1; 0 is empty. A power of two long, at most three quarters full.
	slots   []uint64
	keyed   int // frames in slots
	mods    []string
	modIdx  map[string]uint32
	scratch []byte
}

func newFrameStore() frameStore {
	return frameStore{seed: maphash.MakeSeed(), mods: []string{""}, modIdx: map[string]uint32{"": 0}}
}

// put appends b to the arena and returns where it is.
func (s *frameStore) put(b []byte) uint64 {
	n := len(s.chunks)
	if n == 0 || len(s.chunks[n-1])+len(b) > cap(s.chunks[n-1]) {
		s.chunks = append(s.chunks, make([]byte, 0, max(frameArenaChunk, len(b))))
		n++
	}
	c := &s.chunks[n-1]
	at := uint64(n-1)<<32 | uint64(len(*c))
	*c = append(*c, b...)
	return at
}

// str is the arena's text at at, n bytes long, as a string that shares
// the arena's memory: what is written there is never written again.
func (s *frameStore) str(at uint64, n uint32) string {
	if n == 0 {
		return ""
	}
	c := s.chunks[at>>32]
	return unsafe.String(&c[uint32(at)], int(n))
}

// pre marks a key stored without its module, which starts it: the
// module's name is kept once, not in front of each of its frames.
const pre = 1 << 31

// keyOf is frame id's key text as stored, and the module name in front
// of it ("" when none).
func (s *frameStore) keyOf(id uint32) (string, []byte) {
	r := &s.recs[id]
	n := r.keyLen &^ pre
	var mod string
	if r.keyLen&pre != 0 {
		mod = s.mods[r.mod]
	}
	if n == 0 {
		return mod, nil
	}
	c := s.chunks[r.key>>32]
	o := uint32(r.key)
	return mod, c[o : o+n]
}

// keyIs reports whether frame id's key text is key.
func (s *frameStore) keyIs(id uint32, key []byte) bool {
	mod, rest := s.keyOf(id)
	return len(key) == len(mod)+len(rest) && string(key[:len(mod)]) == mod && bytes.Equal(key[len(mod):], rest)
}

// hashOf is the hash of frame id's key text.
func (s *frameStore) hashOf(id uint32) uint64 {
	mod, rest := s.keyOf(id)
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(mod)
	h.Write(rest)
	return h.Sum64()
}

// find returns the frame whose key text is key.
func (s *frameStore) find(key []byte) (uint32, bool) {
	return s.findHash(key, maphash.Bytes(s.seed, key))
}

// findHash is find for a key whose hash (maphash.Bytes with s.seed) the
// caller has: the parsers hash a frame line's text beside the model.
func (s *frameStore) findHash(key []byte, h uint64) (uint32, bool) {
	if len(s.slots) == 0 {
		if s.keyed == 0 {
			return 0, false
		}
		s.reindex() // dropped by compact
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := s.slots[i]
		if v == 0 {
			return 0, false
		}
		if v>>32 == h>>32 {
			if id := uint32(v) - 1; s.keyIs(id, key) {
				return id, true
			}
		}
	}
}

// place puts frame id, of hash h, in the first free slot of its run.
func (s *frameStore) place(h uint64, id uint32) {
	mask := uint64(len(s.slots) - 1)
	i := h & mask
	for s.slots[i] != 0 {
		i = (i + 1) & mask
	}
	s.slots[i] = h>>32<<32 | uint64(id+1)
}

// index adds frame id to the table, growing it first when full.
func (s *frameStore) index(h uint64, id uint32) {
	if len(s.slots) == 0 && s.keyed > 0 {
		s.reindex()
	}
	if (s.keyed+1)*4 > len(s.slots)*3 {
		old := s.slots
		s.slots = make([]uint64, max(2*len(old), 1024))
		for _, v := range old {
			if v != 0 {
				o := uint32(v) - 1
				s.place(s.hashOf(o), o)
			}
		}
	}
	s.place(h, id)
	s.keyed++
}

// reindex builds the table again after compact dropped it.
func (s *frameStore) reindex() {
	size := 1024
	for s.keyed*4 > size*3 {
		size *= 2
	}
	s.slots = make([]uint64, size)
	for id := range s.recs {
		if s.recs[id].keyLen != 0 {
			s.place(s.hashOf(uint32(id)), uint32(id))
		}
	}
}

// compact drops the table of a store that is only read from now on (a
// finished log's): find and add build it again when needed.
func (s *frameStore) compact() {
	shrink(&s.recs)
	s.slots = nil
}

// add interns a new frame of key text key (not found before).
func (s *frameStore) add(key, module, symbol []byte, off, addr uint64) uint32 {
	mod, ok := s.modIdx[string(module)]
	if !ok {
		mod = uint32(len(s.mods))
		name := string(module)
		s.mods = append(s.mods, name)
		s.modIdx[name] = mod
	}
	h := maphash.Bytes(s.seed, key)
	r := frameRec{keyLen: uint32(len(key)), symLen: uint32(len(symbol)), mod: mod, off: off, addr: addr}
	i := bytes.Index(key, symbol)
	if len(module) > 0 && bytes.HasPrefix(key, module) && (len(symbol) == 0 || i >= len(module)) {
		key, i = key[len(module):], i-len(module)
		r.keyLen = uint32(len(key)) | pre
	}
	if len(symbol) == 0 || i >= 0 {
		r.key, r.symAt = s.put(key), uint32(max(i, 0))
	} else {
		// Not inside the key: stored right after it.
		s.scratch = append(append(s.scratch[:0], key...), symbol...)
		r.key, r.symAt = s.put(s.scratch), uint32(len(key))
	}
	id := uint32(len(s.recs))
	s.recs = append(s.recs, r)
	s.index(h, id)
	return id
}

// addAddr interns a frame known by its address alone (no key text).
func (s *frameStore) addAddr(addr uint64) uint32 {
	s.recs = append(s.recs, frameRec{addr: addr})
	return uint32(len(s.recs) - 1)
}

// frame is frame id as a Frame.
func (s *frameStore) frame(id uint32) Frame {
	r := &s.recs[id]
	f := Frame{Module: s.mods[r.mod], Offset: r.off, Addr: r.addr}
	if r.symLen > 0 {
		f.Symbol = s.str(r.key+uint64(r.symAt), r.symLen)
	}
	return f
}

// size is the memory the store holds in its records, arena and table.
func (s *frameStore) size() int {
	n := cap(s.recs)*int(unsafe.Sizeof(frameRec{})) + 8*len(s.slots)
	for _, c := range s.chunks {
		n += cap(c)
	}
	return n
}
