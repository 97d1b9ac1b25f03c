//go:build amd64 || arm64

package tracer

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/internal/ringread"
)

// Tracer owns the loaded programs, the links and the ring-buffer reader.
type Tracer struct {
	objs     MemtraceObjects
	rd       *ringread.Reader
	exit     link.Link
	procs    []link.Link
	opts     Options
	multi    bool
	session  bool // entry and return in one uprobe session link
	mu       sync.Mutex
	links    map[attachKey][]link.Link
	fellBack map[string]bool
	closing  sync.WaitGroup // ReleaseProcess's link closes in flight
	// give takes the links at Detach once handOffOK is set (SetHandOff);
	// retired are the links of exited processes kept for it.
	give      func(fds []int) error
	handOffOK atomic.Bool
	retired   []link.Link
	detached  atomic.Bool
	// releaseOnce: Release's one-time part (no more holds, no dlopen
	// hooks).
	releaseOnce sync.Once
	// Read's decode targets, kept to avoid an allocation per call.
	threads map[uint32]threadInfo // from mt_thread records, by tid
	unw     *unwinder             // nil unless stacks are walked with tables
	// compat: the stubs of the compat build (nil with the default one);
	// compatLacks: what the kernel lacks that made it the choice.
	compat      *compatStubs
	compatLacks string
	lazy        *lazyProgs // the allocation programs New did not load
	ev          event.Event
	st          event.Stack
	f           event.File
}

type attachKey struct {
	pid int
	dev uint64
	ino uint64
}

// New loads the BPF programs. Errors that mean BPF is not usable here wrap
// ErrUnavailable; a program the kernel refuses is a *RejectedError.
func New(opts Options) (*Tracer, error) {
	if opts.RingBytes == 0 {
		opts.RingBytes = DefaultRingBytes
	}
	if opts.WakeupBytes == 0 {
		opts.WakeupBytes = opts.RingBytes / 16
	}
	// The kernel's BTF (20-30 ms to decode) is needed by the session
	// check and the loaders; decoding it starts now, alongside the
	// object's.
	go kernelBTF.Kernel()
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("%w: raise the locked-memory limit: %w", ErrUnavailable, err)
	}
	ks, err := kernelLimit()
	if err != nil {
		return nil, err
	}
	load := LoadMemtrace
	if ks.compat {
		load = LoadMemtraceCompat
	}
	spec, err := load()
	if err != nil {
		return nil, fmt.Errorf("load BPF object: %w", err)
	}
	dwarf, err := configureSpec(spec, opts)
	if err != nil {
		return nil, err
	}
	if err := setUpMaps(spec, opts, ks.compat); err != nil {
		return nil, err
	}
	if !opts.NoMulti && !KernelHasAttachType("BPF_TRACE_UPROBE_MULTI") {
		// Before 6.6 the kernel loads a uprobe_multi program (the attach
		// type is not checked for kprobe programs) but refuses its link
		// with EINVAL, which says nothing of a missing feature: decided
		// here, from the kernel's BTF, as for session uprobes.
		opts.NoMulti = true
	}
	if ks.compat {
		// Neither uprobe_multi (6.6) nor session uprobes (6.13) are on
		// a kernel without the attach cookie (5.15).
		opts.NoMulti = true
	}
	t := &Tracer{opts: opts, compatLacks: ks.lacking, links: map[attachKey][]link.Link{}, fellBack: map[string]bool{}, threads: map[uint32]threadInfo{}, session: !opts.NoMulti && !opts.NoSession}
	if !kernelHasSessionUprobes() {
		// The verifier would refuse mt_session here; an empty program
		// takes its place and calls use two links. Decided from the
		// kernel's BTF up front, not by retrying after a failed load,
		// which would let a real bug in the session program pass as a
		// missing feature.
		for _, name := range []string{"mt_session", "mt_empty_session", "mt_floor_stack_session"} {
			repl := spec.Programs["mt_empty_multi"].Copy()
			repl.Name = spec.Programs[name].Name
			spec.Programs[name] = repl
		}
		t.session = false
	}
	skip := deferred(wantedProgs(opts, t.session))
	maps, cache, err := loadObjects(spec, &t.objs, skip)
	if err != nil {
		return nil, loadError(err)
	}
	t.lazy = &lazyProgs{spec: spec, maps: maps, cache: cache, field: programFields(&t.objs)}
	if ks.compat {
		if t.compat, err = newCompatStubs(maps); err != nil {
			t.objs.Close()
			return nil, err
		}
	}
	for _, c := range opts.Select.Comms {
		var key [16]byte
		if len(c) == 0 || len(c) > 15 {
			t.objs.Close()
			return nil, fmt.Errorf("--comm %q: give 1 to 15 bytes (the kernel keeps 15 of a process's name)", c)
		}
		copy(key[:], c)
		if err := t.objs.SelectComms.Put(key, uint8(1)); err != nil {
			t.objs.Close()
			return nil, fmt.Errorf("add --comm %q to the BPF filter: %w", c, err)
		}
	}
	if dwarf && !opts.Floor {
		if t.unw, err = newUnwinder(&t.objs, opts.Logf); err != nil {
			t.objs.Close()
			return nil, err
		}
	}
	if !opts.Floor {
		if err := t.attachProcessProbes(); err != nil {
			return nil, err
		}
	}
	t.rd, err = ringread.New(t.objs.Events.FD(), int(t.objs.Events.MaxEntries()))
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("open ring buffer: %w", err)
	}
	// uprobe_multi links cost 5-15 % less per hit than classic ones on the
	// kernels we measured; the first attach finds out if they exist.
	t.multi = !opts.NoMulti
	return t, nil
}

