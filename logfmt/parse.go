package logfmt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
)

// Kind says what a line is.
type Kind uint8

const (
	// KindOther is a line that is not part of the log (a program's own
	// output on the same stream, a blank line). Readers skip it.
	KindOther Kind = iota
	KindAlloc
	KindFree
	KindExit
	// KindFrame belongs to the last alloc or free line before it.
	KindFrame
	// KindMeta is a "[memtrace] " line: header, lost records, processes,
	// fd events, summaries.
	KindMeta
)

// ErrMalformed is returned for a line that starts like a log line but cannot
// be read. Readers count such lines and skip them.
var ErrMalformed = errors.New("malformed log line")

// Bounds on what a tracer can write. A line past them is corrupt, and is
// refused (ErrMalformed) rather than read, so that no reader has to add up
// sizes near 2^64 or divide by a time span that wrapped.
const (
	// MaxSize is the largest size= of an alloc or free line: no mapping
	// can exceed the user address space of a 64-bit process (2^56 bytes
	// with 5-level page tables).
	MaxSize = 1 << 56
	// MaxTS is the largest ts=, in microseconds: 2^53 µs is 285 years,
	// past any time since tracing started (or since the epoch).
	MaxTS = 1 << 53
	// MaxFrames is the most frame lines an event can have: memtrace's
	// --stack-depth stops at 127. Readers keep that many and count the
	// rest as skipped.
	MaxFrames = 127
)

// Line is one parsed line. Its byte slices point into the input and are valid
// only until the input buffer is reused.
type Line struct {
	Kind    Kind
	TID     int64
	Name    []byte // thread name, right spaces trimmed
	Op      Op
	OpText  []byte // the op column as written (for OpOther)
	TS      uint64 // microseconds since tracing started
	Size    uint64
	HasSize bool // memtrack's own free lines may carry no size=
	Total   uint64
	Ptr     uint64

	// Frame lines.
	FrameIndex int
	Module     []byte
	Symbol     []byte // empty when the frame has none
	Offset     uint64
	Addr       uint64

	// Meta lines: Word is the first token, Rest the k=v fields after it.
	Word []byte
	Rest []byte
}

var (
	trackPrefix = []byte(TrackPrefix)
	tracePrefix = []byte(TracePrefix)
)

// Parse reads one line (without its newline; a trailing \r is ignored) into
// l. A line that is not a log line gives KindOther and no error; a log line
// that cannot be read gives ErrMalformed.
func (l *Line) Parse(b []byte) error {
	l.Kind = KindOther
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	if !bytes.HasPrefix(b, trackPrefix) && !bytes.HasPrefix(b, tracePrefix) {
		// Output interleaved without a newline: the log line starts
		// in the middle.
		i := bytes.Index(b, trackPrefix)
		j := bytes.Index(b, tracePrefix)
		if i < 0 || (j >= 0 && j < i) {
			i = j
		}
		if i < 0 {
			return nil
		}
		b = b[i:]
	}
	if b[8] == 'e' { // [memtrace] rather than [memtrack]
		return l.parseMeta(b[len(tracePrefix):])
	}
	b = b[len(trackPrefix):]
	if len(b) > 3 && b[0] == ' ' && b[1] == ' ' && b[2] == '#' {
		return l.parseFrame(b[3:])
	}
	return l.parseEvent(b)
}

func (l *Line) parseMeta(b []byte) error {
	sp := bytes.IndexByte(b, ' ')
	if sp < 0 {
		l.Word, l.Rest = b, nil
	} else {
		l.Word, l.Rest = b[:sp], b[sp+1:]
	}
	if len(l.Word) == 0 {
		return ErrMalformed
	}
	l.Kind = KindMeta
	return nil
}

func (l *Line) parseEvent(b []byte) error {
	if !bytes.HasPrefix(b, []byte("tid=")) {
		return ErrMalformed
	}
	i := 4
	tid, i, ok := parseDec(b, i)
	if !ok {
		return ErrMalformed
	}
	l.TID = int64(tid)
	i = skipSpaces(b, i)
	if i >= len(b) || b[i] != '(' {
		return ErrMalformed
	}
	// The name is padded to 15 bytes, so the closing parenthesis is found
	// by position; names may hold spaces and parentheses themselves.
	var end int
	if i+16 < len(b) && b[i+16] == ')' {
		end = i + 16
	} else {
		k := bytes.Index(b[i:], []byte(") "))
		if k < 0 {
			return ErrMalformed
		}
		end = i + k
	}
	l.Name = bytes.TrimRight(b[i+1:end], " ")
	i = skipSpaces(b, end+1)
	s := i
	for i < len(b) && b[i] != ' ' {
		i++
	}
	l.OpText = b[s:i]
	if len(l.OpText) == 0 {
		return ErrMalformed
	}
	isExit := string(l.OpText) == "EXIT"
	l.Op = ParseOp(l.OpText)
	l.HasSize = false
	l.Size, l.Total, l.Ptr, l.TS = 0, 0, 0, 0
	var haveTS, haveTotal, havePtr bool
	for {
		i = skipSpaces(b, i)
		if i >= len(b) {
			break
		}
		k := i
		for i < len(b) && b[i] != '=' && b[i] != ' ' {
			i++
		}
		if i >= len(b) || b[i] != '=' {
			// "bytes allocated" after an EXIT total.
			if isExit {
				break
			}
			return ErrMalformed
		}
		key := b[k:i]
		i++
		switch string(key) {
		case "ts":
			l.TS, i, ok = parseDec(b, i)
			ok = ok && l.TS <= MaxTS
			haveTS = ok
		case "size":
			l.Size, i, ok = parseDec(b, i)
			ok = ok && l.Size <= MaxSize
			l.HasSize = ok
		case "total":
			l.Total, i, ok = parseDec(b, i)
			haveTotal = ok
		case "ptr":
			l.Ptr, i, ok = parsePtr(b, i)
			havePtr = ok
		default:
			for i < len(b) && b[i] != ' ' {
				i++
			}
			ok = true
		}
		if !ok {
			return ErrMalformed
		}
	}
	if !haveTS {
		return ErrMalformed
	}
	switch {
	case isExit:
		l.Kind = KindExit
	case !havePtr:
		return ErrMalformed
	case l.Op == OpOther && haveTotal, l.Op != OpOther && !l.Op.IsFree():
		if !haveTotal || !l.HasSize {
			return ErrMalformed
		}
		l.Kind = KindAlloc
	default:
		l.Kind = KindFree
	}
	return nil
}

