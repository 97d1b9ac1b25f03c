package report

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/symbols"
)

// A site is a call stack named by its functions rather than by addresses,
// so that the same stack in several processes, logs or builds is one site.
// With merging (the default, heaptrack_print's -m) a frame with a symbol is
// module base name and symbol: call sites within one function are one
// frame, and a rebuilt binary's stacks match the old one's. Without merging
// the offset counts too. A frame without a symbol is module+offset, or its
// address. Allocations without frames are one site per op.
type site struct {
	key string
	// frames, innermost first (frames[0] called the allocation function),
	// are built from the first stack met with the site (ms, stack) when
	// first asked for (fr): a log of many distinct frames has many sites,
	// of which the rankings show a few, and building every site's frames
	// up front was the largest part of the report's own memory.
	frames []frameInfo
	ms     *modelSites
	stack  uint32
	*siteRare
}

// siteRare is what few sites have, apart so that the many do not pay
// for it (a site fits a smaller size class).
type siteRare struct {
	mixed []bool   // merged frames at different offsets, by frame; nil: none
	op    string   // the op, for a site without frames
	trunc []string // why its stacks were cut short (analysis.Model.StackTruncation), sorted; none: whole
}

var noRare siteRare

// rare is the site's siteRare, made when first written.
func (s *site) rare() *siteRare {
	if s.siteRare == nil {
		s.siteRare = &siteRare{}
	}
	return s.siteRare
}

// r is the site's siteRare to read: empty when it has none.
func (s *site) r() *siteRare {
	if s.siteRare == nil {
		return &noRare
	}
	return s.siteRare
}

// fr is the site's frames, built at the first call and kept: for what is
// shown (rankings, JSON, the HTML's tables).
func (s *site) fr() []frameInfo {
	if s.frames == nil && s.ms != nil {
		s.frames = s.ms.build(s.stack, s.r().mixed)
	}
	return s.frames
}

// frTemp is the site's frames without keeping what it built: for the walks
// over every site (suppressions, folded stacks, massif, flame graphs),
// whose frames would otherwise all stay in memory at once.
func (s *site) frTemp() []frameInfo {
	if s.frames != nil || s.ms == nil {
		return s.frames
	}
	return s.ms.build(s.stack, s.r().mixed)
}

// addTrunc notes that one of the site's stacks was cut for reason r.
func (s *site) addTrunc(r string) {
	if i, found := slices.BinarySearch(s.r().trunc, r); !found {
		x := s.rare()
		x.trunc = slices.Insert(x.trunc, i, r)
	}
}

// truncMark is the marker a ranking puts after a site's stack when it was
// cut short: "[truncated: fp]" ("" for a whole stack).
func (s *site) truncMark() string {
	if len(s.r().trunc) == 0 {
		return ""
	}
	return "[truncated: " + strings.Join(s.r().trunc, ", ") + "]"
}

// frameInfo is a frame for display, from the first place the site was met.
type frameInfo struct {
	name    string // demangled function, module+0xOFF, or 0xADDR
	module  string
	symbol  string // as logged (mangled); "" when the log had none
	mangled string // the function's ELF name: as logged, or looked up in the module
	offset  uint64 // as logged: from the symbol, or from the module's base
	mixed   bool   // merged frames at different offsets: no single source line
	file    string
	line    int
	looked  bool // source line looked up
	// inl is the frame's chain of inlined calls, innermost first, the
	// physical function last (call sites, -m 0, with DWARF): heaptrack
	// names the innermost inlined function and its line, so do we.
	inl []srcFrame
}

// srcFrame is one function of an inline chain: where it was at the call.
type srcFrame struct {
	name string // demangled
	file string
	line int
}

// innermost is the frame's innermost function name: the inlined one
// that made the call when the frame has an inline chain.
func (f *frameInfo) innermost() string {
	if len(f.inl) > 1 {
		return f.inl[0].name
	}
	return f.name
}

// label is the site's name in one line: its innermost frame, or the op.
func (s *site) label() string {
	fr := s.fr()
	if len(fr) == 0 {
		return "[no stack] " + s.r().op
	}
	return fr[0].innermost()
}

type siteTable struct {
	merge bool
	sites []*site
	idx   map[string]int32
	cache *symbols.Cache             // names frames that the log gave without one; nil: off
	mods  map[string]*symbols.Module // opened modules, nil where they cannot be
}

func newSiteTable(merge bool, cache *symbols.Cache) *siteTable {
	return &siteTable{merge: merge, idx: map[string]int32{}, cache: cache, mods: map[string]*symbols.Module{}}
}

