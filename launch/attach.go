package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/logfmt"
)

func procComm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

func procCmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// attach probes the running processes o.PIDs and logs them until the last
// exits or Ctrl-C; they are left running, as they were.
func attach(o *Options, tr tracerAPI, stderr io.Writer) error {
	start := monoNow()
	var watchers []int
	for _, pid := range o.PIDs {
		if wasInterrupted() {
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
			fmt.Fprintf(stderr, "memtrace: process %d: probed %s\n", pid, strings.Join(added, ", "))
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return fmt.Errorf("watch process %d: %w", pid, err)
		}
		watchers = append(watchers, fd)
	}
	attached := monoNow()
	out, err := openOutput(o, stderr)
	if err != nil {
		return err
	}
	defer out.Close()
	l := newLoop(o, tr, out, stderr, start)
	l.sess.From(attached)
	if err := l.startFD(); err != nil {
		return err
	}
	defer l.closeFD()
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
			case <-interrupted:
				close(stop)
				return
			case pid := <-exited:
				left--
				_ = pid
			}
		}
		close(stop)
	}()
	return l.run(stop)
}
