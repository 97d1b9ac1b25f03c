package viewer

import (
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/internal/sizehist"
	"github.com/memtrace/memtrace/logfmt"
)

// sizesLog allocates one block of each size, from one call site.
func sizesLog(sizes ...uint64) []byte {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "9"}, logfmt.KV{Key: "comm", Value: "t"}, logfmt.KV{Key: "cmd", Value: "./t"})
	for k, sz := range sizes {
		b = logfmt.AppendAlloc(b, 1, "main", "malloc", uint64(1000*(k+1)), sz, sz, uint64(0x10000*(k+1)))
		b = logfmt.AppendFrame(b, 0, "./t", "main", 0x10, 0x401010)
	}
	return logfmt.AppendSummary(b, logfmt.Summary{})
}

// The histogram's buckets are internal/sizehist's (the one definition of
// every view), labelled in the 1024-based units of their bounds: 1024 B
// is in ≤1 KiB, 1025 B in ≤4 KiB, 1 MiB + 1 in ≤4 MiB.
func TestHistogramBucketsAreSizehist(t *testing.T) {
	h := newHarness(t, sizesLog(1024, 1024, 1025, 1<<20+1), Options{})
	h.press(tcell.KeyRune, 'H')
	want := map[string]string{"≤1 KiB": "2", "≤4 KiB": "1", "≤16 KiB": "0", "≤4 MiB": "1"}
	got := map[string]string{}
	for _, r := range h.rows() {
		f := strings.Fields(strings.Trim(r, "│"))
		if len(f) >= 3 && strings.HasPrefix(f[0], "≤") {
			got[f[0]+" "+f[1]] = f[2]
		}
	}
	for l, n := range want {
		if got[l] != n {
			t.Errorf("bucket %s: %q allocations, want %s (rows %v)", l, got[l], n, got)
		}
	}
	if _, ok := got["≤256 B"]; ok {
		t.Errorf("a bucket below the first in use is shown: %v", got)
	}
	if l := sizehist.Label(sizehist.Index(1025)); l != "≤4 KiB" {
		t.Fatalf("sizehist puts 1025 B in %s", l)
	}
}
