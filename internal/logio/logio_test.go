package logio

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/memtrace/memtrace/logfmt"
)

// sampleLog is a log as the agent writes it: events with stacks from a
// handful of call sites, so that it compresses as a real one does.
func sampleLog(events int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := logfmt.AppendMeta(nil, logfmt.WordHeader, logfmt.KV{Key: "version", Value: "0.1.0"}, logfmt.KV{Key: "mode", Value: "bpf"})
	var total uint64
	live := []uint64{}
	for i := 0; i < events; i++ {
		ts := uint64(1000 + i*37)
		if len(live) > 0 && r.IntN(2) == 0 {
			j := r.IntN(len(live))
			b = logfmt.AppendFree(b, 42, "app", "free", ts, 0, live[j])
			live = append(live[:j], live[j+1:]...)
			continue
		}
		size := uint64(16 + r.IntN(4096))
		total += size
		ptr := 0x55550000 + uint64(r.IntN(1<<20))*16
		live = append(live, ptr)
		b = logfmt.AppendAlloc(b, 42, "app", "malloc", ts, size, total, ptr)
		site := r.IntN(8)
		for f := 0; f < 6; f++ {
			b = logfmt.AppendFrame(b, f, "/usr/bin/app", "_Z4funci", uint64(0x10+site*8+f), uint64(0x401000+site*0x100+f*0x10))
		}
	}
	return logfmt.AppendMeta(b, logfmt.WordSummary, logfmt.KV{Key: "events", Value: "1"})
}

// compress writes data through a Writer of kind k in pieces of random
// sizes and returns the stream and where each Write ended in it (stream
// offset, data offset).
func compress(t testing.TB, data []byte, k Kind, seed uint64) ([]byte, [][2]int) {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(&out, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 2))
	var ends [][2]int
	for i := 0; i < len(data); {
		n := min(1+r.IntN(64<<10), len(data)-i)
		if _, err := w.Write(data[i : i+n]); err != nil {
			t.Fatal(err)
		}
		i += n
		ends = append(ends, [2]int{out.Len(), i})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), ends
}

func readAll(t testing.TB, b []byte) ([]byte, Kind, error) {
	t.Helper()
	r, err := Open(bytes.NewReader(b))
	if err != nil {
		return nil, Plain, err
	}
	defer r.Close()
	k, _ := r.Kind()
	out, err := io.ReadAll(r)
	return out, k, err
}

func TestRoundTrip(t *testing.T) {
	data := sampleLog(20000, 1)
	for _, k := range []Kind{Zstd, Gzip} {
		t.Run(k.String(), func(t *testing.T) {
			z, _ := compress(t, data, k, 3)
			got, kind, err := readAll(t, z)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if kind != k {
				t.Errorf("sniffed %v, want %v", kind, k)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("decompressed %d bytes differ from the %d written", len(got), len(data))
			}
			if len(z)*10 > len(data) {
				t.Errorf("%d bytes compressed to %d: less than 10x on a log of repeated stacks", len(data), len(z))
			}
		})
	}
	t.Run("plain", func(t *testing.T) {
		got, kind, err := readAll(t, data)
		if err != nil || kind != Plain || !bytes.Equal(got, data) {
			t.Fatalf("plain log: kind %v, err %v, equal %v", kind, err, bytes.Equal(got, data))
		}
	})
}

