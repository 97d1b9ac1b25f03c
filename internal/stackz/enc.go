package stackz

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/huff0"
)

// Ref places a stack's text in a WriteParts' text at Off. Text must not
// change once given: a stack is given as the same slice each time, which
// is how the encoder knows it is the same bytes without reading them.
type Ref struct {
	Off  int
	ID   uint64
	Text []byte
}

const (
	maxBlock    = 128 << 10 // RFC 8878's largest block
	minMatch    = 4
	minNewMatch = 8
	hashLog     = 15
	magic       = 0xFD2FB528
)

// Encoder writes one zstd frame to w. It is not safe for concurrent use.
type Encoder struct {
	w        io.Writer
	window   int64
	blockMax int

	pos int64 // the content's length so far

	// The plain text (all but the stacks' texts) of the window: hist
	// holds plain bytes from plainBase on, runs maps them to their
	// places in the content.
	hist      []byte
	plainBase int64
	runs      []run
	table     []int64 // hash of 5 plain bytes → plain position + 1
	tabs      []int64 // and its content position

	items []item // the content not yet in blocks
	pend  int    // its length
	last  map[uint64]copyAt

	reps       [3]uint32
	seqs       []sequence
	lits       []byte
	litRun     uint32 // literals since the last sequence
	huf        huff0.Scratch
	ll, of, ml fseTable
	llc, ofc   []uint8
	mlc        []uint8
	block, out []byte
	raw        []byte
	xx         *xxhash.Digest
	started    bool
	err        error
	Stats      Stats
}

// Stats are the encoder's counts so far (for measurement).
type Stats struct {
	Sequences, Literals, StackMatches, StackLiterals int64
}

type run struct{ pp, abs int64 } // plain position pp is at content position abs, and on to the next run

type item struct {
	abs  int64
	n    int
	pp   int64  // plain: its first plain position; stack: -1
	text []byte // stack
	id   uint64
}

type copyAt struct {
	abs  int64
	text []byte
}

type sequence struct {
	ll, ml, offBase uint32 // ml: the match's length
}

// NewEncoder writes a frame whose window is window bytes (a power of two
// of at least 1 KiB, at most 1 GiB).
func NewEncoder(w io.Writer, window int) (*Encoder, error) {
	if window < 1<<10 || window > 1<<30 || window&(window-1) != 0 {
		return nil, fmt.Errorf("stackz: window %d is not a power of two from 1 KiB to 1 GiB", window)
	}
	e := &Encoder{w: w, window: int64(window), blockMax: min(window, maxBlock), last: map[uint64]copyAt{},
		table: make([]int64, 1<<hashLog), tabs: make([]int64, 1<<hashLog), reps: [3]uint32{1, 4, 8}, xx: xxhash.New()}
	e.huf.WantLogLess = 4
	return e, nil
}

// Write adds text.
func (e *Encoder) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	e.addPlain(p)
	return len(p), e.err
}

// WriteParts adds text with the stacks' texts of refs (in order of Off)
// in their places.
func (e *Encoder) WriteParts(text []byte, refs []Ref) error {
	at := 0
	for _, r := range refs {
		if e.err != nil {
			return e.err
		}
		if r.Off < at || r.Off > len(text) {
			return errors.New("stackz: refs out of order")
		}
		e.addPlain(text[at:r.Off])
		at = r.Off
		e.addStack(r.ID, r.Text)
	}
	e.addPlain(text[at:])
	return e.err
}

func (e *Encoder) addPlain(p []byte) {
	if len(p) == 0 {
		return
	}
	e.xx.Write(p)
	for len(p) > 0 && e.err == nil {
		n := min(e.blockMax-e.pend, len(p))
		e.makeRoom(n)
		pp := e.plainBase + int64(len(e.hist))
		if k := len(e.runs); k == 0 || e.runs[k-1].abs+(pp-e.runs[k-1].pp) != e.pos {
			e.runs = append(e.runs, run{pp: pp, abs: e.pos})
		}
		e.hist = append(e.hist, p[:n]...)
		if k := len(e.items); k > 0 && e.items[k-1].pp >= 0 && e.items[k-1].abs+int64(e.items[k-1].n) == e.pos {
			e.items[k-1].n += n
		} else {
			e.items = append(e.items, item{abs: e.pos, n: n, pp: pp})
		}
		e.pos += int64(n)
		e.pend += n
		p = p[n:]
		if e.pend == e.blockMax {
			e.encode(false)
		}
	}
}