// configureSpec sizes the object's maps and sets its variables from the
// options; it says whether the DWARF walk is on.
func configureSpec(spec *ebpf.CollectionSpec, opts Options) (bool, error) {
	spec.Maps["events"].MaxEntries = uint32(opts.RingBytes)
	if err := spec.Variables["wakeup_bytes"].Set(uint64(opts.WakeupBytes)); err != nil {
		return false, fmt.Errorf("configure BPF object: %w", err)
	}
	if opts.StackDepth < 0 || opts.StackDepth > maxFrames {
		return false, fmt.Errorf("stack depth %d out of range: give 0 to %d", opts.StackDepth, maxFrames)
	}
	if len(opts.StackThreads) > 8 {
		return false, fmt.Errorf("%d --stack-threads patterns: at most 8 are supported", len(opts.StackThreads))
	}
	dwarf := false
	switch opts.StackUnwind {
	case "", "dwarf":
		dwarf = opts.StackDepth > 0
	case "fp":
	default:
		return false, fmt.Errorf("stack unwinding %q: give dwarf or fp", opts.StackUnwind)
	}
	// The floor walks no tables: its arrays stay one element each.
	if err := sizeUnwindMaps(spec, dwarf && !opts.Floor, opts.UnwindRows); err != nil {
		return false, err
	}
	if opts.SampleRate > MaxSampleRate {
		return false, fmt.Errorf("--sample %d: give at most %d bytes", opts.SampleRate, MaxSampleRate)
	}
	if opts.SampleRate > 0 && !opts.Floor {
		n := opts.SampleBlocks
		if n <= 0 {
			n = DefaultSampleBlocks
		}
		spec.Maps["sampled"].MaxEntries = uint32(n)
	}
	var pats [8][16]byte
	for i, p := range opts.StackThreads {
		if len(p) == 0 || len(p) > 15 {
			return false, fmt.Errorf("--stack-threads pattern %q: give 1 to 15 bytes (thread names are at most 15)", p)
		}
		copy(pats[i][:], p)
	}
	b2u := func(b bool) uint8 {
		if b {
			return 1
		}
		return 0
	}
	if len(opts.Select.Comms) > MaxSelectComms || len(opts.Select.Cgroups) > MaxSelectCgroups {
		return false, fmt.Errorf("%d --comm and %d --cgroup selectors: at most %d and %d are supported", len(opts.Select.Comms), len(opts.Select.Cgroups), MaxSelectComms, MaxSelectCgroups)
	}
	var cgroups [MaxSelectCgroups][2]uint64
	for i, c := range opts.Select.Cgroups {
		cgroups[i] = [2]uint64{c.ID, uint64(c.Level)}
	}
	agent := uint32(os.Getpid())
	if watchdogOnly() {
		agent = 0
	}
	ns, err := procfs.PIDNamespace()
	if err != nil {
		return false, err
	}
	for name, v := range map[string]any{
		"follow":           b2u(opts.Follow),
		"hold_exec":        b2u(opts.HoldExec),
		"agent_tgid":       agent,
		"pidns_dev":        ns.Dev,
		"pidns_ino":        ns.Ino,
		"stack_depth":      uint32(opts.StackDepth),
		"free_stacks":      b2u(!opts.NoFreeStacks),
		"unwind_dwarf":     b2u(dwarf),
		"n_stack_threads":  uint32(len(opts.StackThreads)),
		"stack_threads":    pats,
		"sample_rate":      opts.SampleRate,
		"sample_proc_max":  uint32(max(opts.SampleProcBlocks, 0)),
		"select_on":        b2u(opts.Select.Any()),
		"select_all":       b2u(opts.Select.All),
		"n_select_cgroups": uint32(len(opts.Select.Cgroups)),
		"select_cgroups":   cgroups,
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return false, fmt.Errorf("configure BPF object (%s): %w", name, err)
		}
	}
	return dwarf, nil
}

