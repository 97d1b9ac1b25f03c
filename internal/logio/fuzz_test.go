package logio

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// fuzzLimit bounds what one input may decompress to: a small zstd frame
// may say it holds far more (a bomb), and reading is what is bounded.
const fuzzLimit = 8 << 20

// FuzzOpen: any bytes are read without a panic, in bounded time and
// memory; a plain log comes out as it went in; whatever a compressed one
// yields ends in io.EOF, ErrTruncated, ErrDamaged or a one-line error that
// quotes nothing of the input; and Follow yields the same bytes as Open
// (a prefix of them where the input is cut).
func FuzzOpen(f *testing.F) {
	// Mutated headers ask for windows up to the limit, which the decoder
	// allocates at once: 128 MB per input would make fuzzing crawl.
	defer func(w uint64) { maxZstdWindow = w }(maxZstdWindow)
	maxZstdWindow = 8 << 20
	data := sampleLog(60, 20)
	for _, k := range []Kind{Zstd, Gzip} {
		z, ends := compress(f, data, k, 21)
		f.Add(z)
		f.Add(z[:ends[len(ends)/2][0]])
		f.Add(z[:len(z)/3])
		bad := append([]byte{}, z...)
		bad[len(bad)/2] ^= 0xff
		f.Add(bad)
	}
	f.Add(data[:2000])
	f.Add([]byte{})
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd})
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 18 << 3, 5<<3 | 1, 0, 0, 'h', 'e', 'l', 'l', 'o'})
	f.Add([]byte{0x5e, 0x2a, 0x4d, 0x18, 0x02, 0, 0, 0, 'x', 'y'})
	f.Add([]byte{0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff})
	f.Add([]byte("\xfd7zXZ\x00rest"))
	f.Add([]byte("BZh91AY&SY"))
	// Damaged magic numbers, binary and text that is not UTF-8.
	f.Add([]byte{0x29, 0xb5, 0x2f, 0xfd, 0x00, 0x58, 'a', 'b', 'c', 'd', 'e'})
	f.Add([]byte{0x1f, 0x8b, 0x09, 0, 0, 0, 0, 0, 0, 3})
	f.Add([]byte("caf\xe9 au lait\n\x1b[1mbold\x1b[0m\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		out, err := io.ReadAll(io.LimitReader(r, fuzzLimit))
		r.Close()
		k, _, _ := sniff(in[:min(len(in), sniffLen)], true)
		if k == Plain && err == nil && !bytes.Equal(out, in) {
			t.Fatalf("a plain input came out changed (%d bytes in, %d out)", len(in), len(out))
		}
		if err != nil && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrDamaged) {
			msg := err.Error()
			if bytes.Contains([]byte(msg), []byte("\n")) {
				t.Fatalf("a multi-line error: %q", msg)
			}
			if len(in) >= 16 && bytes.Contains([]byte(msg), in[len(in)-8:]) {
				t.Fatalf("the error quotes the input: %q", msg)
			}
		}
		if len(out) == fuzzLimit || len(in) > 1<<16 || len(in) < sniffLen {
			// A file shorter than the longest magic number is waited on
			// by Follow: it may still grow into a compressed one.
			return
		}
		// Follow reads a complete file to the same bytes (then waits). Of
		// a cut or damaged one it reads a prefix: a decoder that is
		// never told the input ended gives out whole blocks only.
		src := &eofCounter{r: bytes.NewReader(in)}
		l := Follow(src, time.Millisecond)
		defer func() {
			// The decoder's goroutine must be gone before the next
			// input: its coverage would be counted there.
			l.Close()
			if l.ch != nil {
				for range l.ch {
				}
			}
		}()
		var got bytes.Buffer
		p := make([]byte, 4096)
		deadline := time.Now().Add(10 * time.Second)
		for got.Len() < len(out) {
			// Once the waiting reader has met the end twice, the
			// decoder has given out all it could.
			atEnd := src.eofs.Load() >= 2
			n, ferr := l.Read(p)
			got.Write(p[:n])
			if ferr != nil && !errors.Is(ferr, io.EOF) {
				break
			}
			if n == 0 && (atEnd && len(l.ch) == 0 || l.Kind() == Plain && l.dec) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Follow read %d bytes in 10 s, Open %d", got.Len(), len(out))
			}
			if n == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		if !bytes.HasPrefix(out, got.Bytes()) {
			t.Fatalf("Follow read %d bytes that are not what Open read", got.Len())
		}
		if err == nil && got.Len() != len(out) {
			t.Fatalf("Follow read %d bytes of a whole log, Open %d", got.Len(), len(out))
		}
	})
}

// eofCounter counts the times a reader said it was at its end.
type eofCounter struct {
	r    io.Reader
	eofs atomic.Int32
}

func (e *eofCounter) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) {
		e.eofs.Add(1)
	}
	return n, err
}
