package preload

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
)

// mergeSlack is how long a record may take to become visible after its
// timestamp was read (a thread preempted between the two) and still be
// written in time order. Records are written once they are this old.
const mergeSlack = 50 * time.Millisecond

// clockMargin covers the difference between the library's calibrated
// counter and CLOCK_MONOTONIC read here.
const clockMargin = 2 * time.Millisecond

// ev is one decoded record.
type ev struct {
	ts        uint64 // ns since the epoch
	ptr, size uint64
	op        uint16
	stack     uint32 // a call's stack id in its stream (mt_abi.h), 0: none
	data      []byte // names, frames: points into the region (read before the chunk is freed)
}

// seg is a run of records of one chunk that are read but not yet written.
// Records stay in the region until written: no copy, and the chunk is
// handed back only once every record of it is written.
type seg struct {
	idx      int
	pos, end uint32
}

type stream struct {
	id       uint32
	pid, tid int64
	comm     [16]byte // the thread's name, as its events carry it
	exited   bool     // EXIT written (or the process exited)
	closed   bool     // the process exec'd: nothing more comes
	// owns: the session's thread of tid is this stream's (see own).
	owns   bool
	segs   []seg
	head   int
	lastTS uint64 // time of the newest record read: later ones are not older
	// stacks: the session's stack of each of the stream's ids (the
	// latest frames the thread sent under it).
	stacks []uint64
}

type chunkPos struct {
	stream, seq uint32
	read        uint32 // records queued on the stream
	written     uint32 // records written to the log
}

// converter drains the region and turns its records into events for an
// agent.Session, which writes the log (free sizes, thread totals, filters,
// EXIT lines, stacks, the lost and summary lines) as for the eBPF event.
type converter struct {
	// prog is the launched program's path: the header names its real
	// file from it (agent.ExeBeside).
	prog string
	// r is the shared region (its header: the clock, the streams, the
	// heartbeat, the lost count, the files); q the copies of its chunks'
	// records (copy.go), which the converter reads, filled by k.
	r       *region
	q       *region
	k       *copier
	sess    *agent.Session
	clockOK bool
	kind    uint32
	epoch   uint64
	cnt0    uint64
	mono0   uint64
	mult    uint64
	chunks  []chunkPos
	streams map[uint32]*stream
	// gone counts the streams done and dropped from streams.
	gone uint32
	// seen: the stream serials read so far (see watermark), as every
	// serial below seenBelow and the later ones in seenAbove; holeSince
	// is when seenBelow last moved.
	seenBelow uint32
	seenAbove map[uint32]struct{}
	holeSince uint64
	// owners: the stream whose thread the session knows by each tid.
	owners  map[int64]*stream
	ev      event.Event // the event handed to the session (reused)
	evComm  *stream     // whose comm ev holds (nil: none)
	stackID map[string]uint64
	frames  []event.Frame
	// stackSent, stackRefs: events whose stack came with its frames,
	// and as an id alone (-v).
	stackSent, stackRefs uint64
	// files: the region's file slots as settled (files.go); filesDone:
	// the first slot that may still change; inoDev: the device of each
	// inode number named to the session; rowsUsed: bytes of the rows'
	// area taken; tables: build unwind tables (stacks are on).
	files     []fileInfo
	filesDone int
	inoDev    map[uint64]uint64
	tb        *tableBuilder // nil: no stacks, no tables
	// stopTables stops the table builder startTables started.
	stopTables func()
	// mu: one pass at a time, run's or boost's; boosts counts the
	// boost's takeovers, boostSteps its passes (tests).
	mu         sync.Mutex
	boosts     int
	boostSteps int
	// handOff asks the pass under way to stop between two records:
	// another thread (the boost, the end) waits for mu. boosting: the
	// boost has the conversion, and run's loop leaves mu to it.
	handOff  atomic.Bool
	boosting atomic.Bool
	// stallRun (tests): run does nothing, as when other work on the
	// machine starves its thread.
	stallRun bool
	onStacks func(StackStats)
	lastTS   uint64
	late     int
	lost     uint32
	werr     error
	polls    int
	// full: the copier's last pass found the copies full; released
	// counts the slots handed back.
	full     bool
	released int
	// releasedAt: when the last slot was handed back; gaveUp counts the
	// passes that wrote past a record left in the region (bound).
	releasedAt uint64
	gaveUp     int
	overflows  int    // times the copier was let into the overflow
	stuckSince uint64 // when passes began to find nothing to write under bound's
	stuckPass  int64  // the copier's pass count then
	// queued: the record slots read and not yet written; backlog, its
	// value after the last pass, for the boost.
	queued   int
	backlog  atomic.Int64
	maxTS    uint64
	order    []int
	started  time.Time
	interval time.Duration // between snapshots (Options.Interval)
	// detachAt, when set before stop is closed, is the CLOCK_MONOTONIC
	// time of a Ctrl-C: the log ends there and the program, still
	// running, gets no EXIT lines.
	detachAt uint64
}

