package analysis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// lostHistory is one thread's history in a log whose tracer lost records.
// Each block's fate is in its comment; statusesWant is what the model
// must say of them, in allocation order.
func lostHistory(l *logb, withLostLine bool) {
	l.meta("header", "pid", "42", "comm", "app", "mode", "bpf")
	l.alloc(1, "main", "malloc", 10, 32, 0x1000)   // 0: its free lost; 0x1000 allocated again at 20: unknown
	l.alloc(1, "main", "malloc", 11, 64, 0x2000)   // 1: never seen again: a leak (perhaps a lost free)
	l.alloc(1, "main", "malloc", 12, 128, 0x3000)  // 2: free lost; 0x3010 (inside it) allocated at 21: unknown once the log ended
	l.alloc(1, "main", "malloc", 13, 16, 0x4010)   // 3: free lost; [0x4000, 0x4040) allocated at 22 covers it: unknown at the end
	l.alloc(1, "main", "mmap", 14, 4096, 0x10000)  // 4: a mapping a heap block is carved from later: stays a leak
	l.alloc(1, "main", "malloc", 15, 48, 0x5000)   // 5: freed, then its address reused by 6: freed
	l.free(1, "main", "free", 16, 48, 0x5000)      //
	l.alloc(1, "main", "malloc", 17, 48, 0x5000)   // 6: a leak (its address reuse is after a free)
	l.alloc(1, "main", "malloc", 18, 8, 0x6000)    // 7: superseded by 8, then freed by the second free of 0x6000: freed
	l.alloc(1, "main", "malloc", 19, 8, 0x6000)    // 8: freed
	l.free(1, "main", "free", 19, 8, 0x6000)       //
	l.free(1, "main", "free", 19, 8, 0x6000)       //
	l.alloc(1, "main", "malloc", 20, 32, 0x1000)   // 9: freed
	l.free(1, "main", "free", 20, 32, 0x1000)      //
	l.alloc(1, "main", "malloc", 21, 16, 0x3010)   // 10: freed
	l.free(1, "main", "free", 21, 16, 0x3010)      //
	l.alloc(1, "main", "malloc", 22, 64, 0x4000)   // 11: a leak
	l.alloc(1, "main", "malloc", 23, 64, 0x10040)  // 12: a block inside mapping 4 (the program's own arena): a leak
	l.alloc(1, "main", "mmap", 24, 8192, 0x20000)  // 13: its munmap lost; mapped again at 25 (over a longer range): unknown at the end
	l.alloc(1, "main", "mmap", 25, 16384, 0x1f000) // 14: a leak
	if withLostLine {
		l.meta("lost", "count", "5", "total", "5", "ts", "30")
	}
	l.meta("summary", "events", "22", "lost", "5")
}

func TestLostRecordsAreNotLeaks(t *testing.T) {
	var l logb
	lostHistory(&l, true)
	m := load(t, l.b)
	want := []string{"unknown", "leak", "unknown", "unknown", "leak", "freed", "leak", "freed", "freed", "freed", "freed", "leak", "leak", "unknown", "leak"}
	var got []string
	for i := range m.TS {
		got = append(got, strings.Fields(m.Status(uint32(i)).String())[0])
	}
	if !slices.Equal(got, want) {
		t.Fatalf("statuses\n got %v\nwant %v", got, want)
	}
	if n, b := m.Unknown(); n != 4 || b != 32+128+16+8192 {
		t.Fatalf("unknown %d blocks %d bytes, want 4, %d", n, b, 32+128+16+8192)
	}
	if n, b := m.Leaks(); n != 6 || b != 64+4096+48+64+64+16384 {
		t.Fatalf("leaks %d/%d", n, b)
	}
	if n, b := m.ThreadLeaks(0); n != 6 || b != 64+4096+48+64+64+16384 {
		t.Fatalf("thread leaks %d/%d", n, b)
	}
	if !m.LeaksMayBeOverstated() {
		t.Fatal("leaks not flagged as possibly overstated")
	}
	if m.Status(0).String() != "unknown (records lost)" {
		t.Fatalf("status text %q", m.Status(0))
	}
	// The filters agree with Status.
	q := NewQuery()
	q.Status = FilterUnknown
	if got := sel(m, q); !slices.Equal(got, []uint32{0, 2, 3, 13}) {
		t.Fatalf("Unknown filter %v", got)
	}
	q.Status = FilterLeaks
	if got := sel(m, q); !slices.Equal(got, []uint32{1, 4, 6, 11, 12, 14}) {
		t.Fatalf("Leaks filter %v", got)
	}
	// The report's figures come from the same rule.
	c := m.ReportCosts()
	if len(c.Procs) != 1 {
		t.Fatalf("%d processes", len(c.Procs))
	}
	pc := c.Procs[0]
	if pc.Leaks != 6 || pc.Unknown != 4 || pc.UnknownBytes != 32+128+16+8192 || pc.LeakedBytes != 64+4096+48+64+64+16384 {
		t.Fatalf("report costs %+v", pc.CostFigures)
	}
}

