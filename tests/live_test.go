package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/internal/heapprof/heapproftest"
	"github.com/memtrace/memtrace/internal/ops"
	"github.com/memtrace/memtrace/live"
)

// The live endpoint (--http, --profile-dir, -o none) against liveleak, a
// program that records what it leaked (truth.h) and waits on stdin.

const goTool = "/usr/local/go/bin/go"

type liveRun struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *lockedBuffer
	addr   string
	done   chan error
}

var servingRE = regexp.MustCompile(`memtrace: serving http://([^/]+)/`)

// startLive starts memtrace with args and waits until it serves.
func startLive(t *testing.T, env []string, args ...string) *liveRun {
	t.Helper()
	return startLiveWithin(t, commandLimit, env, args...)
}

// startLiveWithin is startLive with memtrace's own limit (a soak's).
func startLiveWithin(t *testing.T, limit time.Duration, env []string, args ...string) *liveRun {
	t.Helper()
	r := &liveRun{cmd: commandWithin(limit, need(t, "bin/memtrace"), args...), stderr: &lockedBuffer{}, done: make(chan error, 1)}
	r.cmd.Env = append(os.Environ(), env...)
	r.cmd.Stderr = r.stderr
	var err error
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.stdout = bufio.NewReader(out)
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		r.stdin.Close()
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			r.cmd.Process.Kill()
			<-r.done
			t.Errorf("memtrace did not end within 20 s of its program's stdin closing")
		}
	})
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if m := servingRE.FindStringSubmatch(r.stderr.String()); m != nil {
			r.addr = m[1]
			return r
		}
		select {
		case err := <-r.done:
			r.done <- err // for the cleanup's wait
			t.Fatalf("memtrace ended before serving: %v\n%s", err, r.stderr)
		default:
		}
	}
	t.Fatalf("memtrace did not serve within 30 s:\n%s", r.stderr)
	return nil
}

// waitOut waits for the line want on the program's stdout.
func (r *liveRun) waitOut(t *testing.T, want string) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		for {
			s, err := r.stdout.ReadString('\n')
			if strings.TrimSpace(s) == want {
				got <- nil
				return
			}
			if err != nil {
				got <- err
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("no %q from the program: %v\n%s", want, err, r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no %q from the program within 30 s\n%s", want, r.stderr)
	}
}

func httpGet(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v %s", url, resp.StatusCode, err, b)
	}
	return b
}

// fetchProfile fetches a profile and holds it to the rules Parca and
// Pyroscope read it by (a snapshot, or ?seconds=N's delta).
func fetchProfile(t *testing.T, url string) *profile.Profile {
	t.Helper()
	p, err := profile.Parse(bytes.NewReader(httpGet(t, url)))
	if err != nil {
		t.Fatal(err)
	}
	want := heapproftest.Want{PID: true}
	if _, q, ok := strings.Cut(url, "?"); ok {
		v, _ := neturl.ParseQuery(q)
		if n, _ := strconv.Atoi(v.Get("seconds")); n > 0 {
			want.Delta = time.Duration(n) * time.Second
		}
	}
	if bad := heapproftest.Check(p, want); len(bad) > 0 {
		t.Fatalf("%s:\n%s", url, strings.Join(bad, "\n"))
	}
	return p
}

