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

// TestABIOpsAreLogfmts: an op's number in the records is logfmt's number
// for the op's text, every logfmt op has one, and EXIT and the record ops
// come after them all.
func TestABIOpsAreLogfmts(t *testing.T) {
	seen := map[logfmt.Op]bool{}
	for num, text := range opNames {
		switch {
		case text == "":
			continue
		case num == opExit:
			if text != "EXIT" || num < logfmt.NumOps || logfmt.ParseOp([]byte(text)) != logfmt.OpOther {
				t.Errorf("opExit = %d %q: want EXIT, numbered after logfmt's %d ops", num, text, logfmt.NumOps)
			}
			continue
		}
		op := logfmt.ParseOp([]byte(text))
		if int(op) != num || op.String() != text {
			t.Errorf("op %q is %d in mt_abi.h but %d in logfmt", text, num, op)
		}
		seen[op] = true
	}
	for o := logfmt.Op(1); int(o) < logfmt.NumOps; o++ {
		if !seen[o] {
			t.Errorf("logfmt op %v has no number in mt_abi.h", o)
		}
	}
	for _, r := range []int{rName, rStart, rExec, rFork, rProcExit} {
		if r < len(opNames) || r > 0xffff {
			t.Errorf("record op %d: want past the call ops (%d) and within 16 bits", r, len(opNames))
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
