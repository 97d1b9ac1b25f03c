package report

import (
	"bytes"
	"cmp"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/intern"
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
	// Its key, the text that tells it from other sites (its frames' names
	// joined by ';'), is kept in the table (siteTable.key).
	//
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

// siteTable holds the sites of every log of a report. A site's key is
// kept as the ids of its frames' names (names: each frame's part of the
// key, interned once), site id+1 in keys: a log of a million distinct
// stacks has about as many sites, and their keys as strings in a map
// were the largest part of the report's own memory.
type siteTable struct {
	merge bool
	sites []*site
	names intern.Strings
	keys  intern.Seqs
	cache *symbols.Cache             // names frames that the log gave without one; nil: off
	mods  map[string]*symbols.Module // opened modules, nil where they cannot be
	buf   []byte
	seq   []uint32
	semi  []uint64 // bitset by name id: the name holds a ';'
}

func newSiteTable(merge bool, cache *symbols.Cache) *siteTable {
	return &siteTable{merge: merge, names: intern.NewStrings(), keys: intern.NewSeqs(), cache: cache, mods: map[string]*symbols.Module{}}
}

// name is the id of a name, noting those that hold a ';' (the rare ones
// whose key's first part is not the whole name).
func (t *siteTable) name(b []byte) uint32 {
	id := t.names.Intern(b)
	if bytes.IndexByte(b, ';') >= 0 {
		for int(id>>6) >= len(t.semi) {
			t.semi = append(t.semi, 0)
		}
		t.semi[id>>6] |= 1 << (id & 63)
	}
	return id
}

// compact gives back the lookup tables once the sites are made; a site
// made after builds them again.
func (t *siteTable) compact() {
	t.names.Compact()
	t.keys.Compact()
}

// key is site id's key: its frames' names joined by ';' ("\x00" and the
// op for a site without frames).
func (t *siteTable) key(id int32) string {
	var b strings.Builder
	for k, n := range t.keys.Get(uint32(id) + 1) {
		if k > 0 {
			b.WriteByte(';')
		}
		b.WriteString(t.names.Get(n))
	}
	return b.String()
}

// firstName is the name of site id's innermost frame, up to a ';'
// (its key's first part).
func (t *siteTable) firstName(id int32) string {
	name, _, _ := strings.Cut(t.names.Get(t.keys.Get(uint32(id) + 1)[0]), ";")
	return name
}

// groupKey is the id of site id's firstName: the sites that share it are
// one entry of a ranking (heaptrack_print's merged entry).
func (t *siteTable) groupKey(id int32) uint32 {
	n := t.keys.Get(uint32(id) + 1)[0]
	if int(n>>6) < len(t.semi) && t.semi[n>>6]&(1<<(n&63)) != 0 {
		return t.name([]byte(t.firstName(id)))
	}
	return n
}

// compareKeys compares the keys of sites a and b as strings, without
// making them: name by name, the joining ';' where one name is a prefix
// of the other.
func (t *siteTable) compareKeys(a, b int32) int {
	if a == b {
		return 0
	}
	ka, kb := t.keys.Get(uint32(a)+1), t.keys.Get(uint32(b)+1)
	for i := 0; ; i++ {
		switch {
		case i == len(ka) && i == len(kb):
			return 0
		case i == len(ka):
			return -1
		case i == len(kb):
			return 1
		}
		if ka[i] == kb[i] {
			continue
		}
		sa, sb := t.names.Get(ka[i]), t.names.Get(kb[i])
		n := min(len(sa), len(sb))
		if c := strings.Compare(sa[:n], sb[:n]); c != 0 {
			return c
		}
		// One name is a prefix of the other: the shorter one's key goes on
		// with ';', or ends.
		if len(sa) < len(sb) {
			if i+1 == len(ka) {
				return -1
			}
			if c := cmp.Compare(';', sb[n]); c != 0 {
				return c
			}
		} else {
			if i+1 == len(kb) {
				return 1
			}
			if c := cmp.Compare(sa[n], ';'); c != 0 {
				return c
			}
		}
		// A name holding ';': the keys themselves decide.
		return strings.Compare(t.key(a), t.key(b))
	}
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
	nameID  []uint32              // frame id → its name's id (siteTable.names) + 1; 0: not looked up yet
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
	ms := &modelSites{m: m, t: t, byStack: make([]int32, m.NumStacks()), names: map[uint32]string{}, src: map[uint32][]srcFrame{},
		nameID: make([]uint32, m.NumFrames())}
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
		t.seq = append(t.seq[:0], t.name([]byte("\x00"+op)))
		id := t.intern(t.seq, func() *site { return &site{siteRare: &siteRare{op: op}} }, nil)
		ms.byOp[sc.Op] = id
		return id
	}
	if id := ms.byStack[sc.Stack]; id >= 0 {
		return id
	}
	frames := m.Frames(sc.Stack)
	seq := t.seq[:0]
	for _, f := range frames {
		seq = append(seq, ms.name(f))
	}
	t.seq = seq
	id := t.intern(seq, func() *site {
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

// intern returns the id of the site whose key is the names seq, made by
// mk when new (seen is told of a stack that merges into a known one).
func (t *siteTable) intern(seq []uint32, mk func() *site, seen func(*site)) int32 {
	if k, ok := t.keys.Find(seq); ok {
		id := int32(k) - 1
		if seen != nil && t.merge {
			seen(t.sites[id])
		}
		return id
	}
	t.keys.Intern(seq)
	t.sites = append(t.sites, mk())
	return int32(len(t.sites) - 1)
}

// name is the id of frame f's name, its part of a site's key: looked up
// once per frame. Frames logged without a function name get one from
// their module; call sites (no merging) are where their source line is,
// the lines of their inlined calls included, so that two offsets on one
// line are one site and two lines of one function are two (heaptrack's
// locations).
func (ms *modelSites) name(f uint32) uint32 {
	if int(f) < len(ms.nameID) && ms.nameID[f] != 0 {
		return ms.nameID[f] - 1
	}
	t, m := ms.t, ms.m
	fr := m.Frame(f)
	var looked string
	if fr.Symbol == "" && fr.Module != "" {
		var ok bool
		if looked, ok = ms.names[f]; !ok {
			looked = t.lookupName(fr.Module, fr.Offset)
			ms.names[f] = looked
		}
	}
	var chain []srcFrame
	if !t.merge && t.cache != nil {
		chain = ms.chain(f)
	}
	key := t.buf[:0]
	switch {
	case len(chain) > 0:
		key = append(key, filepath.Base(fr.Module)...)
		key = append(key, '(')
		for j, c := range chain {
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
	case looked != "" && t.merge:
		named := analysis.Frame{Module: fr.Module, Symbol: looked}
		key = frameKey(key, &named, true)
	default:
		key = frameKey(key, &fr, t.merge)
	}
	t.buf = key
	id := t.name(key)
	if int(f) >= len(ms.nameID) {
		ms.nameID = append(ms.nameID, make([]uint32, int(f)+1-len(ms.nameID))...)
		ms.nameID = ms.nameID[:cap(ms.nameID)]
	}
	ms.nameID[f] = id + 1
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
