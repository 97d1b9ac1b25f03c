package analysis

import (
	"runtime/debug"
	"strings"
	"testing"
)

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// Stream collects at ReaderGCPercent while it reads, restores the
// setting after, and keeps a lower one the user chose.
func TestStreamLowersGCPercentWhileReading(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, c := range []struct{ before, during int }{{100, ReaderGCPercent}, {10, 10}, {-1, -1}} {
		debug.SetGCPercent(c.before)
		seen := -2
		m := New()
		err := m.Stream(strings.NewReader(lazyLog), StreamOptions{OnBatch: func() { seen = gcPercent() }})
		if err != nil {
			t.Fatal(err)
		}
		if seen != c.during {
			t.Errorf("GOGC %d: %d while reading, want %d", c.before, seen, c.during)
		}
		if after := gcPercent(); after != c.before {
			t.Errorf("GOGC %d: %d after reading, want it restored", c.before, after)
		}
	}
}
