package analysis

import (
	"cmp"
	"math/bits"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// StatusFilter is memview's `f` filter.
type StatusFilter uint8

const (
	FilterAll StatusFilter = iota
	FilterLeaks
	FilterActive
	FilterFreed
	FilterUnknown // StatusUnknown: frees lost with the tracer's lost records
	NumStatusFilters
)

func (f StatusFilter) String() string {
	return [...]string{"All", "Leaks", "Active", "Freed", "Unknown"}[f]
}

// Query selects allocations. The zero value (with Thread = NoThread,
// Proc = -1) selects everything in time order; use NewQuery.
type Query struct {
	Status   StatusFilter
	Thread   uint32 // NoThread: all threads
	Proc     int32  // -1: all processes
	MinAge   uint64 // µs of lifetime at least; 0 = off
	Search   string // case-insensitive substring of frames, thread name, op or pointer
	Since    uint64 // delta mode: allocated at or after Since
	HasSince bool
	From, To uint64 // range: allocated within [From, To]
	HasRange bool
	Sort     SortKey
	Desc     bool
}

// NewQuery selects everything, in time order.
func NewQuery() Query { return Query{Thread: NoThread, Proc: -1} }

// Select appends to dst[:0] the ids of the allocations q selects, in q's
// order. It walks a cached sorted permutation (or a thread's own index),
// narrowed by binary search when a time window applies to a time order,
// and tests columns on all CPUs; nothing is re-read or re-sorted.
func (m *Model) Select(q *Query, dst []uint32) []uint32 {
	dst = dst[:0]
	if m.SummaryOnly {
		return dst
	}
	var src []uint32
	byThread := false
	timeOrdered := q.Sort == SortTime
	switch {
	case q.Thread != NoThread && int(q.Thread) < len(m.Threads) && !m.Threads[q.Thread].unordered && (q.Sort == SortTime || q.Sort == SortThread):
		// A thread's allocations are in its own (time) order.
		src, timeOrdered, byThread = m.Threads[q.Thread].allocs, true, true
	default:
		src = m.Order(q.Sort)
	}
	if timeOrdered {
		lo, hi := uint64(0), ^uint64(0)
		if q.HasSince {
			lo = q.Since
		}
		if q.HasRange {
			lo, hi = max(lo, q.From), min(hi, q.To)
		}
		a, _ := slices.BinarySearchFunc(src, lo, func(id uint32, t uint64) int { return cmp.Compare(m.TS[id], t) })
		b := len(src)
		if hi != ^uint64(0) {
			b, _ = slices.BinarySearchFunc(src, hi+1, func(id uint32, t uint64) int { return cmp.Compare(m.TS[id], t) })
		}
		if b < a {
			b = a
		}
		src = src[a:b]
	}
	f := m.newFilter(q, byThread)
	if f.trivial {
		if q.Desc {
			for k := len(src) - 1; k >= 0; k-- {
				dst = append(dst, src[k])
			}
			return dst
		}
		return append(dst, src...)
	}
	const chunk = 1 << 16
	w := runtime.GOMAXPROCS(0)
	if len(src) < 2*chunk || w < 2 {
		return f.run(src, q.Desc, dst)
	}
	// Split the work over the CPUs; parts are joined in order.
	parts := make([][]uint32, w)
	per := (len(src) + w - 1) / w
	var wg sync.WaitGroup
	for k := range w {
		lo, hi := k*per, min((k+1)*per, len(src))
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fk := f
			if f.match != nil {
				fk.match = f.match.clone()
			}
			parts[k] = fk.run(src[lo:hi], q.Desc, nil)
		}()
	}
	wg.Wait()
	if q.Desc {
		slices.Reverse(parts)
	}
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return dst
}

// filter is a query compiled against the model: per-thread tables instead
// of per-record lookups through threads and processes.
type filter struct {
	m        *Model
	q        *Query
	threadOK []bool // thread and process filters
	leaky    []bool // threads whose live blocks are leaks
	match    *searchMatch
	checkTh  bool
	trivial  bool
}