// newConverter reads r into sess, the run's Session (runner.NewSession:
// the options' filters, --report-dir, the live model; its times are ns since
// the library's epoch, StartNS 0), with a snapshot every interval; with
// stacks (depth > 0) a table builder writes the files' unwind rows.
func newConverter(r *region, sess *agent.Session, interval time.Duration, depth int) *converter {
	c := &converter{r: r, q: r.copies, k: newCopier(r, r.copies), sess: sess, chunks: make([]chunkPos, r.copies.nchunks), streams: map[uint32]*stream{},
		seenBelow: 1, seenAbove: map[uint32]struct{}{}, owners: map[int64]*stream{}, stackID: map[string]uint64{}, started: time.Now(), interval: interval,
		inoDev: map[uint64]uint64{}}
	if depth > 0 {
		c.tb = &tableBuilder{r: r}
		c.tb.delay, _ = time.ParseDuration(os.Getenv(TableDelayEnv))
	}
	return c
}

// run converts until stop is closed, yielding to the program as y says
// (yield.go); the rest is drain's.
func (c *converter) run(stop <-chan struct{}, y *yielder) {
	defer y.close()
	idle := time.Millisecond
	if c.stallRun {
		<-stop
		return
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		if c.boosting.Load() {
			time.Sleep(time.Millisecond)
			continue
		}
		// The wait for the copier's pass comes before mu, which the
		// boost may want meanwhile.
		ps := c.begin()
		n := 0
		c.mu.Lock()
		if !c.boosting.Load() {
			n = c.step(&ps)
		}
		c.mu.Unlock()
		// Under half full, the copies can wait while the program has
		// the CPU; past it, the backlog comes first.
		d := y.pause()
		if c.q.fuller(1, 2) {
			d = 0
		}
		// Idle, the polls space out: a pass looks at every thread's
		// slot, and a program may keep thousands alive and quiet.
		if n == 0 {
			d = max(d, idle)
			idle = min(2*idle, convIdleMax)
		} else {
			idle = time.Millisecond
		}
		if d > 0 {
			time.Sleep(d)
		}
	}
}

// passStart is what a pass knows before it reads: the stream serials
// handed out, its start time (CLOCK_MONOTONIC), and whether the copier's
// pass after that start found the copies full.
type passStart struct {
	nStreams uint32
	t0       uint64
	full     bool
	waiting  uint64 // raw time of the oldest record left in the region
	busy     []busyChunk
}

// begin starts a pass: taken before it, a stream with a later serial
// reads its first time after t0 (see watermark), and every record
// committed before t0 is in the copies once the copier's pass is done.
func (c *converter) begin() passStart {
	ps := passStart{nStreams: c.r.load(hStreamNext), t0: monoNow()}
	ps.full, ps.waiting, ps.busy = c.k.sync(ps.t0)
	return ps
}

// step is one pass (begun by ps, or here when nil): the region's new
// records, and a snapshot when one is due. It returns the number of
// records read.
func (c *converter) step(ps *passStart) int {
	return c.poll(false, ps)
}

// convIdleMax bounds run's sleep while polls find nothing (the merge holds
// records for mergeSlack anyway).
const convIdleMax = 16 * time.Millisecond

// boostEvery is how often the boost looks at the region's fill.
const boostEvery = 5 * time.Millisecond

// boost runs beside run, whose thread sleeps to yield to the program
// (yield.go) and which a machine busy with other work may leave waiting
// for a CPU: once more than three quarters of the copies' slots of either
// size are taken and records wait (queued, or the copier blocked), it
// takes the conversion over until at most half of each are taken or
// nothing waits. Without it the region would fill and the program, which
// waits for chunks, would wait on that one thread (and, after 2 s, lose
// records). A slot is also taken by each live thread that wrote all it
// had: thousands of idle threads fill the copies without a backlog.
func (c *converter) boost(stop <-chan struct{}) {
	t := time.NewTicker(boostEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if !c.q.fuller(3, 4) || c.backlog.Load() == 0 && !c.k.full.Load() {
			continue
		}
		c.boosting.Store(true)
		c.lockNow()
		c.boosts++
		for c.q.fuller(1, 2) {
			select {
			case <-stop:
				c.mu.Unlock()
				c.boosting.Store(false)
				return
			default:
			}
			c.boostSteps++
			if c.step(nil) == 0 {
				if c.queued == 0 && !c.full {
					break // the slots are the live threads'
				}
				// Nothing to read yet: the chunks are held by
				// records not yet old enough to write.
				c.mu.Unlock()
				time.Sleep(time.Millisecond)
				c.lockNow()
			}
		}
		c.mu.Unlock()
		c.boosting.Store(false)
	}
}

