//go:build amd64 || arm64

package tracer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/symbols"
	"github.com/memtrace/memtrace/unwind"
)

// utable is where one file's table lies in the shared arrays.
type utable struct {
	rowFirst, rowCount, pageFirst, pageCount, extFirst, extCount uint32
}

func (u utable) put(b []byte) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], u.rowFirst)
	le.PutUint32(b[4:], u.rowCount)
	le.PutUint32(b[8:], u.pageFirst)
	le.PutUint32(b[12:], u.pageCount)
	le.PutUint32(b[16:], u.extFirst)
	le.PutUint32(b[20:], u.extCount)
}

// loadedTable is a file's table once it is in the maps. Only what the
// mappings need is kept: the rows live in the kernel.
type loadedTable struct {
	at       utable
	base     uint64 // Table.Base
	segments []unwind.Segment
	table    *unwind.Table // Bias only; Rows and Extended dropped
	// The dynamic linker's debugger hook: _dl_debug_state's file offset
	// and _r_debug's address (0: not a dynamic linker).
	dlState, rDebug uint64
}

// pageIndex returns, for each 4 KiB page of a table's PCs, the first
// and last row that can cover a PC in it (first | last << 32), so that
// the kernel side's binary search spans at most one page's rows.
func pageIndex(rows []unwind.Row) []uint64 {
	if len(rows) == 0 {
		return nil
	}
	n := int(rows[len(rows)-1].PC>>uPageShift) + 1
	out := make([]uint64, n)
	j := 0 // the last row with PC <= the page's start
	for p := 0; p < n; p++ {
		start := uint32(p) << uPageShift
		for j+1 < len(rows) && rows[j+1].PC <= start {
			j++
		}
		k := j
		end := start + (1<<uPageShift - 1)
		for k+1 < len(rows) && rows[k+1].PC <= end {
			k++
		}
		out[p] = uint64(j) | uint64(k)<<32
	}
	return out
}

// loadPath builds and loads the table of the file at path, unless a
// table for that file is loaded already. memtrace calls it for each
// library it probes, before the program has mapped it, so that the
// kernel side's VMA fallback finds the table at the first call.
func (u *unwinder) loadPath(path string) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return
	}
	id := fileID{kernelDev(uint64(unix.Major(st.Dev)), uint64(unix.Minor(st.Dev))), st.Ino}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.tableLocked(id, path)
}

// tableLocked returns the loaded table of file id, building it from
// path the first time.
func (u *unwinder) tableLocked(id fileID, path string) *loadedTable {
	if lt, ok := u.tables[id]; ok {
		return lt
	}
	lt, err := u.build(path)
	u.tables[id] = lt
	if err != nil {
		u.log("memtrace: no unwind table for %s: %v", path, err)
		return nil
	}
	var kb [uFileKeySize]byte
	binary.LittleEndian.PutUint64(kb[0:], id.dev)
	binary.LittleEndian.PutUint64(kb[8:], id.ino)
	vb := make([]byte, uFileSize)
	lt.at.put(vb)
	if len(lt.segments) > 0 {
		// The kernel side maps a VMA to rows through the first
		// executable segment, as Table.Bias does.
		s := lt.segments[0]
		le := binary.LittleEndian
		le.PutUint64(vb[uTableSize:], s.Offset-min(s.Offset, 0xffff))
		le.PutUint64(vb[uTableSize+8:], s.Offset+s.Filesz+1)
		le.PutUint64(vb[uTableSize+16:], s.Offset-s.Vaddr+lt.base)
	}
	if err := u.files.Put(kb[:], vb); err != nil {
		u.log("memtrace: unwind table of %s: file map: %v", path, err)
	}
	return lt
}

var errTablesFull = errors.New("the unwind tables are full")

