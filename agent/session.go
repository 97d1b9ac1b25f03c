package agent

import (
	"cmp"
	"io"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/event/fdevent"
	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/internal/stackz"
	"github.com/memtrace/memtrace/logfmt"
)

// Config is what a Session needs to know.
type Config struct {
	Out io.Writer
	// NoText: there is no log (-o none, with --http or --profile-dir):
	// no line is formatted, the Observer still gets every event and
	// stack.
	NoText       bool
	MinSize      uint64
	TrackThreads []string
	// StartNS is CLOCK_MONOTONIC at the start of tracing: log timestamps
	// count microseconds from it.
	StartNS uint64
	// StackDepth is the depth asked for, to tell a stack cut by depth
	// from one cut by a broken frame-pointer chain.
	StackDepth int
	// NoFreeStacks: free lines are written without their frames (the
	// kernel side takes none then; the LD_PRELOAD library still does).
	NoFreeStacks bool
	// OnProcess is called as soon as a fork or exec event is read (before
	// it is put in time order), to probe the new process or image.
	OnProcess func(e *event.Event)
	// LetGo, when set, is asked after OnProcess of an exec: true when the
	// runner left that process untraced (a selector's match past
	// --max-procs, a program with no allocator), whose exec is then
	// dropped: it never was a process of the run.
	LetGo func(pid uint32) bool
	// ProcessExited is called when a traced process's main thread exits.
	ProcessExited func(pid uint32)
	// Track says what is logged (default malloc,mmap); fd, dmabuf and
	// ion events come through AddFD. MmapFiles logs file mappings too.
	Track     config.Track
	MmapFiles bool
	// Reports keeps per-process figures (current, peak, the call stacks
	// live at the peak and at exit) for Snapshot and Report.
	Reports  bool
	PeakTopN int
	// Interval writes a snapshot at every multiple of it on the log's
	// time axis (from StartNS; SnapshotsUntil): the figures of every
	// event before that time, however far behind the program the
	// writing is.
	Interval time.Duration
	// Window is how long events are held to be put in time order across
	// CPUs; 0 means DefaultWindow.
	Window time.Duration
	// InProcess says the events come from a library inside the traced
	// processes (the LD_PRELOAD path, through Emit): its stacks come
	// named (ResolvedStack), so /proc is not read for them; a free of a
	// block it never saw (ld.so's, libc's own) is logged with size 0,
	// as its text mode does, but not under --min-size; and a thread's
	// events after its EXIT (its TLS destructors) are still its own.
	InProcess bool
	// Observer, when set, is told what is logged (blocks allocated and
	// freed, stacks, forks, execs, exits, lost records) in log order:
	// the live heap model of --http and --profile-dir.
	Observer Observer
}

// DefaultWindow covers the gap between a probe taking its timestamp and
// its record reaching the ring buffer, which only preemption widens.
const DefaultWindow = 5 * time.Millisecond

// Flags on a live block's size (liveBlock.v).
const (
	filteredBit  = 1 << 63 // a live block below --min-size: its free is not logged either
	inheritedBit = 1 << 62 // a parent's block, copied at a fork: not the child's in the log
	mappingBit   = 1 << 61 // mmap, mremap: the report keeps them apart from heap blocks
	sizeMask     = mappingBit - 1
)

// liveBlock is a block the agent saw allocated and not yet freed.
type liveBlock struct{ v, stack uint64 }

type process struct {
	live map[uint64]liveBlock
	// The model of the log (figures.go): what the report will count.
	figs procFigures
	// attached: blocks from before the attach exist, so an unknown
	// munmap may be the program's; in launch mode it is a file mapping.
	attached bool
	// scanned: its mappings were read at its first event, when a
	// launched program's loader has mapped everything it links.
	scanned bool
	// preExec: memtrace's own launcher, not yet the program; its calls
	// (a cgo-linked memtrace's runtime, say) are not the program's.
	preExec  bool
	released uint64 // when the launcher was told to exec the program
}

type thread struct {
	tid  uint32
	comm [16]byte // as the kernel sent it: compared without making a string
	name string
	// prefix is the start its event lines share (logfmt.AppendEventPrefix),
	// formatted when the thread is first seen or renamed.
	prefix []byte
	tgid   uint32
	total  uint64
	track  bool
	proc   *process
	ended  bool // EXIT written (InProcess: later events are still its own)
}

