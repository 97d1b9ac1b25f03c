package tracer

import (
	"bytes"
	"debug/elf"
)

// symbolSection is the contents of f's symbol section of type typ and of
// its string table (elf.ErrNoSymbols without them).
func symbolSection(f *elf.File, typ elf.SectionType) (syms, strs []byte, err error) {
	ss := f.SectionByType(typ)
	if ss == nil {
		return nil, nil, elf.ErrNoSymbols
	}
	if syms, err = ss.Data(); err != nil {
		return nil, nil, err
	}
	if ss.Link == 0 || int(ss.Link) >= len(f.Sections) {
		return nil, nil, elf.ErrNoSymbols
	}
	if strs, err = f.Sections[ss.Link].Data(); err != nil {
		return nil, nil, err
	}
	return syms, strs, nil
}

// funcSymbols is what allocSymbols takes from f's symbol section of type
// typ (SHT_DYNSYM or SHT_SYMTAB): the defined functions (STT_FUNC and
// STT_GNU_IFUNC, value not 0) whose names keep accepts, in the section's
// order, with STB_GLOBAL or STB_WEAK binding where global is set. It
// reads the section in place: DynamicSymbols and Symbols make a string
// (and for .dynsym look up a version) for every one of a library's
// thousands of symbols, which showed in every start-up's profile, where
// a start-up wants a few dozen names.
func funcSymbols(f *elf.File, typ elf.SectionType, global bool, keep func(name []byte) bool) ([]elf.Symbol, error) {
	data, strs, err := symbolSection(f, typ)
	if err != nil {
		return nil, err
	}
	is32 := f.Class == elf.ELFCLASS32
	size := elf.Sym64Size
	if is32 {
		size = elf.Sym32Size
	}
	bo := f.ByteOrder
	var out []elf.Symbol
	// Entry 0 is the null symbol.
	for off := size; off+size <= len(data); off += size {
		e := data[off : off+size]
		var s elf.Symbol
		if is32 {
			s.Value, s.Size = uint64(bo.Uint32(e[4:8])), uint64(bo.Uint32(e[8:12]))
			s.Info, s.Other, s.Section = e[12], e[13], elf.SectionIndex(bo.Uint16(e[14:16]))
		} else {
			s.Info, s.Other, s.Section = e[4], e[5], elf.SectionIndex(bo.Uint16(e[6:8]))
			s.Value, s.Size = bo.Uint64(e[8:16]), bo.Uint64(e[16:24])
		}
		if s.Section == elf.SHN_UNDEF || s.Value == 0 {
			continue
		}
		if t := elf.ST_TYPE(s.Info); t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC {
			continue
		}
		if b := elf.ST_BIND(s.Info); global && b != elf.STB_GLOBAL && b != elf.STB_WEAK {
			continue
		}
		at := int(bo.Uint32(e[0:4]))
		if at >= len(strs) {
			continue
		}
		name := strs[at:]
		if end := bytes.IndexByte(name, 0); end >= 0 {
			name = name[:end]
		}
		if !keep(name) {
			continue
		}
		s.Name = string(name)
		out = append(out, s)
	}
	return out, nil
}
