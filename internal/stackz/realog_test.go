package stackz

import (
	"bytes"
	"hash/maphash"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// marksOf finds the stack texts of a log as the agent would mark them:
// the frame lines (and a truncation line) after each event line.
func marksOf(text []byte) []Mark {
	var marks []Mark
	seed := maphash.MakeSeed()
	texts := map[uint64][]byte{}
	text1 := func(b []byte) []byte {
		id := maphash.Bytes(seed, b)
		if texts[id] == nil {
			texts[id] = bytes.Clone(b)
		}
		return texts[id]
	}
	frame := []byte("[memtrack]   #")
	trunc := []byte("[memtrace] stack ")
	start := -1
	for off := 0; off < len(text); {
		nl := bytes.IndexByte(text[off:], '\n')
		if nl < 0 {
			break
		}
		line := text[off : off+nl+1]
		isStack := bytes.HasPrefix(line, frame) || bytes.HasPrefix(line, trunc)
		if isStack && start < 0 {
			start = off
		}
		if !isStack && start >= 0 {
			marks = append(marks, Mark{Off: start, Len: off - start, ID: maphash.Bytes(seed, text[start:off]), Text: text1(text[start:off])})
			start = -1
		}
		off += nl + 1
	}
	if start >= 0 {
		marks = append(marks, Mark{Off: start, Len: len(text) - start, ID: maphash.Bytes(seed, text[start:]), Text: text1(text[start:])})
	}
	return marks
}

// chunk is one of the agent's writes: text and its stacks' marks.
type chunk struct {
	p  []byte
	ms []Mark
}

// realLog reads the plain log STACKZ_LOG names and cuts it into the
// agent's 256 KiB writes; it skips without one.
func realLog(tb testing.TB) (text []byte, chunks []chunk, events int) {
	path := os.Getenv("STACKZ_LOG")
	if path == "" {
		tb.Skip("STACKZ_LOG not set")
	}
	text, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	marks := marksOf(text)
	mi := 0
	for off := 0; off < len(text); off += 256 << 10 {
		end := min(off+256<<10, len(text))
		var ms []Mark
		for mi < len(marks) && marks[mi].Off+marks[mi].Len <= end {
			if m := marks[mi]; m.Off >= off {
				m.Off -= off
				ms = append(ms, m)
			}
			mi++
		}
		chunks = append(chunks, chunk{text[off:end], ms})
	}
	return text, chunks, bytes.Count(text, []byte("[memtrack] tid="))
}

// TestRealLog: a real log round-trips, at memtrace's window and a larger
// one; its size an event is logged.
func TestRealLog(t *testing.T) {
	text, chunks, events := realLog(t)
	for _, window := range []int{1 << 20, 8 << 20} {
		var z bytes.Buffer
		e, _ := NewEncoder(&z, window)
		for _, c := range chunks {
			e.WriteMarked(c.p, c.ms)
		}
		e.Close()
		t.Logf("window %d: %.2f B/event, %+v", window, float64(z.Len())/float64(events), e.Stats)
		if got := decode(t, z.Bytes()); !bytes.Equal(got, text) {
			t.Fatal("round trip differs")
		}
	}
}

// BenchmarkRealLog: stackz against klauspost's default level on
// STACKZ_LOG, in the agent's writes, and stackz in a long run's steady
// state.
func BenchmarkRealLog(b *testing.B) {
	_, chunks, events := realLog(b)
	encoders := []struct {
		name string
		open func(w io.Writer) markedCloser
	}{
		{"stackz", func(w io.Writer) markedCloser {
			e, _ := NewEncoder(w, 1<<20)
			return e
		}},
		{"klauspost", func(w io.Writer) markedCloser {
			z, _ := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
			return unmarked{z}
		}},
	}
	for _, enc := range encoders {
		b.Run(enc.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				var z bytes.Buffer
				e := enc.open(&z)
				for _, c := range chunks {
					e.WriteMarked(c.p, c.ms)
				}
				e.Close()
				size = z.Len()
			}
			b.ReportMetric(float64(size)/float64(events), "B/event")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
		})
	}
	// A new encoder's first pass pays for its history's first touch (and
	// the agent's one encoder pays it once a run): the log again through
	// the same encoder is what an event costs in a long run.
	b.Run("stackz-steady", func(b *testing.B) {
		var size int
		for b.Loop() {
			b.StopTimer()
			var z bytes.Buffer
			e, _ := NewEncoder(&z, 1<<20)
			for _, c := range chunks {
				e.WriteMarked(c.p, c.ms)
			}
			e.Flush()
			first := z.Len()
			b.StartTimer()
			for _, c := range chunks {
				e.WriteMarked(c.p, c.ms)
			}
			e.Close()
			size = z.Len() - first
		}
		b.ReportMetric(float64(size)/float64(events), "B/event")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
	})
	// The agent's way into a .zst log: the stacks' texts apart, each
	// from the one slice its stack was formatted into (WriteSparse).
	sp := make([]chunk, len(chunks))
	for i, c := range chunks {
		sp[i].p, sp[i].ms = sparse(c.p, c.ms)
	}
	b.Run("stackz-sparse-steady", func(b *testing.B) {
		var size int
		var cpu time.Duration
		for b.Loop() {
			b.StopTimer()
			var z bytes.Buffer
			e, _ := NewEncoder(&z, 1<<20)
			for _, c := range sp {
				e.WriteSparse(c.p, c.ms)
			}
			e.Flush()
			first := z.Len()
			c0 := cpuTime()
			b.StartTimer()
			for _, c := range sp {
				e.WriteSparse(c.p, c.ms)
			}
			e.Close()
			b.StopTimer()
			cpu += cpuTime() - c0
			b.StartTimer()
			size = z.Len() - first
		}
		b.ReportMetric(float64(size)/float64(events), "B/event")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
		// The process's CPU, which other work on a shared machine
		// inflates less than the wall time.
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(events), "cpu-ns/event")
	})
}

type markedCloser interface {
	MarkedWriter
	Close() error
}

// unmarked writes a marked text whole, for an encoder that takes no marks.
type unmarked struct{ *zstd.Encoder }

func (u unmarked) WriteMarked(p []byte, _ []Mark) error {
	_, err := u.Write(p)
	return err
}

// cpuTime is the process's user and system CPU so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
