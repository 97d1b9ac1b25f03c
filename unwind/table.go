package unwind

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
)

// Limits bounds what one file may make the builder read or allocate.
type Limits struct {
	// MaxSection is the largest CFI section (or PT_GNU_EH_FRAME segment)
	// read, after decompression. Default 256 MiB (libLLVM 19's .eh_frame is
	// 6 MiB).
	MaxSection int64
	// MaxFDEs bounds the FDEs kept from one section. Default 8 Mi.
	MaxFDEs int
	// MaxRows bounds the rows of one table. Default 32 Mi (256 MiB).
	MaxRows int
}

const (
	defaultMaxSection = 256 << 20
	defaultMaxFDEs    = 8 << 20
	defaultMaxRows    = 32 << 20
)

func (l *Limits) fill() {
	if l.MaxSection <= 0 {
		l.MaxSection = defaultMaxSection
	}
	if l.MaxFDEs <= 0 {
		l.MaxFDEs = defaultMaxFDEs
	}
	if l.MaxRows <= 0 {
		l.MaxRows = defaultMaxRows
	}
}

// Options tune BuildTable. The zero value is the default.
type Options struct {
	Limits
	// NoDebugFrame ignores .debug_frame.
	NoDebugFrame bool
	// SeparateDebug, when set, opens the file's separate debug file (its
	// build-id or debuglink file) for its .debug_frame. It is called only
	// when the file itself has no .debug_frame and its .eh_frame covers
	// less than half of its code (the C runtime's few FDEs): a binary
	// stripped of the CFI it was built with (-fno-asynchronous-unwind-
	// tables keeps it in .debug_frame only). Every other file costs no
	// lookup. done closes what it opened; a nil r means there is none.
	SeparateDebug func() (r io.ReaderAt, size int64, done func())
}

// Segment is an executable PT_LOAD segment of the file.
type Segment struct {
	Vaddr, Memsz, Offset, Filesz uint64
}

// Stats describes how a table was built.
type Stats struct {
	EhFrameFDEs    int  // FDEs from .eh_frame in the table
	DebugFrameFDEs int  // FDEs from .debug_frame where .eh_frame had none
	DebugFrameDup  int  // .debug_frame FDEs dropped: .eh_frame covers them
	SeparateDebug  bool // the .debug_frame came from the separate debug file
	OutsideText    int  // FDEs outside every executable segment (discarded code)
	Overlapping    int  // FDEs cut short where the next one starts
	Skipped        int  // entries the parser could not use
	BadPrograms    int  // FDEs whose program failed part way (rest unsupported)
	SyntheticPLT   int  // PLT sections without FDEs given a synthesized rule
	FromHdr        bool // .eh_frame located through PT_GNU_EH_FRAME
	Rows           int
	Bytes          int
	RowsByType     [8]int // indexed by CFAType
	SignalRows     int
	Extended       int // distinct extended rules (Table.Extended)
	// Problems are the first few parse errors (malformed CFI is skipped,
	// not fatal); they name offsets, never file contents.
	Problems []string
}

const maxProblems = 8

// MinGap is the shortest range without an FDE that gets a gap row.
const MinGap = 16

func (s *Stats) problem(err error) {
	if len(s.Problems) < maxProblems {
		s.Problems = append(s.Problems, err.Error())
	}
}

// Table is the unwind table of one ELF file.
type Table struct {
	Arch Arch
	// Base is the ELF virtual address of row PC 0: the lowest executable
	// segment's p_vaddr. A runtime PC maps to row space as
	// pc - bias - Base, bias being the mapping's load bias (see Bias).
	Base uint64
	Rows []Row
	// Extended holds the rules CFAExtended rows index (see ExtRule).
	Extended []ExtRule
	Segments []Segment
	Stats    Stats
}

// BuildTableFile builds the table of the ELF file at path.
func BuildTableFile(path string, opts *Options) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s for its unwind table: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	t, err := BuildTable(f, st.Size(), opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// BuildTable builds the unwind table of an ELF file of size bytes. It
// fails only when the file has no usable CFI at all; malformed entries are
// skipped and counted in Stats.
func BuildTable(r io.ReaderAt, size int64, opts *Options) (t *Table, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.fill()
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("building unwind table: %w (internal panic: %v)", ErrMalformed, p)
		}
	}()
	var magic [4]byte
	if _, err := r.ReadAt(magic[:], 0); err != nil || string(magic[:]) != elf.ELFMAG {
		return nil, ErrNotELF
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("reading ELF headers: %w: %w", ErrMalformed, err)
	}
	b := &builder{f: f, size: size, opts: o, t: &Table{}}
	return b.build()
}