// lockNow takes mu from run's loop without waiting for its whole
// pass: the pass stops between two records (handOff).
func (c *converter) lockNow() {
	c.handOff.Store(true)
	c.mu.Lock()
	c.handOff.Store(false)
}

// drain ends the conversion once run and boost have returned, on the
// caller's thread (memtrace's priority: the program is gone, or detached,
// and memtrace's end is waited for): the tables' last pass, what the
// region still holds, and the log's end.
func (c *converter) drain() {
	if c.stopTables != nil {
		c.stopTables()
	}
	if c.detachAt != 0 {
		// Quiet the hooks first; what they committed up to now is
		// read below.
		c.r.put32(hStop, 1)
	}
	if c.detachAt == 0 {
		// The program is gone: its CPU compresses the rest (a
		// detached one still runs).
		c.sess.Concurrent()
	}
	// Every record is committed (or the hooks are quiet): the copier may
	// take the overflow, so that the first pass reads all of them rather
	// than write some before others it left in the region.
	c.k.overflow.Store(true)
	// Once the copies are full, a pass leaves records in the region;
	// what it writes makes room for the next. It stops when a full pass
	// found nothing to read and no slot to free (slots held by threads
	// that live on after a detach).
	for {
		freed, queued := c.released, c.queued
		n := c.poll(true, nil)
		if (!c.full && c.queued == 0) || n == 0 && c.released == freed && c.queued >= queued {
			break
		}
	}
	c.finish()
}

// startTables starts the table builder, when there are stacks.
func (c *converter) startTables() {
	if c.tb == nil {
		return
	}
	tstop, tdone := make(chan struct{}), make(chan struct{})
	go c.tb.run(tstop, tdone)
	c.stopTables = func() { close(tstop); <-tdone }
}

func monoNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Sec)*1e9 + uint64(ts.Nsec)
}

func (c *converter) initClock() bool {
	if c.clockOK {
		return true
	}
	if c.r.load(hClockState) != clockReady {
		return false
	}
	c.kind = c.r.load(hClockKind)
	c.epoch, c.cnt0, c.mono0, c.mult = c.r.u64(hEpoch), c.r.u64(hCnt0), c.r.u64(hMono0), c.r.u64(hMult)
	c.clockOK = true
	return true
}

// toNS turns a record's raw time (counter ticks or CLOCK_MONOTONIC ns) into
// ns since the epoch, as the library's text mode computes it.
func (c *converter) toNS(raw uint64) uint64 {
	var ns int64
	if c.kind == clockCounter {
		d := raw - c.cnt0
		hi, lo := (d>>32)*c.mult, ((d&0xffffffff)*c.mult)>>32
		ns = int64(c.mono0-c.epoch) + int64(hi+lo)
	} else {
		ns = int64(raw - c.epoch)
	}
	if ns < 0 {
		return 0
	}
	return uint64(ns)
}

