package launch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/memtrace/memtrace/runner"
)

// startLaunch attaches to the shim's PID (which PROG keeps across exec)
// while the shim waits: PROG is traced from its first allocation once it
// is released (traceLaunch), and runs as the user who invoked sudo.
//
// Until the release, every way out (an error, Ctrl-C, a viewer that never
// comes) kills the shim (Close), which has not run PROG yet: nothing is
// left stopped or waiting.
func (s *Source) startLaunch() (int, error) {
	o, sh, tr := s.o, s.shim, s.tr
	pid := sh.cmd.Process.Pid
	// The shim's own exec (of memtrace) must be over before its PID
	// becomes a target, or the kernel side would hold it at that exec.
	if err := waitShim(sh.ready, 30*time.Second); err != nil {
		return 1, err
	}
	if err := tr.AddProcess(pid); err != nil {
		return 1, err
	}
	probed := 0
	for _, lib := range sh.libs() {
		if runner.WasInterrupted() {
			return runner.InterruptStatus(), runner.ErrInterrupted
		}
		ok, err := tr.AttachLibrary(pid, lib)
		if err != nil {
			return 1, err
		}
		if ok {
			probed++
		}
	}
	if probed == 0 {
		return 1, untraceable(o.Argv[0], sh.path, true)
	}
	s.l = makeLoop(o, tr, s.stderr, sh.start)
	return 0, nil
}

// traceLaunch writes the header, releases PROG and logs it, and what it
// forks with --follow, until it has exited or Ctrl-C.
func (s *Source) traceLaunch() (int, error) {
	o, sh, l := s.o, s.shim, s.l
	if runner.WasInterrupted() {
		return runner.InterruptStatus(), runner.ErrInterrupted
	}
	cmd, path := sh.cmd, sh.path
	pid := cmd.Process.Pid
	if err := l.startFD(); err != nil {
		return 1, err
	}
	l.addPID(pid)
	l.pids[pid] = true
	l.sess.AddLaunched(uint32(pid))
	l.sess.KnownFile(path)
	for _, lib := range sh.libs() {
		l.sess.KnownFile(lib)
	}
	// The log counts from the release (Session.Released): its header's
	// start too.
	now := monoNow()
	l.start, l.started = now, time.Now()
	l.prog = path
	l.header([]int{pid}, filepath.Base(path), strings.Join(o.Argv, " "))
	l.sess.Released(uint32(pid), now)
	s.r.MarkReleased()
	if _, err := sh.w.Write([]byte{1}); err != nil {
		return 1, fmt.Errorf("release %s: %w", o.Argv[0], err)
	}
	s.released = true
	sh.w.Close()

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		s.r.MarkExited()
		l.sess.SetExitStatus(uint32(pid), cmd.ProcessState) // for its exit line
		close(done)
	}()
	detached := false
	go func() {
		// After stop is closed: the loop, woken in its wait for
		// records, sees it at once, not at its next poll.
		defer func() {
			if s.wake != nil {
				s.wake()
			}
		}()
		select {
		case <-done:
			// With --follow, the log goes on while children the
			// program left behind still run.
			for o.Follow && l.othersAlive(pid) {
				select {
				case <-runner.Interrupted():
					detached = true
					close(stop)
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			// Every process memtrace knows of is gone: the tracer
			// may hand its probes to the watchdog (it checks the
			// kernel's own list of targets too).
			if s.handOff != nil {
				s.handOff()
			}
		case <-runner.Interrupted():
			// Detach and flush; the program keeps running. Give a
			// program that got the same Ctrl-C a moment to finish so
			// its status is reported.
			detached = true
			select {
			case <-done:
			case <-time.After(200 * time.Millisecond):
			}
		}
		close(stop)
	}()
	err := l.run(stop)
	select {
	case <-done:
		return exitStatus(cmd.ProcessState), err
	default:
	}
	if detached {
		fmt.Fprintf(s.stderr, "memtrace: detached; %s (pid %d) keeps running\n", o.Argv[0], pid)
		return runner.InterruptStatus(), err
	}
	return 1, err
}

// shim is the exec shim started, waiting for its release, and PROG's
// libraries being listed meanwhile.
type shim struct {
	cmd   *exec.Cmd
	w     *os.File // the start pipe: a byte releases PROG
	ready *os.File // the shim's byte that its own exec is over
	path  string
	start uint64
	list  chan []string
}

// startShim starts PROG's exec shim and lists PROG's libraries (launchLibs
// runs its dynamic linker) in the background: Run calls it before the BPF
// programs load, so that both overlap with the loading. The shim runs
// nothing until it is released; abort ends it.
func startShim(o *Options) (*shim, int, error) {
	path, _ := exec.LookPath(o.Argv[0])
	list := make(chan []string, 1)
	// PROG's environment is memtrace's (the shim passes it on), with
	// the home and names of the user it runs as under sudo (runner).
	env := o.BaseEnv
	if env == nil {
		env = os.Environ()
	}
	go func() { list <- launchLibs(path, env) }()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, 1, fmt.Errorf("create the start pipe: %w", err)
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, 1, fmt.Errorf("create the start pipe: %w", err)
	}
	fail := func(status int, err error) (*shim, int, error) {
		r.Close()
		w.Close()
		ready.Close()
		readyW.Close()
		return nil, status, err
	}
	self, err := os.Executable()
	if err != nil {
		return fail(1, fmt.Errorf("find memtrace's own executable: %w", err))
	}
	cmd := exec.Command(self, append([]string{ShimArg, path}, o.Argv...)...)
	cmd.Args[0] = o.Argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pick(o.Stdin, os.Stdin), pick(o.Stdout, os.Stdout), pick(o.Stderr, os.Stderr)
	cmd.ExtraFiles = []*os.File{r, readyW}
	cmd.Env = env
	if o.Credential != nil {
		cmd.Env = append(cmd.Env, shimCredEnv+"="+runner.FormatCred(o.Credential))
	}
	start := monoNow()
	if err := cmd.Start(); err != nil {
		return fail(127, fmt.Errorf("start %s: %w", o.Argv[0], err))
	}
	r.Close()
	readyW.Close()
	return &shim{cmd: cmd, w: w, ready: ready, path: path, start: start, list: list}, 0, nil
}

// libs is launchLibs' answer for PROG.
func (s *shim) libs() []string {
	l := <-s.list
	s.list <- l
	return l
}

// abort ends a shim that was not released: it has not run PROG, and
// exits when its start pipe closes; the kill covers a shim that is not
// reading yet. The listing's dynamic linker is waited for too: nothing
// memtrace started outlives a failed launch.
func (s *shim) abort() {
	s.w.Close()
	_ = s.cmd.Process.Kill() // works on a stopped process too
	_ = s.cmd.Wait()
	s.libs()
}

// waitShim waits up to limit for the shim's byte that says it runs (its
// exec is over), or for its end.
func waitShim(ready *os.File, limit time.Duration) error {
	_ = ready.SetReadDeadline(time.Now().Add(limit))
	var b [1]byte
	if n, err := ready.Read(b[:]); n != 1 {
		return fmt.Errorf("the exec shim did not start: %w", err)
	}
	return nil
}

// exitStatus is the status a shell would report for the program: its exit
// code, or 128+N when signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func pick(f, dflt *os.File) *os.File {
	if f != nil {
		return f
	}
	return dflt
}
