package analysis

import (
	"sync/atomic"

	"github.com/memtrace/memtrace/internal/intern"
	"github.com/memtrace/memtrace/logfmt"
)

// NoThread marks an allocation that has not been freed (FreeThread) and
// "no thread filter" in queries.
const NoThread = ^uint32(0)

// Status is an allocation's state, memview's St. column.
type Status uint8

const (
	StatusActive Status = iota // not freed, its thread and process still running
	StatusLeak                 // not freed and nothing can free it any more (docs/spec.md §4.3)
	StatusFreed
	// StatusUnknown: not freed in the log, but its free is known to be
	// among the records the tracer lost (see Model.Unknown), so it is
	// neither a leak nor live.
	StatusUnknown
)

func (s Status) String() string {
	switch s {
	case StatusLeak:
		return "leak"
	case StatusFreed:
		return "freed"
	case StatusUnknown:
		return "unknown (records lost)"
	}
	return "active"
}

// Thread is one thread incarnation: a tid reused after EXIT is a new Thread.
type Thread struct {
	TID       int64
	Name      string
	Proc      int32 // index into Model.Procs
	Exited    bool
	ExitTS    uint64
	ExitTotal uint64 // total= of the EXIT line

	Allocs     int64  // allocations made by this thread
	AllocBytes uint64 // their bytes
	Frees      int64  // of those, how many were freed (by any thread)
	FreedBytes uint64 // and their bytes
	LiveCount  int64  // not freed yet
	LiveBytes  uint64
	FreeCalls  int64 // frees this thread performed, of any thread's blocks
	FirstTS    uint64
	LastTS     uint64

	allocs    []uint32 // this thread's allocation ids in log order
	unordered bool     // its time stamps went backwards (a broken log): allocs is not in time order

	// The byte figures above are read-outs of these exact sums
	// (sat.go): live bytes go up and down, and a saturated sum could
	// not come back down.
	freed, live wide
	// Live blocks whose free is proven lost (superseded, see
	// Model.Unknown): counted whether or not the log reports lost
	// records; they only become StatusUnknown when it does.
	supCount int64
	sup      wide
}

func (t *Thread) addLive(sz uint64) {
	t.live.add(sz)
	t.LiveBytes = t.live.value()
}

func (t *Thread) subLive(sz uint64) {
	t.live.sub(sz)
	t.LiveBytes = t.live.value()
}

func (t *Thread) addFreed(sz uint64) {
	t.freed.add(sz)
	t.FreedBytes = t.freed.value()
}

func (t *Thread) subFreed(sz uint64) {
	t.freed.sub(sz)
	t.FreedBytes = t.freed.value()
}

// Proc is one traced process.
type Proc struct {
	PID    int64
	PPID   int64
	Comm   string
	Cmd    string
	Exited bool
	// How it ended (proc event=exit status=/signal=; see RunEnd):
	// HasStatus with its exit code, or the signal that killed it.
	HasStatus  bool
	ExitStatus int
	ExitSignal string
	// Attached: memtrace attached to it running (-p): without an exit
	// line, the log ends with a detach.
	Attached bool
	// Untraced is why the tracer could not probe the process
	// (proc event=untraced); "" when it was traced.
	Untraced string

	live    map[uint64]int32   // address → live allocation id
	dup     map[uint64][]int32 // further live allocations of the same address (lost frees, unordered logs)
	pending map[uint64][]int32 // address → orphan frees that a later-read allocation may claim
	// lastFreed is, per address, the freed allocation made last (unordered
	// logs only): a free read late may belong to it rather than to an
	// allocation not read yet.
	lastFreed map[uint64]int32
}

// Frame is one interned stack frame, as the log wrote it (symbols mangled).
type Frame struct {
	Module string
	Symbol string
	Offset uint64
	Addr   uint64
}

// Header is the [memtrace] header line, when the log has one.
type Header struct {
	PID     int64
	Comm    string
	Cmd     string
	Exe     string // the real file, when the process was started by another name
	Version string
	Start   string
	Mode    string
	Seen    bool
}