// poll reads every chunk's new records into the streams, frees the chunks
// that are done and writes what is old enough, in the pass ps began (nil:
// begun here). It returns the number of records read. Asked to hand off,
// it stops between two chunks and writes nothing: what it read stays
// queued, and the watermark of a pass that read every chunk is the next
// one's to compute.
func (c *converter) poll(final bool, ps *passStart) int {
	q := c.q
	atomic.AddUint32(c.r.p32(hBeat), 1)
	c.polls++
	defer func() { c.backlog.Store(int64(c.queued)) }()
	if !c.initClock() {
		return 0
	}
	if ps == nil {
		b := c.begin()
		ps = &b
	}
	nStreams, t0 := ps.nStreams, ps.t0
	c.full = ps.full
	c.scanFiles()
	// A stream's chunks are read in seq order, so that its records stay in
	// the order the thread wrote them.
	c.order = c.order[:0]
	q.eachStream(func(i, base int, sid uint32) {
		seq := q.load(base + cSeq)
		p := &c.chunks[i]
		if p.stream != sid || p.seq != seq {
			*p = chunkPos{stream: sid, seq: seq}
		}
		c.order = append(c.order, i)
	})
	slices.SortFunc(c.order, func(a, b int) int {
		pa, pb := &c.chunks[a], &c.chunks[b]
		return cmp.Or(cmp.Compare(pa.stream, pb.stream), cmp.Compare(pa.seq, pb.seq))
	})
	n := 0
	for _, i := range c.order {
		if c.handOff.Load() {
			return n
		}
		n += c.readChunk(i)
	}
	switch {
	case final:
		// At the end every record is committed, but with the copies
		// full some wait in the region: what is older than them goes
		// first, and the next pass reads them (all of it when nothing
		// older can go, which would otherwise stall the end).
		w := ^uint64(0)
		if ps.waiting != noneWaiting {
			hard := c.toNS(ps.waiting)
			for _, st := range c.streams {
				if ts, ok := c.headTS(st); ok && ts < hard {
					w = hard
					break
				}
			}
		}
		c.emit(w)
	case c.queued > 0 || c.interval > 0:
		// (The watermark and the merge look at every stream: with
		// thousands of idle threads, most polls have nothing to write;
		// with --interval a quiet program's snapshots are due anyway.)
		w := c.bound(c.watermark(nStreams, t0), ps)
		c.emit(w)
		// The session writes each snapshot at its time among the
		// events (agent.Session.SnapshotsUntil); these are the ones
		// due while no record comes.
		c.sess.SnapshotsUntil(w)
	}
	c.reportLost()
	// The session's buffer writes itself out when full; flushing here
	// too, when the program is quiet, keeps a live reader current, and a
	// failed write quiets the library at once.
	if final || n == 0 || c.sess.Err() != nil {
		c.flush()
	}
	return n
}

func (c *converter) readChunk(i int) int {
	r := c.q
	base := r.chunk(i)
	p := &c.chunks[i]
	committed := min(r.load(base+cCommitted), r.capRecs(i))
	st := c.streams[p.stream]
	if st == nil {
		st = &stream{id: p.stream, pid: int64(r.load(base + cPID)), tid: int64(r.load(base + cTID))}
		c.streams[p.stream] = st
		c.saw(p.stream)
	}
	from := p.read
	last := -1
	for p.read < committed {
		off := base + chunkHdr + int(p.read)*recSize
		slots := uint32(uint16(r.u64(off+recMetaOff) >> metaSlotsShift))
		if p.read+1+slots > committed {
			break // never half a record
		}
		p.read += 1 + slots
		last = off
	}
	n := int(p.read - from)
	if n > 0 {
		if ts := c.toNS(r.u64(last + recTSOff)); ts > st.lastTS {
			st.lastTS = ts
		}
		c.queued += n
		if k := len(st.segs) - 1; k >= st.head && st.segs[k].idx == i && st.segs[k].end == from {
			st.segs[k].end = p.read
		} else {
			st.segs = append(st.segs, seg{i, from, p.read})
		}
		return n
	}
	c.maybeRelease(i)
	return 0
}

// maybeRelease hands a chunk back once its thread moved on (sealed) and
// every record of it is written.
func (c *converter) maybeRelease(i int) {
	p := &c.chunks[i]
	base := c.q.chunk(i)
	sealed := c.q.load(base + cSealed)
	if p.written != p.read || sealed == 0 || p.read < c.q.load(base+cCommitted) {
		return
	}
	if st := c.streams[p.stream]; st != nil && st.head == len(st.segs) &&
		(sealed == slotGone && st.exited || st.closed) {
		// Every record of the stream is written and none can follow:
		// the copier found the chunk's thread gone (exited, or its
		// process exec'd or was killed) after its EXIT, or its process
		// exec'd or went untraced. The session need not keep the
		// thread, nor the converter the stream: a program that starts
		// a thread per request would otherwise grow both, and each
		// pass's look at every stream, without end.
		if st.owns {
			st.owns = false
			delete(c.owners, st.tid)
			c.sess.ForgetThread(uint32(st.tid))
		}
		delete(c.streams, st.id)
		c.gone++
	}
	c.release(i)
}

func (c *converter) release(i int) {
	c.released++
	c.releasedAt = monoNow()
	c.chunks[i] = chunkPos{}
	releaseChunk(c.q, i)
}

// headTS is the time of a stream's oldest unwritten record.
func (c *converter) headTS(st *stream) (uint64, bool) {
	if st.head >= len(st.segs) {
		return 0, false
	}
	sg := &st.segs[st.head]
	return c.toNS(c.q.u64(c.q.chunk(sg.idx) + chunkHdr + int(sg.pos)*recSize + recTSOff)), true
}

