package launch

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interrupts: the first SIGINT or SIGTERM closes interrupted. Every wait of
// the eBPF path (attaching, a viewer's connection, the event loop) selects
// on it, so Ctrl-C ends memtrace wherever it is, and ends it cleanly: the
// exec shim killed, the probes off, the log finished.
var (
	interruptOnce sync.Once
	interrupted   = make(chan struct{})
	interruptSig  syscall.Signal // valid once interrupted is closed
)

// catchInterrupts starts turning SIGINT and SIGTERM into interrupted.
func catchInterrupts() {
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

// wasInterrupted reports whether a SIGINT or SIGTERM has come.
func wasInterrupted() bool {
	select {
	case <-interrupted:
		return true
	default:
		return false
	}
}

// interruptStatus is memtrace's exit status after the signal: 130 for
// Ctrl-C, 143 for SIGTERM, as a shell reports a program they ended.
func interruptStatus() int {
	if interruptSig == 0 {
		return 130
	}
	return 128 + int(interruptSig)
}

// interruptError ends memtrace before the program ran.
type interruptError struct{}

func (interruptError) Error() string { return "interrupted before the program started; it did not run" }