// Stats counts what a session wrote.
type Stats struct {
	Events, Allocs, Frees, Exits uint64
	Lost                         uint64
	StacksMissing                uint64
}

// Session is one log being written.
type Session struct {
	cfg Config
	w   io.Writer
	// mw is w when it takes stacks' texts marked (a compressed log's
	// encoder: a stack's text is then a match found without a search),
	// and marks are those of out.
	mw    stackz.MarkedWriter
	marks []stackz.Mark
	// sw is w when it takes the stacks' texts apart (a zstd log's
	// encoder copies each into its history): out then holds the event
	// lines only, marks the places of the texts, and apart the texts'
	// bytes not in out.
	sw    stackz.SparseWriter
	apart int
	// out holds lines not yet written to w: the lines of events are
	// formatted straight into it, not copied there.
	out       []byte
	async     *asyncOut // see Concurrent
	buf       []byte
	procs     map[uint32]*process
	threads   map[uint32]*thread
	pending   []event.Event
	window    uint64
	Stats     Stats
	err       error
	calls     *callsites
	stacks    map[uint64]*stackInfo
	received  uint64
	cutoff    uint64 // see Cutoff
	from      uint64 // see From
	fds       *fdevent.Table
	pendingFD []fdevent.Event
	// fdHorizon: every descriptor event older than it has been added
	// (SetFDHorizon; 0: not told).
	fdHorizon uint64
	pstats    map[uint32]*procStats
	last      *thread
	unsorted  bool
	reported  map[uint32]bool
	procNames map[uint32]string
	procCmds  map[uint32]string
	exits     exitStatuses // the wait statuses of the processes memtrace started
	// ends is the exit and attach lines written, by process; header and
	// ended: the header and summary lines were (figures.go).
	ends          map[uint32]*procEnd
	header, ended bool
	// untraced is the reason of each process an untraced line named.
	untraced map[uint32]string
	// fdProcs are the processes the log has descriptors of (their own
	// lines, or a parent's at a fork), fdLeaked those whose leaks were
	// written at their exit.
	fdProcs, fdLeaked map[uint32]bool
	// late: an event was written after a newer one (see InOrder);
	// lastTS is the newest time stamp written.
	late   bool
	lastTS uint64
	// snapK numbers the next --interval snapshot, due at StartNS +
	// snapK*Interval (StartNS may move up until the program is let go);
	// 0 until the first event.
	snapK uint64
	// OnProcessReport receives a process's figures as it exits (with
	// Reports set).
	OnProcessReport func(r *ProcessReport)
}

// New starts a session writing to cfg.Out.
func New(cfg Config) *Session {
	w := cfg.Window
	if w == 0 {
		w = DefaultWindow
	}
	if cfg.Track == 0 {
		cfg.Track = config.TrackMalloc | config.TrackMmap
	}
	if cfg.PeakTopN == 0 {
		cfg.PeakTopN = 10
	}
	var fds *fdevent.Table
	if cfg.Track.Any(config.TrackFD | config.TrackDmabuf | config.TrackION) {
		fds = fdevent.NewTable(cfg.Track)
	}
	mw, _ := cfg.Out.(stackz.MarkedWriter)
	sw, _ := cfg.Out.(stackz.SparseWriter)
	if sw != nil && (mw == nil || !sw.TakesSparse()) {
		sw = nil
	}
	return &Session{
		mw:      mw,
		sw:      sw,
		fds:     fds,
		cfg:     cfg,
		w:       cfg.Out,
		out:     make([]byte, 0, outSize+4096),
		buf:     make([]byte, 0, 512),
		procs:   map[uint32]*process{},
		threads: map[uint32]*thread{},
		window:  uint64(w.Nanoseconds()),
		calls:   newCallsites(),
	}
}

// AddLaunched declares the process memtrace started: its events count from
// its exec of the program.
func (s *Session) AddLaunched(pid uint32) {
	s.AddProcess(pid, false)
	s.procs[pid].preExec = true
}

