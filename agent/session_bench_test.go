package agent

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/logfmt"
)

// BenchmarkSessionPairs is the agent's cost per malloc+free pair (two
// events) from decode to formatted line, the work that competes with the
// traced program for CPU.
func BenchmarkSessionPairs(b *testing.B) {
	s := New(Config{Out: io.Discard})
	s.AddProcess(1, false)
	s.procs[1].scanned = true
	ev := event.Event{TGID: 1, TID: 1, Size: 64, Op: uint8(logfmt.OpMalloc), Kind: event.KindAlloc}
	copy(ev.Comm[:], "loop")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ev.TS = uint64(i) * 1000
		ev.Kind, ev.Op, ev.Ptr = event.KindAlloc, uint8(logfmt.OpMalloc), 0x5000+uint64(i&1023)*64
		s.Add(&ev)
		ev.Kind, ev.Op = event.KindFree, uint8(logfmt.OpFree)
		s.Add(&ev)
		if i&1023 == 0 {
			s.Drain(true)
		}
	}
	s.Drain(true)
}

// benchStacks are stacks shaped like the DWARF walk's on sqlite3 at
// --stack-depth 32: long module paths, a symbol on most frames.
func benchStacks(n, depth int) [][]Frame {
	mods := []string{"/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6", "/usr/bin/sqlite3", "/usr/lib/x86_64-linux-gnu/libc.so.6"}
	syms := []string{"sqlite3Malloc", "sqlite3MallocZero", "", "sqlite3VdbeExec", "sqlite3_step", "__libc_start_main"}
	st := make([][]Frame, n)
	for i := range st {
		for j := 0; j < depth-i%7; j++ {
			st[i] = append(st[i], Frame{Module: mods[(i+j)%3], Symbol: syms[(i*j)%len(syms)],
				Offset: uint64(0x40 + (i*31+j*7)%0x900), Addr: 0x7faa44700000 + uint64(i*4096+j*64)})
		}
	}
	return st
}

// BenchmarkSessionStackPairs is BenchmarkSessionPairs with a stack on
// both events, as --stack-depth 32 gives them: the per-event cost of the
// stack's lines once they are formatted.
func BenchmarkSessionStackPairs(b *testing.B) {
	s := New(Config{Out: io.Discard, InProcess: true})
	s.AddProcess(1, false)
	s.procs[1].scanned = true
	stacks := benchStacks(512, 24)
	for i, st := range stacks {
		s.ResolvedStack(uint64(i+1), st)
	}
	ev := event.Event{TGID: 1, TID: 1, Size: 64, Op: uint8(logfmt.OpMalloc), Kind: event.KindAlloc}
	copy(ev.Comm[:], "loop")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ev.TS = uint64(i) * 1000
		ev.Stack = uint64(i%len(stacks) + 1)
		ev.Kind, ev.Op, ev.Ptr = event.KindAlloc, uint8(logfmt.OpMalloc), 0x5000+uint64(i&1023)*64
		s.Add(&ev)
		ev.Stack = uint64((i*7)%len(stacks) + 1)
		ev.Kind, ev.Op = event.KindFree, uint8(logfmt.OpFree)
		s.Add(&ev)
		if i&1023 == 0 {
			s.Drain(true)
		}
	}
	s.Drain(true)
}

// BenchmarkSessionStackPairsZstd is BenchmarkSessionStackPairs into the
// zstd writer of a -o FILE.zst log, to a file: the agent's and the
// compressor's work per pair together, what decides whether the agent
// keeps up.
func BenchmarkSessionStackPairsZstd(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "run.log.zst"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	z, err := logio.NewWriter(f, logio.Zstd, logio.FlushInterval)
	if err != nil {
		b.Fatal(err)
	}
	s := New(Config{Out: z, InProcess: true})
	s.AddProcess(1, false)
	s.procs[1].scanned = true
	// As many stacks as fit the window many times over, as a
	// program's hot allocation sites do.
	stacks := benchStacks(64, 32)
	for i, st := range stacks {
		s.ResolvedStack(uint64(i+1), st)
	}
	ev := event.Event{TGID: 1, TID: 1, Size: 64, Op: uint8(logfmt.OpMalloc), Kind: event.KindAlloc}
	copy(ev.Comm[:], "loop")
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for i := 0; i < b.N; i++ {
		ev.TS = uint64(i) * 1000
		ev.Stack = uint64(i%len(stacks) + 1)
		ev.Kind, ev.Op, ev.Ptr = event.KindAlloc, uint8(logfmt.OpMalloc), 0x5000+uint64(i&1023)*64
		s.Emit(&ev)
		ev.Stack = uint64((i*7)%len(stacks) + 1)
		ev.Kind, ev.Op = event.KindFree, uint8(logfmt.OpFree)
		s.Emit(&ev)
	}
	if err := s.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := z.Close(); err != nil {
		b.Fatal(err)
	}
	// The process's CPU (the compressor's timed block ends run on a
	// timer's goroutine), which a shared machine's load inflates less
	// than the wall time.
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func processCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