func fetchMetrics(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(httpGet(t, "http://"+addr+"/metrics")))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// metric is the value of name (for pid, "" for one without labels); -1
// when absent.
func metric(fams map[string]*dto.MetricFamily, name string, pid int) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	for _, m := range f.Metric {
		ok := pid == 0
		for _, l := range m.Label {
			if l.GetName() == "pid" && l.GetValue() == strconv.Itoa(pid) {
				ok = true
			}
		}
		if ok {
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	return -1
}

// byFunction is the inuse_space (and inuse_objects) of each innermost
// function of pid's samples.
func byFunction(p *profile.Profile, pid int) (bytes, objects map[string]int64, total int64) {
	bytes, objects = map[string]int64{}, map[string]int64{}
	for _, s := range p.Sample {
		if pid != 0 && heapproftest.PID(s) != int64(pid) {
			continue
		}
		fn := "?"
		if len(s.Location) > 0 && len(s.Location[0].Line) > 0 {
			fn = s.Location[0].Line[0].Function.Name
		}
		bytes[fn] += s.Value[3]
		objects[fn] += s.Value[2]
		total += s.Value[3]
	}
	return bytes, objects, total
}

// truthLive is what the program's record says is live, by block size.
func truthLive(t *testing.T, path string) map[uint64]int64 {
	t.Helper()
	recs, err := readTruth(path)
	if err != nil {
		t.Fatal(err)
	}
	live := map[uint64]uint64{}
	for _, r := range recs {
		switch r.op {
		case "malloc":
			live[r.ptr] = r.size
		case "free":
			delete(live, r.ptr)
		}
	}
	out := map[uint64]int64{}
	for _, size := range live {
		out[size] += int64(size)
	}
	return out
}

// logLive is the live bytes a log says pid holds: its allocations' sizes
// minus its frees' (the agent's table gives them).
func logLive(t *testing.T, path string) (live int64, allocs int) {
	t.Helper()
	// The log grows while it is read: the agent's periodic flush may end
	// inside a line, which the next flush completes. Only the whole lines.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := parseLogFrom(path, bytes.NewReader(b[:bytes.LastIndexByte(b, '\n')+1]))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range pl.events {
		// Every op of the table (internal/ops) by its family: a list here
		// would miss the ops added after it.
		o, ok := ops.ByText(e.op)
		switch {
		case !ok:
		case o.Family == ops.Free:
			live -= int64(e.size)
		default:
			live += int64(e.size)
			allocs++
		}
	}
	return live, allocs
}

// srcLine is the line of liveleak.c holding want inside function fn.
func srcLine(t *testing.T, fn, want string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "tests/progs/liveleak.c"))
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " *"+fn+"(") {
			in = true
		}
		if in && strings.Contains(l, want) {
			return i + 1
		}
	}
	t.Fatalf("no %q in %s", want, fn)
	return 0
}

