package analysis

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memtrace/memtrace/logfmt"
)

// rec is one parsed line, its text fields kept as offsets into the batch
// so that parsing (parallel) and applying (in order) can be split.
type rec struct {
	kind    logfmt.Kind
	op      logfmt.Op
	hasSize bool
	bad     bool
	tid     int64
	ts      uint64
	size    uint64 // frames: offset
	total   uint64
	ptr     uint64 // frames: address
	a0, a1  int32  // name | module | meta word
	b0, b1  int32  // op text | symbol | meta rest
	c0, c1  int32  // frame key
	// A frame line not parsed yet (lazy): c0, c1 is its text after the
	// index, l0, l1 the whole line. The model parses it only the first
	// time it sees that text: a stack-heavy log repeats a few thousand
	// frame texts tens of millions of times, and parsing every one was
	// 40 % of a reader's CPU.
	lazy   bool
	l0, l1 int32
}

// batch is a run of whole lines, each ended by a newline in data; ends,
// the offset of each newline, and recs are filled by parse.
type batch struct {
	seq   int
	data  []byte
	ends  []int32
	recs  []rec
	flush bool // the last batch before the reader waits for more input
	lazy  bool // frame lines are left for apply (see rec.lazy)
}

// batchFree is one Stream's set of batches, at most cap(ch) of them: the
// reader waits for the model to give one back. Not a sync.Pool: that one
// is emptied at every collection, and the batches made again (their
// records grown anew) were nearly all of a reader's garbage, 7 GB over a
// 10M-event log, so that its heap stood a GOGC above the model.
type batchFree struct {
	ch   chan *batch
	made int
}

func newBatchFree(n int) *batchFree { return &batchFree{ch: make(chan *batch, n)} }

func (f *batchFree) get() *batch {
	select {
	case b := <-f.ch:
		return b
	default:
	}
	if f.made < cap(f.ch) {
		f.made++
		return &batch{data: make([]byte, 0, batchBytes+4096)}
	}
	return <-f.ch
}

func (f *batchFree) put(b *batch) {
	b.data, b.ends, b.recs = b.data[:0], b.ends[:0], b.recs[:0]
	f.ch <- b // never blocks: no more than cap(f.ch) were made
}

// batchBytes is a batch's size. Each line costs a parsed record of about
// 90 bytes beside its text, so a stack-heavy log's batch of 1 MB was 3 MB,
// and the batches queued between reader, parsers and the model were 40 MB
// of a reader's peak; at 256 KB they are a quarter of that, for no
// measurable time.
const batchBytes = 256 << 10

// add appends one line (without its newline).
func (b *batch) add(line []byte) {
	b.data = append(b.data, line...)
	b.data = append(b.data, '\n')
}

// addLines appends a run of lines from logfmt.Scanner.ScanLines: whole
// lines with their newlines, or an unterminated last line, which is given
// its newline here.
func (b *batch) addLines(run []byte) {
	b.data = append(b.data, run...)
	if len(run) > 0 && run[len(run)-1] != '\n' {
		b.data = append(b.data, '\n')
	}
}

// split fills b.ends from b.data: the lines are found on the parsing
// goroutines, not the reading one.
func (b *batch) split() {
	b.ends = b.ends[:0]
	for off := 0; off < len(b.data); {
		i := bytes.IndexByte(b.data[off:], '\n')
		if i < 0 {
			break // add and addLines end every line
		}
		off += i
		b.ends = append(b.ends, int32(off))
		off++
	}
}

// span returns the offsets of sub inside b.data.
func (b *batch) span(sub []byte) (int32, int32) {
	if len(sub) == 0 {
		return 0, 0
	}
	s := int32(cap(b.data) - cap(sub))
	return s, s + int32(len(sub))
}

func (b *batch) text(s, e int32) []byte { return b.data[s:e] }

