//go:build amd64 || arm64

package tracer

import (
	"bufio"
	"bytes"
	"os"
	"testing"
)

// BenchmarkExecMapsPython picks a python3 interpreter's executable file
// mappings out of its maps file, as every unwinder update does.
func BenchmarkExecMapsPython(b *testing.B) {
	raw, err := os.ReadFile("../internal/procfs/testdata/python3.maps")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var out []procMapping
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if m, ok := parseMapsLine(sc.Text()); ok {
				out = append(out, m)
			}
		}
		if len(out) == 0 {
			b.Fatal("no executable mappings")
		}
	}
}
