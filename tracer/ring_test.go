//go:build amd64 || arm64

package tracer

import (
	"encoding/binary"
	"testing"
	"time"
)

// fakeRing is a ring over plain memory: the slot logic without BPF.
func fakeRing(nslots uint64) (*ring, *uint64, *uint64) {
	var head, spos uint64
	r := &ring{slotMem: make([]byte, nslots*slotSize), nslots: nslots, head: &head, spos: &spos}
	for uint64(1)<<r.shift < nslots {
		r.shift++
	}
	return r, &head, &spos
}

// put writes what the BPF side's publish writes for position p.
func put(r *ring, p uint64, kind uint8, ptr uint64, tid uint32) {
	off := (p & (r.nslots - 1)) * slotSize
	s := r.slotMem[off : off+slotSize]
	binary.LittleEndian.PutUint64(s[8:], ptr)
	s[24] = kind
	binary.LittleEndian.PutUint32(s[28:], tid|uint32(p>>r.shift)&lapMask<<tidBits)
}

func TestRingSlots(t *testing.T) {
	r, head, spos := fakeRing(8)
	put(r, 0, KindAlloc, 0x10, 7)
	put(r, 1, KindRealloc|kindExt, 0x20, 7)
	put(r, 2, 0, 0x99, 7) // the extension
	*head = 5             // 3 and 4 claimed, not yet written
	put(r, 4, KindFree, 0x40, 8)
	if got := r.readyUpTo(); got != 3 {
		t.Fatalf("ready up to %d, want 3 (slot 3 is claimed but not written)", got)
	}
	var ptrs []uint64
	var exts int
	n := r.deliver(3, func(s, ext []byte) {
		ptrs = append(ptrs, binary.LittleEndian.Uint64(s[8:]))
		if ext != nil {
			exts++
			if binary.LittleEndian.Uint64(ext[8:]) != 0x99 {
				t.Errorf("extension of the wrong slot")
			}
		}
	})
	if n != 2 || len(ptrs) != 2 || ptrs[0] != 0x10 || ptrs[1] != 0x20 || exts != 1 || *spos != 3 {
		t.Fatalf("delivered %d %x (%d extensions), read position %d", n, ptrs, exts, *spos)
	}
	// Slot 3 stays unwritten: after stuckLimit it is given up on.
	if got := r.readyUpTo(); got != 3 {
		t.Fatalf("ready up to %d before the limit", got)
	}
	r.stuckT = time.Now().Add(-stuckLimit - time.Second)
	if got := r.readyUpTo(); got != 5 || r.skipped.Load() != 1 || r.pos != 4 {
		t.Fatalf("after the limit: ready up to %d, skipped %d, pos %d", got, r.skipped.Load(), r.pos)
	}
	r.deliver(5, func(s, ext []byte) {})
	// Position 8 is slot 0 again, one lap on: the old word must not pass
	// for a new one, nor the late write of the skipped slot 3 next lap.
	*head = 12
	put(r, 3, KindAlloc, 0x33, 9) // late write, lap 0
	for p := uint64(5); p < 8; p++ {
		put(r, p, KindAlloc, p, 9)
	}
	if got := r.readyUpTo(); got != 8 {
		t.Fatalf("ready up to %d, want 8: slot 0 holds last lap's word", got)
	}
	r.deliver(8, func(s, ext []byte) {})
	put(r, 8, KindAlloc, 8, 9)
	if got := r.readyUpTo(); got != 9 {
		t.Fatalf("ready up to %d after this lap's write, want 9", got)
	}
	r.deliver(9, func(s, ext []byte) {})
	put(r, 9, KindAlloc, 9, 9)
	put(r, 10, KindAlloc, 10, 9)
	if got := r.readyUpTo(); got != 11 {
		t.Fatalf("ready up to %d, want 11: slot 11 (3) holds a write of lap 0", got)
	}
}
