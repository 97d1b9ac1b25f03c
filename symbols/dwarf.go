package symbols

import (
	"cmp"
	"debug/dwarf"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// SourceFrame is one level of source location for an instruction.
type SourceFrame struct {
	// Function is the DWARF linkage name (mangled) when the compiler gave
	// one, else DW_AT_name; "" when the address is outside any function DIE.
	Function string
	File     string
	Line     int
}

// dwarfIndex answers pc -> line and inline chain for one file's DWARF.
// Compilation units are indexed by address range up front (cheap); a
// unit's line table and function tree are decoded on its first lookup.
type dwarfIndex struct {
	d      *dwarf.Data
	ranges []cuRange // sorted by lo
	units  []*unitInfo

	nameMu sync.Mutex
	names  map[dwarf.Offset]string
}

type cuRange struct {
	lo, hi uint64
	unit   int
}

type unitInfo struct {
	entry     *dwarf.Entry
	once      sync.Once
	rows      []lineRow
	files     []string  // row file names
	callFiles []string  // the line program's file table, indexed by DW_AT_call_file
	funcs     []fnRange // top-level subprogram ranges, sorted by lo
	err       error
}

type lineRow struct {
	addr uint64
	file int32
	line int32
	end  bool
}

type fnode struct {
	ranges   [][2]uint64
	off      dwarf.Offset
	name     string
	callFile int64
	callLine int64
	children []*fnode
}

type fnRange struct {
	lo, hi uint64
	n      *fnode
}

// maxInlineDepth bounds the function tree walk; real code rarely nests
// inlining more than a few dozen levels.
const maxInlineDepth = 256

// attrMIPSLinkageName is DW_AT_MIPS_linkage_name, which GCC used for the
// mangled name before DWARF 4 standardized DW_AT_linkage_name.
const attrMIPSLinkageName = dwarf.Attr(0x2007)

func newDWARFIndex(e *elfFile) (x *dwarfIndex, err error) {
	defer guard("reading DWARF", &err)
	// Check every debug section's extent and size before they are read
	// (and maybe decompressed) into memory.
	for _, s := range e.f.Sections {
		if len(s.Name) > 7 && (s.Name[:7] == ".debug_" || s.Name[:7] == ".zdebug") {
			if _, err := e.checkSection(s); err != nil {
				return nil, err
			}
		}
	}
	d, err := loadDWARF(e)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return indexDWARF(d)
}

// indexDWARF indexes d's compilation units by address range.
func indexDWARF(d *dwarf.Data) (x *dwarfIndex, err error) {
	defer guard("reading DWARF", &err)
	x = &dwarfIndex{d: d, names: map[dwarf.Offset]string{}}
	r := d.Reader()
	last := dwarf.Offset(0)
	seen := false
	for {
		ent, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("reading compilation units: %w: %w", ErrMalformed, err)
		}
		if ent == nil {
			break
		}
		if ent.Tag == 0 {
			continue // padding between units; null entries carry no offset
		}
		// debug/dwarf can return the same entry forever on some corrupt
		// abbreviation tables; a sequential walk must move forward.
		if seen && ent.Offset <= last {
			return nil, fmt.Errorf("compilation unit at %#x does not advance: %w", ent.Offset, ErrMalformed)
		}
		last, seen = ent.Offset, true
		if ent.Tag != dwarf.TagCompileUnit && ent.Tag != dwarf.TagPartialUnit {
			r.SkipChildren()
			continue
		}
		u := &unitInfo{entry: ent}
		idx := len(x.units)
		x.units = append(x.units, u)
		rs, err := d.Ranges(ent)
		if err != nil || len(rs) == 0 {
			// No usable DW_AT_ranges / low_pc: fall back to the span of
			// the unit's line table.
			rs = nil
			if lo, hi, ok := x.unitSpan(u); ok {
				rs = [][2]uint64{{lo, hi}}
			}
		}
		for _, rg := range rs {
			if rg[1] > rg[0] && rg[0] != 0 {
				x.ranges = append(x.ranges, cuRange{rg[0], rg[1], idx})
			}
		}
		r.SkipChildren()
	}
	if len(x.units) == 0 {
		return nil, ErrNoDebugInfo
	}
	slices.SortFunc(x.ranges, func(a, b cuRange) int { return cmp.Compare(a.lo, b.lo) })
	return x, nil
}

func (x *dwarfIndex) unitSpan(u *unitInfo) (lo, hi uint64, ok bool) {
	x.load(u)
	for _, r := range u.rows {
		if !ok || r.addr < lo {
			lo = r.addr
		}
		if !ok || r.addr > hi {
			hi = r.addr
		}
		ok = true
	}
	return lo, hi, ok && hi > lo
}

