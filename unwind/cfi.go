package unwind

import (
	"fmt"
	"strings"
)

// CIE is a Common Information Entry: what the FDEs that point at it share.
type CIE struct {
	Offset       uint64 // of the entry in its section
	Version      uint8
	Augmentation string
	CodeAlign    uint64
	DataAlign    int64
	RAReg        uint64 // the return-address column
	FDEEncoding  byte   // 'R' augmentation; absptr by default
	Signal       bool   // 'S': FDEs describe a signal trampoline
	AddrSize     uint8
	SegSize      uint8
	Initial      []byte // initial instructions (a slice of the section)
	hasZ         bool

	// initial state, run once per CIE and architecture (see exec.go).
	init     *state
	initErr  error
	initArch Arch
}

// FDE is a Frame Description Entry: the CFA program for [Start, End).
type FDE struct {
	Offset       uint64 // of the entry in its section
	CIE          *CIE
	Start, End   uint64 // ELF virtual addresses
	Instructions []byte // a slice of the section
	Debug        bool   // from .debug_frame
	bases        ptrBases
	instrAddr    uint64 // virtual address of Instructions[0]
}

// CFI is the parsed content of one .eh_frame or .debug_frame section.
type CFI struct {
	FDEs []FDE
	CIEs int
	// Skipped counts entries dropped whole: a CIE with an augmentation or
	// version we cannot interpret, and the FDEs pointing at it or at no
	// CIE at all. A malformed entry's length still lets the walk go on.
	Skipped int
}

// cfiSection describes a section to parse.
type cfiSection struct {
	data  []byte
	addr  uint64 // virtual address of data[0], the base of pcrel pointers
	debug bool   // .debug_frame layout (CIE id ~0, absolute CIE pointers)
	bases ptrBases
	max   int // FDE limit
}

// ParseEhFrame parses a .eh_frame section whose first byte is at virtual
// address addr. On malformed data it returns the FDEs before the bad
// entry together with an error wrapping ErrMalformed (or ErrTooLarge past
// maxFDEs, 0 meaning the default limit).
func ParseEhFrame(data []byte, addr uint64, maxFDEs int) (*CFI, error) {
	return parseCFI(cfiSection{data: data, addr: addr, bases: ptrBases{secAddr: addr}, max: maxFDEs})
}

// ParseDebugFrame parses a .debug_frame section (DWARF 2-5, 32- and
// 64-bit formats), with the same partial-result contract as ParseEhFrame.
func ParseDebugFrame(data []byte, maxFDEs int) (*CFI, error) {
	return parseCFI(cfiSection{data: data, debug: true, max: maxFDEs})
}

func parseCFI(s cfiSection) (*CFI, error) {
	if s.max <= 0 {
		s.max = defaultMaxFDEs
	}
	p := &cfiParser{s: s, cies: map[uint64]*CIE{}}
	out := &CFI{}
	defer func() {
		for _, c := range p.cies {
			if c != nil {
				out.CIEs++
			}
		}
	}()
	for off := uint64(0); off < uint64(len(s.data)); {
		e, err := p.entry(off)
		if err != nil {
			return out, fmt.Errorf("%s entry at %#x: %w", p.name(), off, err)
		}
		if e.end == 0 { // .eh_frame terminator
			break
		}
		off = e.end
		switch {
		case e.pad:
		case e.isCIE:
			if _, err := p.cie(e); err != nil {
				out.Skipped++
			}
		default:
			fde, ok := p.fde(e)
			if !ok {
				out.Skipped++
				continue
			}
			if len(out.FDEs) >= s.max {
				return out, fmt.Errorf("%s has more than %d FDEs: %w", p.name(), s.max, ErrTooLarge)
			}
			out.FDEs = append(out.FDEs, fde)
		}
	}
	return out, nil
}

type cfiParser struct {
	s    cfiSection
	cies map[uint64]*CIE // by offset; nil for a CIE that could not be used
}

func (p *cfiParser) name() string {
	if p.s.debug {
		return ".debug_frame"
	}
	return ".eh_frame"
}

// rawEntry is one length-delimited entry: body is what follows the
// CIE-id / CIE-pointer field, up to the entry's end.
type rawEntry struct {
	off, end uint64
	isCIE    bool
	pad      bool   // zero-length padding in .debug_frame
	cieOff   uint64 // FDEs: the CIE they point at
	body     []byte
	bodyOff  uint64 // section offset of body[0]
	dwarf64  bool
}

func (p *cfiParser) entry(off uint64) (rawEntry, error) {
	r := reader{b: p.s.data, off: int(off)}
	length := uint64(r.u32())
	dwarf64 := false
	if length == 0xffffffff {
		length = r.u64()
		dwarf64 = true
	}
	if r.err != nil {
		return rawEntry{}, r.err
	}
	if length == 0 {
		if !p.s.debug {
			return rawEntry{off: off}, nil
		}
		// A zero length is padding in .debug_frame, not an end marker.
		return rawEntry{off: off, end: uint64(r.off), pad: true}, nil
	}
	start := uint64(r.off)
	if length > uint64(r.left()) {
		return rawEntry{}, fmt.Errorf("length %#x runs past the end of the %d-byte section: %w", length, len(p.s.data), ErrMalformed)
	}
	end := start + length
	idOff := start
	var id uint64
	if dwarf64 && p.s.debug {
		id = r.u64()
	} else {
		id = uint64(r.u32())
	}
	if r.err != nil || uint64(r.off) > end {
		return rawEntry{}, fmt.Errorf("entry too short for its id: %w", ErrMalformed)
	}
	e := rawEntry{off: off, end: end, dwarf64: dwarf64, body: p.s.data[r.off:end], bodyOff: uint64(r.off)}
	if p.s.debug {
		e.isCIE = !dwarf64 && id == 0xffffffff || dwarf64 && id == ^uint64(0)
		e.cieOff = id
	} else {
		e.isCIE = id == 0
		// The CIE pointer counts back from the pointer field itself.
		if id > idOff {
			e.cieOff = ^uint64(0) // no such CIE; fde() drops it
		} else {
			e.cieOff = idOff - id
		}
	}
	return e, nil
}

