//go:build amd64 || arm64

package fdtrace

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/event/fdevent"
	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/internal/ringread"
)

type objects struct {
	SysEnter    *ebpf.Program  `ebpf:"fd_sys_enter"`
	SysExit     *ebpf.Program  `ebpf:"fd_sys_exit"`
	Events      *ebpf.Map      `ebpf:"fd_events"`
	Targets     *ebpf.Map      `ebpf:"fd_targets"`
	Calls       *ebpf.Map      `ebpf:"fd_calls"`
	LostRecords *ebpf.Variable `ebpf:"lost_records"`
}

// testObjects adds the programs that BPF_PROG_TEST_RUN drives.
type testObjects struct {
	objects
	TestEnter *ebpf.Program `ebpf:"fd_test_enter"`
	TestExit  *ebpf.Program `ebpf:"fd_test_exit"`
}

// Tracer owns the loaded programs, their links and the ring-buffer reader.
type Tracer struct {
	objs  testObjects
	links []link.Link
	rd    *ringread.Reader
}

// callsFor lists the calls that the kernel side must report for track: the
// buffer kinds need the dups and closes to know when a buffer's last
// descriptor goes, but not the other opens.
func callsFor(track config.Track) map[fdevent.Call]bool {
	want := map[fdevent.Call]bool{}
	if track.Any(config.TrackFD | config.TrackDmabuf | config.TrackION) {
		for _, c := range []fdevent.Call{fdevent.CallDup, fdevent.CallDup2, fdevent.CallDup3, fdevent.CallFcntl, fdevent.CallClose, fdevent.CallCloseRange} {
			want[c] = true
		}
	}
	if track.Any(config.TrackDmabuf | config.TrackION) {
		want[fdevent.CallIoctl] = true
	}
	if track.Has(config.TrackFD) {
		for c := fdevent.CallOpen; c < fdevent.CallMax; c++ {
			if c != fdevent.CallIoctl {
				want[c] = true
			}
		}
	}
	return want
}

// New loads the programs and attaches them to the raw syscall
// tracepoints. Nothing is recorded until AddProcess. Errors that mean BPF
// is not usable here wrap ErrUnavailable.
func New(opts Options) (*Tracer, error) {
	return newTracer(opts, false)
}

func newTracer(opts Options, test bool) (*Tracer, error) {
	if !opts.Track.Any(config.TrackFD | config.TrackDmabuf | config.TrackION) {
		return nil, errors.New("fd tracer: nothing to trace: track needs at least one of fd, dmabuf, ion")
	}
	if len(syscallCalls) == 0 {
		return nil, fmt.Errorf("%w: no syscall table for this architecture (x86-64 and arm64 have one)", ErrUnavailable)
	}
	if opts.RingBytes == 0 {
		opts.RingBytes = DefaultRingBytes
	}
	if opts.RingBytes < os.Getpagesize() || opts.RingBytes&(opts.RingBytes-1) != 0 {
		return nil, fmt.Errorf("fd tracer: ring buffer size %d is not a power of two of at least a page", opts.RingBytes)
	}
	if opts.WakeupBytes == 0 {
		opts.WakeupBytes = opts.RingBytes / 4
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("%w: raise the locked-memory limit: %w", ErrUnavailable, err)
	}
	loadSpec := LoadFdtrack
	if opts.Compat {
		loadSpec = LoadFdtrackCompat
	}
	spec, err := loadSpec()
	if err != nil {
		return nil, fmt.Errorf("load the fd BPF object: %w", err)
	}
	spec.Maps["fd_events"].MaxEntries = uint32(opts.RingBytes)
	depth := uint32(min(max(opts.StackDepth, 0), maxFrames))
	var load *ebpf.CollectionOptions
	if depth > 0 {
		if load, err = shareStackMaps(spec, opts.Stacks); err != nil {
			return nil, err
		}
	}
	if err := spec.Variables["stack_depth"].Set(depth); err != nil {
		return nil, fmt.Errorf("configure descriptor tracing: %w", err)
	}
	if err := spec.Variables["unwind_dwarf"].Set(b2u(opts.DWARF)); err != nil {
		return nil, fmt.Errorf("configure descriptor tracing: %w", err)
	}
	if err := spec.Variables["wakeup_bytes"].Set(uint64(opts.WakeupBytes)); err != nil {
		return nil, fmt.Errorf("configure the fd BPF object: %w", err)
	}
	// Its records' pids are memtrace's namespace's, as the allocation
	// tracer's (bpf/mt_pidns.h).
	ns, err := procfs.PIDNamespace()
	if err != nil {
		return nil, err
	}
	for name, v := range map[string]uint64{"pidns_dev": ns.Dev, "pidns_ino": ns.Ino} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("configure the fd BPF object (%s): %w", name, err)
		}
	}
	t := &Tracer{}
	var into any = &t.objs.objects
	if test {
		into = &t.objs
	}
	if err := spec.LoadAndAssign(into, load); err != nil {
		return nil, fmt.Errorf("%w: load the fd BPF programs: %w", ErrUnavailable, err)
	}
	want := callsFor(opts.Track)
	for nr, c := range syscallCalls {
		if want[c] {
			if err := t.objs.Calls.Put(nr, uint8(c)); err != nil {
				t.Close()
				return nil, fmt.Errorf("fill the syscall table: %w", err)
			}
		}
	}
	if !test {
		for _, a := range []struct {
			name string
			prog *ebpf.Program
		}{{"sys_enter", t.objs.SysEnter}, {"sys_exit", t.objs.SysExit}} {
			l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: a.name, Program: a.prog})
			if err != nil {
				t.Close()
				return nil, fmt.Errorf("%w: attach to raw tracepoint %s: %w", ErrUnavailable, a.name, err)
			}
			t.links = append(t.links, l)
		}
	}
	if t.rd, err = ringread.New(t.objs.Events.FD(), int(t.objs.Events.MaxEntries())); err != nil {
		t.Close()
		return nil, fmt.Errorf("open the fd ring buffer: %w", err)
	}
	return t, nil
}

