package agent

import (
	fig "github.com/memtrace/memtrace/internal/figures"
	"github.com/memtrace/memtrace/internal/peak"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/symbols"
)

// The closing figures, from what the session wrote: the same model of the
// log that `memtrace report` builds when it reads it back
// (analysis.ReportCosts, report's summary), kept as the lines are written
// so that the end of a run reads nothing back. Where the agent's table of
// live blocks and the report's model part (a block the agent forgets but
// the log never frees: its address allocated again, a free left out of
// the log, an exec's old image), the block is kept here as a ghost, live
// as the report keeps it.

// procFigures is one process's part of the figures.
type procFigures struct {
	calls int64
	heap  peak.Live
	// ghosts are blocks live in the log that the agent's table no
	// longer holds, by address, newest last: a logged free of an
	// address the table does not know is theirs, as the report matches
	// it to the newest live block there.
	ghosts map[uint64][]ghost
}

type ghost struct {
	size, stack uint64
	mapping     bool
	// takenAt: when another allocation took its address while the table
	// held it (the event's own nanoseconds: a log microsecond holds
	// several events), 0 when the table lost it otherwise
	// (an exec, a free left out of the log). A free timed before it is
	// the block's own, sent late (Session.free).
	takenAt uint64
	// superseded: a later allocation of the same kind took its address,
	// so its free was among the lost records (analysis.Model.IsUnknown):
	// not a leak when the tracer lost records.
	superseded bool
}

// procEnd is what the log's process lines say of a process's end.
type procEnd struct {
	exited, hasStatus, attached bool
	status                      int
	signal                      string
}

func (s *Session) noteProc(p *logfmt.Proc) {
	if p.Event == logfmt.ProcUntraced {
		if s.untraced == nil {
			s.untraced = map[uint32]string{}
		}
		s.untraced[uint32(p.PID)] = p.Reason
		return
	}
	if p.Event != logfmt.ProcExit && p.Event != logfmt.ProcAttach {
		return
	}
	if s.ends == nil {
		s.ends = map[uint32]*procEnd{}
	}
	e := s.ends[uint32(p.PID)]
	if e == nil {
		e = &procEnd{}
		s.ends[uint32(p.PID)] = e
	}
	if p.Event == logfmt.ProcAttach {
		e.attached = true
		return
	}
	e.exited, e.signal = true, p.Signal
	if p.HasStatus {
		e.hasStatus, e.status = true, p.Status
	}
}

// replace is called before the table takes a new block at ptr: a logged
// block there lost its free, and the log still holds it live.
func (s *Session) replace(p *process, ptr, ts uint64) {
	if b, ok := p.live[ptr]; ok {
		p.figs.keep(ptr, b)
		if gs := p.figs.ghosts[ptr]; len(gs) > 0 {
			gs[len(gs)-1].takenAt = ts
		}
	}
}

// lateFree returns the size of the block at ptr whose free, timed at ts
// (event nanoseconds), comes after another allocation took its address: the newest ghost
// there, when that allocation came after ts.
func (f *procFigures) lateFree(ptr, ts uint64) (size uint64, ok bool) {
	gs := f.ghosts[ptr]
	if ptr == 0 || len(gs) == 0 {
		return 0, false
	}
	g := gs[len(gs)-1]
	if g.takenAt == 0 || ts >= g.takenAt {
		return 0, false
	}
	return g.size, true
}

// keep makes the table's block b at ptr a ghost, if the log has it as
// this process's block.
func (f *procFigures) keep(ptr uint64, b liveBlock) {
	if b.v&(filteredBit|inheritedBit) != 0 {
		return
	}
	if f.ghosts == nil {
		f.ghosts = map[uint64][]ghost{}
	}
	f.ghosts[ptr] = append(f.ghosts[ptr], ghost{size: b.v & sizeMask, stack: b.stack, mapping: b.v&mappingBit != 0})
}

// alloc counts a logged allocation; the report supersedes the newest
// block of the same kind live at its address (analysis's supersede).
func (f *procFigures) alloc(ptr, size, ts uint64, mapping bool) {
	f.calls++
	f.heap.Alloc(size, ts)
	if len(f.ghosts) == 0 || ptr == 0 {
		return
	}
	gs := f.ghosts[ptr]
	for k := len(gs) - 1; k >= 0; k-- {
		if gs[k].mapping == mapping {
			gs[k].superseded = true
			return
		}
	}
}

// free counts a logged free: of the table's block b when known (and the
// process's own), else of the newest ghost at ptr. The report never
// matches a free of address 0.
func (f *procFigures) free(ptr uint64, b liveBlock, known bool) {
	if ptr == 0 {
		if known {
			f.keep(ptr, b)
		}
		return
	}
	if known {
		if b.v&inheritedBit == 0 {
			f.heap.Free(b.v & sizeMask)
		}
		return
	}
	gs := f.ghosts[ptr]
	if len(gs) == 0 {
		return
	}
	f.heap.Free(gs[len(gs)-1].size)
	if len(gs) == 1 {
		delete(f.ghosts, ptr)
	} else {
		f.ghosts[ptr] = gs[:len(gs)-1]
	}
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a && s <= peak.MaxBytes {
		return s
	}
	return peak.MaxBytes
}

