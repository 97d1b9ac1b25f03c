package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/runner"
	"github.com/memtrace/memtrace/tracer"
)

// selector is --comm, --cgroup and --all as the scan of the running
// processes at the start matches them; the kernel side matches each exec
// by the same rules (tracer.Selector, bpf/mt_proc.h's selected).
type selector struct {
	all     bool
	comms   map[string]bool
	cgroups []string // cgroup v2 paths, "/a/b", as /proc/PID/cgroup gives them
}

// newSelector checks and resolves the selectors of o: the comms as the
// kernel keeps them, each cgroup to its id and level.
func newSelector(o *Options) (selector, tracer.Selector, error) {
	sel := selector{all: o.All, comms: map[string]bool{}}
	ts := tracer.Selector{All: o.All, Comms: o.Comms}
	for _, c := range o.Comms {
		sel.comms[c] = true
	}
	for _, p := range o.Cgroups {
		rel, id, level, err := resolveCgroup(p)
		if err != nil {
			return selector{}, tracer.Selector{}, err
		}
		sel.cgroups = append(sel.cgroups, rel)
		ts.Cgroups = append(ts.Cgroups, tracer.Cgroup{ID: id, Level: level})
	}
	return sel, ts, nil
}

// resolveCgroup takes --cgroup PATH, under the cgroup2 mount or relative to
// it ("/system.slice/x.service", as /proc/PID/cgroup writes it), to that
// path, its cgroup id (the directory's inode, which is what
// bpf_get_current_cgroup_id returns) and its level below the root.
func resolveCgroup(p string) (string, uint64, int, error) {
	fs := procfs.CgroupFS()
	if fs == "" {
		return "", 0, 0, fmt.Errorf("--cgroup %s: no cgroup v2 hierarchy is mounted (a host with cgroup v1 only, or a container without the host's cgroupfs): select with --comm instead", p)
	}
	rel := filepath.Clean("/" + strings.TrimPrefix(p, fs))
	st, err := os.Stat(fs + rel)
	if err != nil {
		return "", 0, 0, fmt.Errorf("--cgroup %s: %w: give a directory under %s, or its path as /proc/PID/cgroup shows it", p, err, fs)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || !ok {
		return "", 0, 0, fmt.Errorf("--cgroup %s: %s is not a cgroup directory", p, fs+rel)
	}
	level := 0
	if rel != "/" {
		level = strings.Count(rel, "/")
	}
	return rel, sys.Ino, level, nil
}

// match says whether the running process pid is one the selectors ask
// for; memtrace itself and kernel threads never are.
func (s *selector) match(pid int) bool {
	if pid == os.Getpid() {
		return false
	}
	st, err := procfs.ReadStat(pid)
	if err != nil || st.Gone() || st.Flags&procfs.PFKthread != 0 {
		return false
	}
	if s.all {
		return true
	}
	if len(s.comms) > 0 {
		if comm, err := procfs.ReadComm(pid); err == nil && s.comms[comm] {
			return true
		}
	}
	if len(s.cgroups) > 0 {
		cg, err := procfs.ReadCgroup(pid)
		if err != nil {
			return false
		}
		for _, c := range s.cgroups {
			if c == "/" || cg == c || strings.HasPrefix(cg, c+"/") {
				return true
			}
		}
	}
	return false
}

// startSelect attaches to every running process the selectors match, as
// -p does but leaving out, and counting, what cannot be traced; processes
// that exec later are the kernel side's to catch (onProcess, admit).
func (s *Source) startSelect(r *runner.Handle) error {
	o, tr := s.o, s.tr
	start := monoNow()
	s.l = makeLoop(o, tr, s.stderr, start)
	s.l.dropped = &s.dropped
	s.l.maxProcs = o.MaxProcs
	pids, err := procfs.PIDs()
	if err != nil {
		return fmt.Errorf("list the running processes: %w", err)
	}
	for _, pid := range pids {
		if runner.WasInterrupted() {
			return fmt.Errorf("interrupted while attaching: nothing was traced")
		}
		if !s.sel.match(pid) {
			continue
		}
		if !s.l.room(pid) {
			continue
		}
		err := tr.AddProcess(pid)
		var added []string
		if err == nil {
			added, err = tr.ScanProcess(pid)
		}
		if err != nil || len(added) == 0 {
			// Gone since, a Go or stripped static program, or out of
			// descriptors: not this run's to trace; the others are.
			tr.ReleaseProcess(pid)
			s.dropped.Add(1)
			if o.Verbose {
				fmt.Fprintf(s.stderr, "memtrace: process %d (%s) is not traced: %v\n", pid, procComm(pid), noProbeReason(pid, err))
			}
			continue
		}
		if o.Verbose {
			fmt.Fprintf(s.stderr, "memtrace: process %d: probed %s\n", pid, strings.Join(added, ", "))
		}
		s.l.pids[pid] = true
		s.selected = append(s.selected, pid)
		// On /metrics from the moment tracing begins.
		r.Traced(pid)
	}
	s.attached = monoNow()
	return nil
}

func noProbeReason(pid int, err error) error {
	if err != nil {
		return err
	}
	return untraceableProcess(pid)
}

// room says whether one more process may be traced (--max-procs), and
// counts pid as dropped when not.
func (l *loop) room(pid int) bool {
	l.mu.Lock()
	n := len(l.pids)
	l.mu.Unlock()
	if l.maxProcs > 0 && n >= l.maxProcs {
		l.dropped.Add(1)
		if l.o.Verbose {
			fmt.Fprintf(l.stderr, "memtrace: process %d is not traced: --max-procs %d processes are\n", pid, l.maxProcs)
		}
		return false
	}
	return true
}

// admit takes a process the kernel side selected at its exec (a pid the
// loop had not seen, which it made a target and holds) once its probes
// are on: traced from now on.
func (l *loop) admit(pid int) {
	// The kernel side made it a target; again here, for a process the
	// start's scan found at its exec and let go before this record.
	if err := l.tr.AddProcess(pid); err != nil && l.o.Verbose {
		fmt.Fprintf(l.stderr, "memtrace: process %d: %v\n", pid, err)
	}
	l.mu.Lock()
	l.pids[pid] = true
	l.mu.Unlock()
	l.addPID(pid)
	l.sess.AddProcess(uint32(pid), false)
	if l.traced != nil {
		l.traced(pid)
	}
}

// traceSelect logs the selected processes, and those that exec into a
// match, until Ctrl-C or SIGTERM: a selector has no last process.
func (s *Source) traceSelect() error {
	l := s.l
	l.traced = s.r.Traced
	l.sess.From(s.attached)
	if err := l.startFD(); err != nil {
		return err
	}
	for _, pid := range s.selected {
		l.addPID(pid)
		l.sess.AddProcess(uint32(pid), true)
		l.sess.KnownProcess(pid, true)
	}
	head := s.selected
	if len(head) == 0 {
		head = []int{os.Getpid()}
	}
	l.header(head, procComm(head[0]), procCmdline(head[0]))
	for _, pid := range s.selected {
		l.sess.Proc(logfmt.Proc{Event: logfmt.ProcAttach, PID: int64(pid), Comm: procComm(pid), Cmd: procCmdline(pid)})
	}
	stop := make(chan struct{})
	go func() {
		<-runner.Interrupted()
		close(stop)
	}()
	return l.run(stop)
}
