package live

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/memtrace/memtrace/internal/heapprof"
	"github.com/memtrace/memtrace/internal/procfs"
)

// Frame is a frame as the agent names it (module, mangled symbol, offset,
// address).
type Frame = heapprof.Frame

type block struct {
	stack, size uint64
	seq         uint64 // when it was allocated: the model's allocation count then
}

// totals is one stack's figures in one process: exact counts, or under
// --sample the estimates (float64 holds every count exactly below 2^53).
type totals struct {
	allocs, allocBytes float64
	inuse, inuseBytes  float64
}

type proc struct {
	blocks                               map[uint64]block
	byStack                              map[uint64]*totals
	allocs, allocBytes, frees, freeBytes float64
	liveBytes                            float64
	comm                                 string // read at the first scrape
	// cgroup and container are the process's cgroup v2 path and the
	// container id it names, read with comm (labels: docs/fleet.md).
	cgroup, container string
}

// names reads the process's comm and cgroup once, at the first scrape
// that needs them (the process may be gone by then: then they stay "").
func (p *proc) names(pid uint32) {
	if p.comm != "" {
		return
	}
	p.comm = readComm(pid)
	p.cgroup, _ = procfs.ReadCgroup(int(pid))
	p.container = procfs.ContainerID(p.cgroup)
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
	// Untracked, when set, says how many sampled blocks the tracer could
	// not keep (--sample), for /metrics.
	Untracked func() uint64
	// Dropped, when set (--comm, --cgroup, --all), says how many selected
	// processes were left untraced, for /metrics.
	Dropped func() uint64

	rate     float64   // --sample's mean bytes between samples; 0: every block
	keepExit bool      // exited processes stay (a profile written at the end)
	since    time.Time // when tracing began (zero: unknown)
	attached bool      // the processes ran before it (-p)
	mode     string    // the capture path (logfmt.ModeBPF), for the profiles
}

// SetMode names the capture path the events come from.
func (m *Model) SetMode(mode string) {
	m.mu.Lock()
	m.mode = mode
	m.mu.Unlock()
}

// Mode is what SetMode set.
func (m *Model) Mode() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mode
}

// SetSampleRate makes every block count as the blocks it stands for under
// --sample rate (docs/sampling.md); 0, the default, counts each once.
// Call it before the first event.
func (m *Model) SetSampleRate(rate uint64) {
	m.mu.Lock()
	m.rate = float64(rate)
	m.mu.Unlock()
}

// SampleRate is the rate SetSampleRate set.
func (m *Model) SampleRate() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return uint64(m.rate)
}

// KeepExited keeps the heap of each process that exits, for a profile
// written at the end of the run (-o FILE.pb.gz).
func (m *Model) KeepExited() {
	m.mu.Lock()
	m.keepExit = true
	m.mu.Unlock()
}

// SetTracedSince says when tracing began, and whether the processes ran
// before (attached: their older blocks are not in the model).
func (m *Model) SetTracedSince(t time.Time, attached bool) {
	m.mu.Lock()
	m.since, m.attached = t, attached
	m.mu.Unlock()
}

// TracedSince is what SetTracedSince set.
func (m *Model) TracedSince() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.since, m.attached
}

// Weight is what one sampled block of size bytes stands for at a mean of
// rate bytes between samples: it was sampled with probability
// p = 1 - e^(-size/rate), so it counts 1/p blocks and size/p bytes, the
// unbiased estimate Go's heap profile makes (runtime/pprof's
// scaleHeapSample). rate 0: the block itself.
func Weight(size uint64, rate float64) (count, bytes float64) {
	if rate <= 0 {
		return 1, float64(size)
	}
	if size == 0 {
		return 1, 0
	}
	p := -math.Expm1(-float64(size) / rate)
	return 1 / p, float64(size) / p
}

