package tests

// The fault loops of issue 21: Ctrl-C, SIGTERM and SIGKILL at random
// moments of the runs in which memtrace holds processes (a dlopen's unwind
// table with -p --stack-depth, --follow's forks and execs, launch mode's
// exec), and SIGKILL of memtrace together with its helper processes. After
// every round: no process of the program's tree is stopped once memtrace
// is gone, the program ends with an untraced run's status and result, and
// memtrace left no BPF program or link behind. MEMTRACE_FAULT_ROUNDS
// rounds per scenario (20 in make test, 200 in make soak), the signals
// taking turns; MEMTRACE_FAULT_SEED replays a run's moments;
// MEMTRACE_FAULT_SUMMARY names a file that gets one line per scenario and
// fault, for scripts/soak.sh.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/tracer"
)

// stopGrace is how long after memtrace's death a process of the tree may
// still be seen stopped: issue 21 asks for a resume within 100 ms, the rest
// is for a loaded 2-vCPU machine. stuckAfter is how long a stopped process
// is then watched before it counts as left stopped for good (the watchdog
// of today sweeps for 3 s) and is killed.
const (
	stopGrace  = 300 * time.Millisecond
	stuckAfter = 3500 * time.Millisecond
)

// fault is what a round does to memtrace.
type fault int

const (
	faultINT     fault = iota // SIGINT, as Ctrl-C at a terminal sends it
	faultTERM                 // SIGTERM
	faultKILL                 // SIGKILL of memtrace alone
	faultKILLAll              // SIGKILL of memtrace and its helper processes at once
)

func (f fault) String() string {
	return [...]string{"SIGINT", "SIGTERM", "SIGKILL", "SIGKILL+helpers"}[f]
}

// faultMode is one way of running memtrace on one program.
type faultMode struct {
	name   string
	attach bool     // memtrace -p PID of a program the test started, else -- PROG
	opts   []string // memtrace's options
	prog   func(out string) []string
	// The fault's moment after memtrace starts, uniform in [from, to).
	from, to time.Duration
}

// faultScenario is a subtest: its rounds take its modes and faults in turn.
type faultScenario struct {
	name   string
	modes  []faultMode
	faults []fault
}

// faultTally counts one scenario's rounds of one fault.
type faultTally struct {
	rounds, stopped, leftover, other, notStarted int
	took                                         time.Duration
}

// roundOutcome is what one round found; every finding is also a t.Errorf.
type roundOutcome struct {
	started  bool
	stopped  bool
	leftover bool
	other    bool
}

func faultSeed() int64 {
	if n, err := strconv.ParseInt(os.Getenv("MEMTRACE_FAULT_SEED"), 10, 64); err == nil {
		return n
	}
	return time.Now().UnixNano()
}

