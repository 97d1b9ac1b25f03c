package preload

import (
	"cmp"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The copies: the records of the shared region's chunks, moved into
// memtrace's own memory as soon as they are committed, so that the region
// chunk goes back to the library while its records wait for the converter.
//
// Why: on a VM with shadow paging (docs/measurements.md, "The LD_PRELOAD
// path's speed on this VM") a process's first touch of a page costs tens
// of µs, even after MADV_POPULATE_WRITE. A chunk the library takes afresh
// costs the traced thread that for each of its pages, and memtrace the
// same again when it first reads them; a chunk the library takes again
// costs neither. The converter, which formats and writes the log, cannot
// keep up with a thread that allocates in a loop, so the chunks it holds
// would grow with its backlog; the copier, a memcpy at memtrace's
// priority, keeps up, and the library writes into a few chunks it has
// touched before. The backlog moves to the copies, anonymous memory
// asked for in huge pages (transparent huge pages in madvise mode are
// the common default; shared memory's are not), where a touch costs a
// fault per 2 MiB rather than per page.
//
// The copies are laid out as the region is (a region value, see
// newCopies): a header whose hw and n_free count the slots, one state per
// slot, and slots of chunkSize bytes, each an mt_chunk_hdr and records.
// The copier is their only writer of records and the only claimer of a
// slot; the converter reads them as it read the region's chunks, and hands
// a slot back (release) once every record of it is written. A slot's
// sealed word is 1 when its chunk was sealed, slotGone when the copier
// found the chunk's thread gone (the converter may forget the thread).

// slotGone marks a slot whose thread was gone without sealing its chunk.
const slotGone = 2

// newCopies maps the copies: twice nBig slots of chunkSize and twice
// nSmall of smallChunk after a header and the states, the slots at a 2 MiB
// boundary so that huge pages line up. The second half of each size is the
// overflow: taken only while the converter can write nothing for a record
// that waits outside the copies (copier.overflow), it is reserved address
// space, not memory, until then.
func newCopies(nBig, nSmall int) (*region, error) {
	const huge = 2 << 20
	nBig, nSmall = 2*nBig, 2*nSmall
	n := nBig + nSmall
	dataOff := (statesOff + n*stateSize + huge - 1) &^ (huge - 1)
	smallOff := dataOff + nBig*chunkSize
	total := smallOff + nSmall*smallChunk
	mem, err := unix.Mmap(-1, 0, total, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	// Without THP (a kernel without it, or "never") the pages are small:
	// slower to touch, not wrong.
	_ = unix.Madvise(mem[dataOff:], unix.MADV_HUGEPAGE)
	return &region{mem: mem, nchunks: n, nBig: nBig, smallOff: smallOff, dataOff: dataOff, overflow: true}, nil
}

// copier moves committed records from the region r to the copies q.
type copier struct {
	r, q *region
	// mu: one pass at a time (the copier's loop, or sync once the loop
	// has returned).
	mu sync.Mutex
	// Per region chunk: the slot its records go to (-1: none yet), the
	// chunk's stream and seq it was taken for, and the records copied.
	slot        []int32
	stream, seq []uint32
	copied      []uint32
	passes      int
	order       []listed
	// The loop's passes, for sync: doneAt is the CLOCK_MONOTONIC time
	// a finished pass started at, full whether it found the copies full;
	// passDone is closed (and replaced) after each; wake cuts the loop's
	// sleep short; quit is closed once the loop has returned.
	doneAt atomic.Uint64
	full   atomic.Bool
	// waiting: the raw time of the oldest record a finished pass left
	// in the region (noneWaiting: none); waitMin is the pass's own.
	waiting atomic.Uint64
	waitMin uint64
	// busy: the chunks a finished pass found busy (mt_abi.h,
	// MT_COMMIT_BUSY); busyNow the pass's own.
	busy atomic.Pointer[[]busyChunk]
	// overflow: the converter is stuck (converter.bound), and slots
	// past the soft count may be taken.
	overflow atomic.Bool
	// passCount counts the passes, for the converter (passes is the
	// pass's own, under mu).
	passCount atomic.Int64
	busyNow   []busyChunk
	// pending: the streams whose chunk was sealed in the middle of a
	// record, until their next chunk is listed or their thread is gone.
	pending map[uint32]pendingRec
	// blocked: the streams whose chunk found no slot in this pass (their
	// later chunks wait behind it).
	blocked  map[uint32]bool
	passDone atomic.Pointer[chan struct{}]
	wake     chan struct{}
	quit     chan struct{}
	// onSlot (tests) runs once a slot is made for a chunk, before its
	// records are copied.
	onSlot func(slot int)
}

// busyChunk: a region chunk whose thread is in the middle of a record,
// and the time no record of it is older than (raw).
type busyChunk struct {
	stream uint32
	tMin   uint64
}

// pendingRec: a stream's record in progress when its chunk seq was sealed.
type pendingRec struct {
	tMin     uint64
	seq      uint32
	pid, tid int
}

// listed is a chunk of the region as a pass found it.
type listed struct {
	i           int
	stream, seq uint32
	key         uint64 // the chunk's t_min, at least its stream's earlier chunks'
}

func newCopier(r, q *region) *copier {
	k := &copier{r: r, q: q, slot: make([]int32, r.nchunks), stream: make([]uint32, r.nchunks),
		seq: make([]uint32, r.nchunks), copied: make([]uint32, r.nchunks), pending: map[uint32]pendingRec{}, blocked: map[uint32]bool{}}
	for i := range k.slot {
		k.slot[i] = -1
	}
	ch := make(chan struct{})
	k.passDone.Store(&ch)
	k.wake = make(chan struct{}, 1)
	k.quit = make(chan struct{})
	return k
}

// noneWaiting: the pass left no record in the region.
const noneWaiting = ^uint64(0)

// sync returns once every record committed before t0 (CLOCK_MONOTONIC)
// is in the copies or timed by waiting: whether the copies were full, and
// the raw time of the oldest record left in the region (noneWaiting). The
// converter
// waits for the loop's next pass rather than take mu itself: preempted
// while holding it, it would hold up the copier, and the program behind
// it, for as long as a busy machine does not run it.
func (k *copier) sync(t0 uint64) (bool, uint64, []busyChunk) {
	for {
		ch := *k.passDone.Load()
		if k.doneAt.Load() >= t0 {
			var b []busyChunk
			if p := k.busy.Load(); p != nil {
				b = *p
			}
			return k.full.Load(), k.waiting.Load(), b
		}
		select {
		case k.wake <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-k.quit:
			// No loop (not started, or stopped): pass here.
			k.mu.Lock()
			_, full := k.pass()
			w, b := k.waitMin, slices.Clone(k.busyNow)
			k.mu.Unlock()
			return full, w, b
		}
	}
}

// copyIdleMax bounds the copier's sleep while nothing is committed; a
// busy thread fills a chunk in about a millisecond, so the sleep while
// records come is short.
const (
	copyBusy    = 200 * time.Microsecond
	copyIdleMax = 4 * time.Millisecond
)

// run copies until stop is closed, at memtrace's priority.
func (k *copier) run(stop <-chan struct{}) {
	defer close(k.quit)
	sleep := copyBusy
	t := time.NewTimer(sleep)
	defer t.Stop()
	for {
		start := monoNow()
		k.mu.Lock()
		n, full := k.pass()
		k.waiting.Store(k.waitMin)
		if len(k.busyNow) == 0 {
			k.busy.Store(nil)
		} else {
			b := slices.Clone(k.busyNow)
			k.busy.Store(&b)
		}
		k.mu.Unlock()
		k.full.Store(full)
		k.doneAt.Store(start)
		next := make(chan struct{})
		close(*k.passDone.Swap(&next))
		if n > 0 {
			sleep = copyBusy
		} else if sleep < copyIdleMax {
			sleep *= 2
		}
		t.Reset(sleep)
		select {
		case <-stop:
			return
		case <-k.wake:
			t.Stop() // Go 1.23's timers: no stale tick to drain
		case <-t.C:
		}
	}
}

// pass copies what every chunk committed since the last pass, and hands
// the region's chunks back as they are done: sealed by their thread, or
// the thread gone. It returns the records copied, and whether a chunk
// found no free slot (the copies are full: the converter is behind).
// waitMin is then the raw time of the oldest record left in the region:
// the converter must not write past it (converter.watermark).
func (k *copier) pass() (n int, full bool) {
	r, q := k.r, k.q
	k.waitMin = noneWaiting
	k.busyNow = k.busyNow[:0]
	atomic.AddUint32(r.p32(hBeat), 1)
	k.passes++
	k.passCount.Add(1)
	checkDead := k.passes%200 == 0
	clear(k.blocked)
	// The chunks are listed first and copied in each stream's order: a
	// thread claims its next chunk only once its last is sealed and
	// complete, so a chunk listed here has its stream's earlier chunks
	// complete too, and each is copied before the slot of the next is
	// made. The converter, which reads the slots while this runs, then
	// never sees a stream's next slot before its earlier slot is final.
	//
	// Across streams they go oldest first (by t_min): with the copies
	// full, a slot handed back goes to the chunk whose records the
	// converter waits for (it writes nothing past the oldest record left
	// here), not to whichever stream has the lowest serial.
	k.order = k.order[:0]
	r.eachStream(func(i, base int, sid uint32) {
		k.order = append(k.order, listed{i, sid, r.load(base + cSeq), r.u64(base + cTMin)})
	})
	slices.SortFunc(k.order, func(a, b listed) int {
		return cmp.Or(cmp.Compare(a.stream, b.stream), cmp.Compare(a.seq, b.seq))
	})
	for j := 1; j < len(k.order); j++ {
		if p, o := &k.order[j-1], &k.order[j]; p.stream == o.stream && o.key < p.key {
			o.key = p.key
		}
	}
	slices.SortStableFunc(k.order, func(a, b listed) int { return cmp.Compare(a.key, b.key) })
	for _, o := range k.order {
		i, sid, seq := o.i, o.stream, o.seq
		if p, ok := k.pending[sid]; ok && seq > p.seq {
			delete(k.pending, sid)
		}
		base := r.chunk(i)
		if k.slot[i] < 0 || k.stream[i] != sid || k.seq[i] != seq {
			if k.blocked[sid] {
				k.left(i, 0) // its earlier chunk found no slot
				continue
			}
			j := k.claim(i)
			if j < 0 {
				full, k.blocked[sid] = true, true
				k.left(i, 0)
				continue
			}
			k.slot[i], k.stream[i], k.seq[i], k.copied[i] = int32(j), sid, seq, 0
			qb := q.chunk(j)
			q.put32(qb+cCommitted, 0)
			q.put32(qb+cSealed, 0)
			q.put32(qb+cPID, r.load(base+cPID))
			q.put32(qb+cTID, r.load(base+cTID))
			q.put32(qb+cSeq, seq)
			q.put32(qb+cStream, sid)
			q.put32(statesOff+stateSize*j, chOwned)
			if k.onSlot != nil {
				k.onSlot(j)
			}
		}
		qb := q.chunk(int(k.slot[i]))
		// sealed before committed: once sealed, the count read after
		// it is the chunk's last.
		sealed := r.load(base + cSealed)
		capRecs := r.capRecs(i)
		raw := r.load(base + cCommitted)
		busy := raw&commitBusy != 0
		committed := min(raw&^commitBusy, capRecs)
		gone := false
		if sealed == 0 && (checkDead || r.load(base+cExiting) != 0) && committed == k.copied[i] {
			// A thread that is gone (exited, or its process exec'd
			// or was killed) leaves its chunk unsealed. One that
			// said it is ending is looked at each pass: a churn of
			// short threads would otherwise hold a chunk each until
			// the sweep, and fill the region by their count.
			pid, tid := int(r.load(base+cPID)), int(r.load(base+cTID))
			if err := unix.Tgkill(pid, tid, 0); errors.Is(err, unix.ESRCH) {
				gone, busy = true, false
				committed = min(r.load(base+cCommitted)&^commitBusy, capRecs)
			}
		}
		if busy {
			k.noteBusy(i, sid, seq, sealed != 0)
		}
		if from := k.copied[i]; committed > from {
			lo, hi := chunkHdr+int(from)*recSize, chunkHdr+int(committed)*recSize
			copy(q.mem[qb+lo:qb+hi], r.mem[base+lo:base+hi])
			q.put32(qb+cCommitted, committed)
			k.copied[i] = committed
			n += int(committed - from)
		}
		if sealed != 0 || gone {
			mark := uint32(1)
			if gone {
				mark = slotGone
			}
			q.put32(qb+cSealed, mark)
			k.slot[i] = -1
			releaseChunk(r, i)
		}
	}
	for sid, p := range k.pending {
		if checkDead && errors.Is(unix.Tgkill(p.pid, p.tid, 0), unix.ESRCH) {
			delete(k.pending, sid)
			continue
		}
		k.busyNow = append(k.busyNow, busyChunk{sid, p.tMin})
	}
	return n, full
}

// noteBusy notes region chunk i of stream sid found busy: a record in
// progress in it, or, sealed, in the thread's next chunk (pending until
// that one is listed: it comes after this one in a pass's order).
func (k *copier) noteBusy(i int, sid, seq uint32, sealed bool) {
	base := k.r.chunk(i)
	if sealed {
		k.pending[sid] = pendingRec{k.r.u64(base + cTMin), seq, int(k.r.load(base + cPID)), int(k.r.load(base + cTID))}
		return
	}
	k.busyNow = append(k.busyNow, busyChunk{sid, k.r.u64(base + cTMin)})
}

// left notes that region chunk i keeps its records from the from-th on in
// the region for now.
func (k *copier) left(i int, from uint32) {
	base := k.r.chunk(i)
	sealed := k.r.load(base + cSealed)
	raw := k.r.load(base + cCommitted)
	if raw&commitBusy != 0 {
		k.noteBusy(i, k.r.load(base+cStream), k.r.load(base+cSeq), sealed != 0)
	}
	if min(raw&^commitBusy, k.r.capRecs(i)) <= from {
		return
	}
	k.waitMin = min(k.waitMin, k.r.u64(base+chunkHdr+int(from)*recSize+recTSOff))
}

// claim takes a slot of the copies for region chunk i: one of the same
// size, or for a small chunk a large one when no small one is left; -1
// when none is.
func (k *copier) claim(i int) int {
	small := i >= k.r.nBig
	if j := k.claimOf(small); j >= 0 || !small {
		return j
	}
	return k.claimOf(false)
}

// claimOf takes the lowest free slot of one size, whose pages are most
// likely touched already, or a new one; -1 when all are taken.
func (k *copier) claimOf(small bool) int {
	q := k.q
	t := q.tier(small)
	first, n, hwOff, freeOff := t.first, t.n, t.hwOff, t.freeOff
	hw := int(q.load(hwOff))
	if !k.overflow.Load() && hw-int(q.load(freeOff)) >= t.soft {
		return -1
	}
	if q.load(freeOff) > 0 {
		for j := first; j < first+hw; j++ {
			if q.load(statesOff+stateSize*j) == chFree {
				atomic.AddUint32(q.p32(freeOff), ^uint32(0))
				return j
			}
		}
	}
	if hw < n {
		q.put32(hwOff, uint32(hw+1))
		return first + hw
	}
	return -1
}

// releaseChunk hands chunk i of r (the region or the copies) back to its
// writer (the library, or the copier).
func releaseChunk(r *region, i int) {
	base := r.chunk(i)
	r.put32(base+cStream, 0)
	r.put32(base+cCommitted, 0)
	r.put32(base+cSealed, 0)
	r.put32(base+cExiting, 0)
	r.put32(statesOff+stateSize*i, chFree)
	atomic.AddUint32(r.p32(r.tier(i >= r.nBig).freeOff), 1)
}

// unmapCopies gives the copies' memory back.
func unmapCopies(q *region) {
	if q != nil && q.mem != nil {
		_ = unix.Munmap(q.mem)
		q.mem = nil
	}
}