// attachProcessProbes attaches the process lifecycle programs; on an error
// the tracer is closed.
func (t *Tracer) attachProcessProbes() error {
	var err error
	opts := t.opts
	t.exit, err = link.AttachTracing(link.TracingOptions{Program: t.objs.MtExit})
	if err != nil {
		t.objs.Close()
		return fmt.Errorf("%w: attach to sched_process_exit: %w", ErrUnavailable, err)
	}
	for _, p := range []struct {
		name string
		prog *ebpf.Program
	}{{"sched_process_fork", t.objs.MtFork}, {"sched_process_exec", t.objs.MtExec}, {"task_rename", t.objs.MtRename}} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p.prog})
		if err != nil {
			t.Close()
			return fmt.Errorf("%w: attach to %s: %w", ErrUnavailable, p.name, err)
		}
		t.procs = append(t.procs, l)
	}
	if opts.Follow {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_exit", Program: t.objs.MtChildStart})
		if err != nil {
			t.Close()
			return fmt.Errorf("%w: attach to sys_exit (to hold forked children): %w", ErrUnavailable, err)
		}
		t.procs = append(t.procs, l)
	}
	return nil
}

// kernelBTF decodes the kernel's BTF once per process, for every load.
var kernelBTF = btf.NewCache()

// kernelHasSessionUprobes reports whether the kernel knows session
// uprobes (Linux 6.13+), by the attach type in its BTF.
func kernelHasSessionUprobes() bool {
	return KernelHasAttachType("BPF_TRACE_UPROBE_SESSION")
}

// KernelHasAttachType reports whether the kernel's BTF lists the BPF
// attach type name (BPF_TRACE_UPROBE_MULTI: 6.6+).
func KernelHasAttachType(name string) bool {
	ks, err := kernelBTF.Kernel()
	if err != nil {
		return false
	}
	var e *btf.Enum
	if err := ks.TypeByName("bpf_attach_type", &e); err != nil {
		return false
	}
	for _, v := range e.Values {
		if v.Name == name {
			return true
		}
	}
	return false
}

// Session reports whether allocation functions use session uprobe links.
func (t *Tracer) Session() bool { return t.session && t.multi }

// Multi reports whether probes use uprobe_multi links.
func (t *Tracer) Multi() bool { return t.multi }

// AddProcess lets the BPF programs record events of pid (a tgid).
func (t *Tracer) AddProcess(pid int) error {
	if err := t.objs.Targets.Put(uint32(pid), uint8(1)); err != nil {
		return fmt.Errorf("add process %d to the BPF filter: %w", pid, err)
	}
	return nil
}

// Lost returns how many records the ring buffer has refused so far.
func (t *Tracer) Lost() uint64 {
	var n uint64
	if v := t.objs.LostRecords; v != nil {
		_ = v.Get(&n)
	}
	return n
}

// SampleUntracked returns how many sampled blocks the kernel side's
// table had no room for (not sent: --sample's profile lacks them).
func (t *Tracer) SampleUntracked() uint64 {
	var n uint64
	if v := t.objs.SampleUntracked; v != nil {
		_ = v.Get(&n)
	}
	return n
}

// FellBack lists the functions whose probe sits on a single-stepped first
// instruction because no emulated one qualified.
func (t *Tracer) FellBack() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for n := range t.fellBack {
		out = append(out, n)
	}
	return out
}

// Read delivers every record available now, waiting at most PollInterval
// for the first one. It returns ringbuf.ErrClosed after Close.
func (t *Tracer) Read(h event.Handler) error {
	wait := PollInterval
	if t.detached.Load() {
		wait = 0
	}
	err := t.rd.Read(wait, func(b []byte) { t.record(h, b) })
	t.drainBacklog(h)
	return err
}

