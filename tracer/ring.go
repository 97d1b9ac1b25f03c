//go:build amd64 || arm64

package tracer

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

// ring reads what the BPF side sends: events from the slot array (struct
// mt_slot), and files and stacks from the BPF ring buffer, whose epoll
// readiness also carries the wake-ups. Both positions the kernel side
// reads are stored once per batch, not per record: cilium/ebpf's reader
// stores the ring buffer's consumer position per record, and while the
// traced program runs flat out each store moved a cache line between the
// reader's CPU and the program's.
type ring struct {
	mu     sync.Mutex
	closed bool
	epfd   int
	efd    int // written by close, to end a wait
	events [2]unix.EpollEvent

	// The BPF ring buffer.
	consMem, prodMem []byte
	cons, prod       *uint64
	data             []byte // the data pages, mapped twice in a row: no record wraps
	mask             uint64

	// The slot array and its control block (mt_ctl: claim counter, then
	// the read position, a cache line each).
	slotMem, ctlMem []byte
	head, spos      *uint64
	nslots          uint64
	shift           uint
	pos             uint64 // the next slot to read
	stuckAt         uint64 // a claimed slot not yet written, since stuckT
	stuckT          time.Time
	skipped         atomic.Uint64 // slots given up on (see next)
}

const (
	ringBusy    = 1 << 31
	ringDiscard = 1 << 30
	ringHdrSize = 8

	slotSize = 32
	tidBits  = 22
	tidMask  = 1<<tidBits - 1
	lapMask  = 0x3ff
	kindExt  = 0x80
	// A slot claimed but not written for this long is given up on (and
	// counted lost) so that one writer stuck off the CPU cannot stall the
	// log for good. Its late write cannot be misread: the next lap expects
	// another lap number in the word.
	stuckLimit = 2 * time.Second
)

func newRing(rbFD, rbSize, slotFD, ctlFD int, nslots uint64) (*ring, error) {
	page := os.Getpagesize()
	if rbSize <= 0 || rbSize&(rbSize-1) != 0 || rbSize%page != 0 {
		return nil, fmt.Errorf("ring buffer size %d is not a power of two of whole pages", rbSize)
	}
	if nslots == 0 || nslots&(nslots-1) != 0 {
		return nil, fmt.Errorf("event slot count %d is not a power of two", nslots)
	}
	r := &ring{epfd: -1, efd: -1, mask: uint64(rbSize - 1), nslots: nslots}
	for uint64(1)<<r.shift < nslots {
		r.shift++
	}
	var err error
	mmap := func(what string, fd int, off int64, n int, prot int) []byte {
		if err != nil {
			return nil
		}
		var b []byte
		if b, err = unix.Mmap(fd, off, n, prot, unix.MAP_SHARED); err != nil {
			err = fmt.Errorf("map the %s: %w", what, err)
		}
		return b
	}
	r.consMem = mmap("ring buffer's consumer page", rbFD, 0, page, unix.PROT_READ|unix.PROT_WRITE)
	r.prodMem = mmap("ring buffer's data", rbFD, int64(page), page+2*rbSize, unix.PROT_READ)
	slotBytes := (int(nslots)*slotSize + page - 1) / page * page
	r.slotMem = mmap("event slots", slotFD, 0, slotBytes, unix.PROT_READ)
	r.ctlMem = mmap("event slots' control block", ctlFD, 0, page, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		r.unmap()
		return nil, err
	}
	r.cons = (*uint64)(unsafe.Pointer(&r.consMem[0]))
	r.prod = (*uint64)(unsafe.Pointer(&r.prodMem[0]))
	r.data = r.prodMem[page:]
	r.head = (*uint64)(unsafe.Pointer(&r.ctlMem[0]))
	r.spos = (*uint64)(unsafe.Pointer(&r.ctlMem[64]))
	r.pos = atomic.LoadUint64(r.spos)
	if r.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		r.unmap()
		return nil, fmt.Errorf("create epoll for the ring buffer: %w", err)
	}
	if r.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		r.close()
		return nil, fmt.Errorf("create eventfd for the ring buffer: %w", err)
	}
	for _, f := range []int{rbFD, r.efd} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(f)}
		if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, f, &ev); err != nil {
			r.close()
			return nil, fmt.Errorf("watch the ring buffer: %w", err)
		}
	}
	return r, nil
}

