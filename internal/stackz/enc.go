package stackz

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/huff0"
)

// Mark says that p[Off:Off+Len] of a WriteMarked is the text of stack ID,
// the same bytes at every copy (the encoder checks them all the same).
type Mark struct {
	Off, Len int
	ID       uint64
	// Text, when not nil, is the slice the stack's text was copied from,
	// never changed once given: a copy given from the same slice as the
	// last one is known equal to it without being compared.
	Text []byte
}

// MarkedWriter takes text with its stacks marked: the agent's logs and
// what wraps them.
type MarkedWriter interface {
	WriteMarked(p []byte, marks []Mark) error
}

// SparseWriter takes text without its stacks' texts: each mark's Text
// belongs before p[Off] (its Len is len(Text)), so that the writer, not
// the caller, copies it where it goes. The agent's texts then cross no
// buffer on their way to the encoder's history, and no CPU's cache to
// another's when the encoder runs on another goroutine.
type SparseWriter interface {
	WriteSparse(p []byte, marks []Mark) error
	// TakesSparse says whether the texts stay apart down to the
	// encoder: a wrapper of a writer of whole text says false (it would
	// Expand them, a copy the caller can make as cheaply).
	TakesSparse() bool
}

// ConcurrentWriter may use a goroutine of its own from a Concurrent call
// on: once the traced program is gone, its CPU is free, while before a
// second busy goroutine takes the CPU the program needs.
type ConcurrentWriter interface {
	Concurrent()
}

// ErrSparseMarks refuses sparse marks that are not in order within p.
var ErrSparseMarks = errors.New("stackz: sparse marks out of order or outside the text")

// checkSparse checks marks as WriteSparse takes them and returns the
// length of the text they stand for with p.
func checkSparse(p []byte, marks []Mark) (int, error) {
	n, prev := len(p), 0
	for _, m := range marks {
		if m.Off < prev || m.Off > len(p) {
			return 0, ErrSparseMarks
		}
		prev = m.Off
		n += len(m.Text)
	}
	return n, nil
}

// Expand appends to dst the text that p and its sparse marks stand for,
// for a writer that takes whole text.
func Expand(dst, p []byte, marks []Mark) ([]byte, error) {
	if _, err := checkSparse(p, marks); err != nil {
		return dst, err
	}
	prev := 0
	for _, m := range marks {
		dst = append(dst, p[prev:m.Off]...)
		dst = append(dst, m.Text...)
		prev = m.Off
	}
	return append(dst, p[prev:]...), nil
}

// histWindows is how many windows the history holds before the last
// window is copied down to its start: each copy is a window's worth of
// memmove, so the fewer the better, at a window of memory each; with two,
// the copies cost more than a smaller history saves, from four on, little
// more is saved.
const histWindows = 4

const (
	maxBlock    = 128 << 10 // RFC 8878's largest block
	minMatch    = 4
	minNewMatch = 6
	hashLog     = 12
	magic       = 0xFD2FB528
)

// Encoder writes one zstd frame to w. It is not safe for concurrent use.
type Encoder struct {
	w        io.Writer
	window   int64
	blockMax int // RFC 8878: the window or 128 KiB, the smaller

	hist     []byte // the text from histBase: the window and what waits
	histBase int64
	done     int64 // absolute: the text before it is in blocks

	marks []mark // of the text not yet in blocks
	last  map[uint64]*copyAt
	// dense holds the stacks whose IDs are below denseIDs (the
	// preload converter numbers its stacks from 1) instead of last:
	// an index instead of a hash lookup for each copy. nlast counts
	// the stacks in both.
	dense []*copyAt
	nlast int
	// sweepAt is the count of stacks at which they are swept.
	sweepAt int
	table   []uint32 // hash of 5 bytes → the last absolute position with it (its low 32 bits)
	mi      int      // parse: the first mark not behind it

	reps       [3]uint32
	seqs       []sequence
	lits       []byte
	huf        huff0.Scratch
	hufBlocks  int // the blocks whose literals were Huffman-coded
	ll, of, ml fseTable
	llc, ofc   []uint8
	mlc        []uint8
	block, out []byte
	xx         *xxhash.Digest
	// be, when not nil, is the back end (Concurrent): an encoder of
	// its own that hashes, codes and writes each block parsed here,
	// on its goroutine; jobs go to it, free come back, pending counts
	// the jobs sent and not yet written, whose text the history must
	// keep where it is; failed says be.err is set. cur gathers the
	// blocks of the next job.
	be          *Encoder
	jobs        chan *job
	free        chan *job
	cur         *job
	pending     sync.WaitGroup
	beDone      chan struct{}
	failed      atomic.Bool
	headerWrote bool
	marked      bool // a stack's text was marked: find's rule for numbers
	noSkip      bool // tests: find called at every position (skipNum's check)
	err         error
	Stats       Stats
}

