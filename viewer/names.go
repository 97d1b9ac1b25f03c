package viewer

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/symbols"
)

// frameName is frame f's name in the group list, the call tree and the
// icicle: Model.FrameName, or for a frame logged without a function the
// ELF symbol covering it (Options.NameFrame). A library without symbols
// in the log (sqlite3's frames are all libsqlite3.so+0xOFF) is then read
// by function, as the report reads it.
func (a *App) frameName(f uint32) string {
	fr := a.M.Frame(f)
	if fr.Symbol != "" || fr.Module == "" || a.opt.NameFrame == nil {
		return a.M.FrameName(f)
	}
	if s, ok := a.elfNames[f]; ok {
		return s
	}
	s := a.opt.NameFrame(fr.Module, fr.Offset)
	if s == "" {
		s = a.M.FrameName(f)
	}
	if a.elfNames == nil {
		a.elfNames = map[uint32]string{}
	}
	a.elfNames[f] = s
	return s
}

// ELFNamer is an Options.NameFrame over c: the symbol covering the call
// (the byte before the return address), demangled.
func ELFNamer(c *symbols.Cache) func(module string, off uint64) string {
	mods := map[string]*symbols.Module{} // opened once, nil where they cannot be
	return func(module string, off uint64) string {
		if module == "" || strings.HasPrefix(module, "[") {
			return ""
		}
		mod, ok := mods[module]
		if !ok {
			mod, _ = c.Open(module)
			mods[module] = mod
		}
		if mod == nil {
			return ""
		}
		pc := off
		if pc > 0 {
			pc--
		}
		name, _, err := mod.Symbol(pc)
		if err != nil || name == "" {
			return ""
		}
		return symbols.Demangle(name)
	}
}

// shortName is a demangled name with its template arguments and
// parameters elided ("basic_string<…>::_M_mutate(…)"), for the group
// list, where a C++ library's long names would hide the frame that tells
// its groups apart. A name whose brackets do not pair (operator<) is
// kept whole.
func shortName(s string) string {
	if !strings.ContainsAny(s, "<(") {
		return s
	}
	var b strings.Builder
	depth, start := 0, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case depth == 0 && (c == '<' || c == '('):
			start, depth = c, 1
			b.WriteByte(c)
			if close := map[byte]byte{'<': '>', '(': ')'}[c]; i+1 < len(s) && s[i+1] == close {
				b.WriteByte(close) // "()" stays as it is
				i++
				depth = 0
				continue
			}
			b.WriteString("…")
		case depth > 0 && c == start:
			depth++
		case depth > 0 && (start == '<' && c == '>' || start == '(' && c == ')'):
			depth--
			if depth == 0 {
				b.WriteByte(c)
			}
		case depth == 0:
			if c == '>' || c == ')' {
				return s
			}
			b.WriteByte(c)
		}
	}
	if depth != 0 {
		return s
	}
	return b.String()
}

// sourceFramer is what symbols.Cache offers beyond SourceLine: the chain
// of inlined calls at a frame.
type sourceFramer interface {
	SourceFrames(module, symbol string, off uint64) ([]symbols.SourceFrame, error)
}

// frameCalls is frame f as the functions it stands for, innermost first,
// each at its call site (symbols.Calls, as the HTML report names them):
// an inlined function is a call of its own at its line, the physical
// function last at the line of the call; where no line is known, a frame
// with a symbol is at its offset, one named from the module's ELF symbols
// (Options.NameFrame) at the module's offset. Looked up once per frame.
func (a *App) frameCalls(f uint32) []symbols.Call {
	if c, ok := a.callsCache[f]; ok {
		return c
	}
	fr := a.M.Frame(f)
	name := a.frameName(f)
	var chain []symbols.SourceFrame
	if a.opt.Lines != nil && fr.Module != "" && !strings.HasPrefix(fr.Module, "[") {
		if sf, ok := a.opt.Lines.(sourceFramer); ok {
			if ch, err := sf.SourceFrames(fr.Module, fr.Symbol, fr.Offset); err == nil && len(ch) > 0 && ch[0].File != "" {
				chain = ch
			}
		} else if s, ok := a.frameSource(f); ok {
			if i := strings.LastIndexByte(s, ':'); i > 0 {
				if line, err := strconv.Atoi(s[i+1:]); err == nil {
					chain = []symbols.SourceFrame{{File: s[:i], Line: line}}
				}
			}
		}
	}
	off := ""
	switch {
	case fr.Symbol != "":
		off = "+0x" + strconv.FormatUint(fr.Offset, 16)
	case fr.Module != "" && name != a.M.FrameName(f):
		off = " (" + filepath.Base(fr.Module) + "+0x" + strconv.FormatUint(fr.Offset, 16) + ")"
	}
	c := symbols.Calls(chain, name, off)
	if a.callsCache == nil {
		a.callsCache = map[uint32][]symbols.Call{}
	}
	a.callsCache[f] = c
	return c
}