func pprofTool(t *testing.T, args ...string) string {
	t.Helper()
	cmd := command(goTool, append([]string{"tool", "pprof"}, args...)...)
	// Not a fresh HOME: go tool builds pprof into the build cache once.
	cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestLiveHeapOfLaunchedProgram: memtrace -o LOG --http -- liveleak. While
// the program waits, go tool pprof's top entry is leak_here with the
// bytes the program says it leaked; the profile's live bytes equal the
// log's at that moment; /metrics agrees. Afterwards the log's report
// --pprof reads in go tool pprof with file:line and addresses.
func TestLiveHeapOfLaunchedProgram(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	log, truth := filepath.Join(dir, "live.log"), filepath.Join(dir, "truth")
	r := startLive(t, []string{"MEMTRACE_TRUTH=" + truth}, "-o", log, "--stack-depth", "16", "--http", "127.0.0.1:0",
		"--", need(t, "tests/progs/build/liveleak"))
	r.waitOut(t, "leaked")
	want := truthLive(t, truth)
	if want[1000] != 50000 || want[300] != 3000 || len(want) != 2 {
		t.Fatalf("the program's record: %v", want)
	}
	pid := 0
	var p *profile.Profile
	var live int64
	// The agent holds events 5 ms and flushes the log every 100 ms: wait
	// until the log and the endpoint have it all.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		p = fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap")
		for _, s := range p.Sample {
			pid = int(heapproftest.PID(s))
		}
		live, _ = logLive(t, log)
		by, _, total := byFunction(p, pid)
		if by["leak_here"] == want[1000] && total == live || time.Now().After(end) {
			break
		}
	}
	by, objs, total := byFunction(p, pid)
	if by["leak_here"] != want[1000] || objs["leak_here"] != 50 || by["keep_small"] != want[300] || objs["keep_small"] != 10 {
		t.Fatalf("by function %v %v, the program leaked %v", by, objs, want)
	}
	if total != live {
		t.Fatalf("profile's live bytes %d, the log's %d", total, live)
	}
	// ?pid= and the index agree.
	if _, _, n := byFunction(fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap?pid="+strconv.Itoa(pid)), 0); n != live {
		t.Fatalf("?pid=%d: %d live bytes, want %d", pid, n, live)
	}
	if idx := string(httpGet(t, "http://"+r.addr+"/")); !strings.Contains(idx, "/debug/pprof/heap") || !strings.Contains(idx, "/metrics") {
		t.Fatalf("index:\n%s", idx)
	}
	// go tool pprof, as a user runs it against the endpoint.
	out := pprofTool(t, "-top", "-unit=B", "http://"+r.addr+"/debug/pprof/heap")
	top := regexp.MustCompile(`(?m)^\s+(\d+)B\s+[\d.]+%\s+[\d.]+%\s+\d+B\s+[\d.]+%\s+(\S+)`).FindStringSubmatch(out)
	if top == nil || top[2] != "leak_here" || top[1] != strconv.FormatInt(want[1000], 10) || !strings.Contains(out, "Type: inuse_space") {
		t.Fatalf("go tool pprof -top: want leak_here with %d bytes on top:\n%s", want[1000], out)
	}
	fams := fetchMetrics(t, r.addr)
	_, allocs := logLive(t, log)
	for _, c := range []struct {
		name string
		pid  int
		want float64
	}{
		{"memtrace_live_bytes", pid, float64(live)}, {"memtrace_live_blocks", pid, 60}, {"memtrace_allocations_total", pid, float64(allocs)},
		{"memtrace_lost_records_total", 0, 0}, {"memtrace_traced_processes", 0, 1},
	} {
		if got := metric(fams, c.name, c.pid); got != c.want {
			t.Errorf("%s{pid=%d} = %v, want %v", c.name, c.pid, got, c.want)
		}
	}
	if metric(fams, "memtrace_probes_attached", 0) < 1 || metric(fams, "memtrace_frees_total", pid) < 200 {
		t.Errorf("probes attached %v, frees %v", metric(fams, "memtrace_probes_attached", 0), metric(fams, "memtrace_frees_total", pid))
	}
	// Nothing that writes: POST is refused.
	resp, err := http.Post("http://"+r.addr+"/debug/pprof/heap", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	r.stdin.Close()
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Fatalf("memtrace: %v\n%s", err, r.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("memtrace did not end after its program")
	}
	bpfLog(t, log)

	// issue 15.5: the log's pprof export reads in go tool pprof with the
	// program's functions at file:line and real addresses.
	pf := filepath.Join(dir, "report.pb.gz")
	if out, err := command(need(t, "bin/memtrace"), "report", "--pprof", pf, log).CombinedOutput(); err != nil {
		t.Fatalf("report --pprof: %v\n%s", err, out)
	}
	line := srcLine(t, "leak_here", "malloc(n)")
	out = pprofTool(t, "-top", "-lines", "-unit=B", pf)
	if !regexp.MustCompile(`(?m)^\s+50000B\s+[\d.]+%\s+[\d.]+%\s+50000B\s+[\d.]+%\s+leak_here \S*liveleak.c:`+strconv.Itoa(line)+`$`).MatchString(out) ||
		!strings.Contains(out, "File: liveleak") {
		t.Fatalf("-top -lines: want leak_here at liveleak.c:%d with 50000B, File: liveleak:\n%s", line, out)
	}
	out = pprofTool(t, "-traces", "-unit=B", "-sample_index=inuse_space", pf)
	if !regexp.MustCompile(`(?s)50000B\s+leak_here\s+main\s`).MatchString(out) {
		t.Fatalf("-traces: want leak_here called by main with 50000B:\n%s", out)
	}
	out = pprofTool(t, "-raw", pf)
	m := regexp.MustCompile(`(?m)^\s+\d+: 0x([0-9a-f]+) M=\d+ leak_here \S*liveleak.c:` + strconv.Itoa(line) + `(:\d+)? s=\d+$`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" {
		t.Fatalf("-raw: want leak_here's location with a non-zero address at liveleak.c:%d:\n%s", line, out)
	}
	if !regexp.MustCompile(`(?m)^\s*\d+: 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ \S*liveleak [0-9a-f]{40}`).MatchString(out) {
		t.Fatalf("-raw: no mapping of liveleak with its range and build ID:\n%s", out)
	}
}

// TestLiveAttachNoLogFollowProfileDir: memtrace -p PID -o none --follow
// --http --profile-dir: no log at all, the endpoint and the periodic
// profiles show what the program leaked after the attach.
func TestLiveAttachNoLogFollowProfileDir(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	truth := filepath.Join(dir, "truth")
	prog := command(need(t, "tests/progs/build/liveleak"))
	prog.Env = append(os.Environ(), "MEMTRACE_TRUTH="+truth, "MEMTRACE_TEST_WAIT=1")
	in, _ := prog.StdinPipe()
	outp, _ := prog.StdoutPipe()
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		in.Close()
		if err := runWait(prog, 20*time.Second); err != nil {
			t.Errorf("liveleak: %v", err)
		}
	}()
	po := bufio.NewReader(outp)
	if s, _ := po.ReadString('\n'); s != "ready\n" {
		t.Fatalf("liveleak said %q", s)
	}
	profs := filepath.Join(dir, "profiles")
	r := startLive(t, nil, "-p", strconv.Itoa(prog.Process.Pid), "-o", "none", "--follow", "--stack-depth", "16",
		"--http", "127.0.0.1:0", "--profile-dir", profs, "--interval", "200ms")
	// Attached once the probes are on (and memtrace logs from then on).
	for end := time.Now().Add(20 * time.Second); metric(fetchMetrics(t, r.addr), "memtrace_probes_attached", 0) < 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no probes attached within 20 s\n%s", r.stderr)
		}
	}
	time.Sleep(300 * time.Millisecond)
	leakedAt := time.Now()
	in.Write([]byte{1})
	if s, _ := po.ReadString('\n'); s != "leaked\n" {
		t.Fatalf("liveleak said %q", s)
	}
	want := truthLive(t, truth)
	pid := prog.Process.Pid
	var by, objs map[string]int64
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		by, objs, _ = byFunction(fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap?pid="+strconv.Itoa(pid)), 0)
		if by["leak_here"] == want[1000] && by["keep_small"] == want[300] {
			break
		}
	}
	if by["leak_here"] != want[1000] || by["keep_small"] != want[300] || objs["leak_here"] != 50 {
		t.Fatalf("by function %v %v, the program leaked %v", by, objs, want)
	}
	if got := metric(fetchMetrics(t, r.addr), "memtrace_live_bytes", pid); got != float64(want[1000]+want[300]) {
		t.Fatalf("memtrace_live_bytes %v, want %d", got, want[1000]+want[300])
	}
	// A profile written after the leak, complete (renamed into place).
	var found string
	for end := time.Now().Add(10 * time.Second); found == "" && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ents, _ := os.ReadDir(profs)
		for _, e := range ents {
			if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".pb.gz") && info.ModTime().After(leakedAt.Add(500*time.Millisecond)) {
				found = filepath.Join(profs, e.Name())
			}
		}
	}
	if found == "" {
		t.Fatalf("no profile in %s after the leak\n%s", profs, r.stderr)
	}
	f, err := os.Open(found)
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(f)
	f.Close()
	if err != nil || p.CheckValid() != nil {
		t.Fatalf("%s: %v", found, err)
	}
	if b, _, _ := byFunction(p, pid); b["leak_here"] != want[1000] {
		t.Fatalf("%s: %v", found, b)
	}
	// -o none: no file named none anywhere memtrace ran.
	if _, err := os.Stat("none"); err == nil {
		t.Fatal("-o none made a file")
	}
	in.Close()
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Fatalf("memtrace: %v\n%s", err, r.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("memtrace did not end after its target")
	}
}

