package analysis

import (
	"cmp"
	"slices"

	"github.com/memtrace/memtrace/logfmt"
)

// FDState is a descriptor's state, the descriptor view's St. column.
type FDState uint8

const (
	FDStateOpen   FDState = iota // not closed, its process still running
	FDStateLeak                  // open when its process exited, or at the end of the log
	FDStateClosed                // closed (by close, close_range, dup2 over it, execve, ...)
)

func (s FDState) String() string {
	switch s {
	case FDStateLeak:
		return "leak"
	case FDStateClosed:
		return "closed"
	}
	return "open"
}

// Descriptor is one file descriptor a traced process held: from its
// "fd event=open" line (or, when the open was not seen, from the tracer's
// "fd event=leak" line at the process's exit, or a fork's copy).
type Descriptor struct {
	Proc    int32 // index into Model.Procs
	PID     int64
	FD      int64
	Kind    string // file, socket, pipe, ... dmabuf, ion, unknown
	Call    string // the call that made it (openat, pipe2, dup, ioctl, ...)
	Path    string
	Cloexec bool
	TS      uint64 // when it was opened, µs since tracing started
	TID     int64  // the thread that opened it
	Thread  uint32 // that thread's index in Model.Threads, or NoThread when it never allocated

	// dma-buf and ION buffer descriptors: the buffer it holds.
	Buf  uint64 // the buffer's number in the session (buf=), 0 if none
	Size uint64 // the buffer's bytes
	Heap string // dma-heap name

	Closed    bool
	CloseTS   uint64
	CloseCall string // close, close_range, dup2, execve; "" when its number was reused without a close line
	CloseTID  int64

	Inherited  bool // copied from the parent at a fork, not opened by this process
	TracerLeak bool // the tracer listed it as open at its process's exit (fd event=leak)
	FromLeak   bool // known only from that leak line: its open was not in the log
}

// Buffer is one dma-heap or ION buffer (dmabuf/ion event=alloc).
type Buffer struct {
	Word     string // logfmt.WordDmabuf or logfmt.WordION
	Buf      uint64
	Proc     int32
	PID      int64
	FD       int64 // the buffer's descriptor, or -1 (legacy ION handle)
	Handle   int64 // legacy ION handle, or -1
	Size     uint64
	Heap     string
	TS       uint64
	TID      int64
	Released bool
}

// FDCounts are the descriptor lines read.
type FDCounts struct {
	Lines         int64 // fd, dmabuf and ion lines
	Opens, Closes int64
	UnknownCloses int64 // closes of numbers opened before tracing (kind=unknown, or never seen open)
	Reused        int64 // opens of a number the log still had open: its close was not seen
}

// fdState is the model's descriptor bookkeeping.
type fdState struct {
	descs   []Descriptor
	bufs    []Buffer
	open    map[fdKey]int32  // open descriptor by process and number
	bufIdx  map[uint64]int32 // buffer by buf= number
	handles map[fdKey]int32  // legacy ION buffer by process and handle
	counts  FDCounts
}

type fdKey struct {
	proc int32
	fd   int64
}

// Descriptors are every descriptor read, in log order (read only).
func (m *Model) Descriptors() []Descriptor { return m.fd.descs }

// Buffers are every dma-heap and ION buffer read, in log order (read only).
func (m *Model) Buffers() []Buffer { return m.fd.bufs }

// FDCounts are the descriptor lines read.
func (m *Model) FDCounts() FDCounts { return m.fd.counts }

// FDState is the state of descriptor i. A descriptor not closed is a leak
// once its process exited, the tracer listed it at that exit, or the log
// ended (a killed program writes no exit line); before that it is open.
func (m *Model) FDState(i int) FDState {
	d := &m.fd.descs[i]
	switch {
	case d.Closed:
		return FDStateClosed
	case m.Done || d.TracerLeak || (d.Proc >= 0 && int(d.Proc) < len(m.Procs) && m.Procs[d.Proc].Exited):
		return FDStateLeak
	}
	return FDStateOpen
}

// FDLeaks are the leaked descriptors of process proc (-1: all), ordered by
// process, then open time and number.
func (m *Model) FDLeaks(proc int32) []int {
	return m.SelectFDs(FilterLeaks, proc, NoThread)
}