// Counts are the lines that were read, and those that were not understood.
type Counts struct {
	Lines          int64 // all lines
	Events         int64 // alloc and free lines
	Frames         int64
	Meta           int64
	Malformed      int64 // [memtrack]/[memtrace] lines that do not parse
	Other          int64 // lines that are not log lines (program output)
	Overlong       int64 // lines longer than logfmt.MaxLine, skipped
	UnmatchedFrees int64 // frees with no allocation of that address before them
	StrayFrames    int64 // frame lines with no event before them
	SkippedFrames  int64 // frame lines past logfmt.MaxFrames of one event, not kept
	Exits          int64 // EXIT lines
}

// Garbage is the number of lines skipped as unreadable.
func (c Counts) Garbage() int64 { return c.Malformed + c.Overlong }

// Orphans are frees that matched no allocation. Columnar, like the model.
type Orphans struct {
	TS, Size, Ptr []uint64
	HasSize       []bool
	Thread        []uint32
	Op            []uint8
	Stack         []uint32
	Claimed       []int32  // allocation id that claimed it later (unordered logs), or -1
	at            []uint32 // read position, as Model.freeAt
}

// Len is the number of orphan frees.
func (o *Orphans) Len() int { return len(o.TS) }

// Model is the analysed log. It is not safe for concurrent use: the loader
// takes the caller's lock around every batch it applies.
type Model struct {
	// Allocations, one per alloc line, indexed by allocation id (log order).
	TS, Size, Ptr []uint64
	Thread        []uint32
	Op            []uint8
	Stack         []uint32 // 0 = no frames
	FreeTS        []uint64
	FreeThread    []uint32 // NoThread while live
	FreeStack     []uint32
	FreeOp        []uint8
	// freeAt is, per freed allocation, how many alloc lines had been read
	// when its free line was: with the allocation's own position (its id)
	// it gives the read order of allocs and frees, which re-matching,
	// Temporary and the report's peak need, in 4 bytes an allocation
	// instead of a sequence number for each line (8).
	freeAt []uint32
	// allocAt is an allocation's read position where ids are recycled
	// (SummaryOnly); otherwise the position is the id.
	allocAt    []uint32
	allocsRead uint32 // alloc lines read so far
	prefaulted int    // the columns are resident up to here (prefaultColumns)
	// sizeHint is the size of the log's text when Stream knows it, and
	// textRead the text applied so far: the columns are reserved from
	// what the log's start says of the rest (reserveAhead).
	sizeHint, textRead int64
	reserved           bool

	Orphans Orphans
	Threads []Thread
	Procs   []Proc
	Header  Header
	Counts  Counts

	LostEvents int64    // events the tracer reported lost
	Notices    []string // [memtrace] notice msg= lines, latest last
	// Ended is set when the log's [memtrace] summary line was read: the
	// tracer wrote its last line, so a followed file will not grow.
	Ended bool
	// InputCut is set when the input stopped before its end: a read
	// error, a compressed stream cut short or damaged (Stream's error
	// says why and where); the lines before it are in the model.
	InputCut bool

	MinTS, MaxTS uint64
	// Done is set once the end of the log was read: from then on every
	// allocation that is not freed is a leak.
	Done bool
	// OutOfOrder is set when time stamps went backwards (memtrack's
	// per-thread buffers); Finish then re-matches by time.
	OutOfOrder bool

	// SummaryOnly keeps per-thread totals, leaks and the stacks of live
	// blocks (for the suppressions) but not the events: allocation ids
	// are recycled when freed. For --dump-threads. Overlaps that prove
	// lost frees (Finish's markOverlaps) need every event: a log with
	// lost records is read whole.
	SummaryOnly bool
	freeSlots   []uint32
	ordered     bool // a memtrace header came first: lines are in time order

	// superseded is a bitset by allocation id: a later allocation took
	// the block's memory while the log still had it live, which proves
	// that its free is missing (see Model.Unknown).
	superseded []uint64

	// Demangle turns a mangled symbol into a readable one for display and
	// search (symbols.Demangle); nil shows symbols as written.
	Demangle   func(string) string
	frameNames []string
	frameNamed []bool

	// Version changes whenever the model changes, for caches.
	Version uint64

	threadIdx map[int64]uint32
	procIdx   map[int64]int32
	defProc   int32
	opNames   []string
	opIdx     map[string]uint8

	frames     frameStore        // frames.go
	rawFrames  map[string]uint32 // a frame line's text after its index → its frame, where it is not the frame's key
	frameAddr  map[uint64]uint32
	lazyHits   int64       // lazy frame lines resolved without parsing (a test's witness)
	stacks     intern.Seqs // stacks.go
	openFrames []uint32
	target     int64 // event the open frames belong to: allocation id, ^orphan id, or noTarget
	openFree   bool  // target is the free of allocation `target`
	openTrunc  uint8 // reason id of a [memtrace] stack truncated=1 line after the open frames
	openCut    bool  // frames past logfmt.MaxFrames were skipped

	trunc truncState // truncated stacks (truncated.go)

	fd fdState // descriptors and buffers (fd.go)

	ended atomic.Bool // Ended, for Stream's reader, which does not hold the lock

	lastTS  uint64
	anyTS   bool
	orders  [numSortKeys]order
	nameRev uint64 // bumps when a thread name or thread set changes (thread sort)
}