// newFilter compiles q; srcIsThread says the records come from q.Thread's
// own index.
func (m *Model) newFilter(q *Query, srcIsThread bool) filter {
	f := filter{m: m, q: q, match: m.matcher(q.Search)}
	f.checkTh = q.Thread != NoThread || q.Proc >= 0
	if f.checkTh {
		f.threadOK = make([]bool, len(m.Threads))
		for i := range m.Threads {
			f.threadOK[i] = (q.Thread == NoThread || uint32(i) == q.Thread) && (q.Proc < 0 || m.Threads[i].Proc == q.Proc)
		}
	}
	f.leaky = make([]bool, len(m.Threads))
	for i := range m.Threads {
		f.leaky[i] = m.threadLeaks(&m.Threads[i])
	}
	// With the time window already cut by binary search and a thread's
	// own index, nothing else may need testing.
	f.trivial = q.Status == FilterAll && q.MinAge == 0 && f.match == nil &&
		(!f.checkTh || srcIsThread && q.Proc < 0) && (q.Sort == SortTime || srcIsThread || !q.HasSince && !q.HasRange)
	return f
}

func (f *filter) test(i uint32) bool {
	m, q := f.m, f.q
	th := m.Thread[i]
	if f.checkTh && !f.threadOK[th] {
		return false
	}
	if q.Sort != SortTime && (q.HasSince && m.TS[i] < q.Since || q.HasRange && (m.TS[i] < q.From || m.TS[i] > q.To)) {
		return false
	}
	freed := m.FreeThread[i] != NoThread
	switch q.Status {
	case FilterLeaks:
		if freed || !f.leaky[th] || m.IsUnknown(i) {
			return false
		}
	case FilterActive:
		if freed || f.leaky[th] || m.IsUnknown(i) {
			return false
		}
	case FilterFreed:
		if !freed {
			return false
		}
	case FilterUnknown:
		if !m.IsUnknown(i) {
			return false
		}
	}
	if q.MinAge > 0 && m.Lifetime(i) < q.MinAge {
		return false
	}
	return f.match == nil || f.match.test(m, i)
}

func (f *filter) run(src []uint32, desc bool, dst []uint32) []uint32 {
	if desc {
		for k := len(src) - 1; k >= 0; k-- {
			if f.test(src[k]) {
				dst = append(dst, src[k])
			}
		}
		return dst
	}
	for _, i := range src {
		if f.test(i) {
			dst = append(dst, i)
		}
	}
	return dst
}

// FrameName is frame f's symbol for display: demangled by m.Demangle when
// set, else as written; module(+offset) when the frame has no symbol.
func (m *Model) FrameName(f uint32) string {
	for len(m.frameNames) < m.NumFrames() {
		m.frameNames = append(m.frameNames, "")
		m.frameNamed = append(m.frameNamed, false)
	}
	if m.frameNamed[f] {
		return m.frameNames[f]
	}
	s := m.FrameNameOnce(f)
	m.frameNames[f], m.frameNamed[f] = s, true
	return s
}

// FrameNameOnce is FrameName without remembering it (nor using what was):
// for a caller that keeps the names it needs, on a model of many frames
// whose names it will not all ask for (the report, which would otherwise
// hold a slot per frame).
func (m *Model) FrameNameOnce(f uint32) string {
	fr := m.Frame(f)
	switch {
	case fr.Symbol != "" && m.Demangle != nil:
		return m.Demangle(fr.Symbol)
	case fr.Symbol != "":
		return fr.Symbol
	case fr.Module != "":
		return path.Base(fr.Module) + "+0x" + strconv.FormatUint(fr.Offset, 16)
	}
	return "0x" + strconv.FormatUint(fr.Addr, 16)
}

type searchMatch struct {
	stacks  []bool
	threads []bool
	ops     [256]bool
	ptrVal  uint64 // hex digits to look for in pointers
	ptrLen  int    // how many digits; 0 = no pointer search
	ptrHead bool   // the query began with 0x: match the leading digits
}

