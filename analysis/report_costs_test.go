package analysis

import (
	"math/rand/v2"
	"testing"

	"github.com/memtrace/memtrace/internal/ranking"
)

func TestReportCostsKnownLog(t *testing.T) {
	l := &logb{}
	l.meta("header", "pid", "100", "comm", "app")
	// Thread 1: a temporary (freed before thread 1 allocates again).
	l.alloc(1, "main", "malloc", 10, 100, 0x10).frame(0, "tmp", 1)
	l.free(1, "main", "free", 11, 100, 0x10)
	// Thread 1: kept across its own next allocation: not temporary.
	l.alloc(1, "main", "malloc", 12, 200, 0x20).frame(0, "keep", 1)
	// Thread 1 allocates nothing more before freeing it: temporary, even
	// though another thread allocates meanwhile.
	l.alloc(1, "main", "new", 13, 300, 0x30).frame(0, "big", 1)
	// Peak: 200 + 300 + 50 = 550 at ts 14.
	l.alloc(2, "worker", "malloc", 14, 50, 0x40).frame(0, "work", 1)
	// Freed by another thread: not temporary either.
	l.free(2, "worker", "free", 15, 200, 0x20)
	l.free(1, "main", "delete", 16, 300, 0x30)
	// No stack: split by op.
	l.alloc(2, "worker", "calloc", 17, 7, 0x50)
	l.alloc(2, "worker", "strdup", 18, 8, 0x60)
	l.free(2, "worker", "free", 19, 8, 0x60)
	l.exit(2, "worker", 20)
	// Leaks at the end: 0x40 (50, "work") and 0x50 (7, calloc).
	m := load(t, l.b)
	c := m.ReportCosts()
	if len(c.Procs) != 1 {
		t.Fatalf("procs %d", len(c.Procs))
	}
	p := c.Procs[0]
	want := CostFigures{Calls: 6, Bytes: 665, Temporary: 3, TempBytes: 408, PeakCount: 3, PeakBytes: 550, Leaks: 2, LeakedBytes: 57, Largest: lg(300, 300, 300, 50)}
	if p.CostFigures != want {
		t.Fatalf("totals\n got %+v\nwant %+v", p.CostFigures, want)
	}
	if p.PeakTS != 14 || p.FirstTS != 10 || p.LastTS != 20 {
		t.Fatalf("peak ts %d span %d..%d", p.PeakTS, p.FirstTS, p.LastTS)
	}
	byName := map[string]CostFigures{}
	for _, s := range p.Stacks {
		name := m.OpName(s.Op)
		if s.Stack != 0 {
			name = m.FrameName(m.Frames(s.Stack)[0])
			if s.Op != NoOp {
				t.Fatalf("stack %d has op %d", s.Stack, s.Op)
			}
		}
		byName[name] = s.CostFigures
	}
	wantStacks := map[string]CostFigures{
		"tmp":    {Calls: 1, Bytes: 100, Temporary: 1, TempBytes: 100, Largest: lg(100, 100, 0, 0)},
		"keep":   {Calls: 1, Bytes: 200, PeakCount: 1, PeakBytes: 200, Largest: lg(200, 0, 200, 0)},
		"big":    {Calls: 1, Bytes: 300, Temporary: 1, TempBytes: 300, PeakCount: 1, PeakBytes: 300, Largest: lg(300, 300, 300, 0)},
		"work":   {Calls: 1, Bytes: 50, PeakCount: 1, PeakBytes: 50, Leaks: 1, LeakedBytes: 50, Largest: lg(50, 0, 50, 50)},
		"calloc": {Calls: 1, Bytes: 7, Leaks: 1, LeakedBytes: 7, Largest: lg(7, 0, 0, 7)},
		"strdup": {Calls: 1, Bytes: 8, Temporary: 1, TempBytes: 8, Largest: lg(8, 8, 0, 0)},
	}
	if len(byName) != len(wantStacks) {
		t.Fatalf("stacks %v", byName)
	}
	for k, w := range wantStacks {
		if byName[k] != w {
			t.Errorf("%s: got %+v want %+v", k, byName[k], w)
		}
	}
	for i := range m.TS {
		id := uint32(i)
		wantTemp := m.Ptr[i] == 0x10 || m.Ptr[i] == 0x30 || m.Ptr[i] == 0x60
		if m.Temporary(id) != wantTemp {
			t.Errorf("%x temporary %v", m.Ptr[i], m.Temporary(id))
		}
	}
}

func TestReportCostsPerProcess(t *testing.T) {
	l := &logb{}
	l.meta("header", "pid", "1", "comm", "parent")
	l.meta("thread", "tid", "1", "pid", "1", "name", "parent")
	l.meta("thread", "tid", "2", "pid", "2", "name", "child")
	l.alloc(1, "parent", "malloc", 1, 10, 0x10)
	l.alloc(2, "child", "malloc", 2, 1000, 0x10) // same address, other process
	l.free(2, "child", "free", 3, 1000, 0x10)
	l.alloc(1, "parent", "malloc", 4, 20, 0x20)
	l.alloc(2, "child", "malloc", 5, 30, 0x30)
	m := load(t, l.b)
	c := m.ReportCosts()
	if len(c.Procs) != 2 {
		t.Fatalf("procs %d", len(c.Procs))
	}
	got := map[int64]ProcCosts{}
	for _, p := range c.Procs {
		got[m.Procs[p.Proc].PID] = p
	}
	if p := got[1]; p.PeakBytes != 30 || p.PeakTS != 4 || p.Leaks != 2 || p.Temporary != 0 {
		t.Errorf("parent %+v", p)
	}
	if p := got[2]; p.PeakBytes != 1000 || p.PeakTS != 2 || p.Leaks != 1 || p.Temporary != 1 || p.PeakCount != 1 {
		t.Errorf("child %+v", p)
	}
}

