package viewer

import (
	"strconv"
	"time"

	"github.com/memtrace/memtrace/analysis"
)

// suppCache is the leaks the built-in suppressions take out of the
// header's figure (analysis.BuiltinSuppressions, the report's list),
// recounted only when the model changed: the header is drawn at every key.
type suppCache struct {
	sups   []*analysis.Suppression
	ready  bool
	events int64
	allocs int
	done   bool
	// leaks and leakedBytes are per thread, indexed as Model.Threads
	// (shorter while a followed log grows: a thread past them has none).
	leaks       []int64
	leakedBytes []uint64
	at          time.Time // when last counted
	// byStack: whether a stack is suppressed, for the Leaks filter's rows
	// (a stack's frames never change once logged).
	byStack map[uint32]bool
}

// dropSuppressed removes from the Leaks filter's rows the blocks the
// built-in suppressions hide, as the report leaves them out of its leaks
// (they are counted in the header instead); the caller holds a.Mu.
func (a *App) dropSuppressed(sel []uint32) []uint32 {
	if a.opt.NoBuiltinSuppressions || a.q.Status != analysis.FilterLeaks {
		return sel
	}
	c := &a.supp
	if c.sups == nil {
		c.sups = analysis.BuiltinSuppressions()
	}
	if c.byStack == nil {
		c.byStack = map[uint32]bool{}
	}
	m := a.M
	out := sel[:0]
	for _, id := range sel {
		st := m.Stack[id]
		sup, ok := c.byStack[st]
		if !ok {
			sup = m.StackSuppressed(c.sups, st)
			c.byStack[st] = sup
		}
		if !sup {
			out = append(out, id)
		}
	}
	return out
}

// suppRecount is how often a growing log's suppressed leaks are counted
// again: the count walks every allocation, and a followed log changes at
// every batch.
const suppRecount = time.Second

// suppressed returns the leaks the built-in suppressions hide, per thread
// (nil with --disable-builtin-suppressions); the caller holds a.Mu.
func (a *App) suppressed() ([]int64, []uint64) {
	if a.opt.NoBuiltinSuppressions {
		return nil, nil
	}
	c := &a.supp
	m := a.M
	if c.sups == nil {
		c.sups = analysis.BuiltinSuppressions()
	}
	changed := !c.ready || c.allocs != m.Len() || c.events != m.Counts.Events || c.done != m.Done
	if changed && (!c.ready || m.Done || time.Since(c.at) >= suppRecount) {
		c.leaks, c.leakedBytes = m.ThreadSuppressedLeaks(c.sups)
		c.ready, c.allocs, c.events, c.done, c.at = true, m.Len(), m.Counts.Events, m.Done, time.Now()
	}
	return c.leaks, c.leakedBytes
}

// threadLeaks is thread i's leaks with the suppressed ones (supN, supB, as
// ThreadSuppressedLeaks gives them) taken out, and what was taken out. The
// header, the thread pane and --dump-threads all count through it, so
// that each thread's figure and the total agree: nothing is taken out of
// a thread whose suppressed blocks are not all among its leaks (a
// followed log counted at different moments).
func threadLeaks(m *analysis.Model, i int, supN []int64, supB []uint64) (n int64, b uint64, sn int64, sb uint64) {
	n, b = m.ThreadLeaks(i)
	if i < len(supN) && i < len(supB) && supN[i] > 0 && supN[i] <= n && supB[i] <= b {
		return n - supN[i], b - supB[i], supN[i], supB[i]
	}
	return n, b, 0, 0
}

// leaksOf adds threadLeaks up over the threads.
func leaksOf(m *analysis.Model, supN []int64, supB []uint64) (n int64, b uint64, sn int64, sb uint64) {
	for i := range m.Threads {
		ln, lb, lsn, lsb := threadLeaks(m, i, supN, supB)
		n, b = n+ln, analysis.SatAdd(b, lb)
		sn, sb = sn+lsn, analysis.SatAdd(sb, lsb)
	}
	return n, b, sn, sb
}

// SuppressedText is "+1 suppressed (72.70K)" after the leak figure, ""
// when none.
func (h *Header) SuppressedText() string {
	if h.Suppressed == 0 {
		return ""
	}
	return "+" + strconv.FormatInt(h.Suppressed, 10) + " suppressed (" + Bytes(h.SuppressedBytes) + ")"
}

// liveOf is analysis.Model.LiveOf once the log has ended: while a -p
// run's log still grows, its process has not been let go yet, and a log
// still being written is not cut. The caller holds a.Mu.
func (a *App) liveOf(proc int32) analysis.Live {
	m := a.M
	if !m.Done && !m.Ended {
		return analysis.LiveLeaked
	}
	return m.LiveOf(proc)
}