// next decodes and consumes a stream's oldest unwritten record.
func (c *converter) next(st *stream) ev {
	r := c.q
	sg := &st.segs[st.head]
	off := r.chunk(sg.idx) + chunkHdr + int(sg.pos)*recSize
	meta := r.u64(off + recMetaOff)
	slots := uint32(uint16(meta >> metaSlotsShift))
	e := ev{ts: c.toNS(r.u64(off + recTSOff)), ptr: r.u64(off + recPtrOff), size: r.u64(off + recSizeOff), op: uint16(meta)}
	if e.op < rName {
		// A call: the high bits are its stack's id, its data all frames.
		e.stack = uint32(meta >> metaStackShift)
		if slots > 0 {
			e.data = r.mem[off+recSize : off+recSize+int(slots)*recSize]
		}
	} else if slots > 0 {
		dl := int(meta >> metaLenShift)
		if dl == 0 || dl > int(slots)*recSize {
			dl = int(slots) * recSize
		}
		e.data = r.mem[off+recSize : off+recSize+dl]
	} else if e.op == rName {
		e.data = r.mem[off+recPtrOff : off+recPtrOff+nameLen]
	}
	sg.pos += 1 + slots
	c.queued -= int(1 + slots)
	return e
}

// done finishes with the record next returned: the chunk may go back.
func (c *converter) done(st *stream) {
	sg := &st.segs[st.head]
	c.chunks[sg.idx].written = sg.pos
	if sg.pos >= sg.end {
		idx := sg.idx
		st.head++
		if st.head == len(st.segs) {
			st.segs, st.head = st.segs[:0], 0
		}
		c.maybeRelease(idx)
	}
}

// watermark is the time below which no record can still come:
//   - a stream that has written a record at T writes none older than T;
//   - a stream that wrote nothing for mergeSlack is taken to write nothing
//     older than now-mergeSlack (a thread preempted longer than that
//     between reading the clock and committing is written late, and the
//     file is sorted at the end);
//   - a thread takes its stream serial before its first timestamp, so a
//     stream born after the pass started (serial > nStreams) has times
//     after t0, and one with a serial but no chunk read yet gets the
//     slack rule;
//   - records the copier left in the region: see bound.
//
// Which serials were read is kept as a set, not a count of the streams
// known: a pass whose start was taken before another thread's passes (run
// waiting for mu while the boost converts) would count the streams those
// passes read and dropped, born after its start, for the ones it has not
// read, and write a later thread's records before an earlier one's.
func (c *converter) watermark(nStreams uint32, t0 uint64) uint64 {
	now := monoNow()
	if now < c.epoch+uint64(mergeSlack)+uint64(clockMargin) || t0 < c.epoch+uint64(clockMargin) {
		return 0
	}
	floor := now - c.epoch - uint64(mergeSlack)
	w := t0 - c.epoch - uint64(clockMargin)
	for _, st := range c.streams {
		if st.closed {
			continue
		}
		if v := max(st.lastTS, floor); v < w {
			w = v
		}
	}
	c.pruneHoles(now)
	if c.seenBelow <= nStreams {
		w = min(w, floor)
	}
	return w
}

// bound lowers the watermark w to the oldest record that is not in the
// copies yet although its time is read: one the copier left in the region
// (the copies were full), or one a thread is in the middle of (in the real
// call, its stack walk, preempted, waiting for a chunk: its chunk is busy,
// and the record is no older than the stream's last one or the chunk's
// t_min). Either may be older than the slack allows for, and a later
// record of another thread written before it would be read in the wrong
// order (a free before its block's allocation, from another thread).
//
// With the copies full, the bound holds while it lets something be
// written, which frees slots for the copier and chunks for the program.
// When a pass can write nothing below it and no slot was handed back
// since the copier's pass began, every slot may hold a record newer than
// the one waiting (threads alive beyond the copies' count each hold one),
// and only writing them frees one: after stuckMax so, the pass writes up
// to w, and the records waiting come late (counted in late; the file is
// sorted at the end).
func (c *converter) bound(w uint64, ps *passStart) uint64 {
	hard := ^uint64(0)
	if ps.waiting != noneWaiting {
		hard = c.toNS(ps.waiting)
	}
	for _, b := range ps.busy {
		lo := c.toNS(b.tMin)
		if st := c.streams[b.stream]; st != nil {
			lo = max(lo, st.lastTS)
		}
		hard = min(hard, lo)
	}
	if hard >= w {
		c.unstuck()
		return w
	}
	if !ps.full {
		c.unstuck()
		return hard
	}
	// (The overflow, once let in, stays open while the copies are full
	// and something waits outside them.)
	if c.releasedAt >= ps.t0 {
		c.stuckSince = 0
		return hard
	}
	for _, st := range c.streams {
		if ts, ok := c.headTS(st); ok && ts < hard {
			c.stuckSince = 0
			return hard
		}
	}
	now := monoNow()
	if c.stuckSince == 0 {
		c.stuckSince, c.stuckPass = now, c.k.passCount.Load()
		c.k.overflow.Store(true)
		c.overflows++
	}
	// Time alone is not enough: on a busy machine memtrace's threads may
	// not run for that long.
	if now-c.stuckSince < uint64(stuckMax) || c.k.passCount.Load()-c.stuckPass < stuckPasses {
		return hard
	}
	c.unstuck()
	c.gaveUp++
	return w
}