// cie parses (once) the CIE entry e.
func (p *cfiParser) cie(e rawEntry) (*CIE, error) {
	if c, ok := p.cies[e.off]; ok {
		if c == nil {
			return nil, errBadCIE
		}
		return c, nil
	}
	c, err := p.parseCIE(e)
	if err != nil {
		p.cies[e.off] = nil
		return nil, err
	}
	p.cies[e.off] = c
	return c, nil
}

var errBadCIE = fmt.Errorf("unusable CIE: %w", ErrMalformed)

func (p *cfiParser) parseCIE(e rawEntry) (*CIE, error) {
	r := reader{b: e.body}
	c := &CIE{Offset: e.off, AddrSize: 8, FDEEncoding: peAbsptr}
	c.Version = r.u8()
	switch c.Version {
	case 1, 3:
	case 4:
		if !p.s.debug {
			return nil, errBadCIE
		}
	default:
		return nil, errBadCIE
	}
	c.Augmentation = r.cstring(64)
	aug := c.Augmentation
	if strings.HasPrefix(aug, "eh") {
		// Pre-2.95 GCC: an EH data pointer follows; skip it.
		r.u64()
		aug = aug[2:]
	}
	if c.Version == 4 {
		c.AddrSize = r.u8()
		c.SegSize = r.u8()
		if c.AddrSize != 8 && c.AddrSize != 4 || c.SegSize > 8 {
			return nil, errBadCIE
		}
	}
	c.CodeAlign = r.uleb()
	c.DataAlign = r.sleb()
	if c.Version == 1 {
		c.RAReg = uint64(r.u8())
	} else {
		c.RAReg = r.uleb()
	}
	if r.err != nil {
		return nil, errBadCIE
	}
	if c.CodeAlign == 0 || c.CodeAlign > 1<<16 || c.DataAlign == 0 || c.DataAlign < -(1<<16) || c.DataAlign > 1<<16 {
		return nil, errBadCIE
	}
	if strings.HasPrefix(aug, "z") {
		c.hasZ = true
		n := r.uleb()
		augData := r.bytes(n)
		if r.err != nil {
			return nil, errBadCIE
		}
		ar := reader{b: augData}
	letters:
		for _, ch := range aug[1:] {
			switch ch {
			case 'L':
				enc := ar.u8()
				if !validEncoding(enc, true) {
					return nil, errBadCIE
				}
			case 'P':
				enc := ar.u8()
				if !validEncoding(enc, true) {
					return nil, errBadCIE
				}
				// The personality routine is read only to step over it, so
				// any relative base will do except for the alignment of
				// aligned pointers, which needs the real address.
				at := p.s.addr + e.bodyOff + uint64(r.off-len(augData))
				ar.encoded(enc, &ptrBases{secAddr: at, haveData: true, haveText: true})
			case 'R':
				c.FDEEncoding = ar.u8()
				if !validEncoding(c.FDEEncoding, false) || c.FDEEncoding == peOmit {
					return nil, errBadCIE
				}
			case 'S':
				c.Signal = true
			case 'B', 'G':
				// AArch64 pointer-authentication B key, MTE tagged frames:
				// neither changes where registers are saved.
			default:
				// As libgcc: with 'z' an unknown letter ends the string,
				// the length already told us where the data ends.
				break letters
			}
		}
		if ar.err != nil {
			return nil, errBadCIE
		}
	} else if aug != "" {
		return nil, errBadCIE
	}
	if p.s.debug {
		// .debug_frame addresses are plain target addresses.
		if c.AddrSize == 4 {
			c.FDEEncoding = peUdata4
		} else {
			c.FDEEncoding = peUdata8
		}
	}
	c.Initial = e.body[r.off:]
	return c, nil
}

func (p *cfiParser) fde(e rawEntry) (FDE, bool) {
	if e.cieOff >= uint64(len(p.s.data)) {
		return FDE{}, false
	}
	c, ok := p.cies[e.cieOff]
	if !ok {
		// A forward reference (legal in .debug_frame): parse it now.
		ce, err := p.entry(e.cieOff)
		if err != nil || !ce.isCIE || ce.end == 0 {
			p.cies[e.cieOff] = nil
			return FDE{}, false
		}
		c, _ = p.cie(ce)
	}
	if c == nil {
		return FDE{}, false
	}
	r := reader{b: e.body}
	b := p.s.bases
	b.secAddr = p.s.addr + e.bodyOff
	if c.SegSize > 0 {
		r.bytes(uint64(c.SegSize))
	}
	start := r.encoded(c.FDEEncoding, &b)
	// The range has the encoding's size but is never relative.
	length := r.encoded(c.FDEEncoding&0x0f, &b)
	if c.hasZ {
		n := r.uleb()
		r.bytes(n)
	}
	if r.err != nil || start+length < start {
		return FDE{}, false
	}
	b.funcRel = start
	return FDE{
		Offset:       e.off,
		CIE:          c,
		Start:        start,
		End:          start + length,
		Instructions: e.body[r.off:],
		Debug:        p.s.debug,
		bases:        b,
		instrAddr:    p.s.addr + e.bodyOff + uint64(r.off),
	}, true
}
