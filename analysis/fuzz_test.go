package analysis

import (
	"bytes"
	"testing"
)

var fuzzSeeds = []string{
	"[memtrack] tid=1      (m              ) malloc     ts=1            size=8             total=8             ptr=0x10\n[memtrack]   #0  ./a(_Z1fv+0x1) [0x2]\n[memtrack] tid=1      (m              ) free       ts=2            ptr=0x10\n",
	"[memtrace] header pid=1 cmd=x\n[memtrace] thread tid=1 pid=1 name=m\n[memtrace] lost count=3 total=3\n",
	"[memtrack] tid=2      (w              ) EXIT       ts=9            total=0            bytes allocated\n",
	"[memtrack]   #0  [0x5]\n[memtrack] tid=",
	"\x00\x01[memtrack] tid=1 (\xff) malloc ts=1 size=1 total=1 ptr=0x1\n",
	// Lost records: a reused address, an overlap, a mapping.
	"[memtrace] lost count=2 total=2 ts=9\n[memtrack] tid=1 (m) malloc ts=1 size=64 total=8 ptr=0x100\n[memtrack] tid=1 (m) malloc ts=2 size=8 total=8 ptr=0x100\n[memtrack] tid=1 (m) malloc ts=3 size=8 total=8 ptr=0x120\n[memtrack] tid=1 (m) mmap ts=4 size=4096 total=8 ptr=0x100\n[memtrack] tid=1 (m) free ts=5 size=8 ptr=0x100\n",
	// Truncated stacks, and sizes and times at the bounds.
	"[memtrack] tid=1 (m) malloc ts=1 size=8 total=8 ptr=0x10\n[memtrack]   #0  ./a(f+0x1) [0x2]\n[memtrace] stack truncated=1 reason=fp\n[memtrace] stack truncated=1\n[memtrack] tid=1 (m) malloc ts=9007199254740992 size=72057594037927936 total=1 ptr=0x20\n[memtrack] tid=1 (m) malloc ts=9007199254740992 size=72057594037927936 total=1 ptr=0x40\n[memtrace] summary lost=1\n",
}

// checkInvariants: per-thread figures agree with the allocation columns.
func checkInvariants(t *testing.T, m *Model) {
	live := make([]int64, len(m.Threads))
	for i := range m.TS {
		if m.FreeThread[i] == NoThread {
			live[m.Thread[i]]++
		}
		_ = m.Frames(m.Stack[i])
		_ = m.Status(uint32(i))
	}
	for i := range m.Threads {
		if m.Threads[i].LiveCount != live[i] {
			t.Fatalf("thread %d live %d, columns say %d", i, m.Threads[i].LiveCount, live[i])
		}
	}
	// Leaks and unknown blocks are what Status says, and never more
	// than what is live.
	var leaks, unknown int64
	for i := range m.TS {
		switch m.Status(uint32(i)) {
		case StatusLeak:
			leaks++
		case StatusUnknown:
			unknown++
		}
	}
	n, _ := m.Leaks()
	u, ub := m.Unknown()
	ln, lb := m.Live()
	if !m.SummaryOnly && (n != leaks || u != unknown) {
		t.Fatalf("Leaks() %d, Unknown() %d; statuses say %d, %d", n, u, leaks, unknown)
	}
	if n < 0 || u < 0 || n+u > ln || ub > lb || lb > MaxBytes {
		t.Fatalf("leaks %d, unknown %d/%d, live %d/%d", n, u, ub, ln, lb)
	}
	q := NewQuery()
	q.Search = "a"
	s := m.Select(&q, nil)
	m.Groups(s, m.MaxTS/2, true, GroupByGrowth, true)
	m.Timeline(10, NoThread, -1)
	m.Histogram(s)
}

func FuzzModel(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := New()
		if err := m.ReadAll(bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, m)
	})
}

// TestFuzzSeeds runs the fuzz corpus (and shuffled mixes of it) under
// plain go test.
func TestFuzzSeeds(t *testing.T) {
	var all []byte
	for _, s := range fuzzSeeds {
		m := New()
		if err := m.ReadAll(bytes.NewReader([]byte(s))); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, m)
		all = append(all, s...)
	}
	for cut := 0; cut < len(all); cut += 7 {
		m := New()
		if err := m.ReadAll(bytes.NewReader(append(all[cut:], all[:cut]...))); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, m)
	}
}
