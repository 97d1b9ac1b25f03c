package tracer

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/memtrace/memtrace/event"
)

// probeKind says which program serves a function.
type probeKind uint8

const (
	probeAlloc  probeKind = iota // entry + return: mt_enter, mt_return
	probeFree                    // entry only: mt_free
	probeNew                     // entry only: mt_new (operator new; see do_new)
	probeNewRet                  // a ret instruction ending an allocator's new: mt_new_ret (newret.go)
)

type funcDef struct {
	name string
	op   event.Op
	sig  int
	kind probeKind
}

// The lists of functions (libcFuncs, cxxFuncs, apiFuncs, aliasNames) are
// generated from internal/ops/table.go into funcs_gen.go.

func cxx32(name string) string {
	name = strings.Replace(name, "_Znwm", "_Znwj", 1)
	name = strings.Replace(name, "_Znam", "_Znaj", 1)
	return strings.Replace(name, "Pvm", "Pvj", 1)
}

// probePoint is one function resolved in one library file.
type probePoint struct {
	def      funcDef
	symbol   string // the name found (aliases are probed once)
	fileOff  uint64 // where the probe sits, as a file offset (what uprobes take)
	placed   bool   // false: fell back to the first instruction
	alias    bool   // the function has other names that log other ops (MT_CK_ALIAS)
	allocLib bool   // in a library with its own allocator (not libc's): see from_allocator
	textFrom uint64 // bytes of executable segment before the probe point
	textTo   uint64 // ... and from it to the segment's end
	delta    uint64 // probe point minus function start
	x86      bool
}

// ErrNoAllocFuncs means a library exports none of the allocation functions.
var ErrNoAllocFuncs = errors.New("no allocation functions")

// resolveLib finds the allocation functions a library exports and where to
// probe each. It returns ErrNoAllocFuncs for a library with none.
func resolveLib(path string) ([]probePoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("read ELF %s: %w", path, err)
	}
	byName, own, err := allocSymbols(ef)
	if err != nil {
		return nil, fmt.Errorf("read symbols of %s: %w", path, err)
	}
	is64 := ef.Class == elf.ELFCLASS64
	defs := make([]funcDef, 0, len(libcFuncs)+len(cxxFuncs))
	_, hasMalloc := byName["malloc"]
	if hasMalloc {
		defs = append(defs, libcFuncs...)
	}
	for _, d := range cxxFuncs {
		if !is64 {
			d.name = cxx32(d.name)
		}
		defs = append(defs, d)
	}
	if hasMalloc {
		defs = append(defs, apiFuncs...)
	}
	// Names per address among those that log an op: more than one and the
	// program's call must be named by the PLT stub it went through.
	names := map[uint64]int{}
	for n, s := range byName {
		if _, ok := event.SymbolOp(n); ok {
			names[s.Value]++
		}
	}
	// An allocator library: not the C library (which starts programs)
	// nor a program's own text.
	_, isLibc := byName["__libc_start_main"]
	allocLib := hasMalloc && !isLibc && !own
	// A program with its own allocator (a static binary) calls it
	// directly, never through a PLT stub, so when aligned_alloc and
	// memalign are one function (glibc before 2.38) nothing tells which
	// name was called. It is logged under its own name, memalign.
	if aa, ok := byName["aligned_alloc"]; ok && own && hasMalloc && aa.Value == byName["memalign"].Value {
		delete(byName, "aligned_alloc")
	}
	internalFrom := uint64(0)
	if own && hasMalloc {
		internalFrom = libcStart(ef, byName["malloc"].Value)
	}
	var out []probePoint
	var newEntries []uint64
	seen := map[uint64]bool{}
	for _, d := range defs {
		s, ok := byName[d.name]
		if !ok || seen[s.Value] {
			continue
		}
		seen[s.Value] = true
		seg := execSegment(ef, s.Value)
		if seg == nil {
			continue
		}
		fileOff := s.Value - seg.Vaddr + seg.Off
		pp := probePoint{def: d, symbol: d.name, alias: names[s.Value] > 1, allocLib: allocLib}
		if d.kind == probeNew {
			newEntries = append(newEntries, s.Value)
		}
		var delta uint64
		if ef.Machine == elf.EM_X86_64 {
			code := make([]byte, 64)
			n, _ := f.ReadAt(code, int64(fileOff))
			spec := probeSpec{args: sigArgs(d), skipNullTest: d.kind == probeFree}
			delta, pp.placed = placeX86(code[:n], spec)
		}
		pp.fileOff = fileOff + delta
		pp.delta = delta
		pp.x86 = ef.Machine == elf.EM_X86_64
		vaddr := s.Value + delta
		pp.textFrom = vaddr - seg.Vaddr
		pp.textTo = seg.Vaddr + seg.Memsz - vaddr
		if own {
			pp.textFrom, pp.textTo = ownRange(d, vaddr, internalFrom, seg.Vaddr+seg.Memsz)
		}
		out = append(out, pp)
	}
	if allocLib && ef.Machine == elf.EM_X86_64 && len(newEntries) > 0 {
		code := newElfCode(ef, byName)
		for _, v := range code.returnSites(newEntries) {
			seg := execSegment(ef, v)
			if seg == nil {
				continue
			}
			out = append(out, probePoint{def: funcDef{name: "ret", kind: probeNewRet}, symbol: "ret",
				fileOff: v - seg.Vaddr + seg.Off, placed: true, x86: true, allocLib: true})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrNoAllocFuncs)
	}
	return out, nil
}

