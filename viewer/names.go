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

// callLine is where frame f's own function made the call, as a group's
// label shows it: the physical function's file:line (the last of the
// inline chain), not the inlined library code it ran (a string's append
// inlined into parseArgs is parseArgs's line, not basic_string.h's); file
// by its base name. false when it cannot be looked up.
func (a *App) callLine(f uint32) (string, bool) {
	sf, ok := a.opt.Lines.(sourceFramer)
	if !ok {
		s, ok := a.frameSource(f)
		if !ok {
			return "", false
		}
		if i := strings.LastIndexByte(s, ':'); i > 0 {
			s = filepath.Base(s[:i]) + s[i:]
		}
		return s, true
	}
	if s, ok := a.callCache[f]; ok {
		return s, s != ""
	}
	fr := a.M.Frame(f)
	s := ""
	if ch, err := sf.SourceFrames(fr.Module, fr.Symbol, fr.Offset); err == nil && len(ch) > 0 && ch[len(ch)-1].File != "" {
		last := ch[len(ch)-1]
		s = filepath.Base(last.File) + ":" + strconv.Itoa(last.Line)
	}
	if a.callCache == nil {
		a.callCache = map[uint32]string{}
	}
	a.callCache[f] = s
	return s, s != ""
}
