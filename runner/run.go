package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"sync/atomic"
	"time"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/internal/procfs"
)

// Source captures a traced program's allocations: the eBPF tracer
// (launch) or the LD_PRELOAD library's reader (fallback-preload). Run calls
// Start, then, once the log is open, Configure and Trace, and Close last.
type Source interface {
	// Start starts the program, held before its first traced call, or
	// attaches to Options.PIDs: everything that can fail before the log
	// opens (so that a failure is one line and no log). It returns
	// memtrace's exit status with its error. An error that wraps
	// ErrUnavailable, with nothing started, lets Run fall back to
	// another source.
	Start(r *Handle) (int, error)
	// Configure adds what only the source knows to the Session's
	// settings: its clock, its callbacks, where its stacks come from.
	Configure(c *agent.Config)
	// Trace lets the program go and feeds s until every traced process
	// has ended or Interrupted is closed (a detach: the program runs on),
	// ends the log (its summary line) and returns memtrace's exit status:
	// the program's, 128+N for a signal.
	Trace(r *Handle, s *agent.Session) (int, error)
	// Close releases what Start took, on every way out after a Start
	// that succeeded; after Trace, once the log is closed.
	Close() error
}

// ErrUnavailable marks a source that cannot run on this machine (no BPF,
// no root): see Unavailable.
var ErrUnavailable = errors.New("unavailable")

// Unavailable is err marked as ErrUnavailable; its text stays err's.
func Unavailable(err error) error { return unavailable{err} }

type unavailable struct{ err error }

func (u unavailable) Error() string        { return u.err.Error() }
func (u unavailable) Unwrap() error        { return u.err }
func (u unavailable) Is(target error) bool { return target == ErrUnavailable }

// Handle is one run as its source sees it.
type Handle struct {
	opts   *Options
	stderr io.Writer
	live   *liveRun
	probes atomic.Pointer[func() int]
	phases phases
	// untracked is the source's count of sampled blocks it could not
	// keep (--sample), for /metrics and the end of the run.
	untracked atomic.Pointer[func() uint64]
	// dropped is the source's count of processes a selector matched
	// that it did not trace (--max-procs, no allocator, a failed probe).
	dropped atomic.Pointer[func() uint64]
}

// SetDropped gives the run the source's count of selected processes it
// left untraced, for /metrics.
func (r *Handle) SetDropped(count func() uint64) { r.dropped.Store(&count) }

func (r *Handle) droppedCount() uint64 {
	if f := r.dropped.Load(); f != nil {
		return (*f)()
	}
	return 0
}

// SetMode names the capture path (logfmt.ModeBPF) for the profiles'
// comments: a sampled run has no log header to say it.
func (r *Handle) SetMode(mode string) {
	if r.live != nil {
		r.live.model.SetMode(mode)
	}
}

// SetSampleUntracked gives the run the source's count of sampled blocks
// its table had no room for (--sample).
func (r *Handle) SetSampleUntracked(count func() uint64) { r.untracked.Store(&count) }

func (r *Handle) untrackedCount() uint64 {
	if f := r.untracked.Load(); f != nil {
		return (*f)()
	}
	return 0
}

// Options is the run's options, with the user behind sudo filled in.
func (r *Handle) Options() *Options { return r.opts }

// Stderr is where memtrace's own lines go.
func (r *Handle) Stderr() io.Writer { return r.stderr }

// SetProbes gives the live endpoint the source's count of probe sets
// (/metrics); without it the count is 0.
func (r *Handle) SetProbes(count func() int) { r.probes.Store(&count) }

func (r *Handle) probeCount() int {
	if f := r.probes.Load(); f != nil {
		return (*f)()
	}
	return 0
}

// Run traces o with src until the program ends or Ctrl-C, and returns
// memtrace's exit status: the program's, 128+N for a signal. Where src is
// unavailable and a program is to be started, it says so in one notice and
// uses fallback (nil: none). The closing lines follow a run that wrote its
// log; a run that failed wrote none, and its one error line stays the only
// one.
func Run(o Options, stderr io.Writer, src, fallback Source) (int, error) {
	if len(o.Argv) > 0 {
		if _, err := exec.LookPath(o.Argv[0]); err != nil {
			if errors.Is(err, fs.ErrPermission) {
				// Found but not executable: a shell's 126.
				return 126, fmt.Errorf("cannot execute %s: %w: make it executable (chmod +x) or give the right path", o.Argv[0], unwrapExecErr(err))
			}
			return 127, fmt.Errorf("cannot run %s: %w: check the program's path", o.Argv[0], unwrapExecErr(err))
		}
	}
	if err := o.resolveUser(); err != nil {
		return 1, err
	}
	// Both sources read /proc by the pids they are given and see.
	if _, err := procfs.PIDNamespace(); err != nil {
		return 1, err
	}
	since := time.Now()
	r := &Handle{opts: &o, stderr: stderr}
	profileOut, err := sampleOutputs(&o)
	if err != nil {
		return 2, err
	}
	// The port and the profile directory before anything is started: a
	// taken port is one line, and the program never ran.
	lr, status, err := startLive(&o, r.probeCount, stderr)
	if err != nil {
		return status, err
	}
	lr.sampled(&o, r.untrackedCount, profileOut)
	if lr != nil && o.Selecting() {
		lr.model.Dropped = r.droppedCount
	}
	defer lr.close()
	r.live = lr
	CatchInterrupts()
	status, err = src.Start(r)
	var notice error
	if err != nil && errors.Is(err, ErrUnavailable) && fallback != nil && len(o.Argv) > 0 {
		notice = err
		src = fallback
		status, err = src.Start(r)
	}
	if err != nil && errors.Is(err, ErrUnavailable) && len(o.Argv) == 0 {
		// Nothing can attach to a running process without eBPF: the
		// LD_PRELOAD library is loaded only by a program started with it.
		err = fmt.Errorf("%w; the LD_PRELOAD fallback cannot attach to a running process: restart the program under memtrace --preload -- PROG", err)
	}
	if err != nil {
		return status, err
	}
	lr.tracing(len(o.PIDs) > 0 || o.Selecting())
	out, err := openOutput(&o, stderr)
	if err != nil {
		src.Close()
		if errors.Is(err, ErrInterrupted) {
			return InterruptStatus(), err
		}
		return 1, err
	}
	// Said once the fallback runs: a run that fails before (a log it
	// cannot create) is its one error line, whichever source it used.
	if notice != nil {
		fmt.Fprintf(stderr, "memtrace: notice: %v; using the LD_PRELOAD fallback\n", notice)
	}
	s := NewSession(&o, out, stderr, lr.observer(), src.Configure)
	status, err = src.Trace(r, s)
	untracked := r.untrackedCount()
	out.Close()
	if cerr := src.Close(); err == nil {
		err = cerr
	}
	// The floor's probes are empty: it has no figures to give; a
	// sampled run's events are samples, whose figures are its profile's.
	if err == nil && !o.Floor && o.Sample == 0 {
		closing(&o, out, s, stderr, since)
	}
	if o.Verbose {
		r.writePhases(stderr, time.Now())
	}
	sampleEnd(&o, lr, profileOut, untracked, stderr)
	return status, err
}

// unwrapPath is a path error's cause, for a message that names the path
// itself.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func unwrapExecErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// Traced tells the live model that pid is traced from now on (a process a
// selector attached to or caught at its exec), so that /metrics lists it
// before its first allocation.
func (r *Handle) Traced(pid int) {
	if r.live != nil {
		r.live.model.Track(uint32(pid))
	}
}