func (e *Encoder) addStack(id uint64, text []byte) {
	if len(text) == 0 {
		return
	}
	if len(text) > e.blockMax {
		e.addPlain(text)
		return
	}
	if e.pend+len(text) > e.blockMax {
		e.encode(false)
		if e.err != nil {
			return
		}
	}
	e.xx.Write(text)
	e.items = append(e.items, item{abs: e.pos, n: len(text), pp: -1, text: text, id: id})
	e.pos += int64(len(text))
	e.pend += len(text)
	if e.pend == e.blockMax {
		e.encode(false)
	}
}

// makeRoom drops plain text older than the window before n more bytes.
func (e *Encoder) makeRoom(n int) {
	if len(e.hist)+n <= cap(e.hist) {
		return
	}
	// The oldest plain byte a match may still use.
	keep := e.plainAtOrAfter(e.pos - int64(e.pend) - e.window)
	drop := int(keep - e.plainBase)
	if drop > 0 && len(e.hist)-drop+n <= cap(e.hist) && cap(e.hist) >= int(e.window) {
		k := copy(e.hist, e.hist[drop:])
		e.hist = e.hist[:k]
	} else {
		nh := make([]byte, 0, max(2*len(e.hist)+n, 1<<16))
		e.hist = append(nh, e.hist[drop:]...)
	}
	e.plainBase = keep
	r := sort.Search(len(e.runs), func(i int) bool { return e.runs[i].pp > keep }) - 1
	if r > 0 {
		e.runs = append(e.runs[:0], e.runs[r:]...)
	}
}

// plainAtOrAfter is the first plain position at content position abs or
// later (the end of the plain text when none).
func (e *Encoder) plainAtOrAfter(abs int64) int64 {
	end := e.plainBase + int64(len(e.hist))
	r := sort.Search(len(e.runs), func(i int) bool { return e.runs[i].abs > abs }) - 1
	if r < 0 {
		if len(e.runs) > 0 {
			return max(e.runs[0].pp, e.plainBase)
		}
		return end
	}
	rend := end
	if r+1 < len(e.runs) {
		rend = e.runs[r+1].pp
	}
	pp := e.runs[r].pp + (abs - e.runs[r].abs)
	if pp >= rend {
		return rend
	}
	return max(pp, e.plainBase)
}

// runOf finds plain position pp's run: pp's content position, and the
// plain positions where its run starts and ends.
func (e *Encoder) runOf(pp int64) (abs, start, end int64) {
	r := sort.Search(len(e.runs), func(i int) bool { return e.runs[i].pp > pp }) - 1
	end = e.plainBase + int64(len(e.hist))
	if r+1 < len(e.runs) {
		end = e.runs[r+1].pp
	}
	return e.runs[r].abs + (pp - e.runs[r].pp), e.runs[r].pp, end
}

// plainAt is the plain position at content position abs and the end of
// its run, or -1 when abs is in a stack's text or out of the window.
func (e *Encoder) plainAt(abs int64) (pp, end int64) {
	r := sort.Search(len(e.runs), func(i int) bool { return e.runs[i].abs > abs }) - 1
	if r < 0 {
		return -1, 0
	}
	end = e.plainBase + int64(len(e.hist))
	if r+1 < len(e.runs) {
		end = e.runs[r+1].pp
	}
	pp = e.runs[r].pp + (abs - e.runs[r].abs)
	if pp >= end || pp < e.plainBase {
		return -1, 0
	}
	return pp, end
}

// Flush ends a block with what was written so far and writes out the
// compressed bytes.
func (e *Encoder) Flush() error {
	if e.err != nil {
		return e.err
	}
	e.header()
	if e.pend > 0 {
		e.encode(false)
	}
	e.writeOut()
	return e.err
}

// Close ends the frame (its last block and checksum). It does not close w.
func (e *Encoder) Close() error {
	if e.err != nil {
		return e.err
	}
	e.header()
	e.encode(true)
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], uint32(e.xx.Sum64()))
	e.out = append(e.out, sum[:]...)
	e.writeOut()
	if e.err == nil {
		e.err = errClosed
		return nil
	}
	return e.err
}

var errClosed = errors.New("stackz: the encoder is closed")

