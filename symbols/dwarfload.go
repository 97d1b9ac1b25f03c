package symbols

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// dwarfSections are the debug sections a source lookup reads: the line
// tables, the units' entries and what their forms refer to. debug/elf's
// DWARF reads every .debug_ section, the location lists and call frames
// too, all decompressed, and debug/dwarf then ignores them: in the C
// library's debug file the location lists alone are a fifth of the data.
var dwarfSections = map[string]bool{
	"abbrev": true, "info": true, "str": true, "line": true, "ranges": true,
	"addr": true, "line_str": true, "str_offsets": true, "rnglists": true, "types": true,
}

// loadDWARF is debug/elf's File.DWARF for a linked file (executable or
// shared object, whose debug sections need no relocation), reading only
// dwarfSections and decompressing them straight into buffers of their
// size. Anything else (a relocatable object, GNU's old .zdebug sections)
// is left to debug/elf. The sections' extents and sizes are checked
// (elfFile.checkSection) before this reads them.
func loadDWARF(e *elfFile) (*dwarf.Data, error) {
	f := e.f
	if f.Type == elf.ET_REL {
		return f.DWARF()
	}
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".zdebug_") {
			return f.DWARF()
		}
	}
	dat := map[string][]byte{}
	var types []int
	for i, s := range f.Sections {
		suffix, ok := strings.CutPrefix(s.Name, ".debug_")
		if !ok || !dwarfSections[suffix] {
			continue
		}
		if suffix == "types" {
			types = append(types, i)
			continue
		}
		b, err := e.sectionBytes(s)
		if err != nil {
			return nil, fmt.Errorf("section %s: %w", s.Name, err)
		}
		dat[suffix] = b
	}
	d, err := dwarf.New(dat["abbrev"], nil, nil, dat["info"], dat["line"], nil, dat["ranges"], dat["str"])
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"addr", "line_str", "str_offsets", "rnglists"} {
		if b, ok := dat[name]; ok {
			if err := d.AddSection(".debug_"+name, b); err != nil {
				return nil, err
			}
		}
	}
	for _, i := range types {
		b, err := e.sectionBytes(f.Sections[i])
		if err != nil {
			return nil, fmt.Errorf("section %s: %w", f.Sections[i].Name, err)
		}
		if err := d.AddTypes(fmt.Sprintf("types-%d", i), b); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// maxZstdWindow bounds the memory a zstd section's window may ask for:
// zstd's own default limit.
const maxZstdWindow = 128 << 20

// sectionBytes is s's contents, decompressed when it is SHF_COMPRESSED
// with zlib or zstd into one buffer of the size its header gives (s.Size,
// which debug/elf took from that header and checkSection bounded).
func (e *elfFile) sectionBytes(s *elf.Section) ([]byte, error) {
	if s.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	if s.Flags&elf.SHF_COMPRESSED == 0 || e.r == nil {
		return s.Data()
	}
	hdr := uint64(24) // Elf64_Chdr
	if e.f.Class == elf.ELFCLASS32 {
		hdr = 12 // Elf32_Chdr
	}
	if s.FileSize < hdr {
		return nil, errors.New("compressed section shorter than its header")
	}
	raw := make([]byte, s.FileSize)
	if _, err := e.r.ReadAt(raw, int64(s.Offset)); err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	out := make([]byte, s.Size)
	var err error
	switch elf.CompressionType(e.f.ByteOrder.Uint32(raw)) {
	case elf.COMPRESS_ZLIB:
		var zr io.ReadCloser
		if zr, err = zlib.NewReader(bytes.NewReader(raw[hdr:])); err == nil {
			_, err = io.ReadFull(zr, out)
			zr.Close()
		}
	case elf.COMPRESS_ZSTD:
		var zd *zstd.Decoder
		if zd, err = zstd.NewReader(bytes.NewReader(raw[hdr:]), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow)); err == nil {
			_, err = io.ReadFull(zd, out)
			zd.Close()
		}
	default:
		return s.Data() // debug/elf's own error for a kind it does not know
	}
	if err != nil {
		return nil, fmt.Errorf("decompressing: %w", err)
	}
	return out, nil
}