// parseFrame reads "N  MODULE(SYMBOL+0xOFF) [0xADDR]" and glibc's other
// forms "MODULE(+0xOFF) [0xADDR]", "MODULE() [0xADDR]" and "[0xADDR]".
func (l *Line) parseFrame(b []byte) error {
	idx, i, ok := parseDec(b, 0)
	if !ok {
		return ErrMalformed
	}
	l.FrameIndex = int(idx)
	b = bytes.TrimSpace(b[i:])
	l.Module, l.Symbol, l.Offset, l.Addr = nil, nil, 0, 0
	lb := bytes.LastIndex(b, []byte("[0x"))
	if lb < 0 || b[len(b)-1] != ']' {
		return ErrMalformed
	}
	addr, _, ok := parseHex(b[lb+3 : len(b)-1])
	if !ok {
		return ErrMalformed
	}
	l.Addr = addr
	head := bytes.TrimSpace(b[:lb])
	if len(head) > 0 {
		op := bytes.IndexByte(head, '(')
		if op < 0 || head[len(head)-1] != ')' {
			l.Module = head
		} else {
			l.Module = head[:op]
			inner := head[op+1 : len(head)-1]
			if p := bytes.LastIndex(inner, []byte("+0x")); p >= 0 {
				if off, _, ok := parseHex(inner[p+3:]); ok {
					l.Offset = off
					inner = inner[:p]
				}
			}
			l.Symbol = inner
		}
	}
	l.Kind = KindFrame
	return nil
}

// spaces8 is eight spaces read as one little-endian word.
const spaces8 = 0x2020202020202020

func skipSpaces(b []byte, i int) int {
	// Event lines pad their columns with runs of spaces: a word at a
	// time first.
	for i+8 <= len(b) && binary.LittleEndian.Uint64(b[i:]) == spaces8 {
		i += 8
	}
	for i < len(b) && b[i] == ' ' {
		i++
	}
	return i
}

func parseDec(b []byte, i int) (uint64, int, bool) {
	s := i
	var v uint64
	for i < len(b) {
		d := uint64(b[i] - '0')
		if d > 9 {
			break
		}
		// 19 digits always fit in 64 bits: only a longer number pays
		// for the overflow check, a division, on each further digit.
		if i-s >= 19 && v > (1<<64-1-d)/10 {
			return 0, i, false
		}
		v = v*10 + d
		i++
	}
	return v, i, i > s
}

func parsePtr(b []byte, i int) (uint64, int, bool) {
	if bytes.HasPrefix(b[i:], []byte("(nil)")) {
		return 0, i + 5, true
	}
	if !bytes.HasPrefix(b[i:], []byte("0x")) {
		return 0, i, false
	}
	v, n, ok := parseHex(b[i+2:])
	return v, i + 2 + n, ok
}

// hexDigit is each byte's value as a hex digit, notHex for the others.
var hexDigit = func() (t [256]byte) {
	for i := range t {
		t[i] = notHex
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
		t[c-'a'+'A'] = byte(c - 'a' + 10)
	}
	return t
}()

const notHex = 0xff

// parseHex reads hex digits up to the first non-digit.
func parseHex(b []byte) (uint64, int, bool) {
	var v uint64
	i := 0
	for ; i < len(b); i++ {
		d := hexDigit[b[i]]
		if d == notHex {
			return v, i, i > 0
		}
		if i >= 16 {
			return 0, i, false
		}
		v = v<<4 | uint64(d)
	}
	return v, i, i > 0
}

// Fields splits the Rest of a meta line into its k=v fields, unquoting
// quoted values. It allocates; meta lines are rare.
func Fields(rest []byte) []KV {
	var out []KV
	s := string(rest)
	for len(s) > 0 {
		for len(s) > 0 && s[0] == ' ' {
			s = s[1:]
		}
		eq := -1
		for i := 0; i < len(s) && s[i] != ' '; i++ {
			if s[i] == '=' {
				eq = i
				break
			}
		}
		if eq < 0 {
			sp := indexByte(s, ' ')
			if sp < 0 {
				break
			}
			s = s[sp:]
			continue
		}
		key := s[:eq]
		s = s[eq+1:]
		var val string
		if len(s) > 0 && s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				val, s = s, ""
			} else {
				val, _ = strconv.Unquote(q)
				s = s[len(q):]
			}
		} else {
			sp := indexByte(s, ' ')
			if sp < 0 {
				val, s = s, ""
			} else {
				val, s = s[:sp], s[sp:]
			}
		}
		out = append(out, KV{key, val})
	}
	return out
}

// Field returns the value of key in a meta line's fields.
func Field(kvs []KV, key string) (string, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return "", false
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}