// unitFor finds the compilation unit whose ranges cover pc.
func (x *dwarfIndex) unitFor(pc uint64) *unitInfo {
	i, _ := slices.BinarySearchFunc(x.ranges, pc+1, func(r cuRange, v uint64) int { return cmp.Compare(r.lo, v) })
	// ranges[:i] start at or below pc; units may nest ranges (rare) so
	// look back a little.
	for j := i - 1; j >= 0 && j >= i-8; j-- {
		if pc >= x.ranges[j].lo && pc < x.ranges[j].hi {
			return x.units[x.ranges[j].unit]
		}
	}
	return nil
}

func (x *dwarfIndex) load(u *unitInfo) {
	u.once.Do(func() {
		defer guard("decoding unit", &u.err)
		u.err = x.loadLines(u)
		if u.err == nil {
			x.loadFuncs(u)
		}
	})
}

func (x *dwarfIndex) loadLines(u *unitInfo) error {
	lr, err := x.d.LineReader(u.entry)
	if err != nil {
		return fmt.Errorf("line table: %w: %w", ErrMalformed, err)
	}
	if lr == nil {
		return ErrNoDebugInfo
	}
	fileIdx := map[*dwarf.LineFile]int32{}
	var seq []lineRow
	var le dwarf.LineEntry
	for {
		if err := lr.Next(&le); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("line table: %w: %w", ErrMalformed, err)
		}
		fi := int32(-1)
		if le.File != nil {
			var ok bool
			if fi, ok = fileIdx[le.File]; !ok {
				fi = int32(len(u.files))
				fileIdx[le.File] = fi
				u.files = append(u.files, le.File.Name)
			}
		}
		seq = append(seq, lineRow{addr: le.Address, file: fi, line: int32(le.Line), end: le.EndSequence})
		if le.EndSequence {
			// Sequences at address 0 are functions the linker discarded
			// (their DWARF was kept with a zero tombstone); they would
			// shadow real code at low addresses.
			if seq[0].addr != 0 && seq[0].addr < ^uint64(0)-1 {
				u.rows = append(u.rows, seq...)
			}
			seq = seq[:0]
		}
	}
	// Sort by address; at equal addresses an end-of-sequence row sorts
	// before the next sequence's first row, and rows of one sequence keep
	// their order, so the last row at or below pc is the one covering it.
	slices.SortStableFunc(u.rows, func(a, b lineRow) int {
		if c := cmp.Compare(a.addr, b.addr); c != 0 {
			return c
		}
		switch {
		case a.end && !b.end:
			return -1
		case !a.end && b.end:
			return 1
		}
		return 0
	})
	// The file table is also what DW_AT_call_file indexes.
	files := lr.Files()
	u.callFiles = make([]string, len(files))
	for i, f := range files {
		if f != nil {
			u.callFiles[i] = f.Name
		}
	}
	return nil
}

// loadFuncs builds the tree of subprograms and inlined subroutines of a
// unit, keeping only those with code ranges.
func (x *dwarfIndex) loadFuncs(u *unitInfo) {
	r := x.d.Reader()
	r.Seek(u.entry.Offset)
	cu, err := r.Next()
	if err != nil || cu == nil || !cu.Children {
		return
	}
	root := &fnode{}
	stack := []*fnode{root}
	last := cu.Offset
	for len(stack) > 0 {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == 0 { // end of a children list (null entries have no offset)
			stack = stack[:len(stack)-1]
			continue
		}
		if e.Offset <= last {
			break // corrupt and not advancing: keep what was read
		}
		last = e.Offset
		parent := stack[len(stack)-1]
		next := parent
		if e.Tag == dwarf.TagSubprogram || e.Tag == dwarf.TagInlinedSubroutine {
			rs, _ := x.d.Ranges(e)
			if len(rs) == 0 {
				// Declarations and abstract instances have no code.
				if e.Children {
					r.SkipChildren()
				}
				continue
			}
			n := &fnode{ranges: rs, off: e.Offset}
			n.name = x.entryName(e, 0)
			if v, ok := e.Val(dwarf.AttrCallFile).(int64); ok {
				n.callFile = v
			}
			if v, ok := e.Val(dwarf.AttrCallLine).(int64); ok {
				n.callLine = v
			}
			parent.children = append(parent.children, n)
			next = n
		}
		if e.Children {
			if len(stack) >= maxInlineDepth || !mayHoldCode(e.Tag) {
				// Types, variables and parameters hold no code; skipping
				// them (cheap when GCC emits DW_AT_sibling) is most of
				// the cold cost saved.
				r.SkipChildren()
				continue
			}
			stack = append(stack, next)
		}
	}
	for _, n := range root.children {
		for _, rg := range n.ranges {
			if rg[1] > rg[0] {
				u.funcs = append(u.funcs, fnRange{rg[0], rg[1], n})
			}
		}
	}
	slices.SortFunc(u.funcs, func(a, b fnRange) int { return cmp.Compare(a.lo, b.lo) })
}