const noTarget = int64(-1) << 62

// New returns an empty model.
func New() *Model {
	m := &Model{
		threadIdx: map[int64]uint32{},
		procIdx:   map[int64]int32{},
		defProc:   -1,
		opIdx:     map[string]uint8{},
		frames:    newFrameStore(),
		rawFrames: map[string]uint32{},
		frameAddr: map[uint64]uint32{},
		stacks:    intern.NewSeqs(),
		target:    noTarget,
	}
	m.opNames = make([]string, logfmt.NumOps)
	for i := range m.opNames {
		m.opNames[i] = logfmt.Op(i).String()
	}
	return m
}

// Reserve makes room for n allocations, so that loading a large log of
// known size does not copy its columns as they grow.
func (m *Model) Reserve(n int) {
	if n <= cap(m.TS) {
		return
	}
	m.prefaulted = 0 // the new columns' tails
	regrow(&m.TS, n)
	regrow(&m.Size, n)
	regrow(&m.Ptr, n)
	regrow(&m.FreeTS, n)
	regrow(&m.Thread, n)
	regrow(&m.Stack, n)
	regrow(&m.FreeThread, n)
	regrow(&m.FreeStack, n)
	regrow(&m.freeAt, n)
	regrow(&m.Op, n)
	regrow(&m.FreeOp, n)
	if m.SummaryOnly {
		regrow(&m.allocAt, n)
	}
}

// Len is the number of allocations.
func (m *Model) Len() int { return len(m.TS) }

// OpName is the op column text of an op id.
func (m *Model) OpName(op uint8) string {
	if int(op) < len(m.opNames) {
		return m.opNames[op]
	}
	return "?"
}

// Status of allocation i.
func (m *Model) Status(i uint32) Status {
	if m.FreeThread[i] != NoThread {
		return StatusFreed
	}
	if m.IsUnknown(i) {
		return StatusUnknown
	}
	if m.Done {
		return StatusLeak
	}
	t := &m.Threads[m.Thread[i]]
	if t.Exited || (t.Proc >= 0 && m.Procs[t.Proc].Exited) {
		return StatusLeak
	}
	return StatusActive
}

