package symbols

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"

	"github.com/memtrace/memtrace/internal/procfs"
)

// AddressSpace follows the mappings of one process over time and resolves
// its addresses. It is fed /proc/PID/maps snapshots (ReadProcMaps,
// AddSnapshot) and single mapping events (AddMapping), each stamped with a
// caller-chosen time t that must not decrease (an event timestamp or a
// sequence number).
//
// Mappings are never forgotten because they vanish from a later snapshot:
// a library that was dlclose'd, or a process that exited, still resolves.
// A mapping is only superseded by a new mapping overlapping it, and only
// from the new mapping's time on: ResolveAt(addr, t) with an older t still
// sees the old mapping.
//
// The mapped file is opened when its mapping is added (through
// /proc/PID/map_files, else the process's root), so resolution never
// depends on the process or the path still existing later.
type AddressSpace struct {
	cache *Cache
	pid   int
	root  *fsRoot

	mu  sync.RWMutex
	cur []*entry // current mappings, sorted by start, non-overlapping
	old []*entry // superseded mappings, each valid in [since, until)
}

type entry struct {
	Mapping
	since, until uint64
	mod          *Module
	modErr       error
}

// NewAddressSpace tracks process pid. Files are opened through
// /proc/PID/root (its descriptor is taken now so it outlives the process)
// and /proc/PID/map_files. pid 0 means "this filesystem, no process": paths
// are opened as given, which is what tests and offline tools want.
func NewAddressSpace(c *Cache, pid int) (*AddressSpace, error) {
	as := &AddressSpace{cache: c, pid: pid, root: hostFS}
	if pid > 0 {
		r, err := openRoot(procfs.Dir(pid) + "/root")
		if err != nil {
			return nil, fmt.Errorf("process %d: %w (is it running, and are we allowed to read its /proc?)", pid, err)
		}
		as.root = r
	}
	return as, nil
}

// Close releases the process root. Modules already opened stay in the
// cache.
func (as *AddressSpace) Close() error {
	as.root.close()
	return nil
}

// ReadProcMaps reads /proc/PID/maps now and adds it as a snapshot at t.
func (as *AddressSpace) ReadProcMaps(t uint64) error {
	if as.pid <= 0 {
		return fmt.Errorf("address space has no process to read maps from: %w", ErrNotFound)
	}
	pms, perr := procfs.ReadMaps(as.pid)
	if perr != nil && pms == nil {
		return fmt.Errorf("reading mappings of process %d: %w", as.pid, perr)
	}
	err := as.AddSnapshot(ProcMappings(pms), t)
	return errors.Join(perr, err)
}