// build builds a file's table and appends it to the shared arrays.
func (u *unwinder) build(path string) (*loadedTable, error) {
	start := time.Now()
	t, err := cachedTable(path, symbols.UnwindOptions(path, mappedPath(path)))
	if err != nil {
		return nil, err
	}
	if t.Arch != u.arch {
		return nil, fmt.Errorf("a %s file: %w", t.Arch, unwind.ErrUnsupportedArch)
	}
	pages := pageIndex(t.Rows)
	nr, np, ne := uint32(len(t.Rows)), uint32(len(pages)), uint32(len(t.Extended))
	if uint64(u.nextRow)+uint64(nr) > uint64(u.rowCap) || uint64(u.nextPage)+uint64(np) > uint64(u.pageCap) ||
		uint64(u.nextExt)+uint64(ne) > uint64(u.extCap) {
		if !u.full {
			u.full = true
			u.log("memtrace: the unwind tables are full (%d of %d rows used): stacks through %s and later files stop there", u.nextRow, u.rowCap, path)
		}
		return nil, errTablesFull
	}
	if _, err := u.rows.WriteAt(t.Bytes(), int64(u.nextRow)*unwind.RowSize); err != nil {
		return nil, fmt.Errorf("write unwind rows: %w", err)
	}
	pb := make([]byte, len(pages)*uPageSize)
	for i, p := range pages {
		binary.LittleEndian.PutUint64(pb[i*uPageSize:], p)
	}
	if _, err := u.pages.WriteAt(pb, int64(u.nextPage)*uPageSize); err != nil {
		return nil, fmt.Errorf("write unwind page index: %w", err)
	}
	if ne > 0 {
		if _, err := u.ext.WriteAt(t.ExtendedBytes(), int64(u.nextExt)*unwind.ExtSize); err != nil {
			return nil, fmt.Errorf("write extended unwind rules: %w", err)
		}
	}
	lt := &loadedTable{at: utable{rowFirst: u.nextRow, rowCount: nr, pageFirst: u.nextPage, pageCount: np,
		extFirst: u.nextExt, extCount: ne}, base: t.Base, segments: t.Segments}
	u.nextRow += nr
	u.nextPage += np
	u.nextExt += ne
	u.log("memtrace: unwind table %s: %d rows, %d bytes (+%d page index, %d extended), built in %v",
		path, nr, len(t.Rows)*unwind.RowSize, len(pb), ne, time.Since(start).Round(time.Microsecond))
	t.Rows, t.Extended = nil, nil
	lt.table = t
	lt.dlState, lt.rDebug = loaderHook(path)
	return lt, nil
}

// mapWindow writes into an mmapable BPF array through a mapping of just
// the pages written, undone at once. The arrays are sized for the largest
// programs (32 MiB of rows by default); kept mapped, as ebpf.Map.Memory
// keeps them, every page of them counted in memtrace's RSS (40 of the
// 154 MB on sqlite3 with --stack-depth 32) though the kernel holds them
// anyway and a run fills a few percent.
type mapWindow struct{ m *ebpf.Map }

func (w *mapWindow) WriteAt(p []byte, off int64) (int, error) {
	return w.at(p, off, true)
}

// ReadAt reads the array as the kernel side sees it (tests).
func (w *mapWindow) ReadAt(p []byte, off int64) (int, error) {
	return w.at(p, off, false)
}

func (w *mapWindow) at(p []byte, off int64, write bool) (int, error) {
	size := int64(w.m.MaxEntries()) * int64(w.m.ValueSize())
	if off < 0 || off+int64(len(p)) > size {
		return 0, fmt.Errorf("access of %d bytes at %d: past the map's %d", len(p), off, size)
	}
	if len(p) == 0 {
		return 0, nil
	}
	page := int64(os.Getpagesize())
	lo := off &^ (page - 1)
	hi := (off + int64(len(p)) + page - 1) &^ (page - 1)
	prot := unix.PROT_READ
	if write {
		prot |= unix.PROT_WRITE
	}
	mem, err := unix.Mmap(w.m.FD(), lo, int(hi-lo), prot, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("map the unwind array: %w", err)
	}
	var n int
	if write {
		n = copy(mem[off-lo:], p)
	} else {
		n = copy(p, mem[off-lo:])
	}
	if err := unix.Munmap(mem); err != nil {
		return n, fmt.Errorf("unmap the unwind array: %w", err)
	}
	return n, nil
}

// mappedPath is the path a /proc/PID/map_files/START-END file is mapped by,
// under the process's root (its separate debug file may be beside it);
// path itself otherwise.
func mappedPath(path string) string {
	rest, ok := strings.CutPrefix(path, "/proc/")
	if !ok {
		return path
	}
	pid, rest, ok := strings.Cut(rest, "/")
	if !ok || !strings.HasPrefix(rest, "map_files/") {
		return path
	}
	target, err := os.Readlink(path)
	if err != nil || !strings.HasPrefix(target, "/") {
		return path
	}
	return "/proc/" + pid + "/root" + strings.TrimSuffix(target, " (deleted)")
}
