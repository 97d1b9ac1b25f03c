package unwind

import (
	"bytes"
	"fmt"
)

// The CFA program interpreter. It tracks only what the table can use: the
// CFA, the frame-pointer register and the return-address column. Every
// other register's operands are decoded (to stay in step) and dropped.

type ruleKind uint8

const (
	ruleUnspec    ruleKind = iota // no rule: same value, by ABI convention
	ruleSame                      // DW_CFA_same_value
	ruleUndef                     // DW_CFA_undefined
	ruleOffset                    // saved at CFA + off
	ruleValOffset                 // value is CFA + off
	ruleRegister                  // in another register
	ruleExpr                      // saved at the address an expression yields
	ruleValExpr                   // value is an expression
)

type regRule struct {
	kind ruleKind
	off  int64
}

type cfaKind uint8

const (
	cfaUnset  cfaKind = iota // no DW_CFA_def_cfa yet
	cfaRegOff                // reg + off
	cfaPLT                   // the x86-64 PLT expression
	cfaExpr                  // any other expression
)

type cfaRule struct {
	kind cfaKind
	reg  uint64
	off  int64
	thr  uint8 // cfaPLT: (rip & 15) >= thr adds 8
}

type state struct {
	cfa    cfaRule
	fp, ra regRule
}

// maxStateStack bounds DW_CFA_remember_state nesting. Real code nests one
// or two deep; a crafted program must not grow a stack without bound.
const maxStateStack = 32

// archRegs are the DWARF register numbers the interpreter follows.
type archRegs struct {
	sp, fp, ra uint64
}

func regsOf(a Arch) archRegs {
	if a == ArchARM64 {
		return archRegs{sp: 31, fp: 29, ra: 30}
	}
	return archRegs{sp: 7, fp: 6, ra: 16}
}

// interp runs one CFA program. emit is called with each row's start
// address and state, in increasing address order; rows at or past end are
// not emitted, and the program stops there.
type interp struct {
	regs     archRegs
	cie      *CIE
	init     state // after the CIE's initial instructions
	st       state
	stack    []state // remembered states; reused across FDEs
	depth    int
	loc      uint64
	end      uint64
	bases    ptrBases
	progAddr uint64 // virtual address of the program's first byte
	debug    bool
	emit     func(pc uint64, st *state)
	inCIE    bool
}

var (
	errAdvanceInCIE = fmt.Errorf("location change in a CIE's initial instructions: %w", ErrMalformed)
	errStateStack   = fmt.Errorf("DW_CFA_remember_state nested deeper than %d: %w", maxStateStack, ErrMalformed)
	errStateEmpty   = fmt.Errorf("DW_CFA_restore_state with nothing remembered: %w", ErrMalformed)
	errBackwards    = fmt.Errorf("DW_CFA_set_loc moves backwards: %w", ErrMalformed)
	errPastEnd      = fmt.Errorf("stop: past the FDE's end") // not an error for the caller
)

// cieInit returns the state after c's initial instructions for arch a,
// computing it once per CIE.
func cieInit(c *CIE, a Arch) (*state, error) {
	if c.initArch == a && (c.init != nil || c.initErr != nil) {
		return c.init, c.initErr
	}
	c.initArch, c.init, c.initErr = a, nil, nil
	in := interp{regs: regsOf(a), cie: c, inCIE: true, end: ^uint64(0)}
	if c.RAReg != in.regs.ra {
		c.initErr = fmt.Errorf("CIE return-address column %d is not the ABI's %d: %w", c.RAReg, in.regs.ra, ErrMalformed)
		return nil, c.initErr
	}
	if err := in.run(c.Initial); err != nil {
		c.initErr = err
		return nil, err
	}
	st := in.st
	c.init = &st
	return c.init, nil
}

// runFDE interprets f's program from the CIE's initial state and calls
// emit for every row inside [f.Start, f.End). On an error the rows before
// it have been emitted and the error says where the program went wrong;
// the caller marks the rest of the range.
func runFDE(f *FDE, a Arch, emit func(pc uint64, st *state)) (uint64, error) {
	var in interp
	return in.runFDE(f, a, emit)
}

// runFDE is runFDE with in as scratch space, so that a table build
// allocates one interpreter, not one per FDE.
func (in *interp) runFDE(f *FDE, a Arch, emit func(pc uint64, st *state)) (uint64, error) {
	if f.End <= f.Start {
		return f.End, nil
	}
	init, err := cieInit(f.CIE, a)
	if err != nil {
		return f.Start, err
	}
	*in = interp{regs: regsOf(a), cie: f.CIE, init: *init, st: *init, loc: f.Start, end: f.End,
		bases: f.bases, progAddr: f.instrAddr, debug: f.Debug, emit: emit, stack: in.stack[:0]}
	err = in.run(f.Instructions)
	if err == errPastEnd {
		return f.End, nil
	}
	if err != nil {
		return in.loc, err
	}
	if in.loc < in.end {
		emit(in.loc, &in.st)
	}
	return f.End, nil
}

