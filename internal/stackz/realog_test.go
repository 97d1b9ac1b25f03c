package stackz

import (
	"bytes"
	"hash/maphash"
	"os"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// partsOf splits a log as the agent would write it: the event lines as
// text, each stack's text (the frame lines, and a truncation line, after
// an event line) as a Ref to one slice per distinct text.
func partsOf(text []byte) ([]byte, []Ref) {
	var plain []byte
	var refs []Ref
	seed := maphash.MakeSeed()
	texts := map[uint64][]byte{}
	frame := []byte("[memtrack]   #")
	trunc := []byte("[memtrace] stack ")
	start := -1
	flush := func(end int) {
		id := maphash.Bytes(seed, text[start:end])
		if texts[id] == nil {
			texts[id] = bytes.Clone(text[start:end])
		}
		refs = append(refs, Ref{Off: len(plain), ID: id, Text: texts[id]})
		start = -1
	}
	for off := 0; off < len(text); {
		nl := bytes.IndexByte(text[off:], '\n')
		if nl < 0 {
			nl = len(text) - off - 1
		}
		line := text[off : off+nl+1]
		if bytes.HasPrefix(line, frame) || bytes.HasPrefix(line, trunc) {
			if start < 0 {
				start = off
			}
		} else {
			if start >= 0 {
				flush(off)
			}
			plain = append(plain, line...)
		}
		off += nl + 1
	}
	if start >= 0 {
		flush(len(text))
	}
	return plain, refs
}

// TestRealLog compares the encoder with klauspost's on a log given in
// STACKZ_LOG (plain text), in writes of about 256 KiB of event lines as
// the agent makes them.
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
	plain, refs := partsOf(text)
	for _, window := range []int{1 << 20, 8 << 20} {
		var z bytes.Buffer
		e, _ := NewEncoder(&z, window)
		t0 := time.Now()
		ri := 0
		for off := 0; off < len(plain); {
			end := min(off+32<<10, len(plain))
			var rs []Ref
			for ri < len(refs) && refs[ri].Off <= end {
				r := refs[ri]
				r.Off -= off
				rs = append(rs, r)
				ri++
			}
			e.WriteParts(plain[off:end], rs)
			off = end
		}
		e.Close()
		d := time.Since(t0)
		t.Logf("%+v", e.Stats)
		t.Logf("stackz window %d: %d B, %.2f B/event, %v (%.0f ns/event)", window, z.Len(), float64(z.Len())/float64(events), d, float64(d.Nanoseconds())/float64(events))
		if got := decode(t, z.Bytes()); !bytes.Equal(got, text) {
			t.Fatalf("round trip differs: %d bytes of %d", len(got), len(text))
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
