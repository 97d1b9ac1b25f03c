package agent

import (
	"io"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/tracer"
)

// BenchmarkSessionPairs is the agent's cost per malloc+free pair (two
// events) from decode to formatted line, the work that competes with the
// traced program for CPU.
func BenchmarkSessionPairs(b *testing.B) {
	s := New(Config{Out: io.Discard})
	s.AddProcess(1, false)
	s.procs[1].scanned = true
	ev := tracer.Event{TGID: 1, TID: 1, Size: 64, Op: uint8(logfmt.OpMalloc), Kind: tracer.KindAlloc}
	copy(ev.Comm[:], "loop")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ev.TS = uint64(i) * 1000
		ev.Kind, ev.Op, ev.Ptr = tracer.KindAlloc, uint8(logfmt.OpMalloc), 0x5000+uint64(i&1023)*64
		s.Add(&ev)
		ev.Kind, ev.Op = tracer.KindFree, uint8(logfmt.OpFree)
		s.Add(&ev)
		if i&1023 == 0 {
			s.Drain(true)
		}
	}
	s.Drain(true)
}
