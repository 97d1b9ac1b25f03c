package stackz

// A hole is a stack's text that was not copied into the history: a copy
// given as the same slice as a copy within the window is matched to it
// without reading either, so its bytes are never needed, and not writing
// them spares the copy and keeps the history's cache lines to the event
// lines. What the history holds there is stale: every comparison stops at
// a hole, and where its bytes are needed after all (a block written raw,
// literals at a block's end, a copy given as another slice) they are
// written in from the slice.
type hole struct {
	start, end int64 // absolute
	text       []byte
	filled     bool
}

// minHole: a shorter text is copied (a hole costs its bookkeeping).
const minHole = 32

// segShift: the history is indexed in chunks of 1<<segShift bytes.
const segShift = 8

const noHole = int(^uint(0) >> 1)

// initHoles sizes the chunk index to reach as far back as a match can.
func (e *Encoder) initHoles() {
	n := 1
	for int64(n)<<segShift < e.window+int64(e.blockMax)+4<<segShift {
		n <<= 1
	}
	e.seg = make([]uint32, n)
	e.segMask = int64(n - 1)
}

// indexChunks records, for each chunk that starts in [from, to)
// (absolute), the first hole that ends after its start.
func (e *Encoder) indexChunks(from, to int64) {
	c := (from + 1<<segShift - 1) &^ (1<<segShift - 1)
	for ; c < to; c += 1 << segShift {
		for e.holeNext-e.holeBase < len(e.holes) && e.holes[e.holeNext-e.holeBase].end <= c {
			e.holeNext++
		}
		e.seg[(c>>segShift)&e.segMask] = uint32(e.holeNext)
	}
}

// firstHole is the index in e.holes of the first hole ending after abs.
func (e *Encoder) firstHole(abs int64) int {
	j := int(int32(e.seg[(abs>>segShift)&e.segMask] - uint32(e.holeBase)))
	if j < 0 {
		j = 0
	}
	for j < len(e.holes) && e.holes[j].end <= abs {
		j++
	}
	return j
}

// realEnd is the hist index where the real bytes from hist index x end:
// the next hole's start (x when x is in one), noHole when none follows.
func (e *Encoder) realEnd(x int) int {
	if len(e.holes) == 0 {
		return noHole
	}
	abs := e.histBase + int64(x)
	for j := e.firstHole(abs); j < len(e.holes); j++ {
		if h := &e.holes[j]; !h.filled {
			if h.start <= abs {
				return x
			}
			return int(h.start - e.histBase)
		}
	}
	return noHole
}

// realStart is the hist index where the real bytes that end at hist
// index x (exclusive) start: x when the byte before x is in a hole.
func (e *Encoder) realStart(x int) int {
	if len(e.holes) == 0 || x <= 0 {
		return 0
	}
	abs := e.histBase + int64(x) - 1
	j := e.firstHole(abs)
	if j < len(e.holes) && e.holes[j].start <= abs && !e.holes[j].filled {
		return x
	}
	for j--; j >= 0; j-- {
		if h := &e.holes[j]; !h.filled {
			return max(int(h.end-e.histBase), 0)
		}
	}
	return 0
}

// fill writes in the text of the holes that overlap hist [a, b).
func (e *Encoder) fill(a, b int) {
	if len(e.holes) == 0 || a >= b {
		return
	}
	absB := e.histBase + int64(b)
	for j := e.firstHole(e.histBase + int64(a)); j < len(e.holes) && e.holes[j].start < absB; j++ {
		h := &e.holes[j]
		if h.filled {
			continue
		}
		h.filled = true
		// What is not in the history yet is copied as it comes.
		from := max(h.start, e.histBase)
		to := min(h.end, e.histBase+int64(len(e.hist)))
		if from < to {
			copy(e.hist[from-e.histBase:to-e.histBase], h.text[from-h.start:])
		}
	}
}

// dropHoles forgets the holes that no match can reach any more.
func (e *Encoder) dropHoles() {
	old := e.done - e.window
	k := 0
	for k < len(e.holes) && e.holes[k].end <= old {
		k++
	}
	if k < 64 || k < len(e.holes)/2 {
		return
	}
	n := copy(e.holes, e.holes[k:])
	clear(e.holes[n:])
	e.holes = e.holes[:n]
	e.holeBase += k
}

// appendReal extends the history by p, which starts at absolute at,
// copying all but the holes' bytes.
func (e *Encoder) appendReal(p []byte, at int64) {
	hl := len(e.hist)
	e.hist = e.hist[:hl+len(p)]
	end := at + int64(len(p))
	for e.holeAdd-e.holeBase < len(e.holes) && e.holes[e.holeAdd-e.holeBase].end <= at {
		e.holeAdd++
	}
	pos := at
	for j := e.holeAdd - e.holeBase; j < len(e.holes) && e.holes[j].start < end; j++ {
		h := &e.holes[j]
		if h.filled {
			continue
		}
		if h.start > pos {
			copy(e.hist[hl+int(pos-at):], p[pos-at:h.start-at])
		}
		pos = max(pos, min(h.end, end))
	}
	copy(e.hist[hl+int(pos-at):], p[pos-at:])
	e.indexChunks(at, end)
}

// matchLenAt is how many bytes from hist index k equal those from i, up
// to limit on i's side, holes read from their text: for a stack's text
// searched, whose matches are in other stacks' texts, holes or not.
func (e *Encoder) matchLenAt(k, i, limit int) int {
	h := e.hist
	n := 0
	for i+n < limit {
		x := k + n
		abs := e.histBase + int64(x)
		j := e.firstHole(abs)
		for j < len(e.holes) && e.holes[j].filled {
			j++
		}
		var seg []byte
		switch {
		case j == len(e.holes):
			seg = h[x:]
		case e.holes[j].start > abs:
			seg = h[x : e.holes[j].start-e.histBase]
		default:
			seg = e.holes[j].text[abs-e.holes[j].start:]
		}
		seg = seg[:min(len(seg), limit-i-n)]
		l := matchLen(seg, h[i+n:limit])
		n += l
		if l < len(seg) || len(seg) == 0 {
			return n
		}
	}
	return n
}
