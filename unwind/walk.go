package unwind

import (
	"math"
	"sort"
)

// Regs is the register state a walk starts from: the thread's registers
// at the first frame.
type Regs struct {
	PC, SP, FP uint64
	LR         uint64 // arm64 x30; unused on x86-64
}

// Mapping is one executable mapping of a file whose table is known.
type Mapping struct {
	Start, End uint64 // runtime address range
	Bias       uint64 // runtime address - ELF virtual address (Table.Bias)
	Table      *Table
}

// StopReason says why a walk ended.
type StopReason uint8

const (
	StopEnd         StopReason = iota // the outermost frame (CFAEnd, a zero RA or FP chain end)
	StopMaxFrames                     // the frame limit
	StopNoMapping                     // a PC in no mapping with a table
	StopUnsupported                   // a CFAUnsupported row
	StopNoFP                          // the rule needs a frame pointer that was lost
	StopMemory                        // a stack read failed
	StopBadFrame                      // the CFA moved down the stack, or a stale LR rule
)

func (s StopReason) String() string {
	return [...]string{"end", "max-frames", "no-mapping", "unsupported", "no-fp", "memory", "bad-frame"}[s]
}

// WalkResult is a walk's frames and why it stopped.
type WalkResult struct {
	Frames []uint64
	Stop   StopReason
}

// Signal frame layouts: where the interrupted registers are, as offsets
// from the stack pointer at the signal trampoline (__restore_rt's frame
// on x86-64, __kernel_rt_sigreturn's on arm64). They are the kernel's
// rt_sigframe: on x86-64 the handler's return popped pretcode, so SP is
// the ucontext, whose mcontext gregs start at 40; on arm64 SP is the
// rt_sigframe, a 128-byte siginfo then the ucontext whose mcontext is
// at 176 (fault_address, then x0-x30, sp, pc).
const (
	SigAMD64RBP = 40 + 10*8
	SigAMD64RSP = 40 + 15*8
	SigAMD64RIP = 40 + 16*8

	SigARM64X29 = 128 + 176 + 8 + 29*8
	SigARM64X30 = 128 + 176 + 8 + 30*8
	SigARM64SP  = 128 + 176 + 8 + 31*8
	SigARM64PC  = 128 + 176 + 8 + 32*8
)

// ARM64PACMask keeps the address bits of a return address that pointer
// authentication (DW_CFA_AARCH64_negate_ra_state) may have signed: user
// space addresses are below 2^48.
const ARM64PACMask = 1<<48 - 1

// Walk unwinds a stack with the tables of maps, reading 8-byte stack
// words with readMem, and returns the PCs of at most maxFrames frames:
// regs.PC first, then each caller's return address. It is the reference
// the BPF walker must match.
func Walk(regs Regs, readMem func(addr uint64) (uint64, bool), maps []Mapping, maxFrames int) []uint64 {
	return WalkDetailed(regs, readMem, maps, maxFrames).Frames
}

// WalkDetailed is Walk that also says why the walk stopped. A stack of
// exactly maxFrames frames whose last is the outermost stops with
// StopEnd, not StopMaxFrames: the walk looks one frame further.
func WalkDetailed(regs Regs, readMem func(addr uint64) (uint64, bool), maps []Mapping, maxFrames int) WalkResult {
	if maxFrames <= 0 || maxFrames == math.MaxInt {
		return walk(regs, readMem, maps, maxFrames)
	}
	res := walk(regs, readMem, maps, maxFrames+1)
	if len(res.Frames) > maxFrames {
		res.Frames, res.Stop = res.Frames[:maxFrames], StopMaxFrames
	}
	return res
}

