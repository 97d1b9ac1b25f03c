package tests

// PID namespaces (issue 31): memtrace run inside a PID namespace of its
// own (unshare --pid --fork --mount-proc; kubectl debug, a
// shareProcessNamespace sidecar and docker --pid=container:X put it in the
// target's) gives what it gives on the host, on both paths: the kernel
// side numbers processes by the namespace's ids, as /proc, kill and the
// traced program do (bpf/mt_pidns.h). And memtrace on the host still
// traces a process inside one.
//
//	go test ./tests -run PIDNamespace -v

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
)

// inPIDNS is the command line that runs argv in a new PID namespace with
// its own /proc.
func inPIDNS(argv ...string) []string {
	return append([]string{"unshare", "--pid", "--fork", "--mount-proc", "--"}, argv...)
}

// nsLog is what the PID namespace tests read from a log besides the
// per-thread records: the header's pid, the proc lines by event, and the
// truncated stacks by reason.
type nsLog struct {
	pid       int64
	procs     map[string]int // event= -> lines
	forks     []int64        // the pids of event=fork lines
	truncated map[string]int // reason= -> stacks
}

func readNSLog(t *testing.T, path string) nsLog {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the log: %v", err)
	}
	out := nsLog{procs: map[string]int{}, truncated: map[string]int{}}
	sc := logfmt.NewScanner(bytes.NewReader(b))
	var l logfmt.Line
	for sc.Scan() {
		if l.Parse(sc.Line()) != nil || l.Kind != logfmt.KindMeta {
			continue
		}
		kv := logfmt.Fields(l.Rest)
		switch string(l.Word) {
		case logfmt.WordHeader:
			h, err := logfmt.ParseHeader(l.Rest)
			if err != nil {
				t.Fatalf("the log's header: %v", err)
			}
			out.pid = h.PID
		case logfmt.WordProc:
			ev, _ := logfmt.Field(kv, "event")
			out.procs[ev]++
			if ev == "fork" {
				p, _ := logfmt.Field(kv, "pid")
				n, _ := strconv.ParseInt(p, 10, 64)
				out.forks = append(out.forks, n)
			}
		case logfmt.WordStack:
			if tr, _ := logfmt.Field(kv, "truncated"); tr == "1" {
				reason, _ := logfmt.Field(kv, "reason")
				out.truncated[reason]++
			}
		}
	}
	return out
}

// mainTID is the thread id the program's own record names it by: its pid
// in the namespace it ran in.
func mainTID(t *testing.T, r *run) int64 {
	t.Helper()
	truth, err := readTruth(r.truth)
	if err != nil || len(truth) == 0 {
		t.Fatalf("the program's record: %v (%d records)", err, len(truth))
	}
	return truth[0].tid
}

// checkReport: memtrace report says how the program ended and what it
// leaked, as it would for a run on the host.
func checkReport(t *testing.T, memtrace, log string) {
	t.Helper()
	out, err := command(memtrace, "report", log).CombinedOutput()
	if err != nil {
		t.Fatalf("memtrace report: %v\n%s", err, out)
	}
	for _, want := range []string{"run: exited with status 3", "total memory leaked: 30B (1 leaks)"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("memtrace report %s has no %q:\n%s", log, want, out)
		}
	}
}

// sameAsHost: a run in the namespace has the host run's proc lines, and
// no truncated stacks of a reason the host run has none of.
func sameAsHost(t *testing.T, host, ns nsLog) {
	t.Helper()
	for _, ev := range []string{"exec", "fork", "exit", "attach"} {
		if host.procs[ev] != ns.procs[ev] {
			t.Errorf("proc event=%s lines: %d in the namespace, %d on the host", ev, ns.procs[ev], host.procs[ev])
		}
	}
	if ns.procs["fork"] == 0 || ns.procs["exit"] == 0 {
		t.Errorf("the namespace's log has %d fork and %d exit lines, want both", ns.procs["fork"], ns.procs["exit"])
	}
	for reason, n := range ns.truncated {
		if host.truncated[reason] == 0 {
			t.Errorf("%d stacks truncated (reason=%s) in the namespace, none on the host", n, reason)
		}
	}
}