// FDLeakCount is the number of leaked descriptors of process proc (-1: all),
// without building a list (for a header redrawn often).
func (m *Model) FDLeakCount(proc int32) int {
	n := 0
	for i := range m.fd.descs {
		if (proc < 0 || m.fd.descs[i].Proc == proc) && m.FDState(i) == FDStateLeak {
			n++
		}
	}
	return n
}

// SelectFDs lists descriptors by memview's filters: status (All, Leaks,
// Active = open, Freed = closed), process (-1: all) and thread (NoThread:
// all; a descriptor belongs to the thread that opened it). The order is
// process, open time, number.
func (m *Model) SelectFDs(status StatusFilter, proc int32, thread uint32) []int {
	var tid int64 = -1
	if thread != NoThread && int(thread) < len(m.Threads) {
		tid = m.Threads[thread].TID
	}
	var out []int
	for i := range m.fd.descs {
		d := &m.fd.descs[i]
		if proc >= 0 && d.Proc != proc {
			continue
		}
		if tid >= 0 && d.Thread != thread && (d.Thread != NoThread || d.TID != tid) {
			continue
		}
		st := m.FDState(i)
		switch status {
		case FilterLeaks:
			if st != FDStateLeak {
				continue
			}
		case FilterActive:
			if st != FDStateOpen {
				continue
			}
		case FilterFreed:
			if st != FDStateClosed {
				continue
			}
		case FilterUnknown:
			continue // descriptor records are not matched by address
		}
		out = append(out, i)
	}
	slices.SortStableFunc(out, func(a, b int) int {
		x, y := &m.fd.descs[a], &m.fd.descs[b]
		return cmp.Or(cmp.Compare(x.Proc, y.Proc), cmp.Compare(x.TS, y.TS), cmp.Compare(x.FD, y.FD))
	})
	return out
}

// BufferLeaks are the dma-heap and ION buffers of process proc (-1: all)
// never released while the process ran (or before the end of the log).
func (m *Model) BufferLeaks(proc int32) []int {
	var out []int
	for i := range m.fd.bufs {
		b := &m.fd.bufs[i]
		if b.Released || (proc >= 0 && b.Proc != proc) {
			continue
		}
		if m.Done || (b.Proc >= 0 && int(b.Proc) < len(m.Procs) && m.Procs[b.Proc].Exited) {
			out = append(out, i)
		}
	}
	return out
}