func (s *searchMatch) clone() *searchMatch { c := *s; return &c }

func (s *searchMatch) test(m *Model, i uint32) bool {
	if s.threads[m.Thread[i]] || s.ops[m.Op[i]] || s.stacks[m.Stack[i]] {
		return true
	}
	if f := m.FreeThread[i]; f != NoThread && (s.threads[f] || s.stacks[m.FreeStack[i]]) {
		return true
	}
	if s.ptrLen > 0 {
		return s.ptrMatch(m.Ptr[i])
	}
	return false
}

// ptrMatch reports whether the hex digits of p, as %p prints them (no
// leading zeros), contain the query's digits: a window of nibbles compared
// as a number, no formatting.
func (s *searchMatch) ptrMatch(p uint64) bool {
	nd := (bits.Len64(p) + 3) / 4
	if nd == 0 {
		nd = 1
	}
	if s.ptrLen > nd {
		return false
	}
	mask := uint64(1)<<(4*uint(s.ptrLen)) - 1
	if s.ptrLen == 16 {
		mask = ^uint64(0)
	}
	if s.ptrHead {
		return (p>>(4*uint(nd-s.ptrLen)))&mask == s.ptrVal
	}
	for sh := 0; sh+s.ptrLen <= nd; sh++ {
		if (p>>(4*uint(sh)))&mask == s.ptrVal {
			return true
		}
	}
	return false
}

// matcher precomputes a search per frame, stack, thread and op, so that
// testing an allocation is a few table lookups.
func (m *Model) matcher(q string) *searchMatch {
	q = strings.ToLower(strings.TrimSpace(q))
	if q == "" {
		return nil
	}
	s := &searchMatch{stacks: make([]bool, m.NumStacks()), threads: make([]bool, len(m.Threads))}
	fm := make([]bool, m.NumFrames())
	for f := range fm {
		fr := m.Frame(uint32(f))
		fm[f] = containsFold(m.FrameName(uint32(f)), q) || containsFold(fr.Symbol, q) || containsFold(fr.Module, q)
	}
	for st := 1; st < m.NumStacks(); st++ {
		for _, f := range m.Frames(uint32(st)) {
			if fm[f] {
				s.stacks[st] = true
				break
			}
		}
	}
	for t := range m.Threads {
		s.threads[t] = containsFold(m.Threads[t].Name, q) || strconv.FormatInt(m.Threads[t].TID, 10) == q
	}
	for o := range m.opNames {
		s.ops[o] = containsFold(m.opNames[o], q)
	}
	if isHexQuery(q) {
		h := strings.TrimPrefix(q, "0x")
		if len(h) <= 16 {
			s.ptrVal, _ = strconv.ParseUint(h, 16, 64)
			s.ptrLen, s.ptrHead = len(h), strings.HasPrefix(q, "0x")
		}
	}
	return s
}

func containsFold(s, lowerSub string) bool {
	if len(lowerSub) > len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			return strings.Contains(strings.ToLower(s), lowerSub)
		}
	}
	return strings.Contains(s, lowerSub)
}

