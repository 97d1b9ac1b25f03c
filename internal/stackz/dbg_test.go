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
	e, _ := NewEncoder(&z, 8<<20)
	var ms []Mark
	for _, m := range marks {
		if m.Off+m.Len <= len(text)-200000 {
			ms = append(ms, m)
		}
	}
	e.WriteMarked(text[:len(text)-200000], ms)
	e.Flush()
	start := int(e.done - e.histBase)
	e.add(text[len(text)-200000 : len(text)-200000+20000])
	// parse the pending block again to look at it
	e.reps = [3]uint32{1, 4, 8}
	e.parse(start)
	pos := start
	for k, s := range e.seqs[:60] {
		fmt.Printf("%3d ll=%3d ml=%5d ob=%8d  lit=%q match=%q\n", k, s.ll, s.ml, s.offBase, e.hist[pos:pos+int(s.ll)], e.hist[pos+int(s.ll):pos+int(s.ll)+min(int(s.ml), 60)])
		pos += int(s.ll + s.ml)
	}
}