type mark struct {
	start, end int64    // absolute
	prev       int64    // the last copy's start, or -1
	same       bool     // given as the same slice as the last copy: the same bytes
	older      [3]int64 // with same, the copies before the last of that slice (-1: none)
}

// sweep forgets the stacks whose last copy is out of the window: no match
// can reach it, and the slice it holds would stay alive for nothing. The
// table then holds at most the stacks of one window, whatever the run.
func (e *Encoder) sweep() {
	old := e.histBase + int64(len(e.hist)) - e.window
	for id, c := range e.last {
		if c.abs < old {
			delete(e.last, id)
			e.nlast--
		}
	}
	for id, c := range e.dense {
		if c != nil && c.abs < old {
			e.dense[id] = nil
			e.nlast--
		}
	}
	e.sweepAt = max(2*e.nlast, minSweep)
}

const minSweep = 4096

// denseIDs bounds the IDs kept in a slice: small enough that its
// pointers cost little memory whatever the IDs below it.
const denseIDs = 1 << 16

// copyAt is where a stack's text was last written, and the slice it was
// given as (held, so that its address is not another text's while kept).
type copyAt struct {
	abs   int64
	text  []byte
	older [3]int64 // the copies of the same slice before it
}

type sequence struct {
	ll, ml, offBase uint32 // ml: the match's length
	off             uint32 // the offset itself, for a back end's repeat codes
}

// job is parsed blocks for the back end, several at a time: each hand-off
// between the goroutines may cost a wake-up of the other's thread, and a
// wake-up on a VM costs as much as coding a small block.
type job struct {
	blocks []parsed
}

// parsed is a block parsed: its sequences, literals and text.
type parsed struct {
	seqs []sequence
	lits []byte
	src  []byte
	last bool
}

// jobBlocks is how many blocks a job carries at most.
const jobBlocks = 8

// NewEncoder writes a frame whose window is window bytes (a power of two
// of at least 1 KiB, at most 1 GiB).
func NewEncoder(w io.Writer, window int) (*Encoder, error) {
	if window < 1<<10 || window > 1<<30 || window&(window-1) != 0 {
		return nil, fmt.Errorf("stackz: window %d is not a power of two from 1 KiB to 1 GiB", window)
	}
	e := &Encoder{w: w, window: int64(window), last: map[uint64]*copyAt{}, sweepAt: minSweep, table: make([]uint32, 1<<hashLog),
		reps: [3]uint32{1, 4, 8}, xx: xxhash.New(), blockMax: min(window, maxBlock)}
	e.huf.WantLogLess = 4
	return e, nil
}

// Write adds text.
func (e *Encoder) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	e.add(p)
	return len(p), e.err
}

// WriteMarked adds p, of which marks name stacks' texts (in order, not
// overlapping).
func (e *Encoder) WriteMarked(p []byte, marks []Mark) error {
	if e.err != nil {
		return e.err
	}
	at := e.histBase + int64(len(e.hist))
	next := 0 // marks are taken in order, not overlapping
	for _, m := range marks {
		if m.Off < next || m.Len <= 0 || m.Off+m.Len > len(p) {
			continue
		}
		next = m.Off + m.Len
		e.mark(at+int64(m.Off), m)
	}
	e.add(p)
	return e.err
}