func isHexQuery(q string) bool {
	h := strings.TrimPrefix(q, "0x")
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// GroupSort orders call-site groups.
type GroupSort uint8

const (
	GroupByTotal GroupSort = iota
	GroupByCount
	GroupByRate
	GroupByGrowth // only meaningful with a baseline
	NumGroupSorts
)

func (g GroupSort) String() string {
	return [...]string{"Total", "Count", "Rate", "Growth"}[g]
}

// Group is the allocations of one call stack within a selection.
type Group struct {
	Stack      uint32
	Count      int64
	Total      uint64
	LiveCount  int64
	LiveBytes  uint64
	Freed      int64
	First      uint64 // time stamp of the first allocation
	Last       uint64
	Example    uint32 // first allocation of the group in the selection's order
	Thread     uint32 // the example's thread
	Monotonic  bool   // at least two allocations and none freed: live bytes only grow
	Growth     int64  // live bytes now minus live bytes at the baseline
	AtBaseline uint64 // live bytes at the baseline
}

// Rate is bytes per second over the span of the group's allocations.
func (g *Group) Rate() float64 {
	if g.Count < 2 || g.Last <= g.First {
		return 0
	}
	return float64(g.Total) / (float64(g.Last-g.First) / 1e6)
}

// Groups folds a selection by call stack. With hasBase, Growth is the
// change of each site's live bytes since time base.
func (m *Model) Groups(sel []uint32, base uint64, hasBase bool, key GroupSort, desc bool) []Group {
	// A slot per stack id: a slice index, not a map lookup, per record.
	slot := make([]int32, m.NumStacks())
	var gs []Group
	for _, i := range sel {
		s := m.Stack[i]
		k := slot[s] - 1
		if k < 0 {
			k = int32(len(gs))
			slot[s] = k + 1
			gs = append(gs, Group{Stack: s, First: m.TS[i], Last: m.TS[i], Example: i, Thread: m.Thread[i]})
		}
		g := &gs[k]
		sz := m.Size[i]
		g.Count++
		g.Total = satAdd(g.Total, sz)
		if m.TS[i] < g.First {
			g.First = m.TS[i]
		}
		if m.TS[i] > g.Last {
			g.Last = m.TS[i]
		}
		freed := m.FreeThread[i] != NoThread
		if freed {
			g.Freed++
		} else {
			g.LiveCount++
			g.LiveBytes = satAdd(g.LiveBytes, sz)
		}
		if hasBase && m.LiveAt(i, base) {
			g.AtBaseline = satAdd(g.AtBaseline, sz)
		}
	}
	for k := range gs {
		g := &gs[k]
		g.Monotonic = g.Count >= 2 && g.Freed == 0
		if hasBase {
			g.Growth = int64(g.LiveBytes) - int64(g.AtBaseline)
		}
	}
	slices.SortStableFunc(gs, func(a, b Group) int {
		var c int
		switch key {
		case GroupByCount:
			c = cmp.Compare(a.Count, b.Count)
		case GroupByRate:
			c = cmp.Compare(a.Rate(), b.Rate())
		case GroupByGrowth:
			c = cmp.Compare(a.Growth, b.Growth)
		default:
			c = cmp.Compare(a.Total, b.Total)
		}
		if c == 0 {
			c = cmp.Compare(b.Stack, a.Stack)
		}
		if desc {
			return -c
		}
		return c
	})
	return gs
}

// SizeBuckets are the upper bounds of the histogram's buckets; the last
// bucket holds everything above 1 MiB.
var SizeBuckets = [...]uint64{16, 64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, ^uint64(0)}

// Bucket is one bar of the size histogram.
type Bucket struct {
	Max   uint64
	Count int64
	Bytes uint64
}

// Histogram counts a selection by size bucket.
func (m *Model) Histogram(sel []uint32) []Bucket {
	out := make([]Bucket, len(SizeBuckets))
	for k := range out {
		out[k].Max = SizeBuckets[k]
	}
	for _, i := range sel {
		sz := m.Size[i]
		k := bucketOf(sz)
		out[k].Count++
		out[k].Bytes = satAdd(out[k].Bytes, sz)
	}
	return out
}

// bucketOf indexes SizeBuckets, whose bounds are 16·4^k.
func bucketOf(sz uint64) int {
	if sz <= 16 {
		return 0
	}
	k := (bits.Len64(sz-1) - 3) / 2
	return min(k, len(SizeBuckets)-1)
}

// Cell is one time bucket of the timeline.
type Cell struct {
	Live int64 // live bytes at the end of the bucket
	Net  int64 // bytes allocated minus bytes freed within the bucket
}

// Timeline is live memory over the log's time span in n buckets, for one
// thread (NoThread: all) and process (-1: all).
func (m *Model) Timeline(n int, thread uint32, proc int32) []Cell {
	cells := make([]Cell, n)
	if n <= 0 || !m.anyTS || m.SummaryOnly {
		return cells
	}
	bucket := func(t uint64) int { return m.TimeBucket(t, n) }
	// Exact sums, read out saturated: sizes near logfmt.MaxSize must
	// neither wrap a cell nor the running total.
	nets := make([]wide, n)
	add := func(i uint32) {
		sz := m.Size[i]
		nets[bucket(m.TS[i])].add(sz)
		if m.FreeThread[i] != NoThread {
			nets[bucket(m.FreeTS[i])].sub(sz)
		}
	}
	if thread != NoThread && int(thread) < len(m.Threads) {
		for _, i := range m.Threads[thread].allocs {
			add(i)
		}
	} else {
		for i := range m.TS {
			if proc >= 0 && m.Threads[m.Thread[i]].Proc != proc {
				continue
			}
			add(uint32(i))
		}
	}
	var live wide
	for k := range cells {
		cells[k].Net = nets[k].signed()
		live.addWide(nets[k])
		cells[k].Live = live.signed()
	}
	return cells
}

// TimeBucket is the bucket of time stamp t when the log's span is cut into
// n buckets (the timeline's columns).
func (m *Model) TimeBucket(t uint64, n int) int {
	if n <= 0 || t <= m.MinTS {
		return 0
	}
	return min(scaleIndex(t-m.MinTS, uint64(n), m.MaxTS-m.MinTS+1), n-1)
}

// Peak is the highest live byte count and when it was reached.
func (m *Model) Peak() (bytes uint64, ts uint64) {
	if m.SummaryOnly || len(m.TS) == 0 {
		return 0, 0
	}
	allocs := m.Order(SortTime)
	var frees []uint32
	for i := range m.TS {
		if m.FreeThread[i] != NoThread {
			frees = append(frees, uint32(i))
		}
	}
	radixSort(frees, func(i uint32) uint64 { return m.FreeTS[i] })
	var live wide
	j := 0
	for _, i := range allocs {
		for j < len(frees) && m.FreeTS[frees[j]] < m.TS[i] {
			live.sub(m.Size[frees[j]])
			j++
		}
		live.add(m.Size[i])
		if v := live.value(); v > bytes {
			bytes, ts = v, m.TS[i]
		}
	}
	return bytes, ts
}

// ThreadSort orders the thread summary.
type ThreadSort uint8

const (
	ThreadByName ThreadSort = iota
	ThreadByTID
	ThreadByAllocated
	ThreadByFreed
	ThreadByNet
	ThreadByLeaks
	NumThreadSorts
)

func (s ThreadSort) String() string {
	return [...]string{"Name", "TID", "Allocated", "Freed", "Net", "Leaks"}[s]
}

// ThreadOrder returns thread indexes sorted for the thread summary, only
// threads of process proc (-1: all).
func (m *Model) ThreadOrder(key ThreadSort, desc bool, proc int32) []int {
	idx := make([]int, 0, len(m.Threads))
	for i := range m.Threads {
		if proc < 0 || m.Threads[i].Proc == proc {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ta, tb := &m.Threads[a], &m.Threads[b]
		var c int
		switch key {
		case ThreadByName:
			c = cmp.Compare(ta.Name, tb.Name)
		case ThreadByTID:
			c = cmp.Compare(ta.TID, tb.TID)
		case ThreadByAllocated:
			c = cmp.Compare(ta.AllocBytes, tb.AllocBytes)
		case ThreadByFreed:
			c = cmp.Compare(ta.FreedBytes, tb.FreedBytes)
		case ThreadByNet:
			c = cmp.Compare(ta.LiveBytes, tb.LiveBytes)
		case ThreadByLeaks:
			_, la := m.ThreadLeaks(a)
			_, lb := m.ThreadLeaks(b)
			c = cmp.Compare(la, lb)
		}
		if c == 0 {
			c = cmp.Compare(ta.TID, tb.TID)
		}
		if desc {
			return -c
		}
		return c
	})
	return idx
}
