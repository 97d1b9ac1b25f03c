//go:build !amd64 && !arm64

package tracer

import (
	"fmt"

	"github.com/memtrace/memtrace/event"
)

// The BPF objects are built for x86-64 and arm64 only; elsewhere (32-bit
// ARM boards) memtrace uses the LD_PRELOAD fallback, and New says so.

// Tracer is not available on this architecture.
type Tracer struct{}

// New reports that eBPF tracing is not built for this architecture.
func New(Options) (*Tracer, error) {
	return nil, fmt.Errorf("%w: memtrace's BPF programs are built for x86-64 and arm64 only", ErrUnavailable)
}

func (*Tracer) Multi() bool                             { return false }
func (*Tracer) AddProcess(int) error                    { return ErrUnavailable }
func (*Tracer) Lost() uint64                            { return 0 }
func (*Tracer) SampleUntracked() uint64                 { return 0 }
func (*Tracer) FellBack() []string                      { return nil }
func (*Tracer) Read(event.Handler) error                { return ErrUnavailable }
func (*Tracer) Close() error                            { return nil }
func (*Tracer) Detach()                                 {}
func (*Tracer) Session() bool                           { return false }
func (*Tracer) Compat() string                          { return "" }
func (*Tracer) AttachLibrary(int, string) (bool, error) { return false, ErrUnavailable }
func (*Tracer) ScanProcess(int) ([]string, error)       { return nil, ErrUnavailable }
func (*Tracer) Resume(pid int, key uint32) error        { return ErrUnavailable }
func (*Tracer) HoldFD() int                             { return -1 }
func (*Tracer) ReleaseProcess(int)                      {}

// ResumeHeld has no map to sweep where BPF is not built.
func ResumeHeld(int) (int, error) { return 0, ErrUnavailable }

// ProgramStats has no programs to count where BPF is not built.
func (*Tracer) ProgramStats() []ProgramStat { return nil }

// WalkReuse has no walks where BPF is not built.
func (*Tracer) WalkReuse() (replayed, walked uint64) { return 0, 0 }

// UnwindUsage has no tables where BPF is not built.
func (*Tracer) UnwindUsage() (rows, capacity uint32, tables int) { return 0, 0, 0 }

// SetHandOff, Wake and AllowHandOff have nothing to hand off or wake
// where the tracer is unavailable.
func (*Tracer) SetHandOff(func(fds []int) error) {}
func (*Tracer) Wake()                            {}
func (*Tracer) AllowHandOff()                    {}

// KernelRelease: no kernel side, no holds.
func KernelRelease() bool { return false }
