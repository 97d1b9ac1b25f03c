//go:build linux

package analysis

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident counts the resident pages of the whole pages inside s.
func resident(t *testing.T, s []byte) (in, all int) {
	t.Helper()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	lo := (base + pageSize - 1) &^ (pageSize - 1)
	hi := (base + uintptr(len(s))) &^ (pageSize - 1)
	vec := make([]byte, (hi-lo)/pageSize)
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(s)), lo-base)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(p), hi-lo, uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		t.Skipf("mincore: %v", e)
	}
	for _, v := range vec {
		in += int(v & 1)
	}
	return in, len(vec)
}

func TestPrefaultMakesResident(t *testing.T) {
	s := make([]byte, 16<<20)
	half := len(s) / 2
	if in, _ := resident(t, s[:half]); in > 0 {
		t.Skip("the runtime gave memory already resident")
	}
	// The heap may hand out pages past the range that an earlier test
	// touched and freed: those were resident before prefault.
	before, _ := resident(t, s[half+int(hugeMin):])
	prefault(s, 0, half)
	in, all := resident(t, s[:half])
	if in < all-1 {
		// Kernels before 5.14 refuse the advice: nothing to test there.
		if err := unix.Madvise(s[half:half+int(pageSize)], unix.MADV_POPULATE_WRITE); err != nil {
			t.Skipf("MADV_POPULATE_WRITE: %v", err)
		}
		t.Fatalf("%d of %d pages resident after prefault", in, all)
	}
	if n, _ := resident(t, s[half+int(hugeMin):]); n > before {
		t.Errorf("prefault made %d pages resident past its range (%d were before)", n-before, before)
	}
	if !release(s[:half]) {
		t.Fatal("release refused")
	}
	if in, _ := resident(t, s[:half]); in > 1 {
		t.Errorf("%d pages resident after release", in)
	}
}

// TestColumnsReservedFromSample: a log of known size gets its columns
// reserved from the allocations of its first part, close to what the
// whole needs, and trim then keeps them where they are instead of
// copying them to shrink them.
func TestColumnsReservedFromSample(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	evs := genHistory(r, 400_000, 8)
	for i := range evs {
		evs[i].stack = i % 3 // about 150 bytes of frames an event
	}
	data := writeEvents(evs, false, r, false)
	m := New()
	var capAtEnd int
	var col *uint64
	o := StreamOptions{SizeHint: int64(len(data)), Workers: 2}
	o.applying = func(*batch) {
		capAtEnd = cap(m.TS)
		if len(m.TS) > 0 {
			col = &m.TS[0]
		}
	}
	if err := m.Stream(bytes.NewReader(data), o); err != nil {
		t.Fatal(err)
	}
	n := m.Len()
	// The first part of a log holds more allocations than frees (its
	// heap grows): the estimate is a little over.
	if capAtEnd > n+n/4 {
		t.Errorf("columns reserved for %d allocations, the log has %d", capAtEnd, n)
	}
	if capAtEnd < n {
		t.Errorf("columns reserved for %d allocations, fewer than the log's %d", capAtEnd, n)
	}
	if &m.TS[0] != col {
		t.Error("trim copied a column")
	}
	if cap(m.TS)-n > n/8+1024 {
		t.Errorf("trim kept room for %d allocations beside the %d", cap(m.TS)-n, n)
	}
}
