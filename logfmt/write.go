package logfmt

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// Prefixes of the two families of lines.
const (
	TrackPrefix = "[memtrack] "
	TracePrefix = "[memtrace] "
)

// AppendAlloc appends one alloc line (with its newline) to b, in memtrack's
// layout: tid=%-6d (%-15s) %-10s ts=%-12llu size=%-12zu  total=%-12zu  ptr=%p.
func AppendAlloc(b []byte, tid int64, name string, op string, ts, size, total, ptr uint64) []byte {
	return AppendAllocAfter(appendHead(b, tid, name, op), ts, size, total, ptr)
}

// AppendAllocAfter is AppendAlloc from the ts value on, after a line's
// start written by AppendEventPrefix and AppendOpField (or OpField): a
// writer keeps those per thread and per op instead of formatting them for
// every event.
func AppendAllocAfter(b []byte, ts, size, total, ptr uint64) []byte {
	b = appendPadUint(b, ts, 12)
	b = append(b, " size="...)
	b = appendPadUint(b, size, 12)
	b = append(b, "  total="...)
	b = appendPadUint(b, total, 12)
	b = append(b, "  ptr="...)
	b = appendPtr(b, ptr)
	return append(b, '\n')
}

// AppendFree appends one free line: ... size=%-12zu  ptr=%p. size is the
// size of the block released, 0 where it is unknown.
func AppendFree(b []byte, tid int64, name string, op string, ts, size, ptr uint64) []byte {
	return AppendFreeAfter(appendHead(b, tid, name, op), ts, size, ptr)
}

// AppendFreeAfter is AppendFree from the ts value on (see AppendAllocAfter).
func AppendFreeAfter(b []byte, ts, size, ptr uint64) []byte {
	b = appendPadUint(b, ts, 12)
	b = append(b, " size="...)
	b = appendPadUint(b, size, 12)
	b = append(b, "  ptr="...)
	b = appendPtr(b, ptr)
	return append(b, '\n')
}

// AppendExit appends a thread-exit line.
func AppendExit(b []byte, tid int64, name string, ts, total uint64) []byte {
	b = appendHead(b, tid, name, "EXIT")
	b = appendPadUint(b, ts, 12)
	b = append(b, " total="...)
	b = appendPadUint(b, total, 12)
	return append(b, " bytes allocated\n"...)
}

// AppendFrame appends one stack frame line: "  #%-2d MODULE(SYMBOL+0xOFF) [0xADDR]".
// With no symbol the glibc backtrace_symbols form MODULE(+0xOFF) is used,
// where OFF is the offset in the module; with no module only [0xADDR].
func AppendFrame(b []byte, idx int, module, symbol string, off, addr uint64) []byte {
	b = append(b, TrackPrefix...)
	b = append(b, "  #"...)
	n := len(b)
	b = strconv.AppendInt(b, int64(idx), 10)
	b = appendSpaces(b, 3-(len(b)-n))
	if module != "" {
		b = append(b, sanitize(module)...)
		b = append(b, '(')
		b = append(b, sanitize(symbol)...)
		b = append(b, "+0x"...)
		b = strconv.AppendUint(b, off, 16)
		b = append(b, ") "...)
	}
	b = append(b, "[0x"...)
	b = strconv.AppendUint(b, addr, 16)
	return append(b, "]\n"...)
}

// KV is one key=value field of a [memtrace] line.
type KV struct {
	Key, Value string
}

// AppendMeta appends a "[memtrace] WORD k=v ..." line. Values that need it
// are quoted with Go syntax so that any byte survives a round trip. The
// lines memtrace writes have typed writers (AppendHeader, AppendProc, ...,
// AppendFD); this one is for tests and for words without one.
func AppendMeta(b []byte, word string, kvs ...KV) []byte {
	b = appendWord(b, word)
	for _, kv := range kvs {
		b = appendStr(b, kv.Key, kv.Value)
	}
	return append(b, '\n')
}

func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == '"' || c >= 0x7f || c == '\\' {
			return true
		}
	}
	return false
}

// appendHead writes an event line up to its ts value.
func appendHead(b []byte, tid int64, name, op string) []byte {
	return AppendOpField(AppendEventPrefix(b, tid, name), op)
}

