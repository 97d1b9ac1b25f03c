package runner

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// processStart stands for memtrace's own start: set as the package
// initialises, before main runs (what it misses is the exec of memtrace and
// the Go runtime's start, the same for every run).
var processStart = time.Now()

// phases are the moments a run's cost splits at, for -v and make bench:
// start-up (memtrace's start to the program's release: holds, tables,
// probes, the verifier), the run, and the end (the last traced process's
// exit to memtrace's exit: the ring's drain, the closing lines, the
// probes' removal). Zero where the run had no such moment (an attach has
// no release of a program; a detach no exit).
type phases struct {
	mu       sync.Mutex
	released time.Time
	exited   time.Time
}

// MarkReleased records that the program was let go: its first instruction
// is next. Sources call it once, just before the release.
func (r *Handle) MarkReleased() {
	r.phases.mu.Lock()
	defer r.phases.mu.Unlock()
	if r.phases.released.IsZero() {
		r.phases.released = time.Now()
	}
}

// MarkExited records that the program (with --follow, the last traced
// process) has exited, as soon as the source learns of it.
func (r *Handle) MarkExited() {
	r.phases.mu.Lock()
	defer r.phases.mu.Unlock()
	r.phases.exited = time.Now()
}

// writePhases writes the -v line of the run's phases, end being now.
func (r *Handle) writePhases(w io.Writer, end time.Time) {
	r.phases.mu.Lock()
	defer r.phases.mu.Unlock()
	fmt.Fprintln(w, phaseLine(processStart, r.phases.released, r.phases.exited, end))
}

func phaseLine(start, released, exited, end time.Time) string {
	ms := func(a, b time.Time) string {
		if a.IsZero() || b.IsZero() || b.Before(a) {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(b.Sub(a).Microseconds())/1000)
	}
	runFrom := released
	if runFrom.IsZero() {
		runFrom = start
	}
	runTo := exited
	if runTo.IsZero() {
		runTo = end
	}
	return fmt.Sprintf("memtrace: phases: start-up %s ms (memtrace's start to the program's release), run %s ms, end %s ms (the program's exit to memtrace's exit)",
		ms(start, released), ms(runFrom, runTo), ms(exited, end))
}
