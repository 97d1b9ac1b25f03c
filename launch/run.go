package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/tracer"
)

// Options is what memtrace's command line asks of an eBPF run.
type Options struct {
	// Argv is the program to start (-- PROG ARGS); PIDs the processes to
	// attach to (-p). Exactly one of them is set.
	Argv []string
	PIDs []int
	// Output is the -o file ("" for stderr, NoLog for none); Listen, if
	// set, serves the log to one viewer on ADDR:PORT instead.
	Output string
	Listen string
	// HTTP serves the live heap (/debug/pprof/heap, /metrics) on this
	// address (a port alone: loopback); ProfileDir writes a heap profile
	// there every Interval.
	HTTP       string
	ProfileDir string

	MinSize      uint64
	StackDepth   int
	StackThreads []string
	TrackThreads []string
	NoFreeStacks bool   // frees carry no stack
	StackUnwind  string // "dwarf" or "fp"
	Follow       bool
	Track        config.Track
	MmapFiles    bool
	ReportDir    string
	Interval     time.Duration
	PeakTopN     int
	RingBytes    int
	Floor        bool
	NoMulti      bool
	Verbose      bool

	live *liveRun // --http, --profile-dir
	// compressed is the -o FILE.zst/.gz writer, which knows the size of
	// the text it compressed (the closing lines' read-back is bounded by
	// that, not by the file's size).
	compressed *logio.Writer
	// logFailed is the launch-mode log's sink, which remembers its
	// first write error (openOutput).
	logFailed *keepGoing
	// shim is PROG's exec shim, started by Run while the BPF programs
	// load (launch starts one itself without); handOff tells the tracer
	// that the program and everything it left behind have exited, and
	// wake that the loop is to stop (both nil with a fake tracer).
	shim    *shim
	handOff func()
	wake    func()
}

// tracerAPI is what the launcher, the attacher and the event loop use of
// the eBPF tracer: *tracer.Tracer in memtrace, a fake in the unit tests,
// which feed the loop events no kernel produced.
type tracerAPI interface {
	Read(h tracer.Handler) error
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
}

var _ tracerAPI = (*tracer.Tracer)(nil)

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
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: loading BPF programs needs root (CAP_BPF and CAP_PERFMON): run memtrace with sudo", tracer.ErrUnavailable)
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return fmt.Errorf("%w: this kernel has no BTF (/sys/kernel/btf/vmlinux): use a kernel built with CONFIG_DEBUG_INFO_BTF", tracer.ErrUnavailable)
	}
	return nil
}

// Run traces o.Argv (started here) or o.PIDs (attached to) with the eBPF
// tracer until they end or Ctrl-C, and returns memtrace's exit status:
// the program's, 128+N for a signal. Where eBPF is unavailable and a
// program is to be started, it says so in one notice and returns
// fallback's result (the LD_PRELOAD path, which main wires).
func Run(o Options, stderr io.Writer, fallback func() (int, error)) (int, error) {
	if len(o.Argv) > 0 {
		if _, err := exec.LookPath(o.Argv[0]); err != nil {
			return 127, fmt.Errorf("cannot run %s: %w: check the program's path", o.Argv[0], unwrapExecErr(err))
		}
	}
	if err := bpfProblem(); err != nil {
		if o.HTTP != "" || o.ProfileDir != "" {
			return 1, fmt.Errorf("--http and --profile-dir need the eBPF tracer (the LD_PRELOAD fallback has no live model): %w", err)
		}
		if len(o.Argv) > 0 {
			fmt.Fprintf(stderr, "memtrace: notice: %v; using the LD_PRELOAD fallback\n", err)
			return fallback()
		}
		return 1, err
	}
	for _, pid := range o.PIDs {
		if err := checkAttachable(pid); err != nil {
			return 1, err
		}
	}
	// The shim, the listing of PROG's libraries and the watchdog start
	// first: their execs run while the BPF programs load, which is most
	// of the start-up of a short program.
	if len(o.Argv) > 0 {
		sh, status, err := startShim(&o)
		if err != nil {
			return status, err
		}
		o.shim = sh
	}
	// fail ends the shim, which has not run PROG, on every way out
	// before launch takes it over.
	fail := func(status int, err error) (int, error) {
		if o.shim != nil {
			o.shim.abort()
		}
		return status, err
	}
	// Holds: at exec in -- mode, at fork and exec with --follow, at
	// dlopen with DWARF stacks. Where the kernel side cannot release
	// them itself at memtrace's exit, a watchdog process does; in --
	// mode one runs anyway, to close the probes after the program
	// (SetHandOff).
	holds := len(o.Argv) > 0 || o.Follow || o.StackDepth > 0 && o.StackUnwind != "fp" && !o.Floor
	var wd *watchdog
	if len(o.Argv) > 0 || holds && !tracer.KernelRelease() {
		var err error
		if wd, err = startWatchdog(); err != nil {
			return fail(1, err)
		}
		// Only the kernel closes memtrace's end, at memtrace's exit:
		// the watchdog must not resume anything while memtrace may
		// still hold a process.
		watchdogSock = wd
	}
	tr, err := tracer.New(tracer.Options{RingBytes: o.RingBytes, Floor: o.Floor, NoMulti: o.NoMulti,
		StackDepth: o.StackDepth, StackThreads: o.StackThreads, NoFreeStacks: o.NoFreeStacks, Follow: o.Follow, HoldExec: len(o.Argv) > 0,
		CheckInternalFrees: len(o.PIDs) > 0, StackUnwind: o.StackUnwind, Logf: verboseLogf(o.Verbose, stderr)})
	if err != nil {
		if errors.Is(err, tracer.ErrUnavailable) && (o.HTTP != "" || o.ProfileDir != "") {
			return fail(1, fmt.Errorf("--http and --profile-dir need the eBPF tracer (the LD_PRELOAD fallback has no live model): %w", err))
		}
		if errors.Is(err, tracer.ErrUnavailable) && len(o.Argv) > 0 {
			fail(0, nil)
			if wd != nil {
				// Nothing of the LD_PRELOAD path can be held.
				wd.sock.Close()
				watchdogSock = nil
			}
			fmt.Fprintf(stderr, "memtrace: notice: %v; using the LD_PRELOAD fallback\n", err)
			return fallback()
		}
		return fail(1, err)
	}
	defer tr.Close()
	if wd != nil {
		if err := wd.sendHold(tr.HoldFD()); err != nil {
			return fail(1, err)
		}
		if len(o.Argv) > 0 {
			// In -- mode every target is memtrace's: once all have
			// exited, the watchdog closes the probes and memtrace
			// exits without waiting for the kernel to release them.
			tr.SetHandOff(wd.giveLinks)
			o.handOff = tr.AllowHandOff
		}
	}
	o.wake = tr.Wake
	counted := countProbes(tr)
	lr, err := startLive(&o, counted, stderr)
	if err != nil {
		return fail(1, err)
	}
	defer lr.close()
	o.live = lr
	catchInterrupts()
	// The closing lines describe a log the run wrote (launch and attach
	// have closed it when they return); a run that failed wrote none,
	// and its one error line stays the only one.
	since := time.Now()
	code := 0
	if len(o.Argv) > 0 {
		code, err = launch(&o, counted, stderr)
	} else {
		err = attach(&o, counted, stderr)
	}
	if err == nil {
		closing(&o, stderr, since)
	}
	return code, err
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

func unwrapExecErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}
