package agent

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/fdtrace"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/symbols"
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
		if p := s.procs[e.TGID]; p != nil && p.preExec {
			continue // memtrace's launcher, not the program
		}
		s.fds.Apply(e, s.writeFD)
	}
	s.pendingFD = append(s.pendingFD[:0], s.pendingFD[n:]...)
	emitUpTo(limit)
}

func cmpFD(a, b fdtrace.Event) int { return cmp.Compare(a.TS, b.TS) }

func (s *Session) writeFD(e *fdtrace.Event) {
	r := e.Record(s.cfg.StartNS)
	if len(e.Frames) > 0 {
		r.Stack = s.addrStack(int(e.TGID), e.Frames)
	}
	s.buf = logfmt.AppendFD(s.buf[:0], &r)
	s.write(s.buf)
}

// addrStack names raw user addresses through the process's recorded
// mappings: "open64 < main < __libc_start_call_main". Frame 0 is the
// interrupted instruction itself, the others return addresses.
func (s *Session) addrStack(pid int, frames []uint64) string {
	c := s.calls
	as := c.spaces[pid]
	if as == nil {
		s.KnownProcess(pid, false)
		as = c.spaces[pid]
	}
	var parts []string
	refreshed := false
	for i, a := range frames {
		name := ""
		look := a
		if i > 0 {
			look = a - 1
		}
		if as != nil {
			if _, ok := as.Lookup(look); !ok && !refreshed {
				// Mapped since the last look (a library the loader
				// was still opening, say): read the maps again.
				refreshed = true
				s.KnownProcess(pid, false)
			}
			if fr, err := as.Resolve(look, 0); err == nil || fr.Module != "" {
				name = symbols.Demangle(fr.Symbol)
				if name == "" {
					name = displayPath(fr.Module)
				}
			}
		}
		if name == "" {
			if i > 0 {
				break // a frame-pointer walk into garbage
			}
			name = "0x" + strconv.FormatUint(a, 16)
		}
		parts = append(parts, name)
	}
	return strings.Join(parts, " < ")
}

// fdLeaks writes the descriptors pid still holds as it exits.
func (s *Session) fdLeaks(pid uint32) []fdtrace.Open {
	if s.fds == nil {
		return nil
	}
	open := s.fds.Exit(pid)
	for _, o := range open {
		r := o.Record(pid, s.cfg.StartNS)
		s.buf = logfmt.AppendFD(s.buf[:0], &r)
		s.write(s.buf)
	}
	return open
}
