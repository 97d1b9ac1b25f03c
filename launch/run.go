package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/runner"
	"github.com/memtrace/memtrace/tracer"
)

// Options is the run's options; launch reads the shared ones and those
// marked eBPF only.
type Options = runner.Options

// tracerAPI is what the launcher, the attacher and the event loop use of
// the eBPF tracer: *tracer.Tracer in memtrace, a fake in the unit tests,
// which feed the loop events no kernel produced.
type tracerAPI interface {
	Read(h event.Handler) error
	Lost() uint64
	Session() bool
	Multi() bool
	FellBack() []string
	AddProcess(pid int) error
	ScanProcess(pid int) ([]string, error)
	AttachLibrary(pid int, path string) (bool, error)
	Resume(pid int, key uint32) error
	ReleaseProcess(pid int)
	Detach()
	ProgramStats() []tracer.ProgramStat
	UnwindUsage() (rows, capacity uint32, tables int)
	WalkReuse() (replayed, walked uint64)
}

var _ tracerAPI = (*tracer.Tracer)(nil)

// Source is the eBPF tracer as a runner.Source: it starts PROG through
// the exec shim or attaches to -p PIDs, and runs the event loop from the
// ring buffer into the Session.
type Source struct {
	// fake, when set (the unit tests), stands for the tracer: no BPF is
	// loaded and no watchdog started.
	fake tracerAPI

	o      *Options
	r      *runner.Handle // the run, from Trace on
	stderr io.Writer
	tr     *probeCounter
	closer func() // closes the real tracer
	l      *loop
	// shim is PROG's exec shim, started while the BPF programs load;
	// released once it was told to exec PROG; handOff tells the tracer
	// that the program and everything it left behind have exited, and
	// wake that the loop is to stop (both nil with a fake tracer).
	shim     *shim
	released bool
	handOff  func()
	wake     func()
	// Attach mode: a pidfd per target, and when the probes were on.
	watchers []int
	attached uint64
	// Selectors (--comm, --cgroup, --all): what they match, the running
	// processes attached to at the start, and the count of those left
	// untraced (/metrics).
	sel      selector
	tsel     tracer.Selector
	selected []int
	dropped  atomic.Uint64
}

// New is the eBPF source.
func New() *Source { return &Source{} }

// Run traces o with the eBPF tracer (runner.Run with this source), and
// with fallback where eBPF is unavailable and a program is to be started.
func Run(o Options, stderr io.Writer, fallback runner.Source) (int, error) {
	return runner.Run(o, stderr, New(), fallback)
}

func monoNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// bpfProblem says why eBPF cannot be used here, before anything is started.
func bpfProblem() error {
	if os.Getenv("MEMTRACE_TEST_NO_BPF") == "1" {
		// Tests only: the automatic fallback on a machine with BPF.
		return fmt.Errorf("%w: MEMTRACE_TEST_NO_BPF=1 is set (a test hook)", tracer.ErrUnavailable)
	}
	if os.Geteuid() != 0 && !bpfCapable() {
		return fmt.Errorf("%w: loading BPF programs needs root (CAP_BPF and CAP_PERFMON): run memtrace with sudo", tracer.ErrUnavailable)
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return fmt.Errorf("%w: this kernel has no BTF (/sys/kernel/btf/vmlinux): use a kernel built with CONFIG_DEBUG_INFO_BTF", tracer.ErrUnavailable)
	}
	return nil
}

// Start loads the BPF programs and puts the probes on: on the exec shim,
// which has not run PROG yet, or on the -p processes.
func (s *Source) Start(r *runner.Handle) (int, error) {
	s.o, s.stderr = r.Options(), r.Stderr()
	o := s.o
	if s.fake == nil {
		if err := bpfProblem(); err != nil {
			return 1, runner.Unavailable(err)
		}
	}
	for _, pid := range o.PIDs {
		if err := checkAttachable(pid); err != nil {
			return 1, err
		}
	}
	if o.Selecting() {
		var err error
		if s.sel, s.tsel, err = newSelector(o); err != nil {
			return 2, err
		}
		if s.fake == nil && !hasCap(capKill) {
			// Each new process is held at its exec and resumed with a
			// SIGCONT, which another user's process takes only from
			// a holder of CAP_KILL: without it, it would stay stopped
			// until memtrace's exit.
			return 1, fmt.Errorf("--comm, --cgroup and --all hold each process at its exec until it is probed, and resuming another user's process needs CAP_KILL: give memtrace that capability (docs/fleet.md, \"Capabilities\")")
		}
		r.SetDropped(s.dropped.Load)
	}
	// The shim, the listing of PROG's libraries and the watchdog start
	// first: their execs run while the BPF programs load, which is most
	// of the start-up of a short program.
	if len(o.Argv) > 0 {
		sh, status, err := startShim(o)
		if err != nil {
			return status, err
		}
		s.shim = sh
	}
	tr := s.fake
	if tr == nil {
		var err error
		if tr, err = s.load(); err != nil {
			s.Close()
			// A program this kernel refuses is its limit as far as
			// the user can act: a started program runs under
			// LD_PRELOAD instead, with the refusal as the notice (the
			// tests, which assert mode=bpf, still fail on it).
			var rej *tracer.RejectedError
			if errors.Is(err, tracer.ErrUnavailable) || errors.As(err, &rej) {
				err = runner.Unavailable(err)
			}
			return 1, err
		}
	}
	s.tr = countProbes(tr)
	r.SetProbes(s.tr.count)
	r.SetMode(logfmt.ModeBPF)
	if t, ok := tr.(*tracer.Tracer); ok {
		r.SetSampleUntracked(t.SampleUntracked)
	}
	var status int
	var err error
	switch {
	case len(o.Argv) > 0:
		status, err = s.startLaunch()
	case o.Selecting():
		err = s.startSelect(r)
		status = 1
	default:
		err = s.startAttach()
		status = 1
	}
	if err != nil {
		s.Close()
		return status, err
	}
	return 0, nil
}