// WriteSparse adds p with the stacks' texts its marks put in it
// (SparseWriter): the same text, and the same frame, as WriteMarked of
// the text Expand makes, without that copy.
func (e *Encoder) WriteSparse(p []byte, marks []Mark) error {
	if e.err != nil {
		return e.err
	}
	if _, err := checkSparse(p, marks); err != nil {
		return err
	}
	at := e.histBase + int64(len(e.hist))
	in := 0 // the texts' bytes before the mark
	for _, m := range marks {
		if len(m.Text) == 0 {
			continue
		}
		m.Len = len(m.Text)
		e.mark(at+int64(m.Off+in), m)
		in += m.Len
	}
	prev := 0
	for _, m := range marks {
		e.add(p[prev:m.Off])
		e.add(m.Text)
		prev = m.Off
	}
	e.add(p[prev:])
	return e.err
}

// Concurrent moves the checksum, the entropy coding and the writing of
// each block to a goroutine of its own from now on (ConcurrentWriter):
// at a run's end the CPU that formats the log has time the encoder's
// has not; the parse, the most of the work, stays here.
func (e *Encoder) Concurrent() {
	if e.be != nil || e.err != nil {
		return
	}
	e.header()
	// The back end takes over what codes and writes blocks: the
	// decoder's repeat offsets (the parse here keeps its own guess of
	// them), the Huffman and FSE tables, the checksum, the output.
	// Its Huffman table starts afresh: the next block's literals
	// carry a new one.
	be := &Encoder{w: e.w, out: e.out, xx: e.xx, reps: e.reps, headerWrote: true}
	be.huf.WantLogLess = e.huf.WantLogLess
	e.out, e.xx = nil, nil
	e.be = be
	e.jobs, e.free, e.beDone = make(chan *job, 1), make(chan *job, 2), make(chan struct{})
	e.free <- &job{}
	e.free <- &job{}
	go func() {
		defer close(e.beDone)
		for j := range e.jobs {
			for i := range j.blocks {
				if b := &j.blocks[i]; be.err == nil {
					be.seqs, be.lits = b.seqs, b.lits
					be.codeBlock(b.src, b.last)
					if be.err != nil {
						e.failed.Store(true)
					}
				}
			}
			e.free <- j
			e.pending.Done()
		}
	}()
}

// send hands the blocks gathered so far to the back end.
func (e *Encoder) send() {
	if e.cur == nil || len(e.cur.blocks) == 0 {
		return
	}
	e.pending.Add(1)
	e.jobs <- e.cur
	e.cur = nil
	if e.failed.Load() {
		e.wait()
	}
}

// wait waits for the back end to write what it was sent and what waits
// to be, and takes its error.
func (e *Encoder) wait() {
	if e.be == nil {
		return
	}
	e.send()
	e.pending.Wait()
	if e.err == nil && e.be.err != nil {
		e.err = e.be.err
	}
}

// stopBack ends the back end's goroutine once it has written what it was
// sent.
func (e *Encoder) stopBack() {
	if e.be != nil && e.jobs != nil {
		e.wait()
		close(e.jobs)
		<-e.beDone
		e.jobs = nil
	}
}

// TakesSparse is true: the encoder copies the texts into its history.
func (e *Encoder) TakesSparse() bool { return true }

