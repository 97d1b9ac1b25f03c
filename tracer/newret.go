package tracer

import (
	"debug/elf"
	"encoding/binary"
	"sort"

	"golang.org/x/arch/x86/x86asm"
)

// An allocator's own operator new (jemalloc's, tcmalloc's, mimalloc's)
// allocates without calling a probed malloc, so the block must be read at
// new's return. A uretprobe would replace new's return address with the
// kernel's trampoline, which has no unwind information: a bad_alloc thrown
// inside new would then end the program in std::terminate. So new's
// returns are probed where they are, on its ret instructions and on those
// of the functions it tail-calls (through a jmp, also via its own PLT), as
// plain uprobes: nothing on the stack changes, an exception unwinds as
// without memtrace. A ret instruction is single-stepped by the kernel
// (~20 µs on a KVM guest), so only allocators' news get them; libstdc++'s
// and libc++'s news call malloc, whose probe logs the block.

// Bounds of the walk: an allocator's new and its slow paths are a few
// hundred instructions; a walk past these has lost its way.
const (
	maxWalkInsns = 20000
	maxRetSites  = 256
)

// elfCode reads an executable file's code by virtual address and knows
// its functions' starts and its PLT stubs' targets.
type elfCode struct {
	// readAt, when set, replaces the file's segments (the fuzz test's
	// code of random bytes).
	readAt func(vaddr uint64, n int) []byte
	ef     *elf.File
	segs   []*elf.Prog
	starts []uint64          // sorted function starts
	plt    map[uint64]string // PLT stub address -> the symbol it jumps to
	funcs  map[string]uint64 // defined functions by name
}

func newElfCode(ef *elf.File, byName map[string]elf.Symbol) *elfCode {
	c := &elfCode{ef: ef, plt: map[uint64]string{}, funcs: map[string]uint64{}}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			c.segs = append(c.segs, p)
		}
	}
	seen := map[uint64]bool{}
	add := func(syms []elf.Symbol) {
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Section == elf.SHN_UNDEF || s.Value == 0 {
				continue
			}
			if !seen[s.Value] {
				seen[s.Value] = true
				c.starts = append(c.starts, s.Value)
			}
			if _, ok := c.funcs[s.Name]; !ok {
				c.funcs[s.Name] = s.Value
			}
		}
	}
	dyn, _ := ef.DynamicSymbols()
	add(dyn)
	st, _ := ef.Symbols()
	add(st)
	for n, s := range byName {
		if _, ok := c.funcs[n]; !ok {
			c.funcs[n] = s.Value
		}
	}
	sort.Slice(c.starts, func(i, j int) bool { return c.starts[i] < c.starts[j] })
	c.readPLT(dyn)
	return c
}

// readPLT maps each PLT stub to the symbol whose GOT slot its jmp reads
// (R_X86_64_JUMP_SLOT and GLOB_DAT relocations name the slots).
func (c *elfCode) readPLT(dyn []elf.Symbol) {
	slot := map[uint64]string{}
	for _, name := range []string{".rela.plt", ".rela.dyn"} {
		sec := c.ef.Section(name)
		if sec == nil {
			continue
		}
		b, err := sec.Data()
		if err != nil {
			continue
		}
		for i := 0; i+24 <= len(b); i += 24 {
			off := binary.LittleEndian.Uint64(b[i:])
			info := binary.LittleEndian.Uint64(b[i+8:])
			typ, sym := uint32(info), int(info>>32)
			if (typ == uint32(elf.R_X86_64_JMP_SLOT) || typ == uint32(elf.R_X86_64_GLOB_DAT)) && sym > 0 && sym <= len(dyn) {
				slot[off] = dyn[sym-1].Name
			}
		}
	}
	for _, name := range []string{".plt", ".plt.sec", ".plt.got"} {
		sec := c.ef.Section(name)
		if sec == nil {
			continue
		}
		b, err := sec.Data()
		if err != nil {
			continue
		}
		for off := 0; off < len(b); {
			inst, err := x86asm.Decode(b[off:], 64)
			if err != nil {
				off++
				continue
			}
			pc := sec.Addr + uint64(off)
			if inst.Op == x86asm.JMP {
				if m, ok := inst.Args[0].(x86asm.Mem); ok && m.Base == x86asm.RIP {
					got := pc + uint64(inst.Len) + uint64(m.Disp)
					if n, ok := slot[got]; ok {
						// The stub starts at its 16-byte boundary
						// (endbr64 and bnd prefixes before the jmp).
						c.plt[pc&^15] = n
					}
				}
			}
			off += inst.Len
		}
	}
}

