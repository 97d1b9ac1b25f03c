package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/fdtrace"
	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/internal/viewconn"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/procreport"
	"github.com/memtrace/memtrace/tracer"
)

func monoNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// openOutput opens the log sink. For TCP it waits for the first client,
// which is what makes a viewer see a program from its first allocation.
func openOutput(o *options, stderr io.Writer) (io.WriteCloser, error) {
	switch {
	case o.listen != "":
		return acceptViewer(o.listen, stderr)
	case o.output != "":
		f, err := createLog(o.output)
		if err != nil {
			return nil, err
		}
		// FILE.zst and FILE.gz are compressed; the agent's flushes end
		// the compressed blocks (logio).
		w, err := logio.Create(f, o.output)
		if err != nil {
			f.Close()
			return nil, err
		}
		return w, nil
	}
	return nopCloser{os.Stderr}, nil
}

// acceptViewer waits for the first viewer, or for Ctrl-C.
func acceptViewer(addr string, stderr io.Writer) (io.WriteCloser, error) {
	c, err := viewconn.Accept(addr, stderr, interrupted, nil)
	if errors.Is(err, viewconn.ErrInterrupted) {
		return nil, interruptError{}
	}
	return c, err
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

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

func run(o *options, stderr io.Writer) (int, error) {
	if o.preload {
		return runPreload(o, stderr)
	}
	if len(o.argv) > 0 {
		if _, err := exec.LookPath(o.argv[0]); err != nil {
			return 127, fmt.Errorf("cannot run %s: %w: check the program's path", o.argv[0], unwrapExecErr(err))
		}
	}
	if err := bpfProblem(); err != nil {
		if len(o.argv) > 0 {
			fmt.Fprintf(stderr, "memtrace: notice: %v; using the LD_PRELOAD fallback\n", err)
			return runPreload(o, stderr)
		}
		return 1, err
	}
	for _, pid := range o.pids {
		if err := checkAttachable(pid); err != nil {
			return 1, err
		}
	}
	tr, err := tracer.New(tracer.Options{RingBytes: o.ringBytes, Floor: o.floor, NoMulti: o.noMulti,
		StackDepth: o.stackDepth, StackThreads: o.stackThreads, Follow: o.follow, HoldExec: len(o.argv) > 0,
		CheckInternalFrees: len(o.pids) > 0, StackUnwind: o.stackUnwind, Logf: verboseLogf(o.verbose, stderr)})
	if err != nil {
		if errors.Is(err, tracer.ErrUnavailable) && len(o.argv) > 0 {
			fmt.Fprintf(stderr, "memtrace: notice: %v; using the LD_PRELOAD fallback\n", err)
			return runPreload(o, stderr)
		}
		return 1, err
	}
	defer tr.Close()
	catchInterrupts()
	if o.follow || len(o.argv) > 0 {
		// Only the kernel closes this pipe, at memtrace's exit: the
		// watchdog must not resume anything while memtrace may still
		// hold a process.
		if watchdogPipe, err = startWatchdog(tr.HoldFD()); err != nil {
			return 1, err
		}
	}
	if len(o.argv) > 0 {
		return launch(o, tr, stderr)
	}
	return 0, attach(o, tr, stderr)
}

// verboseLogf is the tracer's -v output (unwind tables built), or nil.
func verboseLogf(verbose bool, w io.Writer) func(string, ...any) {
	if !verbose {
		return nil
	}
	return func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
}

// watchdogPipe is memtrace's end of the watchdog's pipe, kept open (and
// reachable, so no finalizer closes it) for memtrace's whole life.
var watchdogPipe *os.File

func unwrapExecErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// loop reads events until done says to stop, then drains what is left.
type loop struct {
	o       *options
	tr      *tracer.Tracer
	fd      *fdtrace.Tracer // nil unless --track has fd, dmabuf or ion
	fdEvs   chan fdtrace.Event
	sess    *agent.Session
	out     io.WriteCloser
	stderr  io.Writer
	start   uint64
	mu      sync.Mutex   // guards pids: the launch waiter reads it too
	pids    map[int]bool // traced processes still alive
	lost    uint64
	started time.Time
}

// onProcess probes a forked child (stopped by the kernel side until now)
// or a freshly exec'd image, then lets a held process go.
func (l *loop) onProcess(e *tracer.Event) {
	pid := int(e.TGID)
	switch e.Kind {
	case tracer.KindFork:
		pid = int(e.Ptr)
		l.mu.Lock()
		l.pids[pid] = true
		l.mu.Unlock()
		l.addPID(pid)
		// The child's mappings are its parent's: the same libraries.
		if _, err := l.tr.ScanProcess(pid); err != nil {
			l.untraced(pid, err)
		}
		// Read now, while it is held: a frame whose VMA the kernel
		// side could not read resolves through this record, and a
		// short-lived child is gone by the time its stacks are written.
		l.sess.KnownProcess(pid, false)
	case tracer.KindExec:
		// Read now, while the process is held: a short-lived program
		// may be gone by the time its events come out of the queue.
		l.sess.KnownProcess(pid, false)
		for _, lib := range launchLibs("/proc/" + strconv.Itoa(pid) + "/exe") {
			if _, err := l.tr.AttachLibrary(pid, lib); err != nil {
				l.untraced(pid, err)
				break
			}
			l.sess.KnownFile(lib)
		}
	}
	if e.Flags&tracer.FlagHeld != 0 {
		if e.Kind == tracer.KindFork {
			// The child stops itself on its way out of fork; a
			// SIGCONT before that would be lost and leave it stopped.
			waitStopped(pid, 2*time.Second)
		}
		if err := l.tr.Resume(pid); err != nil && l.o.verbose {
			fmt.Fprintf(l.stderr, "memtrace: resume process %d: %v\n", pid, err)
		}
	}
}

// untraced gives up on a process that could not be probed (often: out of
// file descriptors, each link is one) and says so in the log, so that the
// report can tell a quiet process from an untraced one. Its partial probes
// go: half-probed, it would log frees without their mallocs.
func (l *loop) untraced(pid int, err error) {
	l.tr.ReleaseProcess(pid)
	l.mu.Lock()
	delete(l.pids, pid)
	l.mu.Unlock()
	l.sess.Line(logfmt.AppendProc(nil, logfmt.Proc{Event: logfmt.ProcUntraced, PID: int64(pid),
		TS: (monoNow() - l.start) / 1000, Reason: err.Error()}))
	fmt.Fprintf(l.stderr, "memtrace: process %d is not traced: %v\n", pid, err)
}

// released drops an exited process's probes once the whole process is gone
// (its main thread may exit before the others).
func (l *loop) released(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		l.tr.ReleaseProcess(pid) // gone, and reaped
		return
	}
	if err != nil {
		// Out of descriptors, say: ask /proc until it is a zombie.
		go func() {
			for processAlive(pid) {
				time.Sleep(100 * time.Millisecond)
			}
			l.tr.ReleaseProcess(pid)
		}()
		return
	}
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
				break
			}
		}
		l.tr.ReleaseProcess(pid)
	}()
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

