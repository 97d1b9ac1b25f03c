package logio

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// BenchmarkZstdLog compresses a real log (MEMTRACE_BENCH_LOG=FILE, plain
// text: `memtrace --stack-depth 32 -o FILE -- PROG` makes one) with the
// writer's settings and the ones they were chosen against, as the agent
// hands it over (its buffer's worth at a time). It reports the
// compressed bytes per event (alloc and free lines) and the compressor's
// time per event, what the agent spends beside its own work.
func BenchmarkZstdLog(b *testing.B) {
	path := os.Getenv("MEMTRACE_BENCH_LOG")
	if path == "" {
		b.Skip("MEMTRACE_BENCH_LOG=FILE (a plain-text log) names the log to compress")
	}
	text, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	events := bytes.Count(text, []byte(" ptr="))
	if events == 0 {
		b.Fatalf("%s: no alloc or free line", path)
	}
	type setting struct {
		name string
		opts []zstd.EOption
	}
	var settings []setting
	for _, lvl := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression} {
		for _, win := range []int{1, 2, 4, 8, 16} {
			if lvl != zstd.SpeedDefault && win != 1 && win != 8 {
				continue
			}
			settings = append(settings, setting{fmt.Sprintf("%s/window=%dMiB", lvl, win),
				[]zstd.EOption{zstd.WithEncoderLevel(lvl), zstd.WithWindowSize(win << 20)}})
		}
	}
	settings = append(settings,
		setting{"default/window=1MiB/nocrc", []zstd.EOption{zstd.WithEncoderCRC(false), zstd.WithWindowSize(ZstdWindow)}},
		setting{"default/window=1MiB/lowmem", []zstd.EOption{zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(ZstdWindow)}})
	const chunk = 256 << 10 // the agent's buffer
	for _, st := range settings {
		b.Run(st.name, func(b *testing.B) {
			// The compressor runs on this goroutine (concurrency 1):
			// its thread's CPU time is the compressor's, which a shared
			// machine's load inflates less than the wall time.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var out int64
			cpu0 := threadCPU(b)
			for b.Loop() {
				c := &countingWriter{}
				opts := append([]zstd.EOption{zstd.WithEncoderConcurrency(1)}, st.opts...)
				enc, err := zstd.NewWriter(c, opts...)
				if err != nil {
					b.Fatal(err)
				}
				for off := 0; off < len(text); off += chunk {
					if _, err := enc.Write(text[off:min(off+chunk, len(text))]); err != nil {
						b.Fatal(err)
					}
				}
				if err := enc.Close(); err != nil {
					b.Fatal(err)
				}
				out = c.n
			}
			cpu := threadCPU(b) - cpu0
			b.ReportMetric(float64(out)/float64(events), "B/event")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(events), "cpu-ns/event")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func threadCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}
