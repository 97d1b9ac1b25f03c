package symbols

import (
	"cmp"
	"debug/elf"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// sym is one code symbol. Names are kept exactly as in the ELF file
// (mangled); the rank picks between aliases at the same address.
type sym struct {
	addr, size uint64
	// end bounds an unsized symbol: the end of its section (0: not
	// known). Past it lie other sections (.fini's last label is no name
	// for a .bss address).
	end  uint64
	name string
	rank uint8 // lower is preferred
}

// symtab is an address-sorted table of code symbols, one per address.
type symtab struct {
	syms    []sym
	aliases []sym // names dropped by de-duplication, still found by value()

	nameOnce sync.Once
	byName   map[string]uint64
}

// symbol kinds we keep: functions, ifunc resolvers, and untyped labels in
// executable sections (hand-written assembly rarely sets STT_FUNC).
func keepSymbol(f *elf.File, s *elf.Symbol) bool {
	if s.Value == 0 || s.Name == "" || s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE {
		return false
	}
	switch elf.ST_TYPE(s.Info) {
	case elf.STT_FUNC, elf.STT_GNU_IFUNC:
		return true
	case elf.STT_NOTYPE:
		if int(s.Section) >= len(f.Sections) {
			return false
		}
		if f.Sections[s.Section].Flags&elf.SHF_EXECINSTR == 0 {
			return false
		}
		// ARM/AArch64 mapping symbols ($x, $d, $a, $t) mark code/data
		// boundaries; they are not names anyone wants to see.
		return s.Name[0] != '$' && !strings.HasPrefix(s.Name, ".L")
	}
	return false
}

func symRank(s *elf.Symbol) uint8 {
	var r uint8
	switch elf.ST_BIND(s.Info) {
	case elf.STB_GLOBAL:
		r = 0
	case elf.STB_WEAK:
		r = 1
	default:
		r = 2
	}
	if elf.ST_TYPE(s.Info) == elf.STT_NOTYPE {
		r += 4
	}
	if s.Size == 0 {
		r += 8
	}
	return r
}

// symbolsFrom appends the code symbols of one ELF symbol table.
func symbolsFrom(e *elfFile, dynamic bool, out []sym) (res []sym, err error) {
	defer guard("reading symbol table", &err)
	name := ".symtab"
	if dynamic {
		name = ".dynsym"
	}
	s := e.f.Section(name)
	if s == nil || s.Type == elf.SHT_NOBITS {
		return out, nil
	}
	// Check the table and its string table before the standard library
	// reads them whole.
	if _, err := e.checkSection(s); err != nil {
		return out, err
	}
	if int(s.Link) < len(e.f.Sections) {
		if _, err := e.checkSection(e.f.Sections[s.Link]); err != nil {
			return out, err
		}
	}
	var ss []elf.Symbol
	if dynamic {
		ss, err = e.f.DynamicSymbols()
	} else {
		ss, err = e.f.Symbols()
	}
	if err != nil {
		return out, fmt.Errorf("reading %s: %w: %w", name, ErrMalformed, err)
	}
	for i := range ss {
		if len(out) >= e.lim.MaxSymbols {
			return out, fmt.Errorf("%s has more than %d symbols: %w", name, e.lim.MaxSymbols, ErrTooLarge)
		}
		if keepSymbol(e.f, &ss[i]) {
			sy := sym{addr: ss[i].Value, size: ss[i].Size, name: ss[i].Name, rank: symRank(&ss[i])}
			if sy.size == 0 && int(ss[i].Section) < len(e.f.Sections) {
				sec := e.f.Sections[ss[i].Section]
				if sec.Addr <= sy.addr && sy.addr-sec.Addr < sec.Size {
					sy.end = sec.Addr + sec.Size
				}
			}
			out = append(out, sy)
		}
	}
	return out, nil
}

// checkSection validates a section's extent without reading it.
func (e *elfFile) checkSection(s *elf.Section) (*elf.Section, error) {
	if s.Type == elf.SHT_NOBITS {
		return s, nil
	}
	if s.Offset > uint64(e.size) || s.FileSize > uint64(e.size)-s.Offset {
		return nil, fmt.Errorf("section %s runs past the end of the file: %w", s.Name, ErrMalformed)
	}
	if s.Size > uint64(e.lim.MaxSection) {
		return nil, fmt.Errorf("section %s is %d bytes (limit %d): %w", s.Name, s.Size, e.lim.MaxSection, ErrTooLarge)
	}
	return s, nil
}

// newSymtab sorts and de-duplicates: at one address the preferred alias
// wins (global over weak over local, typed over untyped, sized over
// unsized, then the shorter name, then lexical order for determinism).
func newSymtab(ss []sym) *symtab {
	slices.SortFunc(ss, func(a, b sym) int {
		if c := cmp.Compare(a.addr, b.addr); c != 0 {
			return c
		}
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.name), len(b.name)); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	out := ss[:0]
	var aliases []sym
	for i := range ss {
		if len(out) > 0 && out[len(out)-1].addr == ss[i].addr {
			if ss[i].name != out[len(out)-1].name {
				aliases = append(aliases, ss[i])
			}
			// Keep the preferred name but the largest known size, so an
			// unsized preferred alias still covers its body.
			if ss[i].size > out[len(out)-1].size && out[len(out)-1].size == 0 {
				out[len(out)-1].size = ss[i].size
			}
			out[len(out)-1].end = max(out[len(out)-1].end, ss[i].end)
			continue
		}
		out = append(out, ss[i])
	}
	return &symtab{syms: slices.Clip(out), aliases: aliases}
}

// maxNestedScan bounds how far lookup walks back looking for a sized symbol
// that encloses the address (a function containing untyped local labels).
const maxNestedScan = 16

// lookup finds the symbol covering vaddr.
func (t *symtab) lookup(vaddr uint64) (sym, bool) {
	if t == nil {
		return sym{}, false
	}
	i, found := slices.BinarySearchFunc(t.syms, vaddr, func(s sym, v uint64) int { return cmp.Compare(s.addr, v) })
	if !found {
		i--
	}
	if i < 0 {
		return sym{}, false
	}
	for j := i; j >= 0 && j > i-maxNestedScan; j-- {
		s := t.syms[j]
		if s.size > 0 && vaddr-s.addr < s.size {
			return s, true
		}
	}
	// An unsized symbol covers everything up to the next symbol, within
	// its section.
	if s := t.syms[i]; s.size == 0 && (s.end == 0 || vaddr < s.end) {
		return s, true
	}
	return sym{}, false
}

// at finds the symbol starting exactly at vaddr.
func (t *symtab) at(vaddr uint64) (sym, bool) {
	if t == nil {
		return sym{}, false
	}
	i, found := slices.BinarySearchFunc(t.syms, vaddr, func(s sym, v uint64) int { return cmp.Compare(s.addr, v) })
	if !found {
		return sym{}, false
	}
	return t.syms[i], true
}

// value returns the address of a named symbol (mangled, as in the ELF).
func (t *symtab) value(name string) (uint64, bool) {
	if t == nil {
		return 0, false
	}
	t.nameOnce.Do(func() {
		t.byName = make(map[string]uint64, len(t.syms))
		for _, list := range [][]sym{t.syms, t.aliases} {
			for _, s := range list {
				if _, dup := t.byName[s.name]; !dup {
					t.byName[s.name] = s.addr
				}
			}
		}
	})
	v, ok := t.byName[name]
	return v, ok
}
