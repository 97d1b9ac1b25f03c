package analysis

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/memtrace/memtrace/internal/logio"
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

// BenchmarkStreamFile reads $MEMTRACE_BENCH_LOG from its file through
// logio, as memview --dump-threads does (SummaryOnly), for profiles of the
// whole reader: read calls, line splitting, parsing, the model.
func BenchmarkStreamFile(b *testing.B) {
	p := os.Getenv("MEMTRACE_BENCH_LOG")
	if p == "" {
		b.Skip("MEMTRACE_BENCH_LOG is not set")
	}
	for _, summary := range []bool{true, false} {
		b.Run(map[bool]string{true: "summary", false: "full"}[summary], func(b *testing.B) {
			for range b.N {
				f, err := os.Open(p)
				if err != nil {
					b.Fatal(err)
				}
				st, _ := f.Stat()
				b.SetBytes(st.Size())
				m := New()
				m.SummaryOnly = summary
				if err := m.Stream(logio.NewReader(f), StreamOptions{}); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}
