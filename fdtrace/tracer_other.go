//go:build !amd64 && !arm64

package fdtrace

import (
	"fmt"

	"github.com/memtrace/memtrace/event/fdevent"
)

// Tracer is not available where the BPF objects are not built (32-bit ARM).
type Tracer struct{}

// New reports that descriptor tracing is not built for this architecture.
func New(Options) (*Tracer, error) {
	return nil, fmt.Errorf("%w: the BPF programs are built for x86-64 and arm64 only", ErrUnavailable)
}

func (*Tracer) AddProcess(int) error            { return ErrUnavailable }
func (*Tracer) RemoveProcess(int)               {}
func (*Tracer) Lost() uint64                    { return 0 }
func (*Tracer) Read(func(*fdevent.Event)) error { return ErrUnavailable }
func (*Tracer) Detach()                         {}
func (*Tracer) Close() error                    { return nil }