// TestEveryWriteIsDecodable: a file cut right after any Write (a SIGKILLed
// writer) reads back to exactly what was written, then says it was cut; a
// cut anywhere else reads a prefix of the log, never more than was written
// before the cut, and never an error other than ErrTruncated.
func TestEveryWriteIsDecodable(t *testing.T) {
	data := sampleLog(3000, 2)
	for _, k := range []Kind{Zstd, Gzip} {
		t.Run(k.String(), func(t *testing.T) {
			z, ends := compress(t, data, k, 4)
			for _, e := range ends {
				got, _, err := readAll(t, z[:e[0]])
				if !bytes.Equal(got, data[:e[1]]) {
					t.Fatalf("cut after the Write ending at %d: read %d bytes, want %d", e[1], len(got), e[1])
				}
				if !errors.Is(err, ErrTruncated) {
					t.Fatalf("cut after the Write ending at %d: err %v, want ErrTruncated", e[1], err)
				}
			}
			r := rand.New(rand.NewPCG(5, 5))
			cuts := []int{0, 1, 2, 3, 4, 5, len(z) - 1}
			for range 300 {
				cuts = append(cuts, r.IntN(len(z)))
			}
			for _, cut := range cuts {
				got, _, err := readAll(t, z[:cut])
				if cut == 1 {
					// One byte is no magic number: a plain log of
					// one malformed line.
					continue
				}
				if !bytes.HasPrefix(data, got) {
					t.Fatalf("cut at %d of %d: read bytes that are not the log's", cut, len(z))
				}
				written := 0
				for _, e := range ends {
					if e[0] <= cut {
						written = e[1]
					}
				}
				if len(got) < written {
					t.Fatalf("cut at %d: read %d bytes, but %d were flushed before the cut", cut, len(got), written)
				}
				if cut == 0 {
					// An empty file is an empty plain log.
					if err != nil {
						t.Fatalf("empty file: %v", err)
					}
					continue
				}
				if !errors.Is(err, ErrTruncated) {
					t.Fatalf("cut at %d: err %v, want ErrTruncated", cut, err)
				}
			}
			if got, _, err := readAll(t, z); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("whole stream: err %v", err)
			}
		})
	}
}

func TestConcatenatedStreams(t *testing.T) {
	a, b := sampleLog(500, 6), sampleLog(700, 7)
	for _, k := range []Kind{Zstd, Gzip} {
		za, _ := compress(t, a, k, 1)
		zb, _ := compress(t, b, k, 2)
		got, _, err := readAll(t, append(append([]byte{}, za...), zb...))
		if err != nil || !bytes.Equal(got, append(append([]byte{}, a...), b...)) {
			t.Errorf("%v: two streams back to back: err %v, %d bytes of %d", k, err, len(got), len(a)+len(b))
		}
	}
}

func TestDamaged(t *testing.T) {
	data := sampleLog(3000, 8)
	for _, k := range []Kind{Zstd, Gzip} {
		z, _ := compress(t, data, k, 9)
		bad := append([]byte{}, z...)
		for i := len(bad) / 2; i < len(bad)/2+16; i++ {
			bad[i] ^= 0x5a
		}
		got, _, err := readAll(t, bad)
		if err == nil {
			t.Errorf("%v: a damaged stream read without an error (%d bytes)", k, len(got))
			continue
		}
		if !errors.Is(err, ErrDamaged) {
			t.Errorf("%v: damage reported as %v, want ErrDamaged", k, err)
		}
		if strings.Contains(err.Error(), "malloc") || strings.Contains(err.Error(), "memtrack") {
			t.Errorf("%v: the error quotes the log: %v", k, err)
		}
	}
}

