package symbols

import (
	"bytes"
	"os"
	"testing"

	"github.com/memtrace/memtrace/internal/procfs"
)

// BenchmarkParseMapsPython parses a python3 interpreter's maps file into
// the address space's mappings.
func BenchmarkParseMapsPython(b *testing.B) {
	raw, err := os.ReadFile("../internal/procfs/testdata/python3.maps")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		pms, err := procfs.ParseMaps(bytes.NewReader(raw))
		if err != nil {
			b.Fatal(err)
		}
		_ = ProcMappings(pms)
	}
}