// Released records when the launcher of pid was let go: its exec of the
// program is the first exec after that (the launcher's own exec, of
// memtrace, comes before).
func (s *Session) Released(pid uint32, ns uint64) {
	if p := s.procs[pid]; p != nil {
		p.released = ns
	}
	// The log's clock starts here, not when tracing was set up: the
	// probes' start-up and a wait for --port's viewer are not the
	// program's runtime (every ts, peak time and figure per second).
	s.cfg.StartNS = max(s.cfg.StartNS, ns)
}

// AddProcess declares a traced process; attached says it ran before
// tracing started.
func (s *Session) AddProcess(pid uint32, attached bool) {
	if _, ok := s.procs[pid]; !ok {
		s.procs[pid] = &process{live: make(map[uint64]liveBlock, 1024), attached: attached}
	}
}

// Header writes the log's header line.
func (s *Session) Header(h logfmt.Header) {
	s.buf = logfmt.AppendHeader(s.buf[:0], h)
	s.write(s.buf)
	s.header = true
}

// Summary writes the closing summary line: the counts of what was written
// (Stats) and how long tracing took.
func (s *Session) Summary(durationUS int64) {
	st := s.Stats
	s.buf = logfmt.AppendSummary(s.buf[:0], logfmt.Summary{Events: st.Events, Allocs: st.Allocs, Frees: st.Frees,
		Lost: st.Lost, DurationUS: durationUS})
	s.write(s.buf)
	s.ended = true
}

// Err returns the first write error; after one, nothing more is written.
func (s *Session) Err() error { return s.err }

// outSize is how much of the log is held before it is written.
const outSize = 256 << 10

func (s *Session) write(b []byte) {
	if s.err != nil || s.cfg.NoText {
		return
	}
	s.out = append(s.out, b...)
	s.spill()
}

// asyncOutSize is outSize for the buffers handed to another goroutine
// (Concurrent): each hand-off may wake the other's thread, which on a VM
// costs as much as writing a small buffer, and the end of a run is when
// memtrace is waited for.
const asyncOutSize = 2 << 20

// spill writes the held lines out once there are outSize of them.
func (s *Session) spill() {
	if len(s.out)+s.apart < outSize {
		return
	}
	if s.async != nil {
		if len(s.out)+s.apart >= asyncOutSize {
			s.handOff()
		}
		return
	}
	s.Flush()
}

// Flush writes out buffered lines, those handed to another goroutine
// (Concurrent) first.
func (s *Session) Flush() error {
	s.syncOut()
	if s.err == nil && (len(s.out) > 0 || len(s.marks) > 0) {
		s.err = s.writeOut(s.out, s.marks)
	}
	s.out = s.out[:0]
	s.marks = s.marks[:0]
	s.apart = 0
	return s.err
}

func (s *Session) writeOut(out []byte, marks []stackz.Mark) error {
	if s.sw != nil {
		return s.sw.WriteSparse(out, marks)
	}
	if s.mw != nil && len(marks) > 0 {
		return s.mw.WriteMarked(out, marks)
	}
	_, err := s.w.Write(out)
	return err
}

// Received counts the events queued so far.
func (s *Session) Received() uint64 { return s.received }

// Cutoff drops the events after ns (CLOCK_MONOTONIC): the agent stops
// reading at ns, and the probes go one at a time after it, so that later
// events would show frees whose allocation was no longer seen.
func (s *Session) Cutoff(ns uint64) { s.cutoff = ns }

// From drops the events before ns: when attaching to running processes,
// probes go on one at a time, and until the last one is on a malloc
// could be seen without its free.
func (s *Session) From(ns uint64) { s.from = ns }

// Add queues one event; events leave the queue in time order once they are
// older than the window.
func (s *Session) Add(e *event.Event) {
	s.received++
	if s.cutoff != 0 && e.TS > s.cutoff || e.TS < s.from {
		return
	}
	if n := len(s.pending); n > 0 && e.TS < s.pending[n-1].TS {
		s.unsorted = true
	}
	s.pending = append(s.pending, *e)
}

// Emit writes one event at once, for a source that puts its events in
// time order itself (the preload reader merges its per-thread streams);
// the tracer's events go through Add and Drain.
func (s *Session) Emit(e *event.Event) {
	s.received++
	s.emit(e)
}