// mark notes that the text from start is m's stack's.
func (e *Encoder) mark(start int64, m Mark) {
	var c *copyAt
	if m.ID < denseIDs {
		if m.ID < uint64(len(e.dense)) {
			c = e.dense[m.ID]
		}
	} else {
		c = e.last[m.ID]
	}
	mk := mark{start: start, end: start + int64(m.Len), prev: -1, older: [3]int64{-1, -1, -1}}
	if c == nil {
		c = &copyAt{}
		if m.ID < denseIDs {
			if m.ID >= uint64(len(e.dense)) {
				e.dense = append(e.dense, make([]*copyAt, int(m.ID)+1-len(e.dense))...)
			}
			e.dense[m.ID] = c
		} else {
			e.last[m.ID] = c
		}
		e.nlast++
	} else {
		mk.prev = c.abs
		mk.same = m.Text != nil && len(m.Text) == m.Len && len(c.text) == m.Len &&
			unsafe.SliceData(c.text) == unsafe.SliceData(m.Text)
	}
	if mk.same {
		mk.older = c.older
		c.older = [3]int64{c.abs, c.older[0], c.older[1]}
	} else {
		c.older = [3]int64{-1, -1, -1}
	}
	// Updated in place: a copy of a known stack costs a lookup only.
	c.abs, c.text = start, m.Text
	if e.nlast > e.sweepAt {
		e.sweep()
	}
	e.marks = append(e.marks, mk)
	e.marked = true
}

// add copies p into the history, encoding each block it fills; the
// checksum hashes a block's text when it is encoded (one call for the
// block, whatever the pieces it came in).
func (e *Encoder) add(p []byte) {
	for len(p) > 0 && e.err == nil {
		room := e.blockMax - int(e.histBase+int64(len(e.hist))-e.done)
		n := min(room, len(p))
		e.makeRoom(n)
		e.hist = append(e.hist, p[:n]...)
		p = p[n:]
		if e.histBase+int64(len(e.hist))-e.done == int64(e.blockMax) {
			e.encode(false)
		}
	}
}

// makeRoom drops history older than the window before n more bytes come.
func (e *Encoder) makeRoom(n int) {
	if len(e.hist)+n <= cap(e.hist) {
		return
	}
	keep := e.done - e.window
	if keep < e.histBase {
		keep = e.histBase
	}
	if keep > e.histBase && int64(len(e.hist))-(keep-e.histBase)+int64(n) <= int64(cap(e.hist)) {
		// The copy overwrites the oldest text, which may not be
		// hashed yet.
		e.wait()
		k := copy(e.hist, e.hist[keep-e.histBase:])
		e.hist = e.hist[:k]
		e.histBase = keep
		return
	}
	nh := make([]byte, 0, histWindows*int(e.window)+2*maxBlock)
	nh = append(nh, e.hist[keep-e.histBase:]...)
	e.hist = nh
	e.histBase = keep
}

// Flush ends a block with what was written so far and writes out the
// compressed bytes.
func (e *Encoder) Flush() error {
	if e.err != nil {
		return e.err
	}
	e.header()
	if e.histBase+int64(len(e.hist)) > e.done {
		e.encode(false)
	}
	if e.be != nil {
		e.wait()
		if e.err == nil {
			e.be.writeOut()
			e.err = e.be.err
		}
		return e.err
	}
	e.writeOut()
	return e.err
}

// Close ends the frame (its last block and checksum). It does not close w.
func (e *Encoder) Close() error {
	if e.err != nil {
		e.stopBack()
		return e.err
	}
	e.header()
	e.encode(true)
	e.stopBack()
	w := e
	if e.be != nil {
		w = e.be
	}
	if e.err == nil {
		var sum [4]byte
		binary.LittleEndian.PutUint32(sum[:], uint32(w.xx.Sum64()))
		w.out = append(w.out, sum[:]...)
		w.writeOut()
		e.err = w.err
	}
	if e.err == nil {
		e.err = errClosed
		return nil
	}
	return e.err
}

var errClosed = errors.New("stackz: the encoder is closed")

func (e *Encoder) header() {
	if e.headerWrote {
		return
	}
	e.headerWrote = true
	var h [6]byte
	binary.LittleEndian.PutUint32(h[:], magic)
	h[4] = 1 << 2 // a content checksum; no size, not a single segment
	h[5] = uint8(bits.Len64(uint64(e.window))-1-10) << 3
	e.out = append(e.out, h[:]...)
}

