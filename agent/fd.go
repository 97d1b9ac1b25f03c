package agent

import (
	"slices"

	"github.com/memtrace/memtrace/fdtrace"
	"github.com/memtrace/memtrace/logfmt"
)

// AddFD queues a descriptor event from fdtrace; it is written in time
// order with the allocation events.
func (s *Session) AddFD(e *fdtrace.Event) {
	if s.fds == nil {
		return
	}
	s.pendingFD = append(s.pendingFD, *e)
}

// drainFD writes the queued descriptor events older than limit (all when
// all is set), interleaved by time with the allocation events emitted by
// emitUpTo.
func (s *Session) drainFD(limit uint64, all bool, emitUpTo func(ts uint64)) {
	if len(s.pendingFD) == 0 {
		emitUpTo(limit)
		return
	}
	if !slices.IsSortedFunc(s.pendingFD, cmpFD) {
		slices.SortStableFunc(s.pendingFD, cmpFD)
	}
	n := 0
	for ; n < len(s.pendingFD); n++ {
		e := &s.pendingFD[n]
		if !all && e.TS > limit {
			break
		}
		emitUpTo(e.TS)
		s.fds.Apply(e, s.writeFD)
	}
	s.pendingFD = append(s.pendingFD[:0], s.pendingFD[n:]...)
	emitUpTo(limit)
}

func cmpFD(a, b fdtrace.Event) int {
	switch {
	case a.TS < b.TS:
		return -1
	case a.TS > b.TS:
		return 1
	}
	return 0
}

func (s *Session) writeFD(e *fdtrace.Event) {
	word, kvs := e.Meta(s.cfg.StartNS)
	s.Meta(word, kvs...)
}

// fdLeaks writes the descriptors pid still holds as it exits.
func (s *Session) fdLeaks(pid uint32) []fdtrace.Open {
	if s.fds == nil {
		return nil
	}
	open := s.fds.Exit(pid)
	for _, o := range open {
		word, kvs := o.Meta(pid, s.cfg.StartNS)
		s.Meta(word, kvs...)
	}
	return open
}

var _ = logfmt.WordFD
