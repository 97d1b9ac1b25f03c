package live

import (
	"slices"
	"sync"

	"github.com/memtrace/memtrace/internal/heapprof"
	"github.com/memtrace/memtrace/internal/procfs"
)

// Frame is a frame as the agent names it (module, mangled symbol, offset,
// address).
type Frame = heapprof.Frame

// Observer is what the agent tells the live model, in time order, of the
// events it logs: blocks allocated and freed (after its filters), the
// frames of each stack the first time it is met, forks (the child's heap
// starts as a copy of its parent's), execs (a new, empty heap), process
// exits and records the tracer lost.
type Observer interface {
	Alloc(pid uint32, ptr, size, stack, ts uint64)
	Free(pid uint32, ptr, ts uint64)
	Stack(id uint64, frames []Frame)
	Fork(parent, child uint32)
	Exec(pid uint32)
	ProcessExit(pid uint32)
	Lost(n uint64)
}

var _ Observer = (*Model)(nil)

type block struct {
	stack, size uint64
	seq         uint64 // when it was allocated: the model's allocation count then
}

// totals is one stack's figures in one process.
type totals struct {
	allocs, allocBytes uint64
	inuse, inuseBytes  uint64
}

type proc struct {
	blocks                               map[uint64]block
	byStack                              map[uint64]*totals
	allocs, allocBytes, frees, freeBytes uint64
	liveBytes                            uint64
	comm                                 string // read at the first scrape
}

func newProc() *proc {
	return &proc{blocks: make(map[uint64]block, 1024), byStack: map[uint64]*totals{}}
}

// Model is the live heap of the traced processes. Its methods are safe for
// concurrent use: the agent writes, the HTTP handlers read.
type Model struct {
	mu     sync.Mutex
	procs  map[uint32]*proc
	stacks map[uint64][]Frame
	seq    uint64
	lost   uint64
	// Probes, when set, says how many probe sets (library × process) are
	// attached, for /metrics.
	Probes func() int
}

// NewModel returns an empty model.
func NewModel() *Model {
	return &Model{procs: map[uint32]*proc{}, stacks: map[uint64][]Frame{}}
}

func (m *Model) proc(pid uint32) *proc {
	p := m.procs[pid]
	if p == nil {
		p = newProc()
		m.procs[pid] = p
	}
	return p
}

// Alloc records a block of size bytes at ptr allocated from stack (0: no
// stack). A ptr already live lost its free among dropped records: the old
// block goes.
func (m *Model) Alloc(pid uint32, ptr, size, stack, ts uint64) {
	m.mu.Lock()
	p := m.proc(pid)
	if old, ok := p.blocks[ptr]; ok {
		p.release(ptr, old)
	}
	m.seq++
	p.blocks[ptr] = block{stack: stack, size: size, seq: m.seq}
	t := p.byStack[stack]
	if t == nil {
		t = &totals{}
		p.byStack[stack] = t
	}
	t.allocs++
	t.allocBytes += size
	t.inuse++
	t.inuseBytes += size
	p.allocs++
	p.allocBytes += size
	p.liveBytes += size
	m.mu.Unlock()
}

// Free releases the block at ptr; an unknown one (allocated before the
// attach, or filtered out) changes nothing.
func (m *Model) Free(pid uint32, ptr, ts uint64) {
	m.mu.Lock()
	if p := m.procs[pid]; p != nil {
		if b, ok := p.blocks[ptr]; ok {
			p.release(ptr, b)
			p.frees++
			p.freeBytes += b.size
		}
	}
	m.mu.Unlock()
}

func (p *proc) release(ptr uint64, b block) {
	delete(p.blocks, ptr)
	p.liveBytes -= b.size
	if t := p.byStack[b.stack]; t != nil {
		t.inuse--
		t.inuseBytes -= b.size
	}
}

// Stack records the frames of stack id; frames is copied.
func (m *Model) Stack(id uint64, frames []Frame) {
	m.mu.Lock()
	if _, ok := m.stacks[id]; !ok {
		m.stacks[id] = slices.Clone(frames)
	}
	m.mu.Unlock()
}

// Fork starts child's heap as a copy of parent's live blocks, as the
// kernel copies the memory: the child's frees of them are real frees.
func (m *Model) Fork(parent, child uint32) {
	m.mu.Lock()
	c := newProc()
	if p := m.procs[parent]; p != nil {
		for ptr, b := range p.blocks {
			c.blocks[ptr] = b
			t := c.byStack[b.stack]
			if t == nil {
				t = &totals{}
				c.byStack[b.stack] = t
			}
			t.inuse++
			t.inuseBytes += b.size
			c.liveBytes += b.size
		}
	}
	m.procs[child] = c
	m.mu.Unlock()
}

