package viewer

import (
	"strconv"
)

// Bytes formats a byte count as memview does: "512 B", "1.5 KB", "3.2 MB".
func Bytes(n uint64) string {
	switch {
	case n < 1024:
		return strconv.FormatUint(n, 10) + " B"
	case n < 1<<20:
		return strconv.FormatFloat(float64(n)/1024, 'f', 1, 64) + " KB"
	case n < 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB"
	case n < 1<<40:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 2, 64) + " GB"
	case n < 1<<50:
		return strconv.FormatFloat(float64(n)/(1<<40), 'f', 2, 64) + " TB"
	case n < 1<<60:
		return strconv.FormatFloat(float64(n)/(1<<50), 'f', 2, 64) + " PB"
	}
	// Figures saturate at analysis.MaxBytes, just under 8 EB.
	return strconv.FormatFloat(float64(n)/(1<<60), 'f', 2, 64) + " EB"
}

// SBytes formats a signed byte count with its sign.
func SBytes(n int64) string {
	if n < 0 {
		return "-" + Bytes(-uint64(n))
	}
	return "+" + Bytes(uint64(n))
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
