package tests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/internal/heapprof/heapproftest"
	"github.com/memtrace/memtrace/internal/procfs"
)

// The fleet selectors (--comm, docs/fleet.md) against tests/progs/fleet,
// copied under names of this test's own so that no other test's (or
// helper's) processes match: each copy's comm is its file name.

// fleetKept is what fleet keeps from fleet_keep (FLEET_N × FLEET_SIZE).
const fleetKept = 40 * 4096

// fleetProc is one running copy of fleet, waiting on its stdin.
type fleetProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
}

// fleetCopy copies fleet to dir/name: a program whose comm is name.
func fleetCopy(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(need(t, "tests/progs/build/fleet"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// startFleet starts prog with args and waits for its "ready".
func startFleet(t *testing.T, prog string, args ...string) *fleetProc {
	t.Helper()
	return startFleetAs(t, nil, prog, args...)
}

// startFleetAs is startFleet with attr (another user, its own session).
func startFleetAs(t *testing.T, attr *syscall.SysProcAttr, prog string, args ...string) *fleetProc {
	t.Helper()
	f := &fleetProc{cmd: command(prog, args...), done: make(chan error, 1)}
	f.cmd.SysProcAttr = attr
	var err error
	if f.stdin, err = f.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { f.done <- f.cmd.Wait() }()
	t.Cleanup(f.stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("%s: no ready line (%q, %v)", prog, line, err)
	}
	return f
}

// stop ends the program (EOF on its stdin) and waits for it.
func (f *fleetProc) stop() {
	if f.stdin == nil {
		return
	}
	f.stdin.Close()
	f.stdin = nil
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		f.cmd.Process.Kill()
		<-f.done
	}
}

func (f *fleetProc) pid() int { return f.cmd.Process.Pid }

// startSelecting starts memtrace with args (a selector run, which never
// ends by itself) and waits until it serves; the cleanup sends it SIGTERM
// and requires it to end with status 0.
func startSelecting(t *testing.T, bin string, args ...string) *liveRun {
	t.Helper()
	return startSelectingVia(t, nil, bin, args...)
}

// startSelectingVia is startSelecting of a memtrace that bin starts (a
// namespace's nsenter), which memtrace returns the pid of.
func startSelectingVia(t *testing.T, memtrace func(cmd *exec.Cmd) int, bin string, args ...string) *liveRun {
	t.Helper()
	r := &liveRun{cmd: command(bin, args...), stderr: &lockedBuffer{}, done: make(chan error, 1)}
	r.cmd.Stderr = r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		if memtrace == nil {
			r.cmd.Process.Signal(syscall.SIGTERM)
		} else {
			syscall.Kill(memtrace(r.cmd), syscall.SIGTERM)
		}
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("memtrace ended with %v after SIGTERM:\n%s", err, r.stderr)
			}
		case <-time.After(20 * time.Second):
			r.cmd.Process.Kill()
			<-r.done
			t.Errorf("memtrace did not end within 20 s of SIGTERM:\n%s", r.stderr)
		}
	})
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		// It serves before it traces: memtrace_traced_since_seconds
		// says the kernel side's exec filter is on.
		if m := servingRE.FindStringSubmatch(r.stderr.String()); m != nil {
			r.addr = m[1]
			if metric(fetchMetrics(t, r.addr), "memtrace_traced_since_seconds", 0) > 0 {
				return r
			}
		}
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("memtrace ended before tracing: %v\n%s", err, r.stderr)
		default:
		}
	}
	t.Fatalf("memtrace did not trace within 30 s:\n%s", r.stderr)
	return nil
}

// waitMetrics polls /metrics until ok holds of it (no timing is asserted:
// the bound only keeps a broken run from hanging; the speed is
// scripts/bench-fleet.sh's).
func waitMetrics(t *testing.T, r *liveRun, what string, ok func(pids map[int]float64) bool) map[int]float64 {
	t.Helper()
	var pids map[int]float64
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		pids = liveBytesByPID(t, r)
		if ok(pids) {
			return pids
		}
	}
	t.Fatalf("/metrics: %s: never; memtrace_live_bytes by pid: %v\n%s", what, pids, r.stderr)
	return nil
}

