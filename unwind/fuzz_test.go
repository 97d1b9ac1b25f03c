package unwind

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Fuzz targets for the two parsers of untrusted bytes: CFI sections and
// whole ELF files. `go test` runs their seeds; `make fuzz` (scripts/fuzz.sh)
// fuzzes each for a while.

var sentinels = []error{ErrNotELF, ErrMalformed, ErrUnsupportedArch, ErrNoCFI, ErrTooLarge}

func checkSentinel(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("%s: error wraps no sentinel: %v", what, err)
}

var fuzzLimits = Limits{MaxSection: 4 << 20, MaxFDEs: 1 << 14, MaxRows: 1 << 18}

// checkTable verifies what every table must satisfy, whatever its input.
func checkTable(t *testing.T, tab *Table) {
	t.Helper()
	if tab.Stats.Rows != len(tab.Rows) || len(tab.Bytes()) != len(tab.Rows)*RowSize ||
		len(tab.ExtendedBytes()) != len(tab.Extended)*ExtSize || len(tab.Extended) > MaxExtended {
		t.Fatalf("sizes: stats %d rows, %d rows, %d extended", tab.Stats.Rows, len(tab.Rows), len(tab.Extended))
	}
	for i, r := range tab.Rows {
		if i > 0 && tab.Rows[i-1].PC >= r.PC {
			t.Fatalf("row %d at %#x not after row %d at %#x", i, r.PC, i-1, tab.Rows[i-1].PC)
		}
		if i > 0 && sameRule(tab.Rows[i-1], r) {
			t.Fatalf("rows %d and %d have the same rule: not merged", i-1, i)
		}
		if r.CFAType() == CFAExtended && int(r.CFA) >= len(tab.Extended) {
			t.Fatalf("row %d indexes extended rule %d of %d", i, r.CFA, len(tab.Extended))
		}
		if r.CFAType() > CFAExtended {
			t.Fatalf("row %d has CFA type %d", i, r.CFAType())
		}
		if got, want := tab.Lookup(tab.Base+uint64(r.PC)), tab.RowRule(r); got != want {
			t.Fatalf("Lookup(row %d) = %+v, row says %+v", i, got, want)
		}
	}
	if len(tab.Rows) > 0 && tab.Rows[len(tab.Rows)-1].CFAType() != CFAGap {
		t.Fatalf("the last row is %v, not a gap", tab.Rows[len(tab.Rows)-1].CFAType())
	}
}

// walkSome runs the reference walker over tab with registers and stack
// taken from seed bytes: it must stop, within its frame limit.
func walkSome(t *testing.T, tab *Table, seed []byte) {
	t.Helper()
	word := func(i int) uint64 {
		if len(seed) < 8 {
			return uint64(i) * 8
		}
		j := (i * 8) % (len(seed) - 7)
		return binary.LittleEndian.Uint64(seed[j:])
	}
	base := tab.Base
	regs := Regs{PC: base + word(0)%0x10000, SP: 0x7000_0000, FP: 0x7000_0000 + word(1)%0x800, LR: base + word(2)%0x10000}
	mem := func(addr uint64) (uint64, bool) {
		if addr < 0x7000_0000 || addr >= 0x7000_1000 {
			return 0, false
		}
		return base + word(int(addr-0x7000_0000)/8+3)%0x10000, true
	}
	res := WalkDetailed(regs, mem, []Mapping{{Start: base, End: base + 0x10000, Table: tab}}, 32)
	if len(res.Frames) > 32 || len(res.Frames) == 0 {
		t.Fatalf("walk returned %d frames", len(res.Frames))
	}
}

// fuzzELFs are small real ELF files (x86-64 and, where the cross
// compiler is installed, arm64), built once.
var (
	fuzzELFOnce sync.Once
	fuzzELFData [][]byte
	fuzzELFErr  error
)

func fuzzELFs(t testing.TB) [][]byte {
	fuzzELFOnce.Do(func() {
		dir, err := os.MkdirTemp("", "unwind-fuzz-")
		if err != nil {
			fuzzELFErr = err
			return
		}
		defer os.RemoveAll(dir)
		builds := []struct {
			cc   string
			args []string
		}{
			{"gcc", []string{"-O2", "-fomit-frame-pointer"}},
			{"gcc", []string{"-O2", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-g", "-s"}},
			{"gcc", []string{"-O1", "-shared", "-fPIC"}},
			{"clang-19", []string{"-O2", "-fno-asynchronous-unwind-tables", "-g", "-gdwarf-5", "-gdwarf64"}},
			{"aarch64-linux-gnu-gcc", []string{"-O2"}},
		}
		for i, b := range builds {
			if _, err := exec.LookPath(b.cc); err != nil {
				continue
			}
			out := filepath.Join(dir, "seed"+string(rune('a'+i)))
			args := append(append([]string{}, b.args...), "testdata/dframe.c", "-o", out)
			if o, err := exec.Command(b.cc, args...).CombinedOutput(); err != nil {
				fuzzELFErr = errors.New(b.cc + ": " + err.Error() + "\n" + string(o))
				return
			}
			data, err := os.ReadFile(out)
			if err != nil {
				fuzzELFErr = err
				return
			}
			fuzzELFData = append(fuzzELFData, data)
		}
	})
	if fuzzELFErr != nil {
		t.Fatal(fuzzELFErr)
	}
	if len(fuzzELFData) == 0 {
		t.Fatal("gcc is required to build fuzz seeds")
	}
	return fuzzELFData
}

// section returns the named section's bytes and address from an ELF image.
func sectionOf(data []byte, name string) ([]byte, uint64, bool) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, 0, false
	}
	s := f.Section(name)
	if s == nil {
		return nil, 0, false
	}
	b, err := s.Data()
	return b, s.Addr, err == nil
}

