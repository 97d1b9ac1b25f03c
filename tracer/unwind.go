//go:build amd64 || arm64

package tracer

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

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
	full                bool // said once: the row array is full
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
	t, err := unwind.BuildTableFile(path, nil)
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

// loaderHook finds a dynamic linker's _dl_debug_state (as a file offset,
// for a uprobe) and _r_debug (an ELF address); zeros for other files.
func loaderHook(path string) (dlState, rDebug uint64) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	if f.Section(".interp") != nil {
		return 0, 0 // a program, not the loader
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return 0, 0
	}
	var fn, rd uint64
	for _, s := range syms {
		switch s.Name {
		case "_dl_debug_state":
			fn = s.Value
		case "_r_debug":
			rd = s.Value
		}
	}
	if fn == 0 || rd == 0 {
		return 0, 0
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && fn >= p.Vaddr && fn < p.Vaddr+p.Filesz {
			return fn - p.Vaddr + p.Off, rd
		}
	}
	return 0, 0
}

// rStateOff is r_state's offset in struct r_debug (after an int padded
// to 8, r_map and r_brk) on both 64-bit ABIs.
const rStateOff = 24

// watchLoader puts the dlopen hold (mt_dl_state) on pid's dynamic
// linker, or moves it after an exec placed the linker elsewhere.
func (t *Tracer) watchLoader(pid int) error {
	u := t.unw
	u.mu.Lock()
	var path string
	var off, cookie uint64
	for _, m := range u.seen[pid] {
		lt := u.tables[m.id]
		if lt == nil || lt.dlState == 0 {
			continue
		}
		if bias, ok := lt.table.Bias(m.start, m.offset); ok {
			path = fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.start, m.end)
			off, cookie = lt.dlState, lt.rDebug+bias+rStateOff
			break
		}
	}
	old, had := u.loader[pid]
	done := u.noLoaders
	u.mu.Unlock()
	if path == "" || done || had && old.cookie == cookie {
		return nil
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return fmt.Errorf("open the dynamic linker of process %d for its dlopen hook: %w", pid, err)
	}
	l, err := ex.Uprobe("_dl_debug_state", t.objs.MtDlState, &link.UprobeOptions{Address: off, PID: pid, Cookie: cookie})
	if err != nil {
		return fmt.Errorf("probe the dynamic linker of process %d (dlopen hook): %w", pid, err)
	}
	u.mu.Lock()
	u.loader[pid] = loaderLink{l: l, cookie: cookie}
	u.mu.Unlock()
	if had {
		// In the background: a close waits for a grace period, and a
		// --follow run moves the hook of every child that execs.
		t.closing.Add(1)
		go func() {
			defer t.closing.Done()
			old.l.Close()
		}()
	}
	return nil
}

type loaderLink struct {
	l      link.Link
	cookie uint64
}

// remap answers an mt_remap record: the kernel side lacks mappings of
// pid, or (hold) ld.so has mapped a library and the process waits, its
// hold recorded under key.
func (t *Tracer) remap(pid int, hold bool, key uint32) {
	if hold {
		// Resumed whatever happens: the tables are only a means.
		defer func() {
			_ = syscall.Kill(pid, syscall.SIGCONT)
			_ = t.objs.Hold.Delete(key)
		}()
	}
	if err := t.unw.updateProcess(pid, hold); err != nil {
		t.unw.log("memtrace: process %d: %v", pid, err)
	}
}

// procMapping is one executable file mapping from /proc/PID/maps.
type procMapping struct {
	start, end, offset uint64
	id                 fileID
	path               string
}