// refCosts computes the totals straight from a generated history, in its
// true order, without the model.
func refCosts(evs []gev) CostFigures {
	var c CostFigures
	type blk struct {
		sz   uint64
		tid  int64
		temp bool
		idx  int
	}
	live := map[uint64]*blk{}
	last := map[int64]*blk{}
	var all []*blk
	var cur, peak int64
	var peakSet []bool
	inLive := map[int]bool{}
	for _, e := range evs {
		if !e.free {
			b := &blk{sz: e.sz, tid: e.tid, idx: len(all)}
			all = append(all, b)
			live[e.ptr] = b
			last[e.tid] = b
			inLive[b.idx] = true
			c.Calls++
			c.Bytes += e.sz
			c.Largest[ranking.All] = max(c.Largest[ranking.All], e.sz)
			cur += int64(e.sz)
			if cur > peak {
				peak = cur
				peakSet = make([]bool, len(all))
				for k := range inLive {
					peakSet[k] = true
				}
			}
			continue
		}
		b := live[e.ptr]
		delete(live, e.ptr)
		delete(inLive, b.idx)
		cur -= int64(b.sz)
		if b.tid == e.tid && last[e.tid] == b {
			b.temp = true
			c.Temporary++
			c.TempBytes += b.sz
			c.Largest[ranking.Temporary] = max(c.Largest[ranking.Temporary], b.sz)
		}
	}
	for k, in := range peakSet {
		if in {
			c.PeakCount++
			c.PeakBytes += all[k].sz
			c.Largest[ranking.AtPeak] = max(c.Largest[ranking.AtPeak], all[k].sz)
		}
	}
	for _, b := range live {
		c.Leaks++
		c.LeakedBytes += b.sz
		c.Largest[ranking.Leaked] = max(c.Largest[ranking.Leaked], b.sz)
	}
	return c
}

// The figures follow from the definitions, and do not depend on whether the
// log was written in time order or buffered per thread as memtrack does.
func TestReportCostsMatchReference(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		evs := genHistory(r, 4000, 4)
		want := refCosts(evs)
		for _, buffered := range []bool{false, true} {
			m := load(t, writeEvents(evs, buffered, r, false))
			c := m.ReportCosts()
			if len(c.Procs) != 1 {
				t.Fatalf("seed %d: %d procs", seed, len(c.Procs))
			}
			if got := c.Procs[0].CostFigures; got != want {
				t.Fatalf("seed %d buffered %v:\n got %+v\nwant %+v", seed, buffered, got, want)
			}
		}
	}
}

func TestReportCostsEmptyAndSummary(t *testing.T) {
	m := load(t, []byte("garbage\n[memtrack] tid=x\n"))
	if c := m.ReportCosts(); len(c.Procs) != 0 || c.AtPeak(5) {
		t.Fatalf("empty model: %+v", c)
	}
	s := New()
	s.SummaryOnly = true
	if c := s.ReportCosts(); len(c.Procs) != 0 {
		t.Fatal("summary model gave costs")
	}
}

func BenchmarkReportCosts(b *testing.B) {
	m := load(b, benchLog(b))
	b.ResetTimer()
	for range b.N {
		m.ReportCosts()
	}
}

// lg is a Largest: the largest single allocation of all, of the
// temporary ones, of those live at the peak and of the leaked ones.
func lg(all, temp, atPeak, leaked uint64) [ranking.NumClasses]uint64 {
	return [ranking.NumClasses]uint64{ranking.All: all, ranking.Temporary: temp, ranking.AtPeak: atPeak, ranking.Leaked: leaked}
}

// Figure has a case for every figure: each gives its own field's value,
// none falls through to zero.
func TestEveryFigure(t *testing.T) {
	c := CostFigures{Calls: 1, Bytes: 2, Temporary: 3, TempBytes: 4, PeakCount: 5, PeakBytes: 6, Leaks: 7, LeakedBytes: 8,
		Unknown: 9, UnknownBytes: 10, Largest: lg(11, 12, 13, 14)}
	seen := map[uint64]ranking.Figure{}
	for f := range ranking.NumFigures {
		v := c.Figure(f)
		if v == 0 || v == 9 || v == 10 {
			t.Errorf("figure %q: %d", f.Name(), v)
		}
		if g, ok := seen[v]; ok {
			t.Errorf("figures %q and %q are one field", f.Name(), g.Name())
		}
		seen[v] = f
	}
	// Largest merges by its maximum, the rest add up.
	d := c
	d.Add(&CostFigures{Calls: 1, Largest: lg(20, 1, 1, 1)})
	if d.Calls != 2 || d.Largest != lg(20, 12, 13, 14) {
		t.Errorf("Add: %+v", d)
	}
}
