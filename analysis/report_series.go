package analysis

import "sort"

// LiveSeries returns the live bytes of process proc (-1: all processes) at
// each of times, which must be ascending: at time t an allocation is live
// when LiveAt(i, t). One pass over the allocations, for charts and massif
// snapshots at arbitrary times.
func (m *Model) LiveSeries(proc int32, times []uint64) []uint64 {
	out := make([]uint64, len(times))
	if len(times) == 0 || m.SummaryOnly {
		return out
	}
	d := make([]wide, len(times)+1)
	for i := range m.TS {
		if proc >= 0 && m.Threads[m.Thread[i]].Proc != proc {
			continue
		}
		a := sort.Search(len(times), func(k int) bool { return times[k] >= m.TS[i] })
		b := len(times)
		if m.FreeThread[i] != NoThread {
			b = a + sort.Search(len(times)-a, func(k int) bool { return times[a+k] >= m.FreeTS[i] })
		}
		if a < b {
			d[a].add(m.Size[i])
			d[b].sub(m.Size[i])
		}
	}
	var live wide
	for k := range out {
		live.addWide(d[k])
		out[k] = live.value()
	}
	return out
}