// TestLiveCLIErrors: bad --http values, -o none without a live output,
// a taken port: one line, non-zero exit, nothing started.
func TestLiveCLIErrors(t *testing.T) {
	mt := need(t, "bin/memtrace")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	marker := filepath.Join(t.TempDir(), "ran")
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"--http", "nonsense", "--", "/bin/true"}, "--http", 2},
		{[]string{"--http", "1.2.3.4:99999", "--", "/bin/true"}, "port", 2},
		{[]string{"-o", "none", "--", "/bin/true"}, "-o none writes no log", 2},
		{[]string{"--http", ln.Addr().String(), "--", "/bin/sh", "-c", "touch " + marker}, "choose another port", 1},
	} {
		if c.code == 1 && os.Geteuid() != 0 {
			continue
		}
		cmd := command(mt, c.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := runCmd(t, cmd, time.Minute)
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != c.code || !strings.Contains(stderr.String(), c.want) || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line with %q", c.args, code, stderr.String(), c.code, c.want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the program ran although the port was taken")
	}
}

// soakDuration is how long TestLiveSoak runs: one minute, or
// $MEMTRACE_SOAK (scripts/bench-live.sh: 10m).
func soakDuration(t *testing.T) time.Duration {
	if s := os.Getenv("MEMTRACE_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("MEMTRACE_SOAK=%q: %v", s, err)
		}
		return d
	}
	return time.Minute
}