// EmitExec is Emit for an exec the preload library reports, which names
// the parent and the command line too.
func (s *Session) EmitExec(e *event.Event, ppid uint32, cmd string) {
	s.received++
	s.Stats.Events++
	s.execd(e, ppid, cmd)
}

// ForgetThread drops what the session knows of thread tid, without an
// EXIT line: the preload reader sees a new thread (or the new image of an
// exec) take the tid of one whose end it could not see or already wrote.
func (s *Session) ForgetThread(tid uint32) {
	if s.last != nil && s.last.tid == tid {
		s.last = nil
	}
	delete(s.threads, tid)
}

// Drain writes every queued event older than the window, or all of them
// when all is set (at the end, or when the source is known quiet).
func (s *Session) Drain(all bool) {
	// Nearly always sorted already: the ring buffer is filled in reserve
	// order, and Add notes when it is not.
	if s.unsorted {
		slices.SortStableFunc(s.pending, cmpTS)
		s.unsorted = false
	}
	limit := ^uint64(0)
	if !all {
		// Measured against the clock, not the newest event: when the
		// program goes quiet its last events must still come out.
		now := monotonicNS()
		limit = 0
		if now > s.window {
			limit = now - s.window
		}
	}
	i := 0
	emitUpTo := func(ts uint64) {
		for i < len(s.pending) && s.pending[i].TS <= ts {
			s.emit(&s.pending[i])
			i++
		}
	}
	if !all && s.fdHorizon != 0 && s.fdHorizon < limit && limit-s.fdHorizon < fdStackWait {
		// The descriptors' reader is behind the window: what comes
		// after its horizon waits (a process's exit must not go out
		// before its descriptor events, whose leaks it lists), for as
		// long as a descriptor event waits for its stack.
		limit = s.fdHorizon
	}
	s.drainFD(limit, all, emitUpTo)
	s.pending = append(s.pending[:0], s.pending[i:]...)
	if !all {
		// Every event before limit is written: so are the snapshots
		// due by then, while the program is quiet too.
		s.SnapshotsUntil(limit)
	}
}

// SetFDHorizon says every descriptor event older than ts (CLOCK_MONOTONIC
// ns) has been added: Drain writes nothing newer, for a while.
func (s *Session) SetFDHorizon(ts uint64) { s.fdHorizon = ts }

func monotonicNS() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

func cmpTS(a, b event.Event) int { return cmp.Compare(a.TS, b.TS) }

func (s *Session) ts(e *event.Event) uint64 {
	if e.TS <= s.cfg.StartNS {
		return 0
	}
	return (e.TS - s.cfg.StartNS) / 1000
}

func (s *Session) thread(e *event.Event) *thread {
	// Events come in runs from one thread: remember the last one.
	t := s.last
	if t == nil || t.tid != e.TID {
		t = s.threads[e.TID]
	}
	if t == nil {
		t = &thread{tid: e.TID, comm: e.Comm, name: e.CommString(), tgid: e.TGID}
		t.track = s.tracked(t.name)
		t.prefix = logfmt.AppendEventPrefix(nil, int64(t.tid), t.name)
		s.threads[e.TID] = t
		s.announce(e.TID, t)
	} else if t.comm != e.Comm {
		// A renamed thread shows its new name from here on.
		t.comm, t.name = e.Comm, e.CommString()
		t.track = s.tracked(t.name)
		t.prefix = logfmt.AppendEventPrefix(t.prefix[:0], int64(t.tid), t.name)
		s.announce(e.TID, t)
	}
	s.last = t
	return t
}

func (s *Session) announce(tid uint32, t *thread) {
	if tid == t.tgid {
		// A report names a process by its main thread.
		if s.procNames == nil {
			s.procNames = map[uint32]string{}
		}
		s.procNames[tid] = t.name
	}
	s.buf = logfmt.AppendThread(s.buf[:0], logfmt.Thread{TID: int64(tid), PID: int64(t.tgid), Name: t.name})
	s.write(s.buf)
}

