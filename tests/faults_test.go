package tests

// Fault tests: memtrace killed, failing early, interrupted or out of file
// descriptors must never leave a traced program stopped, a shim waiting, or
// a child silently untraced. The faults are timing-dependent, so each case
// runs many times (MEMTRACE_FAULT_ROUNDS, default 20) at seeded random
// moments; every wait is bounded.

import (
	"bytes"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// faultRounds is how many rounds a fault loop runs: MEMTRACE_FAULT_ROUNDS,
// else 20, or 1 under -short (make check), where they only show that the
// loop still runs.
func faultRounds() int {
	if n, err := strconv.Atoi(os.Getenv("MEMTRACE_FAULT_ROUNDS")); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return 1
	}
	return 20
}

// procState is one live process whose command line holds a test's tag.
type procState struct {
	pid   int
	state string
	cmd   string
}

// procStat is what /proc/PID/stat (or /proc/PID/task/TID/stat, with path)
// says of a task: its state letter and its parent; ok is false once it is
// gone or unreadable.
func procStat(path string) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid, true
}

// tagged lists the processes, zombies left out, whose command line
// contains tag: what a run left behind.
func tagged(tag string) []procState {
	var out []procState
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cl, []byte(tag)) {
			continue
		}
		state, _, ok := procStat("/proc/" + e.Name() + "/stat")
		if !ok || state == 'Z' || state == 'X' {
			continue
		}
		out = append(out, procState{pid, string(state), strings.ReplaceAll(string(cl), "\x00", " ")})
	}
	return out
}

