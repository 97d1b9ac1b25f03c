package preload

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/fallback-preload/internal/mtabi"
	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
)

const abiHeader = "c/mt_abi.h"

func parseABI(t *testing.T) *mtabi.Header {
	t.Helper()
	src, err := os.ReadFile(abiHeader)
	if err != nil {
		t.Fatal(err)
	}
	h, err := mtabi.Parse(src)
	if err != nil {
		t.Fatalf("%s: %v", abiHeader, err)
	}
	return h
}

// TestABIGeneratedIsCurrent: abi_gen.go is exactly what the generator makes
// of the header now, so every offset and number the Go side uses is the
// header's.
func TestABIGeneratedIsCurrent(t *testing.T) {
	want, err := parseABI(t).Generate("preload", abiHeader, mtabi.PreloadNames)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("abi_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("abi_gen.go is stale (line %d is %q, the header gives %q): run go generate ./fallback-preload", i+1, g, w)
			}
		}
	}
}

// TestABIOpsAreLogfmts: the call ops (generated from internal/ops into
// c/mt_ops.h and logfmt, whose agreement internal/ops' tests check) come
// before EXIT, and EXIT and the record ops after them all.
func TestABIOpsAreLogfmts(t *testing.T) {
	if opExit < logfmt.NumOps || nops != opExit+1 || nops > rName {
		t.Errorf("opExit %d, nops %d: want EXIT past logfmt's %d ops, the last op below the record ops (%d)", opExit, nops, logfmt.NumOps, rName)
	}
	for _, r := range []int{rName, rStart, rExec, rFork, rProcExit} {
		if r < nops || r > 0xffff {
			t.Errorf("record op %d: want past the call ops and EXIT (%d) and within 16 bits", r, nops)
		}
	}
	if hdrSize > statesOff || chunkHdr%recSize != 0 || chunkSize%recSize != 0 {
		t.Errorf("hdrSize %d (page %d), chunkHdr %d, chunkSize %d: the region's parts do not fit", hdrSize, statesOff, chunkHdr, chunkSize)
	}
}

// TestABILayoutMatchesCompilers: each compiler that builds the library lays
// the header's structures out exactly as the generator computed (names,
// offsets, sizes, read back from the DWARF of an object file), so the
// generated offsets hold for the library on every target.
func TestABILayoutMatchesCompilers(t *testing.T) {
	h := parseABI(t)
	if len(h.Structs) == 0 {
		t.Fatal("no structs parsed from the header")
	}
	inc, err := filepath.Abs("c")
	if err != nil {
		t.Fatal(err)
	}
	var probe strings.Builder
	probe.WriteString("#include \"mt_abi.h\"\n")
	for _, s := range h.Structs {
		fmt.Fprintf(&probe, "%s probe_%s;\n", s.Name, s.Name)
	}
	for _, cc := range []struct {
		name     string
		required bool // a target the library is built for
		cross    bool
	}{
		{"gcc", true, false},
		{"aarch64-linux-gnu-gcc", true, true},
		{"arm-linux-gnueabihf-gcc", true, true},
		{"clang-19", false, false},
	} {
		t.Run(cc.name, func(t *testing.T) {
			if _, err := exec.LookPath(cc.name); err != nil {
				switch {
				case cc.cross && os.Getenv("MEMTRACE_REQUIRE_CROSS") == "1":
					t.Fatalf("%s is missing but MEMTRACE_REQUIRE_CROSS=1: run make deps", cc.name)
				case cc.required && !cc.cross:
					t.Fatalf("%s is missing: it builds the library", cc.name)
				}
				bpftest.Unavailable(t, "%s not installed", cc.name)
			}
			dir := t.TempDir()
			src, obj := filepath.Join(dir, "probe.c"), filepath.Join(dir, "probe.o")
			if err := os.WriteFile(src, []byte(probe.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(cc.name, "-std=gnu11", "-g", "-c", "-I", inc, "-o", obj, src).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", cc.name, err, out)
			}
			got := dwarfStructs(t, obj)
			for _, s := range h.Structs {
				st, ok := got[s.Name]
				if !ok {
					t.Errorf("%s: no DWARF for %s", cc.name, s.Name)
					continue
				}
				if int(st.ByteSize) != s.Size {
					t.Errorf("%s: sizeof %s = %d, the generator says %d", cc.name, s.Name, st.ByteSize, s.Size)
				}
				if len(st.Field) != len(s.Fields) {
					t.Errorf("%s: %s has %d fields, the generator read %d", cc.name, s.Name, len(st.Field), len(s.Fields))
					continue
				}
				for i, f := range s.Fields {
					df := st.Field[i]
					if df.Name != f.Name || int(df.ByteOffset) != f.Offset || int(df.Type.Size()) != f.Size() {
						t.Errorf("%s: %s field %d is %s at %d (%d bytes), the generator says %s at %d (%d bytes)",
							cc.name, s.Name, i, df.Name, df.ByteOffset, df.Type.Size(), f.Name, f.Offset, f.Size())
					}
				}
			}
		})
	}
}

// dwarfStructs returns the structs behind the object's mt_* typedefs.
func dwarfStructs(t *testing.T, path string) map[string]*dwarf.StructType {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]*dwarf.StructType{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if e == nil {
			return out
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		if e.Tag != dwarf.TagTypedef || !strings.HasPrefix(name, "mt_") {
			continue
		}
		typ, err := d.Type(e.Offset)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, name, err)
		}
		if td, ok := typ.(*dwarf.TypedefType); ok {
			if st, ok := td.Type.(*dwarf.StructType); ok {
				out[name] = st
			}
		}
	}
}
