package stackz

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzRoundTrip: whatever the text and whatever its marks claim (marks
// over text that differs from the last copy under the same ID, out of
// range, overlapping), the frame decodes to the text. With the top bit of
// opts, a mark's text is given as one slice for the same bytes, as the
// agent gives it: copies of it are then not read. With bit 0x40, a write
// whose mark is a text's place goes through WriteSparse. An ID byte's bit
// 0x80 flushes after its write, 0x40 moves the checksum to its goroutine.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("[memtrack] tid=1 (a) malloc ts=1 size=8 total=8 ptr=0x10\n[memtrack]   #0  /x(f+0x1) [0x2]\n"), []byte{1, 40, 30, 0}, uint8(0))
	f.Add(bytes.Repeat([]byte("abcdefgh\n"), 500), []byte{0, 9, 9, 1, 20, 9, 9, 1, 200, 90, 90, 2}, uint8(3))
	f.Add(bytes.Repeat([]byte("[memtrack] tid=1 size=8\n[memtrack]   #0  /x(f+0x1) [0x2]\n[memtrack]   #1  /y(g+0x1) [0x3]\n"), 300),
		[]byte{80, 24, 62, 1, 86, 0, 62, 1, 86, 0, 62, 0x81, 86, 0, 62, 1, 43, 0, 62, 1}, uint8(0x80))
	f.Add(bytes.Repeat([]byte("[memtrack] tid=1 size=8\n[memtrack]   #0  /x(f+0x1) [0x2]\n[memtrack]   #1  /y(g+0x1) [0x3]\n"), 300),
		[]byte{80, 24, 62, 1, 86, 0, 62, 1, 86, 0, 62, 0x81, 86, 0, 62, 1, 43, 0, 62, 1}, uint8(0xc0))
	f.Fuzz(func(t *testing.T, text, spec []byte, opts uint8) {
		var z bytes.Buffer
		window := 1 << (10 + int(opts%4))
		e, err := NewEncoder(&z, window)
		if err != nil {
			t.Fatal(err)
		}
		// spec: per 4 bytes, a write's length, a mark's offset and length in it, an ID.
		rest := text
		slices := map[string][]byte{}
		for len(spec) >= 4 && len(rest) > 0 {
			n := min(int(spec[0])*int(1+opts%7), len(rest))
			var marks []Mark
			if n > 0 {
				m := Mark{Off: int(spec[1]) % n, Len: int(spec[2]), ID: uint64(spec[3] % 4)}
				if opts&0x80 != 0 && m.Off+m.Len <= n {
					b := rest[m.Off : m.Off+m.Len]
					if slices[string(b)] == nil {
						slices[string(b)] = bytes.Clone(b)
					}
					m.Text = slices[string(b)]
				}
				marks = append(marks, m)
			}
			if opts&0x40 != 0 && (len(marks) == 0 || marks[0].Len > 0 && marks[0].Off+marks[0].Len <= n) {
				// The same text with the stacks' texts given apart.
				if err := e.WriteSparse(sparse(rest[:n], marks)); err != nil {
					t.Fatal(err)
				}
			} else if err := e.WriteMarked(rest[:n], marks); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
			if spec[3]&0x80 != 0 {
				e.Flush()
			}
			if spec[3]&0x40 != 0 {
				e.Concurrent()
			}
			spec = spec[4:]
		}
		e.Write(rest)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		got := decode(t, z.Bytes())
		if !bytes.Equal(got, text) {
			t.Fatalf("decoded %d bytes, wrote %d", len(got), len(text))
		}
		_ = binary.LittleEndian
	})
}
