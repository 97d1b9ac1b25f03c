package logio

import (
	"bytes"
	"testing"
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