// waitNoneTagged waits until no process with tag is alive; on timeout it
// reports what is left, and kills it so the next round starts clean.
func waitNoneTagged(t *testing.T, tag string, limit time.Duration) bool {
	t.Helper()
	end := time.Now().Add(limit)
	for {
		left := tagged(tag)
		if len(left) == 0 {
			return true
		}
		if time.Now().After(end) {
			for _, p := range left {
				t.Errorf("process %d (state %s) still there %v later: %s", p.pid, p.state, limit, p.cmd)
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
				_ = syscall.Kill(p.pid, syscall.SIGCONT)
			}
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitExited waits until pid is gone or a zombie; "" then, else what it is.
func waitExited(pid int, limit time.Duration) string {
	for end := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		state, _, ok := procStat("/proc/" + strconv.Itoa(pid) + "/stat")
		if !ok || state == 'Z' || state == 'X' {
			return ""
		}
		if time.Now().After(end) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Sprintf("still running (state %c) %v later", state, limit)
		}
	}
}

// exitOf says how the program of out ended, when its zombie is still
// there to tell (its reaper here may never reap it).
// startedPid is the program's PID from OUT.started, which each of its
// execs rewrites: a file caught between its truncation and the write is
// read again, for at most wait. ok is false without the file.
func startedPid(out string, wait time.Duration) (int, bool) {
	end := time.Now().Add(wait)
	for {
		b, err := os.ReadFile(out + ".started")
		if err != nil {
			return 0, false
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			return pid, true
		}
		if time.Now().After(end) {
			return 0, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func exitOf(out string) string {
	p, ok := startedPid(out, time.Second)
	if !ok {
		return "no pid"
	}
	pid := strconv.Itoa(p)
	st, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "pid " + pid + " reaped"
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	if len(f) == 0 {
		return "pid " + pid
	}
	code, _ := strconv.Atoi(f[len(f)-1])
	return fmt.Sprintf("pid %s state %s wait status %#x", pid, f[0], code)
}

// referenceOutput runs argv untraced and returns what it wrote to out.
func referenceOutput(t *testing.T, out string, argv ...string) string {
	t.Helper()
	status, got := referenceRun(t, out, argv...)
	if status != 0 {
		t.Fatalf("untraced %v: exit status %d", argv, status)
	}
	return got
}

// referenceRun runs argv untraced, as the fault tests' yardstick: its exit
// status and what it wrote to out.
func referenceRun(t *testing.T, out string, argv ...string) (int, string) {
	t.Helper()
	cmd := command(argv[0], argv[1:]...)
	b, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && (!exited || cmd.ProcessState.ExitCode() < 0) {
		t.Fatalf("untraced %v: %v\n%s", argv, err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(got)
}

// TestSIGKILLNeverLeavesTargetsStopped kills memtrace at random moments
// while the kernel side holds processes (forked children with --follow,
// every exec in -- mode, children of an attached process): every program
// that started must finish with an untraced run's result.
func TestSIGKILLNeverLeavesTargetsStopped(t *testing.T) {
	requireBPF(t)
	mt := need(t, "bin/memtrace")
	forker := need(t, "tests/progs/build/forker")
	reexec := need(t, "tests/progs/build/reexec")
	dir := t.TempDir()
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)

	cases := []struct {
		name    string
		prog    func(out string) []string
		attach  bool
		maxKill time.Duration
	}{
		{"follow-forks", func(out string) []string { return []string{forker, out, "25", "10"} }, false, 700 * time.Millisecond},
		{"reexec", func(out string) []string { return []string{reexec, out, "12", "0"} }, false, 700 * time.Millisecond},
		{"attach-follow-forks", func(out string) []string { return []string{forker, out, "40", "10"} }, true, 700 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := referenceOutput(t, filepath.Join(dir, c.name+".ref"), c.prog(filepath.Join(dir, c.name+".ref"))...)
			for round := 0; round < faultRounds(); round++ {
				out := filepath.Join(dir, fmt.Sprintf("%s.%d.out", c.name, round))
				argv := c.prog(out)
				var target *exec.Cmd
				var cmd *exec.Cmd
				if c.attach {
					target = command(argv[0], argv[1:]...)
					if err := target.Start(); err != nil {
						t.Fatal(err)
					}
					cmd = command(mt, "--follow", "-o", out+".log", "-p", strconv.Itoa(target.Process.Pid))
				} else {
					cmd = command(mt, append([]string{"--follow", "-o", out + ".log", "--"}, argv...)...)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				kill := time.Duration(rng.Int63n(int64(c.maxKill)))
				exited := make(chan struct{})
				go func() { cmd.Wait(); close(exited) }()
				select {
				case <-time.After(kill):
					_ = cmd.Process.Kill()
					<-exited
				case <-exited:
				}
				if target != nil {
					done := make(chan error, 1)
					go func() { done <- target.Wait() }()
					select {
					case <-done:
					case <-time.After(20 * time.Second):
						t.Errorf("round %d (killed at %v): the attached program did not finish within 20s", round, kill)
						_ = target.Process.Kill()
						_ = syscall.Kill(target.Process.Pid, syscall.SIGCONT)
						<-done
					}
				}
				// A log that got as far as its header came from the
				// eBPF tracer (killed earlier, it may have none).
				if b, err := os.ReadFile(out + ".log"); err == nil && bytes.Contains(b, []byte("[memtrace] header ")) {
					bpftest.RequireModeBPF(t, b)
				}
				if !waitNoneTagged(t, out, 20*time.Second) {
					t.Errorf("round %d: killed at %v", round, kill)
					continue
				}
				// The program's PID (kept across its execs) is in
				// .started once it ran; wait for that process itself,
				// which a command-line scan can miss mid-exec.
				if pid, ok := startedPid(out, 5*time.Second); ok {
					if st := waitExited(pid, 20*time.Second); st != "" {
						t.Errorf("round %d (killed at %v): process %d: %s", round, kill, pid, st)
						continue
					}
				}
				got, err := os.ReadFile(out)
				if err != nil {
					// In -- mode a memtrace killed before the release
					// leaves the program never started, by design.
					if _, serr := os.Stat(out + ".started"); serr == nil {
						t.Errorf("round %d (killed at %v): the program started but wrote no result (%s)", round, kill, exitOf(out))
					}
					continue
				}
				if string(got) != ref {
					t.Errorf("round %d (killed at %v): result %q, untraced %q", round, kill, got, ref)
				}
			}
		})
	}
}

// oneErrorLine checks that stderr is exactly one memtrace error line.
func oneErrorLine(t *testing.T, stderr string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "memtrace: ") {
		t.Errorf("stderr is not one memtrace line: %q", stderr)
	}
}

// TestEarlyFailuresEndTheShim: an error before the program is released
// (a log that cannot be created, a port that is taken) ends memtrace with
// one line and a non-zero status, and ends the exec shim with it.
func TestEarlyFailuresEndTheShim(t *testing.T) {
	requireBPF(t)
	mt := need(t, "bin/memtrace")
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"log-in-missing-dir", []string{"-o", filepath.Join(dir, "no/such/dir/x.log")}, "create log"},
		{"log-is-a-directory", []string{"-o", dir}, "create log"},
		{"port-taken", []string{"--port", taken}, "listen on"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for round := 0; round < faultRounds(); round++ {
				tag := fmt.Sprintf("memtrace-early-%s-%d-%d", c.name, os.Getpid(), round)
				cmd := command(mt, append(c.args, "--", "/bin/true", tag)...)
				var se bytes.Buffer
				cmd.Stderr = &se
				err := runCmd(t, cmd, 30*time.Second)
				if err == nil {
					t.Fatalf("round %d: exit 0, want an error", round)
				}
				if _, ok := err.(*exec.ExitError); !ok {
					t.Fatalf("round %d: %v", round, err)
				}
				oneErrorLine(t, se.String())
				if !strings.Contains(se.String(), c.want) {
					t.Errorf("round %d: stderr %q, want it to say %q", round, se.String(), c.want)
				}
				waitNoneTagged(t, tag, 5*time.Second)
			}
		})
	}
}

// TestInterruptWhileWaitingForViewer: Ctrl-C (or SIGTERM) while --port
// waits for a viewer ends the wait and the shim, exit 128+signal.
func TestInterruptWhileWaitingForViewer(t *testing.T) {
	requireBPF(t)
	mt := need(t, "bin/memtrace")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			for round := 0; round < faultRounds()/2; round++ {
				tag := fmt.Sprintf("memtrace-wait-%d-%d-%d", sig, os.Getpid(), round)
				cmd := command(mt, "--port", strconv.Itoa(freePort(t)), "--", "/bin/true", tag)
				se := &lockedBuffer{}
				cmd.Stderr = se
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				if err := waitFor(se, "waiting for a viewer", 20*time.Second); err != nil {
					_ = cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("round %d: %v (stderr %q)", round, err, se.String())
				}
				_ = cmd.Process.Signal(sig)
				err := runWait(cmd, 10*time.Second)
				ee, ok := err.(*exec.ExitError)
				if !ok {
					t.Fatalf("round %d: after %v: %v (stderr %q)", round, sig, err, se.String())
				}
				if ee.ExitCode() != 128+int(sig) {
					t.Errorf("round %d: exit %d after %v, want %d (stderr %q)", round, ee.ExitCode(), sig, 128+int(sig), se.String())
				}
				waitNoneTagged(t, tag, 5*time.Second)
			}
		})
	}
}

