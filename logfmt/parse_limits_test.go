package logfmt

import (
	"errors"
	"strconv"
	"testing"
)

// Sizes and time stamps that no tracer can write are refused, so that no
// reader adds up sizes near 2^64 or divides by a time span that wrapped.
func TestParseRefusesImpossibleSizesAndTimes(t *testing.T) {
	const max64 = 1<<64 - 1
	cases := []struct {
		name string
		line []byte
		ok   bool
	}{
		{"alloc of MaxSize", AppendAlloc(nil, 1, "m", "malloc", 1, MaxSize, 1, 0x10), true},
		{"alloc above MaxSize", AppendAlloc(nil, 1, "m", "malloc", 1, MaxSize+1, 1, 0x10), false},
		{"alloc of 2^64-1", AppendAlloc(nil, 1, "m", "malloc", 1, max64, 1, 0x10), false},
		{"free of 2^64-1", AppendFree(nil, 1, "m", "free", 1, max64, 0x10), false},
		{"ts MaxTS", AppendAlloc(nil, 1, "m", "malloc", MaxTS, 8, 1, 0x10), true},
		{"ts 2^64-1", AppendAlloc(nil, 1, "m", "malloc", max64, 8, 1, 0x10), false},
		{"free ts 2^64-1", AppendFree(nil, 1, "m", "free", max64, 8, 0x10), false},
		{"exit ts 2^64-1", AppendExit(nil, 1, "m", max64, 8), false},
		// total= is the thread's running sum as the tracer kept it: any
		// value is read (readers never add it up).
		{"total 2^64-1", AppendAlloc(nil, 1, "m", "malloc", 1, 8, max64, 0x10), true},
	}
	for _, c := range cases {
		var l Line
		err := l.Parse(c.line[:len(c.line)-1])
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: read as %+v, want ErrMalformed", c.name, l)
		}
	}
	// One past the bound, as text: the parser must not wrap either.
	var l Line
	line := "[memtrack] tid=1      (m              ) malloc     ts=" + strconv.FormatUint(MaxTS+1, 10) + " size=1  total=1  ptr=0x10"
	if err := l.Parse([]byte(line)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("ts MaxTS+1 read: %+v", l)
	}
}

// FuzzParseBounds: whatever parses as an event is within the bounds.
func FuzzParseBounds(f *testing.F) {
	f.Add(AppendAlloc(nil, 1, "m", "malloc", MaxTS, MaxSize, 1<<64-1, 0x10))
	f.Add(AppendFree(nil, 1, "m", "free", 1<<64-1, 1<<64-1, 0x10))
	f.Add(AppendExit(nil, 1, "m", MaxTS+1, 8))
	f.Add([]byte("[memtrack] tid=1 (m) malloc ts=18446744073709551616 size=1 total=1 ptr=0x1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l Line
		if err := l.Parse(b); err != nil {
			return
		}
		switch l.Kind {
		case KindAlloc, KindFree, KindExit:
			if l.TS > MaxTS || l.Size > MaxSize {
				t.Fatalf("%q read as ts %d size %d", b, l.TS, l.Size)
			}
		}
	})
}
