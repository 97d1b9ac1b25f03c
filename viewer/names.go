package viewer

import (
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
