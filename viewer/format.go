package viewer

import (
	"strconv"

	"github.com/memtrace/memtrace/internal/units"
)

// Bytes formats a byte count in the one convention of every output people
// read (internal/units, heaptrack_print's): "512B", "1.54K", "3.15M".
func Bytes(n uint64) string { return units.Bytes(n) }

// SBytes formats a signed byte count with its sign, "+0B" included: a
// growth column reads as a change even when nothing changed.
func SBytes(n int64) string {
	if n < 0 {
		return units.Signed(n)
	}
	return "+" + units.Bytes(uint64(n))
}

// Dur formats microseconds: "0.267ms" below a second, "1.234s" above.
func Dur(us uint64) string {
	if us < 1_000_000 {
		return strconv.FormatFloat(float64(us)/1000, 'f', 3, 64) + "ms"
	}
	return strconv.FormatFloat(float64(us)/1e6, 'f', 3, 64) + "s"
}

// Ptr formats an address as glibc's %p.
func Ptr(p uint64) string {
	if p == 0 {
		return "(nil)"
	}
	return "0x" + strconv.FormatUint(p, 16)
}

func pad(s string, w int) string {
	n := runeLen(s)
	if n >= w {
		return cut(s, w)
	}
	b := make([]byte, 0, len(s)+w-n)
	b = append(b, s...)
	for i := n; i < w; i++ {
		b = append(b, ' ')
	}
	return string(b)
}

func lpad(s string, w int) string {
	n := runeLen(s)
	if n >= w {
		return cut(s, w)
	}
	b := make([]byte, 0, len(s)+w-n)
	for i := n; i < w; i++ {
		b = append(b, ' ')
	}
	return string(append(b, s...))
}

func runeLen(s string) int {
	n := 0
	for range s {
		n++
	}
	return n
}

func cut(s string, w int) string {
	if w <= 0 {
		return ""
	}
	n := 0
	for i := range s {
		if n == w {
			return s[:i]
		}
		n++
	}
	return s
}
