package unwind

import (
	"encoding/binary"
	"errors"
	"testing"
)

// A small CFI assembler, so that each encoding, augmentation and opcode
// can be tested in isolation with exact expected results.

func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// ehAsm builds a .eh_frame (or, debug set, .debug_frame) section placed
// at virtual address addr.
type ehAsm struct {
	buf   []byte
	addr  uint64
	debug bool
	d64   bool // 64-bit DWARF format (.debug_frame)
}

func (a *ehAsm) entry(id []byte, body []byte) uint64 {
	off := uint64(len(a.buf))
	if a.d64 {
		a.buf = binary.LittleEndian.AppendUint32(a.buf, 0xffffffff)
		a.buf = binary.LittleEndian.AppendUint64(a.buf, uint64(len(id)+len(body)))
	} else {
		a.buf = binary.LittleEndian.AppendUint32(a.buf, uint32(len(id)+len(body)))
	}
	a.buf = append(a.buf, id...)
	a.buf = append(a.buf, body...)
	return off
}

// cie appends a CIE and returns its offset. augData is the 'z' data.
func (a *ehAsm) cie(version byte, aug string, caf uint64, daf int64, ra uint64, augData, initial []byte) uint64 {
	var id []byte
	switch {
	case !a.debug:
		id = []byte{0, 0, 0, 0}
	case a.d64:
		id = binary.LittleEndian.AppendUint64(nil, ^uint64(0))
	default:
		id = []byte{0xff, 0xff, 0xff, 0xff}
	}
	body := cat([]byte{version}, []byte(aug), []byte{0})
	if version == 4 {
		body = append(body, 8, 0)
	}
	body = cat(body, uleb(caf), sleb(daf))
	if version == 1 {
		body = append(body, byte(ra))
	} else {
		body = append(body, uleb(ra)...)
	}
	if len(aug) > 0 && aug[0] == 'z' {
		body = cat(body, uleb(uint64(len(augData))), augData)
	}
	return a.entry(id, cat(body, initial))
}

// fde appends an FDE for [start, start+length) with pc_begin in enc.
// augData nil means the CIE has no 'z'.
func (a *ehAsm) fde(cieOff uint64, enc byte, start, length uint64, augData, instr []byte) uint64 {
	idPos := uint64(len(a.buf)) + 4
	if a.d64 {
		idPos += 8
	}
	var id []byte
	switch {
	case !a.debug:
		id = binary.LittleEndian.AppendUint32(nil, uint32(idPos-cieOff))
	case a.d64:
		id = binary.LittleEndian.AppendUint64(nil, cieOff)
	default:
		id = binary.LittleEndian.AppendUint32(nil, uint32(cieOff))
	}
	fieldAddr := a.addr + idPos + uint64(len(id))
	body := cat(encodePtr(enc, start, fieldAddr), encodePtr(enc&0x0f, length, 0))
	if augData != nil {
		body = cat(body, uleb(uint64(len(augData))), augData)
	}
	return a.entry(id, cat(body, instr))
}

func (a *ehAsm) terminate() { a.buf = append(a.buf, 0, 0, 0, 0) }

// encodePtr encodes v in enc as read at address at (pcrel only).
func encodePtr(enc byte, v, at uint64) []byte {
	if enc&0x70 == pePCRel {
		v -= at
	}
	switch enc & 0x0f {
	case peAbsptr, peUdata8, peSdata8:
		return binary.LittleEndian.AppendUint64(nil, v)
	case peUdata2, peSdata2:
		return binary.LittleEndian.AppendUint16(nil, uint16(v))
	case peUdata4, peSdata4:
		return binary.LittleEndian.AppendUint32(nil, uint32(v))
	case peULEB128:
		return uleb(v)
	case peSLEB128:
		return sleb(int64(v))
	}
	panic("encoding")
}

// x86 CIE initial instructions: CFA = rsp+8, RA at CFA-8.
var x86Initial = []byte{cfaDefCFA, 7, 8, cfaOffset | 16, 1}

