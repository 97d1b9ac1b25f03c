package analysis

import (
	"math"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// Sizes at the parser's bound add up past 2^63: every figure saturates at
// MaxBytes, and sums that go down again (live bytes) stay exact.
func TestByteFiguresSaturate(t *testing.T) {
	const n = 300 // 300 × 2^56 > 2^64
	var l logb
	for i := 0; i < n; i++ {
		l.alloc(1, "big", "mmap", uint64(10+i), logfmt.MaxSize, uint64(i+1)<<40)
		l.frame(0, "grow", 1)
	}
	for i := 0; i < n-1; i++ {
		l.free(1, "big", "munmap", uint64(1000+i), logfmt.MaxSize, uint64(i+1)<<40)
	}
	m := load(t, l.b)
	if m.Counts.Malformed != 0 || m.Len() != n {
		t.Fatalf("read %d allocations, %d malformed", m.Len(), m.Counts.Malformed)
	}
	th := &m.Threads[0]
	if th.AllocBytes != MaxBytes || th.FreedBytes != MaxBytes {
		t.Fatalf("allocated %d, freed %d: want both saturated at %d", th.AllocBytes, th.FreedBytes, uint64(MaxBytes))
	}
	if th.LiveBytes != logfmt.MaxSize {
		t.Fatalf("live %d after %d frees, want exactly %d", th.LiveBytes, n-1, uint64(logfmt.MaxSize))
	}
	if c, b := m.Leaks(); c != 1 || b != logfmt.MaxSize {
		t.Fatalf("leaks %d/%d", c, b)
	}
	if b, _ := m.Peak(); b != MaxBytes {
		t.Fatalf("peak %d", b)
	}
	cells := m.Timeline(50, NoThread, -1)
	for k, c := range cells {
		if c.Live < 0 {
			t.Fatalf("cell %d live %d", k, c.Live)
		}
	}
	if last := cells[len(cells)-1].Live; last != logfmt.MaxSize {
		t.Fatalf("timeline ends at %d, want %d", last, uint64(logfmt.MaxSize))
	}
	if s := m.LiveSeries(-1, []uint64{500, 5000}); s[0] != MaxBytes || s[1] != logfmt.MaxSize {
		t.Fatalf("live series %v", s)
	}
	q := NewQuery()
	all := m.Select(&q, nil)
	if gs := m.Groups(all, 0, false, GroupByTotal, true); len(gs) != 1 || gs[0].Total != MaxBytes || gs[0].LiveBytes != logfmt.MaxSize {
		t.Fatalf("groups %+v", gs)
	}
	var hb uint64
	for _, b := range m.Histogram(all) {
		hb = max(hb, b.Bytes)
	}
	if hb != MaxBytes {
		t.Fatalf("histogram bytes %d", hb)
	}
	if sp := m.StackPeaks(all); sp[m.Stack[0]].Peak != MaxBytes {
		t.Fatalf("stack peak %d", sp[m.Stack[0]].Peak)
	}
	c := m.ReportCosts()
	pc := c.Procs[0]
	if pc.Bytes != MaxBytes || pc.PeakBytes != MaxBytes || pc.LeakedBytes != logfmt.MaxSize {
		t.Fatalf("report costs %+v", pc.CostFigures)
	}
	var sum CostFigures
	for range 3 {
		sum.Add(&pc.CostFigures)
	}
	if sum.Bytes != MaxBytes || sum.LeakedBytes != 3*logfmt.MaxSize {
		t.Fatalf("added costs %+v", sum)
	}
}

// Time stamps at the parser's bound: the timeline divides without
// overflow (it used to divide by a span that wrapped to zero).
func TestTimeAtTheBound(t *testing.T) {
	var l logb
	l.alloc(1, "m", "malloc", 0, 8, 0x10)
	l.alloc(1, "m", "malloc", logfmt.MaxTS, 8, 0x20)
	l.alloc(1, "m", "malloc", 1<<64-1, 8, 0x30) // refused by the parser
	m := load(t, l.b)
	if m.Len() != 2 || m.Counts.Malformed != 1 {
		t.Fatalf("%d allocations, %d malformed", m.Len(), m.Counts.Malformed)
	}
	cells := m.Timeline(4096, NoThread, -1)
	if cells[0].Live != 8 || cells[4095].Live != 16 {
		t.Fatalf("timeline %d … %d", cells[0].Live, cells[4095].Live)
	}
	if b := m.TimeBucket(logfmt.MaxTS, 4096); b != 4095 {
		t.Fatalf("bucket of the last time stamp %d", b)
	}
	if b := m.TimeBucket(logfmt.MaxTS/2, 4096); b != 2047 {
		t.Fatalf("bucket of the middle %d", b)
	}
}

func TestWide(t *testing.T) {
	var w wide
	w.add(MaxBytes)
	w.add(MaxBytes)
	w.add(10)
	if w.value() != MaxBytes || w.signed() != math.MaxInt64 {
		t.Fatalf("saturated %d %d", w.value(), w.signed())
	}
	w.sub(MaxBytes)
	w.sub(MaxBytes)
	if w.value() != 10 {
		t.Fatalf("back down to %d", w.value())
	}
	w.sub(25)
	if w.value() != 0 || w.signed() != -15 {
		t.Fatalf("below zero: %d %d", w.value(), w.signed())
	}
	if satAdd(math.MaxUint64, 1) != MaxBytes || satAdd(3, 4) != 7 {
		t.Fatal("satAdd")
	}
	if satAddInt(math.MaxInt64, 1) != math.MaxInt64 || satAddInt(-math.MaxInt64, -5) != -math.MaxInt64 || satAddInt(-3, 5) != 2 {
		t.Fatal("satAddInt")
	}
}