func newLoop(o *options, tr *tracer.Tracer, out io.WriteCloser, stderr io.Writer, start uint64) *loop {
	l := &loop{o: o, tr: tr, out: out, stderr: stderr, start: start, pids: map[int]bool{}, started: time.Now()}
	l.sess = agent.New(agent.Config{Out: out, MinSize: o.minSize, TrackThreads: o.trackThreads, StartNS: start,
		StackDepth: o.stackDepth, OnProcess: l.onProcess,
		ProcessExited: func(pid uint32) {
			l.mu.Lock()
			delete(l.pids, int(pid))
			l.mu.Unlock()
			l.released(int(pid))
			if l.fd != nil {
				l.fd.RemoveProcess(int(pid))
			}
		},
		Track: o.track, MmapFiles: o.mmapFiles, Reports: o.reportDir != "" || o.interval > 0, PeakTopN: o.peakTopN})
	if o.reportDir != "" {
		l.sess.OnProcessReport = func(r *agent.ProcessReport) {
			txt, _, err := procreport.Write(o.reportDir, r)
			if err != nil {
				fmt.Fprintf(stderr, "memtrace: %v\n", err)
			} else if o.verbose {
				fmt.Fprintf(stderr, "memtrace: wrote %s\n", txt)
			}
		}
	}
	return l
}

// startFD starts descriptor tracing when --track asks for it; its events
// come through a channel from their own reader.
func (l *loop) startFD() error {
	if !l.o.track.Any(config.TrackFD | config.TrackDmabuf | config.TrackION) {
		return nil
	}
	fd, err := fdtrace.New(fdtrace.Options{Track: l.o.track, StackDepth: l.o.stackDepth})
	if err != nil {
		return err
	}
	l.fd = fd
	l.fdEvs = make(chan fdtrace.Event, 4096)
	go func() {
		for {
			err := fd.Read(func(e *fdtrace.Event) { l.fdEvs <- *e })
			if err != nil {
				close(l.fdEvs)
				return
			}
		}
	}()
	return nil
}