func (in *interp) advance(to uint64) error {
	if in.inCIE {
		return errAdvanceInCIE
	}
	if to < in.loc {
		return errBackwards
	}
	if to == in.loc {
		return nil
	}
	if in.loc >= in.end {
		return errPastEnd
	}
	in.emit(in.loc, &in.st)
	if to >= in.end {
		in.loc = in.end
		return errPastEnd
	}
	in.loc = to
	return nil
}

// set applies rule r to DWARF register reg if it is one we follow.
func (in *interp) set(reg uint64, r regRule) {
	switch reg {
	case in.regs.fp:
		in.st.fp = r
	case in.regs.ra:
		in.st.ra = r
	}
}

func (in *interp) restore(reg uint64) {
	switch reg {
	case in.regs.fp:
		in.st.fp = in.init.fp
	case in.regs.ra:
		in.st.ra = in.init.ra
	}
}

// DW_CFA_* opcodes.
const (
	cfaAdvanceLoc        = 0x40
	cfaOffset            = 0x80
	cfaRestore           = 0xc0
	cfaNop               = 0x00
	cfaSetLoc            = 0x01
	cfaAdvanceLoc1       = 0x02
	cfaAdvanceLoc2       = 0x03
	cfaAdvanceLoc4       = 0x04
	cfaOffsetExtended    = 0x05
	cfaRestoreExtended   = 0x06
	cfaUndefined         = 0x07
	cfaSameValue         = 0x08
	cfaRegister          = 0x09
	cfaRememberState     = 0x0a
	cfaRestoreState      = 0x0b
	cfaDefCFA            = 0x0c
	cfaDefCFARegister    = 0x0d
	cfaDefCFAOffset      = 0x0e
	cfaDefCFAExpression  = 0x0f
	cfaExpression        = 0x10
	cfaOffsetExtendedSF  = 0x11
	cfaDefCFASF          = 0x12
	cfaDefCFAOffsetSF    = 0x13
	cfaValOffset         = 0x14
	cfaValOffsetSF       = 0x15
	cfaValExpression     = 0x16
	cfaMIPSAdvanceLoc8   = 0x1d
	cfaAArch64NegateRAPC = 0x2c // LLVM's PAuth_LR variant
	cfaGNUWindowSave     = 0x2d // DW_CFA_AARCH64_negate_ra_state on arm64
	cfaGNUArgsSize       = 0x2e
	cfaGNUNegOffsetExt   = 0x2f
)

