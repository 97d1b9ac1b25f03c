package logfmt

import (
	"fmt"
	"testing"
)

// memtrackLine is memtrack's own printf layout, an oracle independent of
// the writers: for a printable name of at most 15 bytes and a non-nil
// pointer it is what the C library writes.
func memtrackLine(free bool, tid int64, name, op string, ts, size, total, ptr uint64) string {
	if free {
		return fmt.Sprintf("[memtrack] tid=%-6d (%-15s) %-10s ts=%-12d size=%-12d  ptr=0x%x\n", tid, name, op, ts, size, ptr)
	}
	return fmt.Sprintf("[memtrack] tid=%-6d (%-15s) %-10s ts=%-12d size=%-12d  total=%-12d  ptr=0x%x\n", tid, name, op, ts, size, total, ptr)
}

// printable15: ASCII only, where printf's padding (by runes) and memtrack's (by bytes) agree.
func printable15(s string) bool {
	if len(s) > 15 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// checkEventLine: a line made from its kept parts (a thread's prefix, an
// op's field) is the one AppendAlloc and AppendFree make, and memtrack's
// printf's where that applies.
func checkEventLine(t *testing.T, tid int64, name string, op Op, ts, size, total, ptr uint64) {
	t.Helper()
	prefix := AppendEventPrefix(nil, tid, name)
	alloc := AppendAllocAfter(append(append([]byte(nil), prefix...), OpField(op)...), ts, size, total, ptr)
	free := AppendFreeAfter(append(append([]byte(nil), prefix...), OpField(op)...), ts, size, ptr)
	if want := AppendAlloc(nil, tid, name, op.String(), ts, size, total, ptr); string(alloc) != string(want) {
		t.Fatalf("alloc from parts %q, whole %q", alloc, want)
	}
	if want := AppendFree(nil, tid, name, op.String(), ts, size, ptr); string(free) != string(want) {
		t.Fatalf("free from parts %q, whole %q", free, want)
	}
	if printable15(name) && ptr != 0 && tid >= 0 {
		if want := memtrackLine(false, tid, name, op.String(), ts, size, total, ptr); string(alloc) != want {
			t.Fatalf("alloc %q, memtrack writes %q", alloc, want)
		}
		if want := memtrackLine(true, tid, name, op.String(), ts, size, total, ptr); string(free) != want {
			t.Fatalf("free %q, memtrack writes %q", free, want)
		}
	}
	if tid < 0 || size > MaxSize || total > MaxSize || ts > MaxTS {
		return // beyond what a reader takes: no traced program makes them
	}
	var l Line
	if err := l.Parse(alloc[:len(alloc)-1]); err != nil || l.TID != tid || l.TS != ts || l.Size != size || l.Total != total || l.Ptr != ptr {
		t.Fatalf("alloc %q parses to %+v, %v", alloc, l, err)
	}
}

func TestEventLineParts(t *testing.T) {
	for o := Op(0); o < numOps+2; o++ {
		for _, name := range []string{"", "sqlite3", "exactly15bytes!", "longer-than-fifteen", "tab\there"} {
			for _, v := range []uint64{0, 7, 9, 10, 99, 100, 999, 1000, 1023, 1024, 123456789012, 999999999999, 1000000000000,
				9999999999999999, 10000000000000000, 1<<63 - 1, 1 << 63, 10000000000000000000, 1<<64 - 1} {
				checkEventLine(t, 1234567, name, o, v, v, v/3, v|1)
			}
		}
	}
}

func FuzzEventLineParts(f *testing.F) {
	f.Add(int64(1965), "sqlite3", uint8(OpMalloc), uint64(436847), uint64(48), uint64(48), uint64(0x55c47db982a0))
	f.Add(int64(-1), "a\x00b", uint8(200), uint64(0), uint64(0), uint64(1), uint64(0))
	f.Fuzz(func(t *testing.T, tid int64, name string, op uint8, ts, size, total, ptr uint64) {
		checkEventLine(t, tid, name, Op(op), ts, size, total, ptr)
	})
}
