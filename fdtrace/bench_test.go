//go:build amd64 || arm64

package fdtrace

import (
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/event/fdevent"
)

// benchTracer attaches a tracer for the benchmark; self also adds this
// process, and a goroutine drains the ring as the agent would.
func benchTracer(b *testing.B, self bool) {
	requireBPF(b)
	tr, err := New(Options{Track: trackAll})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if tr.Read(func(*fdevent.Event) {}) != nil {
				return
			}
		}
	}()
	b.Cleanup(func() {
		close(done)
		wg.Wait()
		if n := tr.Lost(); n != 0 {
			b.Logf("lost %d records", n)
		}
		tr.Close()
	})
	if self {
		if err := tr.AddProcess(os.Getpid()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUntracedSyscall: the cost that the attached tracepoints add to
// a syscall that is not traced (getppid), in this process or any other.
func BenchmarkUntracedSyscall(b *testing.B) {
	for _, mode := range []string{"detached", "attached", "attached-self"} {
		b.Run(mode, func(b *testing.B) {
			if mode != "detached" {
				benchTracer(b, mode == "attached-self")
			}
			for b.Loop() {
				unix.Getppid()
			}
		})
	}
}

// BenchmarkDupClose: a dup and a close, each one record when traced.
func BenchmarkDupClose(b *testing.B) {
	for _, mode := range []string{"detached", "attached", "attached-self"} {
		b.Run(mode, func(b *testing.B) {
			if mode != "detached" {
				benchTracer(b, mode == "attached-self")
			}
			for b.Loop() {
				fd, err := unix.Dup(0)
				if err != nil {
					b.Fatal(err)
				}
				unix.Close(fd)
			}
		})
	}
}