// unstuck: the converter writes again, and the copier keeps to the soft
// count of slots (those past it go back as they are written).
func (c *converter) unstuck() {
	c.stuckSince = 0
	if c.k.overflow.Load() {
		c.k.overflow.Store(false)
	}
}

// stuckMax is how long passes may find nothing to write below a record
// not yet in the copies, with the copies full, before one writes past it
// (bound): many copier passes, and many of a waiting thread's tries for a
// chunk.
const (
	stuckMax    = 100 * time.Millisecond
	stuckPasses = 50
)

// saw notes that stream serial id was read.
func (c *converter) saw(id uint32) {
	switch {
	case id < c.seenBelow:
	case id == c.seenBelow:
		c.seenBelow++
		for {
			if _, ok := c.seenAbove[c.seenBelow]; !ok {
				break
			}
			delete(c.seenAbove, c.seenBelow)
			c.seenBelow++
		}
		c.holeSince = 0
	default:
		c.seenAbove[id] = struct{}{}
	}
}

// maxHoles and holeLife bound the serials kept above a hole: a serial
// never read (its fork failed, or its thread found the region full and
// never had a chunk) would otherwise keep every later one. A hole is
// given up only when both are exceeded: by then its thread, had it one,
// has written for far longer than mergeSlack, and the slack rule covers it.
const (
	maxHoles = 4096
	holeLife = time.Second
)

// pruneHoles gives up the lowest holes once the set is too big and has
// not moved for holeLife.
func (c *converter) pruneHoles(now uint64) {
	if len(c.seenAbove) <= maxHoles {
		return
	}
	if c.holeSince == 0 {
		c.holeSince = now
		return
	}
	if now-c.holeSince < uint64(holeLife) {
		return
	}
	lowest := ^uint32(0)
	for id := range c.seenAbove {
		lowest = min(lowest, id)
	}
	delete(c.seenAbove, lowest)
	c.seenBelow = lowest
	c.saw(lowest)
}

// emit writes the records older than w, merged across streams in time
// order (ties: the older stream first).
func (c *converter) emit(w uint64) {
	var act []*stream
	for _, st := range c.streams {
		if ts, ok := c.headTS(st); ok && ts < w {
			act = append(act, st)
		}
	}
	if len(act) == 0 {
		return
	}
	sort.Slice(act, func(a, b int) bool { return act[a].id < act[b].id })
	for {
		var best *stream
		var bestTS uint64
		limit := w
		for _, st := range act {
			ts, ok := c.headTS(st)
			if !ok || ts >= w {
				continue
			}
			if best == nil || ts < bestTS {
				if best != nil && bestTS < limit {
					limit = bestTS
				}
				best, bestTS = st, ts
			} else if ts < limit {
				limit = ts
			}
		}
		if best == nil {
			break
		}
		// A run of this stream while it stays the oldest (ties go to
		// the stream listed first).
		if limit < w {
			limit++
		}
		for {
			if c.handOff.Load() {
				// Another thread waits to convert (binRun.finish,
				// boost): what is left stays queued for it, in
				// order.
				return
			}
			ts, ok := c.headTS(best)
			if !ok || ts >= limit {
				break
			}
			e := c.next(best)
			c.handle(best, &e)
			c.done(best)
		}
	}
}

func (c *converter) setName(st *stream, raw []byte) {
	if i := bytes.IndexByte(raw, 0); i >= 0 {
		raw = raw[:i]
	}
	st.comm = [16]byte{}
	copy(st.comm[:], raw)
	c.evComm = nil
}

// own makes the session's thread of st.tid st's: a tid that another
// stream had (a thread whose tid a new one got once it ended, the thread
// that exec'd into a new image) is a new thread, with its own total.
func (c *converter) own(st *stream) {
	if st.owns {
		return
	}
	st.owns = true
	if o := c.owners[st.tid]; o != nil {
		o.owns = false
		c.sess.ForgetThread(uint32(st.tid))
	}
	c.owners[st.tid] = st
}