// stackMaps are the maps of the allocation tracer's that a descriptor's
// stack is walked over and sent through; the walk's per-CPU scratch stays
// this object's own.
var stackMaps = []string{"events", "stacks_sent", "files_sent", "unwind_rows", "unwind_pages", "unwind_ext",
	"unwind_procs", "unwind_files", "unwind_stale"}

// shareStackMaps puts the tracer's maps in place of this object's copies,
// sized and flagged (preallocated or not) as the tracer made them.
func shareStackMaps(spec *ebpf.CollectionSpec, have map[string]*ebpf.Map) (*ebpf.CollectionOptions, error) {
	repl := make(map[string]*ebpf.Map, len(stackMaps))
	for _, name := range stackMaps {
		m := have[name]
		if m == nil {
			return nil, fmt.Errorf("fd tracer: descriptor stacks need the allocation tracer's %s map: start it with the same --stack-depth", name)
		}
		ms := spec.Maps[name]
		if ms == nil {
			return nil, fmt.Errorf("fd tracer: the fd BPF object has no %s map: rebuild memtrace (go generate)", name)
		}
		ms.MaxEntries = m.MaxEntries()
		ms.Flags = m.Flags()
		repl[name] = m
	}
	return &ebpf.CollectionOptions{MapReplacements: repl}, nil
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// AddProcess starts recording the descriptor calls of pid (a tgid).
func (t *Tracer) AddProcess(pid int) error {
	if err := t.objs.Targets.Put(uint32(pid), uint8(1)); err != nil {
		return fmt.Errorf("add process %d to the fd tracer's filter: %w", pid, err)
	}
	return nil
}

// RemoveProcess stops recording pid.
func (t *Tracer) RemoveProcess(pid int) {
	_ = t.objs.Targets.Delete(uint32(pid))
}

// Lost returns how many records the ring buffer has refused so far.
func (t *Tracer) Lost() uint64 {
	var n uint64
	if v := t.objs.LostRecords; v != nil {
		_ = v.Get(&n)
	}
	return n
}

// Read delivers every record available now, waiting at most PollInterval
// for the first one. The Event passed to fn is reused after fn returns.
// Records come in the order they were reserved, which is nearly but not
// exactly time order across CPUs: sort by TS before feeding a Table. It
// returns ringbuf.ErrClosed after Close.
func (t *Tracer) Read(fn func(*fdevent.Event)) error {
	var ev fdevent.Event
	return t.rd.Read(PollInterval, func(b []byte) {
		if decode(&ev, b) == nil {
			fn(&ev)
		}
	})
}

// Detach stops new events (the ring keeps what it holds, for Read).
func (t *Tracer) Detach() {
	for _, l := range t.links {
		l.Close()
	}
	t.links = nil
}

// Close detaches the programs and unloads them.
func (t *Tracer) Close() error {
	for _, l := range t.links {
		l.Close()
	}
	t.links = nil
	if t.rd != nil {
		t.rd.Close()
	}
	o := &t.objs
	for _, p := range []*ebpf.Program{o.SysEnter, o.SysExit, o.TestEnter, o.TestExit} {
		if p != nil {
			p.Close()
		}
	}
	for _, m := range []*ebpf.Map{o.Events, o.Targets, o.Calls} {
		if m != nil {
			m.Close()
		}
	}
	return nil
}
