package tracer

import (
	"golang.org/x/arch/x86/x86asm"
)

// Where a uprobe sits decides its cost. On x86 the kernel emulates a few
// instructions at a probe (push of a register, jmp, call, jcc, nop); any
// other one is copied out of line and single-stepped, which under a
// hypervisor costs a debug trap: about 30x more per hit on the machines we
// measured. So each probe goes on the first emulated instruction at which the
// arguments are still in their registers and which every logged call passes.

// probeSpec says what a probe point must preserve besides the stack
// pointer, which it always does: return probes hijack the return address at
// [sp], and the entry programs read the caller and compare stack pointers
// there.
type probeSpec struct {
	// args is how many integer argument registers the entry program reads.
	args int
	// skipNullTest: calls with a NULL first argument log nothing (free),
	// so a leading "test rdi,rdi; je" may be stepped over.
	skipNullTest bool
}

var argRegs = [...]x86asm.Reg{x86asm.RDI, x86asm.RSI, x86asm.RDX, x86asm.RCX, x86asm.R8, x86asm.R9}

// placeX86 returns the offset from the function start where the probe
// should sit, and false when no emulated instruction qualifies (the caller
// then probes offset 0 and warns).
func placeX86(code []byte, spec probeSpec) (uint64, bool) {
	off := 0
	sawNullTest := false
	for n := 0; n < 16 && off < len(code); n++ {
		if isEndbr(code[off:]) {
			off += 4
			continue
		}
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return 0, false
		}
		if emulated(inst) {
			return uint64(off), true
		}
		switch {
		case spec.skipNullTest && !sawNullTest && n <= 1 && isTestSelf(inst, x86asm.RDI):
			sawNullTest = true
		case sawNullTest && (inst.Op == x86asm.JE) && off > 0:
			// Follow the fall-through path: only non-NULL calls
			// continue here.
			sawNullTest = false
		case harmless(inst, spec):
		default:
			return 0, false
		}
		off += inst.Len
	}
	return 0, false
}

// emulated reports whether the kernel executes inst itself at a uprobe
// rather than single-stepping it (arch/x86/kernel/uprobes.c:
// branch_setup_xol_ops and push_setup_xol_ops).
func emulated(inst x86asm.Inst) bool {
	switch inst.Op {
	case x86asm.PUSH:
		_, ok := inst.Args[0].(x86asm.Reg)
		return ok
	case x86asm.JMP, x86asm.CALL:
		_, ok := inst.Args[0].(x86asm.Rel)
		return ok
	case x86asm.NOP:
		return inst.Len == 1
	}
	return false
}

func isTestSelf(inst x86asm.Inst, r x86asm.Reg) bool {
	if inst.Op != x86asm.TEST {
		return false
	}
	a, ok1 := inst.Args[0].(x86asm.Reg)
	b, ok2 := inst.Args[1].(x86asm.Reg)
	return ok1 && ok2 && family(a) == r && family(b) == r
}

// harmless reports whether inst may run before the probe point: it changes
// neither the argument registers the program reads nor the stack pointer,
// and does not branch.
func harmless(inst x86asm.Inst, spec probeSpec) bool {
	switch inst.Op {
	case x86asm.TEST, x86asm.CMP:
		return true
	case x86asm.MOV, x86asm.MOVZX, x86asm.MOVSX, x86asm.MOVSXD, x86asm.LEA,
		x86asm.XOR, x86asm.ADD, x86asm.SUB, x86asm.AND, x86asm.OR:
		dst, ok := inst.Args[0].(x86asm.Reg)
		if !ok {
			// A store to memory: harmless to registers, but a
			// store through rsp-relative memory is fine too.
			return true
		}
		f := family(dst)
		if f == x86asm.RSP {
			return false
		}
		for i := 0; i < spec.args && i < len(argRegs); i++ {
			if f == argRegs[i] {
				return false
			}
		}
		return true
	}
	return false
}

// family maps a sub-register (EDI, DI, DIL) to its 64-bit register.
func family(r x86asm.Reg) x86asm.Reg {
	switch {
	case r >= x86asm.RAX && r <= x86asm.R15:
		return r
	case r >= x86asm.EAX && r <= x86asm.R15L:
		return x86asm.RAX + (r - x86asm.EAX)
	case r >= x86asm.AX && r <= x86asm.R15W:
		return x86asm.RAX + (r - x86asm.AX)
	case r >= x86asm.AL && r <= x86asm.R15B:
		// AL..BL come first, then AH..BH (no 64-bit family we care
		// about), then SPB..R15B.
		switch r {
		case x86asm.AL:
			return x86asm.RAX
		case x86asm.CL:
			return x86asm.RCX
		case x86asm.DL:
			return x86asm.RDX
		case x86asm.BL:
			return x86asm.RBX
		case x86asm.SPB:
			return x86asm.RSP
		case x86asm.BPB:
			return x86asm.RBP
		case x86asm.SIB:
			return x86asm.RSI
		case x86asm.DIB:
			return x86asm.RDI
		}
		if r >= x86asm.R8B && r <= x86asm.R15B {
			return x86asm.R8 + (r - x86asm.R8B)
		}
	}
	return r
}

// isEndbr reports an endbr64 (f3 0f 1e fa). x86asm predates CET and
// decodes it as a lone REP prefix, so this one encoding is matched whole;
// the kernel single-steps it, so a probe never sits on it.
func isEndbr(b []byte) bool {
	return len(b) >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa
}