// liveBytesByPID is memtrace_live_bytes of each process in /metrics.
func liveBytesByPID(t *testing.T, r *liveRun) map[int]float64 {
	t.Helper()
	out := map[int]float64{}
	f := fetchMetrics(t, r.addr)["memtrace_live_bytes"]
	if f == nil {
		return out
	}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == "pid" {
				n, _ := strconv.Atoi(l.GetValue())
				out[n] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// keptByPID is the in-use bytes of the stacks through fleet_keep in p, by
// its pid label.
func keptByPID(p *profile.Profile) map[int64]int64 {
	out := map[int64]int64{}
	for _, s := range p.Sample {
		through := false
		for _, loc := range s.Location {
			for _, ln := range loc.Line {
				if ln.Function != nil && ln.Function.Name == "fleet_keep" {
					through = true
				}
			}
		}
		if pid := heapproftest.PID(s); through && pid != 0 {
			out[pid] += s.Value[3]
		}
	}
	return out
}

// TestFleetComm: memtrace --comm NAME with one NAME process running before
// it and four started after it: each is in /metrics with its pid label and
// its exact heap (every event, no --sample), one that exits leaves
// /metrics, and a process of another name beside them (the same program
// file's bytes, the same libc) is not traced.
func TestFleetComm(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	comm := fmt.Sprintf("mtfl%d", os.Getpid()%1000000)
	prog := fleetCopy(t, dir, comm)
	other := fleetCopy(t, dir, fmt.Sprintf("mtfo%d", os.Getpid()%1000000))

	before := startFleet(t, prog)
	r := startSelecting(t, need(t, "bin/memtrace"), "--comm", comm, "--stack-depth", "8", "-o", "none", "--http", "127.0.0.1:0")
	var after []*fleetProc
	for range 4 {
		after = append(after, startFleet(t, prog))
	}
	untraced := startFleet(t, other)
	all := append([]*fleetProc{before}, after...)
	// The one running before memtrace is attached to, after its
	// allocations: in /metrics with none of them; those started after
	// are traced from their exec, every block.
	waitMetrics(t, r, "every "+comm+" process, those started after memtrace holding their fleet_keep blocks", func(pids map[int]float64) bool {
		if _, ok := pids[before.pid()]; !ok {
			return false
		}
		for _, f := range after {
			if pids[f.pid()] < fleetKept {
				return false
			}
		}
		return true
	})

	p := fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap")
	bpftest.RequireProfileModeBPF(t, p)
	kept := keptByPID(p)
	if kept[int64(before.pid())] != 0 {
		t.Errorf("process %d, attached after it allocated: fleet_keep's in-use bytes %d, want 0", before.pid(), kept[int64(before.pid())])
	}
	for _, f := range after {
		if kept[int64(f.pid())] != fleetKept {
			t.Errorf("process %d: fleet_keep's in-use bytes in the profile %d, want %d (every block: traced from its exec)",
				f.pid(), kept[int64(f.pid())], fleetKept)
		}
	}
	for _, s := range p.Sample {
		if heapproftest.PID(s) == int64(after[0].pid()) {
			if len(s.Label["cgroup"]) != 1 || !strings.HasPrefix(s.Label["cgroup"][0], "/") {
				t.Errorf("sample of process %d: cgroup label %q, want its cgroup v2 path", after[0].pid(), s.Label["cgroup"])
			}
			break
		}
	}
	if _, ok := liveBytesByPID(t, r)[untraced.pid()]; ok {
		t.Errorf("process %d (comm %s) is in /metrics: only %s processes are to be traced", untraced.pid(), filepath.Base(other), comm)
	}
	if _, ok := kept[int64(untraced.pid())]; ok {
		t.Errorf("process %d (comm %s) is in the profile", untraced.pid(), filepath.Base(other))
	}
	fams := fetchMetrics(t, r.addr)
	if got := metric(fams, "memtrace_processes_dropped_total", 0); got != 0 {
		t.Errorf("memtrace_processes_dropped_total %v, want 0", got)
	}

	gone := after[1]
	gone.stop()
	waitMetrics(t, r, fmt.Sprintf("process %d gone after its exit", gone.pid()), func(pids map[int]float64) bool {
		_, ok := pids[gone.pid()]
		return !ok
	})
	if got := metric(fetchMetrics(t, r.addr), "memtrace_traced_processes", 0); got != float64(len(all)-1) {
		t.Errorf("memtrace_traced_processes %v after one exit, want %d", got, len(all)-1)
	}
}

// TestFleetMaxProcs: --max-procs 2 with three NAME processes started
// after memtrace: two are traced, the third is let go untraced and counted
// in memtrace_processes_dropped_total, and runs on (not held).
func TestFleetMaxProcs(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	comm := fmt.Sprintf("mtfm%d", os.Getpid()%1000000)
	prog := fleetCopy(t, dir, comm)
	r := startSelecting(t, need(t, "bin/memtrace"), "--comm", comm, "--max-procs", "2", "--sample", "64K", "-o", "none", "--http", "127.0.0.1:0")
	var fs []*fleetProc
	for range 3 {
		// startFleet waits for each one's ready line: a process held
		// for ever would fail here.
		fs = append(fs, startFleet(t, prog))
	}
	pids := waitMetrics(t, r, "two processes traced", func(pids map[int]float64) bool { return len(pids) == 2 })
	if _, ok := pids[fs[2].pid()]; ok {
		t.Errorf("the third process %d is traced past --max-procs 2: %v", fs[2].pid(), pids)
	}
	if got := metric(fetchMetrics(t, r.addr), "memtrace_processes_dropped_total", 0); got != 1 {
		t.Errorf("memtrace_processes_dropped_total %v, want 1", got)
	}
}

// TestFleetRefusals: the selectors' bad inputs and the outputs they
// refuse are one line and exit 2, before anything is traced.
func TestFleetRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--comm", "x"}, "write profiles, not a log"},
		{[]string{"--comm", "x", "-o", "x.log"}, "write profiles, not a log"},
		{[]string{"--comm", "x", "-o", "x.pb.gz"}, "write profiles, not a log"},
		{[]string{"--comm", "x", "-o", "none", "--http", "0", "-p", "1"}, "give one of -p PID"},
		{[]string{"--all", "--comm", "x", "-o", "none", "--http", "0"}, "--all selects every process already"},
		{[]string{"--comm", "a_name_of_16_byt", "-o", "none", "--http", "0"}, `give --comm "a_name_of_16_by"`},
		{[]string{"--comm", "x", "--max-procs", "0", "-o", "none", "--http", "0"}, "bad --max-procs 0"},
		{[]string{"--comm", "x", "--preload", "-o", "none", "--http", "0"}, "need eBPF"},
	} {
		cmd := command(need(t, "bin/memtrace"), c.args...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) || strings.Count(string(out), "\n") != 1 {
			t.Errorf("memtrace %s: %v, %q; want exit 2 and one line with %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
}

// daemonSetCaps is the capability set of the DaemonSet of docs/fleet.md
// ("Capabilities"), as setpriv names them: memtrace runs as uid 0 with
// these alone, as a container granted them (capabilities: drop ALL, add
// these) does.
const daemonSetCaps = "+bpf,+perfmon,+sys_ptrace,+kill"

// TestFleetCapabilities: the DaemonSet's invocation without a container
// engine: memtrace with exactly daemonSetCaps (setpriv's bounding set; no
// CAP_SYS_ADMIN, no CAP_DAC_OVERRIDE), --comm, --stack-unwind fp, serving
// --http; a NAME process started after it as another user (nobody) in a
// session of its own, as a service is, runs (it is resumed after its exec)
// and `go tool pprof -raw` reads its fleet_keep stack, with its pid, from
// the endpoint. Without CAP_KILL memtrace refuses in one line: it could
// not resume that process.
func TestFleetCapabilities(t *testing.T) {
	requireBPF(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv (util-linux) here")
	}
	dir, err := os.MkdirTemp("", "memtrace-fleet-caps")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// nobody must reach and run the copy.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	comm := fmt.Sprintf("mtfc%d", os.Getpid()%1000000)
	prog := fleetCopy(t, dir, comm)
	bin := need(t, "bin/memtrace")

	out, err := command(setpriv, "--bounding-set=-all,+bpf,+perfmon,+sys_ptrace", "--inh-caps=-all", bin,
		"--comm", comm, "-o", "none", "--http", "127.0.0.1:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "needs CAP_KILL") {
		t.Errorf("memtrace without CAP_KILL: %v, %q; want a refusal naming CAP_KILL", err, out)
	}

	r := startSelecting(t, setpriv, "--bounding-set=-all,"+daemonSetCaps, "--inh-caps=-all", bin,
		"--comm", comm, "--sample", "4K", "--stack-depth", "8", "--stack-unwind", "fp", "-o", "none", "--http", "127.0.0.1:0")
	f := startFleetAs(t, &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}, prog)
	waitMetrics(t, r, fmt.Sprintf("process %d of nobody traced", f.pid()), func(pids map[int]float64) bool { return pids[f.pid()] > 0 })

	raw, err := command(goTool, "tool", "pprof", "-raw", "http://"+r.addr+"/debug/pprof/heap").CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -raw: %v\n%s", err, raw)
	}
	if !strings.Contains(string(raw), "fleet_keep") || !strings.Contains(string(raw), fmt.Sprintf("pid:[%d]", f.pid())) || !strings.Contains(string(raw), "mode=bpf") {
		t.Errorf("go tool pprof -raw of the endpoint: want fleet_keep, pid:[%d] and mode=bpf:\n%s", f.pid(), raw)
	}
}

// TestFleetCgroup: --cgroup PATH with a cgroup v2 directory of the test's
// own: a process started into it (clone3 into the cgroup) after memtrace
// is traced, with its cgroup label; one of the same name outside it is
// not.
func TestFleetCgroup(t *testing.T) {
	requireBPF(t)
	root := procfs.CgroupFS()
	if root == "" {
		t.Skip("no cgroup v2 hierarchy mounted here")
	}
	rel := fmt.Sprintf("/memtrace-fleet-%d", os.Getpid())
	if err := os.Mkdir(root+rel, 0o755); err != nil {
		t.Skipf("cannot make a cgroup here: %v", err)
	}
	t.Cleanup(func() {
		// Its processes have exited (their cleanups ran first).
		for i := 0; i < 50 && os.Remove(root+rel) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	cg, err := os.Open(root + rel)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	prog := fleetCopy(t, t.TempDir(), fmt.Sprintf("mtfg%d", os.Getpid()%1000000))
	r := startSelecting(t, need(t, "bin/memtrace"), "--cgroup", rel, "--stack-depth", "8", "-o", "none", "--http", "127.0.0.1:0")
	in := startFleetAs(t, &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}, prog)
	out := startFleet(t, prog)
	waitMetrics(t, r, fmt.Sprintf("process %d of %s traced", in.pid(), rel), func(pids map[int]float64) bool { return pids[in.pid()] >= fleetKept })
	if _, ok := liveBytesByPID(t, r)[out.pid()]; ok {
		t.Errorf("process %d, outside %s, is traced", out.pid(), rel)
	}
	p := fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap")
	for _, s := range p.Sample {
		if heapproftest.PID(s) == int64(in.pid()) && (len(s.Label["cgroup"]) != 1 || s.Label["cgroup"][0] != rel) {
			t.Errorf("process %d's sample: cgroup label %q, want %s", in.pid(), s.Label["cgroup"], rel)
		}
	}
}

// TestFleetKilledHoldsNone: SIGKILL of memtrace while NAME processes exec
// one after another (each held at its exec until probed) leaves none of
// them stopped: every one prints its ready line, and none is in state T
// once memtrace is gone (docs/holds.md: the kernel's release at exit).
func TestFleetKilledHoldsNone(t *testing.T) {
	requireBPF(t)
	comm := fmt.Sprintf("mtfk%d", os.Getpid()%1000000)
	prog := fleetCopy(t, t.TempDir(), comm)
	r := startSelecting(t, need(t, "bin/memtrace"), "--comm", comm, "--stack-depth", "8", "-o", "none", "--http", "127.0.0.1:0")
	const n = 20
	type started struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		ready chan error
	}
	var ps []started
	for i := range n {
		if i == n/2 {
			r.cmd.Process.Kill()
		}
		cmd := command(prog)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s := started{cmd, stdin, make(chan error, 1)}
		go func() {
			line, err := bufio.NewReader(out).ReadString('\n')
			if err == nil && strings.TrimSpace(line) != "ready" {
				err = fmt.Errorf("got %q", line)
			}
			s.ready <- err
		}()
		ps = append(ps, s)
	}
	t.Cleanup(func() {
		for _, s := range ps {
			s.stdin.Close()
			syscall.Kill(s.cmd.Process.Pid, syscall.SIGCONT)
			s.cmd.Wait()
		}
	})
	<-r.done
	r.done <- nil // for the cleanup, which sends a SIGTERM to nothing
	for i, s := range ps {
		select {
		case err := <-s.ready:
			if err != nil {
				t.Errorf("process %d (%d of %d): no ready line: %v", s.cmd.Process.Pid, i+1, n, err)
			}
		case <-time.After(10 * time.Second):
			st, _ := procfs.ReadStat(s.cmd.Process.Pid)
			t.Errorf("process %d (%d of %d) not ready 10 s after memtrace's SIGKILL (state %c): left held", s.cmd.Process.Pid, i+1, n, st.State)
		}
	}
}

// TestFleetMaxSamples: --max-samples bounds the kernel side's sampled
// blocks in all: at --sample 1 a fleet process's 40 kept blocks do not fit
// in 10, what did not is counted in memtrace_sample_untracked_total, and
// the process's profile holds at most 10.
func TestFleetMaxSamples(t *testing.T) {
	requireBPF(t)
	comm := fmt.Sprintf("mtfs%d", os.Getpid()%1000000)
	prog := fleetCopy(t, t.TempDir(), comm)
	r := startSelecting(t, need(t, "bin/memtrace"), "--comm", comm, "--sample", "1", "--max-samples", "10", "--stack-depth", "8", "-o", "none", "--http", "127.0.0.1:0")
	f := startFleet(t, prog)
	waitMetrics(t, r, fmt.Sprintf("process %d traced", f.pid()), func(pids map[int]float64) bool { return pids[f.pid()] > 0 })
	fams := fetchMetrics(t, r.addr)
	if got := metric(fams, "memtrace_sample_untracked_total", 0); got < 30 {
		t.Errorf("memtrace_sample_untracked_total %v, want at least 30 of the 40 kept blocks", got)
	}
	if got := metric(fams, "memtrace_sampled_live_blocks", f.pid()); got > 10 {
		t.Errorf("memtrace_sampled_live_blocks %v, want at most --max-samples 10", got)
	}
}
