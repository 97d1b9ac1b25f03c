package symbols

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
)

// Limits bounds what the package reads from one file, so a crafted or
// truncated file cannot make it allocate without bound.
type Limits struct {
	// MaxSection is the largest section (after decompression) read into
	// memory. Default 1 GiB.
	MaxSection int64
	// MaxMiniDebugInfo bounds the decompressed .gnu_debugdata payload.
	// Default 64 MiB.
	MaxMiniDebugInfo int64
	// MaxSymbols bounds the entries kept from one symbol table.
	// Default 8 Mi.
	MaxSymbols int
}

func (l *Limits) fill() {
	if l.MaxSection <= 0 {
		l.MaxSection = 1 << 30
	}
	if l.MaxMiniDebugInfo <= 0 {
		l.MaxMiniDebugInfo = 64 << 20
	}
	if l.MaxSymbols <= 0 {
		l.MaxSymbols = 8 << 20
	}
}

// guard turns a panic inside debug/elf, debug/dwarf or our own table code
// into ErrMalformed. The standard library does not promise to be panic-free
// on hostile input, and a tracer must never die because of one odd file.
func guard(what string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: %w (internal panic: %v)", what, ErrMalformed, r)
	}
}

// elfFile is a parsed ELF header set plus the size of the underlying data,
// which every section read is checked against.
type elfFile struct {
	f    *elf.File
	r    io.ReaderAt // the file: a compressed section's raw bytes (loadDWARF)
	size int64
	lim  Limits
}

func openELF(r io.ReaderAt, size int64, lim Limits) (ef *elfFile, err error) {
	defer guard("parsing ELF headers", &err)
	var magic [4]byte
	if _, err := r.ReadAt(magic[:], 0); err != nil || string(magic[:]) != elf.ELFMAG {
		return nil, ErrNotELF
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return &elfFile{f: f, r: r, size: size, lim: lim}, nil
}

// section returns the named section if it has file contents.
func (e *elfFile) section(name string) *elf.Section {
	s := e.f.Section(name)
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil
	}
	return s
}

// data reads a section after checking it lies inside the file and within
// the size limit.
func (e *elfFile) data(s *elf.Section) (b []byte, err error) {
	defer guard("reading section "+s.Name, &err)
	if s.Type == elf.SHT_NOBITS {
		return nil, fmt.Errorf("section %s has no data in this file: %w", s.Name, ErrNotFound)
	}
	if s.Offset > uint64(e.size) || s.FileSize > uint64(e.size)-s.Offset {
		return nil, fmt.Errorf("section %s [%#x+%#x] runs past the end of the %d-byte file: %w",
			s.Name, s.Offset, s.FileSize, e.size, ErrMalformed)
	}
	if s.Size > uint64(e.lim.MaxSection) {
		return nil, fmt.Errorf("section %s is %d bytes (limit %d): %w", s.Name, s.Size, e.lim.MaxSection, ErrTooLarge)
	}
	b, err = s.Data()
	if err != nil {
		return nil, fmt.Errorf("reading section %s: %w: %w", s.Name, ErrMalformed, err)
	}
	return b, nil
}

// buildID returns the GNU build ID as lower-case hex, or "".
func (e *elfFile) buildID() string {
	if s := e.section(".note.gnu.build-id"); s != nil {
		if b, err := e.data(s); err == nil {
			if id := parseBuildIDNote(b, e.f.ByteOrder); id != "" {
				return id
			}
		}
	}
	// Some linkers name the note differently; the PT_NOTE segments are
	// authoritative.
	for _, p := range e.f.Progs {
		if p.Type != elf.PT_NOTE || p.Filesz > 1<<20 || p.Off > uint64(e.size) || p.Filesz > uint64(e.size)-p.Off {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			continue
		}
		if id := parseBuildIDNote(b, e.f.ByteOrder); id != "" {
			return id
		}
	}
	return ""
}

func parseBuildIDNote(b []byte, bo binary.ByteOrder) string {
	for len(b) >= 12 {
		namesz := uint64(bo.Uint32(b[0:]))
		descsz := uint64(bo.Uint32(b[4:]))
		typ := bo.Uint32(b[8:])
		b = b[12:]
		nameEnd := (namesz + 3) &^ 3
		descEnd := (descsz + 3) &^ 3
		if nameEnd > uint64(len(b)) || descEnd > uint64(len(b))-nameEnd {
			return ""
		}
		name := b[:namesz]
		desc := b[nameEnd : nameEnd+descsz]
		b = b[nameEnd+descEnd:]
		if typ == 3 && bytes.Equal(bytes.TrimRight(name, "\x00"), []byte("GNU")) && len(desc) > 0 {
			return hex.EncodeToString(desc)
		}
	}
	return ""
}

// debugLink returns the .gnu_debuglink file name and CRC32.
func (e *elfFile) debugLink() (string, uint32, bool) {
	s := e.section(".gnu_debuglink")
	if s == nil {
		return "", 0, false
	}
	b, err := e.data(s)
	if err != nil {
		return "", 0, false
	}
	nul := bytes.IndexByte(b, 0)
	if nul <= 0 {
		return "", 0, false
	}
	crcOff := (nul + 4) &^ 3
	if crcOff+4 > len(b) {
		return "", 0, false
	}
	name := string(b[:nul])
	if bytes.ContainsRune(b[:nul], '/') {
		// A link is a bare file name; a path could escape the search dirs.
		return "", 0, false
	}
	return name, e.f.ByteOrder.Uint32(b[crcOff:]), true
}

// hasDWARF reports whether the file carries line tables we could use.
func (e *elfFile) hasDWARF() bool {
	for _, n := range []string{".debug_info", ".zdebug_info"} {
		if e.section(n) != nil {
			return true
		}
	}
	return false
}

// load is one PT_LOAD segment, used to turn a file offset (from a mapping)
// into the ELF virtual address that symbol and line tables use.
type load struct {
	off, vaddr, filesz, memsz uint64
}

func (e *elfFile) loads() []load {
	var ls []load
	for _, p := range e.f.Progs {
		if p.Type == elf.PT_LOAD {
			ls = append(ls, load{p.Off, p.Vaddr, p.Filesz, p.Memsz})
		}
	}
	return ls
}