// event fills the event handed to the session with st's thread. Its
// fields are set one by one, the name only when it changes: this runs
// for every record.
func (c *converter) event(st *stream, kind uint8, ts uint64) *event.Event {
	x := &c.ev
	x.TS, x.TGID, x.TID, x.Kind = ts, uint32(st.pid), uint32(st.tid), kind
	x.Ptr, x.Size, x.Op, x.Stack = 0, 0, 0, 0
	if c.evComm != st {
		x.Comm, c.evComm = st.comm, st
	}
	return x
}

// handle turns one record into the session's event.
func (c *converter) handle(st *stream, e *ev) {
	if c.detachAt != 0 && c.epoch+e.ts > c.detachAt && e.op != rName {
		return // after the detach
	}
	if e.ts < c.lastTS {
		c.late++
	} else {
		c.lastTS = e.ts
	}
	if ts := e.ts / 1000; ts > c.maxTS {
		c.maxTS = ts
	}
	switch op := e.op; {
	case op == rName:
		c.setName(st, e.data)
	case op == rStart:
		f := splitZ(e.data, 3)
		var exe string
		if c.prog != "" {
			exe, _ = filepath.EvalSymlinks(c.prog)
			exe, _ = filepath.Abs(exe)
		}
		c.sess.Header(logfmt.Header{Version: f[0], PID: int64(e.ptr), Comm: f[1], Cmd: f[2],
			Exe: agent.ExeBeside(f[1], exe), Start: time.Unix(0, int64(e.size)), Mode: logfmt.ModePreload})
	case op == rExec:
		// A new image: the old one's threads are gone without EXIT
		// lines (as the library's text mode does) and its heap too.
		for _, o := range c.streams {
			if o.pid == st.pid && o != st {
				o.closed = true
			}
		}
		f := splitZ(e.data, 2)
		x := c.event(st, event.KindExec, e.ts)
		x.TGID, x.Comm, c.evComm = uint32(e.ptr), [16]byte{}, nil
		copy(x.Comm[:], f[0])
		c.sess.EmitExec(x, uint32(e.size), f[1])
	case op == rFork:
		// The child (ptr) starts with a copy of the parent's heap.
		x := c.event(st, event.KindFork, e.ts)
		x.TGID, x.Ptr = uint32(e.size), e.ptr
		c.sess.Emit(x)
	case op == rUntraced:
		// A process the library does not trace (no --follow): its
		// stream ends here. From an exec'd image: its comm and cmd.
		x := c.event(st, event.KindFork, e.ts)
		x.TGID, x.Ptr = uint32(e.size), e.ptr
		var cmd string
		if len(e.data) > 0 {
			f := splitZ(e.data, 2)
			x.Comm, c.evComm = [16]byte{}, nil
			copy(x.Comm[:], f[0])
			cmd = f[1]
		}
		c.sess.EmitUnfollowed(x, cmd)
		st.closed = true
	case op == rProcExit:
		ids := make([]uint32, 0, 4)
		for id, o := range c.streams {
			if o.pid == st.pid && !o.exited && !o.closed {
				ids = append(ids, id)
			}
		}
		sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
		for _, id := range ids {
			c.exit(c.streams[id], e.ts)
		}
	case op == opExit:
		c.exit(st, e.ts)
	case op >= 1 && int(op) < logfmt.NumOps && logfmt.Op(op).IsFree():
		c.call(st, e, event.KindFree)
	case op >= 1 && int(op) < logfmt.NumOps:
		c.call(st, e, event.KindAlloc)
	}
}

// call hands an allocation or a release to the session, with its stack.
func (c *converter) call(st *stream, e *ev, kind uint8) {
	c.own(st)
	x := c.event(st, kind, e.ts)
	x.Op, x.Ptr, x.Size = uint8(e.op), e.ptr, e.size
	switch {
	case e.data != nil:
		c.stackSent++
		x.Stack = c.stack(e.data, uint32(st.pid), e.ts)
		if e.stack != 0 && e.stack <= stackIDMax {
			if int(e.stack) >= len(st.stacks) {
				st.stacks = append(st.stacks, make([]uint64, int(e.stack)+1-len(st.stacks))...)
			}
			st.stacks[e.stack] = x.Stack
		}
	case e.stack != 0:
		c.stackRefs++
		if int(e.stack) < len(st.stacks) {
			x.Stack = st.stacks[e.stack]
		}
		if x.Stack == 0 {
			// Never sent: the log says the stack is missing.
			x.Stack = noStack
		}
	}
	c.sess.Emit(x)
}