// addPID traces pid's descriptors too.
func (l *loop) addPID(pid int) {
	if l.fd != nil {
		if err := l.fd.AddProcess(pid); err != nil {
			fmt.Fprintf(l.stderr, "memtrace: trace descriptors of process %d: %v\n", pid, err)
		}
	}
}

func (l *loop) takeFD() {
	if l.fdEvs == nil {
		return
	}
	for {
		select {
		case e, ok := <-l.fdEvs:
			if !ok {
				l.fdEvs = nil
				return
			}
			l.sess.AddFD(&e)
		default:
			return
		}
	}
}

// waitStopped waits until pid is in the stopped state (or gone).
func waitStopped(pid int, limit time.Duration) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		// pid (comm) STATE ...: comm may hold spaces and parentheses.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
			if st := b[i+2]; st == 'T' || st == 't' || st == 'Z' || st == 'X' {
				return
			}
		}
	}
}

// othersAlive reports whether traced processes other than main are still
// running (followed children).
func (l *loop) othersAlive(main int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for pid := range l.pids {
		if pid != main {
			if err := syscall.Kill(pid, 0); err == nil {
				return true
			}
			delete(l.pids, pid)
		}
	}
	return false
}

func (l *loop) header(pids []int, comm, cmdline string) {
	h := logfmt.Header{Version: version, PIDs: make([]int64, len(pids)), Comm: comm, Cmd: cmdline,
		Start: l.started, Mode: logfmt.ModeBPF, Probes: "uprobe"}
	for i, p := range pids {
		h.PIDs[i] = int64(p)
	}
	h.PID = h.PIDs[0]
	if l.tr.Session() {
		h.Probes = "uprobe_session"
	} else if l.tr.Multi() {
		h.Probes = "uprobe_multi"
	}
	if fb := l.tr.FellBack(); len(fb) > 0 {
		h.Singlestep = fb
		fmt.Fprintf(l.stderr, "memtrace: warning: no emulated instruction to probe in %s: probing the first instruction, which the kernel single-steps (slower)\n", strings.Join(fb, ", "))
	}
	l.sess.Line(logfmt.AppendHeader(nil, h))
	l.sess.Flush()
}

func (l *loop) closeFD() {
	if l.fd != nil {
		l.fd.Close()
	}
}

func (l *loop) checkLost() {
	n := l.tr.Lost()
	if l.fd != nil {
		n += l.fd.Lost()
	}
	if n > l.lost {
		l.sess.Lost(n-l.lost, monoNow())
		l.lost = n
	}
}

// run reads until stop is closed, rescanning the targets' libraries now and
// then so that a dlopen'ed allocator is probed too.
func (l *loop) run(stop <-chan struct{}) error {
	lastScan := time.Now()
	lastFlush := time.Now()
	lastSnap := time.Now()
	for {
		select {
		case <-stop:
			return l.finish()
		default:
		}
		if err := l.tr.Read(l.sess); err != nil {
			if errors.Is(err, ringbuf.ErrClosed) {
				return l.finish()
			}
			return fmt.Errorf("read ring buffer: %w", err)
		}
		l.takeFD()
		l.sess.Drain(false)
		if l.o.interval > 0 && time.Since(lastSnap) >= l.o.interval {
			l.sess.Snapshot(monoNow())
			lastSnap = time.Now()
		}
		if time.Since(lastFlush) > 100*time.Millisecond {
			l.checkLost()
			if err := l.sess.Flush(); err != nil {
				return fmt.Errorf("write log: %w", err)
			}
			lastFlush = time.Now()
		}
		if time.Since(lastScan) > 250*time.Millisecond {
			l.mu.Lock()
			pids := make([]int, 0, len(l.pids))
			for pid := range l.pids {
				pids = append(pids, pid)
			}
			l.mu.Unlock()
			for _, pid := range pids {
				if _, err := l.tr.ScanProcess(pid); err != nil && l.o.verbose {
					fmt.Fprintf(l.stderr, "memtrace: rescan process %d: %v\n", pid, err)
				}
				l.sess.KnownProcess(pid, false)
			}
			lastScan = time.Now()
		}
		if err := l.sess.Err(); err != nil {
			return fmt.Errorf("write log: %w", err)
		}
	}
}