// TestPIDNamespaceLaunch: memtrace -f --stack-depth 16 -- pidns run
// inside a PID namespace (unshare --pid --fork --mount-proc), on both
// paths, is what the same run on the host is: exit status 3, every
// allocation of the program and of its child in the log under the ids the
// program recorded for itself (the namespace's), the header's pid the
// program's there, the host run's exec, fork and exit lines, no truncated
// stack the host run has not, and memtrace report's "exited with status 3"
// and 30B leaked.
func TestPIDNamespaceLaunch(t *testing.T) {
	requireBPF(t)
	needTools(t, "unshare")
	memtrace := need(t, "bin/memtrace")
	prog := need(t, "tests/progs/build/pidns")
	for _, path := range []string{"bpf", "preload"} {
		t.Run(path, func(t *testing.T) {
			logs := map[bool]nsLog{}
			for _, ns := range []bool{false, true} {
				r := newRun(t)
				argv := []string{memtrace, "-f", "--stack-depth", "16", "-o", r.log}
				if path == "preload" {
					argv = append(argv, "--preload")
				}
				argv = append(argv, "--", prog)
				if ns {
					argv = inPIDNS(argv...)
				}
				cmd := command(argv[0], argv[1:]...)
				cmd.Env = r.env()
				cmd.Stdout, cmd.Stderr = &r.stderr, &r.stderr
				err := runCmd(t, cmd, runLimit)
				if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 3 {
					t.Fatalf("%v: %v, want exit status 3\n%s", argv, err, r.stderr.String())
				}
				if !strings.Contains(r.stderr.String(), "total memory leaked: 30B") {
					t.Errorf("%v: memtrace's closing lines have no \"total memory leaked: 30B\":\n%s", argv, r.stderr.String())
				}
				if path == "bpf" {
					bpfLog(t, r.log)
				}
				r.check(t, true)
				l := readNSLog(t, r.log)
				if want := mainTID(t, r); l.pid != want {
					t.Errorf("%v: the header says pid=%d, the program is %d", argv, l.pid, want)
				}
				checkReport(t, memtrace, r.log)
				logs[ns] = l
			}
			sameAsHost(t, logs[false], logs[true])
		})
	}
}

// TestPIDNamespaceAttach: memtrace -f -p PID inside the namespace, PID
// being the program's id there: its header names that pid, every
// allocation of the program and its child is in the log under the
// namespace's ids, and the fork and exit lines are the host run's; on the
// eBPF path (-p has no LD_PRELOAD fallback).
func TestPIDNamespaceAttach(t *testing.T) {
	requireBPF(t)
	needTools(t, "unshare", "sh", "mkfifo")
	memtrace := need(t, "bin/memtrace")
	prog := need(t, "tests/progs/build/pidns")
	logs := map[bool]nsLog{}
	for _, ns := range []bool{false, true} {
		r := newRun(t)
		go1 := filepath.Join(t.TempDir(), "go")
		if err := syscall.Mkfifo(go1, 0o600); err != nil {
			t.Fatal(err)
		}
		// Read and write: the open returns at once, and the program's
		// read of its go byte waits for the write below.
		fifo, err := os.OpenFile(go1, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer fifo.Close()
		// memtrace and the program in one namespace: the pid memtrace
		// is given is the namespace's.
		script := fmt.Sprintf(`%q <%q & exec %q -f --stack-depth 16 -o %q -p $!`, prog, go1, memtrace, r.log)
		argv := []string{"sh", "-c", script}
		if ns {
			argv = inPIDNS(argv...)
		}
		cmd := command(argv[0], argv[1:]...)
		cmd.Env = r.env("MEMTRACE_TEST_WAIT=1")
		cmd.Stdout, cmd.Stderr = &r.stderr, &r.stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- runWait(cmd, runLimit) }()
		hdr := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			hdr <- waitHeader(ctx, r.log)
		}()
		select {
		case err := <-hdr:
			if err != nil {
				t.Fatalf("%v\n%s", err, r.stderr.String())
			}
		case err := <-done:
			t.Fatalf("memtrace -p exited before its header: %v\n%s", err, r.stderr.String())
		}
		if _, err := fifo.WriteString("g"); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, r.stderr.String())
		}
		bpfLog(t, r.log)
		r.check(t, true)
		l := readNSLog(t, r.log)
		if want := mainTID(t, r); l.pid != want {
			t.Errorf("%v: the header says pid=%d, the program is %d", argv, l.pid, want)
		}
		logs[ns] = l
	}
	sameAsHost(t, logs[false], logs[true])
}

