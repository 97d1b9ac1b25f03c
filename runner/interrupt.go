package runner

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interrupts: the first SIGINT or SIGTERM closes interrupted. Every wait of
// a run (the source attaching or starting, a viewer's connection, the
// event loop, the program's end) selects on it, so Ctrl-C ends memtrace
// wherever it is, and ends it cleanly: nothing memtrace started is left
// waiting, the probes are off, the log is finished.
var (
	interruptOnce sync.Once
	interrupted   = make(chan struct{})
	interruptSig  syscall.Signal // valid once interrupted is closed
)

// CatchInterrupts starts turning SIGINT and SIGTERM into Interrupted. Run
// calls it; a test that drives a source without Run may too.
func CatchInterrupts() {
	interruptOnce.Do(func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			if s, ok := (<-sig).(syscall.Signal); ok {
				interruptSig = s
			}
			close(interrupted)
		}()
	})
}

// Interrupted is closed by the first SIGINT or SIGTERM.
func Interrupted() <-chan struct{} { return interrupted }

// WasInterrupted reports whether a SIGINT or SIGTERM has come.
func WasInterrupted() bool {
	select {
	case <-interrupted:
		return true
	default:
		return false
	}
}

// InterruptStatus is memtrace's exit status after the signal: 130 for
// Ctrl-C, 143 for SIGTERM, as a shell reports a program they ended.
func InterruptStatus() int {
	if interruptSig == 0 {
		return 130
	}
	return 128 + int(interruptSig)
}

// ErrInterrupted ends memtrace before the program ran.
var ErrInterrupted = errors.New("interrupted before the program started; it did not run")