func (s *Session) tracked(name string) bool {
	if len(s.cfg.TrackThreads) == 0 {
		return true
	}
	for _, sub := range s.cfg.TrackThreads {
		if strings.Contains(name, sub) {
			return true
		}
	}
	return false
}

func (s *Session) proc(pid uint32) *process {
	p := s.procs[pid]
	if p == nil {
		p = &process{live: make(map[uint64]liveBlock, 1024)}
		s.procs[pid] = p
	}
	return p
}

func (s *Session) emit(e *event.Event) {
	if s.cfg.Interval > 0 {
		if s.snapK == 0 {
			s.snapK = 1
		}
		s.SnapshotsUntil(e.TS)
	}
	s.Stats.Events++
	if ts := s.ts(e); ts < s.lastTS {
		s.late = true
	} else {
		s.lastTS = ts
	}
	switch e.Kind {
	case event.KindFork:
		s.forked(e)
		return
	case event.KindExec:
		s.execd(e, 0, "")
		return
	}
	if e.Kind == event.KindExit && e.TID == e.TGID {
		line := s.exitLine(e.TGID, s.ts(e))
		s.noteProc(&line)
		s.buf = logfmt.AppendProc(s.buf[:0], line)
		s.write(s.buf)
		s.processExit(e.TGID)
		s.calls.forget(int(e.TGID))
		if s.cfg.Observer != nil {
			s.cfg.Observer.ProcessExit(e.TGID)
		}
		if s.cfg.ProcessExited != nil {
			s.cfg.ProcessExited(e.TGID)
		}
	}
	// Events come in runs from one thread: its process is the last one's.
	if t := s.last; t != nil && t.tid == e.TID && t.proc != nil {
		if t.proc.preExec {
			return
		}
	} else if p := s.procs[e.TGID]; p != nil && p.preExec {
		return
	}
	if e.Kind == event.KindExit {
		// Only threads that were logged get an EXIT line, as with
		// memtrack: the launcher's own threads, which exec ends, and
		// threads that never allocated stay out of the log.
		if t := s.threads[e.TID]; t != nil && !t.ended {
			s.Stats.Exits++
			if t.track {
				s.buf = logfmt.AppendExit(s.buf[:0], int64(e.TID), t.name, s.ts(e), t.total)
				s.write(s.buf)
			}
			if s.cfg.InProcess {
				// The library goes on logging what the thread's
				// later TLS destructors do: still this thread's.
				t.ended = true
			} else {
				delete(s.threads, e.TID)
				if s.last == t {
					s.last = nil
				}
			}
		}
		return
	}
	t := s.thread(e)
	if t.proc == nil {
		t.proc = s.proc(e.TGID)
	}
	p := t.proc
	if !p.scanned {
		p.scanned = true
		if !s.cfg.InProcess {
			s.KnownProcess(int(e.TGID), false)
		}
		if s.cfg.Reports {
			if s.procCmds == nil {
				s.procCmds = map[uint32]string{}
			}
			args, _ := procfs.ReadCmdline(int(e.TGID))
			s.procCmds[e.TGID] = strings.Join(args, " ")
		}
	}
	ts := s.ts(e)
	switch e.Kind {
	case event.KindAlloc:
		op := logfmt.Op(e.Op)
		if e.Flags&event.FlagFile != 0 && !s.cfg.MmapFiles {
			// A file mapping: not logged, but remembered so that its
			// munmap is left out too.
			s.replace(p, e.Ptr, e.TS)
			p.live[e.Ptr] = liveBlock{v: e.Size | filteredBit}
			return
		}
		if e.Flags&event.FlagCallsite != 0 {
			op = s.calls.alignedOp(int(e.TGID), op, e.OldSize, e.OldPtr)
		}
		s.alloc(e, t, p, ts, op, e.Ptr, e.Size)
	case event.KindFree:
		op := logfmt.Op(e.Op)
		if op == logfmt.OpRealloc || op == logfmt.OpReallocarray {
			op = logfmt.OpFree // realloc(p, 0)
		}
		if e.Flags&event.FlagCallsite != 0 {
			op = s.calls.alignedOp(int(e.TGID), op, e.OldSize, e.OldPtr)
		}
		s.free(e, t, p, ts, op, e.Ptr, e.Size)
	}
}