func (e *Encoder) writeOut() {
	if len(e.out) == 0 || e.err != nil {
		return
	}
	_, e.err = e.w.Write(e.out)
	e.out = e.out[:0]
}

// encode puts the text not yet in blocks into one block.
func (e *Encoder) encode(last bool) {
	e.header()
	start := int(e.done - e.histBase)
	src := e.hist[start:]
	if e.be == nil {
		saved := e.reps
		e.parse(start)
		e.reps = saved
		e.codeBlock(src, last)
	} else {
		e.parse(start)
		if e.cur == nil {
			e.cur = <-e.free
			e.cur.blocks = e.cur.blocks[:0]
		}
		j := e.cur
		if len(j.blocks) < cap(j.blocks) {
			j.blocks = j.blocks[:len(j.blocks)+1]
		} else {
			j.blocks = append(j.blocks, parsed{})
		}
		b := &j.blocks[len(j.blocks)-1]
		b.seqs, e.seqs = e.seqs, b.seqs[:0]
		b.lits, e.lits = e.lits, b.lits[:0]
		b.src, b.last = src, last
		if len(j.blocks) >= jobBlocks || last {
			e.send()
		}
	}
	e.done = e.histBase + int64(len(e.hist))
	k := 0
	for _, m := range e.marks {
		if m.end > e.done {
			e.marks[k] = m
			k++
		}
	}
	e.marks = e.marks[:k]
}

// codeBlock hashes a parsed block's text, makes its sequences' repeat
// codes from the offsets e.reps holds (the decoder's), and writes the
// block compressed, or raw where that is not smaller.
func (e *Encoder) codeBlock(src []byte, last bool) {
	e.xx.Write(src)
	saved := e.reps
	for i := range e.seqs {
		sq := &e.seqs[i]
		sq.offBase = repCode(&e.reps, sq.ll, sq.off)
	}
	e.block = e.compressBlock(e.block[:0], len(src))
	if e.block == nil || len(e.block) >= len(src) {
		// Not worth it: the decoder's offsets and tables stay as they were.
		e.reps = saved
		e.huf.Reuse = huff0.ReusePolicyNone
		e.out = appendBlockHeader(e.out, last, 0, len(src))
		e.out = append(e.out, src...)
	} else {
		e.out = appendBlockHeader(e.out, last, 2, len(e.block))
		e.out = append(e.out, e.block...)
	}
	if len(e.out) >= 64<<10 {
		e.writeOut()
	}
}

func appendBlockHeader(out []byte, last bool, typ, size int) []byte {
	v := uint32(size)<<3 | uint32(typ)<<1
	if last {
		v |= 1
	}
	return append(out, byte(v), byte(v>>8), byte(v>>16))
}

func load32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[i:]) }

func load64(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }

func hash5(b []byte, i int) uint32 {
	v := binary.LittleEndian.Uint64(b[i:]) << 24
	return uint32((v * 0xcf1bbcdcb7a56463) >> (64 - hashLog))
}

// matchLen is how many bytes from a and b are equal.
func matchLen(a, b []byte) int {
	n := 0
	for len(a) >= 8 && len(b) >= 8 {
		x := binary.LittleEndian.Uint64(a) ^ binary.LittleEndian.Uint64(b)
		if x != 0 {
			return n + bits.TrailingZeros64(x)>>3
		}
		n += 8
		a, b = a[8:], b[8:]
	}
	for i := 0; i < len(a) && i < len(b) && a[i] == b[i]; i++ {
		n++
	}
	return n
}

