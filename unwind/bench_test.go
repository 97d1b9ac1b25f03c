package unwind

import (
	"os"
	"testing"
	"time"
)

// measured are the files docs/unwind.md gives figures for: libc,
// libstdc++ and a large library (the first of the LLVM paths present).
func measured() []struct{ name, path string } {
	llvm := ""
	for _, p := range []string{"/usr/lib/llvm-19/lib/libLLVM.so.1", "/usr/lib/x86_64-linux-gnu/libLLVM.so.19.1", "/usr/lib/x86_64-linux-gnu/libLLVM-19.so"} {
		if _, err := os.Stat(p); err == nil {
			llvm = p
			break
		}
	}
	return []struct{ name, path string }{
		{"libc", "/lib/x86_64-linux-gnu/libc.so.6"},
		{"libstdc++", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"},
		{"libLLVM", llvm},
	}
}

// TestMeasureTables prints each table's size and build time (run with
// -v) and checks what the BPF side relies on: libc and libstdc++ fit in
// well under a MiB together, almost every row is usable, and libc's
// special frames (PLT expression, signal trampoline, thread and process
// entry points) are recognized.
func TestMeasureTables(t *testing.T) {
	total := 0
	for _, m := range measured() {
		if m.path == "" {
			t.Fatalf("no libLLVM found (clang-19 from make deps installs it)")
		}
		start := time.Now()
		tab, err := BuildTableFile(m.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		s := tab.Stats
		t.Logf("%-10s %8d FDEs %8d rows %9d bytes (%d extended rules) in %v; by type %v",
			m.name, s.EhFrameFDEs+s.DebugFrameFDEs, s.Rows, s.Bytes, s.Extended, took.Round(time.Millisecond), s.RowsByType)
		if s.Bytes != s.Rows*RowSize+s.Extended*ExtSize {
			t.Errorf("%s: %d bytes for %d rows", m.name, s.Bytes, s.Rows)
		}
		if bad := s.RowsByType[CFAUnsupported]; bad*1000 > s.Rows {
			t.Errorf("%s: %d of %d rows unsupported", m.name, bad, s.Rows)
		}
		if m.name != "libLLVM" {
			total += s.Bytes
		}
		if m.name == "libc" {
			if s.SignalRows != 1 || s.RowsByType[CFAPLT] != 1 || s.RowsByType[CFAEnd] < 2 {
				t.Errorf("libc: %d signal rows, %d PLT rows, %d end rows; want 1, 1 and >= 2 (_start's and clone's)",
					s.SignalRows, s.RowsByType[CFAPLT], s.RowsByType[CFAEnd])
			}
		}
	}
	if total > 1<<20 {
		t.Errorf("libc + libstdc++ tables take %d bytes", total)
	}
}

func BenchmarkBuildTable(b *testing.B) {
	for _, m := range measured() {
		if m.path == "" {
			continue
		}
		b.Run(m.name, func(b *testing.B) {
			var tab *Table
			for b.Loop() {
				var err error
				if tab, err = BuildTableFile(m.path, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tab.Stats.Rows), "rows")
			b.ReportMetric(float64(tab.Stats.Bytes), "table-bytes")
		})
	}
}

func BenchmarkLookup(b *testing.B) {
	tab, err := BuildTableFile("/lib/x86_64-linux-gnu/libc.so.6", nil)
	if err != nil {
		b.Fatal(err)
	}
	seg := tab.Segments[0]
	pc := seg.Vaddr
	for b.Loop() {
		pc += 4099
		if pc >= seg.Vaddr+seg.Memsz {
			pc = seg.Vaddr + pc%97
		}
		tab.Lookup(pc)
	}
}