// tracked reports whether --track covers op.
func (s *Session) trackedOp(op logfmt.Op) bool {
	if op == logfmt.OpMmap || op == logfmt.OpMremap || op == logfmt.OpMunmap {
		return s.cfg.Track.Has(config.TrackMmap)
	}
	return s.cfg.Track.Has(config.TrackMalloc)
}

func (s *Session) alloc(e *event.Event, t *thread, p *process, ts uint64, op logfmt.Op, ptr, size uint64) {
	s.replace(p, ptr, e.TS)
	if !t.track || size < s.cfg.MinSize || !s.trackedOp(op) {
		p.live[ptr] = liveBlock{v: size | filteredBit}
		return
	}
	mapping := op == logfmt.OpMmap || op == logfmt.OpMremap
	v := size
	if mapping {
		v |= mappingBit
	}
	p.live[ptr] = liveBlock{v: v, stack: e.Stack}
	p.figs.alloc(ptr, size, ts, mapping)
	if s.cfg.Reports {
		s.account(e.TGID, ts, ptr, size, e.Stack)
	}
	t.total += size
	s.Stats.Allocs++
	if s.err == nil && !s.cfg.NoText {
		s.out = append(append(s.out, t.prefix...), logfmt.OpField(op)...)
		s.out = logfmt.AppendAllocAfter(s.out, ts, size, t.total, ptr)
	}
	if e.Stack != 0 {
		s.writeStack(e.Stack)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Alloc(e.TGID, ptr, size, e.Stack, ts)
	}
	s.spill()
}

func (s *Session) free(e *event.Event, t *thread, p *process, ts uint64, op logfmt.Op, ptr, size uint64) {
	if ghostSize, ok := p.figs.lateFree(ptr, e.TS); ok {
		s.freeLate(e, t, p, ts, op, ptr, size, ghostSize)
		return
	}
	b, known := p.live[ptr]
	v := b.v
	if known {
		delete(p.live, ptr)
		if v&filteredBit != 0 {
			return
		}
		if s.cfg.Observer != nil {
			s.cfg.Observer.Free(e.TGID, ptr, ts)
		}
	}
	if op == logfmt.OpMunmap {
		// Only anonymous mappings are logged; in launch mode every one
		// of them was seen, so an unknown range is a file mapping.
		if !known && !p.attached {
			return
		}
	} else if known {
		size = v & sizeMask
	} else if s.cfg.InProcess {
		// A block the library never saw (ld.so's, or one libc
		// allocated inside itself): size 0, as its text mode writes
		// it; under --min-size it may have been a small one.
		if s.cfg.MinSize > 0 {
			return
		}
		size = 0
	} else if !p.attached {
		// Launched: every block the program allocated was seen, so this
		// is allocator bookkeeping (libc emptying a thread's tcache as
		// it exits calls free directly) or a double free glibc itself
		// stops; not the program's release of a block.
		return
	} else {
		size = 0
	}
	if !t.track || !s.trackedOp(op) {
		if known {
			// Not logged: the report holds the block live to the end.
			p.figs.keep(ptr, b)
		}
		return
	}
	p.figs.free(ptr, b, known)
	if s.cfg.Reports && known {
		s.unaccount(e.TGID, ptr)
	}
	s.logFree(e, t, ts, op, ptr, size)
}

// freeLate logs a free that came after another allocation took its
// block's address (the figures' ghost there): realloc and mremap release
// the old block inside the call and send its free, timed at the call,
// from the return, and any probe's record can be held up past the merge
// window by preemption, so the other thread's allocation at the address
// may have gone out first. The free is the older block's, the program's
// own: it is logged (late), and the table's newer block stays live.
func (s *Session) freeLate(e *event.Event, t *thread, p *process, ts uint64, op logfmt.Op, ptr, size, ghostSize uint64) {
	if !t.track || !s.trackedOp(op) {
		return // not logged: the report holds the block live to the end
	}
	if op != logfmt.OpMunmap {
		size = ghostSize
	}
	p.figs.free(ptr, liveBlock{}, false)
	s.logFree(e, t, ts, op, ptr, size)
}

