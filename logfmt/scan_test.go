package logfmt

import (
	"bytes"
	"io"
	"testing"
)

// cutReader returns the input in reads of the sizes in cuts, in turn.
type cutReader struct {
	b    []byte
	cuts []byte
	k    int
}

func (c *cutReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := len(p)
	if len(c.cuts) > 0 {
		n = min(n, 1+int(c.cuts[c.k%len(c.cuts)]))
		c.k++
	}
	n = copy(p, c.b[:min(n, len(c.b))])
	c.b = c.b[n:]
	return n, nil
}

// scanRuns is the lines of ScanLines' runs, split as analysis splits them.
func scanRuns(sc *Scanner) [][]byte {
	var out [][]byte
	for sc.ScanLines() {
		run := sc.Line()
		for len(run) > 0 {
			i := bytes.IndexByte(run, '\n')
			if i < 0 {
				out = append(out, bytes.Clone(run))
				break
			}
			out = append(out, bytes.Clone(run[:i]))
			run = run[i+1:]
		}
	}
	return out
}

// FuzzScanLines: ScanLines' runs hold the lines Scan gives one by one,
// however the reads are cut, with or without Final, and after Scan and
// ScanLines are mixed.
func FuzzScanLines(f *testing.F) {
	f.Add([]byte("a\nbb\n\nccc"), []byte{0, 2, 5})
	f.Add([]byte("\n\n\n"), []byte{})
	f.Add([]byte("[memtrack] tid=1 (m) malloc ts=1 size=8 total=8 ptr=0x10\r\nx"), []byte{7})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		for _, final := range []bool{true, false} {
			var want [][]byte
			sc := NewScanner(&cutReader{b: data, cuts: cuts})
			sc.Final = final
			for sc.Scan() {
				want = append(want, bytes.Clone(sc.Line()))
			}
			wantBytes := sc.Bytes

			sc = NewScanner(&cutReader{b: data, cuts: cuts})
			sc.Final = final
			var got [][]byte
			if sc.Scan() { // a first line alone, as analysis reads a prelude
				got = append(got, bytes.Clone(sc.Line()))
			}
			got = append(got, scanRuns(sc)...)
			if len(got) != len(want) {
				t.Fatalf("final %v: %d lines by the run, %d by the line", final, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("final %v: line %d is %q by the run, %q by the line", final, i, got[i], want[i])
				}
			}
			if sc.Bytes != wantBytes {
				t.Fatalf("final %v: %d bytes counted by the run, %d by the line", final, sc.Bytes, wantBytes)
			}
		}
	})
}