// asmSeeds are hand-assembled sections covering every augmentation and
// opcode the unit tests use.
func asmSeeds() []*ehAsm {
	var out []*ehAsm
	a := &ehAsm{addr: 0x9000}
	cie := a.cie(1, "zPLR", 1, -8, 16, cat([]byte{0x9b}, []byte{1, 2, 3, 4}, []byte{0x1b, 0x1b}), x86Initial)
	a.fde(cie, 0x1b, 0x1000, 0x40, []byte{9, 9, 9, 9}, []byte{
		cfaAdvanceLoc | 1, cfaDefCFAOffset, 16, cfaOffset | 6, 2, cfaRememberState,
		cfaAdvanceLoc1, 3, cfaDefCFARegister, 6, cfaRestoreState,
		cfaAdvanceLoc | 1, cfaDefCFAExpression, 11, opBreg0 + 7, 8, opBreg0 + 16, 0, opLit0 + 15, opAnd, opLit0 + 11, opGe, opLit0 + 3, opShl, opPlus,
		cfaAdvanceLoc | 1, cfaUndefined, 16})
	sig := a.cie(3, "zRS", 1, -8, 16, []byte{0x1b}, x86Initial)
	a.fde(sig, 0x1b, 0x1100, 0x10, []byte{}, []byte{cfaDefCFAExpression, 4, opBreg0 + 7, 0xa0, 0x01, 0x06})
	a.terminate()
	out = append(out, a)
	d := &ehAsm{debug: true, d64: true}
	dc := d.cie(4, "", 4, -8, 30, nil, armInitial)
	d.fde(dc, peUdata8, 0x2000, 0x40, nil, []byte{cfaAdvanceLoc | 1, cfaDefCFAOffset, 32, cfaOffset | 29, 4, cfaOffset | 30, 3, cfaGNUWindowSave})
	out = append(out, d)
	return out
}

func FuzzParseEhFrame(f *testing.F) {
	for _, a := range asmSeeds() {
		f.Add(a.buf, a.addr, a.debug)
		f.Add(a.buf[:len(a.buf)/2], a.addr, a.debug)
	}
	for _, data := range fuzzELFs(f) {
		if b, addr, ok := sectionOf(data, ".eh_frame"); ok {
			f.Add(b, addr, false)
		}
		if b, _, ok := sectionOf(data, ".debug_frame"); ok {
			f.Add(b, uint64(0), true)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, addr uint64, debug bool) {
		var cfi *CFI
		var err error
		if debug {
			cfi, err = ParseDebugFrame(data, fuzzLimits.MaxFDEs)
		} else {
			cfi, err = ParseEhFrame(data, addr, fuzzLimits.MaxFDEs)
		}
		checkSentinel(t, "parse", err)
		if cfi == nil {
			t.Fatal("nil CFI")
		}
		if len(cfi.FDEs) > fuzzLimits.MaxFDEs {
			t.Fatalf("%d FDEs past the limit", len(cfi.FDEs))
		}
		for _, arch := range []Arch{ArchAMD64, ArchARM64} {
			for i := range cfi.FDEs {
				fde := &cfi.FDEs[i]
				if fde.End < fde.Start || len(fde.Instructions) > len(data) {
					t.Fatalf("FDE %d: %#x..%#x, %d instruction bytes of %d", i, fde.Start, fde.End, len(fde.Instructions), len(data))
				}
				last, any := uint64(0), false
				_, err := runFDE(fde, arch, func(pc uint64, st *state) {
					if pc < fde.Start || pc >= fde.End || (any && pc <= last) {
						t.Fatalf("FDE %d %#x..%#x: row at %#x after %#x", i, fde.Start, fde.End, pc, last)
					}
					last, any = pc, true
					encodeRule(st.rule(arch, fde.CIE.Signal), arch)
				})
				checkSentinel(t, "run", err)
			}
			// Assemble a table over a text segment covering the low 4 GiB.
			b := &builder{t: &Table{Arch: arch, Segments: []Segment{{Vaddr: 0, Memsz: 1 << 32}}}, opts: Options{Limits: fuzzLimits}}
			if err := b.assemble(cfi, nil); err == nil {
				checkTable(t, b.t)
				walkSome(t, b.t, data)
			} else {
				checkSentinel(t, "assemble", err)
			}
		}
	})
}

func FuzzBuildTable(f *testing.F) {
	for _, data := range fuzzELFs(f) {
		f.Add(data)
		f.Add(stripSectionHeaders(data))
		f.Add(data[:len(data)/3])
	}
	f.Add([]byte("\x7fELF"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := BuildTable(bytes.NewReader(data), int64(len(data)), &Options{Limits: fuzzLimits})
		checkSentinel(t, "BuildTable", err)
		if err != nil {
			return
		}
		checkTable(t, tab)
		if len(tab.Rows) > fuzzLimits.MaxRows {
			t.Fatalf("%d rows past the limit", len(tab.Rows))
		}
		walkSome(t, tab, data)
	})
}