// parse finds the block's sequences. At a stack's text the match is its
// last copy, found without a search. Elsewhere (the event lines) it
// searches as zstd's lazy levels do: the repeat offsets, then a hash chain
// of earlier positions, keeping the longest, and looks one byte ahead for
// a longer one before it takes a short match at a new offset (one at a
// repeat offset is the log's loop a period back, which a byte later
// seldom beats: the look costs a search per match and saves next to
// nothing). A searched match stops at the next stack's text, which its
// own last copy covers whole.
func (e *Encoder) parse(start int) {
	h := e.hist
	end := len(h)
	e.seqs = e.seqs[:0]
	e.lits = e.lits[:0]
	e.mi = 0
	i, litStart := start, start
	for i+8 <= end {
		if i = e.skipNum(i, end); i+8 > end {
			break
		}
		c, n := e.find(i, end, litStart)
		if n == 0 {
			i++
			continue
		}
		if n < lazyBelow && i+9 <= end && e.explicit(i, c) {
			if c2, n2 := e.find(i+1, end, litStart); n2 > n+1 {
				i, c, n = i+1, c2, n2
			}
		}
		if e.explicit(i, c) && n < lazyBelow && e.repReaches(i, n) {
			// A new offset costs more than a few literals before a
			// repeat offset that reaches as far: it would also push
			// the period of the log's loop out of the repeats.
			for k := 1; k <= 3 && i+k+8 <= end; k++ {
				if c2, n2 := e.repAt(i+k, end); n2 > 0 && i+k+n2 >= i+n {
					i, c, n = i+k, c2, n2
					break
				}
			}
		}
		// Backward into the literals.
		for i > litStart && c > 0 && h[i-1] == h[c-1] {
			i--
			c--
			n++
		}
		e.emit(h[litStart:i], uint32(i-c), uint32(n))
		i += n
		litStart = i
	}
	e.lits = append(e.lits, h[litStart:end]...)
	e.Stats.Sequences += int64(len(e.seqs))
	e.Stats.Literals += int64(len(e.lits))
}

// skipNum is the first position from i at which find may match: it
// passes over the digits of an event line's numbers where no repeat
// offset holds the next 4 bytes, at which find would search nothing
// (no hash inside a number) and return no match. Most of an event
// line's positions are such digits (the log's loop a period back
// differs in its numbers), and a call of find for each costs several
// times this loop's step. The frame is the same as without it.
func (e *Encoder) skipNum(i, end int) int {
	if !e.marked || i == 0 || e.noSkip {
		return i
	}
	h := e.hist
	stop := end - 8 // parse's last position
	abs := e.histBase + int64(i)
	for mi := e.mi; mi < len(e.marks); mi++ {
		if m := &e.marks[mi]; m.end > abs {
			if m.start <= abs {
				return i // a stack's text: find's own rules
			}
			stop = min(stop, int(m.start-e.histBase)-1)
			break
		}
	}
	r0, r1, r2 := int(e.reps[0]), int(e.reps[1]), int(e.reps[2])
	w := int(e.window)
	j := i
	for ; j <= stop; j++ {
		if !isHex(h[j-1]) || !isHex(h[j]) {
			break
		}
		v := load32(h, j)
		if j >= r0 && r0 <= w && load32(h, j-r0) == v ||
			j >= r1 && r1 <= w && load32(h, j-r1) == v ||
			j >= r2 && r2 <= w && load32(h, j-r2) == v {
			break
		}
	}
	e.Stats.Skipped += int64(j - i)
	return j
}

// explicit: a match at i from c needs an offset of its own.
func (e *Encoder) explicit(i, c int) bool {
	off := uint32(i - c)
	return off != e.reps[0] && off != e.reps[1] && off != e.reps[2]
}

// repReaches: some repeat offset holds the last 4 bytes of the n from i,
// as one that replaces a match from i within 3 bytes must (and a match
// shorter than 7 could be replaced by one that does not: those are tried).
func (e *Encoder) repReaches(i, n int) bool {
	if n < 7 {
		return true
	}
	h := e.hist
	at := i + n - 4
	v := load32(h, at)
	for _, r := range e.reps {
		if k := at - int(r); k >= 0 && int64(r) <= e.window && load32(h, k) == v {
			return true
		}
	}
	return false
}