// soakSlack is how long a soak's program is told to run: past the test's
// own last look (its stdin closing at the end ends it), since under load
// memtrace's start-up can take seconds of the program's time, and a
// program that ended first took the endpoint with it.
func soakSlack(d time.Duration) time.Duration {
	return d + time.Minute
}

func rssKB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

// soakBoundKB is how much memtrace's RSS may grow from the end of the
// first fifth of the soak to its end: a steady live set (10,000 blocks, 8
// stacks) under ~100k allocations and 100k frees a second must not grow
// the live model, the agent or the endpoint with time. What may grow for
// a while is the agent's read queue, which holds a batch of records when
// the reader falls behind for a moment (at most the 32 MiB ring's, 72
// bytes each), and Go's heap goal, twice the live heap; scripts/
// bench-live.sh runs the same for 10 minutes, where a leak of one byte
// per event would be 120 MB.
const soakBoundKB = 32 << 10

// TestLiveSoak: memtrace -o none --http over a service-like program, RSS
// of memtrace sampled from /proc, scraped as Prometheus would.
func TestLiveSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a soak of a minute or more (MEMTRACE_SOAK): make test runs it")
	}
	requireBPF(t)
	d := soakDuration(t)
	r := startLiveWithin(t, soakSlack(d)+time.Minute, nil, "-o", "none", "--stack-depth", "8", "--http", "127.0.0.1:0",
		"--", need(t, "tests/progs/build/liveleak"), "soak", strconv.Itoa(int(soakSlack(d).Seconds())))
	start := time.Now()
	var samples []int64
	var times []time.Duration
	lastScrape := time.Time{}
	// The allocation count at each scrape: it must grow at every one,
	// whatever the machine's speed.
	var scraped []float64
	for time.Since(start) < d-2*time.Second {
		samples = append(samples, rssKB(r.cmd.Process.Pid))
		times = append(times, time.Since(start))
		if len(samples)%60 == 0 {
			t.Logf("soak at %v: memtrace RSS %d kB", times[len(times)-1].Round(time.Second), samples[len(samples)-1])
		}
		if time.Since(lastScrape) > 5*time.Second {
			fams := fetchMetrics(t, r.addr)
			if lost := metric(fams, "memtrace_lost_records_total", 0); lost != 0 {
				t.Logf("lost records: %v", lost)
			}
			var n float64
			for _, m := range fams["memtrace_allocations_total"].GetMetric() {
				n += m.Counter.GetValue()
			}
			scraped = append(scraped, n)
			fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap")
			lastScrape = time.Now()
		}
		time.Sleep(time.Second)
	}
	bpftest.RequireProfileModeBPF(t, fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap"))
	fams := fetchMetrics(t, r.addr)
	var blocks, allocs, lost float64
	lost = metric(fams, "memtrace_lost_records_total", 0)
	for _, m := range fams["memtrace_live_blocks"].GetMetric() {
		blocks += m.Gauge.GetValue()
	}
	for _, m := range fams["memtrace_allocations_total"].GetMetric() {
		allocs += m.Counter.GetValue()
	}
	warm := len(samples) / 5
	base, peak := samples[warm], int64(0)
	for _, s := range samples[warm:] {
		peak = max(peak, s)
	}
	t.Logf("soak %v: %.0f allocations (%.0f/s), %.0f live blocks, %.0f records lost; memtrace RSS %d kB at %v, at most %d kB after, %d kB at the end (bound: +%d kB)",
		d, allocs, allocs/time.Since(start).Seconds(), blocks, lost, base, times[warm].Round(time.Second), peak, samples[len(samples)-1], soakBoundKB)
	// Not a rate (a loaded machine's is anything): the tracer kept
	// counting all along, and the live set turned over many times, or
	// the RSS bound says nothing.
	for i := 1; i < len(scraped); i++ {
		if scraped[i] <= scraped[i-1] {
			t.Errorf("no allocation traced between two scrapes 5s apart (%.0f, then %.0f): the tracer stopped", scraped[i-1], scraped[i])
		}
	}
	if allocs < 20*blocks || allocs < 200_000 {
		t.Errorf("only %.0f allocations traced in %v over %.0f live blocks: the soak did not turn the live set over", allocs, time.Since(start), blocks)
	}
	if stacks := metric(fams, "memtrace_stacks", 0); stacks < 8 || stacks > 64 {
		t.Errorf("%v stacks in the model: the program has 8 call paths", stacks)
	}
	if blocks < 9000 || blocks > 11000 {
		t.Errorf("live blocks %v, the program keeps 10000", blocks)
	}
	if peak-base > soakBoundKB {
		t.Errorf("memtrace's RSS grew from %d kB to %d kB (bound +%d kB): %v", base, peak, soakBoundKB, samples)
	}
}