// readExecMaps returns pid's executable file mappings with their files'
// device and inode.
func readExecMaps(pid int) ([]procMapping, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []procMapping
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m, ok := parseMapsLine(sc.Text()); ok {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// parseMapsLine reads "start-end perms offset major:minor inode path".
func parseMapsLine(line string) (procMapping, bool) {
	var m procMapping
	fields := strings.Fields(line)
	if len(fields) < 6 || len(fields[1]) < 3 || fields[1][2] != 'x' || !strings.HasPrefix(fields[5], "/") {
		return m, false
	}
	se := strings.SplitN(fields[0], "-", 2)
	mm := strings.SplitN(fields[3], ":", 2)
	if len(se) != 2 || len(mm) != 2 {
		return m, false
	}
	var err [6]error
	m.start, err[0] = strconv.ParseUint(se[0], 16, 64)
	m.end, err[1] = strconv.ParseUint(se[1], 16, 64)
	m.offset, err[2] = strconv.ParseUint(fields[2], 16, 64)
	major, e3 := strconv.ParseUint(mm[0], 16, 32)
	minor, e4 := strconv.ParseUint(mm[1], 16, 32)
	err[3], err[4] = e3, e4
	m.id.ino, err[5] = strconv.ParseUint(fields[4], 10, 64)
	for _, e := range err {
		if e != nil {
			return m, false
		}
	}
	if m.id.ino == 0 || m.end <= m.start {
		return m, false
	}
	m.id.dev = kernelDev(major, minor)
	m.path = strings.TrimSuffix(strings.Join(fields[5:], " "), " (deleted)")
	return m, true
}

// umap is one entry of a process's mapping array.
type umap struct {
	start, end, base uint64
	at               utable
}

// mappingsFor turns a process's executable mappings into its array
// entries, building the tables of files not seen before. open names the
// file of a mapping as memtrace can open it.
func (u *unwinder) mappingsFor(maps []procMapping, open func(procMapping) string) []umap {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]umap, 0, len(maps))
	for _, m := range maps {
		e := umap{start: m.start, end: m.end}
		if lt := u.tableLocked(m.id, open(m)); lt != nil {
			if bias, ok := lt.table.Bias(m.start, m.offset); ok {
				e.base = bias + lt.base
				e.at = lt.at
			}
		}
		// A mapping without a table is listed too: the walk then
		// follows the frame pointer there instead of asking again.
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

func encodeUmaps(ms []umap) []byte {
	if len(ms) > uMaxMaps {
		ms = ms[:uMaxMaps]
	}
	b := make([]byte, uMapsSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(len(ms)))
	for i, m := range ms {
		o := 8 + i*uMapSize
		le.PutUint64(b[o:], m.start)
		le.PutUint64(b[o+8:], m.end)
		le.PutUint64(b[o+16:], m.base)
		m.at.put(b[o+24:])
	}
	// Past n, entries that end above every user address: the kernel
	// side's branchless search needs the whole array sorted by end.
	for i := len(ms); i < uMaxMaps; i++ {
		o := 8 + i*uMapSize
		le.PutUint64(b[o:], uMapsPad)
		le.PutUint64(b[o+8:], uMapsPad)
	}
	return b
}

// uMapsPad starts and ends the unused entries of a mapping array.
const uMapsPad = 1 << 62

// updateProcess writes pid's mapping array from /proc/PID/maps. Then
// the kernel side may ask again at its next miss (mt_remap) if the
// periodic rescan asks for it (clear) or the array changed: a request
// that changed nothing (a stray frame pointer into a data mapping) is
// not answered again before the next rescan.
func (u *unwinder) updateProcess(pid int, clear bool) error {
	at := monotonicNS()
	maps, err := readExecMaps(pid)
	if err != nil {
		return err
	}
	root := "/proc/" + strconv.Itoa(pid)
	l, err := os.Readlink(root + "/root")
	own := err == nil && l == "/"
	ms := u.mappingsFor(maps, func(m procMapping) string {
		// map_files opens the mapped file itself, even when its path
		// is in another mount namespace or was replaced since.
		p := fmt.Sprintf("%s/map_files/%x-%x", root, m.start, m.end)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		return root + "/root" + m.path
	})
	if len(ms) > uMaxMaps {
		u.log("memtrace: process %d has %d executable mappings; stacks use the first %d", pid, len(ms), uMaxMaps)
	}
	sort.Slice(maps, func(i, j int) bool { return maps[i].start < maps[j].start })
	u.mu.Lock()
	changed := !slices.Equal(u.written[pid], ms)
	u.written[pid] = ms
	u.seen[pid] = maps
	u.readAt[pid] = at
	u.ownRoot[pid] = own
	u.mu.Unlock()
	if changed {
		if err := u.procs.Put(uint32(pid), encodeUmaps(ms)); err != nil {
			return fmt.Errorf("write the mappings of process %d for the stack walk: %w", pid, err)
		}
	}
	if clear || changed {
		_ = u.stale.Delete(uint32(pid))
	}
	return nil
}

// forget drops an exited process's mappings.
func (u *unwinder) forget(pid int) {
	u.mu.Lock()
	delete(u.written, pid)
	delete(u.seen, pid)
	delete(u.readAt, pid)
	delete(u.ownRoot, pid)
	ll, had := u.loader[pid]
	delete(u.loader, pid)
	u.mu.Unlock()
	if had {
		ll.l.Close()
	}
	_ = u.procs.Delete(uint32(pid))
	_ = u.stale.Delete(uint32(pid))
}

// closeLoaders removes every dlopen hook (Release): a process may no
// longer be held at dlopen once nothing reads its request. With give (the
// watchdog's SetHandOff receiver) the hooks are handed over instead, and
// memtrace's own closes only drop references.
func (u *unwinder) closeLoaders(give func(fds []int) error) {
	u.mu.Lock()
	ls := u.loader
	u.loader = map[int]loaderLink{}
	u.noLoaders = true
	u.mu.Unlock()
	var all []link.Link
	for _, ll := range ls {
		all = append(all, ll.l)
	}
	if give != nil && handOff(all, give) == nil {
		for _, l := range all {
			l.Close()
		}
		return
	}
	closeLinks(all)
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

// fillFrames locates the frames whose VMA the kernel side could not read
// (bpf_find_vma only try-locks the process's mappings, and fails while
// another thread changes them) through the mappings last read, and
// returns the files it named that way for the first time, so that the
// frames resolve after the process has gone. A frame in none of them,
// when the mappings were read before the stack was taken (ts, CLOCK_MONOTONIC
// ns), is in a library mapped since (dlopen): the mappings are read again
// once, while the library is most likely still there.
func (u *unwinder) fillFrames(pid uint32, ts uint64, frames []Frame) []File {
	named, missed := u.fillFramesOnce(pid, frames)
	if missed {
		u.mu.Lock()
		stale := u.readAt[int(pid)] < ts
		u.mu.Unlock()
		if stale && u.updateProcess(int(pid), false) == nil {
			more, _ := u.fillFramesOnce(pid, frames)
			named = append(named, more...)
		}
	}
	return named
}

func (u *unwinder) fillFramesOnce(pid uint32, frames []Frame) (named []File, missed bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	maps := u.seen[int(pid)]
	for i := range frames {
		f := &frames[i]
		if f.Ino != InoUnknown {
			continue
		}
		j := sort.Search(len(maps), func(j int) bool { return maps[j].end > f.Addr })
		if j == len(maps) || maps[j].start > f.Addr {
			missed = true
			continue
		}
		m := maps[j]
		f.Ino, f.FileOff = m.id.ino, f.Addr-m.start+m.offset
		// The root is judged when the maps were read: the stack is
		// often decoded after the process has gone.
		if !u.named[m.id.ino] && u.ownRoot[int(pid)] {
			u.named[m.id.ino] = true
			named = append(named, File{Ino: m.id.ino, Path: m.path})
		}
	}
	return named, missed
}

// monotonicNS is CLOCK_MONOTONIC, the clock of the kernel side's times.
func monotonicNS() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
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
