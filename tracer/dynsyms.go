//go:build amd64 || arm64

package tracer

import (
	"bytes"
	"debug/elf"
)

// dynamicSymbolValues is the value of each of names among f's dynamic
// symbols (the last one so named, as a scan of DynamicSymbols would
// find), read from .dynsym and its string table in place: DynamicSymbols
// makes a string and a symbol of every one of a library's thousands, and
// asking whether a file is the dynamic linker that way, on every library
// a start-up probes, showed in every start-up's profile.
func dynamicSymbolValues(f *elf.File, names ...string) (map[string]uint64, error) {
	syms, strs, err := symbolSection(f, elf.SHT_DYNSYM)
	if err != nil {
		return nil, err
	}
	size := elf.Sym64Size
	if f.Class == elf.ELFCLASS32 {
		size = elf.Sym32Size
	}
	out := map[string]uint64{}
	bo := f.ByteOrder
	// Entry 0 is the null symbol.
	for off := size; off+size <= len(syms); off += size {
		e := syms[off : off+size]
		at := int(bo.Uint32(e[0:4]))
		if at >= len(strs) {
			continue
		}
		s := strs[at:]
		for _, n := range names {
			if len(s) > len(n) && s[len(n)] == 0 && bytes.HasPrefix(s, []byte(n)) {
				if f.Class == elf.ELFCLASS32 {
					out[n] = uint64(bo.Uint32(e[4:8]))
				} else {
					out[n] = bo.Uint64(e[8:16])
				}
			}
		}
	}
	return out, nil
}
