package unwind

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Arch is the instruction set a table describes.
type Arch uint8

const (
	ArchAMD64 Arch = 1
	ArchARM64 Arch = 2
)

func (a Arch) String() string {
	switch a {
	case ArchAMD64:
		return "x86-64"
	case ArchARM64:
		return "arm64"
	}
	return fmt.Sprintf("arch(%d)", uint8(a))
}

// The row ABI: the BPF walker (phase 2) reads tables in exactly this
// layout, so these constants are the C header's. A row is 8 bytes,
// little-endian, and covers [pc, next row's pc):
//
//	offset size field
//	0      4    pc      u32: ELF virtual address - Table.Base
//	4      2    cfa     u16: CFA offset / 8 (CFAPLT: the fixed part / 8)
//	6      1    info    bits 0-2 CFA type, bit 3 signal frame,
//	                    bits 4-5 FP rule, bits 6-7 RA rule
//	7      1    reg     i8: FP (or RA, see RowRA*) offset from the CFA / 8;
//	                    CFAPLT: the threshold T
//
// Offsets are in 8-byte units because every save slot and CFA offset
// compilers emit for these ABIs is a multiple of 8. A rule whose offsets
// do not fit (a frame over 512 KiB, an arm64 frame record saved more than
// 1 KiB below the CFA, x29 and x30 saved apart, an odd offset) is a
// CFAExtended row whose cfa field indexes Table.Extended, 16 bytes each:
//
//	offset size field
//	0      4    cfa_off i32: CFA offset in bytes
//	4      4    fp_off  i32: FP save slot, bytes from the CFA (FP rule 1)
//	8      4    ra_off  i32: RA save slot, bytes from the CFA (RA rule 1)
//	12     1    info    as a row's, with the real CFA type; RA rule 0 or 1
//	13     1    plt     CFAPLT threshold
//	14     2    zero
const (
	RowSize = 8

	RowOffPC   = 0
	RowOffCFA  = 4
	RowOffInfo = 6
	RowOffReg  = 7

	RowCFATypeMask = 0x07
	RowSignalBit   = 0x08
	RowFPShift     = 4
	RowFPMask      = 0x30
	RowRAShift     = 6
	RowRAMask      = 0xc0

	// RA rules in bits 6-7.
	RowRAArch    = 0 // x86-64: at CFA-8; arm64: still in x30 (LR)
	RowRAAtCFA   = 1 // at CFA + 8*reg (the FP is then unchanged or unknown)
	RowRAAfterFP = 2 // at CFA + 8*reg + 8, FP at CFA + 8*reg (arm64 frame record)

	// OffsetUnit is the scale of the cfa and reg fields.
	OffsetUnit = 8

	ExtSize     = 16
	ExtOffCFA   = 0
	ExtOffFP    = 4
	ExtOffRA    = 8
	ExtOffInfo  = 12
	ExtOffPLT   = 13
	MaxExtended = 1 << 16 // the cfa field's range
)

// CFAType says how to compute the canonical frame address (the caller's
// stack pointer at the call) at a PC. The values are the row's bits 0-2.
type CFAType uint8

const (
	// CFAGap: no FDE covers the PC. The walker falls back to the frame
	// pointer: CFA = FP+16, RA at FP+8, caller's FP at FP.
	CFAGap CFAType = 0
	// CFASP: CFA = SP + offset.
	CFASP CFAType = 1
	// CFAFP: CFA = FP (rbp / x29) + offset.
	CFAFP CFAType = 2
	// CFAPLT: CFA = SP + offset + ((PC & 15) >= T ? 8 : 0), where PC is
	// the frame's actual PC (x86-64 lazy-binding .plt).
	CFAPLT CFAType = 3
	// CFAEnd: the return address is undefined (_start, a thread's first
	// frame): the stack ends here, cleanly.
	CFAEnd CFAType = 4
	// CFAUnsupported: there is CFI, but its rule cannot be expressed in a
	// row (another base register, a general expression, a return address
	// kept in a register). The walk stops.
	CFAUnsupported CFAType = 5
	// CFAExtended: the rule is Table.Extended[cfa] (never in an ExtRule).
	CFAExtended CFAType = 6
)

func (t CFAType) String() string {
	switch t {
	case CFAGap:
		return "gap"
	case CFASP:
		return "sp"
	case CFAFP:
		return "fp"
	case CFAPLT:
		return "plt"
	case CFAEnd:
		return "end"
	case CFAUnsupported:
		return "unsupported"
	case CFAExtended:
		return "extended"
	}
	return fmt.Sprintf("cfa(%d)", uint8(t))
}

// FPRule says where the caller's frame pointer (rbp / x29) is. The values
// are the row's bits 4-5.
type FPRule uint8