func (c *elfCode) read(vaddr uint64, n int) []byte {
	if c.readAt != nil {
		return c.readAt(vaddr, n)
	}
	for _, p := range c.segs {
		if vaddr >= p.Vaddr && vaddr < p.Vaddr+p.Filesz {
			if rest := p.Vaddr + p.Filesz - vaddr; uint64(n) > rest {
				n = int(rest)
			}
			b := make([]byte, n)
			k, _ := p.ReadAt(b, int64(vaddr-p.Vaddr))
			return b[:k]
		}
	}
	return nil
}

func (c *elfCode) isStart(vaddr uint64) bool {
	i := sort.Search(len(c.starts), func(i int) bool { return c.starts[i] >= vaddr })
	return i < len(c.starts) && c.starts[i] == vaddr
}

// returnSites walks the code reachable from the functions at entries
// without a call returning (branches, tail jumps, tail jumps through the
// file's own PLT stubs) and returns the addresses of its ret instructions.
// A path that jumps indirectly or leaves the file ends there.
func (c *elfCode) returnSites(entries []uint64) []uint64 {
	var rets []uint64
	seen := map[uint64]bool{}
	work := append([]uint64(nil), entries...)
	insns := 0
	for len(work) > 0 && insns < maxWalkInsns && len(rets) < maxRetSites {
		pc := work[len(work)-1]
		work = work[:len(work)-1]
		for insns < maxWalkInsns {
			if seen[pc] {
				break
			}
			seen[pc] = true
			code := c.read(pc, 16)
			if len(code) == 0 {
				break
			}
			if isEndbr(code) {
				pc += 4
				continue
			}
			inst, err := x86asm.Decode(code, 64)
			if err != nil {
				break
			}
			insns++
			next := pc + uint64(inst.Len)
			target, direct := relTarget(inst, next)
			stop := false
			switch {
			case inst.Op == x86asm.RET:
				rets = append(rets, pc)
				stop = true
			case inst.Op == x86asm.JMP:
				if direct {
					work = append(work, c.follow(target)...)
				}
				stop = true
			case isCondJump(inst.Op):
				if direct {
					work = append(work, c.follow(target)...)
				}
			case inst.Op == x86asm.CALL:
				// The callee returns here; a call that never returns
				// (a throw) may be the function's last instruction:
				// the next function is not this one's.
				stop = c.isStart(next)
			case inst.Op == x86asm.UD2 || inst.Op == x86asm.HLT || inst.Op == x86asm.INT:
				stop = true
			}
			if stop {
				break
			}
			pc = next
		}
	}
	sort.Slice(rets, func(i, j int) bool { return rets[i] < rets[j] })
	return rets
}

// follow resolves a branch target: a PLT stub of this file is the
// function it binds to when this file defines it (ld.so binds it there
// unless another library interposes the name), else nothing.
func (c *elfCode) follow(target uint64) []uint64 {
	if name, ok := c.plt[target&^15]; ok {
		if v, ok := c.funcs[name]; ok {
			return []uint64{v}
		}
		return nil
	}
	if c.read(target, 1) == nil {
		return nil
	}
	return []uint64{target}
}

func relTarget(inst x86asm.Inst, next uint64) (uint64, bool) {
	if r, ok := inst.Args[0].(x86asm.Rel); ok {
		return next + uint64(int64(r)), true
	}
	return 0, false
}

func isCondJump(op x86asm.Op) bool {
	switch op {
	case x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JCXZ, x86asm.JE, x86asm.JECXZ, x86asm.JG, x86asm.JGE,
		x86asm.JL, x86asm.JLE, x86asm.JNE, x86asm.JNO, x86asm.JNP, x86asm.JNS, x86asm.JO, x86asm.JP, x86asm.JRCXZ, x86asm.JS:
		return true
	}
	return false
}