// parse fills b.recs from b.data. It runs on any goroutine.
func (b *batch) parse() {
	b.split()
	b.recs = b.recs[:0]
	var l logfmt.Line
	start := int32(0)
	for _, end := range b.ends {
		line := b.data[start:end]
		s0 := start
		start = end + 1
		var r rec
		if b.lazy {
			if k0, k1, ok := logfmt.FrameText(line); ok {
				r.kind, r.lazy = logfmt.KindFrame, true
				r.c0, r.c1, r.l0, r.l1 = s0+int32(k0), s0+int32(k1), s0, end
				b.recs = append(b.recs, r)
				continue
			}
		}
		if err := l.Parse(line); err != nil {
			r.bad = true
			b.recs = append(b.recs, r)
			continue
		}
		r.kind = l.Kind
		switch l.Kind {
		case logfmt.KindAlloc, logfmt.KindFree, logfmt.KindExit:
			r.op, r.tid, r.ts, r.size, r.total, r.ptr, r.hasSize = l.Op, l.TID, l.TS, l.Size, l.Total, l.Ptr, l.HasSize
			r.a0, r.a1 = b.span(l.Name)
			if l.Op == logfmt.OpOther {
				r.b0, r.b1 = b.span(l.OpText)
			}
		case logfmt.KindFrame:
			b.frame(&r, &l, end)
		case logfmt.KindMeta:
			r.a0, r.a1 = b.span(l.Word)
			r.b0, r.b1 = b.span(l.Rest)
		}
		b.recs = append(b.recs, r)
	}
}

// frame fills r from l, a parsed frame line of b ending at end.
func (b *batch) frame(r *rec, l *logfmt.Line, end int32) {
	r.size, r.ptr, r.total = l.Offset, l.Addr, uint64(l.FrameIndex)
	r.a0, r.a1 = b.span(l.Module)
	r.b0, r.b1 = b.span(l.Symbol)
	// The frame's key is its text from the module on: equal text,
	// equal frame.
	e := end
	for e > r.a0 && (b.data[e-1] == ' ' || b.data[e-1] == '\r') {
		e--
	}
	r.c0, r.c1 = 0, 0
	switch {
	case r.a1 > r.a0:
		r.c0, r.c1 = r.a0, e
	case r.b1 > r.b0:
		r.c0, r.c1 = r.b0, e
	}
}

// lazyFrame resolves a lazy frame record: the frame its text was seen as
// before, or the line parsed now. ok is false for a line logfmt refuses.
func (m *Model) lazyFrame(b *batch, r *rec) (id uint32, known, ok bool) {
	raw := b.text(r.c0, r.c1)
	if id, hit := m.rawFrames[string(raw)]; hit {
		m.lazyHits++
		return id, true, true
	}
	// The raw text is nearly always the frame's key itself (the text from
	// its module on): then the frame table alone knows it, and rawFrames
	// holds only the other texts, not every text twice.
	if id, hit := m.frames.find(raw); hit {
		m.lazyHits++
		return id, true, true
	}
	var l logfmt.Line
	if err := l.Parse(b.text(r.l0, r.l1)); err != nil || l.Kind != logfmt.KindFrame {
		return 0, false, false
	}
	key0, key1 := r.c0, r.c1
	b.frame(r, &l, r.l1)
	r.l0, r.l1 = key0, key1 // the raw text, for rememberFrame
	return 0, false, true
}