const (
	FPUnchanged FPRule = 0 // still in the register
	FPAtCFA     FPRule = 1 // saved at CFA + FPOffset
	FPUnknown   FPRule = 2 // lost (undefined, in another register, an expression)
)

// RARule says where the return address is.
type RARule uint8

const (
	RAAtCFA RARule = 0 // saved at CFA + RAOffset (x86-64: always CFA-8)
	RAInLR  RARule = 1 // arm64: still in x30 (leaf code, prologues, epilogues)
)

// Rule is a row decoded: how to find the caller's registers at a PC.
type Rule struct {
	CFA          CFAType
	CFAOffset    int64 // bytes
	PLTThreshold uint8 // CFAPLT only
	Signal       bool  // a signal trampoline: registers come from the sigcontext
	FP           FPRule
	FPOffset     int64 // bytes from the CFA, FPAtCFA only
	RA           RARule
	RAOffset     int64 // bytes from the CFA, RAAtCFA only
}

// Row is one encoded table row (see the layout above).
type Row struct {
	PC   uint32
	CFA  uint16
	Info uint8
	Reg  int8
}

// CFAType returns the row's CFA type.
func (r Row) CFAType() CFAType { return CFAType(r.Info & RowCFATypeMask) }

// Put writes r in the row ABI into b[:RowSize].
func (r Row) Put(b []byte) {
	binary.LittleEndian.PutUint32(b[RowOffPC:], r.PC)
	binary.LittleEndian.PutUint16(b[RowOffCFA:], r.CFA)
	b[RowOffInfo] = r.Info
	b[RowOffReg] = byte(r.Reg)
}

// ReadRow decodes one row from b[:RowSize].
func ReadRow(b []byte) Row {
	return Row{
		PC:   binary.LittleEndian.Uint32(b[RowOffPC:]),
		CFA:  binary.LittleEndian.Uint16(b[RowOffCFA:]),
		Info: b[RowOffInfo],
		Reg:  int8(b[RowOffReg]),
	}
}

func sameRule(a, b Row) bool { return a.CFA == b.CFA && a.Info == b.Info && a.Reg == b.Reg }

// ExtRule is one Table.Extended entry (see the layout above).
type ExtRule struct {
	CFAOff, FPOff, RAOff int32
	Info                 uint8
	PLT                  uint8
}

// Put writes e in the extended-rule ABI into b[:ExtSize].
func (e ExtRule) Put(b []byte) {
	binary.LittleEndian.PutUint32(b[ExtOffCFA:], uint32(e.CFAOff))
	binary.LittleEndian.PutUint32(b[ExtOffFP:], uint32(e.FPOff))
	binary.LittleEndian.PutUint32(b[ExtOffRA:], uint32(e.RAOff))
	b[ExtOffInfo] = e.Info
	b[ExtOffPLT] = e.PLT
	b[ExtOffPLT+1], b[ExtOffPLT+2] = 0, 0
}

// Rule decodes e for architecture a.
func (e ExtRule) Rule(a Arch) Rule {
	ru := Rule{CFA: CFAType(e.Info & RowCFATypeMask), Signal: e.Info&RowSignalBit != 0}
	switch ru.CFA {
	case CFASP, CFAFP, CFAPLT:
	default:
		return Rule{CFA: CFAUnsupported, Signal: ru.Signal}
	}
	ru.CFAOffset = int64(e.CFAOff)
	if ru.CFA == CFAPLT {
		ru.PLTThreshold = e.PLT
	}
	ru.FP = FPRule((e.Info & RowFPMask) >> RowFPShift)
	if ru.FP == FPAtCFA {
		ru.FPOffset = int64(e.FPOff)
	}
	switch (e.Info & RowRAMask) >> RowRAShift {
	case RowRAAtCFA:
		ru.RA, ru.RAOffset = RAAtCFA, int64(e.RAOff)
	default:
		ru.RA, ru.RAOffset = archRA(a)
	}
	return ru
}

// archRA is the RA rule a row's RA bits 0 stand for.
func archRA(a Arch) (RARule, int64) {
	if a == ArchARM64 {
		return RAInLR, 0
	}
	return RAAtCFA, -8
}