func walk(regs Regs, readMem func(addr uint64) (uint64, bool), maps []Mapping, maxFrames int) WalkResult {
	ms := append([]Mapping(nil), maps...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].Start < ms[j].Start })
	find := func(pc uint64) *Mapping {
		i := sort.Search(len(ms), func(i int) bool { return ms[i].End > pc })
		if i < len(ms) && ms[i].Start <= pc && ms[i].Table != nil {
			return &ms[i]
		}
		return nil
	}
	pc, sp, fp, lr := regs.PC, regs.SP, regs.FP, regs.LR
	fpKnown := true
	// lrValid: x30 still holds this frame's return address. True only for
	// the first frame and a frame a signal interrupted; a caller's x30 was
	// overwritten by its own call.
	lrValid := true
	// isReturn: pc is a return address, so the call is at pc-1.
	isReturn := false
	res := WalkResult{Frames: []uint64{pc}}
	stop := func(s StopReason) WalkResult { res.Stop = s; return res }
	if maxFrames <= 0 {
		return stop(StopMaxFrames)
	}
	for {
		if len(res.Frames) >= maxFrames {
			return stop(StopMaxFrames)
		}
		m := find(pc)
		if m == nil {
			return stop(StopNoMapping)
		}
		arch := m.Table.Arch
		q := pc - m.Bias
		if isReturn {
			q--
		}
		ru := m.Table.Lookup(q)
		if ru.Signal {
			var ok bool
			pc, sp, fp, lr, ok = sigRegs(arch, sp, readMem)
			if !ok {
				return stop(StopMemory)
			}
			if arch == ArchARM64 {
				pc &= ARM64PACMask
			}
			fpKnown, lrValid, isReturn = true, true, false
			res.Frames = append(res.Frames, pc)
			continue
		}
		var cfa, ra uint64
		switch ru.CFA {
		case CFAEnd:
			return stop(StopEnd)
		case CFAUnsupported:
			return stop(StopUnsupported)
		case CFAGap:
			if !fpKnown {
				return stop(StopNoFP)
			}
			if fp == 0 {
				return stop(StopEnd) // the ABI's end of the frame-pointer chain
			}
			if fp < sp || fp%8 != 0 {
				return stop(StopNoFP) // no frame pointer to follow, as the kernel side says
			}
			nfp, ok1 := readMem(fp)
			r, ok2 := readMem(fp + 8)
			if !ok1 || !ok2 {
				return stop(StopMemory)
			}
			cfa, ra, fp = fp+16, r, nfp
		case CFASP, CFAFP, CFAPLT:
			switch ru.CFA {
			case CFASP:
				cfa = sp + uint64(ru.CFAOffset)
			case CFAFP:
				if !fpKnown {
					return stop(StopNoFP)
				}
				cfa = fp + uint64(ru.CFAOffset)
			case CFAPLT:
				cfa = sp + uint64(ru.CFAOffset)
				if pc&15 >= uint64(ru.PLTThreshold) {
					cfa += 8
				}
			}
			// Checked before any read: a CFA below the stack pointer is a
			// corrupt frame, and the reads would be of the wrong memory.
			if cfa < sp || (cfa == sp && !lrValid) {
				return stop(StopBadFrame)
			}
			switch ru.RA {
			case RAAtCFA:
				r, ok := readMem(cfa + uint64(ru.RAOffset))
				if !ok {
					return stop(StopMemory)
				}
				ra = r
			case RAInLR:
				if !lrValid {
					return stop(StopBadFrame)
				}
				ra = lr
			}
			switch ru.FP {
			case FPAtCFA:
				v, ok := readMem(cfa + uint64(ru.FPOffset))
				if !ok {
					return stop(StopMemory)
				}
				fp = v
			case FPUnknown:
				fpKnown = false
			}
		default:
			return stop(StopUnsupported)
		}
		if arch == ArchARM64 {
			ra &= ARM64PACMask
		}
		if ra == 0 {
			return stop(StopEnd)
		}
		sp, pc, lr = cfa, ra, ra
		isReturn, lrValid = true, false
		res.Frames = append(res.Frames, pc)
	}
}

func sigRegs(a Arch, sp uint64, readMem func(uint64) (uint64, bool)) (pc, nsp, fp, lr uint64, ok bool) {
	var o [4]uint64 // pc, sp, fp, lr offsets
	if a == ArchARM64 {
		o = [4]uint64{SigARM64PC, SigARM64SP, SigARM64X29, SigARM64X30}
	} else {
		o = [4]uint64{SigAMD64RIP, SigAMD64RSP, SigAMD64RBP, SigAMD64RIP}
	}
	var v [4]uint64
	for i := range o {
		x, good := readMem(sp + o[i])
		if !good {
			return 0, 0, 0, 0, false
		}
		v[i] = x
	}
	return v[0], v[1], v[2], v[3], true
}
