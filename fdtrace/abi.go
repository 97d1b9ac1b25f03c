package fdtrace

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/memtrace/memtrace/event/fdevent"
)

// ioctl numbers, as in bpf/fdtrack.h.
const (
	DmaHeapIoctlAlloc = 0xC0184800 // _IOWR('H', 0, struct dma_heap_allocation_data)
	IONIocAlloc       = 0xC0184900 // _IOWR('I', 0, struct ion_allocation_data), 4.12+
	IONIocAllocLegacy = 0xC0204900 // _IOWR('I', 0, legacy struct ion_allocation_data), 64-bit
	IONIocFree        = 0xC0044901 // _IOWR('I', 1, struct ion_handle_data)
)

// eventSize is sizeof(struct fd_event); abi_test.go checks it, and the
// offsets decode reads, against the BTF of the compiled object.
const (
	eventSize = 336
	pathLen   = 256
	// maxFrames is MT_MAX_FRAMES: the stack walk is the allocation
	// tracer's.
	maxFrames = 127
)

var errShortRecord = errors.New("short fd ring-buffer record")

// decode reads struct fd_event. Path is copied: descriptor events are rare
// enough that a string per event costs nothing next to the syscall.
func decode(e *fdevent.Event, b []byte) error {
	if len(b) < eventSize {
		return errShortRecord
	}
	le := binary.LittleEndian
	*e = fdevent.Event{
		TS:        le.Uint64(b[0:]),
		Size:      le.Uint64(b[8:]),
		Flags:     le.Uint64(b[16:]),
		Extra:     le.Uint64(b[24:]),
		TGID:      le.Uint32(b[32:]),
		TID:       le.Uint32(b[36:]),
		FD:        int32(le.Uint32(b[40:])),
		FD2:       int32(le.Uint32(b[44:])),
		Aux:       le.Uint32(b[48:]),
		Call:      fdevent.Call(le.Uint16(b[52:])),
		Type:      fdevent.Type(b[54]),
		Truncated: b[55] != 0,
	}
	copy(e.Comm[:], b[56:72])
	p := b[72 : 72+pathLen]
	if i := bytes.IndexByte(p, 0); i >= 0 {
		p = p[:i]
	}
	e.Path = string(p)
	e.Stack = le.Uint64(b[328:])
	return nil
}