func waitFor(b *lockedBuffer, want string, limit time.Duration) error {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(b.String(), want) {
			return nil
		}
	}
	return fmt.Errorf("no %q within %v", want, limit)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// linkFDs counts pid's open BPF links.
func linkFDs(pid int) int {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == "anon_inode:bpf_link" {
			n++
		}
	}
	return n
}

// TestFollowReleasesExitedChildren: with --follow, the links of a child go
// when it exits, so 100 short-lived children do not pile up 200 links (and
// memtrace's exit does not wait for them all).
func TestFollowReleasesExitedChildren(t *testing.T) {
	requireBPF(t)
	mt := need(t, "bin/memtrace")
	forker := need(t, "tests/progs/build/forker")
	dir := t.TempDir()
	ref := referenceOutput(t, filepath.Join(dir, "ref"), forker, filepath.Join(dir, "ref"), "100", "5")
	out, log := filepath.Join(dir, "out"), filepath.Join(dir, "log")
	// 100 children, one every 5 ms, each gone at once; then the parent
	// lingers 6 s with all of them exited.
	// Without stacks: with them each child also has its own dlopen hook,
	// whose uprobe the kernel unregisters at its own pace (about 30 a
	// second here while the parent forks), so a child's links outlive it
	// by seconds though they are released (docs/holds.md).
	cmd := command(mt, "--stack-depth", "0", "--follow", "-o", log, "--", forker, out, "100", "5", "0", "6000")
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitForFile(out+".reaped", 60*time.Second); err != nil {
		_ = cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	// Every child is gone: memtrace's links go down to the parent's
	// while it lingers (closing each waits a grace period, so not at
	// once, and later on a loaded machine).
	links := linkFDs(cmd.Process.Pid)
	for end := time.Now().Add(5 * time.Second); links > 12 && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		links = linkFDs(cmd.Process.Pid)
	}
	if err := runWait(cmd, 60*time.Second); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, se.String())
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	bpftest.RequireModeBPF(t, data)
	if got, _ := os.ReadFile(out); string(got) != ref {
		t.Errorf("result %q, untraced %q", got, ref)
	}
	if n := bytes.Count(data, []byte("proc event=fork")); n != 100 {
		t.Errorf("%d fork lines, want 100", n)
	}
	// The parent's own links (libc) and a few children still closing.
	if links > 12 {
		t.Errorf("memtrace holds %d BPF links with every child gone, want the parent's few", links)
	}
}