// Without lost records nothing is unknown: a complete log that misses a
// free is the tracer's bug and must stay visible.
func TestNoLostRecordsNoUnknown(t *testing.T) {
	var l logb
	lostHistory(&l, false)
	l.b = []byte(strings.Replace(string(l.b), " lost=5", " lost=0", 1))
	m := load(t, l.b)
	if n, _ := m.Unknown(); n != 0 {
		t.Fatalf("%d unknown blocks in a log without lost records: %s", n, statuses(m))
	}
	if n, _ := m.Leaks(); n != 10 {
		t.Fatalf("leaks %d, want 10: %s", n, statuses(m))
	}
	if m.LeaksMayBeOverstated() {
		t.Fatal("flagged without lost records")
	}
	// The summary's lost= alone is enough.
	var l2 logb
	lostHistory(&l2, false)
	if m2 := load(t, l2.b); m2.LostEvents != 5 {
		t.Fatalf("summary lost= not read: %d", m2.LostEvents)
	} else if n, _ := m2.Unknown(); n != 4 {
		t.Fatalf("unknown %d with the summary's lost= only", n)
	}
}

// While a live log grows, a reused address already proves the lost free;
// overlaps are decided once the log has ended.
func TestLostRecordsLive(t *testing.T) {
	var l logb
	lostHistory(&l, true)
	m := New()
	applyText(m, l.b)
	if m.Status(0) != StatusUnknown || m.Status(2) != StatusActive || m.Status(1) != StatusActive {
		t.Fatalf("live: %s", statuses(m))
	}
	if n, b := m.Unknown(); n != 1 || b != 32 {
		t.Fatalf("live unknown %d/%d", n, b)
	}
	m.Finish()
	if n, _ := m.Unknown(); n != 4 {
		t.Fatalf("after the end: %s", statuses(m))
	}
}

// A log buffered per thread (out of time order) gives the same answer.
func TestLostRecordsUnordered(t *testing.T) {
	var ordered, buffered logb
	ordered.meta("lost", "count", "1", "total", "1")
	buffered.meta("lost", "count", "1", "total", "1")
	// Thread 2's lines come first in the buffered log.
	ordered.alloc(1, "a", "malloc", 1, 16, 0x100).alloc(2, "b", "malloc", 2, 16, 0x100).free(2, "b", "free", 3, 16, 0x100)
	ordered.alloc(1, "a", "malloc", 4, 32, 0x200).alloc(2, "b", "malloc", 5, 8, 0x208)
	buffered.alloc(2, "b", "malloc", 2, 16, 0x100).free(2, "b", "free", 3, 16, 0x100).alloc(2, "b", "malloc", 5, 8, 0x208)
	buffered.alloc(1, "a", "malloc", 1, 16, 0x100).alloc(1, "a", "malloc", 4, 32, 0x200)
	a, b := load(t, ordered.b), load(t, buffered.b)
	if !b.OutOfOrder {
		t.Fatal("the buffered log is in order")
	}
	byTS := func(m *Model) string {
		var s []string
		for _, i := range m.Order(SortTime) {
			s = append(s, fmt.Sprintf("%d:%s", m.TS[i], m.Status(i)))
		}
		return strings.Join(s, " ")
	}
	want := "1:unknown (records lost) 2:freed 4:unknown (records lost) 5:leak"
	if got := byTS(a); got != want {
		t.Fatalf("ordered: %s", got)
	}
	if got := byTS(b); got != want {
		t.Fatalf("buffered: %s", got)
	}
	if n, _ := b.Unknown(); n != 2 {
		t.Fatalf("buffered unknown %d", n)
	}
}

// --dump-threads (no events kept) counts the reused addresses too.
func TestLostRecordsSummaryOnly(t *testing.T) {
	var l logb
	lostHistory(&l, true)
	m := New()
	m.SummaryOnly = true
	if err := m.ReadAll(strings.NewReader(string(l.b))); err != nil {
		t.Fatal(err)
	}
	// The overlap pass needs the events; the reused address does not.
	if n, b := m.Unknown(); n != 1 || b != 32 {
		t.Fatalf("summary-only unknown %d/%d", n, b)
	}
	if n, _ := m.Leaks(); n != 9 {
		t.Fatalf("summary-only leaks %d", n)
	}
}

// BenchmarkMarkOverlaps: the end-of-log pass over a million allocations
// with lost records.
func BenchmarkMarkOverlaps(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	log := append([]byte("[memtrace] lost count=5 total=5\n"), writeEvents(genHistory(r, 2_000_000, 8), false, r, false)...)
	m := load(b, log)
	b.ResetTimer()
	for range b.N {
		m.markOverlaps()
	}
}