// TestSudoProfileDirOwnedByUser: under sudo, --profile-dir and its files
// are the invoking user's; a directory that user cannot write is one line,
// a non-zero exit, and the program never runs.
func TestSudoProfileDirOwnedByUser(t *testing.T) {
	requireBPF(t)
	base := sudoDir(t, 0o777, 0)
	profs := filepath.Join(base, "profiles")
	code, _, se := memtraceRun(t, sudoEnv, "-o", "none", "--profile-dir", profs, "--interval", "100ms", "--", "/bin/sh", "-c", "sleep 1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	files, _ := filepath.Glob(filepath.Join(profs, "heap-*.pb.gz"))
	if len(files) < 3 {
		t.Fatalf("%s holds %v; want a profile every 100ms of a 1 s run", profs, files)
	}
	for _, p := range append(files, profs) {
		if uid, gid := uidOf(t, p); uid != 65534 || gid != 65534 {
			t.Errorf("%s owned by %d:%d, want %s:%s", p, uid, gid, nobody, nobody)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(profs, ".*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	rootOnly := sudoDir(t, 0o700, 0)
	marker := filepath.Join(base, "ran")
	code, _, se = memtraceRun(t, sudoEnv, "-o", "none", "--profile-dir", filepath.Join(rootOnly, "p"), "--", "/bin/sh", "-c", "touch "+marker)
	if code == 0 || !strings.Contains(se, "--profile-dir") || strings.Count(strings.TrimSpace(se), "\n") != 0 {
		t.Fatalf("unwritable --profile-dir: exit %d, stderr %q", code, se)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the program ran although --profile-dir could not be made")
	}
}

// TestLiveInterruptWithOpenWindow: Ctrl-C while a scraper holds a delta
// window open: memtrace ends at once (130), its program runs on, not
// stopped. Five rounds: a hang would be intermittent.
func TestLiveInterruptWithOpenWindow(t *testing.T) {
	requireBPF(t)
	for round := range rounds(5, 1) {
		r := startLive(t, nil, "-o", "none", "--http", "127.0.0.1:0", "--", need(t, "tests/progs/build/liveleak"))
		r.waitOut(t, "leaked")
		pid := 0
		for end := time.Now().Add(10 * time.Second); pid == 0 && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			for _, s := range fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap").Sample {
				pid = int(heapproftest.PID(s))
			}
		}
		if pid == 0 {
			t.Fatalf("round %d: no process in the profile", round)
		}
		window := make(chan error, 1)
		go func() {
			resp, err := http.Get("http://" + r.addr + "/debug/pprof/heap?seconds=600")
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			window <- err
		}()
		time.Sleep(200 * time.Millisecond)
		start := time.Now()
		r.cmd.Process.Signal(os.Interrupt)
		// memtrace's own end (a zombie until reaped): Wait also waits
		// for the program, which shares memtrace's stderr.
		for st := procStateOf(r.cmd.Process.Pid); st != "Z" && st != ""; st = procStateOf(r.cmd.Process.Pid) {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("round %d: memtrace did not end within 10 s of Ctrl-C with a window open\n%s", round, r.stderr)
			}
			time.Sleep(10 * time.Millisecond)
		}
		select {
		case <-window:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the window's request outlived memtrace", round)
		}
		if st := procStateOf(pid); st != "S" && st != "R" {
			t.Fatalf("round %d: the program is in state %q after memtrace's end, want running", round, st)
		}
		r.stdin.Close() // the program ends on EOF
		var err error
		select {
		case err = <-r.done:
			r.done <- err
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the program did not end on EOF", round)
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
			t.Fatalf("round %d: memtrace ended with %v, want exit 130\n%s", round, err, r.stderr)
		}
	}
}

// TestLiveIdleConnectionsBounded: hundreds of connections that send
// nothing take memtrace a bounded number of file descriptors (its cap),
// never the ones the tracer needs; the endpoint answers again once they
// are gone, and the program runs on.
func TestLiveIdleConnectionsBounded(t *testing.T) {
	requireBPF(t)
	r := startLive(t, nil, "-o", "none", "--http", "127.0.0.1:0", "--", need(t, "tests/progs/build/liveleak"))
	r.waitOut(t, "leaked")
	fds := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", r.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	const opened = 400
	var conns []net.Conn
	for range opened {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	// The server has seen them all once it has refused the excess.
	most := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		most = max(most, fds()-before)
	}
	if most > live.DefaultLimits().MaxConns+8 {
		t.Fatalf("%d idle connections took memtrace %d more descriptors, want at most its cap of %d\n%s", opened, most, live.DefaultLimits().MaxConns, r.stderr)
	}
	if !strings.Contains(r.stderr.String(), "memtrace: --http: refused") {
		t.Fatalf("no line about the refused connections on stderr:\n%s", r.stderr)
	}
	for _, c := range conns {
		c.Close()
	}
	// Closed by the clients: the server's slots come back.
	var code int
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		resp, err := (&http.Client{Timeout: time.Second, Transport: &http.Transport{}}).Get("http://" + r.addr + "/metrics")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if code = resp.StatusCode; code == 200 {
			break
		}
	}
	if code != 200 {
		t.Fatalf("/metrics: status %d after the idle connections closed\n%s", code, r.stderr)
	}
}

