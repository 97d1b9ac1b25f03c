package launch

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/event/fdevent"
	"github.com/memtrace/memtrace/fdtrace"
	"github.com/memtrace/memtrace/internal/cli"
	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/runner"
)

// loop reads events until done says to stop, then drains what is left.
type loop struct {
	o     *Options
	tr    tracerAPI
	fd    *fdtrace.Tracer // nil unless --track has fd, dmabuf or ion
	fdEvs chan fdevent.Event
	fdEnd chan struct{} // closed by endFD
	// fdHorizon: the descriptors' reader has read every event older
	// than it (CLOCK_MONOTONIC ns).
	fdHorizon atomic.Uint64
	sess      *agent.Session
	stderr    io.Writer
	start     uint64
	mu        sync.Mutex   // guards pids: the launch waiter reads it too
	pids      map[int]bool // traced processes still alive
	lost      uint64
	started   time.Time
	// libs lists what a freshly exec'd image's allocations go through,
	// with the environment it got: launchLibs, replaced by the unit tests.
	libs func(exe string, env []string) []string
	// Selectors (--comm, --cgroup, --all): the processes left untraced,
	// --max-procs (0: no bound), and the live model's note of a process
	// traced from its exec.
	dropped  *atomic.Uint64
	maxProcs int
	traced   func(pid int)
	letGo    map[int]bool // let go at their exec, until the Session asks (LetGo)
	// prog is the launched PROG's path: the header, written before the
	// shim's exec, names its real file from it, not from /proc.
	prog string
}

// onProcess probes a forked child (stopped by the kernel side until now)
// or a freshly exec'd image, then lets a held process go.
// realTracer is the tracer under the probe counter, for the methods
// tracerAPI does not carry (the fd tracer's stack maps, Compat).
func (l *loop) realTracer() any {
	if pc, ok := l.tr.(*probeCounter); ok {
		return pc.tracerAPI
	}
	return l.tr
}