// noStack is a stack id no stack has: an event that refers to frames its
// thread never sent is written with the missing-stack line.
const noStack = ^uint64(0)

// launched tells the session that pid is the program Run started: its
// exit line waits for the wait status (exited), as the eBPF path's does,
// since the library's exit record comes before the process is reaped.
// Called before the converter runs.
func (c *converter) launched(pid int) {
	c.sess.ExpectExitStatus(uint32(pid))
}

// exited hands over the launched program's wait status; safe from any
// goroutine (the converter may be waiting for it in its exit line).
func (c *converter) exited(pid int, ps *os.ProcessState) {
	c.sess.SetExitStatus(uint32(pid), ps)
}

func (c *converter) exit(st *stream, ts uint64) {
	if st.exited || st.closed {
		return
	}
	st.exited = true
	if st.owns {
		c.sess.Emit(c.event(st, event.KindExit, ts))
	}
}

// stack returns the session's ID of the stack the library captured (see
// bin_frames), 0 for none: its frames as the eBPF tracer's, an address
// with its file (the slot's key) and offset, which the session names as
// it names those (ts: ns since the epoch). A stack is sent once: events
// with the same frames, bytes for bytes, share its ID, so the session
// names and formats it once.
func (c *converter) stack(d []byte, pid uint32, ts uint64) uint64 {
	if len(d) < framesHdr {
		return 0
	}
	n := int(binary.LittleEndian.Uint32(d))
	n = min(n, (len(d)-framesHdr)/frameSize)
	if n <= 0 {
		return 0
	}
	// The stop word and the frames' own bytes are the key: the record's
	// last slot is padded with whatever the chunk held before.
	key := d[4 : framesHdr+n*frameSize]
	if id, ok := c.stackID[string(key)]; ok {
		return id
	}
	stop := event.StopEnd
	switch binary.LittleEndian.Uint32(d[4:]) {
	case stopDepth:
		stop = event.StopDepth
	case stopNoInfo:
		// 32-bit ARM: the one frame is the hook's caller, which
		// backtrace() could not step past (mt_abi.h).
		stop = event.StopNoInfo
	}
	c.frames = c.frames[:0]
	for o := framesHdr; o < framesHdr+n*frameSize; o += frameSize {
		f := event.Frame{Addr: binary.LittleEndian.Uint64(d[o+frameAddr:])}
		if slot := binary.LittleEndian.Uint32(d[o+frameFile:]); slot != noFile {
			if k := c.settle(int(slot)); k != 0 {
				f.FileOff, f.Ino = binary.LittleEndian.Uint64(d[o+frameOff:]), k
			}
		}
		c.frames = append(c.frames, f)
	}
	id := uint64(len(c.stackID) + 1)
	c.stackID[string(key)] = id
	c.sess.Stack(&event.Stack{TS: c.epoch + ts, ID: id, TGID: pid, Stop: stop, Frames: c.frames})
	return id
}

// reportLost writes a lost line when the library dropped records since
// the last one, at the time of the latest record written.
func (c *converter) reportLost() {
	l := c.r.load(hLost)
	if l == c.lost {
		return
	}
	d := l - c.lost
	c.lost = l
	c.sess.Lost(uint64(d), c.maxTS*1000)
}

// finish writes EXIT lines for the threads the log saw end with their
// process without one (a killed program; not after a detach, when they
// still run), the summary line, and tells the library that nobody reads
// the region any more.
func (c *converter) finish() {
	if c.detachAt == 0 {
		ids := make([]uint32, 0, len(c.streams))
		for id, st := range c.streams {
			if !st.exited && !st.closed {
				ids = append(ids, id)
			}
		}
		sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
		for _, id := range ids {
			c.exit(c.streams[id], c.maxTS*1000)
		}
	}
	c.sess.FinalReports() // the processes still running after a detach
	if c.onStacks != nil {
		c.onStacks(c.stackStats())
	}
	c.reportLost()
	c.sess.Summary(time.Since(c.started).Microseconds())
	c.flush()
	c.r.stop()
}

func (c *converter) flush() {
	if c.werr != nil {
		return
	}
	if c.werr = c.sess.Flush(); c.werr != nil {
		// Nothing more can be written (a full disk, a viewer that
		// left): the program goes on untraced.
		c.r.put32(hStop, 1)
	}
}

func splitZ(b []byte, n int) []string {
	out := make([]string, n)
	for i := 0; i < n; i++ {
		j := bytes.IndexByte(b, 0)
		if j < 0 {
			out[i] = string(b)
			b = nil
			continue
		}
		out[i] = string(b[:j])
		b = b[j+1:]
	}
	return out
}