func (r *ring) unmap() {
	for _, m := range []*[]byte{&r.consMem, &r.prodMem, &r.slotMem, &r.ctlMem} {
		if *m != nil {
			_ = unix.Munmap(*m)
			*m = nil
		}
	}
}

// close ends a pending wait and releases the mappings once no read runs.
func (r *ring) close() {
	if r.efd >= 0 {
		var one = [8]byte{1}
		_, _ = unix.Write(r.efd, one[:])
	}
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
	if r.efd >= 0 {
		unix.Close(r.efd)
	}
}

// read hands every record ready now to rec (files, stacks) and slot
// (events), waiting up to wait for the first. The slices are valid only
// during the call. It returns ringbuf.ErrClosed once close has run.
func (r *ring) read(wait time.Duration, rec func([]byte), slot func(s, ext []byte)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ringbuf.ErrClosed
	}
	n, busy := r.batch(rec, slot)
	if n > 0 {
		return nil
	}
	if busy {
		// A writer is between claiming and writing: try again shortly.
		wait = time.Millisecond
	}
	if err := r.wait(wait); err != nil {
		return err
	}
	if r.closed {
		return ringbuf.ErrClosed
	}
	r.batch(rec, slot)
	return nil
}

// batch delivers one batch. The events it delivers are those ready before
// the ring buffer was read: a stack or file is sent before the event that
// needs it, so every one those events need has been read by then.
func (r *ring) batch(rec func([]byte), slot func(s, ext []byte)) (n int, busy bool) {
	limit := r.readyUpTo()
	nr, rbBusy := r.drain(rec)
	if rbBusy {
		// A record held up behind one not yet committed may be what the
		// ready events need: they wait for the next batch.
		limit = r.pos
	}
	ns := r.deliver(limit, slot)
	return nr + ns, rbBusy || limit == r.pos && r.claimedPast(r.pos)
}

func (r *ring) word(p uint64) uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&r.slotMem[(p&(r.nslots-1))*slotSize+28])))
}

func (r *ring) ready(p uint64) bool {
	w := r.word(p)
	return w&tidMask != 0 && w>>tidBits == uint32(p>>r.shift)&lapMask
}

func (r *ring) claimedPast(p uint64) bool {
	return atomic.LoadUint64(r.head) > p
}

// readyUpTo finds the first slot not yet ready (or the end of an event
// whose second slot is not), giving up on one stuck too long.
func (r *ring) readyUpTo() uint64 {
	p := r.pos
	for end := p + r.nslots; p < end; {
		if !r.ready(p) {
			if !r.claimedPast(p) {
				break
			}
			if p != r.stuckAt || r.stuckT.IsZero() {
				r.stuckAt, r.stuckT = p, time.Now()
				break
			}
			if time.Since(r.stuckT) < stuckLimit || p != r.pos {
				break
			}
			// Given up on: deliver skips it (see deliver).
			r.skipped.Add(1)
			r.stuckT = time.Time{}
			r.pos++
			atomic.StoreUint64(r.spos, r.pos)
			p++
			continue
		}
		off := (p & (r.nslots - 1)) * slotSize
		if r.slotMem[off+24]&kindExt != 0 {
			if !r.ready(p + 1) {
				break
			}
			p += 2
			continue
		}
		p++
	}
	return p
}

// deliver hands the slots before limit to fn and stores the read position.
func (r *ring) deliver(limit uint64, fn func(s, ext []byte)) int {
	n := 0
	for r.pos < limit {
		off := (r.pos & (r.nslots - 1)) * slotSize
		s := r.slotMem[off : off+slotSize : off+slotSize]
		if s[24]&kindExt != 0 {
			off2 := ((r.pos + 1) & (r.nslots - 1)) * slotSize
			fn(s, r.slotMem[off2:off2+slotSize:off2+slotSize])
			r.pos += 2
		} else {
			fn(s, nil)
			r.pos++
		}
		n++
	}
	if n > 0 {
		atomic.StoreUint64(r.spos, r.pos)
	}
	return n
}

func (r *ring) wait(d time.Duration) error {
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
				r.closed = true
			}
		}
		return nil
	}
}

// drain reads the ring-buffer records committed up to the producer
// position seen at its start and stores the consumer position once.
func (r *ring) drain(fn func([]byte)) (n int, busy bool) {
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