// TestFaultRounds is issue 21's item 3. Processes the program leaves
// orphaned (in launch mode, the program itself once memtrace is gone) are
// reparented to this test, a child subreaper while it runs, so that their
// exit status can be read.
func TestFaultRounds(t *testing.T) {
	if testing.Short() {
		// The loop is make test's and make soak's; make check keeps
		// one round of each fault in TestSIGKILLNeverLeavesTargetsStopped
		// and the faults tests.
		t.Skip("the fault loops run in make test, not under -short")
	}
	requireBPF(t)
	mt := need(t, "bin/memtrace")
	dlloop := need(t, "tests/progs/build/dlloop")
	need(t, "tests/progs/build/libdlalloc.so")
	forkexec := need(t, "tests/progs/build/forkexec")
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("become a child subreaper: %v", err)
	}
	t.Cleanup(func() {
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		reapOrphans()
	})
	seed := faultSeed()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d (MEMTRACE_FAULT_SEED replays it)", seed)

	attachDlopen := faultMode{name: "attach-dlopen", attach: true, opts: []string{"--stack-depth", "16"},
		prog: func(out string) []string { return []string{dlloop, out, "200"} }, from: 0, to: 1200 * time.Millisecond}
	followForkexec := faultMode{name: "follow-forkexec", opts: []string{"--stack-depth", "16", "-f"},
		prog: func(out string) []string { return []string{forkexec, out, "10", "100"} }, from: 500 * time.Millisecond, to: 2500 * time.Millisecond}
	attachFollow := faultMode{name: "attach-follow-forkexec", attach: true, opts: []string{"-f"},
		prog: func(out string) []string { return []string{forkexec, out, "30", "40"} }, from: 0, to: 1200 * time.Millisecond}
	// With --stack-depth each exec'd child is also held while its unwind
	// tables are built, which makes a hold more likely at the fault; but
	// a Ctrl-C's detach is then too slow for the 20 rounds of make test,
	// so only the SIGKILL scenario runs it.
	attachFollowStacks := attachFollow
	attachFollowStacks.name, attachFollowStacks.opts = "attach-follow-forkexec-stacks", []string{"--stack-depth", "16", "-f"}
	signals := []fault{faultINT, faultTERM, faultKILL}
	scenarios := []faultScenario{
		{"attach-dlopen", []faultMode{attachDlopen}, signals},
		{"follow-forkexec", []faultMode{followForkexec}, signals},
		{"attach-follow-forkexec", []faultMode{attachFollow}, signals},
		{"launch-dlopen-threads", []faultMode{{name: "launch-dlopen-threads", opts: []string{"--stack-depth", "16"},
			prog: func(out string) []string { return []string{dlloop, out, "120", "2"} }, from: 350 * time.Millisecond, to: 1500 * time.Millisecond}}, signals},
		{"kill-with-helpers", []faultMode{followForkexec, attachDlopen, attachFollowStacks}, []fault{faultKILLAll}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if sc.name == "kill-with-helpers" && !tracer.KernelRelease() {
				// Without the kernel's release (Linux before 6.13,
				// or MEMTRACE_TEST_WATCHDOG=1) the watchdog is the
				// only releaser, and killing it with memtrace is the
				// one way left to leave a process stopped
				// (docs/holds.md).
				t.Skip("the kernel cannot release held processes here: nothing is left to release them once memtrace and its watchdog are both killed")
			}
			dir := t.TempDir()
			type ref struct {
				status int
				out    string
			}
			refs := map[string]ref{}
			for _, m := range sc.modes {
				out := filepath.Join(dir, m.name+".ref")
				st, got := referenceRun(t, out, m.prog(out)...)
				refs[m.name] = ref{st, got}
			}
			// Counted per fault, and per mode where the scenario
			// has several.
			tallies := map[string]*faultTally{}
			var keys []string
			var pendingHelpers []int
			for round := 0; round < faultRounds(); round++ {
				m := sc.modes[round%len(sc.modes)]
				f := sc.faults[(round/len(sc.modes))%len(sc.faults)]
				at := m.from + time.Duration(rng.Int63n(int64(m.to-m.from)))
				r := refs[m.name]
				began := time.Now()
				o, helpers := faultRound(t, mt, m, f, at, filepath.Join(dir, fmt.Sprintf("%s.r%d.out", m.name, round)), r.status, r.out)
				pendingHelpers = append(pendingHelpers, helpers...)
				key := f.String()
				if len(sc.modes) > 1 {
					key = m.name + "/" + key
				}
				tl := tallies[key]
				if tl == nil {
					tl = &faultTally{}
					tallies[key] = tl
					keys = append(keys, key)
				}
				tl.rounds++
				tl.took += time.Since(began)
				if !o.started {
					tl.notStarted++
				}
				if o.stopped {
					tl.stopped++
				}
				if o.leftover {
					tl.leftover++
				}
				if o.other {
					tl.other++
				}
			}
			// memtrace's helpers may outlive it for a while (today's
			// watchdog sweeps for 3 s); they must end, but their
			// lingering overlaps the next rounds.
			for _, pid := range pendingHelpers {
				if st := waitExited(pid, 10*time.Second); st != "" {
					t.Errorf("memtrace's helper process %d: %s after its memtrace was gone", pid, st)
				}
			}
			reapOrphans()
			faultSummary(t, sc.name, keys, tallies)
		})
	}
}