// TestPIDNamespaceFromHost: memtrace on the host traces a program inside
// a PID namespace, launched (memtrace -f -- unshare ... pidns) and
// attached (-p with its host pid), on both paths where they apply: every
// allocation of the program and of its child is in the log, under the
// host's ids (the program's record, in its namespace's ids, is mapped
// through the log's header and fork line).
func TestPIDNamespaceFromHost(t *testing.T) {
	requireBPF(t)
	needTools(t, "unshare")
	memtrace := need(t, "bin/memtrace")
	prog := need(t, "tests/progs/build/pidns")
	for _, mode := range []string{"launch-bpf", "launch-preload", "attach"} {
		t.Run(mode, func(t *testing.T) {
			r := newRun(t)
			if mode == "attach" {
				r.attachFromHost(t, memtrace, prog)
			} else {
				argv := []string{"-f", "--stack-depth", "16", "-o", r.log}
				if mode == "launch-preload" {
					argv = append(argv, "--preload")
				}
				argv = append(argv, inPIDNS(prog)...)
				cmd := command(memtrace, argv...)
				cmd.Env = r.env()
				cmd.Stdout, cmd.Stderr = &r.stderr, &r.stderr
				err := runCmd(t, cmd, runLimit)
				if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 3 {
					t.Fatalf("memtrace %v: %v, want exit status 3\n%s", argv, err, r.stderr.String())
				}
			}
			if mode != "launch-preload" {
				bpfLog(t, r.log)
			}
			checkFromHost(t, r)
		})
	}
}

// attachFromHost starts prog in a PID namespace of its own, waiting, and
// attaches memtrace -f -p with its host pid (the child unshare forked),
// then lets it go.
func (r *run) attachFromHost(t *testing.T, memtrace, prog string) {
	t.Helper()
	p := command("unshare", "--pid", "--fork", "--mount-proc", "--", prog)
	p.Env = r.env("MEMTRACE_TEST_WAIT=1")
	stdin, progDone := r.startWaiting(t, p)
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.Process.Pid, p.Process.Pid))
	f := strings.Fields(string(kids))
	if err != nil || len(f) != 1 {
		t.Fatalf("unshare's child: %q, %v", kids, err)
	}
	mt := command(memtrace, "-f", "--stack-depth", "16", "-o", r.log, "-p", f[0])
	mt.Stdout, mt.Stderr = &r.stderr, &r.stderr
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	mtDone := make(chan error, 1)
	go func() { mtDone <- runWait(mt, runLimit) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitHeader(ctx, r.log); err != nil {
		t.Fatalf("%v\n%s", err, r.stderr.String())
	}
	if _, err := stdin.Write([]byte("g")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-progDone:
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("program: %v, want exit status 3\n%s", err, r.stderr.String())
		}
	case <-time.After(runLimit):
		t.Fatalf("program did not finish within %v", runLimit)
	}
	if err := <-mtDone; err != nil {
		t.Fatalf("memtrace -p: %v\n%s", err, r.stderr.String())
	}
}

// checkFromHost compares the log with the program's records, whose ids
// are its namespace's: the program is the process whose allocation of 30
// bytes the log has, its child the one fork line of that process.
func checkFromHost(t *testing.T, r *run) {
	t.Helper()
	pl, err := parseLog(r.log)
	if err != nil {
		t.Fatalf("%v\nstderr: %s", err, r.stderr.String())
	}
	truth, err := readTruth(r.truth)
	if err != nil {
		t.Fatal(err)
	}
	children, _ := filepath.Glob(r.truth + ".child.*")
	if len(truth) == 0 || len(children) != 1 {
		t.Fatalf("the program recorded %d events and %d children, want some and 1", len(truth), len(children))
	}
	child, err := readTruth(children[0])
	if err != nil {
		t.Fatal(err)
	}
	host := int64(0)
	for _, e := range pl.events {
		if e.op == "malloc" && e.ptr == truth[0].ptr && e.size == truth[0].size {
			host = e.tid
		}
	}
	l := readNSLog(t, r.log)
	if host == 0 || len(l.forks) == 0 {
		t.Fatalf("the log has no malloc of the program's %d bytes at %#x, or no fork line (%v)", truth[0].size, truth[0].ptr, l.forks)
	}
	hostChild := l.forks[len(l.forks)-1]
	for i := range truth {
		truth[i].tid = host
	}
	for i := range child {
		child[i].tid = hostChild
	}
	errs := append(compare(pl, truth, compareOpts{exits: true}), compare(pl, child, compareOpts{exits: true})...)
	for _, e := range errs {
		t.Error(e)
	}
	if t.Failed() {
		t.Logf("log: %s, stderr: %s", r.log, r.stderr.String())
		keep(t, r)
	}
}

