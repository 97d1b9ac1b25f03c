package report

import (
	"cmp"
	"iter"
	"slices"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/ranking"
)

// Rankings: the figures of a site as signed numbers, and the top sites
// by each of heaptrack_print's measures.

// figs are a site's figures as signed numbers, so that a comparison's
// deltas rank and print like the figures themselves: every
// ranking.Figure, by its number.
type figs [numFigs]int64

const (
	fCalls     = int(ranking.Calls)
	fBytes     = int(ranking.AllocatedBytes)
	fTemp      = int(ranking.TemporaryCalls)
	fTempBytes = int(ranking.TemporaryBytes)
	fPeakCount = int(ranking.PeakCount)
	fPeak      = int(ranking.PeakBytes)
	fLeaks     = int(ranking.Leaks)
	fLeaked    = int(ranking.LeakedBytes)
	numFigs    = int(ranking.NumFigures)
)

func figsOf(c *analysis.CostFigures) figs {
	var f figs
	if c == nil {
		return f
	}
	for k := range f {
		f[k] = int64(c.Figure(ranking.Figure(k)))
	}
	return f
}

// add merges o into f, each figure by its rule.
func (f *figs) add(o figs) {
	for i := range f {
		if ranking.Figure(i).Merge() == ranking.Max {
			f[i] = max(f[i], o[i])
		} else {
			f[i] = analysis.SatAddSigned(f[i], o[i])
		}
	}
}

// addTruncations adds b's counts to a's, reason by reason, most stacks first.
func addTruncations(a, b []analysis.Truncation) []analysis.Truncation {
	for _, t := range b {
		k := slices.IndexFunc(a, func(x analysis.Truncation) bool { return x.Reason == t.Reason })
		if k < 0 {
			a = append(a, t)
			continue
		}
		a[k].Stacks += t.Stacks
		a[k].Events += t.Events
	}
	slices.SortStableFunc(a, func(x, y analysis.Truncation) int {
		return cmp.Or(cmp.Compare(y.Stacks, x.Stacks), cmp.Compare(y.Events, x.Events), cmp.Compare(x.Reason, y.Reason))
	})
	return a
}

func (f figs) sub(o figs) figs {
	for i := range f {
		f[i] -= o[i]
	}
	return f
}

// metric is one ranking: its row in ranking.Rankings.
type metric int

func (mt metric) desc() *ranking.Ranking { return &ranking.Rankings[mt] }

func numMetrics() metric { return metric(len(ranking.Rankings)) }

func (mt metric) fig() int { return int(mt.desc().Figure) }

// tie is the figure that breaks equal costs: the other one on the line.
func (mt metric) tie() int { return int(mt.desc().Tie) }

// merge is mt's cost of a and b together.
func (mt metric) merge(a, b int64) int64 {
	if mt.desc().Figure.Merge() == ranking.Max {
		return max(a, b)
	}
	return analysis.SatAddSigned(a, b)
}

// entry is a site with its figures (or, in a comparison, their deltas).
type entry struct {
	site int32
	f    figs
}

func entriesOf(s *section) []entry {
	out := make([]entry, 0, len(s.bySite))
	for id, c := range s.bySite {
		out = append(out, entry{id, figsOf(c)})
	}
	return out
}