type builder struct {
	f    *elf.File
	size int64
	opts Options
	t    *Table
	ext  map[ExtRule]uint16
	plts []pltSection
}

// encode turns ru into a row, storing an extended rule when it needs one.
func (b *builder) encode(ru Rule) Row {
	row, ext, _ := encodeRule(ru, b.t.Arch)
	if ext == nil {
		return row
	}
	idx, ok := b.ext[*ext]
	if !ok {
		if len(b.t.Extended) >= MaxExtended {
			return Row{Info: uint8(CFAUnsupported) | row.Info&RowSignalBit}
		}
		if b.ext == nil {
			b.ext = map[ExtRule]uint16{}
		}
		idx = uint16(len(b.t.Extended))
		b.ext[*ext] = idx
		b.t.Extended = append(b.t.Extended, *ext)
	}
	row.CFA = idx
	return row
}

func (b *builder) build() (*Table, error) {
	f, t := b.f, b.t
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB {
		return nil, fmt.Errorf("%v %v file: only 64-bit little-endian is supported: %w", f.Class, f.Data, ErrUnsupportedArch)
	}
	switch f.Machine {
	case elf.EM_X86_64:
		t.Arch = ArchAMD64
	case elf.EM_AARCH64:
		t.Arch = ArchARM64
	default:
		return nil, fmt.Errorf("machine %v: %w", f.Machine, ErrUnsupportedArch)
	}
	t.Base = math.MaxUint64
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Memsz > 0 {
			t.Segments = append(t.Segments, Segment{Vaddr: p.Vaddr, Memsz: p.Memsz, Offset: p.Off, Filesz: p.Filesz})
			t.Base = min(t.Base, p.Vaddr)
		}
	}
	if len(t.Segments) == 0 {
		return nil, fmt.Errorf("no executable segment: %w", ErrNoCFI)
	}

	for _, s := range f.Sections {
		if s.Size > 0 && (s.Name == ".plt" || s.Name == ".iplt" || s.Name == ".plt.got" || s.Name == ".plt.sec") {
			b.plts = append(b.plts, pltSection{name: s.Name, addr: s.Addr, size: s.Size})
		}
	}
	eh, ehErr := b.ehFrame()
	if ehErr != nil {
		t.Stats.problem(ehErr)
	}
	var dbg *CFI
	if !b.opts.NoDebugFrame {
		var err error
		if dbg, err = b.debugFrame(); err != nil {
			t.Stats.problem(err)
		}
		if dbg == nil && b.opts.SeparateDebug != nil && b.sparse(eh) {
			if dbg, err = b.separateDebugFrame(); err != nil {
				t.Stats.problem(err)
			}
			t.Stats.SeparateDebug = dbg != nil && len(dbg.FDEs) > 0
		}
	}
	if err := b.assemble(eh, dbg); err != nil {
		if errors.Is(err, ErrNoCFI) && ehErr != nil {
			return nil, ehErr
		}
		return nil, err
	}
	return t, nil
}

// pltSection is a PLT section, which may lack FDEs.
type pltSection struct {
	name       string
	addr, size uint64
}

// assemble builds t's rows from the parsed sections (either may be nil)
// and the PLT sections in b.plts.
func (b *builder) assemble(eh, dbg *CFI) error {
	t := b.t
	var spans []span
	if eh != nil {
		t.Stats.Skipped += eh.Skipped
		for i := range eh.FDEs {
			if s, ok := b.span(&eh.FDEs[i]); ok {
				spans = append(spans, s)
			}
		}
	}
	sortSpans(spans)
	t.Stats.EhFrameFDEs = len(spans)
	if dbg != nil {
		t.Stats.Skipped += dbg.Skipped
		var extra []span
		for i := range dbg.FDEs {
			s, ok := b.span(&dbg.FDEs[i])
			if !ok {
				continue
			}
			if overlapsAny(spans, s.start, s.end) {
				t.Stats.DebugFrameDup++
				continue
			}
			extra = append(extra, s)
		}
		t.Stats.DebugFrameFDEs = len(extra)
		spans = append(spans, extra...)
	}
	sortSpans(spans)
	spans = append(spans, b.syntheticPLT(spans)...)
	sortSpans(spans)
	if len(spans) == 0 {
		return fmt.Errorf("no FDE covers the executable segments: %w", ErrNoCFI)
	}
	if err := b.rows(spans); err != nil {
		return err
	}
	t.Stats.Rows = len(t.Rows)
	t.Stats.Extended = len(t.Extended)
	t.Stats.Bytes = len(t.Rows)*RowSize + len(t.Extended)*ExtSize
	for _, r := range t.Rows {
		t.Stats.RowsByType[r.CFAType()]++
		if r.Info&RowSignalBit != 0 {
			t.Stats.SignalRows++
		}
	}
	return nil
}

