package analysis

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"
)

// benchLog is $MEMTRACE_BENCH_LOG (scripts/bench-viewer.sh sets it to the
// 4M-event log) or a generated 200k-event log.
func benchLog(b *testing.B) []byte {
	if p := os.Getenv("MEMTRACE_BENCH_LOG"); p != "" {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	r := rand.New(rand.NewPCG(1, 1))
	return writeEvents(genHistory(r, 200_000, 8), false, r, false)
}

func BenchmarkStream(b *testing.B) {
	data := benchLog(b)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		m := New()
		if err := m.ReadAll(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStreamSummary(b *testing.B) {
	data := benchLog(b)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		m := New()
		m.SummaryOnly = true
		if err := m.ReadAll(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSelectLeaksBySize(b *testing.B) {
	m := New()
	if err := m.ReadAll(bytes.NewReader(benchLog(b))); err != nil {
		b.Fatal(err)
	}
	m.Order(SortSize)
	q := NewQuery()
	q.Sort, q.Status = SortSize, FilterLeaks
	var sel []uint32
	b.ResetTimer()
	for range b.N {
		sel = m.Select(&q, sel)
	}
}