// Exec gives pid a new, empty heap.
func (m *Model) Exec(pid uint32) {
	m.mu.Lock()
	m.procs[pid] = newProc()
	m.mu.Unlock()
}

// ProcessExit forgets pid: the model holds live processes only.
func (m *Model) ProcessExit(pid uint32) {
	m.mu.Lock()
	delete(m.procs, pid)
	m.mu.Unlock()
}

// Lost counts n records the tracer dropped.
func (m *Model) Lost(n uint64) {
	m.mu.Lock()
	m.lost += n
	m.mu.Unlock()
}

// ProcStats is one process's figures.
type ProcStats struct {
	PID                                  uint32
	Comm                                 string
	LiveBytes, LiveBlocks                uint64
	Allocs, AllocBytes, Frees, FreeBytes uint64
}

// Stats returns every process's figures, by pid, the records lost and the
// distinct stacks held.
func (m *Model) Stats() (procs []ProcStats, lost uint64, stacks int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for pid, p := range m.procs {
		if p.comm == "" {
			p.comm = readComm(pid)
		}
		procs = append(procs, ProcStats{PID: pid, Comm: p.comm, LiveBytes: p.liveBytes, LiveBlocks: uint64(len(p.blocks)),
			Allocs: p.allocs, AllocBytes: p.allocBytes, Frees: p.frees, FreeBytes: p.freeBytes})
	}
	slices.SortFunc(procs, func(a, b ProcStats) int { return int(a.PID) - int(b.PID) })
	return procs, m.lost, len(m.stacks)
}

func readComm(pid uint32) string {
	comm, _ := procfs.ReadComm(int(pid))
	return comm
}

// window is the state a delta profile starts from.
type window struct {
	seq    uint64
	allocs map[uint32]map[uint64]totals // per process, per stack: allocations so far
}

func (m *Model) startWindow() *window {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := &window{seq: m.seq, allocs: map[uint32]map[uint64]totals{}}
	for pid, p := range m.procs {
		st := make(map[uint64]totals, len(p.byStack))
		for id, t := range p.byStack {
			st[id] = totals{allocs: t.allocs, allocBytes: t.allocBytes}
		}
		w.allocs[pid] = st
	}
	return w
}

// samples is the profile's samples: every process, or pid only (0: all);
// with w, only what was allocated since w began (and, for inuse, is
// still live).
func (m *Model) samples(pid uint32, w *window) []heapprof.Sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []heapprof.Sample
	pids := make([]uint32, 0, len(m.procs))
	for id := range m.procs {
		if pid == 0 || id == pid {
			pids = append(pids, id)
		}
	}
	slices.Sort(pids)
	for _, id := range pids {
		p := m.procs[id]
		if p.comm == "" {
			p.comm = readComm(id)
		}
		figs := p.byStack
		if w != nil {
			figs = p.since(w, id)
		}
		stacks := make([]uint64, 0, len(figs))
		for s := range figs {
			stacks = append(stacks, s)
		}
		slices.Sort(stacks)
		for _, s := range stacks {
			t := figs[s]
			smp := heapprof.Sample{PID: int64(id), Process: p.comm,
				AllocObjects: int64(t.allocs), AllocBytes: int64(t.allocBytes), InuseObjects: int64(t.inuse), InuseBytes: int64(t.inuseBytes)}
			if s == 0 {
				smp.NoStack = "allocations"
			} else if fr, ok := m.stacks[s]; ok {
				smp.Stack = fr
			} else {
				smp.NoStack = "unknown stack"
			}
			out = append(out, smp)
		}
	}
	return out
}

// since is p's figures from window w on: allocations counted since, and
// the blocks allocated since that are still live.
func (p *proc) since(w *window, pid uint32) map[uint64]*totals {
	before := w.allocs[pid] // nil for a process that came later: all of it counts
	out := map[uint64]*totals{}
	get := func(s uint64) *totals {
		t := out[s]
		if t == nil {
			t = &totals{}
			out[s] = t
		}
		return t
	}
	for s, t := range p.byStack {
		b := before[s]
		if t.allocs > b.allocs {
			g := get(s)
			g.allocs, g.allocBytes = t.allocs-b.allocs, t.allocBytes-b.allocBytes
		}
	}
	for _, b := range p.blocks {
		if b.seq > w.seq {
			g := get(b.stack)
			g.inuse++
			g.inuseBytes += b.size
		}
	}
	return out
}