// span is one address range with its source of rules.
type span struct {
	start, end uint64
	fde        *FDE
	synth      *Rule
}

func sortSpans(s []span) {
	// Stable: on equal starts, the earlier source (.eh_frame) wins.
	slices.SortStableFunc(s, func(a, b span) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
}

func overlapsAny(sorted []span, start, end uint64) bool {
	i := sort.Search(len(sorted), func(i int) bool { return sorted[i].end > start })
	return i < len(sorted) && sorted[i].start < end
}

// span keeps f if its range is non-empty, inside an executable segment
// and expressible as u32 row PCs.
func (b *builder) span(f *FDE) (span, bool) {
	if f.End <= f.Start {
		return span{}, false
	}
	if !b.inText(f.Start, f.End) || f.End-b.t.Base > math.MaxUint32 {
		b.t.Stats.OutsideText++
		return span{}, false
	}
	return span{start: f.Start, end: f.End, fde: f}, true
}

func (b *builder) inText(start, end uint64) bool {
	for _, s := range b.t.Segments {
		if start >= s.Vaddr && end <= s.Vaddr+s.Memsz && end >= start {
			return true
		}
	}
	return false
}

// syntheticPLT gives PLT sections without any FDE their one fixed rule,
// where that rule is certain: arm64 stubs never touch sp or x30, and
// x86-64 .plt.got / .plt.sec entries are a single indirect jump.
func (b *builder) syntheticPLT(spans []span) []span {
	var out []span
	for _, s := range b.plts {
		var ru Rule
		switch {
		case b.t.Arch == ArchARM64 && (s.name == ".plt" || s.name == ".iplt"):
			ru = Rule{CFA: CFASP, RA: RAInLR}
		case b.t.Arch == ArchAMD64 && (s.name == ".plt.got" || s.name == ".plt.sec"):
			ru = Rule{CFA: CFASP, CFAOffset: 8, RA: RAAtCFA, RAOffset: -8}
		default:
			continue
		}
		end := s.addr + s.size
		if s.size == 0 || end < s.addr || !b.inText(s.addr, end) ||
			end-b.t.Base > math.MaxUint32 || overlapsAny(spans, s.addr, end) {
			continue
		}
		out = append(out, span{start: s.addr, end: end, synth: &ru})
		b.t.Stats.SyntheticPLT++
	}
	return out
}

var errTooManyRows = fmt.Errorf("unwind table has too many rows: %w", ErrTooLarge)

// rows runs every span's program and appends the merged rows.
func (b *builder) rows(spans []span) error {
	t := b.t
	t.Rows = make([]Row, 0, min(len(spans)*8, b.opts.MaxRows))
	var in interp
	var tooMany bool
	add := func(vaddr uint64, row Row) {
		row.PC = uint32(vaddr - t.Base)
		n := len(t.Rows)
		if n > 0 && t.Rows[n-1].PC == row.PC {
			t.Rows = t.Rows[:n-1]
			n--
		}
		if n > 0 && sameRule(t.Rows[n-1], row) {
			return
		}
		if n >= b.opts.MaxRows {
			tooMany = true
			return
		}
		t.Rows = append(t.Rows, row)
	}
	// One emit closure for all FDEs (not one allocation per FDE).
	var limit uint64
	var signal bool
	emit := func(pc uint64, st *state) {
		if pc < limit {
			add(pc, b.encode(st.rule(t.Arch, signal)))
		}
	}
	for i := range spans {
		s := &spans[i]
		limit = s.end
		if i+1 < len(spans) && spans[i+1].start < limit {
			limit = spans[i+1].start
			t.Stats.Overlapping++
		}
		if limit <= s.start {
			continue
		}
		if s.synth != nil {
			add(s.start, b.encode(*s.synth))
		} else {
			signal = s.fde.CIE.Signal
			at, err := in.runFDE(s.fde, t.Arch, emit)
			if err != nil {
				t.Stats.BadPrograms++
				t.Stats.problem(fmt.Errorf("FDE at %#x: %w", s.fde.Offset, err))
				if at < limit {
					sig := uint8(0)
					if signal {
						sig = RowSignalBit
					}
					add(max(at, s.start), Row{Info: uint8(CFAUnsupported) | sig})
				}
			}
		}
		// Padding between functions (under 16 bytes: the alignment
		// compilers use) never executes, and no call returns into it:
		// a return address whose call would be there was planted, as
		// makecontext plants __start_context's, and marks the outermost
		// frame of its stack, as it does for libgcc and gdb, which find
		// no FDE there. With the rule before it instead, the walk went on
		// past __start_context with the previous function's rule.
		if i+1 == len(spans) || spans[i+1].start-limit >= MinGap {
			add(limit, Row{Info: uint8(CFAGap)})
		} else if spans[i+1].start > limit {
			add(limit, Row{Info: uint8(CFAEnd)})
		}
		if tooMany {
			return fmt.Errorf("more than %d rows: %w", b.opts.MaxRows, errTooManyRows)
		}
	}
	return nil
}

// rule converts an interpreter state into a Rule for arch a.
func (s *state) rule(a Arch, signal bool) Rule {
	regs := regsOf(a)
	ru := Rule{Signal: signal}
	if s.ra.kind == ruleUndef {
		ru.CFA = CFAEnd
		return ru
	}
	switch s.cfa.kind {
	case cfaRegOff:
		switch s.cfa.reg {
		case regs.sp:
			ru.CFA = CFASP
		case regs.fp:
			ru.CFA = CFAFP
		default:
			return Rule{CFA: CFAUnsupported, Signal: signal}
		}
		ru.CFAOffset = s.cfa.off
	case cfaPLT:
		ru.CFA = CFAPLT
		ru.CFAOffset = s.cfa.off
		ru.PLTThreshold = s.cfa.thr
	default:
		return Rule{CFA: CFAUnsupported, Signal: signal}
	}
	switch s.ra.kind {
	case ruleOffset:
		ru.RA, ru.RAOffset = RAAtCFA, s.ra.off
	case ruleUnspec, ruleSame:
		if a != ArchARM64 {
			return Rule{CFA: CFAUnsupported, Signal: signal}
		}
		ru.RA = RAInLR
	default:
		return Rule{CFA: CFAUnsupported, Signal: signal}
	}
	switch s.fp.kind {
	case ruleUnspec, ruleSame:
		ru.FP = FPUnchanged
	case ruleOffset:
		ru.FP, ru.FPOffset = FPAtCFA, s.fp.off
	default:
		ru.FP = FPUnknown
	}
	return ru
}

// Lookup returns the rule at ELF virtual address vaddr. Callers unwinding
// a caller's frame look up the return address minus one (the call may be
// the last instruction of its function); the first frame, and a frame a
// signal interrupted, use their PC as is.
func (t *Table) Lookup(vaddr uint64) Rule {
	return t.RowRule(t.row(vaddr))
}

// RowRule decodes one of t's rows, resolving CFAExtended.
func (t *Table) RowRule(r Row) Rule {
	if r.CFAType() != CFAExtended {
		return r.Rule(t.Arch)
	}
	if int(r.CFA) >= len(t.Extended) {
		return Rule{CFA: CFAUnsupported, Signal: r.Info&RowSignalBit != 0}
	}
	return t.Extended[r.CFA].Rule(t.Arch)
}

func (t *Table) row(vaddr uint64) Row {
	if vaddr < t.Base || vaddr-t.Base > math.MaxUint32 {
		return Row{}
	}
	off := uint32(vaddr - t.Base)
	i := sort.Search(len(t.Rows), func(i int) bool { return t.Rows[i].PC > off })
	if i == 0 {
		return Row{}
	}
	return t.Rows[i-1]
}

// Bytes returns the rows in the row ABI, ready for a BPF map.
func (t *Table) Bytes() []byte {
	out := make([]byte, len(t.Rows)*RowSize)
	for i, r := range t.Rows {
		r.Put(out[i*RowSize:])
	}
	return out
}

// ExtendedBytes returns Extended in the extended-rule ABI.
func (t *Table) ExtendedBytes() []byte {
	out := make([]byte, len(t.Extended)*ExtSize)
	for i, e := range t.Extended {
		e.Put(out[i*ExtSize:])
	}
	return out
}

// Bias returns the load bias (runtime address - ELF vaddr) of a mapping
// of this file that starts at mapStart and maps file offset mapOffset,
// as /proc/PID/maps reports them. The second result is false if the
// offset is in no executable segment.
func (t *Table) Bias(mapStart, mapOffset uint64) (uint64, bool) {
	for _, s := range t.Segments {
		// The mapping starts at the segment's offset rounded down to a page
		// (4 KiB to 64 KiB), so accept any offset up to 64 KiB before it.
		if mapOffset <= s.Offset+s.Filesz && mapOffset+0x10000 > s.Offset {
			return mapStart - mapOffset + s.Offset - s.Vaddr, true
		}
	}
	return 0, false
}

// ehFrame finds and parses .eh_frame, through the section headers or,
// in a file without them, through PT_GNU_EH_FRAME.
func (b *builder) ehFrame() (*CFI, error) {
	if s := b.f.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS {
		data, err := b.section(s)
		if err != nil {
			return nil, err
		}
		return ParseEhFrame(data, s.Addr, b.opts.MaxFDEs)
	}
	for _, p := range b.f.Progs {
		if p.Type != elf.PT_GNU_EH_FRAME {
			continue
		}
		hdrData, err := b.segmentBytes(p.Vaddr, p.Filesz)
		if err != nil {
			return nil, err
		}
		hdr, err := ParseEhFrameHdr(hdrData, p.Vaddr, b.opts.MaxFDEs)
		if err != nil {
			return nil, err
		}
		data, err := b.segmentBytes(hdr.EhFrame, 0)
		if err != nil {
			return nil, err
		}
		b.t.Stats.FromHdr = true
		return ParseEhFrame(data, hdr.EhFrame, b.opts.MaxFDEs)
	}
	return nil, nil
}

func (b *builder) debugFrame() (*CFI, error) {
	s := b.f.Section(".debug_frame")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	data, err := b.section(s)
	if err != nil {
		return nil, err
	}
	return ParseDebugFrame(data, b.opts.MaxFDEs)
}

// sparse reports whether eh's FDEs cover less than half of the executable
// segments.
func (b *builder) sparse(eh *CFI) bool {
	var text, covered uint64
	for _, s := range b.t.Segments {
		text += s.Memsz
	}
	if eh != nil {
		for i := range eh.FDEs {
			if f := &eh.FDEs[i]; f.End > f.Start && b.inText(f.Start, f.End) {
				covered += f.End - f.Start
			}
		}
	}
	return covered < text/2
}

// separateDebugFrame parses the .debug_frame of the separate debug file
// (Options.SeparateDebug), nil when there is none. Its addresses are the
// binary's: objcopy --only-keep-debug keeps every section's address.
func (b *builder) separateDebugFrame() (cfi *CFI, err error) {
	r, size, done := b.opts.SeparateDebug()
	if r == nil {
		return nil, nil
	}
	if done != nil {
		defer done()
	}
	var magic [4]byte
	if _, err := r.ReadAt(magic[:], 0); err != nil || string(magic[:]) != elf.ELFMAG {
		return nil, fmt.Errorf("the separate debug file: %w", ErrNotELF)
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("reading the separate debug file's ELF headers: %w: %w", ErrMalformed, err)
	}
	if f.Machine != b.f.Machine || f.Class != b.f.Class {
		return nil, fmt.Errorf("the separate debug file is for %v, the binary %v: %w", f.Machine, b.f.Machine, ErrMalformed)
	}
	s := f.Section(".debug_frame")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	data, err := readSection(s, size, b.opts.MaxSection)
	if err != nil {
		return nil, err
	}
	return ParseDebugFrame(data, b.opts.MaxFDEs)
}

// section reads s after checking it lies inside the file and, once
// decompressed, within MaxSection.
func (b *builder) section(s *elf.Section) ([]byte, error) {
	return readSection(s, b.size, b.opts.MaxSection)
}

// readSection reads s of a file of size bytes after checking it lies
// inside the file and, once decompressed, within max.
func readSection(s *elf.Section, size, max int64) ([]byte, error) {
	if s.Offset > uint64(size) || s.FileSize > uint64(size)-s.Offset {
		return nil, fmt.Errorf("section %s runs past the end of the %d-byte file: %w", s.Name, size, ErrMalformed)
	}
	if s.Size > uint64(max) || s.FileSize > uint64(max) {
		return nil, fmt.Errorf("section %s is %d bytes (limit %d): %w", s.Name, s.Size, max, ErrTooLarge)
	}
	// s.Size is the decompressed size for a compressed section, checked
	// against the limit above; a stream that ends early is malformed.
	data := make([]byte, s.Size)
	if _, err := io.ReadFull(s.Open(), data); err != nil {
		return nil, fmt.Errorf("reading section %s: %w: %w", s.Name, ErrMalformed, err)
	}
	return data, nil
}

// segmentBytes reads n bytes at virtual address vaddr from the file image
// of the PT_LOAD segment holding it; n == 0 reads to the segment's end.
func (b *builder) segmentBytes(vaddr, n uint64) ([]byte, error) {
	for _, p := range b.f.Progs {
		if p.Type != elf.PT_LOAD || vaddr < p.Vaddr || vaddr-p.Vaddr >= p.Filesz {
			continue
		}
		rel := vaddr - p.Vaddr
		avail := p.Filesz - rel
		if n == 0 || n > avail {
			n = avail
		}
		off := p.Off + rel
		if off < p.Off || off > uint64(b.size) || n > uint64(b.size)-off {
			return nil, fmt.Errorf("segment at %#x runs past the end of the file: %w", p.Vaddr, ErrMalformed)
		}
		if n > uint64(b.opts.MaxSection) {
			return nil, fmt.Errorf("segment data at %#x is %d bytes (limit %d): %w", vaddr, n, b.opts.MaxSection, ErrTooLarge)
		}
		buf := make([]byte, n)
		if _, err := p.ReadAt(buf, int64(rel)); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading segment at %#x: %w: %w", p.Vaddr, ErrMalformed, err)
		}
		return buf, nil
	}
	return nil, fmt.Errorf("address %#x is in no loaded segment: %w", vaddr, ErrMalformed)
}

