package symbols

import (
	"debug/elf"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestLoadDWARFAsDebugElf: the index built from loadDWARF's sections
// answers every looked-up address as the one built from debug/elf's own
// File.DWARF does: uncompressed, zlib, zstd and GNU's .zdebug sections
// (objcopy), and the C library's separate debug file (DWARF 5, its
// strings and ranges in the sections loadDWARF adds).
func TestLoadDWARFAsDebugElf(t *testing.T) {
	f := fixtures(t)
	needTool(t, "objcopy")
	dir := t.TempDir()
	files := map[string]string{"plain": f.plug, "prog": f.prog}
	for _, c := range []string{"zlib", "zstd", "zlib-gnu"} {
		out := filepath.Join(dir, "libplug-"+c+".so")
		run(t, "objcopy", "--compress-debug-sections="+c, f.plug, out)
		files[c] = out
	}
	r, size, done := SeparateDebugFile("/lib/x86_64-linux-gnu/libc.so.6")
	if r == nil {
		if _, err := os.Stat("/lib/x86_64-linux-gnu/libc.so.6"); err == nil {
			t.Fatal("the C library has no separate debug file: make deps installs libc6-dbg")
		}
	} else {
		defer done()
	}
	compressed := map[string]bool{}
	for name, path := range files {
		fd, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer fd.Close()
		st, _ := fd.Stat()
		e, err := openELF(fd, st.Size(), testLimits())
		if err != nil {
			t.Fatal(err)
		}
		compareDWARFLoads(t, name, e, compressed)
	}
	if r != nil {
		e, err := openELF(r, size, testLimits())
		if err != nil {
			t.Fatal(err)
		}
		compareDWARFLoads(t, "libc debug file", e, compressed)
	}
	for _, name := range []string{"zlib", "zstd"} {
		if !compressed[name] {
			t.Errorf("%s: objcopy compressed no debug section: the test did not read what it is for", name)
		}
	}
}

func compareDWARFLoads(t *testing.T, name string, e *elfFile, compressed map[string]bool) {
	t.Helper()
	for _, s := range e.f.Sections {
		if s.Flags&elf.SHF_COMPRESSED != 0 && s.Name == ".debug_info" {
			compressed[name] = true
		}
	}
	got, err := newDWARFIndex(e)
	if err != nil {
		t.Fatalf("%s: loadDWARF: %v", name, err)
	}
	d, err := e.f.DWARF()
	if err != nil {
		t.Fatalf("%s: debug/elf: %v", name, err)
	}
	want, err := indexDWARF(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ranges) != len(want.ranges) || len(got.units) != len(want.units) {
		t.Fatalf("%s: %d ranges of %d units, debug/elf's %d of %d", name, len(got.ranges), len(got.units), len(want.ranges), len(want.units))
	}
	// Up to 64 addresses in each unit's range, its ends included.
	n, found := 0, 0
	for _, rg := range want.ranges {
		step := max((rg.hi-rg.lo)/64, 1)
		for pc := rg.lo; pc < rg.hi; pc += step {
			a, errA := got.source(pc)
			b, errB := want.source(pc)
			n++
			if len(b) > 0 && b[0].Line > 0 {
				found++
			}
			if !reflect.DeepEqual(a, b) || (errA == nil) != (errB == nil) {
				t.Fatalf("%s: %#x: %v, %v; debug/elf's %v, %v", name, pc, a, errA, b, errB)
			}
		}
	}
	if found == 0 {
		t.Errorf("%s: none of %d addresses has a source line: nothing compared", name, n)
	}
}

func testLimits() Limits {
	var l Limits
	l.fill()
	return l
}
