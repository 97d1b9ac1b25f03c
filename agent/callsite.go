package agent

import (
	"path/filepath"
	"strings"
	"syscall"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/symbols"
)

// callsites names the PLT stub an aligned_alloc/memalign call went
// through (glibc has one function under both names, so the probe alone
// cannot tell), and the files frames lie in. The BPF side locates both
// by (inode, file offset); the file is the one the process maps, found
// through its mappings (by address and inode) or, failing that, through a
// path the kernel or memtrace named that inode by, opened where the
// process sees it and taken only when it has that inode. A host file that
// merely has the path is another file: in a container or under a bind
// mount, its symbols would be wrong ones.
type callsites struct {
	cache  *symbols.Cache
	byIno  map[uint64]string
	known  map[string]bool
	named  map[[2]uint64]logfmt.Op
	spaces map[int]*symbols.AddressSpace
	host   *symbols.AddressSpace // for processes gone before their maps were read
	// readAt is CLOCK_MONOTONIC ns before each process's maps were last
	// read: a frame in none of them, in a stack taken later, is worth
	// one more read.
	readAt map[int]uint64
	// reread holds, per process, the inodes a maps read was made for
	// already: a file the maps never list is not worth one per stack.
	reread map[int]map[uint64]bool
	// byPath are, per process, the files found by path for an inode, or
	// nil when none had the inode.
	byPath map[int]map[uint64]*symbols.Module
}

func newCallsites() *callsites {
	c := &callsites{byIno: map[uint64]string{}, known: map[string]bool{}, named: map[[2]uint64]logfmt.Op{},
		cache: symbols.NewCache(nil), spaces: map[int]*symbols.AddressSpace{}, readAt: map[int]uint64{},
		reread: map[int]map[uint64]bool{}, byPath: map[int]map[uint64]*symbols.Module{}}
	c.host, _ = symbols.NewAddressSpace(c.cache, 0)
	return c
}

// KnownFile registers a file a traced process maps or runs, by a path
// memtrace can open.
func (s *Session) KnownFile(path string) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs // frames name modules that readers open from anywhere
	}
	c := s.calls
	if c.known[path] {
		return
	}
	c.known[path] = true
	var st syscall.Stat_t
	if syscall.Stat(path, &st) == nil {
		c.byIno[st.Ino] = path
	}
}

// KnownProcess reads the mappings of pid now, opening the files it maps
// (while it lives: its stacks are often named after it exited). With
// attached set (the process ran before tracing), its file mappings are
// also remembered, so that their later munmap is not taken for an
// anonymous block's.
func (s *Session) KnownProcess(pid int, attached bool) {
	at := monotonicNS()
	// A line that does not parse is one mapping less; the others are
	// still worth having.
	pms, err := procfs.ReadMaps(pid)
	if err != nil && pms == nil {
		return
	}
	c := s.calls
	c.readAt[pid] = at
	as := c.spaces[pid]
	if as == nil {
		if as, err = symbols.NewAddressSpace(c.cache, pid); err == nil {
			c.spaces[pid] = as
		}
	} else {
		// Since the last read it may have chroot'ed or pivoted and
		// exec'ed: paths are looked up in its root of now.
		_ = as.Reroot()
	}
	ms := symbols.ProcMappings(pms)
	if as != nil {
		_ = as.AddSnapshot(ms, 0)
	}
	p := s.proc(uint32(pid))
	for _, m := range ms {
		if !m.FileBacked() {
			continue
		}
		// The path as the kernel shows it to memtrace (a chroot'ed
		// process's files by their host paths, a container's by
		// their paths inside it): resolved with the inode, never
		// opened as is.
		if _, ok := c.byIno[m.File.Inode]; !ok {
			c.byIno[m.File.Inode] = m.Path
		}
		if attached {
			if _, ok := p.live[m.Start]; !ok {
				p.live[m.Start] = liveBlock{v: (m.End - m.Start) | filteredBit}
			}
		}
	}
}