// AppendEventPrefix appends the start every event line of one thread
// shares: "[memtrack] tid=%-6d (%-15s) ".
func AppendEventPrefix(b []byte, tid int64, name string) []byte {
	b = append(b, TrackPrefix...)
	b = append(b, "tid="...)
	n := len(b)
	b = strconv.AppendInt(b, tid, 10)
	b = appendSpaces(b, 6-(len(b)-n))
	b = append(b, " ("...)
	b = appendName(b, name)
	return append(b, ") "...)
}

// AppendOpField appends an event line's op column and the ts key that
// follows it: "%-10s ts=".
func AppendOpField(b []byte, op string) []byte {
	b = append(b, op...)
	b = appendSpaces(b, 10-len(op))
	return append(b, " ts="...)
}

var opFields = func() (f [numOps]string) {
	for o := range f {
		f[o] = string(AppendOpField(nil, Op(o).String()))
	}
	return f
}()

// OpField is AppendOpField's text for o, made once.
func OpField(o Op) string {
	if o < numOps {
		return opFields[o]
	}
	return opFields[OpOther]
}

const spaces = "                                "

// appendSpaces appends n spaces (none when n <= 0).
func appendSpaces(b []byte, n int) []byte {
	for n > len(spaces) {
		b = append(b, spaces...)
		n -= len(spaces)
	}
	if n > 0 {
		b = append(b, spaces[:n]...)
	}
	return b
}

// appendName writes the thread name padded to exactly 15 bytes. Bytes that
// would break the line (control characters) become '?'; longer names are cut
// because a reader finds the closing parenthesis by position.
func appendName(b []byte, name string) []byte {
	if len(name) > 15 {
		name = name[:15]
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < ' ' || c == 0x7f {
			c = '?'
		}
		b = append(b, c)
	}
	return appendSpaces(b, 15-len(name))
}

func sanitize(s string) string {
	if strings.ContainsAny(s, "\n\r") {
		return strings.NewReplacer("\n", "?", "\r", "?").Replace(s)
	}
	return s
}

// appendPadUint appends v in decimal, left-aligned in width columns
// (printf's %-*llu). The digits go straight into b, and the spaces with
// two stores where they fit, not through strconv's buffer and two
// copies: an event line has three such fields, and with stacks apart
// the formatting is most of what an event costs the agent besides the
// log's compression.
func appendPadUint(b []byte, v uint64, width int) []byte {
	nd := decLen(v)
	n := len(b)
	if width <= 16 && nd <= 16 {
		b = slices.Grow(b, 16)
		b = b[:n+16]
		binary.LittleEndian.PutUint64(b[n:], spaces8)
		binary.LittleEndian.PutUint64(b[n+8:], spaces8)
		putDec(b[n:n+nd], v)
		return b[:n+max(nd, width)]
	}
	b = slices.Grow(b, nd)
	b = b[:n+nd]
	putDec(b[n:], v)
	return appendSpaces(b, width-nd)
}

// pow10 are the powers of ten a uint64 holds, for decLen.
var pow10 = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// decLen is how many decimal digits v has.
func decLen(v uint64) int {
	// 1233/4096 is just above log10(2): t is the digits of the
	// smallest number of v's bit length, or one less.
	t := bits.Len64(v) * 1233 >> 12
	if v >= pow10[t] {
		t++
	}
	return max(t, 1)
}

const digits100 = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"4041424344454647484950515253545556575859606162636465666768697071727374757677787980818283848586878889" +
	"90919293949596979899"

// putDec writes v's decimal digits into d, which is exactly as long.
func putDec(d []byte, v uint64) {
	i := len(d)
	for v >= 100 {
		q := v / 100
		r := (v - q*100) * 2
		i -= 2
		d[i], d[i+1] = digits100[r], digits100[r+1]
		v = q
	}
	if v >= 10 {
		d[i-2], d[i-1] = digits100[v*2], digits100[v*2+1]
		return
	}
	d[i-1] = byte('0' + v)
}

// appendPtr writes a pointer as glibc's %p does: 0x-prefixed lower-case hex,
// or (nil).
func appendPtr(b []byte, p uint64) []byte {
	if p == 0 {
		return append(b, "(nil)"...)
	}
	nd := (bits.Len64(p) + 3) / 4
	n := len(b)
	b = slices.Grow(b, 2+nd)
	b = b[:n+2+nd]
	b[n], b[n+1] = '0', 'x'
	for i := n + 1 + nd; i > n+1; i-- {
		b[i] = hexDigits[p&15]
		p >>= 4
	}
	return b
}

const hexDigits = "0123456789abcdef"
