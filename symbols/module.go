package symbols

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// Module is one ELF file (executable or shared object) with its symbol
// table and, on demand, its DWARF line tables. Addresses passed to a
// Module are ELF virtual addresses (what the symbol table and line table
// use), not process addresses.
type Module struct {
	path    string
	buildID string
	root    *fsRoot
	cache   *Cache
	file    *os.File
	elf     *elfFile
	size    int64
	mtime   int64
	statID  FileID
	loads   []load

	dbgOnce sync.Once
	dbg     *debugFile

	symOnce sync.Once
	syms    *symtab
	symErr  error

	dwOnce sync.Once
	dw     *dwarfIndex
	dwErr  error
}

// Path is the path the module was opened by.
func (m *Module) Path() string { return m.path }

// BuildID is the GNU build ID in hex, or "".
func (m *Module) BuildID() string { return m.buildID }

// DebugFile is the separate debug file in use, or "" if none was found.
func (m *Module) DebugFile() string {
	if d := m.debugFile(); d != nil {
		return d.path
	}
	return ""
}

func (m *Module) close() {
	if m.file != nil {
		m.file.Close()
	}
	if m.dbg != nil && m.dbg.file != nil {
		m.dbg.file.Close()
	}
}

func (m *Module) debugFile() *debugFile {
	m.dbgOnce.Do(func() {
		var err error
		func() {
			defer guard("looking for debug file", &err)
			m.dbg, _ = m.findDebugFile()
		}()
	})
	return m.dbg
}

// VAddr converts an offset in the file (a mapping's file offset plus the
// distance into the mapping) to the ELF virtual address, through the
// PT_LOAD segment holding it. Files without program headers map 1:1.
func (m *Module) VAddr(fileOff uint64) uint64 {
	for _, l := range m.loads {
		if fileOff >= l.off && fileOff-l.off < max(l.filesz, l.memsz) {
			return fileOff - l.off + l.vaddr
		}
	}
	// The mapping may start on the page below the segment's offset.
	for _, l := range m.loads {
		if fileOff < l.off && l.off-fileOff < 1<<16 {
			return l.vaddr - (l.off - fileOff)
		}
	}
	return fileOff
}

// symbols parses, once, the union of the module's .symtab and .dynsym, the
// separate debug file's .symtab, the MiniDebugInfo .symtab and synthesized
// PLT entries.
func (m *Module) symbols() (*symtab, error) {
	m.symOnce.Do(func() {
		var all []sym
		var errs []error
		add := func(e *elfFile, dynamic bool) {
			var err error
			all, err = symbolsFrom(e, dynamic, all)
			if err != nil {
				errs = append(errs, err)
			}
		}
		add(m.elf, false)
		add(m.elf, true)
		hasSymtab := m.elf.section(".symtab") != nil
		if !hasSymtab || !m.elf.hasDWARF() {
			if d := m.debugFile(); d != nil {
				add(d.elf, false)
			}
		}
		if mini, err := miniDebugInfo(m.elf); err == nil {
			add(mini, false)
		} else if !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
		}
		if plt, err := pltSymbols(m.elf); err == nil {
			all = append(all, plt...)
		} else {
			errs = append(errs, err)
		}
		if len(all) == 0 {
			errs = append([]error{ErrNoSymbols}, errs...)
			m.symErr = fmt.Errorf("%s: %w", m.path, errors.Join(errs...))
			return
		}
		func() {
			defer guard("sorting symbols", &m.symErr)
			m.syms = newSymtab(all)
		}()
		if len(errs) > 0 && m.symErr == nil {
			// Partial tables are still useful; report what was skipped.
			m.symErr = fmt.Errorf("%s: some symbols skipped: %w", m.path, errors.Join(errs...))
		}
	})
	return m.syms, m.symErr
}

// Symbol returns the (mangled) name of the function covering vaddr and the
// offset of vaddr from its start.
func (m *Module) Symbol(vaddr uint64) (name string, off uint64, err error) {
	t, err := m.symbols()
	if t == nil {
		return "", 0, err
	}
	s, ok := t.lookup(vaddr)
	if !ok {
		return "", 0, fmt.Errorf("address %#x in %s: %w", vaddr, m.path, ErrNotFound)
	}
	return s.name, vaddr - s.addr, nil
}

// ReturnSymbol names the function a return address ret returns into,
// with ret's offset from its start: the function holding the call at
// ret-1 or, where no function holds ret-1 and one starts exactly at
// ret, that one. Only planted return addresses start a function: a
// signal or context trampoline's (__restore_rt, __start_context), which
// the kernel or makecontext put on the stack with no call before them.
func (m *Module) ReturnSymbol(ret uint64) (name string, off uint64, err error) {
	if ret == 0 {
		return m.Symbol(ret)
	}
	name, off, err = m.Symbol(ret - 1)
	if err == nil {
		return name, off + 1, nil
	}
	if t, _ := m.symbols(); t != nil {
		if _, ok := t.lookup(ret - 1); !ok {
			if s, ok := t.at(ret); ok {
				return s.name, 0, nil
			}
		}
	}
	return "", 0, err
}

// NumSymbols reports how many code symbols the module's table holds
// (loading it if needed).
func (m *Module) NumSymbols() int {
	t, _ := m.symbols()
	if t == nil {
		return 0
	}
	return len(t.syms)
}

func (m *Module) dwarf() (*dwarfIndex, error) {
	m.dwOnce.Do(func() {
		src := m.elf
		if !src.hasDWARF() {
			if d := m.debugFile(); d != nil && d.elf.hasDWARF() {
				src = d.elf
			} else {
				m.dwErr = fmt.Errorf("%s: %w (install its debug package or build with -g)", m.path, ErrNoDebugInfo)
				return
			}
		}
		m.dw, m.dwErr = newDWARFIndex(src)
		if m.dwErr != nil {
			m.dwErr = fmt.Errorf("%s: %w", m.path, m.dwErr)
		}
	})
	return m.dw, m.dwErr
}

// Source returns the source location of the instruction at vaddr: the
// line-table row covering it (not the function's first line), and, when it
// lies in inlined code, the chain of inlined calls. The slice is innermost
// first: element 0 is the function the instruction belongs to textually
// with the row's file:line; each following element is the caller with the
// file:line of the call site, ending with the out-of-line function.
func (m *Module) Source(vaddr uint64) ([]SourceFrame, error) {
	d, err := m.dwarf()
	if err != nil {
		return nil, err
	}
	return d.source(vaddr)
}
