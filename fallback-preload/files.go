package preload

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/symbols"
	"github.com/memtrace/memtrace/unwind"
)

// The files frames lie in (the region's file slots, mt_abi.h): the library
// claims a slot per ELF file it finds mapped and writes its path, dev and
// ino; the converter names the file to the session (as the eBPF tracer's
// File records do, so frames are symbolized by file and offset alike) and
// builds the file's unwind table (package unwind, the BPF walker's rows)
// into the rows' area, where the library's walker reads it.

// fileInfo is what the converter knows of a slot.
type fileInfo struct {
	settled bool
	key     uint64 // the session's Ino for the file
}

// fileKey picks the session's Ino for a file: its inode number, unless
// another file of the session, on another device, has that number (the
// session names files by inode alone).
func (c *converter) fileKey(slot int, dev, ino uint64) uint64 {
	if o, ok := c.inoDev[ino]; !ok || o == dev {
		c.inoDev[ino] = dev
		if ino != 0 && ino != event.InoUnknown {
			return ino
		}
	}
	return 1<<62 | uint64(slot)
}

// scanFiles names to the session the slots the library asked about
// since the last pass.
func (c *converter) scanFiles() {
	r := c.r
	if r.filesOff == 0 {
		return
	}
	first := -1
	for i := c.filesDone; i < nFileSlots; i++ {
		switch r.load(r.file(i) + fileState) {
		case fileFree:
			if first < 0 {
				first = i
			}
			c.filesDone = first
			return
		case fileClaimed:
			// Being written, or its process died writing it.
			if first < 0 {
				first = i
			}
			continue
		}
		c.settle(i)
	}
	if first < 0 {
		first = nFileSlots
	}
	c.filesDone = first
}

// settle names slot i's file to the session; it returns the file's key,
// 0 if the slot is not written.
func (c *converter) settle(i int) uint64 {
	if i < 0 || i >= nFileSlots {
		return 0
	}
	if c.files == nil {
		c.files = make([]fileInfo, nFileSlots)
	}
	fi := &c.files[i]
	if fi.settled {
		return fi.key
	}
	dev, ino, path, ok := c.r.slotFile(i)
	if !ok {
		return 0
	}
	fi.settled = true
	fi.key = c.fileKey(i, dev, ino)
	name := path
	// The path the kernel gives the mapping, as the eBPF path's frames
	// have it: the loader's is often through a symlink (/lib -> usr/lib).
	if real, err := filepath.EvalSymlinks(path); err == nil && sameFile(real, dev, ino) {
		name = real
	}
	c.sess.File(&event.File{Ino: fi.key, Path: name})
	return fi.key
}

// slotFile reads what the library wrote into slot i; ok is false before
// it is all written.
func (r *region) slotFile(i int) (dev, ino uint64, path string, ok bool) {
	base := r.file(i)
	if r.load(base+fileState) < fileAsked {
		return 0, 0, "", false
	}
	n := min(int(r.load(base+filePathLen)), filePathMax)
	path = string(r.mem[base+filePath : base+filePath+n])
	if z := strings.IndexByte(path, 0); z >= 0 {
		path = path[:z]
	}
	return r.u64(base + fileDev), r.u64(base + fileIno), path, true
}

// tableBuilder gives the files the library asked about their unwind
// tables, apart from the conversion: the first stacks through a new file
// wait for its table (shm_wait_file), and the converter may be busy
// naming frames from debug files for a while.
type tableBuilder struct {
	r     *region
	used  int // bytes of the rows' area taken
	next  int // slots below it are settled
	built int
	// delay is the test hook MEMTRACE_TEST_TABLE_DELAY (a duration): each
	// table is built that much later, as on a loaded machine, to hold the
	// library to waiting for it.
	delay time.Duration
}

// TableDelayEnv names the test hook that delays every table build.
const TableDelayEnv = "MEMTRACE_TEST_TABLE_DELAY"

// run builds tables until stop is closed, then once more.
func (b *tableBuilder) run(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		b.pass()
		select {
		case <-stop:
			b.pass()
			return
		case <-time.After(500 * time.Microsecond):
		}
	}
}

func (b *tableBuilder) pass() {
	r := b.r
	if r.filesOff == 0 {
		return
	}
	advance := true
	for i := b.next; i < nFileSlots; i++ {
		base := r.file(i)
		switch r.load(base + fileState) {
		case fileFree:
			return
		case fileClaimed:
			advance = false
			continue
		case fileAsked:
			state := uint32(fileNoTable)
			if dev, ino, path, ok := r.slotFile(i); ok {
				time.Sleep(b.delay)
				if f, st, err := openSame(path, dev, ino); err == nil {
					if b.build(base, f, st.Size, path) {
						state = fileReady
						b.built++
					}
					f.Close()
				}
			}
			// A release: the library reads the fields once it sees
			// fileReady.
			r.put32(base+fileState, state)
			atomic.AddUint32(r.p32(hBeat), 1)
		}
		if advance {
			b.next = i + 1
		}
	}
}

// openSame opens path if it is still the file the library mapped.
func openSame(path string, dev, ino uint64) (*os.File, *unix.Stat_t, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || uint64(st.Dev) != dev || uint64(st.Ino) != ino {
		f.Close()
		return nil, nil, os.ErrNotExist
	}
	return f, &st, nil
}

func sameFile(path string, dev, ino uint64) bool {
	var st unix.Stat_t
	return unix.Stat(path, &st) == nil && uint64(st.Dev) == dev && uint64(st.Ino) == ino
}

// buildTable writes f's unwind table into the rows' area and the slot at
// base: false when the file has none, of an architecture the library
// cannot walk, or no room is left (the library then takes backtrace()).
// path finds its separate debug file, as the eBPF tracer's tables do.
func (b *tableBuilder) build(base int, f *os.File, size int64, path string) bool {
	t, err := unwind.BuildTable(f, size, symbols.UnwindOptions(path))
	if err != nil || len(t.Rows) == 0 {
		return false
	}
	rows, ext := t.Bytes(), t.ExtendedBytes()
	r := b.r
	off := (b.used + 15) &^ 15
	need := len(rows) + (len(ext)+15)&^15 + 16
	if off+need > r.rowsLen {
		return false
	}
	at := r.rowsOff + off
	copy(r.mem[at:], rows)
	extAt := (at + len(rows) + 15) &^ 15
	copy(r.mem[extAt:], ext)
	b.used = extAt + len(ext) - r.rowsOff
	r.put64(base+fileBase, t.Base)
	r.put32(base+fileRowsOff, uint32(at))
	r.put32(base+fileNRows, uint32(len(t.Rows)))
	r.put32(base+fileExtOff, uint32(extAt))
	r.put32(base+fileNExt, uint32(len(t.Extended)))
	r.put32(base+fileArch, uint32(t.Arch))
	// The caller stores the state after these (an atomic store, a
	// release): the library reads the fields once it sees fileReady.
	return true
}

// stackStats reads the library's counts (published as its threads move
// to a new chunk, exit or fork) and the tables built.
func (c *converter) stackStats() StackStats {
	s := StackStats{Rows: uint64(c.r.load(hStacksRows)), Backtrace: uint64(c.r.load(hStacksBt)),
		Frames: c.r.load64(hFramesRows), Reused: c.r.load64(hFramesReused), Sent: c.stackSent, ByID: c.stackRefs}
	if c.tb != nil {
		s.TableBytes = c.tb.used
	}
	for i := range c.files {
		if c.files[i].settled {
			s.Files++
			if c.r.load(c.r.file(i)+fileState) == fileReady {
				s.Tables++
			}
		}
	}
	return s
}
