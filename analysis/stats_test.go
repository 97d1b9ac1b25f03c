package analysis

import "testing"

func TestTemporaryPeaksStackString(t *testing.T) {
	var l logb
	l.alloc(1, "m", "malloc", 1, 10, 0x10).frame(0, "a", 1) // 0: freed before the next alloc: temporary
	l.free(1, "m", "free", 2, 10, 0x10)
	l.alloc(1, "m", "malloc", 3, 20, 0x20).frame(0, "a", 1) // 1: another alloc before its free: not temporary
	l.alloc(1, "m", "malloc", 4, 30, 0x30).frame(0, "b", 2) // 2: freed by another thread: not temporary
	l.free(1, "m", "free", 5, 20, 0x20)
	l.free(2, "w", "free", 6, 30, 0x30)
	l.alloc(1, "m", "malloc", 7, 40, 0x40).frame(0, "a", 1) // 3: last, freed by its thread: temporary
	l.free(1, "m", "free", 8, 40, 0x40)
	m := load(t, l.b)
	want := []bool{true, false, false, true}
	for i, w := range want {
		if got := m.Temporary(uint32(i)); got != w {
			t.Errorf("Temporary(%d) = %v, want %v", i, got, w)
		}
	}
	q := NewQuery()
	peaks := m.StackPeaks(m.Select(&q, nil))
	a := m.Stack[0]
	if peaks[a].Peak != 40 || peaks[a].At != 7 {
		t.Fatalf("peak of a: %+v (10 then 20 then 40, never together)", peaks[a])
	}
	if b := m.Stack[2]; peaks[b].Peak != 30 {
		t.Fatalf("peak of b: %+v", peaks[b])
	}
	if got := m.StackString(a); got != "./app(a+0x1)" {
		t.Fatalf("stack string %q", got)
	}
}
