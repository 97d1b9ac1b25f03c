package stackz

import (
	"slices"

	"github.com/klauspost/compress/huff0"
)

// compressBlock writes the parsed block's literals and sequences section;
// nil when it cannot (the caller writes the block raw).
func (e *Encoder) compressBlock(out []byte, srcLen int) []byte {
	out = e.appendLiterals(out)
	n := len(e.seqs)
	switch {
	case n < 128:
		out = append(out, byte(n))
	case n < 0x7f00:
		out = append(out, byte(n>>8)+0x80, byte(n))
	default:
		out = append(out, 0xff, byte(n-0x7f00), byte((n-0x7f00)>>8))
	}
	if n == 0 {
		return out
	}
	e.llc, e.ofc, e.mlc = e.llc[:0], e.ofc[:0], e.mlc[:0]
	var llCount [maxLLCode + 1]uint32
	var ofCount [maxOFCode + 1]uint32
	var mlCount [maxMLCode + 1]uint32
	for _, s := range e.seqs {
		l, o, m := llCode(s.ll), ofCode(s.offBase), mlCode(s.ml-3)
		e.llc = append(e.llc, l)
		e.ofc = append(e.ofc, o)
		e.mlc = append(e.mlc, m)
		llCount[l]++
		ofCount[o]++
		mlCount[m]++
	}
	modePos := len(out)
	out = append(out, 0)
	var mode byte
	var err error
	for _, c := range []struct {
		t     *fseTable
		count []uint32
		codes []uint8
		shift uint
	}{{&e.ll, llCount[:], e.llc, 6}, {&e.of, ofCount[:], e.ofc, 4}, {&e.ml, mlCount[:], e.mlc, 2}} {
		if int(c.count[c.codes[0]]) == n {
			c.t.setRLE()
			mode |= 1 << c.shift
			out = append(out, c.codes[0])
			continue
		}
		c.t.normalize(c.count, n)
		if err = c.t.build(); err != nil {
			return nil
		}
		mode |= 2 << c.shift
		out = c.t.appendNCount(out)
	}
	out[modePos] = mode

	w := bitWriter{out: slices.Grow(out, n*seqBytes+16)}
	last := n - 1
	s := e.seqs[last]
	llS := e.ll.initState(e.llc[last])
	ofS := e.of.initState(e.ofc[last])
	mlS := e.ml.initState(e.mlc[last])
	e.addExtras(&w, s, e.llc[last], e.ofc[last], e.mlc[last])
	for i := last - 1; i >= 0; i-- {
		ofS = w.encode(&e.of, ofS, e.ofc[i])
		mlS = w.encode(&e.ml, mlS, e.mlc[i])
		llS = w.encode(&e.ll, llS, e.llc[i])
		e.addExtras(&w, e.seqs[i], e.llc[i], e.ofc[i], e.mlc[i])
	}
	w.add(uint64(mlS), uint(e.ml.log))
	w.add(uint64(ofS), uint(e.of.log))
	w.add(uint64(llS), uint(e.ll.log))
	out = w.close()
	if len(out) >= srcLen {
		return nil
	}
	return out
}

// seqBytes bounds a sequence's bits in bytes: three states of at most
// maxTableLog bits, 16 extra bits of each length, 31 of the offset.
const seqBytes = (3*maxTableLog + 16 + 16 + 31 + 7) / 8

// addExtras follows a sequence's states, which leave at most 31 bits in
// w: the lengths' bits fit before a flush, the offset's after it.
func (e *Encoder) addExtras(w *bitWriter, s sequence, l, o, m uint8) {
	w.add(uint64(s.ll-llBase[l]), uint(llBits[l]))
	w.add(uint64(s.ml-3-mlBase[m]), uint(mlBits[m]))
	w.flush()
	w.add(uint64(s.offBase), uint(o))
	w.flush()
}

// smallLits: fewer literals than this are written as they are: a Huffman
// table for them costs about what it saves (a flush of a quiet program's
// few lines), and time to build.
const smallLits = 128

// appendLiterals writes the literals section: Huffman-coded where that
// pays, as they are otherwise.
func (e *Encoder) appendLiterals(out []byte) []byte {
	lits := e.lits
	var comp []byte
	var reused, single bool
	var err error
	switch {
	case len(lits) >= 1024:
		comp, reused, err = huff0.Compress4X(lits, &e.huf)
	case len(lits) > smallLits:
		single = true
		comp, reused, err = huff0.Compress1X(lits, &e.huf)
	default:
		err = huff0.ErrIncompressible
	}
	if err == nil && len(comp)+5 >= len(lits) {
		if !reused {
			e.huf.Reuse = huff0.ReusePolicyNone
		}
		err = huff0.ErrIncompressible
	}
	switch err {
	case nil:
		typ := uint64(2)
		if reused {
			typ = 3
		}
		out = appendLitHeader(out, typ, len(lits), len(comp), single)
		out = append(out, comp...)
		// The literals' statistics change little from block to
		// block (the digits of times, sizes and addresses): a table
		// that can code them is kept without building a new one,
		// and every other block a new one replaces it if smaller.
		e.huf.Reuse = huff0.ReusePolicyPrefer
		if e.hufBlocks++; e.hufBlocks%2 == 0 {
			e.huf.Reuse = huff0.ReusePolicyAllow
		}
	case huff0.ErrUseRLE:
		e.huf.Reuse = huff0.ReusePolicyNone
		out = appendRawHeader(out, 1, len(lits))
		out = append(out, lits[0])
	default:
		e.huf.Reuse = huff0.ReusePolicyNone
		out = appendRawHeader(out, 0, len(lits))
		out = append(out, lits...)
	}
	return out
}

func appendRawHeader(out []byte, typ uint64, n int) []byte {
	switch {
	case n < 32:
		return append(out, byte(typ|uint64(n)<<3))
	case n < 4096:
		v := typ | 1<<2 | uint64(n)<<4
		return append(out, byte(v), byte(v>>8))
	default:
		v := typ | 3<<2 | uint64(n)<<4
		return append(out, byte(v), byte(v>>8), byte(v>>16))
	}
}

func appendLitHeader(out []byte, typ uint64, regen, comp int, single bool) []byte {
	switch {
	case regen < 1024 && comp < 1024:
		v := typ | uint64(regen)<<4 | uint64(comp)<<14
		if !single {
			v |= 1 << 2
		}
		return append(out, byte(v), byte(v>>8), byte(v>>16))
	case regen < 1<<14 && comp < 1<<14:
		v := typ | 2<<2 | uint64(regen)<<4 | uint64(comp)<<18
		return append(out, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	default:
		v := typ | 3<<2 | uint64(regen)<<4 | uint64(comp)<<22
		return append(out, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32))
	}
}