// ownRange is, for a function in a program's own text, the part of that
// text the internal-call tests take for the C library's: in a library all
// of it is (a call from there is libc's own), but a static program's text
// holds the program too. Its mmap, munmap and mremap are the library's
// only from internalFrom on; free's direct-call test is off, since every
// call a static program makes to free is a direct one.
func ownRange(d funcDef, vaddr, internalFrom, segEnd uint64) (before, after uint64) {
	mmapFamily := d.sig == sigMmap || d.sig == sigMremap || d.op == event.OpMunmap
	if !mmapFamily || internalFrom == 0 || vaddr < internalFrom {
		return 0, 0
	}
	return vaddr - internalFrom, segEnd - vaddr
}

// allocNames are the names resolveLib and allocSymbols look up, besides
// SymbolOp's: the probed functions (both ABIs' C++ names) and the ones
// that tell a library's kind.
var allocNames = sync.OnceValue(func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, fs := range [][]funcDef{libcFuncs, cxxFuncs, apiFuncs} {
		for _, d := range fs {
			m[d.name], m[cxx32(d.name)] = struct{}{}, struct{}{}
		}
	}
	for _, n := range []string{"malloc", "_Znwm", "_Znwj", "memalign", "aligned_alloc", "__libc_start_main"} {
		m[n] = struct{}{}
	}
	return m
})

// allocSymbols returns the defined functions of ef that allocNames or
// SymbolOp name, by name: the dynamic symbols and, for an executable, the
// global ones of .symtab too, where a static program's malloc is (unless
// it was stripped). own says that an executable defines malloc or
// operator new itself.
func allocSymbols(ef *elf.File) (map[string]elf.Symbol, bool, error) {
	byName := map[string]elf.Symbol{}
	add := func(syms []elf.Symbol) {
		for _, s := range syms {
			if _, dup := byName[s.Name]; !dup {
				byName[s.Name] = s
			}
		}
	}
	keep := func(name []byte) bool {
		_, ok := allocNames()[string(name)]
		return ok || event.IsSymbolOpName(name)
	}
	syms, err := funcSymbols(ef, elf.SHT_DYNSYM, false, keep)
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, false, err
	}
	add(syms)
	if !isExecutable(ef) {
		return byName, false, nil
	}
	st, err := funcSymbols(ef, elf.SHT_SYMTAB, true, keep)
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, false, err
	}
	add(st)
	own := false
	for _, n := range []string{"malloc", "_Znwm", "_Znwj"} {
		if _, ok := byName[n]; ok {
			own = true
		}
	}
	return byName, own, nil
}

