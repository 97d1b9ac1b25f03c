//go:build amd64 || arm64

package tracer

import (
	"debug/elf"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/memtrace/memtrace/event"
)

// fullAllocSymbols is allocSymbols over every symbol as debug/elf reads
// them, kept to the names allocSymbols keeps: what the in-place read must
// equal.
func fullAllocSymbols(t *testing.T, ef *elf.File) (map[string]elf.Symbol, bool) {
	t.Helper()
	byName := map[string]elf.Symbol{}
	add := func(syms []elf.Symbol, global bool) {
		for _, s := range syms {
			if s.Section == elf.SHN_UNDEF || s.Value == 0 {
				continue
			}
			if ty := elf.ST_TYPE(s.Info); ty != elf.STT_FUNC && ty != elf.STT_GNU_IFUNC {
				continue
			}
			if b := elf.ST_BIND(s.Info); global && b != elf.STB_GLOBAL && b != elf.STB_WEAK {
				continue
			}
			if _, ok := allocNames()[s.Name]; !ok && !event.IsSymbolOpName([]byte(s.Name)) {
				continue
			}
			if _, dup := byName[s.Name]; !dup {
				s.Version, s.Library, s.VersionIndex, s.HasVersion = "", "", 0, false
				byName[s.Name] = s
			}
		}
	}
	syms, err := ef.DynamicSymbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		t.Fatal(err)
	}
	add(syms, false)
	if !isExecutable(ef) {
		return byName, false
	}
	st, err := ef.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		t.Fatal(err)
	}
	add(st, true)
	own := false
	for _, n := range []string{"malloc", "_Znwm", "_Znwj"} {
		if _, ok := byName[n]; ok {
			own = true
		}
	}
	return byName, own
}

// TestAllocSymbolsAsFullScan: the symbols read in place are the ones a
// scan of every symbol finds, on the C and C++ runtimes, the allocator
// libraries, a dynamic program and a static one.
func TestAllocSymbolsAsFullScan(t *testing.T) {
	var files []string
	for _, pat := range []string{"/lib/*-linux-gnu/libc.so.6", "/usr/lib/*-linux-gnu/libstdc++.so.6", "/usr/lib/*-linux-gnu/libc++.so.1",
		"/usr/lib/*-linux-gnu/libjemalloc.so.2", "/usr/lib/*-linux-gnu/libtcmalloc_minimal.so.4", "/usr/lib/*-linux-gnu/libmimalloc.so.2", "/bin/true"} {
		m, _ := filepath.Glob(pat)
		if len(m) == 0 {
			t.Fatalf("no %s: run make deps", pat)
		}
		files = append(files, m[0])
	}
	files = append(files, buildStatic(t, staticSrc))
	for _, path := range files {
		ef, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got, own, err := allocSymbols(ef)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		want, wantOwn := fullAllocSymbols(t, ef)
		ef.Close()
		// libc++ leaves operator new to libc++abi; the others define some.
		if len(want) == 0 && filepath.Base(path) != "libc++.so.1" && filepath.Base(path) != "true" {
			t.Fatalf("%s: the full scan found no allocation function", path)
		}
		if own != wantOwn || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %d symbols (own %v), the full scan %d (own %v)", path, len(got), own, len(want), wantOwn)
			for n, s := range want {
				if g, ok := got[n]; !ok || g != s {
					t.Errorf("  %s: %+v, want %+v", n, g, s)
				}
			}
		}
	}
}