// TestFollowOutOfDescriptorsSaysUntraced: with too few file descriptors for
// a link per child, a child memtrace cannot probe is named in the log
// (proc event=untraced) and runs on unharmed; none is silently missing.
func TestFollowOutOfDescriptorsSaysUntraced(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: exhausts memtrace's descriptors over seconds (make test runs it)")
	}
	requireBPF(t)
	mt := need(t, "bin/memtrace")
	forker := need(t, "tests/progs/build/forker")
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Fatalf("prlimit (util-linux) is missing: run make deps")
	}
	// Five rounds: a SIGCONT lost to the race between a resume and the
	// child's own stop (waitStopped cannot read /proc out of
	// descriptors) left a child stopped and its parent waiting for it,
	// in about half the runs before holds were resumed key first.
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) { outOfDescriptorsRound(t, mt, forker) })
	}
}

func outOfDescriptorsRound(t *testing.T, mt, forker string) {
	dir := t.TempDir()
	ref := referenceOutput(t, filepath.Join(dir, "ref"), forker, filepath.Join(dir, "ref"), "150", "2", "1500")
	out, log := filepath.Join(dir, "out"), filepath.Join(dir, "log")
	// 150 children alive together, 1.5 s each; 200 descriptors cannot
	// hold two links for each.
	// Without stacks: the descriptors a child takes are then its probes
	// alone (with stacks its dlopen hook is one more).
	cmd := command("prlimit", "--nofile=200:200", mt, "--stack-depth", "0", "--follow", "-o", log, "--", forker, out, "150", "2", "1500")
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := runCmd(t, cmd, 30*time.Second); err != nil {
		var stopped []string
		for _, p := range descendants(0) {
			if f := strings.Fields(p.line); len(f) > 1 && f[1] == "T" && strings.Contains(p.line, forker) {
				stopped = append(stopped, p.line)
			}
		}
		t.Fatalf("memtrace: %v (processes left stopped: %v)\n%s", err, stopped, se.String())
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	bpftest.RequireModeBPF(t, data)
	if got, _ := os.ReadFile(out); string(got) != ref {
		t.Errorf("result %q, untraced %q", got, ref)
	}
	pl, err := parseLog(log)
	if err != nil {
		t.Fatal(err)
	}
	untraced := map[int64]bool{}
	for _, ln := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(ln, "[memtrace] proc event=untraced pid="); ok {
			pid, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			untraced[pid] = true
		}
	}
	traced := 0
	for pid := range pl.forks {
		switch {
		case untraced[pid]:
			if n := len(pl.byTID[pid]); n > 0 {
				t.Errorf("child %d is called untraced but has %d events", pid, n)
			}
		case len(pl.byTID[pid]) > 0:
			traced++
		default:
			t.Errorf("child %d was forked, is not called untraced, and has no event", pid)
		}
	}
	if len(pl.forks) != 150 {
		t.Errorf("%d forks in the log, want 150", len(pl.forks))
	}
	if len(untraced) == 0 {
		t.Errorf("no child was untraced with 200 descriptors for 150 live children: the test did not test the limit")
	}
	t.Logf("%d children traced, %d untraced", traced, len(untraced))
	rep, err := command(mt, "report", log).CombinedOutput()
	if err != nil {
		t.Fatalf("memtrace report: %v\n%s", err, rep)
	}
	if want := fmt.Sprintf("%d processes not traced", len(untraced)); len(untraced) > 0 && !bytes.Contains(rep, []byte(want)) {
		t.Errorf("the report does not say %q:\n%s", want, rep)
	}
}

func waitForFile(path string, limit time.Duration) error {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s did not appear within %v", path, limit)
}