// isExecutable tells a program from a shared library. A library has a
// soname (libc.so.6 also names an interpreter, to be runnable); a dynamic
// program names its interpreter, a static one has no dynamic section, a
// static PIE says so in DT_FLAGS_1.
func isExecutable(ef *elf.File) bool {
	if ef.Type == elf.ET_EXEC {
		return true
	}
	dynamic, interp := false, false
	for _, p := range ef.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			interp = true
		case elf.PT_DYNAMIC:
			dynamic = true
		}
	}
	if !dynamic {
		return true
	}
	if so, err := ef.DynString(elf.DT_SONAME); err == nil && len(so) > 0 {
		return false
	}
	if interp {
		return true
	}
	flags, err := ef.DynValue(elf.DT_FLAGS_1)
	return err == nil && len(flags) > 0 && flags[0]&uint64(elf.DF_1_PIE) != 0
}

// libcStart guesses where a static program's C library begins in its text:
// the linker lays out the program's objects first and the archives'
// members after them, and identifiers that begin with an underscore are
// the implementation's (C11 7.1.3), so the first such function after main
// opens the library's part (C++ names, _Z..., and static constructors,
// _GLOBAL__sub_I_..., are the program's). The start-up files' functions
// are not: built -O2, main is in .text.startup, which the linker puts
// before .text, whose start is crt1.o's _start and crtbegin's helpers,
// then the program's other functions. Without main it is the allocator's
// own address, which is in the library's part.
func libcStart(ef *elf.File, malloc uint64) uint64 {
	st, err := ef.Symbols()
	if err != nil {
		return malloc
	}
	var main uint64
	for _, s := range st {
		if s.Name == "main" && elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF {
			main = s.Value
		}
	}
	if main == 0 || main > malloc {
		return malloc
	}
	start := malloc
	for _, s := range st {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Section == elf.SHN_UNDEF || s.Value <= main || s.Value >= start {
			continue
		}
		if strings.HasPrefix(s.Name, "_") && !strings.HasPrefix(s.Name, "_Z") && !strings.HasPrefix(s.Name, "_GLOBAL__") && !startupFuncs[s.Name] {
			start = s.Value
		}
	}
	return start
}

// startupFuncs are the functions of the C start-up files (crt1.o, crti.o,
// crtbegin.o of glibc and GCC; musl's crt1.o), linked before the program's
// objects.
var startupFuncs = map[string]bool{
	"_start": true, "_start_c": true, "_dl_relocate_static_pie": true, "__do_global_dtors_aux": true,
	"__do_global_ctors_aux": true, "_init": true, "_fini": true,
}

func execSegment(ef *elf.File, vaddr uint64) *elf.ProgHeader {
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && vaddr >= p.Vaddr && vaddr < p.Vaddr+p.Filesz {
			return &p.ProgHeader
		}
	}
	return nil
}

// sigArgs is how many argument registers a function's entry program reads.
func sigArgs(d funcDef) int {
	if d.kind == probeFree {
		if d.op == event.OpMunmap {
			return 2
		}
		return 1
	}
	switch d.sig {
	case sigCalloc, sigRealloc, sigAlignSize:
		return 2
	case sigReallocarray, sigPosixMemalign, sigMremap:
		return 3
	case sigMmap:
		return 4
	}
	return 1
}

// isELF reports whether a mapped file is worth opening.
func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		return false
	}
	return string(magic[:]) == elf.ELFMAG
}

// OwnAllocator reports whether the program at path defines malloc or
// operator new itself, as a static binary does: then the program file is
// probed like a library.
func OwnAllocator(path string) bool {
	ef, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer ef.Close()
	if !isExecutable(ef) {
		return false
	}
	_, own, err := allocSymbols(ef)
	return err == nil && own
}