// Rule decodes r for architecture a. A CFAExtended row decodes as
// CFAUnsupported here: Table.Lookup resolves it through Table.Extended.
func (r Row) Rule(a Arch) Rule {
	ru := Rule{CFA: r.CFAType(), Signal: r.Info&RowSignalBit != 0}
	switch ru.CFA {
	case CFASP, CFAFP, CFAPLT:
	case CFAGap, CFAEnd, CFAUnsupported:
		return ru
	default:
		return Rule{CFA: CFAUnsupported, Signal: ru.Signal}
	}
	ru.CFAOffset = int64(r.CFA) * OffsetUnit
	if ru.CFA == CFAPLT {
		ru.PLTThreshold = uint8(r.Reg)
		ru.RA, ru.RAOffset = archRA(a)
		return ru
	}
	reg := int64(r.Reg) * OffsetUnit
	fp := FPRule((r.Info & RowFPMask) >> RowFPShift)
	switch (r.Info & RowRAMask) >> RowRAShift {
	case RowRAArch:
		ru.RA, ru.RAOffset = archRA(a)
		ru.FP = fp
		if fp == FPAtCFA {
			ru.FPOffset = reg
		}
	case RowRAAtCFA:
		ru.RA, ru.RAOffset = RAAtCFA, reg
		ru.FP = fp // never FPAtCFA: the reg byte holds the RA
	case RowRAAfterFP:
		ru.FP, ru.FPOffset = FPAtCFA, reg
		ru.RA, ru.RAOffset = RAAtCFA, reg+8
	default:
		return Rule{CFA: CFAUnsupported, Signal: ru.Signal}
	}
	return ru
}

// encodeRule packs ru. ok is false if no row can express ru (the row
// returned is then CFAUnsupported); ext is non-nil if ru is expressible
// only as an extended rule, which the caller stores and indexes.
func encodeRule(ru Rule, a Arch) (row Row, ext *ExtRule, ok bool) {
	sig := uint8(0)
	if ru.Signal {
		sig = RowSignalBit
	}
	unsupported := Row{Info: uint8(CFAUnsupported) | sig}
	switch ru.CFA {
	case CFAGap, CFAEnd, CFAUnsupported:
		return Row{Info: uint8(ru.CFA) | sig}, nil, ru.CFA != CFAUnsupported
	case CFASP, CFAFP, CFAPLT:
	default:
		return unsupported, nil, false
	}
	// What the architecture allows at all.
	archRule, archOff := archRA(a)
	raDefault := ru.RA == archRule && (ru.RA == RAInLR || ru.RAOffset == archOff)
	switch {
	case raDefault:
	case a == ArchARM64 && ru.RA == RAAtCFA:
	default:
		return unsupported, nil, false
	}
	if ru.CFA == CFAPLT && (a != ArchAMD64 || ru.PLTThreshold > 15) {
		return unsupported, nil, false
	}
	if ru.FP > FPUnknown || ru.CFAOffset < math.MinInt32 || ru.CFAOffset > math.MaxInt32 ||
		ru.FP == FPAtCFA && (ru.FPOffset < math.MinInt32 || ru.FPOffset > math.MaxInt32) ||
		!raDefault && (ru.RAOffset < math.MinInt32 || ru.RAOffset > math.MaxInt32) {
		return unsupported, nil, false
	}

	row.Info = uint8(ru.CFA) | sig
	cfa, cfaOK := units(ru.CFAOffset, 0, 0xffff)
	fits := cfaOK
	row.CFA = uint16(cfa)
	switch {
	case ru.CFA == CFAPLT:
		row.Reg = int8(ru.PLTThreshold)
	case raDefault:
		row.Info |= uint8(ru.FP) << RowFPShift
		if ru.FP == FPAtCFA {
			u, ok := units(ru.FPOffset, -128, 127)
			fits = fits && ok
			row.Reg = int8(u)
		}
	case ru.FP == FPAtCFA && ru.RAOffset == ru.FPOffset+8:
		u, ok := units(ru.FPOffset, -128, 127)
		fits = fits && ok
		row.Info |= RowRAAfterFP << RowRAShift
		row.Reg = int8(u)
	case ru.FP != FPAtCFA:
		u, ok := units(ru.RAOffset, -128, 127)
		fits = fits && ok
		row.Info |= uint8(ru.FP)<<RowFPShift | RowRAAtCFA<<RowRAShift
		row.Reg = int8(u)
	default:
		fits = false // x29 and x30 saved apart: two offsets
	}
	if fits {
		return row, nil, true
	}
	e := &ExtRule{CFAOff: int32(ru.CFAOffset), Info: uint8(ru.CFA) | sig | uint8(ru.FP)<<RowFPShift}
	if ru.FP == FPAtCFA {
		e.FPOff = int32(ru.FPOffset)
	}
	if !raDefault {
		e.Info |= RowRAAtCFA << RowRAShift
		e.RAOff = int32(ru.RAOffset)
	}
	if ru.CFA == CFAPLT {
		e.PLT = ru.PLTThreshold
	}
	return Row{Info: uint8(CFAExtended) | sig}, e, true
}

// units converts a byte offset into OffsetUnit units within [lo, hi].
func units(off, lo, hi int64) (int64, bool) {
	if off%OffsetUnit != 0 {
		return 0, false
	}
	u := off / OffsetUnit
	return u, u >= lo && u <= hi
}
