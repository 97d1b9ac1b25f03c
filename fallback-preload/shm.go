package preload

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The shared region between memtrace and the library in binary mode, laid
// out as c/mt_abi.h says (its constants are in abi_gen.go):
//
//	header (one page, mt_shm_hdr): written here: magic, version, chunk
//	  size, chunk count, data offset; by the library: chunks handed out,
//	  the clock, lost records; the consumer's heartbeat, the stop flag
//	  (memtrace reads no more: the library's hooks go quiet), alone on its
//	  cache line, and the gone flag
//	chunk states at statesOff: one uint32 per chunk (0 never used,
//	  chOwned, chFree)
//	file slots at the files offset (mt_file): the files frames lie in,
//	  claimed and named by the library, given unwind rows here (files.go)
//	the rows' area at the rows offset: the tables' rows and extended
//	  rules, written here, read by the library's walker
//	chunks at the data offset: an mt_chunk_hdr (committed records,
//	  sealed, pid, tid, stream, seq) and 32-byte records (mt_rec: ts,
//	  ptr, size and meta: op, the extra slots of data that follow, the
//	  data's length)

// ShmEnv passes the region to the library: "fd:dev:ino".
const ShmEnv = shmEnv

// DefaultSharedMemory is the region's default size, and that of memtrace's
// copies of its records (copy.go): the backlog the traced program may run
// ahead of the converter before it is slowed down. Both are sparse: only
// pages written take memory.
func DefaultSharedMemory() int {
	if unsafe.Sizeof(uintptr(0)) == 4 {
		return 64 << 20
	}
	return 256 << 20
}

// chunkSize is a large chunk's size, smallChunk a small one's. A thread
// writes its first chunk's worth into a small chunk and the rest into large
// ones (mt_abi.h): a live thread holds a chunk while it lives, so the
// region holds as many threads as it has chunks, and a program of
// thousands of threads that each write little needs many small ones,
// while a thread that writes a lot needs few large ones (a chunk
// claimed costs the traced thread a slow path).
const (
	chunkSize  = 256 << 10
	smallChunk = 16 << 10
)

// smallShare is the part of the region's bytes in small chunks (1/4).
const smallShare = 4

// nFileSlots bounds the distinct files a session's frames lie in (each
// slot 512 bytes of the region); frames in files past it are addresses
// alone.
const nFileSlots = 4096

// rowsArea is the room for unwind rows: sparse like the chunks, so a
// session takes only what its files' tables need (libc's 190 KB).
func rowsArea() int {
	if unsafe.Sizeof(uintptr(0)) == 4 {
		return 16 << 20
	}
	return 64 << 20
}

type region struct {
	f   *os.File
	mem []byte
	// nchunks counts every chunk, the nBig large ones first, then the
	// small ones at smallOff.
	nchunks  int
	nBig     int
	smallOff int
	dataOff  int
	filesOff int
	rowsOff  int
	rowsLen  int
	env      string
	// copies: memtrace's copy of the chunks' records (copy.go); nil
	// for the copies themselves, which have twice the region's chunks,
	// half of them an overflow (overflow set).
	copies   *region
	overflow bool
}