func (in *interp) run(prog []byte) error {
	r := reader{b: prog}
	caf := in.cie.CodeAlign
	daf := in.cie.DataAlign
	for r.left() > 0 {
		op := r.u8()
		var err error
		switch op & 0xc0 {
		case cfaAdvanceLoc:
			err = in.advance(in.loc + uint64(op&0x3f)*caf)
		case cfaOffset:
			in.set(uint64(op&0x3f), regRule{ruleOffset, int64(r.uleb()) * daf})
		case cfaRestore:
			in.restore(uint64(op & 0x3f))
		default:
			err = in.extended(op, &r, caf, daf)
		}
		if r.err != nil {
			return r.err
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (in *interp) extended(op byte, r *reader, caf uint64, daf int64) error {
	switch op {
	case cfaNop, cfaGNUWindowSave, cfaAArch64NegateRAPC:
		// Negating the RA signing state changes how the saved x30 must be
		// read (PAC bits), not where it is: the walker strips them.
	case cfaSetLoc:
		if in.inCIE {
			return errAdvanceInCIE
		}
		// A pc-relative operand is relative to its own address.
		b := in.bases
		b.secAddr = in.progAddr
		to := r.encoded(in.cie.FDEEncoding, &b)
		if r.err != nil {
			return r.err
		}
		return in.advance(to)
	case cfaAdvanceLoc1:
		return in.advance(in.loc + uint64(r.u8())*caf)
	case cfaAdvanceLoc2:
		return in.advance(in.loc + uint64(r.u16())*caf)
	case cfaAdvanceLoc4:
		return in.advance(in.loc + uint64(r.u32())*caf)
	case cfaMIPSAdvanceLoc8:
		return in.advance(in.loc + r.u64()*caf)
	case cfaOffsetExtended:
		reg := r.uleb()
		in.set(reg, regRule{ruleOffset, int64(r.uleb()) * daf})
	case cfaOffsetExtendedSF:
		reg := r.uleb()
		in.set(reg, regRule{ruleOffset, r.sleb() * daf})
	case cfaGNUNegOffsetExt:
		reg := r.uleb()
		in.set(reg, regRule{ruleOffset, -int64(r.uleb()) * daf})
	case cfaValOffset:
		reg := r.uleb()
		in.set(reg, regRule{ruleValOffset, int64(r.uleb()) * daf})
	case cfaValOffsetSF:
		reg := r.uleb()
		in.set(reg, regRule{ruleValOffset, r.sleb() * daf})
	case cfaRestoreExtended:
		in.restore(r.uleb())
	case cfaUndefined:
		in.set(r.uleb(), regRule{kind: ruleUndef})
	case cfaSameValue:
		in.set(r.uleb(), regRule{kind: ruleSame})
	case cfaRegister:
		reg := r.uleb()
		r.uleb()
		in.set(reg, regRule{kind: ruleRegister})
	case cfaRememberState:
		if in.depth == maxStateStack {
			return errStateStack
		}
		if in.depth == len(in.stack) {
			in.stack = append(in.stack, in.st)
		} else {
			in.stack[in.depth] = in.st
		}
		in.depth++
	case cfaRestoreState:
		if in.depth == 0 {
			return errStateEmpty
		}
		in.depth--
		in.st = in.stack[in.depth]
	case cfaDefCFA:
		reg := r.uleb()
		in.st.cfa = cfaRule{kind: cfaRegOff, reg: reg, off: int64(r.uleb())}
	case cfaDefCFASF:
		reg := r.uleb()
		in.st.cfa = cfaRule{kind: cfaRegOff, reg: reg, off: r.sleb() * daf}
	case cfaDefCFARegister:
		reg := r.uleb()
		// As libgcc: the offset carries over, the rule becomes reg+offset.
		in.st.cfa.reg = reg
		if in.st.cfa.kind != cfaRegOff {
			in.st.cfa.kind = cfaRegOff
			in.st.cfa.off = 0
		}
	case cfaDefCFAOffset:
		off := int64(r.uleb())
		if in.st.cfa.kind == cfaRegOff || in.st.cfa.kind == cfaUnset {
			in.st.cfa.off = off
		}
	case cfaDefCFAOffsetSF:
		off := r.sleb() * daf
		if in.st.cfa.kind == cfaRegOff || in.st.cfa.kind == cfaUnset {
			in.st.cfa.off = off
		}
	case cfaDefCFAExpression:
		expr := r.bytes(r.uleb())
		if r.err != nil {
			return r.err
		}
		in.st.cfa = parseCFAExpr(expr, in.regs)
	case cfaExpression:
		reg := r.uleb()
		r.bytes(r.uleb())
		in.set(reg, regRule{kind: ruleExpr})
	case cfaValExpression:
		reg := r.uleb()
		r.bytes(r.uleb())
		in.set(reg, regRule{kind: ruleValExpr})
	case cfaGNUArgsSize:
		// Bytes of outgoing arguments pushed: only the unwinder that
		// resumes into a landing pad needs it; the CFA already counts them.
		r.uleb()
	default:
		return fmt.Errorf("unknown DW_CFA opcode %#x: %w", op, ErrMalformed)
	}
	return nil
}

// DWARF expression opcodes used by the PLT CFA expression.
const (
	opLit0  = 0x30
	opBreg0 = 0x70
	opAnd   = 0x1a
	opGe    = 0x2a
	opShl   = 0x24
	opPlus  = 0x22
)

// parseCFAExpr recognizes the CFA expression binutils' ld writes for a
// lazy-binding .plt (x86-64 only):
//
//	DW_OP_breg7 (rsp) N; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and;
//	DW_OP_litT; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
//
// CFA = rsp + N + ((rip & 15) >= T ? 8 : 0): each 16-byte entry pushes its
// relocation index at offset T (11 in .plt, 10 with IBT's layout). Any
// other expression is cfaExpr, which the table marks unsupported.
func parseCFAExpr(e []byte, regs archRegs) cfaRule {
	other := cfaRule{kind: cfaExpr}
	if regs.sp != 7 || len(e) < 2 || e[0] != opBreg0+7 {
		return other
	}
	r := reader{b: e[1:]}
	n := r.sleb()
	if r.err != nil {
		return other
	}
	rest := e[1+r.off:]
	if len(rest) != 9 || rest[0] != opBreg0+16 || rest[1] != 0 {
		return other
	}
	thr := rest[4]
	if thr < opLit0 || thr > opLit0+15 {
		return other
	}
	want := []byte{opBreg0 + 16, 0, opLit0 + 15, opAnd, thr, opGe, opLit0 + 3, opShl, opPlus}
	if !bytes.Equal(rest, want) {
		return other
	}
	return cfaRule{kind: cfaPLT, reg: 7, off: n, thr: thr - opLit0}
}
