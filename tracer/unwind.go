//go:build amd64 || arm64

package tracer

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"

	"github.com/memtrace/memtrace/unwind"
)

// The DWARF walk's maps (bpf/memtrace.h): one array of rows for all
// files, one of extended rules, one page index, each process's mappings,
// and each file's table for the kernel side's VMA fallback.
const (
	uPageShift   = 12  // MT_UPAGE_SHIFT
	uMaxMaps     = 512 // MT_UMAPS
	uTableSize   = 24  // struct mt_utable
	uMapSize     = 24 + uTableSize
	uMapsSize    = 8 + uMaxMaps*uMapSize
	uFileKeySize = 16
	uFileSize    = uTableSize + 24
	uPageSize    = 8 // an array element of u64
)

// DefaultUnwindRows is the size of the shared row array when stacks are
// on: 32 MiB, about 170 libcs' worth.
const DefaultUnwindRows = 4 << 20

// fileID names a file as the kernel's VMA does: the device in the
// kernel's encoding (MKDEV: major << 20 | minor) and the inode.
type fileID struct{ dev, ino uint64 }

func kernelDev(major, minor uint64) uint64 { return major<<20 | minor }

// unwinder keeps the DWARF walk's tables and mappings in the BPF maps.
// Tables are appended and never removed: a file's table serves every
// process that maps it, for the tracer's whole life.
type unwinder struct {
	mu                  sync.Mutex
	rows, pages, ext    *mapWindow
	procs, files, stale *ebpf.Map
	rowCap, pageCap     uint32
	extCap              uint32
	nextRow, nextPage   uint32
	nextExt             uint32
	tables              map[fileID]*loadedTable // nil: no table (not retried)
	written             map[int][]umap          // each process's array as last written
	seen                map[int][]procMapping   // each process's mappings as last read, by start
	readAt              map[int]uint64          // CLOCK_MONOTONIC ns before seen was last read
	ownRoot             map[int]bool            // seen's paths name files in memtrace's own root
	named               map[uint64]bool         // inodes whose path was handed on
	loader              map[int]loaderLink      // each process's dlopen hook
	noLoaders           bool                    // after closeLoaders: no more hooks
	logf                func(format string, args ...any)
	arch                unwind.Arch
	full                bool          // said once: the row array is full
	gen                 atomic.Uint32 // the last mapping array's number (mt_umaps.gen)
}

func newUnwinder(objs *MemtraceObjects, logf func(string, ...any)) (*unwinder, error) {
	u := &unwinder{procs: objs.UnwindProcs, files: objs.UnwindFiles, stale: objs.UnwindStale,
		tables: map[fileID]*loadedTable{}, written: map[int][]umap{}, seen: map[int][]procMapping{}, readAt: map[int]uint64{}, ownRoot: map[int]bool{},
		named: map[uint64]bool{}, loader: map[int]loaderLink{}, logf: logf}
	for _, m := range []struct {
		mp  *ebpf.Map
		out **mapWindow
		cap *uint32
	}{{objs.UnwindRows, &u.rows, &u.rowCap}, {objs.UnwindPages, &u.pages, &u.pageCap}, {objs.UnwindExt, &u.ext, &u.extCap}} {
		*m.out = &mapWindow{m: m.mp}
		*m.cap = m.mp.MaxEntries()
	}
	switch runtime.GOARCH {
	case "arm64":
		u.arch = unwind.ArchARM64
	default:
		u.arch = unwind.ArchAMD64
	}
	return u, nil
}

func (u *unwinder) log(format string, args ...any) {
	if u.logf != nil {
		u.logf(format, args...)
	}
}

// Usage reports the rows used and available and the tables loaded.
func (u *unwinder) usage() (rows, capacity uint32, tables int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, lt := range u.tables {
		if lt != nil {
			tables++
		}
	}
	return u.nextRow, u.rowCap, tables
}

// sizeUnwindMaps sets the shared arrays' sizes before load: the rows
// asked for (a page index entry per 4 rows, an extended rule per 64),
// or one element each when the tables are not used.
func sizeUnwindMaps(spec *ebpf.CollectionSpec, dwarf bool, rows int) error {
	if rows == 0 {
		rows = DefaultUnwindRows
	}
	if rows < 0 || rows > 1<<28 {
		return fmt.Errorf("unwind rows %d out of range: give 1 to %d", rows, 1<<28)
	}
	sizes := map[string]uint32{"unwind_rows": 1, "unwind_pages": 1, "unwind_ext": 1}
	if dwarf {
		sizes = map[string]uint32{"unwind_rows": uint32(rows), "unwind_pages": uint32(max(rows/4, 1)),
			"unwind_ext": uint32(min(max(rows/64, 1), 1<<20))}
	}
	for name, n := range sizes {
		m, ok := spec.Maps[name]
		if !ok {
			return fmt.Errorf("BPF object has no %s map: rebuild it (make generate)", name)
		}
		m.MaxEntries = n
	}
	return nil
}

// UnwindUsage reports how many unwind rows are in use, how many fit, and
// how many files' tables are loaded (all zero when stacks are walked by
// frame pointers).
func (t *Tracer) UnwindUsage() (rows, capacity uint32, tables int) {
	if t.unw == nil {
		return 0, 0, 0
	}
	return t.unw.usage()
}