// apply adds a parsed batch to the model, in log order.
func (m *Model) apply(b *batch) {
	for i := range b.recs {
		r := &b.recs[i]
		m.Counts.Lines++
		if r.bad {
			m.Counts.Malformed++
			continue
		}
		switch r.kind {
		case logfmt.KindAlloc, logfmt.KindFree:
			m.Counts.Events++
			m.assignStack(true)
			m.seeTS(r.ts)
			ti := m.thread(r.tid, b.text(r.a0, r.a1), r.ts)
			op := m.op(r.op, b.text(r.b0, r.b1))
			if r.kind == logfmt.KindAlloc {
				id := m.addAlloc(ti, op, r.ts, r.size, r.ptr)
				// SummaryOnly keeps the stacks of allocations too: the
				// built-in suppressions are decided by them.
				m.target, m.openFree = int64(id), false
			} else {
				ref := m.addFree(ti, op, r.ts, r.size, r.hasSize, r.ptr)
				m.target, m.openFree = ref, ref >= 0
				if m.SummaryOnly {
					m.target, m.openFree = noTarget, false
				}
			}
		case logfmt.KindFrame:
			var f uint32
			known := false
			if r.lazy {
				var ok bool
				if f, known, ok = m.lazyFrame(b, r); !ok {
					m.Counts.Malformed++
					continue
				}
			}
			m.Counts.Frames++
			if m.target == noTarget {
				if !m.SummaryOnly { // a free's frames, which SummaryOnly drops
					m.Counts.StrayFrames++
				}
				continue
			}
			if len(m.openFrames) >= logfmt.MaxFrames {
				// More than any tracer writes: a corrupt or hostile
				// log must not make one stack hold them all.
				m.Counts.SkippedFrames++
				m.openCut = true
				continue
			}
			if !known {
				f = m.internFrame(b.text(r.c0, r.c1), b.text(r.a0, r.a1), b.text(r.b0, r.b1), r.size, r.ptr)
				if r.lazy && (r.l0 != r.c0 || r.l1 != r.c1) {
					m.rawFrames[string(b.text(r.l0, r.l1))] = f
				}
			}
			m.openFrames = append(m.openFrames, f)
		case logfmt.KindExit:
			m.Counts.Exits++
			m.assignStack(true)
			m.seeTS(r.ts)
			ti := m.thread(r.tid, b.text(r.a0, r.a1), r.ts)
			t := &m.Threads[ti]
			t.Exited, t.ExitTS, t.ExitTotal = true, r.ts, r.total
		case logfmt.KindMeta:
			m.applyMeta(b.text(r.a0, r.a1), b.text(r.b0, r.b1))
		default:
			m.Counts.Other++
		}
	}
	if b.flush {
		m.assignStack(false)
	}
	m.textRead += int64(len(b.data))
	m.reserveAhead()
	m.Version++
}

// Waiter is implemented by readers whose io.EOF means "nothing more for
// now": Wait blocks until more input may be there and reports false when
// the input has ended for good (or stop was closed).
type Waiter interface {
	Wait(stop <-chan struct{}) bool
}

// StreamOptions tune Stream.
type StreamOptions struct {
	// Lock is held while a batch is applied, so that a viewer can read the
	// model between batches. May be nil.
	Lock sync.Locker
	// OnBatch is called (without Lock) after each applied batch.
	OnBatch func()
	// Progress receives the number of bytes read so far.
	Progress *atomic.Int64
	// Stop ends the stream early; the model is then not marked Done.
	Stop <-chan struct{}
	// Workers parse in parallel; 0 means GOMAXPROCS.
	Workers int
	// SizeHint is the size of the log in bytes when known: the columns
	// are reserved for it up front.
	SizeHint int64
	// FirstLine is called, on the reading goroutine, when the first line
	// that starts as a log line is read: a caller that gave the input a
	// deadline for it (a FIFO, a device) lifts it then.
	FirstLine func()

	// applying, for the tests, sees each parsed batch before the model
	// applies it (under Lock, in log order).
	applying func(*batch)
}

// MaxPrelude bounds the text before a log's first log line: a log's
// first line is its header, or memtrack's first event among a program's
// output, and an input that sends this much text without one (yes |
// memview -f -, some other program's output) is not a log.
const MaxPrelude = 1 << 20

// ErrNotLog ends the reading of an input that sent MaxPrelude bytes of
// text without a log line.
var ErrNotLog = fmt.Errorf("not a log: no memtrace or memtrack line in its first %d MB", MaxPrelude>>20)

// preludeGuard ends an input that sends twice MaxPrelude bytes before its
// first log line: one without a newline never gives the scanner a line to
// look at. A log line that starts within MaxPrelude has been scanned by
// then (the scanner reads ahead by less than MaxPrelude).
type preludeGuard struct {
	r    io.Reader
	n    int64
	seen bool
}

