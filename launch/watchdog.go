package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/tracer"
)

// WatchdogArg, as os.Args[1], marks memtrace re-executed as its watchdog,
// whose main calls RunWatchdog. The kernel side
// stops processes (a forked child before its first instruction, a process
// at exec or dlopen) until the agent has probed them; where the kernel
// cannot release them itself when memtrace dies (tracer.KernelRelease),
// the watchdog does. It holds the
// map of held processes and the other end of a socket only memtrace
// writes to: when the socket closes, memtrace is gone (its descriptors,
// and with them its BPF links, are closed by the kernel), and the
// watchdog resumes every process still held. It runs in a session of
// its own and under another name (watchdogName), so that neither a
// signal to memtrace's process group nor a kill of the processes named
// memtrace takes it along.
//
// The same socket carries, with SCM_RIGHTS, the hold map (memtrace starts
// the watchdog before the map exists, so that its exec overlaps the BPF
// loading) and, at the end of a -- run whose processes have all exited,
// memtrace's uprobe links: closing one waits for an RCU tasks-trace grace
// period (~100 ms), which the watchdog then waits instead of memtrace.
const WatchdogArg = "__mt_release"

// watchdogName is the watchdog's argv[0] and thread name.
const watchdogName = "mt-release"

// The first byte of each message on the watchdog's socket.
const (
	msgHold  = 'H' // one descriptor: the hold map
	msgLinks = 'L' // link descriptors to close
)

// maxRights is how many descriptors one message carries: the kernel's
// SCM_MAX_FD is 253.
const maxRights = 250

// watchdogRounds: the socket may close before the last link does (the
// kernel closes a dying process's descriptors one by one, and a link's
// programs may still run for a while after), so a process may still be
// stopped after the first sweep; later sweeps, for three seconds, catch it.
var watchdogRounds = func() []time.Duration {
	var r []time.Duration
	for at := time.Duration(0); at <= time.Second; at += 50 * time.Millisecond {
		r = append(r, at)
	}
	return append(r, 1500*time.Millisecond, 2*time.Second, 3*time.Second)
}()

// watchdog is memtrace's end of the watchdog's socket. It is closed only
// by the kernel, when memtrace exits, which is the watchdog's signal.
type watchdog struct {
	sock *os.File
	pid  int
}

// startWatchdog starts the watchdog; sendHold gives it the hold map.
func startWatchdog() (*watchdog, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find memtrace's own executable for the watchdog: %w", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("create the watchdog socket: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "memtrace-watchdog"), os.NewFile(uintptr(fds[1]), "memtrace-watchdog")
	defer theirs.Close()
	cmd := exec.Command(self, WatchdogArg)
	cmd.Args[0] = watchdogName
	cmd.ExtraFiles = []*os.File{theirs}
	// Its own session: a Ctrl-C or a kill of memtrace's process group
	// must not take it along. No standard streams: a pipe the program
	// writes to must not stay open because of it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		mine.Close()
		return nil, fmt.Errorf("start the watchdog: %w", err)
	}
	// Reaped by whoever inherits it if memtrace dies; otherwise here.
	go cmd.Wait()
	return &watchdog{sock: mine, pid: cmd.Process.Pid}, nil
}

// send writes one message of kind with fds attached, without blocking: a
// watchdog that does not read must not stop memtrace.
func (w *watchdog) send(kind byte, fds []int) error {
	rc, err := w.sock.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(s uintptr) {
		serr = unix.Sendmsg(int(s), []byte{kind}, unix.UnixRights(fds...), nil, unix.MSG_DONTWAIT)
	}); err != nil {
		return err
	}
	return serr
}

// sendHold gives the watchdog the hold map at fd, which it sweeps once
// memtrace is gone. Before this nothing can be held: the kernel side holds
// only targets, and there are none yet.
func (w *watchdog) sendHold(fd int) error {
	if err := w.send(msgHold, []int{fd}); err != nil {
		return fmt.Errorf("give the hold map to the watchdog: %w", err)
	}
	return nil
}

// giveLinks hands link descriptors over for the watchdog to close: the
// tracer's SetHandOff receiver. Once this returns, the watchdog's
// message holds its own reference to each.
func (w *watchdog) giveLinks(fds []int) error {
	for len(fds) > 0 {
		n := min(len(fds), maxRights)
		if err := w.send(msgLinks, fds[:n]); err != nil {
			return fmt.Errorf("hand the probes to the watchdog: %w", err)
		}
		fds = fds[n:]
	}
	return nil
}

// RunWatchdog waits for memtrace to go, then closes the links it was
// handed and resumes what memtrace held; it does not return.
func RunWatchdog() {
	// Its name is memtrace's binary's until now (exec names it); the
	// process's own file renames the main thread, whichever thread
	// this is.
	_ = os.WriteFile("/proc/self/comm", []byte(watchdogName), 0)
	hold, links := watchdogRead(3)
	// Only now: memtrace closes its own copies after the hand-off, and
	// whichever reference goes last waits for the kernel's release.
	var closing sync.WaitGroup
	closeFDs(links, &closing)
	if hold >= 0 {
		start := time.Now()
		for _, at := range watchdogRounds {
			time.Sleep(time.Until(start.Add(at)))
			// The map's descriptor is reused each round; ResumeHeld
			// closes only its own duplicate.
			fd, err := unix.FcntlInt(uintptr(hold), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				os.Exit(1)
			}
			_, _ = tracer.ResumeHeld(fd)
		}
	}
	closing.Wait()
	os.Exit(0)
}

// watchdogRead reads memtrace's messages on sock until memtrace is gone:
// the hold map's descriptor (-1 if none came) and the links it was handed.
func watchdogRead(sock int) (int, []int) {
	hold := -1
	var links []int
	buf := make([]byte, 16)
	oob := make([]byte, unix.CmsgSpace(maxRights*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(sock, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			// End of file: memtrace is gone. Another error cannot
			// tell; taking it for the end only resumes earlier.
			return hold, links
		}
		fds := rights(oob[:oobn])
		switch {
		case buf[0] == msgHold && len(fds) == 1 && hold < 0:
			hold = fds[0]
		case buf[0] == msgLinks:
			links = append(links, fds...)
		default:
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}
}

// closeFDs closes fds on up to 16 threads: each close of a uprobe link
// blocks in the kernel for a grace period, which concurrent closes share.
func closeFDs(fds []int, wg *sync.WaitGroup) {
	if len(fds) == 0 {
		return
	}
	ch := make(chan int, len(fds))
	for _, fd := range fds {
		ch <- fd
	}
	close(ch)
	for range min(16, len(fds)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for fd := range ch {
				unix.Close(fd)
			}
		}()
	}
}

// rights is the descriptors a control message carries.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var out []int
	for i := range msgs {
		if fds, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			out = append(out, fds...)
		}
	}
	return out
}
