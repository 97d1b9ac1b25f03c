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
	sups        []*analysis.Suppression
	ready       bool
	events      int64
	allocs      int
	done        bool
	leaks       int64
	leakedBytes uint64
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

// suppressed returns the leaks the built-in suppressions hide; the caller
// holds a.Mu.
func (a *App) suppressed() (int64, uint64) {
	if a.opt.NoBuiltinSuppressions {
		return 0, 0
	}
	c := &a.supp
	m := a.M
	if c.sups == nil {
		c.sups = analysis.BuiltinSuppressions()
	}
	changed := !c.ready || c.allocs != m.Len() || c.events != m.Counts.Events || c.done != m.Done
	if changed && (!c.ready || m.Done || time.Since(c.at) >= suppRecount) {
		c.leaks, c.leakedBytes = m.SuppressedLeaks(c.sups)
		c.ready, c.allocs, c.events, c.done, c.at = true, m.Len(), m.Counts.Events, m.Done, time.Now()
	}
	return c.leaks, c.leakedBytes
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