// faultSummary logs a scenario's counts and appends them to
// $MEMTRACE_FAULT_SUMMARY.
func faultSummary(t *testing.T, scenario string, keys []string, tallies map[string]*faultTally) {
	t.Helper()
	var lines []string
	for _, k := range keys {
		tl := tallies[k]
		lines = append(lines, fmt.Sprintf("%s %s rounds=%d stopped=%d leftover=%d other=%d not-started=%d mean-round=%.1fs",
			scenario, k, tl.rounds, tl.stopped, tl.leftover, tl.other, tl.notStarted, tl.took.Seconds()/float64(tl.rounds)))
	}
	for _, l := range lines {
		t.Logf("fault summary: %s", l)
	}
	if p := os.Getenv("MEMTRACE_FAULT_SUMMARY"); p != "" {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Errorf("append to MEMTRACE_FAULT_SUMMARY: %v", err)
			return
		}
		defer f.Close()
		for _, l := range lines {
			fmt.Fprintln(f, l)
		}
	}
}

// faultRound runs memtrace in mode m on its program writing to out,
// applies f at the moment at, and checks what is left. It returns what it
// found and memtrace's helper processes, whose end the caller checks.
func faultRound(t *testing.T, mt string, m faultMode, f fault, at time.Duration, out string, refStatus int, refOut string) (roundOutcome, []int) {
	t.Helper()
	var o roundOutcome
	fail := func(kind *bool, format string, args ...any) {
		*kind = true
		t.Errorf("%s, %v at %v: "+format, append([]any{filepath.Base(out), f, at.Round(time.Millisecond)}, args...)...)
	}
	mark := bpfMarkNow()
	argv := m.prog(out)
	args := append(append([]string(nil), m.opts...), "-o", out+".log")
	root := 0
	var targetDone chan *os.ProcessState
	if m.attach {
		target := command(argv[0], argv[1:]...)
		if err := target.Start(); err != nil {
			t.Fatal(err)
		}
		targetDone = make(chan *os.ProcessState, 1)
		go func() { target.Wait(); targetDone <- target.ProcessState }()
		root = target.Process.Pid
		// Attach to a program that is running, not to one still at
		// its exec.
		if err := waitForFile(out+".started", 10*time.Second); err != nil {
			_ = target.Process.Kill()
			<-targetDone
			t.Fatal(err)
		}
		args = append(args, "-p", strconv.Itoa(root))
	} else {
		args = append(append(args, "--"), argv...)
	}
	cmd := command(mt, args...)
	// A file, not a pipe: the program inherits memtrace's stderr, and a
	// pipe would keep cmd.Wait waiting for a program left stopped.
	se, err := os.Create(out + ".stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer se.Close()
	cmd.Stderr = se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	mtPid := cmd.Process.Pid
	mtDone := make(chan struct{})
	go func() { cmd.Wait(); close(mtDone) }()
	others := watchOthersBPF(mtPid)
	defer others.stop()

	var helpers []int
	finishedFirst := false
	select {
	case <-time.After(at):
		// Who is who, before the fault reparents them.
		var shim int
		shim, helpers = childrenOf(mtPid, out)
		if root == 0 {
			root = shim
		}
		switch f {
		case faultINT:
			_ = cmd.Process.Signal(syscall.SIGINT)
		case faultTERM:
			_ = cmd.Process.Signal(syscall.SIGTERM)
		case faultKILL:
			_ = cmd.Process.Kill()
		case faultKILLAll:
			// As `kill -9 MEMTRACE HELPER...`: one after the other
			// with nothing in between.
			_ = syscall.Kill(mtPid, syscall.SIGKILL)
			for _, h := range helpers {
				_ = syscall.Kill(h, syscall.SIGKILL)
			}
		}
	case <-mtDone:
		finishedFirst = true
	}
	select {
	case <-mtDone:
	case <-time.After(20 * time.Second):
		fail(&o.other, "memtrace did not exit within 20s (its stderr ends %q)", stderrTail(out))
		_ = cmd.Process.Kill()
		<-mtDone
	}
	died := time.Now()
	if root == 0 {
		root, _ = startedPid(out, 5*time.Second)
	}

	// Watch the tree until it has exited: nothing in it may be stopped
	// once memtrace has been gone for stopGrace.
	status, statusKnown, notChild := 0, false, false
	var firstStopped time.Time
	var stoppedWhat string
	deadline := died.Add(20 * time.Second)
	for {
		tree := processTree(root, out, helpers)
		if !m.attach && root > 0 && !statusKnown && !notChild {
			status, statusKnown, notChild = reapStatus(root)
		}
		if time.Since(died) >= stopGrace {
			if what := stoppedIn(tree); what != "" {
				if firstStopped.IsZero() {
					firstStopped, stoppedWhat = time.Now(), what
				}
				if time.Since(firstStopped) > stuckAfter {
					fail(&o.stopped, "left stopped %v after memtrace was gone: %s (memtrace's stderr ends %q)", time.Since(died).Round(time.Millisecond), what, stderrTail(out))
					killTree(tree)
					firstStopped = time.Time{}
					break
				}
			} else if !firstStopped.IsZero() {
				fail(&o.stopped, "stopped %v after memtrace was gone, resumed later: %s", firstStopped.Sub(died).Round(time.Millisecond), stoppedWhat)
				firstStopped = time.Time{}
			}
		}
		if len(tree) == 0 {
			break
		}
		if time.Now().After(deadline) {
			fail(&o.other, "the program's tree still runs 20s after memtrace was gone: %v", tree)
			killTree(tree)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if m.attach {
		select {
		case ps := <-targetDone:
			if ps != nil {
				status, statusKnown = ps.ExitCode(), true
				if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					status = 128 + int(ws.Signal())
				}
			}
		case <-time.After(10 * time.Second):
			fail(&o.other, "the attached program %d was not reaped within 10s", root)
			_ = syscall.Kill(root, syscall.SIGKILL)
			_ = syscall.Kill(root, syscall.SIGCONT)
			<-targetDone
		}
	} else if root > 0 && !statusKnown {
		for end := time.Now().Add(2 * time.Second); !statusKnown && !notChild && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			status, statusKnown, notChild = reapStatus(root)
		}
	}
	if finishedFirst && !statusKnown {
		// memtrace reaped the program and ended with its status.
		status, statusKnown = cmd.ProcessState.ExitCode(), true
	}

	_, err = os.Stat(out + ".started")
	o.started = err == nil
	// A program left stopped was killed here: its status and result say
	// nothing more.
	if o.started && !o.stopped {
		if statusKnown && status != refStatus {
			fail(&o.other, "the program ended with status %d, untraced %d (memtrace's stderr ends %q)", status, refStatus, stderrTail(out))
		}
		if got, err := os.ReadFile(out); err != nil {
			fail(&o.other, "the program started but wrote no result (status %d, known %v)", status, statusKnown)
		} else if string(got) != refOut {
			fail(&o.other, "result %q, untraced %q", got, refOut)
		}
	}
	if left := waitBPFGone(mark, helpers, others, 3*time.Second); left != "" {
		fail(&o.leftover, "memtrace left BPF objects: %s", left)
	}
	// A log that got as far as its header came from the eBPF tracer.
	if b, err := os.ReadFile(out + ".log"); err == nil && bytes.Contains(b, []byte("[memtrace] header ")) {
		bpftest.RequireModeBPF(t, b)
	}
	_ = os.Remove(out + ".log")
	reapOrphans()
	return o, helpers
}

// stderrTail is the end of memtrace's stderr, for a failure's message.
func stderrTail(out string) string {
	b, _ := os.ReadFile(out + ".stderr")
	if len(b) > 300 {
		return "..." + string(b[len(b)-300:])
	}
	return string(b)
}

// childrenOf splits mt's children into the one that runs the program (its
// command line holds tag: the exec shim, then the program) and memtrace's
// own helpers (the watchdog today).
func childrenOf(mt int, tag string) (shim int, helpers []int) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat("/proc/" + e.Name() + "/stat"); !ok || ppid != mt {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(cl, []byte(tag)) {
			shim = pid
		} else {
			helpers = append(helpers, pid)
		}
	}
	return shim, helpers
}