// TestPIDNamespaceForeignProc: memtrace in a PID namespace whose /proc is
// still another namespace's (unshare --pid --fork without --mount-proc)
// would read other processes by its pids: it refuses in one line that
// says why, exit status 1, on both paths, before the program runs.
func TestPIDNamespaceForeignProc(t *testing.T) {
	requireBPF(t)
	needTools(t, "unshare", "touch")
	memtrace := need(t, "bin/memtrace")
	for _, path := range []string{"bpf", "preload"} {
		t.Run(path, func(t *testing.T) {
			dir := t.TempDir()
			ran := filepath.Join(dir, "ran")
			argv := []string{"unshare", "--pid", "--fork", "--", memtrace, "-o", filepath.Join(dir, "log")}
			if path == "preload" {
				argv = append(argv, "--preload")
			}
			argv = append(argv, "--", "touch", ran)
			var out bytes.Buffer
			cmd := command(argv[0], argv[1:]...)
			cmd.Stdout, cmd.Stderr = &out, &out
			err := runCmd(t, cmd, runLimit)
			if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("%v: %v, want exit status 1\n%s", argv, err, out.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "/proc is not mounted for memtrace's PID namespace") || !strings.Contains(lines[0], "--mount-proc") {
				t.Errorf("want one line saying /proc is another namespace's and what to do, got:\n%s", out.String())
			}
			if _, err := os.Stat(ran); err == nil {
				t.Error("the program ran")
			}
			if strings.Contains(out.String(), "panic") || strings.Contains(out.String(), "goroutine") {
				t.Errorf("a Go panic reached the user:\n%s", out.String())
			}
		})
	}
}

// nsChild is the one child of process pid (unshare's or nsenter's, which
// fork the process that is in the namespace), waited for.
func nsChild(t *testing.T, pid int) int {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if f := strings.Fields(string(b)); len(f) == 1 {
			n, _ := strconv.Atoi(f[0])
			return n
		}
	}
	t.Fatalf("process %d has no child", pid)
	return 0
}

// nsPID is the id host process pid has in its own PID namespace (the last
// of /proc/PID/status's NSpid).
func nsPID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(ln, "NSpid:"); ok {
			f := strings.Fields(rest)
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	t.Fatalf("process %d: no NSpid in its status", pid)
	return 0
}

// TestPIDNamespaceFleet: memtrace --comm NAME --http run inside a PID
// namespace (entered with nsenter, as kubectl debug enters a pod's)
// traces the namespace's NAME processes, one running before it (attached)
// and one started after (caught at its exec, every fleet_keep block), and
// labels them with the namespace's pids on /metrics and in the profile; a
// NAME process on the host, outside its namespace, is not traced.
func TestPIDNamespaceFleet(t *testing.T) {
	requireBPF(t)
	needTools(t, "unshare", "nsenter", "sleep")
	memtrace := need(t, "bin/memtrace")
	dir := t.TempDir()
	comm := fmt.Sprintf("mtns%d", os.Getpid()%1000000)
	prog := fleetCopy(t, dir, comm)

	holder := command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "--", "sleep", "600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	})
	enter := []string{"-t", strconv.Itoa(nsChild(t, holder.Process.Pid)), "-p", "-m", "--"}
	inNS := func(f *fleetProc) int { return nsPID(t, nsChild(t, f.pid())) }

	outside := startFleet(t, prog)
	before := startFleet(t, "nsenter", append(enter, prog)...)
	r := startSelectingVia(t, func(cmd *exec.Cmd) int { return nsChild(t, cmd.Process.Pid) },
		"nsenter", append(enter, memtrace, "--comm", comm, "--stack-depth", "8", "-o", "none", "--http", "127.0.0.1:0")...)
	after := startFleet(t, "nsenter", append(enter, prog)...)
	pb, pa := inNS(before), inNS(after)
	if pb == nsChild(t, before.pid()) {
		t.Fatalf("process %d has the same pid in the namespace: not in one of its own", pb)
	}
	waitMetrics(t, r, fmt.Sprintf("processes %d and %d (the namespace's pids), %d with its fleet_keep blocks", pb, pa, pa), func(pids map[int]float64) bool {
		_, ok := pids[pb]
		return ok && pids[pa] >= fleetKept
	})
	pids := liveBytesByPID(t, r)
	if len(pids) != 2 {
		t.Errorf("/metrics has processes %v, want the namespace's two, %d and %d (the host's %d is not memtrace's to see)", pids, pb, pa, outside.pid())
	}
	if got := metric(fetchMetrics(t, r.addr), "memtrace_traced_processes", 0); got != 2 {
		t.Errorf("memtrace_traced_processes %v, want 2", got)
	}
	p := fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap")
	bpftest.RequireProfileModeBPF(t, p)
	if kept := keptByPID(p); kept[int64(pa)] != fleetKept || len(kept) != 1 {
		t.Errorf("fleet_keep's in-use bytes by pid label %v, want %d for %d only (the one started after memtrace, by its pid in the namespace)", kept, fleetKept, pa)
	}
}

