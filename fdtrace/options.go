package fdtrace

import (
	"errors"
	"time"

	"github.com/cilium/ebpf"

	"github.com/memtrace/memtrace/config"
)

// Options configure a Tracer.
type Options struct {
	// Track says which of config.TrackFD, TrackDmabuf and TrackION to
	// trace; the other bits are ignored.
	Track config.Track
	// RingBytes is the ring buffer size (a power of two, at least a page);
	// 0 means DefaultRingBytes.
	RingBytes int
	// WakeupBytes: records are submitted without waking the reader until
	// this much is pending; 0 means RingBytes/4.
	WakeupBytes int
	// StackDepth is how many user frames each event's stack has (0:
	// none; at most 127). Stacks need Stacks.
	StackDepth int
	// Stacks are the allocation tracer's maps that a descriptor's stack
	// goes through (tracer.Tracer.StackMaps): its unwind tables, the
	// ring its stack and file records are read from, and the sets of
	// stacks and files already sent. With StackDepth and without them,
	// New fails: a stack would go where nothing reads it.
	Stacks map[string]*ebpf.Map
	// DWARF: walk the unwind tables (the tracer's --stack-unwind dwarf);
	// false: the kernel's frame-pointer walk.
	DWARF bool
	// Compat: load the compat build of the programs (bpf/mt_compat.h), as
	// the allocation tracer did (tracer.Tracer.Compat) on a kernel before
	// 5.17; its stack maps are then the compat build's too.
	Compat bool
}

// DefaultRingBytes holds about 12,000 records: a program that opens and
// closes as fast as it can fills a tenth of it per PollInterval.
const DefaultRingBytes = 4 << 20

// PollInterval bounds how long a record waits in the ring buffer when
// wake-ups are batched.
const PollInterval = 20 * time.Millisecond

// ErrUnavailable wraps every failure that means BPF cannot be used here.
var ErrUnavailable = errors.New("eBPF descriptor tracing unavailable")