// newRegion creates the memfd, sizes it and maps it.
func newRegion(size int) (*region, error) {
	if size <= 0 {
		size = DefaultSharedMemory()
	}
	nBig, nSmall := tiers(size)
	n := nBig + nSmall
	filesOff := statesOff + (n*stateSize+4095)&^4095
	rowsOff := filesOff + nFileSlots*fileSlot
	rowsLen := rowsArea()
	dataOff := rowsOff + rowsLen
	smallOff := dataOff + nBig*chunkSize
	total := smallOff + nSmall*smallChunk
	fd, err := unix.MemfdCreate("memtrace-preload", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create the shared region (memfd_create): %w", err)
	}
	f := os.NewFile(uintptr(fd), "memtrace-preload-shm")
	if err := unix.Ftruncate(fd, int64(total)); err != nil {
		f.Close()
		return nil, fmt.Errorf("size the shared region to %d bytes: %w", total, err)
	}
	mem, err := unix.Mmap(fd, 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("map the shared region (%d bytes; give a smaller --buffer-size): %w", total, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat the shared region: %w", err)
	}
	q, err := newCopies(nBig, nSmall)
	if err != nil {
		unix.Munmap(mem)
		f.Close()
		return nil, fmt.Errorf("map the copies of the shared region (%d bytes; give a smaller --buffer-size): %w", total-dataOff, err)
	}
	r := &region{f: f, mem: mem, nchunks: n, nBig: nBig, smallOff: smallOff, dataOff: dataOff, filesOff: filesOff, rowsOff: rowsOff, rowsLen: rowsLen, copies: q}
	r.put32(hMagic, shmMagic)
	r.put32(hVersion, shmVersion)
	r.put32(hChunkSize, chunkSize)
	r.put32(hNChunks, uint32(nBig))
	r.put32(hNSmall, uint32(nSmall))
	r.put32(hSmallSize, smallChunk)
	r.put32(hSmallOff, uint32(smallOff))
	r.put32(hDataOff, uint32(dataOff))
	r.put32(hFilesOff, uint32(filesOff))
	r.put32(hNFiles, nFileSlots)
	r.put32(hRowsOff, uint32(rowsOff))
	r.put32(hRowsLen, uint32(rowsLen))
	// The child sees the memfd as fd 3 (exec.Cmd.ExtraFiles[0]).
	r.env = fmt.Sprintf("%s=3:%d:%d", ShmEnv, uint64(st.Dev), uint64(st.Ino))
	return r, nil
}

// stop tells every process of the session that nobody reads the region
// any more, so that their hooks only pass calls through and never wait for
// a chunk, and gives back the memory the records took: the program may
// run on for long after memtrace has gone, and the region stays mapped in
// it. A page a thread still writes into comes back as a fresh zero page.
func (r *region) stop() {
	r.put32(hStop, 1)
	r.put32(hGone, 1)
	_ = unix.Fallocate(int(r.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE,
		int64(r.dataOff), int64(r.end()-r.dataOff))
}

func (r *region) close() {
	unix.Munmap(r.mem)
	r.f.Close()
	unmapCopies(r.copies)
}

func (r *region) p32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[off])) }
func (r *region) load(off int) uint32 { return atomic.LoadUint32(r.p32(off)) }
func (r *region) load64(off int) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.mem[off])))
}
func (r *region) put32(off int, v uint32) {
	atomic.StoreUint32(r.p32(off), v)
}
func (r *region) u64(off int) uint64 {
	b := r.mem[off : off+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// tiers splits size bytes into large and small chunks: at least 4 large
// ones, and a quarter of the bytes in small ones.
func tiers(size int) (nBig, nSmall int) {
	nSmall = size / smallShare / smallChunk
	nBig = max((size-nSmall*smallChunk)/chunkSize, 4)
	return nBig, nSmall
}

// chunk is the offset of chunk i: a large one, or past nBig a small one.
func (r *region) chunk(i int) int {
	if i < r.nBig {
		return r.dataOff + i*chunkSize
	}
	return r.smallOff + (i-r.nBig)*smallChunk
}

// capRecs is the number of 32-byte slots past chunk i's header.
func (r *region) capRecs(i int) uint32 {
	if i < r.nBig {
		return (chunkSize - chunkHdr) / recSize
	}
	return (smallChunk - chunkHdr) / recSize
}

// end is the offset past the last chunk.
func (r *region) end() int { return r.smallOff + (r.nchunks-r.nBig)*smallChunk }

// spans are the chunks taken so far, as two index ranges [from, to): the
// large ones, then the small ones.
func (r *region) spans() [2][2]int {
	var out [2][2]int
	for k, small := range []bool{false, true} {
		t := r.tier(small)
		out[k] = [2]int{t.first, t.first + min(int(r.load(t.hwOff)), t.n)}
	}
	return out
}

// tier is one size of chunk: its indexes [first, first+n) and the header
// words counting those handed out and those free.
//
// soft is how many may be taken at once in the normal course: all of them
// in the region; half in the copies, whose other half is the overflow
// (copier.overflow).
type tier struct{ first, n, soft, hwOff, freeOff int }

func (r *region) tier(small bool) tier {
	if small {
		n := r.nchunks - r.nBig
		return tier{r.nBig, n, n / r.softDiv(), hHWSmall, hNFreeSmall}
	}
	return tier{0, r.nBig, r.nBig / r.softDiv(), hHW, hNFree}
}

func (r *region) softDiv() int {
	if r.overflow {
		return 2
	}
	return 1
}

// eachStream calls f with each chunk taken and owned whose thread has
// set its stream, in index order, with the chunk's offset and stream.
func (r *region) eachStream(f func(i, base int, sid uint32)) {
	for _, sp := range r.spans() {
		for i := sp[0]; i < sp[1]; i++ {
			if r.load(statesOff+stateSize*i) != chOwned {
				continue
			}
			base := r.chunk(i)
			if sid := r.load(base + cStream); sid != 0 {
				f(i, base, sid)
			}
		}
	}
}

// fuller says whether more than num/den of the chunks of either size are
// taken and not handed back.
func (r *region) fuller(num, den int) bool {
	for _, small := range []bool{false, true} {
		t := r.tier(small)
		if (int(r.load(t.hwOff))-int(r.load(t.freeOff)))*den > t.soft*num {
			return true
		}
	}
	return false
}
func (r *region) file(i int) int { return r.filesOff + i*fileSlot }
func (r *region) put64(off int, v uint64) {
	b := r.mem[off : off+8]
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
}
