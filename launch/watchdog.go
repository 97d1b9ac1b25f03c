package launch

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/tracer"
)

// WatchdogArg, as os.Args[1], marks memtrace re-executed as its watchdog,
// whose main calls RunWatchdog. The kernel side
// stops processes (a forked child before its first instruction, a process
// at exec) until the agent has probed them; if memtrace dies in between,
// even by SIGKILL, nothing would ever resume them. The watchdog holds the
// map of held processes and the read end of a pipe only memtrace writes
// to: when the pipe closes, memtrace is gone (its descriptors, and with
// them its BPF links, are closed by the kernel), and the watchdog resumes
// every process still held.
const WatchdogArg = "__memtrace_watchdog"

// watchdogRounds: the pipe may close before the last link does (the kernel
// closes a dying process's descriptors one by one, and a link's programs
// may still run for a while after), so a process may still be stopped
// after the first sweep; later sweeps, for three seconds, catch it.
var watchdogRounds = func() []time.Duration {
	var r []time.Duration
	for at := time.Duration(0); at <= time.Second; at += 50 * time.Millisecond {
		r = append(r, at)
	}
	return append(r, 1500*time.Millisecond, 2*time.Second, 3*time.Second)
}()

// startWatchdog starts the watchdog over the hold map at holdFD. The
// returned file is memtrace's end of the pipe: it is closed when memtrace
// exits, which is the watchdog's signal, so it needs no closing.
func startWatchdog(holdFD int) (*os.File, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find memtrace's own executable for the watchdog: %w", err)
	}
	dup, err := unix.FcntlInt(uintptr(holdFD), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, fmt.Errorf("duplicate the hold map for the watchdog: %w", err)
	}
	hold := os.NewFile(uintptr(dup), "memtrace-hold-map")
	defer hold.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create the watchdog pipe: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(self, WatchdogArg)
	cmd.ExtraFiles = []*os.File{r, hold}
	// Its own session: a Ctrl-C or a kill of memtrace's process group
	// must not take it along. No standard streams: a pipe the program
	// writes to must not stay open because of it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start the watchdog: %w", err)
	}
	// Reaped by whoever inherits it if memtrace dies; otherwise here.
	go cmd.Wait()
	return w, nil
}

// RunWatchdog waits for memtrace to go, then resumes what it held; it does
// not return.
func RunWatchdog() {
	pipe := os.NewFile(3, "memtrace-watchdog")
	var b [64]byte
	for {
		if _, err := pipe.Read(b[:]); err != nil {
			break
		}
	}
	start := time.Now()
	for _, at := range watchdogRounds {
		time.Sleep(time.Until(start.Add(at)))
		// The map's descriptor is reused each round; ResumeHeld closes
		// only its own duplicate.
		fd, err := unix.FcntlInt(4, unix.F_DUPFD_CLOEXEC, 5)
		if err != nil {
			os.Exit(1)
		}
		_, _ = tracer.ResumeHeld(fd)
	}
	os.Exit(0)
}
