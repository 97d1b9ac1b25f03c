package logio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestTextBytes: the writer counts the text it was given, which a
// compressed log's reader gets back: the closing lines' bound.
func TestTextBytes(t *testing.T) {
	for _, k := range []Kind{Zstd, Gzip} {
		var buf bytes.Buffer
		z, err := NewWriter(&buf, k, 0)
		if err != nil {
			t.Fatal(err)
		}
		text := bytes.Repeat([]byte("[memtrack]   #0  /usr/lib/libc.so.6(malloc+0x1a) [0x7f0000001234]\n"), 1000)
		for i := 0; i < 3; i++ {
			if _, err := z.Write(text); err != nil {
				t.Fatal(err)
			}
		}
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		if got := z.TextBytes(); got != int64(3*len(text)) {
			t.Errorf("%s: TextBytes %d, want %d", k, got, 3*len(text))
		}
		if int64(buf.Len()) >= z.TextBytes()/10 {
			t.Errorf("%s: %d bytes compressed for %d of text: not the text's count", k, buf.Len(), z.TextBytes())
		}
	}
}

// TestBlockEndReadable: what was written before a block end can be read
// from the underlying writer before Close, though the compressed blocks
// wait in a buffer between block ends.
func TestBlockEndReadable(t *testing.T) {
	for _, k := range []Kind{Zstd, Gzip} {
		var buf bytes.Buffer
		z, err := NewWriter(&buf, k, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		for i := range 3000 {
			p := fmt.Appendf(nil, "[memtrack] tid=%d line %d\n", i%7, i)
			want = append(want, p...)
			if _, err := z.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := z.Flush(); err != nil {
			t.Fatal(err)
		}
		r, err := Open(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil && !errors.Is(err, ErrTruncated) {
			t.Fatalf("%s: read before Close: %v", k, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: read back %d bytes before Close, want %d", k, len(got), len(want))
		}
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
