package procfs

import (
	"bytes"
	"os"
	"testing"
)

// BenchmarkParseMapsPython parses a python3 interpreter's maps file, the
// work of every rescan of a process after a dlopen.
func BenchmarkParseMapsPython(b *testing.B) {
	raw, err := os.ReadFile("testdata/python3.maps")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseMaps(bytes.NewReader(raw)); err != nil {
			b.Fatal(err)
		}
	}
}
