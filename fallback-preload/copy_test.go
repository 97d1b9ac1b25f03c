package preload

import "testing"

// fakeChunk plays the library: chunk i of r belongs to stream sid, its
// seq-th chunk, with n records committed.
func fakeChunk(r *region, i int, sid, seq, n uint32, sealed bool) {
	base := r.chunk(i)
	r.put32(base+cPID, 1)
	r.put32(base+cTID, 1)
	r.put32(base+cSeq, seq)
	for k := uint32(0); k < n; k++ {
		off := base + chunkHdr + int(k)*recSize
		r.put64(off+recTSOff, uint64(seq)<<32|uint64(k))
		r.put64(off+recMetaOff, 1)
	}
	r.put32(base+cCommitted, n)
	if sealed {
		r.put32(base+cSealed, 1)
	}
	r.put32(base+cStream, sid)
	r.put32(statesOff+stateSize*i, chOwned)
	hw, k := hHW, i
	if i >= r.nBig {
		hw, k = hHWSmall, i-r.nBig
	}
	if uint32(k) >= r.load(hw) {
		r.put32(hw, uint32(k+1))
	}
}

// A small chunk's records go to a small slot of the copies, or to a large
// one once the small ones are all taken; a large chunk's never go to a
// small slot, and with no slot of its size left the pass says full.
func TestCopierSlotSizes(t *testing.T) {
	r, err := newRegion(4 * chunkSize)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	q := r.copies
	if r.nBig != 4 || r.nchunks-r.nBig < 2 || q.nBig != 2*r.nBig || q.nchunks != 2*r.nchunks ||
		q.tier(false).soft != r.nBig || q.tier(true).soft != r.nchunks-r.nBig {
		t.Fatalf("region of %d chunks, %d large; copies %d, %d large", r.nchunks, r.nBig, q.nchunks, q.nBig)
	}
	k := newCopier(r, q)
	slotOf := func(sid uint32) int {
		for j := 0; j < q.nchunks; j++ {
			if q.load(statesOff+stateSize*j) == chOwned && q.load(q.chunk(j)+cStream) == sid {
				return j
			}
		}
		return -1
	}
	small := r.nBig
	fakeChunk(r, small, 1, 0, 10, false)
	if n, full := k.pass(); n != 10 || full || k.waitMin != noneWaiting {
		t.Fatalf("pass: %d records, full %v, left from %#x; want 10, not full, none left", n, full, k.waitMin)
	}
	if j := slotOf(1); j < q.nBig {
		t.Errorf("a small chunk's records went to slot %d, a large one (%d large)", j, q.nBig)
	}
	// Every small slot taken: the next small chunk's records go to a
	// large slot, whole.
	softSmall := q.tier(true).soft
	q.put32(hHWSmall, uint32(softSmall))
	for j := q.nBig; j < q.nBig+softSmall; j++ {
		if q.load(statesOff+stateSize*j) != chOwned {
			q.put32(statesOff+stateSize*j, chOwned)
		}
	}
	fakeChunk(r, small+1, 2, 0, r.capRecs(small+1), false)
	if n, full := k.pass(); n != int(r.capRecs(small+1)) || full {
		t.Fatalf("pass: %d records, full %v; want %d, not full", n, full, r.capRecs(small+1))
	}
	if j := slotOf(2); j < 0 || j >= q.nBig || q.load(q.chunk(j)+cCommitted) != r.capRecs(small+1) {
		t.Errorf("with the small slots taken: slot %d (want a large one)", j)
	}
	// The large slots taken too (up to the soft count: the rest is the
	// overflow): a large chunk finds none.
	softBig := q.tier(false).soft
	for j := 0; j < softBig; j++ {
		if q.load(statesOff+stateSize*j) != chOwned {
			q.put32(statesOff+stateSize*j, chOwned)
		}
	}
	q.put32(hHW, uint32(softBig))
	fakeChunk(r, 0, 3, 0, 5, false)
	if n, full := k.pass(); n != 0 || !full {
		t.Errorf("no slot left: pass copied %d records, full %v; want 0, full", n, full)
	}
	// The records left in the region bound what the converter may
	// write: the pass names the oldest, the chunk's first (fakeChunk
	// times record k of seq s as s<<32|k); a stream whose earlier chunk
	// found no slot waits behind it with its own.
	if k.waitMin != 0 {
		t.Errorf("left in the region from time 0: the pass says %#x", k.waitMin)
	}
	// (Out of order here, so that the min must come from the chunk
	// behind the blocked one.)
	r.put64(r.chunk(0)+chunkHdr+recTSOff, 1<<40)
	fakeChunk(r, 1, 3, 1, 4, false)
	if k.pass(); k.waitMin != 1<<32 {
		t.Errorf("stream 3's chunks left, first records at 1<<40 and 1<<32: the pass says %#x", k.waitMin)
	}
	// Let into the overflow (the converter is stuck), the copier finds
	// them slots past the soft count.
	k.overflow.Store(true)
	if n, full := k.pass(); n != 9 || full || k.waitMin != noneWaiting {
		t.Errorf("with the overflow: pass copied %d records, full %v, left from %#x; want 9, not full, none", n, full, k.waitMin)
	}
	if j := slotOf(3); j < softBig {
		t.Errorf("stream 3 went to slot %d, not the overflow (from %d)", j, softBig)
	}
}

// The converter reads the copies while the copier fills them: a stream's
// next slot must not appear before the slot of its earlier chunk is
// complete (sealed), or the converter reads the stream's later records
// first. Here the stream's next chunk lies below its earlier one in the
// region, which a pass in the region's order copies first.
func TestCopierKeepsStreamOrder(t *testing.T) {
	r, err := newRegion(4 * chunkSize)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	k := newCopier(r, r.copies)
	q := r.copies
	fakeChunk(r, 2, 1, 0, 10, false)
	if n, _ := k.pass(); n != 10 {
		t.Fatalf("first pass copied %d records, want 10", n)
	}
	// The thread fills and seals its chunk, then takes chunk 0.
	fakeChunk(r, 2, 1, 0, 20, true)
	fakeChunk(r, 0, 1, 1, 5, false)
	k.onSlot = func(slot int) {
		for j := 0; j < int(q.load(hHW)); j++ {
			base := q.chunk(j)
			if j == slot || q.load(statesOff+stateSize*j) != chOwned || q.load(base+cStream) != 1 {
				continue
			}
			if q.load(base+cSeq) < q.load(q.chunk(slot)+cSeq) && (q.load(base+cSealed) == 0 || q.load(base+cCommitted) != 20) {
				t.Errorf("slot %d (seq %d) made while slot %d (seq %d) holds %d records, sealed %d",
					slot, q.load(q.chunk(slot)+cSeq), j, q.load(base+cSeq), q.load(base+cCommitted), q.load(base+cSealed))
			}
		}
	}
	if n, _ := k.pass(); n != 15 {
		t.Fatalf("second pass copied %d records, want 15", n)
	}
	// Chunk 2 is handed back to the library, chunk 0 is still its.
	if st := r.load(statesOff + stateSize*2); st != chFree {
		t.Errorf("sealed and copied chunk: state %d, want free (%d)", st, chFree)
	}
	if st := r.load(statesOff + stateSize*0); st != chOwned {
		t.Errorf("chunk being written: state %d, want owned (%d)", st, chOwned)
	}
}
