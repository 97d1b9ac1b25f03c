//go:build amd64 || arm64

package tracer

import (
	"bytes"
	"os"
	"testing"

	"github.com/memtrace/memtrace/internal/procfs"
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
		pms, _ := procfs.ParseMaps(bytes.NewReader(raw))
		for i := range pms {
			if m, ok := execMapping(&pms[i]); ok {
				out = append(out, m)
			}
		}
		if len(out) == 0 {
			b.Fatal("no executable mappings")
		}
	}
}