// drainBacklog delivers the fork, exec and exit records that found the
// ring full (struct mt_backlog): a thread record, then its event.
func (t *Tracer) drainBacklog(h event.Handler) {
	if t.objs.Backlog == nil {
		return
	}
	buf := make([]byte, backlogSize)
	for i := 0; i < backlogMax; i++ {
		if err := t.objs.Backlog.LookupAndDelete(nil, &buf); err != nil {
			return
		}
		t.record(h, buf[:threadSize])
		t.record(h, buf[backlogEventOff:backlogEventOff+eventSize])
	}
}

// record decodes one ring-buffer record and hands it to h.
func (t *Tracer) record(h event.Handler, b []byte) {
	{
		switch recordType(b) {
		case recStack:
			if decodeStack(&t.st, b) == nil {
				if t.unw != nil {
					for _, f := range t.unw.fillFrames(t.st.TGID, t.st.TS, t.st.Frames) {
						h.File(&f)
					}
				}
				h.Stack(&t.st)
			}
		case recFile:
			if decodeFile(&t.f, b) == nil {
				h.File(&t.f)
			}
		case recRemap:
			if r, err := decodeRemap(b); err == nil && t.unw != nil {
				// Mappings the kernel side lacks: a library mapped
				// since the last scan, or by ld.so just now.
				t.remap(r.pid, r.held, r.holdKey)
			}
		case recThread:
			if tid, ti, err := decodeThread(b); err == nil {
				t.threads[tid] = ti
			}
		case recPacked, recEvent:
			if decodeEvent(&t.ev, b) != nil {
				return
			}
			ti, ok := t.threads[t.ev.TID]
			if !ok {
				// Its thread record was lost (the ring was full).
				ti = procThread(t.ev.TID)
				t.threads[t.ev.TID] = ti
			}
			t.ev.TGID, t.ev.Comm = ti.tgid, ti.comm
			if t.ev.Kind == event.KindExec && t.unw != nil {
				// The new image, while it is held (in -- mode):
				// the program and its dynamic linker.
				if t.unw.updateProcess(int(t.ev.TGID), true) == nil {
					_ = t.watchLoader(int(t.ev.TGID))
				}
			}
			h.Event(&t.ev)
			if t.ev.Kind == event.KindExit {
				delete(t.threads, t.ev.TID)
			}
		}
	}
}

// procThread asks /proc about a thread whose record is missing; for one
// gone too, it guesses a single-threaded process.
func procThread(tid uint32) threadInfo {
	ti := threadInfo{tgid: tid}
	st, err := procfs.ReadStatus(int(tid))
	if err != nil {
		return ti
	}
	copy(ti.comm[:15], st.Name)
	if st.Tgid > 0 {
		ti.tgid = uint32(st.Tgid)
	}
	return ti
}

// Detach removes every uprobe, so that no new events come while the
// reader drains what is left; the targets carry on untouched.
//
// After AllowHandOff the links go to SetHandOff's receiver instead, and
// the closes here only drop references: the kernel's release, which
// waits a grace period per batch, happens in the receiver.
func (t *Tracer) Detach() {
	t.mu.Lock()
	var all []link.Link
	for k, ls := range t.links {
		all = append(all, ls...)
		delete(t.links, k)
	}
	all = append(all, t.retired...)
	t.retired = nil
	give := t.give
	t.mu.Unlock()
	// No hold may wait for a reader that is about to stop: the drain
	// that follows no longer answers them.
	t.Release()
	if give != nil && t.handOffOK.Load() && !t.targetsAlive() && handOff(all, give) == nil {
		for _, l := range all {
			if l != nil {
				l.Close()
			}
		}
	} else {
		closeLinks(all)
	}
	t.closing.Wait()
	// With the probes gone every record is committed: reading what is
	// left need not wait for more.
	t.detached.Store(true)
}

// Close detaches everything and unloads the programs. Probes vanish from
// the traced processes, which carry on untouched.
func (t *Tracer) Close() error {
	t.Detach()
	for _, l := range t.procs {
		l.Close()
	}
	// With every program that holds gone, a last sweep; the exit
	// program (agent_exit's release) goes last.
	t.Release()
	if t.exit != nil {
		t.exit.Close()
	}
	if t.rd != nil {
		t.rd.Close()
	}
	t.compat.close()
	return t.objs.Close()
}