func (l *loop) onProcess(e *event.Event) {
	pid := int(e.TGID)
	switch e.Kind {
	case event.KindFork:
		if e.Flags&event.FlagUnfollowed != 0 {
			return // runs untraced: the session says so in the log
		}
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
	case event.KindExec:
		l.mu.Lock()
		fresh := l.dropped != nil && !l.pids[pid]
		l.mu.Unlock()
		// A pid the loop has not seen is one a selector matched at its
		// exec; past --max-procs it goes on untraced.
		if fresh && !l.room(pid) {
			l.letGo[pid] = true
			if err := l.tr.Resume(pid, uint32(e.Size)); err != nil && l.o.Verbose {
				fmt.Fprintf(l.stderr, "memtrace: resume process %d: %v\n", pid, err)
			}
			l.tr.ReleaseProcess(pid)
			return
		}
		// Read now, while the process is held: a short-lived program
		// may be gone by the time its events come out of the queue
		// (a selector's new process once it is known to be traced).
		if !fresh {
			l.sess.KnownProcess(pid, false)
		}
		probed := false
		for _, lib := range l.libs("/proc/"+strconv.Itoa(pid)+"/exe", procEnviron(pid)) {
			ok, err := l.tr.AttachLibrary(pid, lib)
			if err != nil {
				l.untraced(pid, err)
				break
			}
			probed = probed || ok
			l.sess.KnownFile(lib)
		}
		if fresh && probed {
			l.admit(pid)
			l.sess.KnownProcess(pid, false)
		} else if fresh {
			// A Go program or a stripped static one (--all meets
			// many): nothing to trace, and no reason to say so.
			l.dropped.Add(1)
			l.letGo[pid] = true
			if err := l.tr.Resume(pid, uint32(e.Size)); err != nil && l.o.Verbose {
				fmt.Fprintf(l.stderr, "memtrace: resume process %d: %v\n", pid, err)
			}
			l.tr.ReleaseProcess(pid)
			return
		}
	}
	if e.Flags&event.FlagHeld != 0 {
		if e.Kind == event.KindFork {
			// The child stops itself on its way out of fork; a
			// SIGCONT before that would be lost and leave it stopped.
			waitStopped(pid, 2*time.Second)
		}
		// The event's size is its hold's key.
		if err := l.tr.Resume(pid, uint32(e.Size)); err != nil && l.o.Verbose {
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
	l.sess.Proc(logfmt.Proc{Event: logfmt.ProcUntraced, PID: int64(pid),
		TS: (monoNow() - l.start) / 1000, Reason: err.Error()})
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
	st, err := procfs.ReadStat(pid)
	// A stat the parser refuses is a process that exists.
	return errors.Is(err, procfs.ErrBadStat) || err == nil && !st.Gone()
}

// makeLoop is the loop of a run whose log counts from start; its Session
// comes later (Source.Trace), made with configure.
func makeLoop(o *Options, tr tracerAPI, stderr io.Writer, start uint64) *loop {
	return &loop{o: o, tr: tr, stderr: stderr, start: start, pids: map[int]bool{}, started: time.Now(), libs: launchLibs, letGo: map[int]bool{}}
}

// newLoop is a loop with its Session, writing to out.
func newLoop(o *Options, tr tracerAPI, out io.WriteCloser, stderr io.Writer, start uint64) *loop {
	l := makeLoop(o, tr, stderr, start)
	l.sess = runner.NewSession(o, out, stderr, nil, l.configure)
	return l
}

// configure is what the Session needs of the loop: its clock and the
// callbacks that probe new processes and let exited ones go.
func (l *loop) configure(c *agent.Config) {
	c.StartNS = l.start
	c.OnProcess = l.onProcess
	c.LetGo = func(pid uint32) bool {
		if !l.letGo[int(pid)] {
			return false
		}
		delete(l.letGo, int(pid))
		return true
	}
	c.ProcessExited = func(pid uint32) {
		l.mu.Lock()
		delete(l.pids, int(pid))
		l.mu.Unlock()
		l.released(int(pid))
		if l.fd != nil {
			l.fd.RemoveProcess(int(pid))
		}
	}
}

// newFDTracer is fdtrace.New; tests replace it with one that fails as a
// kernel does.
var newFDTracer = fdtrace.New

// startFD starts descriptor tracing when --track asks for it; its events
// come through a channel from their own reader.
func (l *loop) startFD() error {
	if !l.o.Track.Any(config.TrackFD | config.TrackDmabuf | config.TrackION) {
		return nil
	}
	fo := fdtrace.Options{Track: l.o.Track, StackDepth: l.o.StackDepth}
	// Descriptor stacks go through the allocation tracer's walk and
	// ring (docs/fd.md, "Stacks").
	tr := l.realTracer()
	if st, ok := tr.(interface {
		StackMaps() map[string]*ebpf.Map
		StackDWARF() bool
	}); ok && fo.StackDepth > 0 {
		fo.Stacks, fo.DWARF = st.StackMaps(), st.StackDWARF()
	}
	if c, ok := tr.(interface{ Compat() string }); ok {
		fo.Compat = c.Compat() != ""
	}
	fd, err := newFDTracer(fo)
	if errors.Is(err, fdtrace.ErrUnavailable) {
		// A kernel that cannot run the descriptor programs still runs
		// the allocation ones: the run goes on without descriptors.
		fmt.Fprintf(l.stderr, "memtrace: notice: descriptor tracing (--track %s) is off: %v; allocations are still traced\n", l.o.Track&(config.TrackFD|config.TrackDmabuf|config.TrackION), err)
		return nil
	}
	if err != nil {
		return err
	}
	l.fd = fd
	l.fdEvs = make(chan fdevent.Event, 4096)
	l.fdEnd = make(chan struct{})
	go func() {
		defer close(l.fdEvs)
		for {
			select {
			case <-l.fdEnd:
				// The end (endFD): the probes are off; everything
				// the ring still holds, then the channel closes.
				for {
					n := 0
					if err := fd.Read(func(e *fdevent.Event) { n++; l.fdEvs <- *e }); err != nil || n == 0 {
						return
					}
				}
			default:
			}
			t0 := monoNow()
			if err := fd.Read(func(e *fdevent.Event) { l.fdEvs <- *e }); err != nil {
				return
			}
			// Everything committed before t0 was read.
			l.fdHorizon.Store(t0)
		}
	}()
	return nil
}

// endFD takes every descriptor event the ring holds at the end: the
// reader is told to stop once the ring is empty (the probes detached
// first, so it gets empty), and its channel is read until it closes. A
// pause for the reader to catch up lost the program's last events on a
// loaded machine.
func (l *loop) endFD() {
	if l.fd == nil || l.fdEvs == nil {
		return
	}
	l.fd.Detach()
	close(l.fdEnd)
	for e := range l.fdEvs {
		l.sess.AddFD(&e)
	}
	l.fdEvs = nil
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
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
		st, err := procfs.ReadStat(pid)
		if err != nil && !errors.Is(err, procfs.ErrBadStat) {
			return
		}
		if err == nil && (st.Stopped() || st.Gone()) {
			return
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
	var exe string
	if l.prog != "" {
		exe, _ = filepath.EvalSymlinks(l.prog)
		exe, _ = filepath.Abs(exe)
	} else {
		exe, _ = procfs.ReadExe(pids[0])
	}
	h := logfmt.Header{Version: cli.Version, PIDs: make([]int64, len(pids)), Comm: comm, Cmd: cmdline,
		Exe: agent.ExeBeside(comm, exe), Start: l.started, Mode: logfmt.ModeBPF, Probes: "uprobe"}
	for i, p := range pids {
		h.PIDs[i] = int64(p)
	}
	h.PID = h.PIDs[0]
	tr := l.realTracer()
	if l.tr.Session() {
		h.Probes = "uprobe_session"
	} else if l.tr.Multi() {
		h.Probes = "uprobe_multi"
	} else if c, ok := tr.(interface{ Compat() string }); ok && c.Compat() != "" {
		h.Probes = "uprobe_compat"
	}
	if fb := l.tr.FellBack(); len(fb) > 0 {
		h.Singlestep = fb
		fmt.Fprintf(l.stderr, "memtrace: warning: no emulated instruction to probe in %s: probing the first instruction, which the kernel single-steps (slower)\n", strings.Join(fb, ", "))
	}
	l.sess.Header(h)
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

// rescanEvery is how often the targets' mappings are read again for a
// dlopen'ed allocator: 250 ms, or a second under a selector, whose tens
// of processes that seldom dlopen made the rescans 9 % of a CPU for 50
// idle ones (scripts/bench-fleet.sh).
func (l *loop) rescanEvery() time.Duration {
	if l.dropped != nil {
		return time.Second
	}
	return 250 * time.Millisecond
}

// run reads until stop is closed, rescanning the targets' libraries now and
// then so that a dlopen'ed allocator is probed too.
func (l *loop) run(stop <-chan struct{}) error {
	lastScan := time.Now()
	lastFlush := time.Now()
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
		if l.fd != nil {
			// Loaded before the events are taken: every event older
			// than it is in the channel by then.
			h := l.fdHorizon.Load()
			l.takeFD()
			l.sess.SetFDHorizon(h)
		}
		// Drain writes the --interval snapshots due too, at their times
		// among the events.
		l.sess.Drain(false)
		if time.Since(lastFlush) > 100*time.Millisecond {
			l.checkLost()
			if err := l.sess.Flush(); err != nil {
				return fmt.Errorf("write log: %w", err)
			}
			lastFlush = time.Now()
		}
		if time.Since(lastScan) > l.rescanEvery() {
			l.mu.Lock()
			pids := make([]int, 0, len(l.pids))
			for pid := range l.pids {
				pids = append(pids, pid)
			}
			l.mu.Unlock()
			for _, pid := range pids {
				// A rescan of many processes takes a while: a
				// Ctrl-C is answered between two.
				select {
				case <-stop:
					return l.finish()
				default:
				}
				if _, err := l.tr.ScanProcess(pid); err != nil && l.o.Verbose {
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
	if l.o.Verbose {
		for _, p := range l.tr.ProgramStats() {
			fmt.Fprintf(l.stderr, "memtrace: program %s: %d runs, %d ns a run\n", p.Name, p.Runs, p.Runtime.Nanoseconds()/int64(p.Runs))
		}
		if rows, capacity, tables := l.tr.UnwindUsage(); tables > 0 {
			fmt.Fprintf(l.stderr, "memtrace: unwind tables: %d files, %d of %d rows\n", tables, rows, capacity)
		}
		if replayed, walked := l.tr.WalkReuse(); replayed+walked > 0 {
			fmt.Fprintf(l.stderr, "memtrace: DWARF walk: %d steps of %d replayed from the previous walk\n", replayed, replayed+walked)
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
	l.endFD()
	l.sess.Drain(true)
	l.sess.FinalReports()
	l.checkLost()
	st := l.sess.Stats
	l.sess.Summary(time.Since(l.started).Microseconds())
	if err := l.sess.Flush(); err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	if st.Lost > 0 {
		fmt.Fprintf(l.stderr, "memtrace: %d records lost: the reader fell behind; raise --buffer-size\n", st.Lost)
	}
	return nil
}