// repAt is the longest repeat-offset match at i (0 length: none), within
// the stacks' limits as find's.
func (e *Encoder) repAt(i, end int) (c, n int) {
	h := e.hist
	limit := end
	abs := e.histBase + int64(i)
	for mi := e.mi; mi < len(e.marks); mi++ {
		if m := &e.marks[mi]; m.end > abs {
			if m.start > abs && m.prev >= 0 {
				limit = min(int(m.start-e.histBase), end)
			}
			break
		}
	}
	c = -1
	for _, r := range e.reps {
		k := i - int(r)
		if k < 0 || int64(r) > e.window || load32(h, k) != load32(h, i) {
			continue
		}
		if l := matchLen(h[k:limit], h[i:limit]); l >= minMatch && l > n {
			c, n = k, l
		}
	}
	return c, n
}

const (
	lazyBelow = 64 // matches shorter than this are the event lines'
	repEnough = 24 // a repeat match this long is taken without a search

)

// find is the match to take at hist index i (0 length: none); i goes
// into the hash table unless a repeat offset already gave a long match.
func (e *Encoder) find(i, end, litStart int) (c, n int) {
	h := e.hist
	base := e.histBase
	abs := base + int64(i)
	for e.mi < len(e.marks) && e.marks[e.mi].end <= abs {
		e.mi++
	}
	limit := end
	if e.mi < len(e.marks) {
		m := &e.marks[e.mi]
		if m.start <= abs && m.prev >= 0 {
			// A repeat offset that holds the rest of the stack's
			// text costs less than the last copy's offset.
			rest := int(m.end - abs)
			k := int(m.prev + (abs - m.start) - base)
			// What follows the text is compared up to the next
			// stack's text, which its own copy covers.
			after := end
			if e.mi+1 < len(e.marks) && e.marks[e.mi+1].prev >= 0 {
				after = max(min(int(e.marks[e.mi+1].start-base), end), min(i+rest, end))
			}
			if m.same && rest <= end-i {
				// Known equal without reading: the last copy, or
				// cheaper, an older one a repeat offset reaches.
				for _, r := range e.reps {
					at := m.start - int64(r)
					if at == m.older[0] || at == m.older[1] || at == m.older[2] {
						if kr := i - int(r); kr >= 0 && int64(r) <= e.window {
							// A text of a byte or two (or its end at
							// a block's start) is too short a match.
							if n := rest + matchLen(h[kr+rest:after], h[i+rest:after]); n >= minMatch {
								e.Stats.MarkMatched++
								return kr, n
							}
						}
					}
				}
			}
			for _, r := range e.reps {
				if m.same {
					break
				}
				// Each byte of the text compared once: a repeat
				// offset is tried only where its last bytes agree.
				if kr := i - int(r); kr != k && kr >= 0 && int64(r) <= e.window && i+rest <= end && rest >= 8 &&
					load64(h, kr) == load64(h, i) && load64(h, kr+rest-8) == load64(h, i+rest-8) {
					if l := matchLen(h[kr:end], h[i:end]); l >= rest {
						e.Stats.MarkMatched++
						return kr, l
					}
				}
			}
			if k >= 0 && k < i && int64(i-k) <= e.window {
				if m.same && rest <= end-i {
					// The same slice: equal to its last copy without
					// reading it; what follows is compared.
					if n := rest + matchLen(h[k+rest:after], h[i+rest:after]); n >= minMatch {
						e.Stats.MarkMatched++
						return k, n
					}
				}
				if l := matchLen(h[k:end], h[i:end]); l >= minMatch {
					e.Stats.MarkMatched++
					return k, l
				}
			}
		}
		if m.start > abs {
			limit = min(int(m.start-base), end)
		}
	}
	// Inside a number of a log with stacks, no search: a match found
	// there is a few digits at a new offset, which costs about what
	// it saves and pushes the loop's period out of the repeat offsets
	// (the log smaller, and the miss on the candidate's line saved;
	// docs/measurements.md has the figures). Without stacks, the
	// offsets are short and a free's address found on its malloc's
	// line pays. Most of an event line's searches are in its numbers:
	// there neither the hash nor its table's entry is read.
	inNum := e.marked && i > 0 && isHex(h[i-1]) && isHex(h[i])
	// Elsewhere the hash candidate's first bytes are read before the
	// repeat offsets' are compared: the miss on an old line then
	// overlaps theirs instead of following them.
	var hv uint32
	ck, first := -1, uint32(0)
	if !inNum {
		hv = hash5(h, i)
		if d := uint32(abs) - e.table[hv]; d != 0 && int64(d) <= e.window && abs-int64(d) >= base {
			ck = int(abs - int64(d) - base)
			first = load32(h, ck)
		}
	}
	// Each candidate is valued as zstd's lazy levels value them: the
	// bits its bytes would cost as literals less what its offset costs.
	bestGain, bestC, bestN := 0, -1, 0
	for ri, r := range e.reps {
		k := i - int(r)
		if k < 0 || int64(r) > e.window || load32(h, k) != load32(h, i) {
			continue
		}
		// A later repeat offset's code costs more: it is taken only
		// if longer, so only if it holds the byte the best one missed.
		if bestN > 0 && (i+bestN >= limit || h[k+bestN] != h[i+bestN]) {
			continue
		}
		l := matchLen(h[k:limit], h[i:limit])
		if g := l*litBits - ri - 1; l >= minMatch && g > bestGain {
			bestGain, bestC, bestN = g, k, l
		}
	}
	if bestN >= repEnough {
		return bestC, bestN
	}
	if inNum {
		if bestC < 0 {
			return 0, 0
		}
		return bestC, bestN
	}
	e.table[hv] = uint32(abs)
	if k := ck; k >= 0 {
		if i+bestN < limit && (bestN == 0 && byte(first) == h[i] || bestN > 0 && h[k+bestN] == h[i+bestN]) {
			l := matchLen(h[k:limit], h[i:limit])
			if g := l*litBits - bits.Len64(uint64(i-k)) - 4; l >= minNewMatch && g > bestGain {
				bestGain, bestC, bestN = g, k, l
			}
		}
	}
	if bestC < 0 {
		return 0, 0
	}
	return bestC, bestN
}

