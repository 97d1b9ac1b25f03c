package symbols

import (
	"debug/elf"
	"encoding/binary"

	"golang.org/x/arch/x86/x86asm"
)

// pltSymbols synthesizes "name@plt" symbols for PLT stubs, the way objdump
// and perf name them. A stub is matched to its import by decoding the
// indirect jump and finding the GOT slot's relocation, rather than by
// position, so lazy, non-lazy (-z now), IBT (.plt.sec) and .plt.got layouts
// all work.
func pltSymbols(e *elfFile) (out []sym, err error) {
	defer guard("decoding PLT", &err)
	f := e.f
	if f.Class != elf.ELFCLASS64 {
		return nil, nil // 32-bit REL layouts are not decoded (documented limit)
	}
	var jumpSlot, globDat uint32
	switch f.Machine {
	case elf.EM_X86_64:
		jumpSlot, globDat = uint32(elf.R_X86_64_JMP_SLOT), uint32(elf.R_X86_64_GLOB_DAT)
	case elf.EM_AARCH64:
		jumpSlot, globDat = uint32(elf.R_AARCH64_JUMP_SLOT), uint32(elf.R_AARCH64_GLOB_DAT)
	default:
		return nil, nil
	}
	dsyms, err := f.DynamicSymbols()
	if err != nil || len(dsyms) == 0 {
		return nil, nil
	}
	// GOT slot address -> imported symbol name.
	got := map[uint64]string{}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_RELA || (s.Name != ".rela.plt" && s.Name != ".rela.dyn") {
			continue
		}
		b, err := e.data(s)
		if err != nil {
			continue
		}
		for len(b) >= 24 {
			off := f.ByteOrder.Uint64(b)
			info := f.ByteOrder.Uint64(b[8:])
			b = b[24:]
			typ, idx := uint32(info), info>>32
			if (typ != jumpSlot && typ != globDat) || idx == 0 || idx > uint64(len(dsyms)) {
				continue
			}
			if n := dsyms[idx-1].Name; n != "" {
				got[off] = n
			}
		}
	}
	if len(got) == 0 {
		return nil, nil
	}
	for _, name := range []string{".plt", ".plt.sec", ".plt.got"} {
		s := e.section(name)
		if s == nil || s.Flags&elf.SHF_EXECINSTR == 0 {
			continue
		}
		code, err := e.data(s)
		if err != nil {
			continue
		}
		ent := s.Entsize
		if ent == 0 || ent > 64 || len(code)%int(ent) != 0 {
			ent = 16
		}
		if name == ".plt.got" && f.Machine == elf.EM_X86_64 && len(code)%16 != 0 {
			ent = 8
		}
		for o := uint64(0); o+ent <= uint64(len(code)); o += ent {
			pc := s.Addr + o
			var slot uint64
			var ok bool
			if f.Machine == elf.EM_X86_64 {
				slot, ok = x86GOTSlot(code[o:o+ent], pc)
			} else {
				slot, ok = arm64GOTSlot(code[o:o+ent], pc, f.ByteOrder)
			}
			if !ok {
				continue
			}
			if n, ok := got[slot]; ok {
				out = append(out, sym{addr: pc, size: ent, name: n + "@plt", rank: 1})
			}
		}
	}
	return out, nil
}

// x86GOTSlot decodes one PLT entry and returns the memory operand of its
// first "jmp *disp(%rip)".
func x86GOTSlot(code []byte, pc uint64) (uint64, bool) {
	for off := 0; off < len(code); {
		// x86asm does not know endbr64 (IBT stubs start with it).
		if off+4 <= len(code) && code[off] == 0xf3 && code[off+1] == 0x0f && code[off+2] == 0x1e && code[off+3] == 0xfa {
			off += 4
			continue
		}
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil || inst.Len == 0 {
			return 0, false
		}
		next := pc + uint64(off+inst.Len)
		if inst.Op == x86asm.JMP {
			if m, ok := inst.Args[0].(x86asm.Mem); ok && m.Base == x86asm.RIP && m.Index == 0 {
				return uint64(int64(next) + m.Disp), true
			}
			return 0, false
		}
		off += inst.Len
	}
	return 0, false
}

// arm64GOTSlot recognizes "adrp x16, PAGE; ldr x17, [x16, #OFF]" (with an
// optional leading "bti c") and returns PAGE+OFF.
func arm64GOTSlot(code []byte, pc uint64, bo binary.ByteOrder) (uint64, bool) {
	for i := 0; i+8 <= len(code); i += 4 {
		w := bo.Uint32(code[i:])
		if w&0x9f00001f != 0x90000010 { // adrp x16
			continue
		}
		immlo := uint64(w>>29) & 3
		immhi := uint64(w>>5) & 0x7ffff
		imm := int64((immhi<<2|immlo)<<43) >> 31 // sign-extend 21 bits, then <<12
		page := uint64(int64((pc+uint64(i))&^0xfff) + imm)
		l := bo.Uint32(code[i+4:])
		if l&0xffc003ff != 0xf9400211 { // ldr x17, [x16, #imm12*8]
			return 0, false
		}
		return page + (uint64(l>>10)&0xfff)*8, true
	}
	return 0, false
}