func (l *loop) finish() error {
	// Probes off first: a target still running (Ctrl-C, or -p) would
	// otherwise keep the ring from ever being empty. Everything before is
	// in the ring by now; read until it is.
	l.sess.Cutoff(monoNow())
	l.tr.Detach()
	if l.o.verbose {
		for _, p := range l.tr.ProgramStats() {
			fmt.Fprintf(l.stderr, "memtrace: program %s: %d runs, %d ns a run\n", p.Name, p.Runs, p.Runtime.Nanoseconds()/int64(p.Runs))
		}
		if rows, capacity, tables := l.tr.UnwindUsage(); tables > 0 {
			fmt.Fprintf(l.stderr, "memtrace: unwind tables: %d files, %d of %d rows\n", tables, rows, capacity)
		}
		var ru unix.Rusage
		if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
			fmt.Fprintf(l.stderr, "memtrace: own CPU %.3f s (user %.3f, system %.3f) in %.3f s\n",
				float64(ru.Utime.Nano()+ru.Stime.Nano())/1e9, float64(ru.Utime.Nano())/1e9, float64(ru.Stime.Nano())/1e9, time.Since(l.started).Seconds())
		}
	}
	for {
		before := l.sess.Received()
		if err := l.tr.Read(l.sess); err != nil {
			break
		}
		if l.sess.Received() == before {
			break
		}
	}
	if l.fd != nil {
		time.Sleep(tracer.PollInterval) // let the descriptor reader catch up
		l.takeFD()
	}
	l.sess.Drain(true)
	l.sess.FinalReports()
	l.checkLost()
	st := l.sess.Stats
	l.sess.Line(logfmt.AppendSummary(nil, logfmt.Summary{Events: st.Events, Allocs: st.Allocs, Frees: st.Frees,
		Lost: st.Lost, DurationUS: time.Since(l.started).Microseconds()}))
	if err := l.sess.Flush(); err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	if st.Lost > 0 {
		fmt.Fprintf(l.stderr, "memtrace: %d records lost: the reader fell behind; raise --buffer-size\n", st.Lost)
	}
	return nil
}

func procComm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

func procCmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

func attach(o *options, tr *tracer.Tracer, stderr io.Writer) error {
	start := monoNow()
	var watchers []int
	for _, pid := range o.pids {
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
		if o.verbose {
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
	for _, pid := range o.pids {
		l.addPID(pid)
		l.pids[pid] = true
		l.sess.AddProcess(uint32(pid), true)
		l.sess.KnownProcess(pid, true)
	}
	l.header(o.pids, procComm(o.pids[0]), procCmdline(o.pids[0]))
	for _, pid := range o.pids {
		l.sess.Line(logfmt.AppendProc(nil, logfmt.Proc{Event: logfmt.ProcAttach, PID: int64(pid), Comm: procComm(pid), Cmd: procCmdline(pid)}))
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
		}(o.pids[i], fd)
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

// launch starts PROG through a shim that waits, attaches to the shim's PID
// (which PROG keeps across exec), then lets it exec: PROG is traced from its
// first allocation, and runs as the user who invoked sudo.
//
// Until the release, every way out (an error, Ctrl-C, a viewer that never
// comes) kills the shim, which has not run PROG yet: nothing is left
// stopped or waiting.
func launch(o *options, tr *tracer.Tracer, stderr io.Writer) (int, error) {
	path, _ := exec.LookPath(o.argv[0])
	libs := launchLibs(path)
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
	cmd := exec.Command(self, append([]string{shimArg, path}, o.argv...)...)
	cmd.Args[0] = o.argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{r, readyW}
	cmd.Env = os.Environ()
	if cred, ok, err := sudoCredential(); err != nil {
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
		return 127, fmt.Errorf("start %s: %w", o.argv[0], err)
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
	if err := waitShim(ready); err != nil {
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
		return abort(1, untraceable(o.argv[0], path, true))
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
	l.header([]int{pid}, filepath.Base(path), strings.Join(o.argv, " "))
	l.sess.Released(uint32(pid), monoNow())
	if _, err := w.Write([]byte{1}); err != nil {
		return abort(1, fmt.Errorf("release %s: %w", o.argv[0], err))
	}
	w.Close()

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	detached := false
	go func() {
		select {
		case <-done:
			// With --follow, the log goes on while children the
			// program left behind still run.
			for o.follow && l.othersAlive(pid) {
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
		fmt.Fprintf(stderr, "memtrace: detached; %s (pid %d) keeps running\n", o.argv[0], pid)
		return interruptStatus(), err
	}
	return 1, err
}

// waitShim waits for the shim's byte that says it runs (its exec is over),
// or for its end.
func waitShim(ready *os.File) error {
	_ = ready.SetReadDeadline(time.Now().Add(30 * time.Second))
	var b [1]byte
	if n, err := ready.Read(b[:]); n != 1 {
		return fmt.Errorf("the exec shim did not start: %w", err)
	}
	return nil
}

func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
