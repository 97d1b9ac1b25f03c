package ringread

import (
	"encoding/binary"
	"testing"
)

// fakeRing is a ring over plain memory laid out as the kernel lays out a
// BPF ring buffer's data: the data pages twice in a row.
func fakeRing(size int) (*Reader, *uint64, *uint64) {
	var cons, prod uint64
	return &Reader{cons: &cons, prod: &prod, data: make([]byte, 2*size), mask: uint64(size - 1)}, &cons, &prod
}

// commit writes a record at *prod as the kernel's commit leaves it.
func commit(r *Reader, prod *uint64, payload []byte, flags uint32) {
	off := *prod & r.mask
	n := uint64(len(payload))
	binary.LittleEndian.PutUint32(r.data[off:], uint32(n)|flags)
	copy(r.data[off+ringHdrSize:], payload)
	// The double mapping: what lies past the end shows at the start.
	size := r.mask + 1
	for i := uint64(0); i < ringHdrSize+n; i++ {
		if off+i >= size {
			r.data[off+i-size] = r.data[off+i]
		}
	}
	*prod += ringHdrSize + (n+7)&^7
}

func TestRingDrain(t *testing.T) {
	r, cons, prod := fakeRing(128)
	commit(r, prod, []byte("first"), 0)
	commit(r, prod, []byte("gone"), ringDiscard)
	commit(r, prod, []byte("second!!"), 0)
	busyAt := *prod
	commit(r, prod, []byte("held"), ringBusy)
	commit(r, prod, []byte("after"), 0)
	var got []string
	n, busy := r.drain(func(b []byte) { got = append(got, string(b)) })
	if n != 2 || !busy || len(got) != 2 || got[0] != "first" || got[1] != "second!!" || *cons != busyAt {
		t.Fatalf("drained %d %q busy=%v, consumer at %d (want %d)", n, got, busy, *cons, busyAt)
	}
	// The held record is committed: the rest comes, and the consumer
	// position lands on the producer's.
	binary.LittleEndian.PutUint32(r.data[busyAt&r.mask:], 4)
	got = got[:0]
	n, busy = r.drain(func(b []byte) { got = append(got, string(b)) })
	if n != 2 || busy || got[0] != "held" || got[1] != "after" || *cons != *prod {
		t.Fatalf("second drain %d %q busy=%v, consumer %d producer %d", n, got, busy, *cons, *prod)
	}
	// Past the end of the data pages: a record that wraps reads whole.
	*prod, *cons = 120, 120 // 8 bytes before the end
	commit(r, prod, []byte("0123456789abcdef0123"), 0)
	got = got[:0]
	if n, _ = r.drain(func(b []byte) { got = append(got, string(b)) }); n != 1 || got[0] != "0123456789abcdef0123" {
		t.Fatalf("wrapping record read as %q", got)
	}
}
