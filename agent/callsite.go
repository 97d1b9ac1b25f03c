package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/symbols"
	"github.com/memtrace/memtrace/tracer"
)

// callsites names the PLT stub an aligned_alloc/memalign call went
// through (glibc has one function under both names, so the probe alone
// cannot tell). The BPF side sends the stub as (inode, file offset); the
// files are the ones memtrace has seen mapped or started.
type callsites struct {
	cache  *symbols.Cache
	byIno  map[uint64]string
	known  map[string]bool
	named  map[[2]uint64]logfmt.Op
	spaces map[int]*symbols.AddressSpace
	// readAt is CLOCK_MONOTONIC ns before each process's maps were last
	// read: a frame in none of them, in a stack taken later, is worth
	// one more read.
	readAt map[int]uint64
}

func newCallsites() *callsites {
	return &callsites{byIno: map[uint64]string{}, known: map[string]bool{}, named: map[[2]uint64]logfmt.Op{},
		cache: symbols.NewCache(nil), spaces: map[int]*symbols.AddressSpace{}, readAt: map[int]uint64{}}
}

// KnownFile registers a file a traced process maps or runs.
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

// KnownProcess registers every file pid maps now. With attached set (the
// process ran before tracing), its file mappings are also remembered, so
// that their later munmap is not taken for an anonymous block's.
func (s *Session) KnownProcess(pid int, attached bool) {
	at := monotonicNS()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return
	}
	c := s.calls
	c.readAt[pid] = at
	as := c.spaces[pid]
	if as == nil {
		if as, err = symbols.NewAddressSpace(c.cache, pid); err == nil {
			c.spaces[pid] = as
		}
	}
	if as != nil {
		_ = as.ReadProcMaps(0)
	}
	// Paths through /proc/PID/root vanish with the process; in memtrace's
	// own mount namespace the plain path names the same file and lasts.
	root := "/proc/" + strconv.Itoa(pid) + "/root"
	if l, err := os.Readlink(root); err == nil && l == "/" {
		root = ""
	}
	p := s.proc(uint32(pid))
	for _, line := range strings.Split(string(b), "\n") {
		i := strings.Index(line, " /")
		if i < 0 {
			continue
		}
		s.KnownFile(root + strings.TrimSuffix(line[i+1:], " (deleted)"))
		if !attached {
			continue
		}
		se := strings.SplitN(strings.Fields(line)[0], "-", 2)
		start, err1 := strconv.ParseUint(se[0], 16, 64)
		end, err2 := strconv.ParseUint(se[1], 16, 64)
		if err1 == nil && err2 == nil {
			if _, ok := p.live[start]; !ok {
				p.live[start] = (end - start) | filteredBit
			}
		}
	}
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
	} else if path, ok := c.byIno[ino]; ok {
		if m, err := c.cache.Open(path); err == nil {
			name, _, _ = m.Symbol(m.VAddr(off))
		}
	}
	out := op
	// The name's op, when it is one of the same kind (a stub of an
	// unrelated function means the call came some other way).
	if o, ok := tracer.SymbolOp(strings.TrimSuffix(name, "@plt")); ok && o.IsFree() == op.IsFree() {
		out = o
	}
	if name != "" {
		c.named[key] = out
	}
	return out
}
