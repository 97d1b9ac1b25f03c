package stackz

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// The zstd code tables of RFC 8878, 3.1.1.3.2.1.
const (
	maxLLCode = 35
	maxMLCode = 52
	maxOFCode = 31
)

var llBits = [maxLLCode + 1]uint8{
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12,
	13, 14, 15, 16}

var llBase = [maxLLCode + 1]uint32{
	0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
	16, 18, 20, 22, 24, 28, 32, 40, 48, 64, 0x80, 0x100, 0x200, 0x400, 0x800, 0x1000,
	0x2000, 0x4000, 0x8000, 0x10000}

var mlBits = [maxMLCode + 1]uint8{
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11,
	12, 13, 14, 15, 16}

// mlBase is each code's first match length less 3.
var mlBase = [maxMLCode + 1]uint32{
	0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
	16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
	32, 34, 36, 38, 40, 44, 48, 56, 64, 80, 96, 128, 256, 512, 1024, 2048,
	4096, 8192, 16384, 32768, 65536}

func llCode(ll uint32) uint8 {
	if ll < 16 {
		return uint8(ll)
	}
	if ll >= 64 {
		return uint8(bits.Len32(ll)-1) + 19
	}
	c := uint8(16)
	for c < 24 && llBase[c+1] <= ll {
		c++
	}
	return c
}

func mlCode(b uint32) uint8 { // b: match length less 3
	if b < 32 {
		return uint8(b)
	}
	if b >= 128 {
		return uint8(bits.Len32(b)-1) + 36
	}
	c := uint8(32)
	for c < 42 && mlBase[c+1] <= b {
		c++
	}
	return c
}

func ofCode(offBase uint32) uint8 { return uint8(bits.Len32(offBase) - 1) }

// fseTable is one FSE compression table (tANS), built from normalised
// counts that sum to 1<<log.
type fseTable struct {
	log   uint8
	norm  [maxMLCode + 1]int16
	nsym  int // symbols 0..nsym-1 may appear
	state []uint16
	tt    [maxMLCode + 1]symTT
	rle   bool
}

type symTT struct {
	deltaNbBits    uint32
	deltaFindState int32
}

const maxTableLog = 8 // every decoder takes it for all three codes

// normalize sets t.norm from counts over nsym symbols (total > 0, at
// least two of them present): every present symbol gets at least one
// state, the rest shared in proportion.
func (t *fseTable) normalize(count []uint32, total int) {
	present := 0
	maxSym := 0
	for s, c := range count {
		if c > 0 {
			present++
			maxSym = s
		}
	}
	t.nsym = maxSym + 1
	log := uint8(maxTableLog)
	if b := uint8(bits.Len32(uint32(total-1))) - 2; total > 4 && b < log {
		log = b
	}
	if log < 5 {
		log = 5
	}
	for 1<<log < 2*present && log < maxTableLog {
		log++
	}
	t.log = log
	size := int32(1) << log
	sum := int32(0)
	largest := 0
	for s := 0; s < t.nsym; s++ {
		c := count[s]
		if c == 0 {
			t.norm[s] = 0
			continue
		}
		n := int32(uint64(c) * uint64(size) / uint64(total))
		if n == 0 {
			n = 1
		}
		t.norm[s] = int16(n)
		sum += n
		if c > count[largest] {
			largest = s
		}
	}
	for sum < size {
		t.norm[largest]++
		sum++
	}
	for sum > size {
		big := 0
		for s := 0; s < t.nsym; s++ {
			if t.norm[s] > t.norm[big] {
				big = s
			}
		}
		t.norm[big]--
		sum--
	}
}

