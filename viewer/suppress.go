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
