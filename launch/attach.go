package launch

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/runner"
)

func procComm(pid int) string {
	comm, _ := procfs.ReadComm(pid)
	return comm
}

func procCmdline(pid int) string {
	args, _ := procfs.ReadCmdline(pid)
	return strings.Join(args, " ")
}

// startAttach probes the running processes o.PIDs; they are left running,
// as they were, and logged (traceAttach) until the last exits or Ctrl-C.
func (s *Source) startAttach() error {
	o, tr := s.o, s.tr
	start := monoNow()
	for _, pid := range o.PIDs {
		if runner.WasInterrupted() {
			return fmt.Errorf("interrupted while attaching: nothing was traced")
		}
		if err := tr.AddProcess(pid); err != nil {
			return err
		}
		added, err := tr.ScanProcess(pid)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("process %d exited before memtrace could attach", pid)
			}
			return fmt.Errorf("attach to process %d: %w", pid, err)
		}
		if len(added) == 0 {
			return untraceableProcess(pid)
		}
		if o.Verbose {
			fmt.Fprintf(s.stderr, "memtrace: process %d: probed %s\n", pid, strings.Join(added, ", "))
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return fmt.Errorf("watch process %d: %w", pid, err)
		}
		s.watchers = append(s.watchers, fd)
	}
	s.attached = monoNow()
	s.l = makeLoop(o, tr, s.stderr, start)
	return nil
}

// traceAttach logs the attached processes until the last exits or Ctrl-C.
func (s *Source) traceAttach() error {
	o, l := s.o, s.l
	l.sess.From(s.attached)
	if err := l.startFD(); err != nil {
		return err
	}
	for _, pid := range o.PIDs {
		l.addPID(pid)
		l.pids[pid] = true
		l.sess.AddProcess(uint32(pid), true)
		l.sess.KnownProcess(pid, true)
	}
	l.header(o.PIDs, procComm(o.PIDs[0]), procCmdline(o.PIDs[0]))
	for _, pid := range o.PIDs {
		l.sess.Proc(logfmt.Proc{Event: logfmt.ProcAttach, PID: int64(pid), Comm: procComm(pid), Cmd: procCmdline(pid)})
	}
	stop := make(chan struct{})
	watchers := s.watchers
	s.watchers = nil // the waiters below close them
	exited := make(chan int, len(watchers))
	for i, fd := range watchers {
		go func(pid, fd int) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
					break
				}
			}
			unix.Close(fd)
			exited <- pid
		}(o.PIDs[i], fd)
	}
	go func() {
		left := len(watchers)
		for left > 0 {
			select {
			case <-runner.Interrupted():
				close(stop)
				return
			case <-exited:
				left--
			}
		}
		close(stop)
	}()
	return l.run(stop)
}