// processTree lists the live processes of the program's tree: root, its
// descendants by parent, and whatever holds tag in its command line (a
// child whose parent died has another parent; the program's own children
// carry its OUT argument). Zombies and memtrace's helpers are left out.
func processTree(root int, tag string, helpers []int) []procState {
	parent := map[int]int{}
	state := map[int]byte{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if st, ppid, ok := procStat("/proc/" + e.Name() + "/stat"); ok {
			parent[pid], state[pid] = ppid, st
		}
	}
	in := map[int]bool{}
	for _, p := range tagged(tag) {
		in[p.pid] = true
	}
	var isDesc func(pid, depth int) bool
	isDesc = func(pid, depth int) bool {
		if pid == root {
			return true
		}
		pp, ok := parent[pid]
		if !ok || pp <= 1 || depth > 64 {
			return false
		}
		return isDesc(pp, depth+1)
	}
	if root > 0 {
		for pid := range parent {
			if isDesc(pid, 0) {
				in[pid] = true
			}
		}
	}
	for _, h := range helpers {
		delete(in, h)
	}
	var out []procState
	for pid := range in {
		st, ok := state[pid]
		if !ok || st == 'Z' || st == 'X' {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		out = append(out, procState{pid, string(st), strings.ReplaceAll(string(cl), "\x00", " ")})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// stoppedIn names the tasks of procs in state T (stopped) or t (stopped by
// a tracer), every thread looked at: a hold may stop one thread only.
func stoppedIn(procs []procState) string {
	var what []string
	for _, p := range procs {
		dir := "/proc/" + strconv.Itoa(p.pid) + "/task"
		tasks, _ := os.ReadDir(dir)
		for _, task := range tasks {
			if st, _, ok := procStat(filepath.Join(dir, task.Name(), "stat")); ok && (st == 'T' || st == 't') {
				what = append(what, fmt.Sprintf("pid %d tid %s state %c (%s)", p.pid, task.Name(), st, p.cmd))
			}
		}
	}
	return strings.Join(what, "; ")
}

// killTree ends what a failed round left, stopped or not, so that the next
// round starts clean.
func killTree(procs []procState) {
	for _, p := range procs {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		_ = syscall.Kill(p.pid, syscall.SIGCONT)
	}
}

// reapStatus reaps pid if it is an exited child of this process (an orphan
// reparented here) and returns its exit status (128+N for a signal, as a
// shell says). notChild: pid is no child here (memtrace reaped it), so its
// status cannot be learnt.
func reapStatus(pid int) (status int, known, notChild bool) {
	var ws unix.WaitStatus
	got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	switch {
	case errors.Is(err, unix.ECHILD):
		return 0, false, true
	case err != nil || got != pid:
		return 0, false, false
	case ws.Signaled():
		return 128 + int(ws.Signal()), true, false
	default:
		return ws.ExitStatus(), true, false
	}
}

// reapOrphans reaps the zombies reparented to this test (memtrace's
// helpers, the program's orphaned children).
func reapOrphans() {
	self := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ppid, ok := procStat("/proc/" + e.Name() + "/stat"); ok && ppid == self && st == 'Z' {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

// bpfMark is what existed before a round: BPF IDs only grow, so anything
// of a higher ID is the round's (or another test's on the same machine,
// which its own process holds), and the uprobe_events lines.
type bpfMark struct {
	prog    ebpf.ProgramID
	link    link.ID
	uprobes map[string]bool
}

// uprobeEventFiles are tracefs's list of uprobe events, wherever it is
// mounted; memtrace's links do not use it, but a fallback to tracefs
// uprobes would leave its events there.
var uprobeEventFiles = []string{"/sys/kernel/tracing/uprobe_events", "/sys/kernel/debug/tracing/uprobe_events"}

func bpfMarkNow() bpfMark {
	m := bpfMark{uprobes: map[string]bool{}}
	for id, err := ebpf.ProgramGetNextID(0); err == nil; id, err = ebpf.ProgramGetNextID(id) {
		m.prog = id
	}
	var it link.Iterator
	for it.Next() {
		m.link = it.ID
	}
	it.Close()
	for _, f := range uprobeEventFiles {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n") {
			m.uprobes[l] = true
		}
	}
	return m
}

// bpfLeftovers names memtrace's BPF programs (named mt_*) and links created
// since m that no live process holds (memtrace's helpers do not count: they
// must let go too), and uprobe events added since m. Those others held
// while the round ran (another test's memtrace, when tests run side by
// side: its objects too wait for the kernel's release once it is gone)
// are not the round's.
func bpfLeftovers(m bpfMark, helpers []int, others *othersBPF) string {
	mtProgs := map[ebpf.ProgramID]string{}
	for id, err := ebpf.ProgramGetNextID(m.prog); err == nil; id, err = ebpf.ProgramGetNextID(id) {
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		if info, err := p.Info(); err == nil && strings.HasPrefix(info.Name, "mt_") {
			mtProgs[id] = info.Name
		}
		p.Close()
	}
	mtLinks := map[link.ID]ebpf.ProgramID{}
	it := link.Iterator{ID: m.link}
	for it.Next() {
		if info, err := it.Link.Info(); err == nil {
			if _, ok := mtProgs[info.Program]; ok {
				mtLinks[it.ID] = info.Program
			}
		}
	}
	it.Close()
	var left []string
	if len(mtProgs) > 0 || len(mtLinks) > 0 {
		heldProgs, heldLinks := bpfHolders(helpers)
		otherProgs, otherLinks := others.seen(helpers)
		for id, name := range mtProgs {
			if !heldProgs[uint64(id)] && !otherProgs[uint64(id)] {
				left = append(left, fmt.Sprintf("program %d %s", id, name))
			}
		}
		for id, prog := range mtLinks {
			if !heldLinks[uint64(id)] && !otherLinks[uint64(id)] {
				left = append(left, fmt.Sprintf("link %d of program %d %s", id, prog, mtProgs[prog]))
			}
		}
	}
	for _, f := range uprobeEventFiles {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n") {
			if !m.uprobes[l] {
				left = append(left, fmt.Sprintf("uprobe event %q in %s", l, f))
			}
		}
	}
	sort.Strings(left)
	return strings.Join(left, "; ")
}

// bpfHolders reads every process's BPF descriptors (fdinfo's prog_id and
// link_id), but for this test's and skip's: the programs and links someone
// still holds. A link holds its program.
func bpfHolders(skip []int) (progs, links map[uint64]bool) {
	skipped := map[int]bool{os.Getpid(): true}
	for _, p := range skip {
		skipped[p] = true
	}
	progs, links = map[uint64]bool{}, map[uint64]bool{}
	for _, h := range bpfHeldByPid(func(pid int) bool { return !skipped[pid] }) {
		if h.link {
			links[h.id] = true
		} else {
			progs[h.id] = true
		}
	}
	return progs, links
}

// bpfHeld is one BPF descriptor of a process: a program's or a link's id.
type bpfHeld struct {
	pid  int
	id   uint64
	link bool
}

// bpfHeldByPid lists the BPF programs and links the processes count
// accepts hold (fdinfo's prog_id and link_id). count is asked only about
// a process that holds one: it may read the process's ancestry, and the
// watch below scans every process many times a second.
func bpfHeldByPid(count func(pid int) bool) []bpfHeld {
	var out []bpfHeld
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fdDir := "/proc/" + e.Name() + "/fd"
		fds, _ := os.ReadDir(fdDir)
		asked, counted := false, false
		for _, fd := range fds {
			l, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil || (l != "anon_inode:bpf-prog" && l != "anon_inode:bpf_link") {
				continue
			}
			if !asked {
				asked, counted = true, count(pid)
			}
			if !counted {
				break
			}
			info, _ := os.ReadFile("/proc/" + e.Name() + "/fdinfo/" + fd.Name())
			for _, line := range strings.Split(string(info), "\n") {
				k, v, ok := strings.Cut(line, ":")
				if !ok {
					continue
				}
				id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				if err != nil {
					continue
				}
				switch k {
				case "prog_id":
					out = append(out, bpfHeld{pid, id, false})
				case "link_id":
					out = append(out, bpfHeld{pid, id, true})
				}
			}
		}
	}
	return out
}

// othersBPF watches, while a round runs, which BPF programs and links
// processes other than this test and the round's memtrace (and its
// descendants) hold, and which processes those are.
type othersBPF struct {
	mu          sync.Mutex
	progs       map[uint64]map[int]bool
	links       map[uint64]map[int]bool
	done, ended chan struct{}
}

// othersPoll is how often othersBPF looks: a memtrace holds its programs
// longer (its start-up alone takes longer), and each look reads every
// process's descriptors, which a busy machine feels.
const othersPoll = 100 * time.Millisecond

func watchOthersBPF(mtPid int) *othersBPF {
	o := &othersBPF{progs: map[uint64]map[int]bool{}, links: map[uint64]map[int]bool{},
		done: make(chan struct{}), ended: make(chan struct{})}
	self := os.Getpid()
	ours := map[int]bool{mtPid: true}
	// ourPid: memtrace or, by parent, one of its descendants (once seen,
	// a helper stays the round's after a fault reparents it).
	var ourPid func(pid, depth int) bool
	ourPid = func(pid, depth int) bool {
		if ours[pid] {
			return true
		}
		_, ppid, ok := procStat("/proc/" + strconv.Itoa(pid) + "/stat")
		if !ok || ppid <= 1 || depth > 8 || !ourPid(ppid, depth+1) {
			return false
		}
		ours[pid] = true
		return true
	}
	add := func(m map[uint64]map[int]bool, id uint64, pid int) {
		if m[id] == nil {
			m[id] = map[int]bool{}
		}
		m[id][pid] = true
	}
	go func() {
		defer close(o.ended)
		for {
			held := bpfHeldByPid(func(pid int) bool { return pid != self && !ourPid(pid, 0) })
			o.mu.Lock()
			for _, h := range held {
				if h.link {
					add(o.links, h.id, h.pid)
				} else {
					add(o.progs, h.id, h.pid)
				}
			}
			o.mu.Unlock()
			select {
			case <-o.done:
				return
			case <-time.After(othersPoll):
			}
		}
	}()
	return o
}

// seen is what others held so far, helpers (the round's memtrace's,
// which a fault may have reparented before the watch saw them as its)
// left out.
func (o *othersBPF) seen(helpers []int) (progs, links map[uint64]bool) {
	progs, links = map[uint64]bool{}, map[uint64]bool{}
	if o == nil {
		return progs, links
	}
	ours := map[int]bool{}
	for _, h := range helpers {
		ours[h] = true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, x := range []struct {
		from map[uint64]map[int]bool
		to   map[uint64]bool
	}{{o.progs, progs}, {o.links, links}} {
		for id, pids := range x.from {
			for pid := range pids {
				if !ours[pid] {
					x.to[id] = true
				}
			}
		}
	}
	return progs, links
}

func (o *othersBPF) stop() {
	select {
	case <-o.done:
	default:
		close(o.done)
	}
	<-o.ended
}

// waitBPFGone waits, bounded, for the round's BPF objects to go: the
// kernel releases a uprobe link after a grace period.
func waitBPFGone(m bpfMark, helpers []int, others *othersBPF, limit time.Duration) string {
	end := time.Now().Add(limit)
	for {
		left := bpfLeftovers(m, helpers, others)
		if left == "" || time.Now().After(end) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}
