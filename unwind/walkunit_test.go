package unwind

import (
	"slices"
	"testing"
)

// TestWalkRules drives the reference walker through each rule and stop
// reason over a hand-assembled table, the cases the BPF walker must
// reproduce exactly.
func TestWalkRules(t *testing.T) {
	a := &ehAsm{addr: 0x9000}
	cie := a.cie(1, "zR", 1, -8, 16, []byte{peUdata8}, x86Initial)
	a.fde(cie, peUdata8, 0x1000, 0x100, []byte{}, []byte{cfaAdvanceLoc | 1, cfaDefCFAOffset, 16, cfaOffset | 6, 2})
	a.fde(cie, peUdata8, 0x1200, 0x100, []byte{}, []byte{cfaAdvanceLoc | 4, cfaDefCFARegister, 6})
	a.fde(cie, peUdata8, 0x1400, 0x10, []byte{}, []byte{cfaUndefined, 16})
	a.fde(cie, peUdata8, 0x1500, 0x10, []byte{}, []byte{cfaDefCFA, 9, 0})
	a.fde(cie, peUdata8, 0x1600, 0x10, []byte{}, []byte{cfaUndefined, 6})
	a.fde(cie, peUdata8, 0x1700, 0x40, []byte{}, []byte{cfaDefCFAExpression, 11, opBreg0 + 7, 8, opBreg0 + 16, 0,
		opLit0 + 15, opAnd, opLit0 + 11, opGe, opLit0 + 3, opShl, opPlus})
	a.fde(cie, peUdata8, 0x1900, 0x10, []byte{}, []byte{cfaDefCFA, 6, 16})
	sig := a.cie(1, "zRS", 1, -8, 16, []byte{peUdata8}, x86Initial)
	a.fde(sig, peUdata8, 0x1a00, 0x10, []byte{}, []byte{cfaDefCFAExpression, 4, opBreg0 + 7, 0xa0, 0x01, 0x06})
	// Two functions with padding between them, like glibc's
	// __start_context after the function before it.
	a.fde(cie, peUdata8, 0x1b00, 0x0c, []byte{}, nil)
	a.fde(cie, peUdata8, 0x1b10, 0x10, []byte{}, nil)
	a.terminate()
	tab := buildEh(t, ArchAMD64, a.buf, a.addr)
	maps := []Mapping{{Start: 0x1000, End: 0x2000, Table: tab}}

	type mem map[uint64]uint64
	cases := []struct {
		name   string
		regs   Regs
		mem    mem
		max    int
		frames []uint64
		stop   StopReason
	}{
		{"sp rule, saved fp, then the end", Regs{PC: 0x1010, SP: 0x8000, FP: 1},
			mem{0x8008: 0x1401, 0x8000: 0x9000}, 8, []uint64{0x1010, 0x1401}, StopEnd},
		{"plt after the push", Regs{PC: 0x170b, SP: 0x8000}, mem{0x8008: 0x1401}, 8, []uint64{0x170b, 0x1401}, StopEnd},
		{"plt before the push", Regs{PC: 0x1705, SP: 0x8000}, mem{0x8000: 0x1401}, 8, []uint64{0x1705, 0x1401}, StopEnd},
		{"gap: frame-pointer fallback", Regs{PC: 0x1800, SP: 0x8000, FP: 0x8100},
			mem{0x8100: 0, 0x8108: 0x1401}, 8, []uint64{0x1800, 0x1401}, StopEnd},
		{"gap with FP 0: the chain's end", Regs{PC: 0x1800, SP: 0x8000}, mem{}, 8, []uint64{0x1800}, StopEnd},
		{"gap with FP below SP", Regs{PC: 0x1800, SP: 0x8000, FP: 0x7000}, mem{}, 8, []uint64{0x1800}, StopNoFP},
		{"unsupported", Regs{PC: 0x1505, SP: 0x8000}, mem{}, 8, []uint64{0x1505}, StopUnsupported},
		{"fp lost, then needed", Regs{PC: 0x1605, SP: 0x8000, FP: 0x8800}, mem{0x8000: 0x1905}, 8, []uint64{0x1605, 0x1905}, StopNoFP},
		{"fp rule, CFA below SP", Regs{PC: 0x1205, SP: 0x8000, FP: 0x7000}, mem{}, 8, []uint64{0x1205}, StopBadFrame},
		{"unreadable stack", Regs{PC: 0x1010, SP: 0x8000}, mem{}, 8, []uint64{0x1010}, StopMemory},
		{"frame limit", Regs{PC: 0x1010, SP: 0x8000}, mem{0x8008: 0x1401, 0x8000: 0}, 1, []uint64{0x1010}, StopMaxFrames},
		{"exactly the frame limit, the last outermost", Regs{PC: 0x1010, SP: 0x8000, FP: 1},
			mem{0x8008: 0x1401, 0x8000: 0x9000}, 2, []uint64{0x1010, 0x1401}, StopEnd},
		// makecontext's planted return address: its call would be in
		// the padding, where no call is; the previous function's rule
		// would read on past the context's stack.
		{"return address after padding", Regs{PC: 0x1010, SP: 0x8000},
			mem{0x8008: 0x1b10, 0x8000: 0, 0x8010: 0x1401}, 8, []uint64{0x1010, 0x1b10}, StopEnd},
		{"outside every mapping", Regs{PC: 0x5000, SP: 0x8000}, mem{}, 8, []uint64{0x5000}, StopNoMapping},
		{"zero return address", Regs{PC: 0x1010, SP: 0x8000}, mem{0x8008: 0, 0x8000: 0}, 8, []uint64{0x1010}, StopEnd},
		// The handler returns to 0x1a01; 0x1a00 is the signal trampoline's
		// FDE. The interrupted PC 0x1400 is looked up as is (PC-1 would be
		// in the gap before it and fall back to the frame pointer).
		{"signal frame", Regs{PC: 0x1010, SP: 0x8000},
			mem{0x8008: 0x1a01, 0x8000: 0, 0x8010 + SigAMD64RIP: 0x1400, 0x8010 + SigAMD64RSP: 0x9000, 0x8010 + SigAMD64RBP: 0x9100},
			8, []uint64{0x1010, 0x1a01, 0x1400}, StopEnd},
	}
	for _, c := range cases {
		read := func(addr uint64) (uint64, bool) { v, ok := c.mem[addr]; return v, ok }
		res := WalkDetailed(c.regs, read, maps, c.max)
		if !slices.Equal(res.Frames, c.frames) || res.Stop != c.stop {
			t.Errorf("%s: frames %#x stop %v, want %#x stop %v", c.name, res.Frames, res.Stop, c.frames, c.stop)
		}
	}

	// arm64: x30 holds the return address only in the first frame.
	arm := &ehAsm{addr: 0x9000}
	acie := arm.cie(1, "zR", 4, -8, 30, []byte{peUdata8}, armInitial)
	arm.fde(acie, peUdata8, 0x1000, 0x100, []byte{}, nil)
	arm.fde(acie, peUdata8, 0x1100, 0x100, []byte{}, []byte{cfaAdvanceLoc | 1, cfaDefCFAOffset, 32, cfaOffset | 29, 4, cfaOffset | 30, 3})
	arm.terminate()
	atab := buildEh(t, ArchARM64, arm.buf, arm.addr)
	amaps := []Mapping{{Start: 0x1000, End: 0x2000, Table: atab}}
	// Frame record at CFA-32; the saved x30 carries pointer-authentication bits.
	m := map[uint64]uint64{0x7fe0: 0x8800, 0x7fe8: 0x002a_0000_0000_1010}
	read := func(addr uint64) (uint64, bool) { v, ok := m[addr]; return v, ok }
	res := WalkDetailed(Regs{PC: 0x1108, SP: 0x7fe0}, read, amaps, 8)
	if want := []uint64{0x1108, 0x1010}; !slices.Equal(res.Frames, want) || res.Stop != StopBadFrame {
		t.Errorf("arm64: frames %#x stop %v, want %#x and a stale-x30 stop", res.Frames, res.Stop, want)
	}
	res = WalkDetailed(Regs{PC: 0x1004, SP: 0x7fe0, LR: 0x1104}, read, amaps, 8)
	if want := []uint64{0x1004, 0x1104}; !slices.Equal(res.Frames, want) {
		t.Errorf("arm64 leaf: frames %#x, want %#x", res.Frames, want)
	}
}
