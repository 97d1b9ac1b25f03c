package stackz

import (
	"bytes"
	"hash/maphash"
	"os"
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

// TestRealLog compares the encoder with klauspost's on a log given in
// STACKZ_LOG (plain text), in 256 KiB writes as the agent makes them.
func TestRealLog(t *testing.T) {
	path := os.Getenv("STACKZ_LOG")
	if path == "" {
		t.Skip("STACKZ_LOG not set")
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	events := bytes.Count(text, []byte("[memtrack] tid="))
	marks := marksOf(text)
	for _, window := range []int{1 << 20, 8 << 20} {
		var z bytes.Buffer
		e, _ := NewEncoder(&z, window)
		t0 := time.Now()
		mi := 0
		for off := 0; off < len(text); off += 256 << 10 {
			end := min(off+256<<10, len(text))
			var ms []Mark
			for mi < len(marks) && marks[mi].Off+marks[mi].Len <= end {
				m := marks[mi]
				if m.Off >= off {
					ms = append(ms, Mark{Off: m.Off - off, Len: m.Len, ID: m.ID, Text: m.Text})
				}
				mi++
			}
			e.WriteMarked(text[off:end], ms)
		}
		e.Close()
		d := time.Since(t0)
		t.Logf("%+v", e.Stats)
		t.Logf("stackz window %d: %d B, %.2f B/event, %v (%.0f ns/event)", window, z.Len(), float64(z.Len())/float64(events), d, float64(d.Nanoseconds())/float64(events))
		if got := decode(t, z.Bytes()); !bytes.Equal(got, text) {
			t.Fatal("round trip differs")
		}
	}
	var z bytes.Buffer
	t0 := time.Now()
	w, _ := zstd.NewWriter(&z, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
	for off := 0; off < len(text); off += 256 << 10 {
		w.Write(text[off:min(off+256<<10, len(text))])
	}
	w.Close()
	d := time.Since(t0)
	t.Logf("klauspost default 1 MiB: %d B, %.2f B/event, %v (%.0f ns/event)", z.Len(), float64(z.Len())/float64(events), d, float64(d.Nanoseconds())/float64(events))
}

// BenchmarkRealLog: the encoders on STACKZ_LOG, in the agent's writes.
func BenchmarkRealLog(b *testing.B) {
	path := os.Getenv("STACKZ_LOG")
	if path == "" {
		b.Skip("STACKZ_LOG not set")
	}
	text, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	events := bytes.Count(text, []byte("[memtrack] tid="))
	marks := marksOf(text)
	type chunk struct {
		p  []byte
		ms []Mark
	}
	var chunks []chunk
	mi := 0
	for off := 0; off < len(text); off += 256 << 10 {
		end := min(off+256<<10, len(text))
		var ms []Mark
		for mi < len(marks) && marks[mi].Off+marks[mi].Len <= end {
			m := marks[mi]
			if m.Off >= off {
				m.Off -= off
				ms = append(ms, m)
			}
			mi++
		}
		chunks = append(chunks, chunk{text[off:end], ms})
	}
	b.Run("stackz", func(b *testing.B) {
		var size int
		for b.Loop() {
			var z bytes.Buffer
			e, _ := NewEncoder(&z, 1<<20)
			for _, c := range chunks {
				e.WriteMarked(c.p, c.ms)
			}
			e.Close()
			size = z.Len()
		}
		b.ReportMetric(float64(size)/float64(events), "B/event")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
	})
	b.Run("klauspost", func(b *testing.B) {
		var size int
		for b.Loop() {
			var z bytes.Buffer
			w, _ := zstd.NewWriter(&z, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
			for _, c := range chunks {
				w.Write(c.p)
			}
			w.Close()
			size = z.Len()
		}
		b.ReportMetric(float64(size)/float64(events), "B/event")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
	})
}