// TestDamageEndingABlockEarly: a flipped bit that makes the zstd decoder
// run off a block's data (its io.ErrUnexpectedEOF) before the file's end
// is damage, not a cut: a cut leaves nothing after it.
func TestDamageEndingABlockEarly(t *testing.T) {
	z, _ := compress(t, sampleLog(3000, 8), Zstd, 9)
	zd, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer zd.Close()
	found := false
	for i := len(z) / 2; i < len(z)-8 && !found; i++ {
		for bit := 0; bit < 8 && !found; bit++ {
			bad := append([]byte{}, z...)
			bad[i] ^= 1 << bit
			src := &countingReader{r: bytes.NewReader(bad)}
			if err := zd.Reset(src); err != nil {
				continue
			}
			_, err := io.Copy(io.Discard, zd)
			// A decoder that read to the end (a block's size damaged
			// past it) cannot tell the damage from a cut.
			if !errors.Is(err, io.ErrUnexpectedEOF) || src.n >= len(bad) {
				continue
			}
			found = true
			_, _, err = readAll(t, bad)
			if !errors.Is(err, ErrDamaged) || errors.Is(err, ErrTruncated) {
				t.Errorf("bit %d of byte %d of %d flipped (the decoder stops at byte %d): err %v, want ErrDamaged", bit, i, len(z), src.n, err)
			}
		}
	}
	if !found {
		t.Fatal("no flipped bit in the stream's second half makes the decoder end a block early")
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestSniff(t *testing.T) {
	for _, c := range []struct {
		name      string
		head      string
		eof       bool
		kind      Kind
		undecided bool
		err       string
	}{
		{"zstd", "\x28\xb5\x2f\xfd\x00\x58", false, Zstd, false, ""},
		{"gzip", "\x1f\x8b\x08\x00", false, Gzip, false, ""},
		{"skippable frame", "\x5e\x2a\x4d\x18\x04\x00", false, Zstd, false, ""},
		{"zstd, only 2 bytes yet", "\x28\xb5", false, Plain, true, ""},
		{"zstd, 2 bytes and the end", "\x28\xb5", true, Zstd, false, ""},
		{"zstd, 1 byte and the end", "\x28", true, Plain, false, ""},
		{"gzip, 2 bytes and the end", "\x1f\x8b", true, Gzip, false, ""},
		{"gzip, 1 byte yet", "\x1f", false, Plain, true, ""},
		{"nothing yet", "", false, Plain, true, ""},
		{"empty", "", true, Plain, false, ""},
		{"memtrack line", "[memtrack] tid=1", false, Plain, false, ""},
		{"memtrace line", "[memtrace] header", false, Plain, false, ""},
		{"xz", "\xfd7zXZ\x00\x00", false, Plain, false, "xz-compressed"},
		{"lz4", "\x04\x22\x4d\x18\x64", false, Plain, false, "lz4-compressed"},
		{"bzip2", "BZh91AY&SY", false, Plain, false, "bzip2-compressed"},
		{"text starting BZh", "BZh is a word", true, Plain, false, ""},
		{"gzip with another method", "\x1f\x8b\x07\x00", false, Plain, false, "binary"},
		{"zstd, a bit of its magic flipped", "\x29\xb5\x2f\xfd\x00\x58\x61\x62\x63\x64", false, Plain, false, "nearly the zstd magic number"},
		{"gzip, a bit of its magic flipped", "\x1f\x8b\x09\x00\x00\x00\x00\x00\x00\x03", false, Plain, false, "nearly the gzip magic number"},
		{"random bytes", "\x93\x11\xc4\x7f\xa2\x05\x9e\xff\x31\x88", false, Plain, false, "binary"},
		{"zeros", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", false, Plain, false, "binary"},
		{"UTF-8 program output", "héllo wörld ✓ → ok", true, Plain, false, ""},
		{"one Latin-1 byte in ten", "caf\xe9 au lait, s'il vous plait", true, Plain, false, ""},
		{"terminal colours", "\x1b[1mbold\x1b[0m\tand\ttabs\r\n", true, Plain, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, und, err := sniff([]byte(c.head), c.eof)
			if k != c.kind || und != c.undecided {
				t.Errorf("sniff(%q, eof=%v) = %v, undecided %v; want %v, %v", c.head, c.eof, k, und, c.kind, c.undecided)
			}
			switch {
			case c.err == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("error %v, want one saying %q", err, c.err)
			}
		})
	}
}

// TestWindowLimit: a zstd frame that asks for a window above maxZstdWindow
// is refused with the way out, not decoded into that much memory.
func TestWindowLimit(t *testing.T) {
	// Frame header: magic, descriptor 0 (no content size, no checksum),
	// window descriptor exponent 18 (2^28 = 256 MiB); then one last raw
	// block of 5 bytes.
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 18 << 3, 5<<3 | 1, 0, 0, 'h', 'e', 'l', 'l', 'o'}
	_, _, err := readAll(t, frame)
	if err == nil || !strings.Contains(err.Error(), "zstd -d --memory") {
		t.Fatalf("a 256 MiB window: err %v, want the memory limit and the way out", err)
	}
	if !strings.Contains(err.Error(), "asks for 256 MB") || !strings.Contains(err.Error(), "--memory=256MB") {
		t.Errorf("a 256 MiB window: err %v, want its size and the --memory that decodes it", err)
	}
	// A single-segment frame's window is its content size (200 MiB).
	single := []byte{0x28, 0xb5, 0x2f, 0xfd, 2<<6 | 1<<5, 0, 0, 0x80, 0x0c, 5<<3 | 1, 0, 0, 'h', 'e', 'l', 'l', 'o'}
	if _, _, err := readAll(t, single); err == nil || !strings.Contains(err.Error(), "--memory=200MB") {
		t.Errorf("a 200 MiB single-segment frame: err %v, want the memory limit and the way out", err)
	}
	// The same frame at 64 MiB (exponent 16) decodes.
	frame[5] = 16 << 3
	got, _, err := readAll(t, frame)
	if err != nil || string(got) != "hello" {
		t.Fatalf("a 64 MiB window: %q, %v", got, err)
	}
}

// TestDamageIsNotWindow: a damaged zstd log is called damaged, not a
// --long file that needs more memory. The decoder reports a block larger
// than the format allows with the error of a frame's window over the
// limit, and a damaged window descriptor asks for more than zstd(1) ever
// writes.
func TestDamageIsNotWindow(t *testing.T) {
	z, _ := compress(t, sampleLog(2000, 3), Zstd, 4)
	var h zstd.Header
	if err := h.Decode(z); err != nil {
		t.Fatal(err)
	}
	blocks := map[string][]byte{
		// Block headers: size<<3 | type<<1 | last.
		"a raw block of 2 MiB":  {0xf8, 0xff, 0xff},
		"an RLE block of 2 MiB": {0xfa, 0xff, 0xff},
	}
	for name, bh := range blocks {
		bad := append([]byte{}, z...)
		copy(bad[h.HeaderSize:], bh)
		_, _, err := readAll(t, bad)
		if !errors.Is(err, ErrDamaged) || strings.Contains(err.Error(), "--memory") {
			t.Errorf("%s: err %v, want ErrDamaged without the --memory advice", name, err)
		}
	}
	// Window exponent 25: 32 GiB.
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 25 << 3, 5<<3 | 1, 0, 0, 'h', 'e', 'l', 'l', 'o'}
	if _, _, err := readAll(t, frame); !errors.Is(err, ErrDamaged) || strings.Contains(err.Error(), "--memory") {
		t.Errorf("a 32 GiB window: err %v, want ErrDamaged without the --memory advice", err)
	}
}