// TestLiveExposedWarning: --http on an address other machines reach says
// so in one line on stderr; loopback says nothing of the kind.
func TestLiveExposedWarning(t *testing.T) {
	requireBPF(t)
	for addr, want := range map[string]bool{"0.0.0.0:0": true, "127.0.0.1:0": false} {
		r := startLive(t, nil, "-o", "none", "--http", addr, "--", need(t, "tests/progs/build/liveleak"))
		r.waitOut(t, "leaked")
		got := strings.Count(r.stderr.String(), "memtrace: warning: --http listens on ")
		if (got == 1) != want || got > 1 {
			t.Errorf("--http %s: %d warning lines, want %v:\n%s", addr, got, want, r.stderr)
		}
		if want && !strings.Contains(r.stderr.String(), "without authentication") {
			t.Errorf("--http %s: the warning does not say what is exposed:\n%s", addr, r.stderr)
		}
	}
}

// TestSampleSoak: issue 25's leave-on case, --sample 512K with 32-frame
// stacks into the live endpoint only, over liveleak's soak (about 100k
// allocations a second over a steady live set): no record lost, samples
// arriving at the rate, and memtrace's RSS flat after the first fifth (the
// bound of TestLiveSoak). memtrace's CPU share is logged, not asserted:
// scripts/bench-live.sh runs this for 10 minutes and reports it against
// the 5 % of one core.
func TestSampleSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a soak of a minute or more (MEMTRACE_SOAK): make test runs it")
	}
	requireBPF(t)
	d := soakDuration(t)
	r := startLiveWithin(t, soakSlack(d)+time.Minute, nil, "--sample", "512K", "--stack-depth", "32", "-o", "none", "--http", "127.0.0.1:0",
		"--", need(t, "tests/progs/build/liveleak"), "soak", strconv.Itoa(int(soakSlack(d).Seconds())))
	pid := r.cmd.Process.Pid
	start := time.Now()
	var samples []int64
	var cpuWarm, cpuEnd int64
	var tWarm, tEnd time.Duration
	for time.Since(start) < d-2*time.Second {
		samples = append(samples, rssKB(pid))
		if len(samples) == int(d.Seconds())/5 {
			cpuWarm, tWarm = cpuTicks(pid), time.Since(start)
		}
		select {
		case err := <-r.done:
			r.done <- err // for the cleanup's wait
			t.Fatalf("memtrace ended %v into the soak: %v\n%s", time.Since(start).Round(time.Second), err, r.stderr)
		default:
		}
		time.Sleep(time.Second)
	}
	cpuEnd, tEnd = cpuTicks(pid), time.Since(start)
	bpftest.RequireProfileModeBPF(t, fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap"))
	fams := fetchMetrics(t, r.addr)
	if rate := metric(fams, "memtrace_sample_rate_bytes", 0); rate != 512<<10 {
		t.Errorf("memtrace_sample_rate_bytes %v, want 524288", rate)
	}
	if lost := metric(fams, "memtrace_lost_records_total", 0); lost != 0 {
		t.Errorf("%v records lost", lost)
	}
	var allocs float64
	for _, m := range fams["memtrace_allocations_total"].GetMetric() {
		allocs += m.Counter.GetValue()
	}
	// About 27 MB a second at 512K is some 50 samples a second.
	if allocs <= 0 {
		t.Errorf("no sampled allocation in %v of 100k allocations a second", d)
	}
	warm := len(samples) / 5
	base, peak := samples[warm], int64(0)
	for _, s := range samples[warm:] {
		peak = max(peak, s)
	}
	share := -1.0
	if cpuWarm >= 0 && cpuEnd >= 0 && tEnd > tWarm {
		share = 100 * float64(cpuEnd-cpuWarm) / clockTicks / (tEnd - tWarm).Seconds()
	}
	t.Logf("sample soak %v: estimated %.0f allocations; memtrace's CPU after the first fifth %.1f %% of one core; RSS %d kB at %v, at most %d kB after, %d kB at the end (bound: +%d kB)",
		d, allocs, share, base, (time.Duration(warm) * time.Second), peak, samples[len(samples)-1], soakBoundKB)
	if peak-base > soakBoundKB {
		t.Errorf("memtrace's RSS grew from %d kB to %d kB (bound +%d kB): %v", base, peak, soakBoundKB, samples)
	}
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times (100 on
// every Linux architecture memtrace runs on).
const clockTicks = 100

// cpuTicks is a process's user plus system CPU time in clock ticks, or -1.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// Fields after the command's closing parenthesis: state is 3, utime 14.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return u + st
}