// lookupName names a frame logged as MODULE(+0xOFF) (OFF from the module's
// base, as glibc's backtrace_symbols prints a function it has no name
// for): the ELF symbol covering the call in MODULE, or "".
func (t *siteTable) lookupName(module string, off uint64) string {
	if t.cache == nil || module == "" || strings.HasPrefix(module, "[") {
		return ""
	}
	mod := t.module(module)
	if mod == nil {
		return ""
	}
	pc := off
	if pc > 0 {
		pc-- // a return address: the call is the byte before
	}
	name, _, err := mod.Symbol(pc)
	if err != nil {
		return ""
	}
	return name
}

// module is the opened module, nil where it cannot be opened (tried
// once).
func (t *siteTable) module(path string) *symbols.Module {
	mod, ok := t.mods[path]
	if !ok {
		mod, _ = t.cache.Open(path)
		t.mods[path] = mod
	}
	return mod
}

// sourceChain is the inline chain at a logged frame, innermost first, or
// nil where the module or its line table cannot be read.
func (t *siteTable) sourceChain(module, symbol string, off uint64) []srcFrame {
	if t.cache == nil || module == "" || strings.HasPrefix(module, "[") {
		return nil
	}
	if t.module(module) == nil {
		// Not asked of the cache frame by frame: it would remember
		// each frame's error.
		return nil
	}
	fr, err := t.cache.SourceFrames(module, symbol, off)
	if err != nil || len(fr) == 0 || fr[0].File == "" {
		return nil
	}
	out := make([]srcFrame, len(fr))
	for k, f := range fr {
		name := "??"
		if f.Function != "" {
			name = symbols.Demangle(f.Function)
		}
		out[k] = srcFrame{name: name, file: f.File, line: f.Line}
	}
	return out
}

func frameKey(b []byte, fr *analysis.Frame, merge bool) []byte {
	mod := filepath.Base(fr.Module)
	switch {
	case fr.Symbol != "":
		b = append(b, mod...)
		b = append(b, '(')
		b = append(b, fr.Symbol...)
		if !merge {
			b = append(b, "+0x"...)
			b = strconv.AppendUint(b, fr.Offset, 16)
		}
		b = append(b, ')')
	case fr.Module != "":
		b = append(b, mod...)
		b = append(b, "(+0x"...)
		b = strconv.AppendUint(b, fr.Offset, 16)
		b = append(b, ')')
	default:
		b = append(b, "0x"...)
		b = strconv.AppendUint(b, fr.Addr, 16)
	}
	return b
}

// modelSites maps one model's stacks (and, for stack 0, ops) to sites.
type modelSites struct {
	m       *analysis.Model
	t       *siteTable
	byStack []int32 // stack id → site id, -1 = not mapped yet
	byOp    [256]int32
	names   map[uint32]string     // frame id → name looked up for a frame logged without one
	src     map[uint32][]srcFrame // frame id → inline chain (call sites only), when it has one
	srcSeen []uint64              // bitset by frame id: its chain was looked up
}

// chain is frame f's inline chain, looked up once.
func (ms *modelSites) chain(f uint32) []srcFrame {
	if int(f>>6) >= len(ms.srcSeen) {
		ms.srcSeen = append(ms.srcSeen, make([]uint64, int(f>>6)+1-len(ms.srcSeen))...)
	}
	if ms.srcSeen[f>>6]&(1<<(f&63)) != 0 {
		return ms.src[f]
	}
	ms.srcSeen[f>>6] |= 1 << (f & 63)
	fr := ms.m.Frame(f)
	c := ms.t.sourceChain(fr.Module, fr.Symbol, fr.Offset)
	if len(c) > 0 {
		ms.src[f] = c
	}
	return c
}

// build makes the frames of stack st for display.
func (ms *modelSites) build(st uint32, mixed []bool) []frameInfo {
	m, t := ms.m, ms.t
	frames := m.Frames(st)
	out := make([]frameInfo, len(frames))
	for k, f := range frames {
		fr := m.Frame(f)
		fi := frameInfo{name: m.FrameNameOnce(f), module: fr.Module, symbol: fr.Symbol, mangled: fr.Symbol, offset: fr.Offset}
		if fr.Symbol == "" && fr.Module != "" {
			if looked := ms.names[f]; looked != "" {
				fi.name, fi.mangled = symbols.Demangle(looked), looked
			}
		}
		if !t.merge && t.cache != nil {
			if c := ms.chain(f); len(c) > 0 {
				fi.file, fi.line, fi.looked = c[0].file, c[0].line, true
				if len(c) > 1 {
					fi.inl = c
				}
			}
		}
		fi.mixed = k < len(mixed) && mixed[k]
		out[k] = fi
	}
	return out
}

