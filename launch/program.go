package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// launch starts PROG through a shim that waits, attaches to the shim's PID
// (which PROG keeps across exec), then lets it exec: PROG is traced from its
// first allocation, and runs as the user who invoked sudo.
//
// Until the release, every way out (an error, Ctrl-C, a viewer that never
// comes) kills the shim, which has not run PROG yet: nothing is left
// stopped or waiting.
func launch(o *Options, tr tracerAPI, stderr io.Writer) (int, error) {
	path, _ := exec.LookPath(o.Argv[0])
	// PROG's environment is memtrace's (the shim passes it on).
	libs := launchLibs(path, os.Environ())
	r, w, err := os.Pipe()
	if err != nil {
		return 1, fmt.Errorf("create the start pipe: %w", err)
	}
	defer w.Close()
	ready, readyW, err := os.Pipe()
	if err != nil {
		r.Close()
		return 1, fmt.Errorf("create the start pipe: %w", err)
	}
	defer ready.Close()
	self, err := os.Executable()
	if err != nil {
		r.Close()
		readyW.Close()
		return 1, fmt.Errorf("find memtrace's own executable: %w", err)
	}
	cmd := exec.Command(self, append([]string{ShimArg, path}, o.Argv...)...)
	cmd.Args[0] = o.Argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{r, readyW}
	cmd.Env = os.Environ()
	if cred, ok, err := SudoCredential(); err != nil {
		r.Close()
		readyW.Close()
		return 1, err
	} else if ok {
		cmd.Env = append(cmd.Env, shimCredEnv+"="+cred)
	}
	start := monoNow()
	err = cmd.Start()
	r.Close()
	readyW.Close()
	if err != nil {
		return 127, fmt.Errorf("start %s: %w", o.Argv[0], err)
	}
	pid := cmd.Process.Pid
	abort := func(status int, err error) (int, error) {
		w.Close()
		_ = cmd.Process.Kill() // works on a stopped process too
		_ = cmd.Wait()
		if errors.Is(err, interruptError{}) {
			status = interruptStatus()
		}
		return status, err
	}
	// The shim's own exec (of memtrace) must be over before its PID
	// becomes a target, or the kernel side would hold it at that exec.
	if err := waitShim(ready, 30*time.Second); err != nil {
		return abort(1, err)
	}
	if err := tr.AddProcess(pid); err != nil {
		return abort(1, err)
	}
	probed := 0
	for _, lib := range libs {
		if wasInterrupted() {
			return abort(0, interruptError{})
		}
		ok, err := tr.AttachLibrary(pid, lib)
		if err != nil {
			return abort(1, err)
		}
		if ok {
			probed++
		}
	}
	if probed == 0 {
		return abort(1, untraceable(o.Argv[0], path, true))
	}
	out, err := openOutput(o, stderr)
	if err != nil {
		return abort(1, err)
	}
	defer out.Close()
	if wasInterrupted() {
		return abort(0, interruptError{})
	}
	l := newLoop(o, tr, out, stderr, start)
	if err := l.startFD(); err != nil {
		return abort(1, err)
	}
	defer l.closeFD()
	l.addPID(pid)
	l.pids[pid] = true
	l.sess.AddLaunched(uint32(pid))
	l.sess.KnownFile(path)
	for _, lib := range libs {
		l.sess.KnownFile(lib)
	}
	l.header([]int{pid}, filepath.Base(path), strings.Join(o.Argv, " "))
	l.sess.Released(uint32(pid), monoNow())
	if _, err := w.Write([]byte{1}); err != nil {
		return abort(1, fmt.Errorf("release %s: %w", o.Argv[0], err))
	}
	w.Close()

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		l.sess.SetExitStatus(uint32(pid), cmd.ProcessState) // for its exit line
		close(done)
	}()
	detached := false
	go func() {
		select {
		case <-done:
			// With --follow, the log goes on while children the
			// program left behind still run.
			for o.Follow && l.othersAlive(pid) {
				select {
				case <-interrupted:
					detached = true
					close(stop)
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		case <-interrupted:
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
	err = l.run(stop)
	select {
	case <-done:
		return exitStatus(cmd.ProcessState), err
	default:
	}
	if detached {
		fmt.Fprintf(stderr, "memtrace: detached; %s (pid %d) keeps running\n", o.Argv[0], pid)
		return interruptStatus(), err
	}
	return 1, err
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