// logFree writes a free's line and its stack: the one writer of both
// the in-order and the late free.
func (s *Session) logFree(e *event.Event, t *thread, ts uint64, op logfmt.Op, ptr, size uint64) {
	s.Stats.Frees++
	if s.err == nil && !s.cfg.NoText {
		s.out = append(append(s.out, t.prefix...), logfmt.OpField(op)...)
		s.out = logfmt.AppendFreeAfter(s.out, ts, size, ptr)
	}
	if e.Stack != 0 && !s.cfg.NoFreeStacks {
		s.writeStack(e.Stack)
	}
	s.spill()
}

// Lost records that n records were dropped since the last call.
func (s *Session) Lost(n uint64, nowNS uint64) {
	if n == 0 {
		return
	}
	s.Stats.Lost += n
	if s.cfg.Observer != nil {
		s.cfg.Observer.Lost(n)
	}
	var ts uint64
	if nowNS > s.cfg.StartNS {
		ts = (nowNS - s.cfg.StartNS) / 1000
	}
	s.buf = logfmt.AppendLost(s.buf[:0], logfmt.Lost{Count: n, Total: s.Stats.Lost, TS: ts})
	s.write(s.buf)
}

// forked: the child starts with a copy of its parent's heap, so the
// parent's live blocks are the child's too (their frees then carry sizes).
func (s *Session) forked(e *event.Event) {
	child := uint32(e.Ptr)
	if e.Flags&event.FlagUnfollowed != 0 {
		s.unfollowed(e, "")
		return
	}
	parent := s.proc(e.TGID)
	c := s.proc(child)
	for ptr, b := range parent.live {
		c.live[ptr] = liveBlock{v: b.v | inheritedBit}
	}
	c.attached = parent.attached
	if s.cfg.Observer != nil {
		s.cfg.Observer.Fork(e.TGID, child)
	}
	if s.fds != nil {
		s.fds.Fork(e.TGID, child)
		if s.fdProcs[e.TGID] {
			s.noteFDProc(child)
		}
	}
	s.buf = logfmt.AppendProc(s.buf[:0], logfmt.Proc{Event: logfmt.ProcFork, PID: int64(child), PPID: int64(e.TGID), TS: s.ts(e)})
	s.write(s.buf)
}

// unfollowed writes that process e.Ptr, a child of e.TGID, runs untraced
// (no --follow). The preload library may say so twice of one process, at
// its fork and again at its exec with the new image's comm and cmd; the
// figures count the process once.
func (s *Session) unfollowed(e *event.Event, cmd string) {
	s.Proc(logfmt.Proc{Event: logfmt.ProcUntraced, PID: int64(e.Ptr), PPID: int64(e.TGID), TS: s.ts(e),
		Comm: e.CommString(), Cmd: cmd, Reason: logfmt.ReasonNotFollowed})
}

// EmitUnfollowed is Emit for the preload library's report of a process
// it does not trace (a KindFork with FlagUnfollowed), with the command
// line when the report came from an exec'd image.
func (s *Session) EmitUnfollowed(e *event.Event, cmd string) {
	s.received++
	s.Stats.Events++
	s.unfollowed(e, cmd)
}

// execd: a new image has a new heap. ppid and cmd are the preload
// library's (0 and "" from the kernel side, which leaves them out).
func (s *Session) execd(e *event.Event, ppid uint32, cmd string) {
	p := s.proc(e.TGID)
	if p.preExec && e.TS < p.released {
		return // the launcher's own exec
	}
	for ptr, b := range p.live {
		// The report's model keeps the old image's blocks: leaks
		// unless the new image's frees name them.
		p.figs.keep(ptr, b)
	}
	clear(p.live)
	if s.cfg.Observer != nil {
		s.cfg.Observer.Exec(e.TGID)
	}
	p.preExec = false
	p.attached = false
	p.scanned = false
	if s.fds != nil {
		s.fds.Exec(e.TGID, e.TS, s.writeFD)
	}
	s.buf = logfmt.AppendProc(s.buf[:0], logfmt.Proc{Event: logfmt.ProcExec, PID: int64(e.TGID), PPID: int64(ppid), TS: s.ts(e),
		Comm: e.CommString(), Cmd: cmd})
	s.write(s.buf)
}
