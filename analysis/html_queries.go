package analysis

import "sort"

// Queries of the HTML report: a size histogram with round bounds and live
// bytes over time per class of allocation (the report's call sites).

// RoundSizeBounds are the upper bounds of SizeHistogram's buckets: 1, 2, 5
// × 10^k bytes, the round numbers of the 1000-based unit people read
// (internal/units), up to 5 EB; the last bucket, ^uint64(0), holds the rest.
var RoundSizeBounds = func() []uint64 {
	var out []uint64
	for p := uint64(1); p <= 1e18; p *= 10 {
		out = append(out, p, 2*p, 5*p)
	}
	return append(out, ^uint64(0))
}()

// SizeHistogram counts the allocations of process proc (-1: all) by size,
// in buckets bounded by RoundSizeBounds: bucket k holds the sizes in
// (RoundSizeBounds[k-1], RoundSizeBounds[k]], bucket 0 the sizes 0 and 1.
func (m *Model) SizeHistogram(proc int32) []Bucket {
	out := make([]Bucket, len(RoundSizeBounds))
	for k := range out {
		out[k].Max = RoundSizeBounds[k]
	}
	if m.SummaryOnly {
		return out
	}
	for i := range m.TS {
		if proc >= 0 && m.Threads[m.Thread[i]].Proc != proc {
			continue
		}
		sz := m.Size[i]
		k := sort.Search(len(RoundSizeBounds), func(k int) bool { return RoundSizeBounds[k] >= sz })
		out[k].Count++
		out[k].Bytes = satAdd(out[k].Bytes, sz)
	}
	return out
}

// LiveSeriesBy is LiveSeries split by class: out[c][k] is the live bytes
// at times[k] (ascending) of process proc's allocations i with class(i)
// == c, for c in [0, n); class(i) < 0 leaves i out. One pass, n series.
func (m *Model) LiveSeriesBy(proc int32, times []uint64, n int, class func(i uint32) int) [][]uint64 {
	out := make([][]uint64, n)
	for c := range out {
		out[c] = make([]uint64, len(times))
	}
	if len(times) == 0 || n == 0 || m.SummaryOnly {
		return out
	}
	d := make([][]wide, n)
	for c := range d {
		d[c] = make([]wide, len(times)+1)
	}
	for i := range m.TS {
		if proc >= 0 && m.Threads[m.Thread[i]].Proc != proc {
			continue
		}
		c := class(uint32(i))
		if c < 0 || c >= n {
			continue
		}
		a := sort.Search(len(times), func(k int) bool { return times[k] >= m.TS[i] })
		b := len(times)
		if m.FreeThread[i] != NoThread {
			b = a + sort.Search(len(times)-a, func(k int) bool { return times[a+k] >= m.FreeTS[i] })
		}
		if a < b {
			d[c][a].add(m.Size[i])
			d[c][b].sub(m.Size[i])
		}
	}
	for c := range out {
		var live wide
		for k := range out[c] {
			live.addWide(d[c][k])
			out[c][k] = live.value()
		}
	}
	return out
}