// fileOf returns the module of the file with inode ino that pid mapped
// at addr, and the path it is named by; a nil module with a path when
// the file is known by name only, "" when not at all. ts is when the
// frame was taken (CLOCK_MONOTONIC ns).
func (s *Session) fileOf(pid int, ts, addr, ino uint64) (*symbols.Module, string) {
	c := s.calls
	as := c.spaces[pid]
	if as == nil {
		s.KnownProcess(pid, false)
		as = c.spaces[pid]
	}
	path := ""
	if as != nil {
		loc, ok := as.LookupFile(addr, ino)
		if !ok && c.firstReread(pid, ino) && c.readAt[pid] < ts {
			// Mapped since the maps were last read (dlopen, or
			// the libraries ld.so maps after the exec).
			s.KnownProcess(pid, false)
			loc, ok = as.LookupFile(addr, ino)
		}
		if ok && loc.Module != nil {
			return loc.Module, loc.Mapping.Path
		}
		if ok {
			path = loc.Mapping.Path
		}
	}
	if path == "" {
		path = c.byIno[ino]
	}
	if path == "" {
		return nil, ""
	}
	return c.openByPath(pid, ino, path), path
}

// alignedOp names a call to a function with several names by the PLT
// stub it went through (glibc's memalign and aligned_alloc, tcmalloc's
// free, delete and tc_free, ...), else returns op unchanged. The stub is (inode, file offset), or an address
// in pid when ino is all ones.
func (c *callsites) alignedOp(pid int, op logfmt.Op, ino, off uint64) logfmt.Op {
	key := [2]uint64{ino, off}
	if ino == ^uint64(0) {
		key[0] = ino - uint64(pid) // addresses are per process
	}
	if o, ok := c.named[key]; ok {
		return o
	}
	name := ""
	if ino == ^uint64(0) {
		if as := c.spaces[pid]; as != nil {
			if fr, err := as.Resolve(off, 0); err == nil {
				name = fr.Symbol
			}
		}
	} else if m := c.moduleByInode(pid, ino); m != nil {
		name, _, _ = m.Symbol(m.VAddr(off))
	}
	out := op
	// The name's op, when it is one of the same kind (a stub of an
	// unrelated function means the call came some other way).
	if o, ok := event.SymbolOp(strings.TrimSuffix(name, "@plt")); ok && o.IsFree() == op.IsFree() {
		out = o
	}
	if name != "" {
		c.named[key] = out
	}
	return out
}

// moduleByInode is the module of a file with inode ino that pid maps
// (through its mappings, else by a path named for that inode).
func (c *callsites) moduleByInode(pid int, ino uint64) *symbols.Module {
	if as := c.spaces[pid]; as != nil {
		if m, _ := as.ModuleByInode(ino); m != nil {
			return m
		}
	}
	path, ok := c.byIno[ino]
	if !ok {
		return nil
	}
	return c.openByPath(pid, ino, path)
}

// openByPath opens the file with inode ino by a path named for it, where
// pid sees it (its root, held since its maps were read, or the host),
// once per (pid, inode).
func (c *callsites) openByPath(pid int, ino uint64, path string) *symbols.Module {
	byPath := c.byPath[pid]
	if byPath == nil {
		byPath = map[uint64]*symbols.Module{}
		c.byPath[pid] = byPath
	}
	mod, done := byPath[ino]
	if done {
		return mod
	}
	as := c.spaces[pid]
	if as == nil {
		as = c.host
	}
	if as != nil {
		// A path memtrace was given through the process's root
		// (/proc/PID/root/...) is one inside that root, which the
		// address space holds past the process's exit.
		mod, _ = as.OpenFile(displayPath(path), ino)
	}
	byPath[ino] = mod
	return mod
}

// firstReread says whether no maps read was made for pid's inode ino
// yet, and notes that one is.
func (c *callsites) firstReread(pid int, ino uint64) bool {
	r := c.reread[pid]
	if r == nil {
		r = map[uint64]bool{}
		c.reread[pid] = r
	}
	if r[ino] {
		return false
	}
	r[ino] = true
	return true
}

// forget lets an exited process's root and mount namespace go (its
// stacks are named by the time its exit is written); the modules stay
// in the cache for other processes. A later stack of its pid reads the
// maps again.
func (c *callsites) forget(pid int) {
	if as := c.spaces[pid]; as != nil {
		_ = as.Close()
	}
	delete(c.spaces, pid)
	delete(c.readAt, pid)
	delete(c.reread, pid)
	delete(c.byPath, pid)
}