// entryName is the linkage (mangled) name of a function DIE, following
// DW_AT_abstract_origin and DW_AT_specification to the declaration that
// carries it.
func (x *dwarfIndex) entryName(e *dwarf.Entry, depth int) string {
	if n, ok := e.Val(dwarf.AttrLinkageName).(string); ok && n != "" {
		return n
	}
	if n, ok := e.Val(attrMIPSLinkageName).(string); ok && n != "" {
		return n
	}
	var ref dwarf.Offset
	var hasRef bool
	if o, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset); ok {
		ref, hasRef = o, true
	} else if o, ok := e.Val(dwarf.AttrSpecification).(dwarf.Offset); ok {
		ref, hasRef = o, true
	}
	if hasRef && depth < 8 {
		x.nameMu.Lock()
		n, ok := x.names[ref]
		x.nameMu.Unlock()
		if ok {
			return n
		}
		r := x.d.Reader()
		r.Seek(ref)
		if oe, err := r.Next(); err == nil && oe != nil && oe.Offset == ref {
			n = x.entryName(oe, depth+1)
			if n == "" {
				n, _ = oe.Val(dwarf.AttrName).(string)
			}
		}
		x.nameMu.Lock()
		x.names[ref] = n
		x.nameMu.Unlock()
		if n != "" {
			return n
		}
	}
	n, _ := e.Val(dwarf.AttrName).(string)
	return n
}

func (x *dwarfIndex) source(pc uint64) (fr []SourceFrame, err error) {
	defer guard("looking up line", &err)
	u := x.unitFor(pc)
	if u == nil {
		return nil, fmt.Errorf("address %#x: no compilation unit covers it: %w", pc, ErrNotFound)
	}
	x.load(u)
	if u.err != nil {
		return nil, u.err
	}
	i, _ := slices.BinarySearchFunc(u.rows, pc+1, func(r lineRow, v uint64) int { return cmp.Compare(r.addr, v) })
	i--
	if i < 0 || u.rows[i].end {
		return nil, fmt.Errorf("address %#x: no line-table row covers it: %w", pc, ErrNotFound)
	}
	row := u.rows[i]
	file := ""
	if row.file >= 0 && int(row.file) < len(u.files) {
		file = u.files[row.file]
	}
	// The chain of functions containing pc, outermost first.
	var chain []*fnode
	j, _ := slices.BinarySearchFunc(u.funcs, pc+1, func(r fnRange, v uint64) int { return cmp.Compare(r.lo, v) })
	for k := j - 1; k >= 0 && k >= j-8; k-- {
		if pc >= u.funcs[k].lo && pc < u.funcs[k].hi {
			chain = append(chain, u.funcs[k].n)
			break
		}
	}
	for len(chain) > 0 && len(chain) < maxInlineDepth {
		var in *fnode
	children:
		for _, c := range chain[len(chain)-1].children {
			for _, rg := range c.ranges {
				if pc >= rg[0] && pc < rg[1] {
					in = c
					break children
				}
			}
		}
		if in == nil {
			break
		}
		chain = append(chain, in)
	}
	if len(chain) == 0 {
		return []SourceFrame{{File: file, Line: int(row.line)}}, nil
	}
	fr = make([]SourceFrame, 0, len(chain))
	fr = append(fr, SourceFrame{Function: chain[len(chain)-1].name, File: file, Line: int(row.line)})
	for k := len(chain) - 1; k > 0; k-- {
		callee := chain[k]
		cf := ""
		if callee.callFile >= 0 && callee.callFile < int64(len(u.callFiles)) {
			cf = u.callFiles[callee.callFile]
		}
		fr = append(fr, SourceFrame{Function: chain[k-1].name, File: cf, Line: int(callee.callLine)})
	}
	return fr, nil
}

// mayHoldCode reports whether a DIE's children can include concrete
// functions or inlined calls.
func mayHoldCode(t dwarf.Tag) bool {
	switch t {
	case dwarf.TagSubprogram, dwarf.TagInlinedSubroutine, dwarf.TagLexDwarfBlock,
		dwarf.TagNamespace, dwarf.TagModule, dwarf.TagCompileUnit, dwarf.TagPartialUnit,
		dwarf.TagTryDwarfBlock, dwarf.TagCatchDwarfBlock:
		return true
	}
	return false
}
