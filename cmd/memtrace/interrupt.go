package main

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
)

// catchInterrupts starts turning SIGINT and SIGTERM into interrupted.
func catchInterrupts() {
	interruptOnce.Do(func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			<-sig
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

// errInterrupted ends memtrace with status 130 before the program ran.
type interruptError struct{}

func (interruptError) Error() string { return "interrupted before the program started; it did not run" }