func (m *Model) weight(size uint64) (float64, float64) { return Weight(size, m.rate) }

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
		p.release(m, ptr, old)
	}
	m.seq++
	p.blocks[ptr] = block{stack: stack, size: size, seq: m.seq}
	t := p.byStack[stack]
	if t == nil {
		t = &totals{}
		p.byStack[stack] = t
	}
	wc, wb := m.weight(size)
	t.allocs += wc
	t.allocBytes += wb
	t.inuse += wc
	t.inuseBytes += wb
	p.allocs += wc
	p.allocBytes += wb
	p.liveBytes += wb
	m.mu.Unlock()
}

// Free releases the block at ptr; an unknown one (allocated before the
// attach, or filtered out) changes nothing.
func (m *Model) Free(pid uint32, ptr, ts uint64) {
	m.mu.Lock()
	if p := m.procs[pid]; p != nil {
		if b, ok := p.blocks[ptr]; ok {
			p.release(m, ptr, b)
			wc, wb := m.weight(b.size)
			p.frees += wc
			p.freeBytes += wb
		}
	}
	m.mu.Unlock()
}

func (p *proc) release(m *Model, ptr uint64, b block) {
	delete(p.blocks, ptr)
	wc, wb := m.weight(b.size)
	p.liveBytes -= wb
	if t := p.byStack[b.stack]; t != nil {
		t.inuse -= wc
		t.inuseBytes -= wb
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
			wc, wb := m.weight(b.size)
			t.inuse += wc
			t.inuseBytes += wb
			c.liveBytes += wb
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

// Track makes pid a process of the model with an empty heap, unless it is
// one already: a process attached to (--comm, --cgroup, --all) is in
// /metrics from then on, before its first (sampled) allocation.
func (m *Model) Track(pid uint32) {
	m.mu.Lock()
	m.proc(pid)
	m.mu.Unlock()
}

// ProcessExit forgets pid: the model holds live processes only.
func (m *Model) ProcessExit(pid uint32) {
	m.mu.Lock()
	if !m.keepExit {
		delete(m.procs, pid)
	}
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
	Comm, Cgroup, ContainerID            string
	LiveBytes, LiveBlocks                uint64
	Allocs, AllocBytes, Frees, FreeBytes uint64
	SampledBlocks                        uint64 // blocks held (under --sample, the samples live)
}

// round is an estimate as a whole number: never below 0, which float
// sums of weights added and taken away may drift to.
func round(f float64) uint64 {
	if f < 0.5 {
		return 0
	}
	return uint64(math.Round(f))
}

// Stats returns every process's figures, by pid, the records lost and the
// distinct stacks held.
func (m *Model) Stats() (procs []ProcStats, lost uint64, stacks int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for pid, p := range m.procs {
		p.names(pid)
		var inuse float64
		for _, t := range p.byStack {
			inuse += t.inuse
		}
		procs = append(procs, ProcStats{PID: pid, Comm: p.comm, Cgroup: p.cgroup, ContainerID: p.container, LiveBytes: round(p.liveBytes), LiveBlocks: round(inuse),
			Allocs: round(p.allocs), AllocBytes: round(p.allocBytes), Frees: round(p.frees), FreeBytes: round(p.freeBytes),
			SampledBlocks: uint64(len(p.blocks))})
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
	rate   float64
	seq    uint64
	allocs map[uint32]map[uint64]totals // per process, per stack: allocations so far
}

func (m *Model) startWindow() *window {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := &window{rate: m.rate, seq: m.seq, allocs: map[uint32]map[uint64]totals{}}
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
		p.names(id)
		// pprof's -tagfocus and Parca's and Pyroscope's label filters
		// select a container or a cgroup's processes by these.
		var labels map[string]string
		if p.cgroup != "" {
			labels = map[string]string{"cgroup": p.cgroup}
			if p.container != "" {
				labels["container_id"] = p.container
			}
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
			smp := heapprof.Sample{PID: int64(id), Process: p.comm, Labels: labels,
				AllocObjects: int64(round(t.allocs)), AllocBytes: int64(round(t.allocBytes)),
				InuseObjects: int64(round(t.inuse)), InuseBytes: int64(round(t.inuseBytes))}
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
			wc, wb := Weight(b.size, w.rate)
			g.inuse += wc
			g.inuseBytes += wb
		}
	}
	return out
}
