package agent

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memtrace/memtrace/event/fdevent"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/symbols"
)

// AddFD queues a descriptor event (fdevent, the fd capture's); it is written in time
// order with the allocation events.
func (s *Session) AddFD(e *fdevent.Event) {
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
		// The event's stack record comes through the allocation
		// tracer's ring, read apart from the descriptors' ring: on a
		// loaded machine that reader can be behind the window, and the
		// line would go out with no stack. It waits for its stack (and
		// every event after it for it), for at most fdStackWait; a
		// stack that never comes was lost (counted) with a full ring.
		if !all && e.Stack != 0 && s.stacks[e.Stack] == nil && limit < e.TS+fdStackWait {
			// Nothing newer goes out before it either: the log
			// stays in time order.
			limit = e.TS - 1
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

func cmpFD(a, b fdevent.Event) int { return cmp.Compare(a.TS, b.TS) }

// fdStackWait bounds how long past the window a descriptor event waits
// for its stack record (drainFD), in the events' clock (ns).
const fdStackWait = uint64(5 * time.Second)

func (s *Session) writeFD(e *fdevent.Event) {
	s.noteFDProc(e.TGID)
	r := FDRecord(e, s.cfg.StartNS)
	r.Stack = s.fdStack(e.Stack)
	s.buf = logfmt.AppendFD(s.buf[:0], &r)
	s.write(s.buf)
}

// fdStack is the stack= text of a descriptor line: the frames of the
// stack record the kernel side sent for it, resolved as an allocation's
// frames are (by file and offset), demangled, innermost first; a frame
// without a symbol is MODULE(+0xOFF), as glibc prints it. Descriptor
// lines carry their stack on the line, not as frame lines after it:
// memtrack's readers and the analysis give frame lines to the last
// alloc or free line before them.
func (s *Session) fdStack(id uint64) string {
	if id == 0 {
		return ""
	}
	si := s.stacks[id]
	if si == nil {
		s.Stats.StacksMissing++
		return ""
	}
	if !si.resolved {
		s.resolve(si)
	}
	parts := make([]string, 0, len(si.frames))
	for _, f := range si.frames {
		switch {
		case f.Symbol != "":
			parts = append(parts, symbols.Demangle(f.Symbol))
		case f.Module != "":
			parts = append(parts, displayPath(f.Module)+"(+0x"+strconv.FormatUint(f.Offset, 16)+")")
		default:
			parts = append(parts, "0x"+strconv.FormatUint(f.Addr, 16))
		}
	}
	return strings.Join(parts, " < ")
}

// fdLeaks writes the descriptors pid still holds as it exits.
func (s *Session) fdLeaks(pid uint32) []fdevent.Open {
	if s.fds == nil {
		return nil
	}
	open := s.fds.Exit(pid)
	if len(open) > 0 {
		if s.fdLeaked == nil {
			s.fdLeaked = map[uint32]bool{}
		}
		s.fdLeaked[pid] = true
	}
	for _, o := range open {
		r := fdLeakRecord(o, pid, s.cfg.StartNS)
		r.Stack = s.fdStack(o.Stack)
		s.buf = logfmt.AppendFD(s.buf[:0], &r)
		s.write(s.buf)
	}
	return open
}

// noteFDProc records that the log has descriptors of pid (Figures).
func (s *Session) noteFDProc(pid uint32) {
	if s.fdProcs == nil {
		s.fdProcs = map[uint32]bool{}
	}
	s.fdProcs[pid] = true
}