// IsUnknown reports whether allocation i is not freed in the log but its
// free is proven lost: the log reports lost records, and a later
// allocation of the same kind (heap or mapping) in its process took
// memory the block still held (its address, or, once the log has ended,
// any byte of it). The allocator never hands out memory that is in use,
// so the block was freed and that free is among the lost records. Without
// lost records such a block stays what it was (a leak at the end): a
// complete log that misses a free is a tracer bug that must stay visible.
func (m *Model) IsUnknown(i uint32) bool {
	return m.LostEvents > 0 && m.FreeThread[i] == NoThread && bitGet(m.superseded, i)
}

// ThreadLeaks reports whether the live blocks of thread t count as leaks.
func (m *Model) threadLeaks(t *Thread) bool {
	return m.Done || t.Exited || (t.Proc >= 0 && m.Procs[t.Proc].Exited)
}

// threadUnknown is thread t's StatusUnknown blocks.
func (m *Model) threadUnknown(t *Thread) (int64, wide) {
	if m.LostEvents <= 0 {
		return 0, wide{}
	}
	return t.supCount, t.sup
}

// Leaks is the number and bytes of leaked allocations.
func (m *Model) Leaks() (n int64, bytes uint64) {
	for i := range m.Threads {
		ln, lb := m.ThreadLeaks(i)
		n += ln
		bytes = satAdd(bytes, lb)
	}
	return n, bytes
}

// ThreadLeaks is thread i's leaked count and bytes.
func (m *Model) ThreadLeaks(i int) (int64, uint64) {
	t := &m.Threads[i]
	if !m.threadLeaks(t) {
		return 0, 0
	}
	un, ub := m.threadUnknown(t)
	return t.LiveCount - un, t.live.minus(ub).value()
}

// Unknown is the number and bytes of StatusUnknown blocks: not freed in
// the log, their frees lost with the records the tracer dropped.
func (m *Model) Unknown() (n int64, bytes uint64) {
	for i := range m.Threads {
		un, ub := m.threadUnknown(&m.Threads[i])
		n += un
		bytes = satAdd(bytes, ub.value())
	}
	return n, bytes
}

// LeaksMayBeOverstated reports whether some leaks may be blocks whose
// free was lost: the tracer lost records, and only a free proven lost
// (Unknown) is taken out of the leaks.
func (m *Model) LeaksMayBeOverstated() bool {
	n, _ := m.Leaks()
	return m.LostEvents > 0 && n > 0
}

// Live is the number and bytes of allocations not freed.
func (m *Model) Live() (n int64, bytes uint64) {
	for i := range m.Threads {
		n += m.Threads[i].LiveCount
		bytes = satAdd(bytes, m.Threads[i].LiveBytes)
	}
	return n, bytes
}

// ThreadAllocs is thread i's allocation ids in log order (an index; do not modify).
func (m *Model) ThreadAllocs(i int) []uint32 { return m.Threads[i].allocs }

// Duration is the span of time stamps in microseconds.
func (m *Model) Duration() uint64 {
	if !m.anyTS {
		return 0
	}
	return m.MaxTS - m.MinTS
}

// Frames is the frames of stack id s, innermost first.
func (m *Model) Frames(s uint32) []uint32 {
	return m.stacks.Get(s)
}

// Frame returns interned frame f.
func (m *Model) Frame(f uint32) Frame { return m.frames.frame(f) }

// NumStacks is the number of distinct stacks, the empty one (id 0) included.
func (m *Model) NumStacks() int { return m.stacks.Len() }

// NumFrames is the number of distinct frames.
func (m *Model) NumFrames() int { return len(m.frames.recs) }

// LiveAt is what allocation i contributes to live memory at time t.
func (m *Model) LiveAt(i uint32, t uint64) bool {
	return m.TS[i] <= t && (m.FreeThread[i] == NoThread || m.FreeTS[i] > t)
}

// Lifetime of allocation i in microseconds: until its free, or the end of the log.
func (m *Model) Lifetime(i uint32) uint64 {
	end := m.MaxTS
	if m.FreeThread[i] != NoThread {
		end = m.FreeTS[i]
	}
	if end < m.TS[i] {
		return 0
	}
	return end - m.TS[i]
}