func TestKindOf(t *testing.T) {
	for path, want := range map[string]Kind{
		"run.log.zst": Zstd, "run.zstd": Zstd, "RUN.ZST": Zstd, "a/b.gz": Gzip,
		"run.log": Plain, "run": Plain, "/dev/stdout": Plain, "x.zst/": Plain, "run.tgz": Plain,
	} {
		if got := KindOf(path); got != want {
			t.Errorf("KindOf(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	data := sampleLog(1000, 10)
	for _, name := range []string{"a.log", "a.log.zst", "a.log.gz"} {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w, err := Create(f, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("x")); err == nil {
			t.Errorf("%s: Close left the file open", name)
		}
		raw, _ := os.ReadFile(p)
		got, kind, err := readAll(t, raw)
		if err != nil || !bytes.Equal(got, data) || kind != KindOf(name) {
			t.Errorf("%s: kind %v (want %v), err %v, equal %v", name, kind, KindOf(name), err, bytes.Equal(got, data))
		}
		if name == "a.log" && !bytes.Equal(raw, data) {
			t.Errorf("a plain log is not written as is")
		}
		if _, err := w.Write(data); err == nil && name != "a.log" {
			t.Errorf("%s: Write after Close succeeded", name)
		}
	}
}

// failingWriter fails after n bytes, as a full disk does.
type failingWriter struct{ n int }

var errDiskFull = errors.New("no space left on device")

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, errDiskFull
	}
	f.n -= len(p)
	return len(p), nil
}

func TestWriteErrorsAreTheFiles(t *testing.T) {
	data := sampleLog(5000, 11)
	for _, k := range []Kind{Zstd, Gzip} {
		w, err := NewWriter(&failingWriter{n: 1000}, k, 0)
		if err != nil {
			t.Fatal(err)
		}
		var werr error
		for i := 0; i < len(data) && werr == nil; i += 4096 {
			_, werr = w.Write(data[i:min(i+4096, len(data))])
		}
		if !errors.Is(werr, errDiskFull) {
			t.Errorf("%v: write error %v, want the file's", k, werr)
		}
	}
}

// failingReader returns some bytes, then an I/O error.
type failingReader struct {
	b   []byte
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, f.err
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

func TestReadErrorsAreTheFiles(t *testing.T) {
	data := sampleLog(3000, 12)
	eio := errors.New("input/output error")
	for _, k := range []Kind{Plain, Zstd, Gzip} {
		z := data
		if k != Plain {
			z, _ = compress(t, data, k, 13)
		}
		r := NewReader(&failingReader{b: z[:len(z)/2], err: eio})
		_, err := io.ReadAll(r)
		if !errors.Is(err, eio) || errors.Is(err, ErrDamaged) || errors.Is(err, ErrTruncated) {
			t.Errorf("%v: a read error came out as %v", k, err)
		}
	}
}

// growingFile is a file another goroutine appends to.
func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// readAvailable reads l until it reports io.EOF (nothing more for now) and
// returns what came, waiting up to limit for want bytes in all.
func readAvailable(t *testing.T, l *Follower, buf *bytes.Buffer, want int, limit time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(limit)
	p := make([]byte, 64<<10)
	for buf.Len() < want {
		n, err := l.Read(p)
		buf.Write(p[:n])
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if n == 0 {
			if time.Now().After(deadline) {
				return nil
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// TestFollowGrowing: a compressed log that grows one flush at a time, its
// magic number and blocks arriving in pieces, is read flush by flush:
// everything flushed shows up, nothing is taken as the end, and a block
// still partly written is waited for rather than called cut.
func TestFollowGrowing(t *testing.T) {
	data := sampleLog(4000, 14)
	for _, k := range []Kind{Plain, Zstd, Gzip} {
		t.Run(k.String(), func(t *testing.T) {
			var z []byte
			var ends [][2]int
			if k == Plain {
				for i := 0; i < len(data); i += 50000 {
					ends = append(ends, [2]int{min(i+50000, len(data)), min(i+50000, len(data))})
				}
				z = data
			} else {
				z, ends = compress(t, data, k, 15)
			}
			path := filepath.Join(t.TempDir(), "log")
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			l := Follow(f, 5*time.Millisecond)
			defer l.Close()
			var got bytes.Buffer
			// Nothing there: nothing read, and no error.
			if err := readAvailable(t, l, &got, 1, 30*time.Millisecond); err != nil || got.Len() != 0 {
				t.Fatalf("empty file: read %d bytes, err %v", got.Len(), err)
			}
			// The magic number in two pieces.
			appendFile(t, path, z[:2])
			want := 0
			if k == Plain {
				want = 2
			}
			if err := readAvailable(t, l, &got, want+1, 30*time.Millisecond); err != nil || got.Len() != want {
				t.Fatalf("two bytes: read %d bytes, want %d, err %v", got.Len(), want, err)
			}
			written := 2
			for i, e := range ends {
				if i%3 == 1 && e[0]-written > 8 {
					// Half a block first: it must be waited for.
					mid := written + (e[0]-written)/2
					appendFile(t, path, z[written:mid])
					prev := got.Len()
					if err := readAvailable(t, l, &got, prev+1, 20*time.Millisecond); err != nil {
						t.Fatalf("half a block: %v", err)
					}
					written = mid
				}
				appendFile(t, path, z[written:e[0]])
				written = e[0]
				if err := readAvailable(t, l, &got, e[1], 5*time.Second); err != nil {
					t.Fatalf("after flush %d: %v", i, err)
				}
				if !bytes.Equal(got.Bytes(), data[:e[1]]) {
					t.Fatalf("after flush %d: read %d bytes, want exactly the %d flushed", i, got.Len(), e[1])
				}
			}
			appendFile(t, path, z[written:])
			if l.Kind() != k {
				t.Errorf("kind %v, want %v", l.Kind(), k)
			}
		})
	}
}

// TestFollowCloseStopsTheDecoder: Close ends the decoder's goroutine, also
// while it waits at the end of a file that will never grow.
func TestFollowCloseStopsTheDecoder(t *testing.T) {
	data := sampleLog(200, 16)
	z, _ := compress(t, data, Zstd, 17)
	for round := range 20 {
		path := filepath.Join(t.TempDir(), "log")
		if err := os.WriteFile(path, z[:len(z)/2], 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		l := Follow(f, time.Millisecond)
		var got bytes.Buffer
		_ = readAvailable(t, l, &got, 1, time.Second)
		if round%2 == 0 {
			time.Sleep(time.Duration(round) * time.Millisecond)
		}
		l.Close()
		select {
		case _, ok := <-l.ch:
			for ok {
				_, ok = <-l.ch
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the decoder goroutine still runs 5 s after Close", round)
		}
		if n, err := l.Read(make([]byte, 10)); n != 0 || err == nil {
			t.Errorf("Read after Close: %d, %v", n, err)
		}
		f.Close()
	}
}

// TestFollowDamaged: a followed log whose data does not decode ends with
// the error, after what came before it.
func TestFollowDamaged(t *testing.T) {
	data := sampleLog(3000, 18)
	z, _ := compress(t, data, Zstd, 19)
	bad := append([]byte{}, z...)
	for i := len(bad) / 2; i < len(bad)/2+16; i++ {
		bad[i] ^= 0x5a
	}
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	defer f.Close()
	l := Follow(f, time.Millisecond)
	defer l.Close()
	var got bytes.Buffer
	err := readAvailable(t, l, &got, len(data)+1, 5*time.Second)
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("err %v after %d bytes, want ErrDamaged", err, got.Len())
	}
	if !bytes.HasPrefix(data, got.Bytes()) || got.Len() == 0 {
		t.Fatalf("read %d bytes before the damage, not a prefix of the log", got.Len())
	}
}

// lockedBuffer is written by the Writer's timer as well.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) snapshot() ([]byte, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte{}, l.b.Bytes()...), l.writes
}

// TestFlushInterval: small Writes close together share blocks (a bounded
// number of block ends), and what was written is decodable within the
// interval, also after the last Write, when only the timer ends the block.
func TestFlushInterval(t *testing.T) {
	const interval = 40 * time.Millisecond
	data := sampleLog(3000, 22)
	for _, k := range []Kind{Zstd, Gzip} {
		t.Run(k.String(), func(t *testing.T) {
			var out lockedBuffer
			w, err := NewWriter(&out, k, interval)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			written := 0
			type mark struct {
				at time.Time
				n  int
			}
			var marks []mark
			for written < len(data) && time.Since(start) < 400*time.Millisecond {
				n := min(300, len(data)-written)
				if _, err := w.Write(data[written : written+n]); err != nil {
					t.Fatal(err)
				}
				written += n
				marks = append(marks, mark{time.Now(), written})
				time.Sleep(time.Millisecond)
				// Everything written an interval (and a margin for a
				// loaded machine) ago must decode now.
				snap, _ := out.snapshot()
				got, _, _ := readAll(t, snap)
				due := 0
				for _, m := range marks {
					if time.Since(m.at) > interval+200*time.Millisecond {
						due = m.n
					}
				}
				// A loaded machine can hold the timer's goroutine back
				// for longer than any margin: what was due must then
				// decode once it runs, with no Write meanwhile (bounded
				// only for a writer whose timer never ends the block).
				for wait := time.Now().Add(5 * time.Second); len(got) < due && time.Now().Before(wait); {
					time.Sleep(5 * time.Millisecond)
					snap, _ = out.snapshot()
					got, _, _ = readAll(t, snap)
				}
				if len(got) < due || !bytes.HasPrefix(data, got) {
					t.Fatalf("after %v: %d bytes decode, %d were written more than an interval ago", time.Since(start), len(got), due)
				}
			}
			elapsed := time.Since(start)
			w.mu.Lock()
			writes := w.ends
			w.mu.Unlock()
			if max := int(elapsed/interval) + 3; writes > max {
				t.Errorf("%d block ends in %v at a %v interval (%d Writes): more than %d", writes, elapsed, interval, len(marks), max)
			}
			// The last Write's block is ended by the timer.
			deadline := time.Now().Add(5 * time.Second)
			for {
				snap, _ := out.snapshot()
				got, _, _ := readAll(t, snap)
				if len(got) == written {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("5 s after the last Write, %d of %d bytes decode", len(got), written)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			snap, _ := out.snapshot()
			if got, _, err := readAll(t, snap); err != nil || len(got) != written {
				t.Fatalf("closed: %d bytes, %v", len(got), err)
			}
		})
	}
}