func (g *preludeGuard) Read(p []byte) (int, error) {
	if !g.seen && g.n > 2*MaxPrelude {
		return 0, ErrNotLog
	}
	n, err := g.r.Read(p)
	g.n += int64(n)
	return n, err
}

// logPrefixed reports whether line starts as a log line does: the
// prelude's test, which the model's parser then makes exact.
func logPrefixed(line []byte) bool {
	return bytes.HasPrefix(line, []byte(logfmt.TrackPrefix)) || bytes.HasPrefix(line, []byte(logfmt.TracePrefix))
}

// ReaderGCPercent is the collector's GOGC while a log is read (Stream),
// and while the report works on what was read.
const ReaderGCPercent = 25

// Stream reads a log through logfmt's Scanner until its end and applies it
// to the model, parsing on several goroutines and applying in order. If r
// implements Waiter, Stream keeps following it (live mode) until Wait says
// the input ended. At the end it calls Finish.
func (m *Model) Stream(r io.Reader, o StreamOptions) error {
	if o.Lock == nil {
		o.Lock = nopLock{}
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if st, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok && o.SizeHint == 0 {
		if fi, err := st.Stat(); err == nil && fi.Mode().IsRegular() {
			o.SizeHint = fi.Size()
		}
	}
	m.sizeHint = o.SizeHint
	// The model is mostly pointer-free columns, which the collector marks
	// at almost no cost, so collecting at 25 % growth instead of 100 %
	// keeps the reader's peak memory near its live heap for little CPU
	// (memtrace report on 1.3M allocations: peak RSS 260 MB -> 186 MB,
	// memview's loader 227 -> 181 MB, user CPU no higher). A lower GOGC
	// the user set is kept.
	if old := debug.SetGCPercent(ReaderGCPercent); old < ReaderGCPercent {
		debug.SetGCPercent(old)
	} else {
		defer debug.SetGCPercent(old)
	}
	guard := &preludeGuard{r: r}
	sc := logfmt.NewScanner(guard)
	_, follow := r.(Waiter)
	sc.Final = !follow
	p := m.startPipeline(&o)
	err, stopped := p.read(r, sc, guard)
	p.close()
	return m.endStream(&o, sc, err, stopped, p.bug.Load())
}

// pipeline is one Stream's parsers and applier: the reading goroutine
// sends batches to the parsers in any order, and the applier gives them
// to the model in log order.
type pipeline struct {
	m       *Model
	o       *StreamOptions
	work    chan *batch
	done    chan *batch
	free    *batchFree
	wg      sync.WaitGroup
	applied chan struct{}
	// A bug must not take the viewer down: a panic while parsing or
	// applying ends the stream with an error, keeping what was read.
	bug atomic.Pointer[error]
	seq int
	cur *batch // being filled by the reading goroutine
}

func (m *Model) startPipeline(o *StreamOptions) *pipeline {
	w := o.Workers
	p := &pipeline{m: m, o: o,
		work: make(chan *batch, 2*w), done: make(chan *batch, 2*w),
		// Enough batches to keep every parser busy while the model applies.
		free:    newBatchFree(4*w + 4),
		applied: make(chan struct{}),
	}
	for range w {
		p.wg.Add(1)
		go p.parseAll()
	}
	go p.applyAll()
	p.cur = p.free.get()
	return p
}

// catch turns a panic into the stream's error (deferred).
func (p *pipeline) catch() {
	if r := recover(); r != nil {
		err := fmt.Errorf("internal error reading the log, please report it: %v", r)
		p.bug.CompareAndSwap(nil, &err)
	}
}

func (p *pipeline) parseAll() {
	defer p.wg.Done()
	for b := range p.work {
		func() {
			defer p.catch()
			b.parse()
		}()
		p.done <- b
	}
}

// applyAll applies the parsed batches in log order (by seq).
func (p *pipeline) applyAll() {
	defer close(p.applied)
	next := 0
	pend := map[int]*batch{}
	for b := range p.done {
		pend[b.seq] = b
		for {
			nb, ok := pend[next]
			if !ok {
				break
			}
			delete(pend, next)
			if p.bug.Load() == nil {
				p.apply(nb)
			}
			next++
			p.free.put(nb)
			if p.o.OnBatch != nil {
				p.o.OnBatch()
			}
		}
	}
}

func (p *pipeline) apply(b *batch) {
	defer p.catch()
	p.o.Lock.Lock()
	defer p.o.Lock.Unlock()
	if p.o.applying != nil {
		p.o.applying(b)
	}
	p.m.apply(b)
}

// send hands the batch being filled to the parsers (an empty one only to
// flush).
func (p *pipeline) send(flush bool) {
	if len(p.cur.data) == 0 && !flush {
		return
	}
	p.cur.seq, p.cur.flush, p.cur.lazy = p.seq, flush, true
	p.seq++
	p.work <- p.cur
	p.cur = p.free.get()
}

// close waits for every batch sent to be applied.
func (p *pipeline) close() {
	p.free.put(p.cur)
	close(p.work)
	p.wg.Wait()
	close(p.done)
	<-p.applied
}

// read reads r to its end, or in live mode (r a Waiter) until the input
// ends for good or Stop; stopped reports the latter.
func (p *pipeline) read(r io.Reader, sc *logfmt.Scanner, guard *preludeGuard) (err error, stopped bool) {
	waiter, follow := r.(Waiter)
	for {
		err = p.scan(sc, guard)
		p.send(true)
		if p.o.Progress != nil {
			p.o.Progress.Store(sc.Bytes)
		}
		if err != nil {
			return err, false
		}
		if err = sc.Err(); err != nil {
			return err, false
		}
		if !follow || sc.Final {
			return nil, false
		}
		if _, file := r.(endsAtSummary); file && p.m.ended.Load() {
			// The tracer wrote its summary, its last line: a followed
			// file is complete. Read what remains, then end.
			sc.Final = true
			continue
		}
		if !waiter.Wait(p.o.Stop) {
			select {
			case <-p.o.Stop:
				return nil, true
			default:
				// The input ended for good: read what remains, the last
				// line even without its newline.
				sc.Final = true
			}
		}
	}
}

// scan batches the lines the scanner has until it has no more for now.
func (p *pipeline) scan(sc *logfmt.Scanner, guard *preludeGuard) error {
	for {
		// A line at a time until the first log line (the prelude's
		// checks look at each), then a buffer's worth of lines at a
		// time, which the parsers split.
		if !guard.seen {
			if !sc.Scan() {
				return nil
			}
			if logPrefixed(sc.Line()) {
				guard.seen = true
				if p.o.FirstLine != nil {
					p.o.FirstLine()
				}
			} else if sc.Bytes > MaxPrelude {
				return ErrNotLog
			}
			p.cur.add(sc.Line())
		} else {
			if !sc.ScanLines() {
				return nil
			}
			run := sc.Line()
			if len(p.cur.data) > 0 && len(p.cur.data)+len(run) >= cap(p.cur.data) {
				p.send(false)
			}
			p.cur.addLines(run)
		}
		if len(p.cur.data) >= batchBytes {
			p.send(false)
			if p.o.Progress != nil {
				p.o.Progress.Store(sc.Bytes)
			}
		}
	}
}

// endStream finishes the model after the last batch and says how the
// stream ended.
func (m *Model) endStream(o *StreamOptions, sc *logfmt.Scanner, err error, stopped bool, bug *error) error {
	var lines int64
	func() {
		defer func() {
			if r := recover(); r != nil && bug == nil {
				e := fmt.Errorf("internal error reading the log, please report it: %v", r)
				bug = &e
			}
		}()
		o.Lock.Lock()
		defer o.Lock.Unlock()
		m.Counts.Overlong = int64(sc.Overlong)
		if err != nil {
			m.InputCut = true
		}
		lines = m.Counts.Lines
		if !stopped && bug == nil {
			m.Finish()
		}
		m.Version++
	}()
	if o.OnBatch != nil {
		o.OnBatch()
	}
	if m.columnBytes()+m.frames.size()+m.stacks.Size() >= 16*releaseBytes {
		// The batches are garbage now: hand their memory back before
		// the caller's own work on a large model (the report's passes)
		// adds to it, at the GOGC restored above.
		debug.FreeOSMemory()
	}
	switch {
	case bug != nil:
		return *bug
	case errors.Is(err, ErrNotLog):
		return err
	case err != nil && lines == 0:
		return fmt.Errorf("read the log: %w", err)
	case err != nil:
		return fmt.Errorf("read the log: stopped after line %d (byte %d of its text): %w", lines, sc.Bytes, err)
	}
	return nil
}

type nopLock struct{}

func (nopLock) Lock()   {}
func (nopLock) Unlock() {}

// ReadAll is Stream without a viewer: read r to its end.
func (m *Model) ReadAll(r io.Reader) error { return m.Stream(r, StreamOptions{}) }

// Finish marks the end of the log: unfreed allocations become leaks, and an
// unordered log is re-matched by time.
func (m *Model) Finish() {
	m.assignStack(true)
	if m.OutOfOrder {
		m.rematch()
	}
	m.markOverlaps()
	m.trim()
	m.Done = true
	m.Version++
}

// Follower wraps a growing file for live mode: at its end it waits Poll and
// reads again, until stop, or until the log's [memtrace] summary line (the
// tracer's last) has been read.
type Follower struct {
	R    io.Reader
	Poll time.Duration
}

func (f *Follower) Read(p []byte) (int, error) { return f.R.Read(p) }

// endsAtSummary is implemented by followed sources that only the log's own
// last line can end (a file); a stream ends when it is closed.
type endsAtSummary interface{ endsAtSummary() }

func (f *Follower) endsAtSummary() {}

// Wait sleeps one poll interval.
func (f *Follower) Wait(stop <-chan struct{}) bool {
	d := f.Poll
	if d <= 0 {
		d = 250 * time.Millisecond
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// StreamReader adapts a blocking stream (stdin, a TCP connection) for live
// mode: a goroutine reads chunks; Read returns io.EOF when no chunk is
// waiting, so that what arrived is shown at once.
type StreamReader struct {
	ch    chan []byte
	cur   []byte
	err   error
	ended bool
}

// NewStreamReader starts reading r in the background. Every chunk read is
// also written to tee when tee is not nil (memview -o).
func NewStreamReader(r io.Reader, tee io.Writer) *StreamReader {
	s := &StreamReader{ch: make(chan []byte, 64)}
	go func() {
		defer close(s.ch)
		for {
			buf := make([]byte, 256<<10)
			n, err := r.Read(buf)
			if n > 0 {
				if tee != nil {
					if _, werr := tee.Write(buf[:n]); werr != nil {
						s.err = fmt.Errorf("write the saved copy: %w", werr)
						tee = nil
					}
				}
				s.ch <- buf[:n]
			}
			if err != nil {
				if !errors.Is(err, io.EOF) && s.err == nil {
					s.err = err
				}
				return
			}
		}
	}()
	return s
}

func (s *StreamReader) Read(p []byte) (int, error) {
	if len(s.cur) == 0 {
		select {
		case c, ok := <-s.ch:
			if !ok {
				s.ended = true
				return 0, io.EOF
			}
			s.cur = c
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

// Wait blocks until a chunk arrives or the stream ends.
func (s *StreamReader) Wait(stop <-chan struct{}) bool {
	if s.ended {
		return false
	}
	select {
	case <-stop:
		return false
	case c, ok := <-s.ch:
		if !ok {
			s.ended = true
			return false
		}
		s.cur = c
		return true
	}
}

// Err is the error that ended the stream, other than its normal end.
func (s *StreamReader) Err() error { return s.err }