func (e *Encoder) header() {
	if e.started {
		return
	}
	e.started = true
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

// encode puts the pending content into one block.
func (e *Encoder) encode(last bool) {
	e.header()
	saved := e.reps
	e.parse()
	e.block = e.compressBlock(e.block[:0], e.pend)
	if e.block == nil || len(e.block) >= e.pend {
		// Not worth it: the decoder's offsets and tables stay as they were.
		e.reps = saved
		e.huf.Reuse = huff0.ReusePolicyNone
		e.raw = e.raw[:0]
		for _, it := range e.items {
			if it.pp >= 0 {
				e.raw = append(e.raw, e.hist[it.pp-e.plainBase:it.pp-e.plainBase+int64(it.n)]...)
			} else {
				e.raw = append(e.raw, it.text...)
			}
		}
		e.out = appendBlockHeader(e.out, last, 0, len(e.raw))
		e.out = append(e.out, e.raw...)
	} else {
		e.out = appendBlockHeader(e.out, last, 2, len(e.block))
		e.out = append(e.out, e.block...)
	}
	for _, it := range e.items {
		if it.pp < 0 {
			e.last[it.id] = copyAt{abs: it.abs, text: it.text}
		}
	}
	e.items = e.items[:0]
	e.pend = 0
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

func load32(b []byte, i int64) uint32 { return binary.LittleEndian.Uint32(b[i:]) }

func hash5(b []byte, i int64) uint32 {
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

func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// parse finds the block's sequences: a stack's text is a match to its
// last copy when that is in the window (the same slice: the same bytes,
// not read), the plain text is searched (repeat offsets, then a hash of
// earlier plain text), each match within one run of plain text.
func (e *Encoder) parse() {
	e.seqs = e.seqs[:0]
	e.lits = e.lits[:0]
	e.litRun = 0
	pending := map[uint64]copyAt(nil)
	for _, it := range e.items {
		if it.pp < 0 {
			c, ok := e.last[it.id]
			if p, seen := pending[it.id]; seen {
				c, ok = p, true
			}
			if ok && sameSlice(c.text, it.text) && it.abs-c.abs <= e.window {
				e.emit(uint32(it.abs-c.abs), uint32(it.n))
				e.Stats.StackMatches++
			} else {
				e.lits = append(e.lits, it.text...)
				e.litRun += uint32(it.n)
				e.Stats.StackLiterals++
			}
			if pending == nil {
				pending = map[uint64]copyAt{}
			}
			pending[it.id] = copyAt{abs: it.abs, text: it.text}
			continue
		}
		e.parsePlain(it)
	}
	e.Stats.Sequences += int64(len(e.seqs))
	e.Stats.Literals += int64(len(e.lits))
}

func (e *Encoder) parsePlain(it item) {
	h := e.hist
	base := e.plainBase
	start := it.pp
	end := it.pp + int64(it.n)
	hend := base + int64(len(h)) // loads of 8 bytes stay inside hist
	i, litStart := start, start
	// Where each repeat offset points from i, moved along with i and
	// found again after each match.
	var rp, rend [3]int64
	findReps := func() {
		for k, r := range e.reps {
			rp[k], rend[k] = e.plainAt(it.abs + (i - start) - int64(r))
		}
	}
	findReps()
	for i+minMatch <= end {
		abs := it.abs + (i - start)
		var c, cend int64 = -1, 0
		need := minMatch
		for k := range rp {
			if rp[k] >= 0 && rend[k]-rp[k] >= minMatch && load32(h, rp[k]-base) == load32(h, i-base) {
				c, cend = rp[k], rend[k]
				break
			}
		}
		if c < 0 && i+8 <= hend {
			hv := hash5(h, i-base)
			cand, candAbs := e.table[hv]-1, e.tabs[hv]
			e.table[hv], e.tabs[hv] = i+1, abs
			if cand >= base && cand < i && abs-candAbs <= e.window && load32(h, cand-base) == load32(h, i-base) {
				c, need = cand, minNewMatch
				_, _, cend = e.runOf(c)
			}
		}
		if c < 0 {
			i++
			for k := range rp {
				if rp[k] >= 0 {
					if rp[k]++; rp[k] >= rend[k] {
						rp[k] = -1
					}
				}
			}
			continue
		}
		n := int64(matchLen(h[c-base:cend-base], h[i-base:end-base]))
		i0, c0 := i, c
		cabs, crun, _ := e.runOf(c)
		for i > litStart && c > crun && c > base && h[i-1-base] == h[c-1-base] {
			i--
			c--
			n++
		}
		if n < int64(need) {
			i = i0 + 1
			for k := range rp {
				if rp[k] >= 0 {
					if rp[k]++; rp[k] >= rend[k] {
						rp[k] = -1
					}
				}
			}
			continue
		}
		e.lits = append(e.lits, h[litStart-base:i-base]...)
		e.litRun += uint32(i - litStart)
		e.emit(uint32(it.abs+(i-start)-(cabs-(c0-c))), uint32(n))
		i += n
		litStart = i
		findReps()
	}
	e.lits = append(e.lits, h[litStart-base:end-base]...)
	e.litRun += uint32(end - litStart)
}

func (e *Encoder) emit(off, ml uint32) {
	ll := e.litRun
	e.litRun = 0
	r := &e.reps
	if ll == 0 && len(e.seqs) > 0 && off == r[0] {
		// Straight on from the last match at its offset.
		e.seqs[len(e.seqs)-1].ml += ml
		return
	}
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
	e.seqs = append(e.seqs, sequence{ll: ll, ml: ml, offBase: ob})
}
