package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// TestCompareCatches checks that the comparison fails on each kind of
// mistake a tracer can make, so that a passing TestPrograms means something.
func TestCompareCatches(t *testing.T) {
	truth := []truthRec{
		{tid: 10, op: "malloc", size: 8, ptr: 0x100, name: "w"},
		{tid: 10, op: "free", size: 8, ptr: 0x100, name: "w"},
		{tid: 10, op: "gap"},
		{tid: 10, op: "strdup", size: 4, ptr: 0x200, name: "w"},
		{tid: 10, op: "exit"},
		// A thread that ended without allocating has no EXIT line, as in
		// memtrack (forkmt's churn threads when the stop flag came first).
		{tid: 11, op: "gap"},
		{tid: 11, op: "exit"},
	}
	good := func() []byte {
		var b []byte
		b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "10"})
		b = logfmt.AppendAlloc(b, 10, "w", "malloc", 1, 99, 99, 0x999) // start-up: allowed
		b = logfmt.AppendAlloc(b, 10, "w", "malloc", 2, 8, 107, 0x100)
		b = logfmt.AppendFree(b, 10, "w", "free", 3, 8, 0x100)
		b = logfmt.AppendAlloc(b, 10, "w", "calloc", 4, 1, 108, 0x300) // after a gap: allowed
		b = logfmt.AppendAlloc(b, 10, "w", "strdup", 5, 4, 112, 0x200)
		b = logfmt.AppendExit(b, 10, "w", 6, 112)
		return b
	}
	cases := []struct {
		name string
		edit func(string) string
		want string // a fragment of the expected complaint; "" = passes
	}{
		{"exact", func(s string) string { return s }, ""},
		{"missing event", func(s string) string { return dropLine(s, "ptr=0x100\n") }, "no matching log event"},
		{"wrong size", func(s string) string { return strings.Replace(s, "size=8 ", "size=9 ", 1) }, "no matching log event"},
		{"double logging", func(s string) string {
			return strings.Replace(s, "[memtrack] tid=10     (w              ) free",
				string(logfmt.AppendAlloc(nil, 10, "w", "malloc", 3, 7, 1, 0x500))+"[memtrack] tid=10     (w              ) free", 1)
		}, "not in the record"},
		{"wrong name", func(s string) string {
			return strings.Replace(s, "(w              ) strdup", "(x              ) strdup", 1)
		}, "thread name"},
		{"no exit", func(s string) string { return dropLine(s, "EXIT") }, "no EXIT line"},
		{"bad total", func(s string) string {
			return strings.Replace(s, "total=112          bytes", "total=113          bytes", 1)
		}, "EXIT total"},
		{"time back", func(s string) string { return strings.Replace(s, "ts=5 ", "ts=0 ", 1) }, "time goes back"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			if err := os.WriteFile(path, []byte(c.edit(string(good()))), 0o644); err != nil {
				t.Fatal(err)
			}
			pl, err := parseLog(path)
			if err != nil {
				t.Fatal(err)
			}
			errs := compare(pl, truth, compareOpts{exits: true})
			if c.want == "" {
				if len(errs) > 0 {
					t.Fatalf("unexpected complaints: %v", errs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), c.want) {
				t.Fatalf("want a complaint with %q, got %v", c.want, errs)
			}
		})
	}
}

func dropLine(s, frag string) string {
	var out []string
	for _, ln := range strings.SplitAfter(s, "\n") {
		if !strings.Contains(ln, frag) {
			out = append(out, ln)
		}
	}
	return strings.Join(out, "")
}
