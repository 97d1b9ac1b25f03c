package stackz

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

func TestDumpSeqs(t *testing.T) {
	path := os.Getenv("STACKZ_LOG")
	if path == "" {
		t.Skip()
	}
	text, _ := os.ReadFile(path)
	text = text[:4<<20]
	marks := marksOf(text)
	var z bytes.Buffer
	e, _ := NewEncoder(&z, 1<<20)
	cut := len(text) - 100000
	var ms []Mark
	for _, m := range marks {
		if m.Off+m.Len <= cut {
			ms = append(ms, m)
		}
	}
	e.WriteMarked(text[:cut], ms)
	e.Flush()
	var ms2 []Mark
	for _, m := range marks {
		if m.Off >= cut && m.Off+m.Len <= cut+20000 {
			ms2 = append(ms2, Mark{Off: m.Off - cut, Len: m.Len, ID: m.ID})
		}
	}
	// register the marks, then parse the pending text without encoding it
	at := e.histBase + int64(len(e.hist))
	for _, m := range ms2 {
		start := at + int64(m.Off)
		prev, ok := e.last[m.ID]
		if !ok {
			prev = -1
		}
		e.last[m.ID] = start
		e.marks = append(e.marks, mark{start: start, end: start + int64(m.Len), prev: prev})
	}
	start := len(e.hist)
	e.hist = append(e.hist, text[cut:cut+20000]...)
	e.parse(start)
	pos := start
	for k, s := range e.seqs[:50] {
		fmt.Printf("%3d ll=%3d ml=%5d ob=%8d  lit=%q match=%q\n", k, s.ll, s.ml, s.offBase, e.hist[pos:pos+int(s.ll)], e.hist[pos+int(s.ll):pos+int(s.ll)+min(int(s.ml), 50)])
		pos += int(s.ll + s.ml)
	}
}