// diffEntries is after minus base, per site, for sites in either.
func diffEntries(after, base *section) []entry {
	out := make([]entry, 0, len(after.bySite))
	for id, c := range after.bySite {
		out = append(out, entry{id, figsOf(c).sub(figsOf(base.bySite[id]))})
	}
	for id, c := range base.bySite {
		if after.bySite[id] == nil {
			out = append(out, entry{id, figs{}.sub(figsOf(c))})
		}
	}
	return out
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// rank returns the entries with a non-zero cost, largest (in absolute
// value, for deltas) first, at most n (n <= 0: all).
func rank(t *siteTable, es []entry, mt metric, n int) []entry {
	k, tie := mt.fig(), mt.tie()
	var out []entry
	for _, e := range es {
		if e.f[k] != 0 {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b entry) int {
		if c := cmp.Compare(abs(b.f[k]), abs(a.f[k])); c != 0 {
			return c
		}
		if c := cmp.Compare(abs(b.f[tie]), abs(a.f[tie])); c != 0 {
			return c
		}
		return t.compareKeys(a.site, b.site)
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// group is heaptrack_print's merged entry: the stacks that share their
// innermost frame (the function that called the allocation function).
type group struct {
	f figs // of the sites with a cost in the ranking
	// calls is every site's allocation calls, the function's own total
	// (one figure, not a figs: a log of many distinct functions has as
	// many groups)
	calls int64
	sites []entry // costliest first
}

// head is the figures an entry's first line gives: the ranking's cost
// over its stacks, and for temporary allocations the function's total of
// allocations, every stack's (heaptrack_print's "of N allocations in
// total"), not only those of the stacks that had temporaries.
func (g *group) head(mt metric) figs {
	f := g.f
	if mt.desc().AllCalls {
		f[fCalls] = g.calls
	}
	return f
}

// sectionEntries is entriesOf(s) without making the list: a log of many
// distinct stacks has about as many sites, and groups takes what it shows.
func sectionEntries(s *section) iter.Seq[entry] {
	return func(yield func(entry) bool) {
		for id, c := range s.bySite {
			if !yield(entry{id, figsOf(c)}) {
				return
			}
		}
	}
}

// groups folds ranked-to-be entries by innermost frame and ranks the
// groups by mt; each group's stacks are ranked too. Only the n groups
// shown get their stacks gathered: a log of many distinct functions has
// as many groups, and a list of stacks for each was most of the report's
// memory while it wrote its rankings. What comes out does not depend on
// the order of es, which may be a map's.
func groups(t *siteTable, es iter.Seq[entry], mt metric, n int) []group {
	k, tie := mt.fig(), mt.tie()
	// What a group is ranked by, for every group.
	type acc struct {
		cost, tie, calls int64
		first            int32 // a site of it (they share their group's key)
		sites            int32
	}
	var byKey []int32 // group key → group + 1; 0: none
	groupOf := func(e entry) *int32 {
		key := t.groupKey(e.site)
		if int(key) >= len(byKey) {
			byKey = append(byKey, make([]int32, max(int(key)+1, t.names.Len())-len(byKey))...)
		}
		return &byKey[key]
	}
	var accs []acc
	for e := range es {
		if e.f[k] == 0 {
			continue
		}
		g := groupOf(e)
		if *g == 0 {
			accs = append(accs, acc{first: e.site})
			*g = int32(len(accs))
		}
		a := &accs[*g-1]
		a.cost = mt.merge(a.cost, e.f[k])
		a.tie = analysis.SatAddSigned(a.tie, e.f[tie])
		a.sites++
		if t.compareKeys(e.site, a.first) < 0 {
			a.first = e.site
		}
	}
	// Only some rankings' heads show every site's calls.
	if mt.desc().AllCalls {
		for e := range es {
			if g := *groupOf(e); g > 0 {
				accs[g-1].calls += e.f[fCalls]
			}
		}
	}
	order := make([]int32, len(accs))
	for g := range order {
		order[g] = int32(g)
	}
	slices.SortFunc(order, func(x, y int32) int {
		a, b := &accs[x], &accs[y]
		if c := cmp.Compare(abs(b.cost), abs(a.cost)); c != 0 {
			return c
		}
		if c := cmp.Compare(abs(b.tie), abs(a.tie)); c != 0 {
			return c
		}
		return t.compareKeys(a.first, b.first)
	})
	if n > 0 && len(order) > n {
		order = order[:n]
	}
	at := make(map[int32]int, len(order)) // group → its place among those shown
	gs := make([]group, len(order))
	for i, g := range order {
		at[g] = i
		gs[i] = group{calls: accs[g].calls, sites: make([]entry, 0, accs[g].sites)}
	}
	for e := range es {
		if e.f[k] == 0 {
			continue
		}
		if j, ok := at[*groupOf(e)-1]; ok {
			gs[j].f.add(e.f)
			gs[j].sites = append(gs[j].sites, e)
		}
	}
	for i := range gs {
		gs[i].sites = rank(t, gs[i].sites, mt, 0)
	}
	return gs
}