// arm64: CFA = sp+0, x30 untouched.
var armInitial = []byte{cfaDefCFA, 31, 0}

// textTable is a builder over a synthetic text segment [0x1000, 0x100000).
func textTable(a Arch) *builder {
	return &builder{t: &Table{Arch: a, Base: 0x1000, Segments: []Segment{{Vaddr: 0x1000, Memsz: 0xff000}}},
		opts: Options{Limits: Limits{MaxSection: 1 << 20, MaxFDEs: 1 << 10, MaxRows: 1 << 16}}}
}

func buildEh(t *testing.T, a Arch, sec []byte, addr uint64) *Table {
	t.Helper()
	cfi, err := ParseEhFrame(sec, addr, 0)
	if err != nil {
		t.Fatalf("ParseEhFrame: %v", err)
	}
	b := textTable(a)
	if err := b.assemble(cfi, nil); err != nil {
		t.Fatalf("assemble: %v", err)
	}
	return b.t
}

func x86Rule(cfa CFAType, off int64) Rule {
	return Rule{CFA: cfa, CFAOffset: off, RA: RAAtCFA, RAOffset: -8}
}

func TestPointerEncodings(t *testing.T) {
	encs := []byte{peAbsptr, peUdata2, peUdata4, peUdata8, peSdata2, peSdata4, peSdata8, peULEB128, peSLEB128}
	for _, base := range []byte{0, pePCRel} {
		for _, e := range encs {
			enc := base | e
			a := &ehAsm{addr: 0x2000}
			cie := a.cie(1, "zR", 1, -8, 16, []byte{enc}, x86Initial)
			start := uint64(0x3000)
			if e == peUdata2 || e == peSdata2 {
				start = 0x2100 // fits 16 bits, and above the field for unsigned pc-relative
			}
			a.fde(cie, enc, start, 0x40, []byte{}, nil)
			a.terminate()
			cfi, err := ParseEhFrame(a.buf, a.addr, 0)
			if err != nil {
				t.Fatalf("enc %#x: %v", enc, err)
			}
			if len(cfi.FDEs) != 1 || cfi.FDEs[0].Start != start || cfi.FDEs[0].End != start+0x40 {
				t.Errorf("enc %#x: FDEs %+v, want one at %#x..%#x", enc, cfi.FDEs, start, start+0x40)
			}
		}
	}
}