// leakCounter adds up leaks, taking out those the built-in suppressions
// match by their stacks' frames, as the report does.
type leakCounter struct {
	s       *Session
	sups    []*fig.Suppression
	matched map[uint64]bool
	lost    bool
	f       *fig.Figures
}

func (c *leakCounter) add(size, stack uint64, superseded bool) {
	if superseded && c.lost {
		return // unknown, not a leak (analysis.StatusUnknown)
	}
	if c.suppressed(stack) {
		c.f.Suppressed++
		c.f.SuppressedBytes = satAdd(c.f.SuppressedBytes, size)
		return
	}
	c.f.Leaks++
	c.f.LeakedBytes = satAdd(c.f.LeakedBytes, size)
}

func (c *leakCounter) suppressed(stack uint64) bool {
	if stack == 0 {
		return false
	}
	if m, ok := c.matched[stack]; ok {
		return m
	}
	var m bool
	if si := c.s.stacks[stack]; si != nil {
		if !si.resolved {
			c.s.resolve(si)
		}
		fr := make([]fig.SuppFrame, len(si.frames))
		for i, f := range si.frames {
			fr[i] = fig.SuppFrame{Mangled: f.Symbol, Module: f.Module}
			if f.Symbol != "" {
				fr[i].Name = symbols.Demangle(f.Symbol)
			}
		}
		m = fig.MatchSuppression(c.sups, fr) != nil
	}
	c.matched[stack] = m
	return m
}

// Figures are the closing figures of what the session wrote so far, as
// `memtrace report` gives them for the finished log (call it after
// Summary): calls, the sum of each process's peak, the blocks still
// live as leaks (or still allocated), the built-in suppressions taken out,
// lost records, and how a single process's run ended.
//
// One case the report decides with more than the agent keeps: with lost
// records the report also takes out of the leaks a block that a later
// allocation overlaps (analysis's markOverlaps, over every allocation of
// the log); the agent takes out only those whose address was allocated
// again, so its leaks may count more.
func (s *Session) Figures() fig.Figures {
	var f fig.Figures
	lost := s.Stats.Lost
	c := &leakCounter{s: s, sups: fig.BuiltinSuppressions(), matched: map[uint64]bool{}, lost: lost > 0, f: &f}
	sections := 0
	alive := true
	var live fig.Live
	var end string
	for pid, p := range s.procs {
		pf := &p.figs
		if pf.calls == 0 {
			continue
		}
		f.Calls += pf.calls
		f.PeakBytes = satAdd(f.PeakBytes, pf.heap.Peak())
		for _, b := range p.live {
			if b.v&(filteredBit|inheritedBit) != 0 {
				continue
			}
			c.add(b.v&sizeMask, b.stack, false)
		}
		for _, gs := range pf.ghosts {
			for _, g := range gs {
				c.add(g.size, g.stack, g.superseded)
			}
		}
		text, l := s.procEnd(pid)
		if sections == 0 {
			live = l
		} else if l == fig.LiveLeaked || live == fig.LiveLeaked {
			live = fig.LiveLeaked
		} else {
			live = max(live, l)
		}
		alive = alive && l != fig.LiveLeaked
		end = text
		sections++
	}
	// A process that leaked descriptors but made no allocation has a
	// section of its own in the report (its end and live blocks not
	// said: its blocks count as leaks).
	for pid := range s.fdProcs {
		if p := s.procs[pid]; p != nil && p.figs.calls > 0 {
			continue
		}
		if s.fdLeaked[pid] || s.fds != nil && len(s.fds.Open(pid)) > 0 {
			sections++
			alive = false
			live = fig.LiveLeaked
			end = ""
		}
	}
	if sections == 1 {
		f.End = end
	}
	f.StillAllocated = sections > 0 && alive
	if f.StillAllocated {
		f.LiveWords = live.Words()
	}
	f.Lost = int64(lost)
	f.Caveat = fig.Caveat(f.Lost, f.Leaks)
	for _, r := range s.untraced {
		f.Untraced++
		if r == logfmt.ReasonNotFollowed {
			f.NotFollowed++
		}
	}
	return f
}

// InOrder reports whether every event was written in time order (log
// microseconds). When one came late (a thread preempted past the merge
// window), the report reads the log otherwise (the preload source sorts
// the file afterwards, the report re-matches an unordered one), and
// Figures, counted in the order written, may differ from its figures.
func (s *Session) InOrder() bool { return !s.late }

// procEnd is analysis.Model.ProcEnd, the one decision (figures.EndOf), for
// a log this session wrote to its end (header and summary lines, nothing
// cut).
func (s *Session) procEnd(pid uint32) (string, fig.Live) {
	var pr fig.ProcEnd
	if e := s.ends[pid]; e != nil {
		pr = fig.ProcEnd{Exited: e.exited, HasStatus: e.hasStatus, ExitStatus: e.status, ExitSignal: e.signal, Attached: e.attached}
	}
	return fig.EndOf(pr, fig.LogEnd{Lost: int64(s.Stats.Lost), Header: s.header, Ended: s.ended})
}