// AddSnapshot adds every mapping of a maps snapshot taken at t. Mappings
// already known unchanged are kept as they are; mappings missing from the
// snapshot are kept too. The error joins the files that could not be
// opened; their mappings are still recorded.
func (as *AddressSpace) AddSnapshot(ms []Mapping, t uint64) error {
	var errs []error
	for _, m := range ms {
		if err := as.AddMapping(m, t); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// AddMapping records one mapping (an mmap event, or a maps line) at time t.
// Any older mapping it overlaps is superseded from t on; the parts of an
// older mapping outside the new one stay current. For an executable file
// mapping the file is opened now; the returned error says if that failed
// (the mapping is recorded anyway, resolving to the path and a file
// offset).
func (as *AddressSpace) AddMapping(m Mapping, t uint64) error {
	as.mu.Lock()
	i, _ := slices.BinarySearchFunc(as.cur, m.Start, func(e *entry, v uint64) int { return cmp.Compare(e.Start, v) })
	if i < len(as.cur) && sameMapping(&as.cur[i].Mapping, &m) {
		as.mu.Unlock()
		return nil
	}
	as.mu.Unlock()

	// Open outside the lock: it does file I/O.
	ne := &entry{Mapping: m, since: t, until: math.MaxUint64}
	if m.FileBacked() && m.Exec() {
		ne.mod, ne.modErr = as.open(&m)
	}

	as.mu.Lock()
	defer as.mu.Unlock()
	// Collect current entries overlapping [Start, End).
	lo, _ := slices.BinarySearchFunc(as.cur, m.Start, func(e *entry, v uint64) int { return cmp.Compare(e.End, v+1) })
	hi := lo
	for hi < len(as.cur) && as.cur[hi].Start < m.End {
		hi++
	}
	var keep []*entry
	for _, o := range as.cur[lo:hi] {
		if o.Start >= m.End || o.End <= m.Start {
			keep = append(keep, o)
			continue
		}
		if sameMapping(&o.Mapping, &m) {
			return nil
		}
		old := *o
		old.until = t
		as.old = append(as.old, &old)
		if o.Start < m.Start {
			left := *o
			left.End = m.Start
			keep = append(keep, &left)
		}
		if o.End > m.End {
			right := *o
			if right.FileBacked() {
				right.Offset += m.End - o.Start
			}
			right.Start = m.End
			keep = append(keep, &right)
		}
	}
	keep = append(keep, ne)
	slices.SortFunc(keep, func(a, b *entry) int { return cmp.Compare(a.Start, b.Start) })
	as.cur = slices.Replace(as.cur, lo, hi, keep...)
	return ne.modErr
}

// Exec marks every current mapping as ended at t: the process replaced its
// image. Addresses looked up at an earlier time still resolve to them.
func (as *AddressSpace) Exec(t uint64) {
	as.mu.Lock()
	defer as.mu.Unlock()
	for _, e := range as.cur {
		e.until = t
	}
	as.old = append(as.old, as.cur...)
	as.cur = nil
}

func sameMapping(a, b *Mapping) bool {
	return a.Start == b.Start && a.End == b.End && a.Offset == b.Offset && a.File == b.File &&
		a.Path == b.Path && a.Perms == b.Perms
}

func (as *AddressSpace) open(m *Mapping) (*Module, error) {
	if mod := as.cache.byFileID(m.File); mod != nil {
		return mod, nil
	}
	var errs []error
	// map_files names exactly the mapped inode even if the path was
	// replaced or unlinked; it needs CAP_SYS_ADMIN and a live process.
	if as.pid > 0 {
		p := procfs.MapFile(as.pid, m.Start, m.End)
		if f, err := os.Open(p); err == nil {
			return as.cache.adopt(f, m.Path, m.File, as.root)
		} else {
			errs = append(errs, err)
		}
	}
	// The maps path is relative to the root of whoever reads it when the
	// process is in our mount namespace (a chroot'ed process's files have
	// their host paths), and to the process's own namespace root
	// otherwise: try both, and take only the file the process maps.
	for _, r := range as.roots() {
		f, err := r.open(m.Path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Inside its root the path is the process's own view (an
		// overlay file's device differs from the one maps gives); on
		// the host it may be another file's.
		if err := sameFile(f, m.File, r == hostFS); err != nil {
			f.Close()
			errs = append(errs, fmt.Errorf("%s mapped at %#x: %w", m.Path, m.Start, err))
			continue
		}
		return as.cache.adopt(f, m.Path, m.File, r)
	}
	return nil, fmt.Errorf("opening %s mapped at %#x: %w", m.Path, m.Start, errors.Join(errs...))
}

// sameFile checks that f is the mapped file id: by inode, and by device
// too where strict (a file found by a path that another file may share).
func sameFile(f *os.File, id FileID, strict bool) error {
	got, _, _, err := fileIDOf(f)
	if err != nil {
		return err
	}
	switch {
	case id.Inode == 0:
	case strict && (got.Inode != id.Inode || got.Major != id.Major || got.Minor != id.Minor):
		return fmt.Errorf("another file has its path (inode %d on %d:%d, mapped %d on %d:%d): %w",
			got.Inode, got.Major, got.Minor, id.Inode, id.Major, id.Minor, ErrNotFound)
	case got.Inode != id.Inode:
		return fmt.Errorf("another file has its path (inode %d, mapped %d): %w", got.Inode, id.Inode, ErrNotFound)
	}
	return nil
}

// LookupFile finds the newest mapping covering addr, current or
// superseded, of the file with inode ino: a frame located in its file by
// the kernel (inode and offset) names exactly one of the mappings that
// ever covered its address, even after a dlclose, an exec or another
// library mapped there since.
func (as *AddressSpace) LookupFile(addr, ino uint64) (Location, bool) {
	as.mu.RLock()
	defer as.mu.RUnlock()
	var hit *entry
	i, _ := slices.BinarySearchFunc(as.cur, addr+1, func(e *entry, v uint64) int { return cmp.Compare(e.Start, v) })
	if i > 0 {
		if e := as.cur[i-1]; addr < e.End && e.File.Inode == ino {
			hit = e
		}
	}
	if hit == nil {
		for _, e := range as.old {
			if addr >= e.Start && addr < e.End && e.File.Inode == ino && (hit == nil || e.since >= hit.since) {
				hit = e
			}
		}
	}
	if hit == nil || ino == 0 {
		return Location{}, false
	}
	loc := Location{Mapping: hit.Mapping, Module: hit.mod}
	fileOff := addr - hit.Start + hit.Offset
	loc.ModuleOffset = fileOff
	if hit.mod != nil {
		loc.ModuleOffset = hit.mod.VAddr(fileOff)
	}
	return loc, true
}

// ModuleByInode returns the module of a file with inode ino that the
// process maps or mapped (the newest such mapping's), and the mapping's
// path; nil when none is known or the file could not be opened.
func (as *AddressSpace) ModuleByInode(ino uint64) (*Module, string) {
	as.mu.RLock()
	defer as.mu.RUnlock()
	if ino == 0 {
		return nil, ""
	}
	for _, e := range as.cur {
		if e.File.Inode == ino && e.mod != nil {
			return e.mod, e.Path
		}
	}
	var hit *entry
	for _, e := range as.old {
		if e.File.Inode == ino && e.mod != nil && (hit == nil || e.since >= hit.since) {
			hit = e
		}
	}
	if hit == nil {
		return nil, ""
	}
	return hit.mod, hit.Path
}

// OpenFile opens the file a frame of the process lies in when only its
// path (as the kernel named it) and inode are known: inside the process's
// root first, then on the host, taking only a file with that inode (the
// device is not known; a host file of the same path is another file).
// The root is the one held since NewAddressSpace or the last Reroot, so
// this works after the process exited, as long as its mounts do.
func (as *AddressSpace) OpenFile(path string, ino uint64) (*Module, error) {
	var errs []error
	for _, r := range as.roots() {
		f, err := r.open(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := sameFile(f, FileID{Inode: ino}, false); err != nil {
			f.Close()
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		return as.cache.adopt(f, path, FileID{}, r)
	}
	return nil, fmt.Errorf("opening %s (inode %d): %w", path, ino, errors.Join(errs...))
}

// Reroot takes the process's root again if it changed (a chroot, or a
// pivot_root in its mount namespace, followed by an exec): files opened
// by path from then on are looked up there. Modules already opened keep
// theirs.
func (as *AddressSpace) Reroot() error {
	if as.pid <= 0 {
		return nil
	}
	dir := procfs.Dir(as.pid) + "/root"
	id, err := rootID(dir)
	if err != nil {
		return fmt.Errorf("process %d: %w", as.pid, err)
	}
	as.mu.RLock()
	same := as.root.id == id
	as.mu.RUnlock()
	if same {
		return nil
	}
	r, err := openRoot(dir)
	if err != nil {
		return err
	}
	as.mu.Lock()
	old := as.root
	as.root = r
	as.mu.Unlock()
	// Modules found through the old root look their debug files up
	// by its /proc path from now on.
	old.close()
	return nil
}

// roots are where a path of the process is looked up: its root, then,
// unless that is the host's, the host.
func (as *AddressSpace) roots() []*fsRoot {
	as.mu.RLock()
	r := as.root
	as.mu.RUnlock()
	if r == hostFS {
		return []*fsRoot{hostFS}
	}
	return []*fsRoot{r, hostFS}
}

// Location is where an address falls: the mapping, its module (nil if the
// file could not be opened or the mapping is anonymous) and the ELF
// virtual address within the module.
type Location struct {
	Mapping      Mapping
	Module       *Module
	ModuleOffset uint64
}

// Lookup finds the latest mapping covering addr.
func (as *AddressSpace) Lookup(addr uint64) (Location, bool) {
	return as.LookupAt(addr, math.MaxUint64)
}

// LookupAt finds the mapping that covered addr at time t.
func (as *AddressSpace) LookupAt(addr, t uint64) (Location, bool) {
	as.mu.RLock()
	defer as.mu.RUnlock()
	var hit *entry
	i, _ := slices.BinarySearchFunc(as.cur, addr+1, func(e *entry, v uint64) int { return cmp.Compare(e.Start, v) })
	if i > 0 {
		if e := as.cur[i-1]; addr < e.End && e.since <= t {
			hit = e
		}
	}
	if hit == nil {
		// Superseded mappings: the newest one that was valid at t (and
		// failing that, the newest at all, for a time before anything was
		// seen: better a stale answer than none).
		var best, any *entry
		for _, e := range as.old {
			if addr < e.Start || addr >= e.End {
				continue
			}
			if e.since <= t && t < e.until && (best == nil || e.since >= best.since) {
				best = e
			}
			if any == nil || e.since >= any.since {
				any = e
			}
		}
		hit = best
		if hit == nil && i > 0 && addr < as.cur[i-1].End {
			hit = as.cur[i-1]
		}
		if hit == nil {
			hit = any
		}
	}
	if hit == nil {
		return Location{}, false
	}
	loc := Location{Mapping: hit.Mapping, Module: hit.mod}
	fileOff := addr - hit.Start + hit.Offset
	if hit.mod != nil {
		loc.ModuleOffset = hit.mod.VAddr(fileOff)
	} else {
		loc.ModuleOffset = fileOff
	}
	return loc, true
}

// Flags select what Resolve computes.
type Flags uint8

const (
	// WithSource fills File, Line and Source from DWARF (costly on the
	// first lookup in each compilation unit).
	WithSource Flags = 1 << iota
	// ReturnAddress says addr is a return address taken from a stack:
	// symbol and line are looked up for addr-1 (the call instruction), so
	// a call at the very end of a function or line is attributed right.
	// Offset is still reported from the symbol to addr itself, as glibc's
	// backtrace_symbols does.
	ReturnAddress
)

// Frame is a resolved address.
type Frame struct {
	Addr         uint64
	Module       string // mapped path ("" when no mapping covers Addr)
	BuildID      string
	ModuleOffset uint64 // ELF virtual address in Module
	Symbol       string // mangled, exactly as in the ELF symbol table; "" if none
	Offset       uint64 // Addr's distance from Symbol's start
	// With WithSource:
	File   string        // row of the line table covering the PC
	Line   int           //
	Source []SourceFrame // inline chain, innermost first; Source[0] is File:Line
}

// Resolve resolves addr against the latest mappings.
func (as *AddressSpace) Resolve(addr uint64, flags Flags) (Frame, error) {
	return as.ResolveAt(addr, math.MaxUint64, flags)
}

// ResolveAt resolves addr as the process's memory was at time t. The Frame
// is filled as far as possible; the error says what was missing (no
// mapping: ErrNotFound; no symbol table, no DWARF...).
func (as *AddressSpace) ResolveAt(addr, t uint64, flags Flags) (Frame, error) {
	fr := Frame{Addr: addr}
	loc, ok := as.LookupAt(addr, t)
	if !ok {
		return fr, fmt.Errorf("address %#x: no mapping: %w", addr, ErrNotFound)
	}
	fr.Module = loc.Mapping.Path
	fr.ModuleOffset = loc.ModuleOffset
	if loc.Module == nil {
		as.mu.RLock()
		err := as.openErr(addr, t)
		as.mu.RUnlock()
		if err == nil {
			err = fmt.Errorf("address %#x in %q: not a file-backed executable mapping: %w", addr, fr.Module, ErrNotFound)
		}
		return fr, err
	}
	return loc.Module.frame(fr, flags)
}

func (as *AddressSpace) openErr(addr, t uint64) error {
	for _, l := range [][]*entry{as.cur, as.old} {
		for _, e := range l {
			if addr >= e.Start && addr < e.End && e.modErr != nil {
				return e.modErr
			}
		}
	}
	return nil
}

// Frame resolves a module-relative address (ModuleOffset) the same way
// AddressSpace.Resolve does; Addr and Module are taken from fr.
func (m *Module) frame(fr Frame, flags Flags) (Frame, error) {
	fr.BuildID = m.buildID
	pc := fr.ModuleOffset
	var name string
	var off uint64
	var err error
	if flags&ReturnAddress != 0 && pc > 0 {
		pc--
		name, off, err = m.ReturnSymbol(fr.ModuleOffset)
	} else {
		name, off, err = m.Symbol(pc)
	}
	if err == nil {
		fr.Symbol, fr.Offset = name, off
	}
	if flags&WithSource != 0 {
		src, serr := m.Source(pc)
		if serr == nil && len(src) > 0 {
			fr.Source = src
			fr.File, fr.Line = src[0].File, src[0].Line
		}
		err = errors.Join(err, serr)
	}
	return fr, err
}

// Resolve resolves an ELF virtual address of the module (no process needed).
func (m *Module) Resolve(vaddr uint64, flags Flags) (Frame, error) {
	return m.frame(Frame{Addr: vaddr, Module: m.path, ModuleOffset: vaddr}, flags)
}