// EhFrameHdr is a parsed .eh_frame_hdr.
type EhFrameHdr struct {
	EhFrame uint64 // virtual address of .eh_frame
	// Table is the sorted (initial location, FDE address) search table,
	// when the header has one in a decodable encoding.
	Table []HdrEntry
}

// HdrEntry is one .eh_frame_hdr search-table entry.
type HdrEntry struct {
	Start, FDE uint64
}

// ParseEhFrameHdr parses a .eh_frame_hdr at virtual address addr, keeping
// at most maxEntries search-table entries (0: the default FDE limit).
func ParseEhFrameHdr(data []byte, addr uint64, maxEntries int) (*EhFrameHdr, error) {
	if maxEntries <= 0 {
		maxEntries = defaultMaxFDEs
	}
	r := reader{b: data}
	ver := r.u8()
	ptrEnc, countEnc, tableEnc := r.u8(), r.u8(), r.u8()
	if r.err != nil {
		return nil, fmt.Errorf(".eh_frame_hdr: %w", r.err)
	}
	if ver != 1 {
		return nil, fmt.Errorf(".eh_frame_hdr version %d: %w", ver, ErrMalformed)
	}
	bases := &ptrBases{secAddr: addr, dataRel: addr, haveData: true}
	if ptrEnc == peOmit || !validEncoding(ptrEnc, false) {
		return nil, fmt.Errorf(".eh_frame_hdr pointer encoding %#x: %w", ptrEnc, ErrMalformed)
	}
	h := &EhFrameHdr{EhFrame: r.encoded(ptrEnc, bases)}
	if r.err != nil {
		return nil, fmt.Errorf(".eh_frame_hdr: %w", r.err)
	}
	if countEnc == peOmit || tableEnc == peOmit || !validEncoding(countEnc, false) || !validEncoding(tableEnc, false) {
		return h, nil
	}
	n := r.encoded(countEnc, bases)
	if r.err != nil {
		return nil, fmt.Errorf(".eh_frame_hdr: %w", r.err)
	}
	// Each entry takes at least two bytes, which bounds n by the data.
	if n > uint64(r.left())/2 || n > uint64(maxEntries) {
		return nil, fmt.Errorf(".eh_frame_hdr claims %d entries in %d bytes: %w", n, r.left(), ErrMalformed)
	}
	h.Table = make([]HdrEntry, 0, n)
	for i := uint64(0); i < n; i++ {
		e := HdrEntry{Start: r.encoded(tableEnc, bases), FDE: r.encoded(tableEnc, bases)}
		if r.err != nil {
			return nil, fmt.Errorf(".eh_frame_hdr entry %d: %w", i, r.err)
		}
		h.Table = append(h.Table, e)
	}
	return h, nil
}