func (t *siteTable) forModel(m *analysis.Model) *modelSites {
	ms := &modelSites{m: m, t: t, byStack: make([]int32, m.NumStacks()), names: map[uint32]string{}, src: map[uint32][]srcFrame{}}
	for i := range ms.byStack {
		ms.byStack[i] = -1
	}
	for i := range ms.byOp {
		ms.byOp[i] = -1
	}
	return ms
}

// site returns the site id of a stack cost of model m.
func (t *siteTable) site(m *analysis.Model, ms *modelSites, sc *analysis.StackCost) int32 {
	if sc.Stack == 0 {
		if id := ms.byOp[sc.Op]; id >= 0 {
			return id
		}
		op := m.OpName(sc.Op)
		id := t.intern("\x00"+op, func() *site { return &site{siteRare: &siteRare{op: op}} }, nil)
		ms.byOp[sc.Op] = id
		return id
	}
	if id := ms.byStack[sc.Stack]; id >= 0 {
		return id
	}
	frames := m.Frames(sc.Stack)
	// Frames logged without a function name get one from their module.
	looked := make([]string, len(frames))
	for k, f := range frames {
		if fr := m.Frame(f); fr.Symbol == "" && fr.Module != "" {
			name, ok := ms.names[f]
			if !ok {
				name = t.lookupName(fr.Module, fr.Offset)
				ms.names[f] = name
			}
			looked[k] = name
		}
	}
	// Call sites (no merging): a frame is where its source line is, the
	// lines of its inlined calls included, so that two offsets on one line
	// are one site and two lines of one function are two (heaptrack's
	// locations).
	var chains [][]srcFrame
	if !t.merge && t.cache != nil {
		chains = make([][]srcFrame, len(frames))
		for k, f := range frames {
			chains[k] = ms.chain(f)
		}
	}
	var key []byte
	for k, f := range frames {
		if k > 0 {
			key = append(key, ';')
		}
		fr := m.Frame(f)
		if chains != nil && len(chains[k]) > 0 {
			key = append(key, filepath.Base(fr.Module)...)
			key = append(key, '(')
			for j, c := range chains[k] {
				if j > 0 {
					key = append(key, '|')
				}
				key = append(key, c.name...)
				key = append(key, '@')
				key = append(key, c.file...)
				key = append(key, ':')
				key = strconv.AppendInt(key, int64(c.line), 10)
			}
			key = append(key, ')')
			continue
		}
		if looked[k] != "" && t.merge {
			named := analysis.Frame{Module: fr.Module, Symbol: looked[k]}
			key = frameKey(key, &named, true)
		} else {
			key = frameKey(key, &fr, t.merge)
		}
	}
	id := t.intern(string(key), func() *site {
		return &site{ms: ms, stack: sc.Stack}
	}, func(s *site) {
		// Merged: note frames that stand for several offsets.
		first := s.ms.m.Frames(s.stack)
		for k, f := range frames {
			if k < len(first) && m.Frame(f).Offset != s.ms.m.Frame(first[k]).Offset {
				x := s.rare()
				if x.mixed == nil {
					x.mixed = make([]bool, len(first))
				}
				x.mixed[k] = true
				if k < len(s.frames) {
					s.frames[k].mixed = true
				}
			}
		}
	})
	if r := m.StackTruncation(sc.Stack); r != "" {
		t.sites[id].addTrunc(r)
	}
	ms.byStack[sc.Stack] = id
	return id
}

// siteOfAlloc returns the site of allocation id of model m.
func (t *siteTable) siteOfAlloc(m *analysis.Model, ms *modelSites, id uint32) int32 {
	sc := analysis.StackCost{Stack: m.Stack[id], Op: analysis.NoOp}
	if sc.Stack == 0 {
		sc.Op = m.Op[id]
	}
	return t.site(m, ms, &sc)
}

func (t *siteTable) intern(key string, mk func() *site, seen func(*site)) int32 {
	if id, ok := t.idx[key]; ok {
		if seen != nil && t.merge {
			seen(t.sites[id])
		}
		return id
	}
	s := mk()
	s.key = key
	t.sites = append(t.sites, s)
	id := int32(len(t.sites) - 1)
	t.idx[key] = id
	return id
}

// hasFunction reports whether a frame of site id names a function that
// contains name (demangled or as logged).
func (t *siteTable) hasFunction(id int32, name string) bool {
	for _, f := range t.sites[id].frTemp() {
		if strings.Contains(f.name, name) || strings.Contains(f.mangled, name) {
			return true
		}
	}
	return false
}