// TestPIDNamespaceFD: --track malloc,fd inside a PID namespace logs the
// descriptors the host run logs (the fd tracer's targets are the
// namespace's pids, as the allocation tracer's), under the program's pid
// there.
func TestPIDNamespaceFD(t *testing.T) {
	requireBPF(t)
	needTools(t, "unshare", "sh")
	memtrace := need(t, "bin/memtrace")
	count := map[bool]int{}
	for _, ns := range []bool{false, true} {
		log := filepath.Join(t.TempDir(), "log")
		argv := []string{memtrace, "--track", "malloc,fd", "--stack-unwind", "fp", "--stack-depth", "8", "-o", log, "--",
			"sh", "-c", "exec 3</etc/passwd 4</etc/hostname; echo $$ >" + log + ".pid"}
		if ns {
			argv = inPIDNS(argv...)
		}
		out, err := command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
		b := bpfLog(t, log)
		pid, _ := os.ReadFile(log + ".pid")
		for _, ln := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(ln, "[memtrace] fd event=open") && strings.Contains(ln, " pid="+strings.TrimSpace(string(pid))+" ") &&
				(strings.Contains(ln, "path=/etc/passwd") || strings.Contains(ln, "path=/etc/hostname")) {
				count[ns]++
			}
		}
	}
	if count[false] != 2 || count[true] != count[false] {
		t.Errorf("fd event=open lines of the program's two files: %d on the host, %d in the namespace; want 2 and 2", count[false], count[true])
	}
}

// TestPIDNamespaceKilledHoldsNone: SIGKILL of memtrace -f inside a PID
// namespace (not its init: a shell is) while the program forks children,
// each held until memtrace has probed it: every hold is let go (they are
// the namespace's pids, which the kernel side's release and the watchdog
// look up there), and the program ends with its untraced result.
func TestPIDNamespaceKilledHoldsNone(t *testing.T) {
	requireBPF(t)
	needTools(t, "unshare", "sh", "pgrep")
	memtrace := need(t, "bin/memtrace")
	forker := need(t, "tests/progs/build/forker")
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref")
	if out, err := command(forker, ref, "40", "10").CombinedOutput(); err != nil {
		t.Fatalf("forker: %v\n%s", err, out)
	}
	want, _ := os.ReadFile(ref)
	out := filepath.Join(dir, "out")
	// The shell's wait ends with memtrace, but the program, now the
	// shell's by reparenting, is not one of its jobs, and the kernel
	// kills whatever is left in the namespace when its init exits: so
	// the shell waits until no forker is left (a program still held
	// keeps it waiting, which the 60 s below catches). --kill-child: the
	// test's kill of unshare ends the namespace.
	script := fmt.Sprintf(`%q -f -o %q -- %q %q 40 10 & wait; while pgrep -x forker >/dev/null; do sleep 0.02; done`,
		memtrace, filepath.Join(dir, "log"), forker, out)
	cmd := command("unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--", "sh", "-c", script)
	var stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	mt := nsChild(t, nsChild(t, cmd.Process.Pid))
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(out + ".started"); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("forker did not start under memtrace:\n%s", stderr.String())
		}
	}
	time.Sleep(150 * time.Millisecond)
	if err := syscall.Kill(mt, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the program did not end within 60 s of memtrace's SIGKILL: a process is still held\n%s", stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("forker's result %q (%v), want its untraced %q", got, err, want)
	}
}
