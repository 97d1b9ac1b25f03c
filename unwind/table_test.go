package unwind

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDebugFrameEqualsEhFrame builds testdata/dframe.c with .eh_frame
// and with only .debug_frame (gcc's version 1, clang's version 4 in the
// 32- and 64-bit DWARF formats, arm64): the code is identical, so the
// rule at every byte of every function must be identical. With both
// sections, every .debug_frame FDE is dropped as a duplicate.
func TestDebugFrameEqualsEhFrame(t *testing.T) {
	funcs := []string{"leaf", "small_frame", "big_frame", "dynamic_frame", "many_saved", "sink", "main"}
	common := []string{"-O2", "-fomit-frame-pointer", "testdata/dframe.c"}
	noEh := []string{"-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-g"}
	for _, c := range []struct {
		name  string
		cc    string
		cross bool
		debug []string
	}{
		{"gcc", "gcc", false, nil},
		{"clang-dwarf4", "clang-19", false, []string{"-gdwarf-4"}},
		{"clang-dwarf64", "clang-19", false, []string{"-gdwarf-5", "-gdwarf64"}},
		{"arm64-gcc", "aarch64-linux-gnu-gcc", true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cc := requireTool(t, c.cc, c.cross)
			dir := t.TempDir()
			build := func(name string, flags ...string) (*Table, *elf.File) {
				out := filepath.Join(dir, name)
				args := append(append(append([]string{}, common...), flags...), "-o", out)
				if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
					t.Fatalf("%s %v: %v\n%s", cc, args, err, b)
				}
				tab, err := BuildTableFile(out, nil)
				if err != nil {
					t.Fatal(err)
				}
				f, err := elf.Open(out)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				return tab, f
			}
			ehTab, ehELF := build("eh")
			dbgTab, dbgELF := build("debug", append(noEh, c.debug...)...)
			both := []string{"-DBOTH", "-g"}
			if c.cc != "clang-19" {
				both = append(both, "-fno-toplevel-reorder") // clang keeps top-level asm first anyway
			}
			bothTab, _ := build("both", both...)
			if dbgELF.Section(".debug_frame") == nil {
				t.Fatal("the -fno-asynchronous-unwind-tables build has no .debug_frame")
			}
			text := func(f *elf.File) []byte {
				b, err := f.Section(".text").Data()
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			if !bytes.Equal(text(ehELF), text(dbgELF)) {
				t.Fatal("the two builds' .text differ; the comparison needs identical code")
			}
			if ehTab.Stats.DebugFrameFDEs != 0 || dbgTab.Stats.DebugFrameFDEs < len(funcs) {
				t.Errorf(".debug_frame FDEs used: %d with .eh_frame, %d without; want 0 and >= %d",
					ehTab.Stats.DebugFrameFDEs, dbgTab.Stats.DebugFrameFDEs, len(funcs))
			}
			if bothTab.Stats.DebugFrameFDEs != 0 || bothTab.Stats.DebugFrameDup < len(funcs) {
				t.Errorf("both sections: %d .debug_frame FDEs used, %d dropped; want 0 and >= %d",
					bothTab.Stats.DebugFrameFDEs, bothTab.Stats.DebugFrameDup, len(funcs))
			}
			syms, err := dbgELF.Symbols()
			if err != nil {
				t.Fatal(err)
			}
			found := 0
			for _, s := range syms {
				if !slicesContains(funcs, s.Name) || elf.ST_TYPE(s.Info) != elf.STT_FUNC {
					continue
				}
				found++
				for pc := s.Value; pc < s.Value+s.Size; pc++ {
					want := ehTab.Lookup(pc)
					if got := dbgTab.Lookup(pc); got != want || want.CFA == CFAGap {
						t.Fatalf("%s+%#x: .debug_frame gives %+v, .eh_frame %+v", s.Name, pc-s.Value, got, want)
					}
					if got := bothTab.Lookup(pc); got != want {
						t.Fatalf("%s+%#x: with both sections %+v, .eh_frame alone %+v", s.Name, pc-s.Value, got, want)
					}
				}
			}
			if found != len(funcs) {
				t.Fatalf("found %d of the %d functions", found, len(funcs))
			}
		})
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// stripSectionHeaders returns a copy of an ELF64 file whose header
// claims no section headers, as in a file rebuilt from memory.
func stripSectionHeaders(b []byte) []byte {
	c := append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(c[0x28:], 0) // e_shoff
	binary.LittleEndian.PutUint16(c[0x3c:], 0) // e_shnum
	binary.LittleEndian.PutUint16(c[0x3e:], 0) // e_shstrndx
	return c
}

// TestWithoutSectionHeaders finds .eh_frame through PT_GNU_EH_FRAME and
// .eh_frame_hdr, and must build the same rows as through the sections.
func TestWithoutSectionHeaders(t *testing.T) {
	for _, path := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		full, err := BuildTable(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil {
			t.Fatal(err)
		}
		stripped := stripSectionHeaders(data)
		tab, err := BuildTable(bytes.NewReader(stripped), int64(len(stripped)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !tab.Stats.FromHdr || full.Stats.FromHdr {
			t.Errorf("%s: FromHdr %v (stripped) %v (full)", path, tab.Stats.FromHdr, full.Stats.FromHdr)
		}
		if full.Stats.SyntheticPLT != 0 {
			t.Fatalf("%s: has synthetic PLT rules, which need section headers", path)
		}
		if len(tab.Rows) != len(full.Rows) || !bytes.Equal(tab.Bytes(), full.Bytes()) {
			t.Errorf("%s: %d rows without section headers, %d with; or they differ", path, len(tab.Rows), len(full.Rows))
		}
	}
}

// TestEhFrameHdrMatchesFDEs: ld's binary-search table in .eh_frame_hdr
// lists exactly the FDEs the parser finds, at the same offsets.
func TestEhFrameHdrMatchesFDEs(t *testing.T) {
	for _, path := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"} {
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		hs, es := f.Section(".eh_frame_hdr"), f.Section(".eh_frame")
		hb, err1 := hs.Data()
		eb, err2 := es.Data()
		f.Close()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		h, err := ParseEhFrameHdr(hb, hs.Addr, 0)
		if err != nil {
			t.Fatal(err)
		}
		cfi, err := ParseEhFrame(eb, es.Addr, 0)
		if err != nil {
			t.Fatal(err)
		}
		if h.EhFrame != es.Addr || len(h.Table) != len(cfi.FDEs) || len(h.Table) == 0 {
			t.Fatalf("%s: header points at %#x (section %#x), lists %d FDEs, parser found %d",
				path, h.EhFrame, es.Addr, len(h.Table), len(cfi.FDEs))
		}
		byOff := map[uint64]FDE{}
		for _, fde := range cfi.FDEs {
			byOff[es.Addr+fde.Offset] = fde
		}
		for i, e := range h.Table {
			fde, ok := byOff[e.FDE]
			if !ok || fde.Start != e.Start {
				t.Fatalf("%s: header entry %d (%#x at %#x): parser has %+v", path, i, e.Start, e.FDE, fde)
			}
			if i > 0 && h.Table[i-1].Start >= e.Start {
				t.Fatalf("%s: header table not sorted at %d", path, i)
			}
		}
	}
}