func TestEhFrameHdr(t *testing.T) {
	// datarel|sdata4 table, pcrel|sdata4 eh_frame pointer, udata4 count: what ld writes.
	const hdrAddr = 0x5000
	b := []byte{1, pePCRel | peSdata4, peUdata4, peDataRel | peSdata4}
	b = binary.LittleEndian.AppendUint32(b, uint32(0x6000-(hdrAddr+4)))
	b = binary.LittleEndian.AppendUint32(b, 2)
	for _, e := range [][2]uint64{{0x1000, 0x6018}, {0x1100, 0x6040}} {
		b = binary.LittleEndian.AppendUint32(b, uint32(e[0]-hdrAddr))
		b = binary.LittleEndian.AppendUint32(b, uint32(e[1]-hdrAddr))
	}
	h, err := ParseEhFrameHdr(b, hdrAddr, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.EhFrame != 0x6000 || len(h.Table) != 2 || h.Table[1] != (HdrEntry{0x1100, 0x6040}) || h.Table[0] != (HdrEntry{0x1000, 0x6018}) {
		t.Errorf("got %+v", h)
	}
	// A count larger than the data can hold is refused, not allocated.
	bad := append([]byte(nil), b[:8]...)
	bad = binary.LittleEndian.AppendUint32(bad, 1<<30)
	if _, err := ParseEhFrameHdr(bad, hdrAddr, 0); !errors.Is(err, ErrMalformed) {
		t.Errorf("huge count: %v, want ErrMalformed", err)
	}
	if _, err := ParseEhFrameHdr([]byte{2, 0x1b, 3, 0x3b, 0, 0, 0, 0}, hdrAddr, 0); !errors.Is(err, ErrMalformed) {
		t.Errorf("version 2: %v, want ErrMalformed", err)
	}
}

func TestAugmentations(t *testing.T) {
	a := &ehAsm{addr: 0x8000}
	// zPLR: personality pcrel|sdata4|indirect, LSDA pcrel|sdata4, FDE pcrel|sdata4.
	plr := a.cie(1, "zPLR", 1, -8, 16, cat([]byte{0x9b}, []byte{1, 2, 3, 4}, []byte{0x1b, 0x1b}), x86Initial)
	// The FDE's augmentation data is its LSDA pointer; it must be stepped over.
	a.fde(plr, 0x1b, 0x1000, 0x10, []byte{9, 9, 9, 9}, []byte{cfaAdvanceLoc | 1, cfaDefCFAOffset, 16})
	sig := a.cie(1, "zRS", 1, -8, 16, []byte{0x1b}, x86Initial)
	a.fde(sig, 0x1b, 0x1100, 0x10, []byte{}, cat([]byte{cfaDefCFAExpression, 4, opBreg0 + 7}, sleb(160), []byte{0x06}))
	// Version 3 CIE: ULEB return-address column.
	v3 := a.cie(3, "zR", 1, -8, 16, []byte{0x1b}, x86Initial)
	a.fde(v3, 0x1b, 0x1200, 0x10, []byte{}, nil)
	// Unknown letter after 'z': the rest of the string is ignored, as libgcc does.
	zx := a.cie(1, "zRX", 1, -8, 16, []byte{0x1b, 0xee}, x86Initial)
	a.fde(zx, 0x1b, 0x1300, 0x10, []byte{}, nil)
	// An unknown augmentation without 'z' makes the CIE and its FDEs unusable.
	bad := a.cie(1, "X", 1, -8, 16, nil, x86Initial)
	a.fde(bad, peAbsptr, 0x1400, 0x10, nil, nil)
	a.terminate()

	cfi, err := ParseEhFrame(a.buf, a.addr, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfi.FDEs) != 4 || cfi.Skipped != 2 {
		t.Fatalf("%d FDEs, %d skipped; want 4 and 2 (the bad CIE and its FDE)", len(cfi.FDEs), cfi.Skipped)
	}
	tab := buildEh(t, ArchAMD64, a.buf, a.addr)
	for _, c := range []struct {
		pc   uint64
		want Rule
	}{
		{0x1000, x86Rule(CFASP, 8)},
		{0x1001, x86Rule(CFASP, 16)},
		{0x1100, Rule{CFA: CFAUnsupported, Signal: true}},
		{0x1200, x86Rule(CFASP, 8)},
		{0x1300, x86Rule(CFASP, 8)},
		{0x1400, Rule{CFA: CFAGap}},
	} {
		if got := tab.Lookup(c.pc); got != c.want {
			t.Errorf("%#x: %+v, want %+v", c.pc, got, c.want)
		}
	}
	if cfi.FDEs[1].CIE.Signal != true || cfi.FDEs[0].CIE.Signal {
		t.Errorf("signal flags: %v %v", cfi.FDEs[0].CIE.Signal, cfi.FDEs[1].CIE.Signal)
	}
}

func TestOldEhAugmentation(t *testing.T) {
	a := &ehAsm{addr: 0x8000}
	body := cat([]byte{1}, []byte("eh\x00"), make([]byte, 8), uleb(1), sleb(-8), []byte{16}, x86Initial)
	cie := a.entry([]byte{0, 0, 0, 0}, body)
	a.fde(cie, peAbsptr, 0x1000, 0x20, nil, []byte{cfaAdvanceLoc | 4, cfaDefCFAOffset, 24})
	a.terminate()
	tab := buildEh(t, ArchAMD64, a.buf, a.addr)
	if got := tab.Lookup(0x1004); got != x86Rule(CFASP, 24) {
		t.Errorf("got %+v", got)
	}
}

// TestCFAOpcodes runs one program through every opcode the interpreter
// knows and checks the rule after each step.
func TestCFAOpcodes(t *testing.T) {
	const s = 0x2000
	prog := cat(
		[]byte{cfaAdvanceLoc | 1, cfaDefCFAOffset, 16, cfaOffset | 6, 2},                        // 0x2001 rsp+16, rbp at -16
		[]byte{cfaAdvanceLoc1, 3, cfaDefCFARegister, 6},                                         // 0x2004 rbp+16
		[]byte{cfaAdvanceLoc2, 0x00, 0x01, cfaRememberState, cfaDefCFA, 7, 8, cfaRestore | 6},   // 0x2104 rsp+8, rbp unchanged
		[]byte{cfaAdvanceLoc4, 1, 0, 0, 0, cfaRestoreState},                                     // 0x2105 back to rbp+16, rbp at -16
		[]byte{cfaAdvanceLoc | 1, cfaGNUArgsSize, 16, cfaNop, cfaOffsetExtendedSF, 6}, sleb(-3), // 0x2106 rbp at +24
		[]byte{cfaSetLoc}, binary.LittleEndian.AppendUint64(nil, s+0x120), []byte{cfaSameValue, 6}, // 0x2120 rbp same
		[]byte{cfaAdvanceLoc | 1, cfaDefCFASF, 7}, sleb(-4), []byte{cfaValOffset, 6, 1}, // 0x2121 rsp+32, rbp unknown
		[]byte{cfaAdvanceLoc | 1, cfaUndefined, 6, cfaDefCFAOffsetSF}, sleb(-5), // 0x2122 rsp+40, rbp unknown
		[]byte{cfaAdvanceLoc | 1, cfaRegister, 6, 3, cfaRestoreExtended, 6, cfaOffsetExtended, 6, 3},                                                          // 0x2123 rbp at -24
		[]byte{cfaAdvanceLoc | 1, cfaExpression, 6, 2, opBreg0 + 6, 0},                                                                                        // 0x2124 rbp unknown
		[]byte{cfaAdvanceLoc | 1, cfaDefCFAExpression, 11, opBreg0 + 7, 8, opBreg0 + 16, 0, opLit0 + 15, opAnd, opLit0 + 11, opGe, opLit0 + 3, opShl, opPlus}, // 0x2125 PLT
		[]byte{cfaAdvanceLoc | 1, cfaDefCFAExpression, 3, opBreg0 + 6, 0x78, 0x06},                                                                            // 0x2126 breg6 -8; deref: unsupported
		[]byte{cfaAdvanceLoc | 1, cfaDefCFA, 7, 8, cfaSameValue, 6, cfaRegister, 16, 5},                                                                       // 0x2127 RA in rdi: unsupported
		[]byte{cfaAdvanceLoc | 1, cfaOffset | 16, 1, cfaDefCFA, 9, 0},                                                                                         // 0x2128 CFA in r9: unsupported
		[]byte{cfaAdvanceLoc | 1, cfaDefCFA, 7, 12},                                                                                                           // 0x2129 rsp+12: extended
		[]byte{cfaAdvanceLoc | 1, cfaDefCFA, 7}, uleb(600000), []byte{cfaOffsetExtended, 6}, uleb(2000),                                                       // 0x212a big: extended
		[]byte{cfaAdvanceLoc | 1, cfaDefCFA, 7, 8, cfaValOffsetSF, 6}, sleb(1), []byte{cfaGNUNegOffsetExt, 6, 2}, // 0x212b rbp at +16
		[]byte{cfaAdvanceLoc | 1, cfaMIPSAdvanceLoc8}, binary.LittleEndian.AppendUint64(nil, 1), []byte{cfaUndefined, 16}, // 0x212d end
	)
	a := &ehAsm{addr: 0x9000}
	cie := a.cie(1, "zR", 1, -8, 16, []byte{peUdata8}, x86Initial)
	a.fde(cie, peUdata8, s, 0x200, []byte{}, prog)
	a.terminate()
	tab := buildEh(t, ArchAMD64, a.buf, a.addr)
	fpAt := func(r Rule, off int64) Rule { r.FP, r.FPOffset = FPAtCFA, off; return r }
	fpUnknown := func(r Rule) Rule { r.FP = FPUnknown; return r }
	unsup := Rule{CFA: CFAUnsupported}
	for _, c := range []struct {
		pc   uint64
		want Rule
	}{
		{s, x86Rule(CFASP, 8)},
		{s + 1, fpAt(x86Rule(CFASP, 16), -16)},
		{s + 3, fpAt(x86Rule(CFASP, 16), -16)},
		{s + 4, fpAt(x86Rule(CFAFP, 16), -16)},
		{s + 0x104, x86Rule(CFASP, 8)},
		{s + 0x105, fpAt(x86Rule(CFAFP, 16), -16)},
		{s + 0x106, fpAt(x86Rule(CFAFP, 16), 24)},
		{s + 0x11f, fpAt(x86Rule(CFAFP, 16), 24)},
		{s + 0x120, x86Rule(CFAFP, 16)},
		{s + 0x121, fpUnknown(x86Rule(CFASP, 32))},
		{s + 0x122, fpUnknown(x86Rule(CFASP, 40))},
		{s + 0x123, fpAt(x86Rule(CFASP, 40), -24)},
		{s + 0x124, fpUnknown(x86Rule(CFASP, 40))},
		{s + 0x125, Rule{CFA: CFAPLT, CFAOffset: 8, PLTThreshold: 11, RA: RAAtCFA, RAOffset: -8}},
		{s + 0x126, unsup},
		{s + 0x127, unsup},
		{s + 0x128, unsup},
		{s + 0x129, x86Rule(CFASP, 12)},
		{s + 0x12a, fpAt(x86Rule(CFASP, 600000), -16000)},
		{s + 0x12b, fpAt(x86Rule(CFASP, 8), 16)},
		{s + 0x12c, fpAt(x86Rule(CFASP, 8), 16)},
		{s + 0x12d, Rule{CFA: CFAEnd}},
		{s + 0x1ff, Rule{CFA: CFAEnd}},
		{s + 0x200, Rule{CFA: CFAGap}},
	} {
		if got := tab.Lookup(c.pc); got != c.want {
			t.Errorf("%#x: %+v, want %+v", c.pc, got, c.want)
		}
	}
	if n := tab.Stats.RowsByType[CFAExtended]; n != 2 || len(tab.Extended) != 2 {
		t.Errorf("%d extended rows, %d extended rules; want 2 and 2", n, len(tab.Extended))
	}
	// 0x2129 and 0x212a: the rule bytes of Table.Extended decode to the same.
	raw := tab.ExtendedBytes()
	if len(raw) != 2*ExtSize || int32(binary.LittleEndian.Uint32(raw[ExtSize+ExtOffCFA:])) != 600000 ||
		int32(binary.LittleEndian.Uint32(raw[ExtSize+ExtOffFP:])) != -16000 {
		t.Errorf("extended bytes %x", raw)
	}
}

func TestCFAProgramErrors(t *testing.T) {
	cases := []struct {
		name string
		prog []byte
		at   uint64 // first unsupported address
	}{
		{"restore_state with nothing remembered", []byte{cfaAdvanceLoc | 2, cfaRestoreState}, 2},
		{"unknown opcode", []byte{cfaAdvanceLoc | 3, 0x3f}, 3},
		{"truncated operand", []byte{cfaAdvanceLoc | 4, cfaDefCFA, 7}, 4},
		{"set_loc backwards", cat([]byte{cfaAdvanceLoc | 5, cfaSetLoc}, binary.LittleEndian.AppendUint64(nil, 0x1000)), 5},
		{"remember_state too deep", cat([]byte{cfaAdvanceLoc | 6}, func() []byte {
			b := make([]byte, maxStateStack+1)
			for i := range b {
				b[i] = cfaRememberState
			}
			return b
		}()), 6},
	}
	for _, c := range cases {
		a := &ehAsm{addr: 0x9000}
		cie := a.cie(1, "zR", 1, -8, 16, []byte{peUdata8}, x86Initial)
		a.fde(cie, peUdata8, 0x1000, 0x10, []byte{}, c.prog)
		a.terminate()
		tab := buildEh(t, ArchAMD64, a.buf, a.addr)
		if got := tab.Lookup(0x1000 + c.at - 1); got != x86Rule(CFASP, 8) {
			t.Errorf("%s: before the error: %+v", c.name, got)
		}
		if got := tab.Lookup(0x1000 + c.at); got.CFA != CFAUnsupported {
			t.Errorf("%s: from the error on: %+v, want unsupported", c.name, got)
		}
		if got := tab.Lookup(0x1010); got.CFA != CFAGap {
			t.Errorf("%s: after the FDE: %+v, want gap", c.name, got)
		}
		if tab.Stats.BadPrograms != 1 || len(tab.Stats.Problems) != 1 {
			t.Errorf("%s: stats %+v", c.name, tab.Stats)
		}
	}
	// A location change in a CIE is meaningless: its FDEs are dropped.
	a := &ehAsm{addr: 0x9000}
	cie := a.cie(1, "zR", 1, -8, 16, []byte{peUdata8}, cat(x86Initial, []byte{cfaAdvanceLoc | 1}))
	a.fde(cie, peUdata8, 0x1000, 0x10, []byte{}, nil)
	a.terminate()
	tab := buildEh(t, ArchAMD64, a.buf, a.addr)
	if got := tab.Lookup(0x1000); got.CFA != CFAUnsupported {
		t.Errorf("CIE with advance_loc: %+v, want unsupported", got)
	}
}

// TestDebugFrameFormats: versions 1, 3 and 4, 32- and 64-bit, and a CIE
// after the FDE that uses it (legal in .debug_frame).
func TestDebugFrameFormats(t *testing.T) {
	for _, c := range []struct {
		version byte
		d64     bool
	}{{1, false}, {3, false}, {4, false}, {4, true}} {
		a := &ehAsm{debug: true, d64: c.d64}
		// The FDE first, pointing forward at the CIE.
		fdeOff := len(a.buf)
		a.fde(0, peUdata8, 0x4000, 0x20, nil, []byte{cfaAdvanceLoc | 1, cfaDefCFAOffset, 16})
		cieOff := a.cie(c.version, "", 1, -8, 16, nil, x86Initial)
		// Patch the FDE's CIE pointer now that the CIE's offset is known.
		if c.d64 {
			binary.LittleEndian.PutUint64(a.buf[fdeOff+12:], cieOff)
		} else {
			binary.LittleEndian.PutUint32(a.buf[fdeOff+4:], uint32(cieOff))
		}
		a.buf = append(a.buf, 0, 0, 0, 0) // zero padding is skipped, not an end
		a.fde(cieOff, peUdata8, 0x4100, 0x10, nil, nil)
		cfi, err := ParseDebugFrame(a.buf, 0)
		if err != nil {
			t.Fatalf("v%d d64=%v: %v", c.version, c.d64, err)
		}
		if len(cfi.FDEs) != 2 {
			t.Fatalf("v%d d64=%v: %d FDEs", c.version, c.d64, len(cfi.FDEs))
		}
		b := textTable(ArchAMD64)
		if err := b.assemble(nil, cfi); err != nil {
			t.Fatal(err)
		}
		if got := b.t.Lookup(0x4001); got != x86Rule(CFASP, 16) || b.t.Stats.DebugFrameFDEs != 2 {
			t.Errorf("v%d d64=%v: %+v, stats %+v", c.version, c.d64, got, b.t.Stats)
		}
	}
}

// TestSpans: merging of identical neighbours, padding shorter than MinGap,
// gap rows, FDEs outside the text, overlaps, .debug_frame only where
// .eh_frame has nothing, and synthesized PLT rules.
func TestSpans(t *testing.T) {
	a := &ehAsm{addr: 0x9000}
	cie := a.cie(1, "zR", 1, -8, 16, []byte{peUdata8}, x86Initial)
	push := []byte{cfaAdvanceLoc | 1, cfaDefCFAOffset, 16}
	a.fde(cie, peUdata8, 0x1000, 0x10, []byte{}, nil)   // rsp+8
	a.fde(cie, peUdata8, 0x1010, 0x10, []byte{}, push)  // rsp+8 merges; rsp+16 at 0x1011
	a.fde(cie, peUdata8, 0x1028, 0x08, []byte{}, nil)   // 8 bytes of padding before: an end, not a gap
	a.fde(cie, peUdata8, 0x1100, 0x40, []byte{}, push)  // a gap from 0x1030
	a.fde(cie, peUdata8, 0x1120, 0x10, []byte{}, nil)   // overlaps the previous: cuts it
	a.fde(cie, peUdata8, 0x200000, 0x10, []byte{}, nil) // outside the text segment
	a.fde(cie, peUdata8, 0x1200, 0x00, []byte{}, nil)   // empty
	a.terminate()
	eh, err := ParseEhFrame(a.buf, a.addr, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := &ehAsm{debug: true}
	dcie := d.cie(1, "", 1, -8, 16, nil, x86Initial)
	d.fde(dcie, peUdata8, 0x1100, 0x10, nil, push) // covered by .eh_frame: dropped
	d.fde(dcie, peUdata8, 0x1300, 0x10, nil, push) // new
	dbg, err := ParseDebugFrame(d.buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := textTable(ArchAMD64)
	b.plts = []pltSection{{".plt.sec", 0x1400, 0x40}, {".plt.got", 0x1100, 0x10}, {".plt", 0x1500, 0x40}}
	if err := b.assemble(eh, dbg); err != nil {
		t.Fatal(err)
	}
	tab := b.t
	sp8, sp16, gap, end := x86Rule(CFASP, 8), x86Rule(CFASP, 16), Rule{CFA: CFAGap}, Rule{CFA: CFAEnd}
	for _, c := range []struct {
		pc   uint64
		want Rule
	}{
		{0xfff, gap}, {0x1000, sp8}, {0x1010, sp8}, {0x1011, sp16}, {0x101f, sp16}, {0x1020, end}, {0x1027, end},
		{0x1028, sp8}, {0x102f, sp8}, {0x1030, gap}, {0x1101, sp16}, {0x1120, sp8}, {0x1130, gap},
		{0x1301, sp16}, {0x1310, gap}, {0x1400, sp8}, {0x143f, sp8}, {0x1440, gap}, {0x1500, gap},
	} {
		if got := tab.Lookup(c.pc); got != c.want {
			t.Errorf("%#x: %+v, want %+v", c.pc, got, c.want)
		}
	}
	want := []uint32{0x1000, 0x1011, 0x1020, 0x1028, 0x1030, 0x1100, 0x1101, 0x1120, 0x1130, 0x1300, 0x1301, 0x1310, 0x1400, 0x1440}
	var got []uint32
	for _, r := range tab.Rows {
		got = append(got, r.PC+uint32(tab.Base))
	}
	if len(got) != len(want) {
		t.Fatalf("rows at %#x, want %#x", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("rows at %#x, want %#x", got, want)
		}
	}
	s := tab.Stats
	if s.EhFrameFDEs != 5 || s.OutsideText != 1 || s.Overlapping != 1 || s.DebugFrameFDEs != 1 || s.DebugFrameDup != 1 || s.SyntheticPLT != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestRowEncoding(t *testing.T) {
	arm := func(cfa CFAType, off int64, fp FPRule, fpOff int64, ra RARule, raOff int64) Rule {
		return Rule{CFA: cfa, CFAOffset: off, FP: fp, FPOffset: fpOff, RA: ra, RAOffset: raOff}
	}
	cases := []struct {
		a        Arch
		r        Rule
		extended bool
		bad      bool
	}{
		{ArchAMD64, x86Rule(CFASP, 8), false, false},
		{ArchAMD64, Rule{CFA: CFAFP, CFAOffset: 16, FP: FPAtCFA, FPOffset: -16, RA: RAAtCFA, RAOffset: -8}, false, false},
		{ArchAMD64, Rule{CFA: CFASP, CFAOffset: 524280, FP: FPAtCFA, FPOffset: -1024, RA: RAAtCFA, RAOffset: -8}, false, false},
		{ArchAMD64, Rule{CFA: CFASP, CFAOffset: 524288, RA: RAAtCFA, RAOffset: -8}, true, false},
		{ArchAMD64, Rule{CFA: CFASP, CFAOffset: 8, FP: FPAtCFA, FPOffset: 1024, RA: RAAtCFA, RAOffset: -8}, true, false},
		{ArchAMD64, Rule{CFA: CFASP, CFAOffset: 8, FP: FPUnknown, RA: RAAtCFA, RAOffset: -8, Signal: true}, false, false},
		{ArchAMD64, Rule{CFA: CFAPLT, CFAOffset: 8, PLTThreshold: 10, RA: RAAtCFA, RAOffset: -8}, false, false},
		{ArchAMD64, Rule{CFA: CFASP, CFAOffset: 8, RA: RAAtCFA, RAOffset: -16}, false, true}, // x86 RA elsewhere
		{ArchAMD64, Rule{CFA: CFASP, CFAOffset: 8, RA: RAInLR}, false, true},
		{ArchAMD64, Rule{CFA: CFAEnd}, false, false},
		{ArchAMD64, Rule{CFA: CFAGap}, false, false},
		{ArchARM64, arm(CFASP, 0, FPUnchanged, 0, RAInLR, 0), false, false},
		{ArchARM64, arm(CFASP, 32, FPAtCFA, -32, RAAtCFA, -24), false, false}, // stp x29, x30, [sp, -32]!
		{ArchARM64, arm(CFAFP, 32, FPAtCFA, -32, RAAtCFA, -24), false, false},
		{ArchARM64, arm(CFASP, 16, FPUnchanged, 0, RAAtCFA, -16), false, false}, // str x30, [sp, -16]!
		{ArchARM64, arm(CFASP, 48, FPUnknown, 0, RAAtCFA, -40), false, false},
		{ArchARM64, arm(CFASP, 1088, FPAtCFA, -1088, RAAtCFA, -1080), true, false}, // frame record at the bottom
		{ArchARM64, arm(CFASP, 64, FPAtCFA, -16, RAAtCFA, -48), true, false},       // saved apart
		{ArchARM64, arm(CFASP, 16, FPAtCFA, -16, RAInLR, 0), false, false},
		{ArchARM64, arm(CFAPLT, 8, FPUnchanged, 0, RAInLR, 0), false, true},
	}
	for _, c := range cases {
		row, ext, ok := encodeRule(c.r, c.a)
		if ok == c.bad || (ext != nil) != c.extended {
			t.Errorf("%v %+v: ok=%v ext=%v", c.a, c.r, ok, ext != nil)
			continue
		}
		if !ok {
			if row.CFAType() != CFAUnsupported {
				t.Errorf("%v %+v: inexpressible rule encoded as %v", c.a, c.r, row.CFAType())
			}
			continue
		}
		var b [RowSize]byte
		row.Put(b[:])
		back := ReadRow(b[:])
		var got Rule
		if ext != nil {
			var eb [ExtSize]byte
			ext.Put(eb[:])
			got = (&Table{Arch: c.a, Extended: []ExtRule{*ext}}).RowRule(Row{Info: back.Info, CFA: 0})
			if back.CFAType() != CFAExtended {
				t.Errorf("%v %+v: extended rule in a %v row", c.a, c.r, back.CFAType())
			}
		} else {
			got = back.Rule(c.a)
		}
		if got != c.r {
			t.Errorf("%v: %+v round-trips to %+v (row %+v)", c.a, c.r, got, back)
		}
	}
}