// load starts the watchdog where one is needed and loads the tracer.
func (s *Source) load() (tracerAPI, error) {
	o := s.o
	// Holds: at exec in -- mode, at fork and exec with --follow, at
	// dlopen with DWARF stacks. Where the kernel side cannot release
	// them itself at memtrace's exit, a watchdog process does; in --
	// mode one runs anyway, to close the probes after the program
	// (SetHandOff).
	holds := len(o.Argv) > 0 || o.Follow || o.Selecting() || o.StackDepth > 0 && o.StackUnwind != "fp" && !o.Floor
	var wd *watchdog
	if len(o.Argv) > 0 || holds && !tracer.KernelRelease() {
		var err error
		if wd, err = startWatchdog(); err != nil {
			return nil, err
		}
		// Only the kernel closes memtrace's end, at memtrace's exit:
		// the watchdog must not resume anything while memtrace may
		// still hold a process.
		watchdogSock = wd
	}
	tr, err := tracer.New(tracer.Options{RingBytes: o.RingBytes, Floor: o.Floor, NoMulti: o.NoMulti,
		StackDepth: o.StackDepth, StackThreads: o.StackThreads, NoFreeStacks: o.NoFreeStacks, Follow: o.Follow, HoldExec: len(o.Argv) > 0,
		CheckInternalFrees: len(o.PIDs) > 0 || o.Selecting(), StackUnwind: o.StackUnwind, SampleRate: o.Sample, SampleBlocks: o.MaxSamples, SampleProcBlocks: procSamples(o), Select: s.tsel,
		Logf: verboseLogf(o.Verbose, s.stderr)})
	if err != nil {
		if wd != nil && errors.Is(err, tracer.ErrUnavailable) {
			// Nothing of the LD_PRELOAD path can be held.
			wd.sock.Close()
			watchdogSock = nil
		}
		return nil, err
	}
	s.closer = func() { tr.Close() }
	if c := tr.Compat(); c != "" {
		fmt.Fprintf(s.stderr, "memtrace: notice: %s: tracing with the eBPF programs for kernels before %s\n", c, tracer.FullKernel)
	}
	if wd != nil {
		if err := wd.sendHold(tr.HoldFD()); err != nil {
			tr.Close()
			s.closer = nil
			return nil, err
		}
		if len(o.Argv) > 0 {
			// In -- mode every target is memtrace's: once all have
			// exited, the watchdog closes the probes and memtrace
			// exits without waiting for the kernel to release them.
			tr.SetHandOff(wd.giveLinks)
			s.handOff = tr.AllowHandOff
		}
	}
	s.wake = tr.Wake
	return tr, nil
}

// Configure gives the Session the loop's clock and callbacks.
func (s *Source) Configure(c *agent.Config) { s.l.configure(c) }

// Trace runs the event loop: PROG released, or the attached processes
// logged, until they end or Ctrl-C.
func (s *Source) Trace(r *runner.Handle, sess *agent.Session) (int, error) {
	s.l.sess = sess
	s.r = r
	if len(s.o.Argv) > 0 {
		return s.traceLaunch()
	}
	if s.o.Selecting() {
		return 0, s.traceSelect()
	}
	return 0, s.traceAttach()
}

// Close ends a shim that was never released, and unloads the tracer (in
// -p mode its probes come off here, before Run returns).
func (s *Source) Close() error {
	if s.shim != nil && !s.released {
		s.shim.abort()
	}
	if s.shim != nil {
		s.shim.w.Close()
		s.shim.ready.Close()
	}
	for _, fd := range s.watchers {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	s.watchers = nil
	if s.l != nil {
		s.l.closeFD()
	}
	if s.closer != nil {
		s.closer()
		s.closer = nil
	}
	return nil
}

// verboseLogf is the tracer's -v output (unwind tables built), or nil.
func verboseLogf(verbose bool, w io.Writer) func(string, ...any) {
	if !verbose {
		return nil
	}
	return func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
}

// watchdogSock is memtrace's end of the watchdog's socket, kept open (and
// reachable, so no finalizer closes it) for memtrace's whole life, also
// after Run returns: a package variable is never collected.
var watchdogSock *watchdog

// bpfCapable reports whether memtrace, not root, has what loading and
// attaching its programs takes: CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN,
// which kernels before 5.8 asked for instead), as a container granted the
// capability set of docs/fleet.md has them.
func bpfCapable() bool {
	return hasCap(capSysAdmin) || hasCap(capPerfmon) && hasCap(capBPF)
}

const capKill, capSysAdmin, capPerfmon, capBPF = 5, 21, 38, 39

// hasCap reports whether capability c is in memtrace's effective set.
func hasCap(c int) bool {
	st, err := procfs.ReadStatus(os.Getpid())
	return err == nil && st.CapsKnown && st.CapEff&(1<<c) != 0
}

// procSamplesDivisor: with --comm, --cgroup or --all, a process may hold
// at most this fraction of the sampled blocks' table unless
// --max-proc-samples says otherwise, so that one process's heap cannot
// crowd out the rest; one traced program (or -p, --follow) has the whole
// table.
const procSamplesDivisor = 4

// procSamples is --max-proc-samples or its default (0: no bound of its
// own).
func procSamples(o *runner.Options) int {
	if o.MaxProcSamples > 0 || !o.Selecting() {
		return o.MaxProcSamples
	}
	total := o.MaxSamples
	if total <= 0 {
		total = tracer.DefaultSampleBlocks
	}
	return max(total/procSamplesDivisor, 1)
}