// litBits is about what a literal of an event line costs, in bits.
const litBits = 4

func (e *Encoder) emit(lits []byte, off, ml uint32) {
	e.lits = append(e.lits, lits...)
	ll := uint32(len(lits))
	ob := repCode(&e.reps, ll, off)
	e.seqs = append(e.seqs, sequence{ll: ll, ml: ml, offBase: ob, off: off})
	if ob > 3 {
		e.Stats.Explicit++
	}
}

// repCode is the offset code of a match at off after ll literals, given
// the repeat offsets r, which it updates as the decoder does.
func repCode(r *[3]uint32, ll, off uint32) uint32 {
	var ob uint32
	switch {
	case ll > 0 && off == r[0]:
		ob = 1
	case ll > 0 && off == r[1]:
		ob = 2
		r[0], r[1] = r[1], r[0]
	case ll > 0 && off == r[2]:
		ob = 3
		r[0], r[1], r[2] = r[2], r[0], r[1]
	case ll == 0 && off == r[1]:
		ob = 1
		r[0], r[1] = r[1], r[0]
	case ll == 0 && off == r[2]:
		ob = 2
		r[0], r[1], r[2] = r[2], r[0], r[1]
	case ll == 0 && off == r[0]-1:
		ob = 3
		r[0], r[1], r[2] = off, r[0], r[1]
	default:
		ob = off + 3
		r[0], r[1], r[2] = off, r[0], r[1]
	}
	return ob
}

// Stats are the encoder's counts so far (for measurement).
type Stats struct {
	Sequences, Literals, MarkMatched, Explicit int64
	// Skipped counts the positions skipNum passed over.
	Skipped int64
}

// isHex: c is a digit of a decimal or (lower-case) hexadecimal number.
func isHex(c byte) bool { return c-'0' < 10 || c-'a' < 6 }