// applyFD reads an fd, dmabuf or ion line. The lines are in time order
// (the tracer sorts them), so a close always follows its open.
func (m *Model) applyFD(word, rest []byte) {
	r, err := logfmt.ParseFD(word, rest)
	if err != nil {
		// A descriptor line that does not parse is a bad line like any
		// other: counted, never fatal.
		m.Counts.Malformed++
		return
	}
	s := &m.fd
	s.counts.Lines++
	if s.open == nil {
		s.open = map[fdKey]int32{}
		s.bufIdx = map[uint64]int32{}
		s.handles = map[fdKey]int32{}
	}
	pi := m.proc(r.PID)
	switch r.Word {
	case logfmt.WordFD:
		switch r.Event {
		case logfmt.FDOpen:
			if r.FD < 0 {
				m.Counts.Malformed++
				return
			}
			s.counts.Opens++
			k := fdKey{pi, r.FD}
			if old, ok := s.open[k]; ok {
				// The number came back while we had it open: its close
				// was not logged (a process memtrace stopped tracing, a
				// lost record). It was closed, so it is not a leak.
				s.counts.Reused++
				od := &s.descs[old]
				od.Closed, od.CloseTS = true, r.TS
			}
			s.open[k] = m.addDesc(pi, &r)
		case logfmt.FDClose:
			s.counts.Closes++
			if r.Kind == "unknown" {
				s.counts.UnknownCloses++
			}
			m.closeFD(pi, r.FD, &r)
		case logfmt.FDCloseRange:
			// Only from a raw tracer record: every number we know in the
			// range closes.
			for k, i := range s.open {
				if k.proc == pi && k.fd >= r.First && (r.Last < 0 || k.fd <= r.Last) {
					m.closeFD(pi, s.descs[i].FD, &r)
				}
			}
		case logfmt.FDLeak:
			if r.FD < 0 {
				m.Counts.Malformed++
				return
			}
			k := fdKey{pi, r.FD}
			if i, ok := s.open[k]; ok {
				d := &s.descs[i]
				d.TracerLeak = true
				if d.Kind == "" || d.Kind == "unknown" {
					d.Kind = r.Kind
				}
				if d.Path == "" {
					d.Path = r.Path
				}
				if r.Buf != 0 && d.Buf == 0 {
					d.Buf, d.Size = r.Buf, r.Size
				}
				delete(s.open, k)
				return
			}
			// The tracer knew it and we did not (inherited at a fork, or
			// the log's start was cut): the tracer's word is the leak.
			i := m.addDesc(pi, &r)
			s.descs[i].TracerLeak, s.descs[i].FromLeak = true, true
		}
	case logfmt.WordDmabuf, logfmt.WordION:
		switch r.Event {
		case logfmt.BufAlloc:
			b := Buffer{Word: r.Word, Buf: r.Buf, Proc: pi, PID: r.PID, FD: r.FD, Handle: r.Handle, Size: r.Size, Heap: r.Heap, TS: r.TS, TID: r.TID}
			s.bufs = append(s.bufs, b)
			bi := int32(len(s.bufs) - 1)
			if r.Buf != 0 {
				s.bufIdx[r.Buf] = bi
			}
			if r.Handle >= 0 {
				s.handles[fdKey{pi, r.Handle}] = bi
			}
			if r.FD >= 0 {
				if i, ok := s.open[fdKey{pi, r.FD}]; ok {
					d := &s.descs[i]
					d.Buf, d.Size, d.Heap = r.Buf, r.Size, r.Heap
				}
			}
		case logfmt.BufRelease, logfmt.BufFree:
			bi, ok := s.bufIdx[r.Buf]
			if !ok || r.Buf == 0 {
				bi, ok = s.handles[fdKey{pi, r.Handle}]
			}
			if ok {
				s.bufs[bi].Released = true
				delete(s.handles, fdKey{s.bufs[bi].Proc, s.bufs[bi].Handle})
			}
		}
	}
}

// addDesc appends a descriptor made from line r of process pi.
func (m *Model) addDesc(pi int32, r *logfmt.FDRecord) int32 {
	th := NoThread
	if t, ok := m.threadIdx.get(uint64(r.TID)); ok && m.Threads[t].Proc == pi {
		th = uint32(t)
	}
	m.fd.descs = append(m.fd.descs, Descriptor{
		Proc: pi, PID: r.PID, FD: r.FD, Kind: r.Kind, Call: r.Call, Path: r.Path, Cloexec: r.Cloexec,
		TS: r.TS, TID: r.TID, Thread: th, Buf: r.Buf, Size: r.Size,
	})
	return int32(len(m.fd.descs) - 1)
}

func (m *Model) closeFD(pi int32, fd int64, r *logfmt.FDRecord) {
	k := fdKey{pi, fd}
	i, ok := m.fd.open[k]
	if !ok {
		if r.Kind != "unknown" {
			m.fd.counts.UnknownCloses++
		}
		return
	}
	delete(m.fd.open, k)
	d := &m.fd.descs[i]
	d.Closed, d.CloseTS, d.CloseCall, d.CloseTID = true, r.TS, r.Call, r.TID
}

// fdFork gives child a copy of parent's open descriptors, as fork does.
func (m *Model) fdFork(child, parent int32) {
	s := &m.fd
	if len(s.open) == 0 || child == parent {
		return
	}
	var copies []int32
	for k, i := range s.open {
		if k.proc == parent {
			copies = append(copies, i)
		}
	}
	// Map order is random: copy in number order so that ids do not depend on it.
	slices.SortFunc(copies, func(a, b int32) int { return cmp.Compare(s.descs[a].FD, s.descs[b].FD) })
	for _, i := range copies {
		d := s.descs[i]
		d.Proc, d.PID, d.Inherited, d.Thread = child, m.Procs[child].PID, true, NoThread
		s.descs = append(s.descs, d)
		s.open[fdKey{child, d.FD}] = int32(len(s.descs) - 1)
	}
}