// build makes the encoding tables from t.norm (no symbol at -1).
func (t *fseTable) build() error {
	size := uint32(1) << t.log
	if cap(t.state) < int(size) {
		t.state = make([]uint16, size)
	}
	t.state = t.state[:size]
	var symbol [1 << maxTableLog]uint8
	var cumul [maxMLCode + 2]uint32
	for s := 0; s < t.nsym; s++ {
		cumul[s+1] = cumul[s] + uint32(t.norm[s])
	}
	if cumul[t.nsym] != size {
		return errors.New("stackz: fse counts do not fill the table")
	}
	step := size>>1 + size>>3 + 3
	mask := size - 1
	pos := uint32(0)
	for s := 0; s < t.nsym; s++ {
		for range t.norm[s] {
			symbol[pos] = uint8(s)
			pos = (pos + step) & mask
		}
	}
	if pos != 0 {
		return errors.New("stackz: fse spread did not end at 0")
	}
	for u := uint32(0); u < size; u++ {
		s := symbol[u]
		t.state[cumul[s]] = uint16(size + u)
		cumul[s]++
	}
	total := int32(0)
	for s := 0; s < t.nsym; s++ {
		n := int32(t.norm[s])
		switch {
		case n == 0:
			t.tt[s] = symTT{}
		case n == 1:
			t.tt[s] = symTT{deltaNbBits: uint32(t.log)<<16 - size, deltaFindState: total - 1}
			total++
		default:
			maxOut := uint32(t.log) - uint32(bits.Len32(uint32(n-1))-1)
			minStatePlus := uint32(n) << maxOut
			t.tt[s] = symTT{deltaNbBits: maxOut<<16 - minStatePlus, deltaFindState: total - n}
			total += n
		}
	}
	t.rle = false
	return nil
}

func (t *fseTable) setRLE() {
	t.rle = true
	t.log = 0
	t.state = append(t.state[:0], 0)
	for i := range t.tt {
		t.tt[i] = symTT{}
	}
}

// initState is the state a stream starts in to write sym first.
func (t *fseTable) initState(sym uint8) uint16 {
	if t.rle {
		return 0
	}
	tt := t.tt[sym]
	nb := (tt.deltaNbBits + 1<<15) >> 16
	v := int32(nb<<16 - tt.deltaNbBits)
	return t.state[(v>>nb)+tt.deltaFindState]
}

// appendNCount appends the table's description (RFC 8878, 4.1.1).
func (t *fseTable) appendNCount(out []byte) []byte {
	var acc uint64
	var n uint
	put := func(v uint64, nb uint) {
		acc |= v << n
		n += nb
		for n >= 8 {
			out = append(out, byte(acc))
			acc >>= 8
			n -= 8
		}
	}
	tableSize := int32(1) << t.log
	put(uint64(t.log-5), 4)
	remaining := tableSize + 1
	threshold := tableSize
	nbBits := uint(t.log) + 1
	s := 0
	prev0 := false
	for remaining > 1 {
		if prev0 {
			start := s
			for t.norm[s] == 0 {
				s++
			}
			for s >= start+3 {
				start += 3
				put(3, 2)
			}
			put(uint64(s-start), 2)
		}
		count := int32(t.norm[s])
		s++
		max := 2*threshold - 1 - remaining
		remaining -= count
		count++
		if count >= threshold {
			count += max
		}
		if count < max {
			put(uint64(count), nbBits-1)
		} else {
			put(uint64(count), nbBits)
		}
		prev0 = count == 1
		for remaining < threshold {
			nbBits--
			threshold >>= 1
		}
	}
	if n > 0 {
		out = append(out, byte(acc))
	}
	return out
}

// bitWriter is zstd's backward bit stream, written forwards. Bits are
// added without a check for room: the caller flushes before 64 are held,
// into out grown beforehand by what it writes and 8 bytes more.
type bitWriter struct {
	acc uint64
	n   uint
	out []byte
}

func (w *bitWriter) add(v uint64, nb uint) {
	w.acc |= (v & (1<<nb - 1)) << w.n
	w.n += nb
}

// flush writes out the whole bytes held.
func (w *bitWriter) flush() {
	l := len(w.out)
	binary.LittleEndian.PutUint64(w.out[l:l+8], w.acc)
	k := w.n >> 3
	w.out = w.out[:l+int(k)]
	w.acc >>= k * 8
	w.n &= 7
}

func (w *bitWriter) encode(t *fseTable, state uint16, sym uint8) uint16 {
	if t.rle {
		return 0
	}
	tt := t.tt[sym]
	nb := (uint32(state) + tt.deltaNbBits) >> 16
	w.add(uint64(state), uint(nb))
	return t.state[int32(state>>nb)+tt.deltaFindState]
}

func (w *bitWriter) close() []byte {
	w.add(1, 1)
	w.flush()
	if w.n > 0 {
		w.out = append(w.out, byte(w.acc))
	}
	return w.out
}
