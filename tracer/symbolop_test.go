package tracer

import (
	"testing"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
)

// symbolOpSearch is SymbolOp as a search of the lists in order, what the
// table must answer for every name.
func symbolOpSearch(name string) (logfmt.Op, bool) {
	if op, ok := aliasNames[name]; ok {
		return op, true
	}
	for _, fs := range [][]funcDef{libcFuncs, cxxFuncs, apiFuncs} {
		for _, d := range fs {
			if d.name == name {
				return d.op, true
			}
		}
	}
	for _, d := range cxxFuncs {
		if cxx32(d.name) == name {
			return d.op, true
		}
	}
	return logfmt.OpOther, false
}

// TestSymbolOpTable: the table behind SymbolOp gives the op the lists
// give, in their order, for every probed name (aliases, 64- and 32-bit
// C++ overloads) and none for names memtrace does not probe.
func TestSymbolOpTable(t *testing.T) {
	names := []string{"", "malloc_usable_size", "_Znwmx", "Pvj", "printf", "_ZdlPvSt11align_val_t_"}
	for n := range aliasNames {
		names = append(names, n)
	}
	for _, fs := range [][]funcDef{libcFuncs, cxxFuncs, apiFuncs} {
		for _, d := range fs {
			names = append(names, d.name, cxx32(d.name), d.name+"@GLIBC")
		}
	}
	known := 0
	for _, n := range names {
		op, ok := event.SymbolOp(n)
		wop, wok := symbolOpSearch(n)
		if op != wop || ok != wok {
			t.Errorf("SymbolOp(%q) = %v, %v; the lists say %v, %v", n, op, ok, wop, wok)
		}
		if ok {
			known++
		}
	}
	if _, ok := event.SymbolOp("malloc"); !ok || known < len(libcFuncs)+len(cxxFuncs) {
		t.Errorf("%d of %d names known, malloc among them: %v", known, len(names), ok)
	}
}
