package tests

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/heapprof/heapproftest"
)

// TestBothSources: the options the runner owns work alike on the eBPF path
// and under --preload (one matrix over both sources): the --http
// endpoints, --profile-dir and --report-dir with --interval (one run),
// and the closing lines with -v's phases line (one run), each against
// liveleak, which leaks 50 blocks of 1000 bytes from leak_here and 10 of
// 300 from keep_small. Each row's log says which source wrote it
// (mode=bpf, mode=preload).
func TestBothSources(t *testing.T) {
	prog := need(t, "tests/progs/build/liveleak")
	sources := []struct {
		name string
		args []string
	}{{"bpf", nil}, {"preload", []string{"--preload"}}}
	checks := []struct {
		name string
		run  func(t *testing.T, mode string, args []string, dir, log string)
	}{
		{"http", func(t *testing.T, mode string, args []string, dir, log string) {
			truth := filepath.Join(dir, "truth")
			r := startLive(t, []string{"MEMTRACE_TRUTH=" + truth}, append(args, "-o", log, "--stack-depth", "16",
				"--http", "127.0.0.1:0", "--", prog)...)
			r.waitOut(t, "leaked")
			want := truthLive(t, truth)
			var pid int
			var by, objs map[string]int64
			var total, live int64
			// Bounded only for a broken memtrace: on a loaded machine
			// (make check's workers beside other builds) the preload
			// reader's figures come late.
			for end := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
				p := fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap")
				for _, s := range p.Sample {
					pid = int(heapproftest.PID(s))
				}
				by, objs, total = byFunction(p, pid)
				live, _ = logLive(t, log)
				if by["leak_here"] == want[1000] && by["keep_small"] == want[300] && total == live || time.Now().After(end) {
					break
				}
			}
			if by["leak_here"] != 50000 || objs["leak_here"] != 50 || by["keep_small"] != 3000 || objs["keep_small"] != 10 || total != live {
				t.Fatalf("/debug/pprof/heap by function %v %v (%d bytes), the log %d live bytes; the program leaked %v", by, objs, total, live, want)
			}
			if _, _, n := byFunction(fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap?pid="+strconv.Itoa(pid)), 0); n != live {
				t.Errorf("?pid=%d: %d live bytes, want %d", pid, n, live)
			}
			if _, _, n := byFunction(fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap?pid=1"), 0); n != 0 {
				t.Errorf("?pid=1 (not traced): %d live bytes, want 0", n)
			}
			// The program is idle now: nothing allocated in the window.
			if _, _, n := byFunction(fetchProfile(t, "http://"+r.addr+"/debug/pprof/heap?seconds=1"), 0); n != 0 {
				t.Errorf("?seconds=1 of an idle program: %d bytes, want 0", n)
			}
			fams := fetchMetrics(t, r.addr)
			for _, c := range []struct {
				name string
				pid  int
				want float64
			}{{"memtrace_live_bytes", pid, float64(live)}, {"memtrace_live_blocks", pid, 60}, {"memtrace_traced_processes", 0, 1}, {"memtrace_lost_records_total", 0, 0}} {
				if got := metric(fams, c.name, c.pid); got != c.want {
					t.Errorf("%s{pid=%d} = %v, want %v", c.name, c.pid, got, c.want)
				}
			}
			// Only the eBPF tracer places probes.
			if probes := metric(fams, "memtrace_probes_attached", 0); mode == "bpf" && probes < 1 || mode == "preload" && probes != 0 {
				t.Errorf("memtrace_probes_attached = %v", probes)
			}
			if idx := string(httpGet(t, "http://"+r.addr+"/")); !strings.Contains(idx, "/debug/pprof/heap") || !strings.Contains(idx, "/metrics") {
				t.Errorf("index:\n%s", idx)
			}
			r.stdin.Close()
			if err := <-r.done; err != nil {
				t.Fatalf("memtrace: %v\n%s", err, r.stderr)
			}
			r.done <- nil
		}},
		// One run for both directories: each is written at every
		// --interval, from the same snapshots.
		{"profile-dir+report-dir", func(t *testing.T, mode string, args []string, dir, log string) {
			profs := filepath.Join(dir, "profiles")
			reports := filepath.Join(dir, "reports")
			leakSnaps := regexp.MustCompile(`(?m)^\[memtrace\] snapshot pid=\d+ .*current=53000 `)
			leakedAt := time.Now()
			// The program waits, leaks held, until a profile with them
			// is in the directory and two snapshots of them are in the
			// log (written out every 100 ms), however slow a loaded
			// machine makes the 50 ms intervals.
			se := runLiveleak(t, append(args, "-o", log, "--stack-depth", "16", "--profile-dir", profs, "--report-dir", reports,
				"--interval", "50ms", "--", prog), func() {
				profiled, snapped := false, false
				for end := time.Now().Add(time.Minute); time.Now().Before(end) && !(profiled && snapped); time.Sleep(50 * time.Millisecond) {
					if p := newestProfile(t, profs, leakedAt); !profiled && p != nil {
						by, _, _ := byFunction(p, 0)
						profiled = by["leak_here"] == 50000 && by["keep_small"] == 3000
					}
					if b, _ := os.ReadFile(log); len(leakSnaps.FindAll(b, 2)) == 2 {
						snapped = true
					}
				}
				if !profiled {
					t.Errorf("no profile in %s with leak_here's 50000 bytes and keep_small's 3000 within a minute", profs)
				}
			})
			if strings.Contains(se, "serving http") {
				t.Errorf("--profile-dir without --http served http:\n%s", se)
			}
			txt, _ := filepath.Glob(filepath.Join(reports, "liveleak-*_*.txt"))
			html, _ := filepath.Glob(filepath.Join(reports, "liveleak-*_*.html"))
			if len(txt) != 1 || len(html) != 1 {
				t.Fatalf("report files %v %v, want one .txt and one .html", txt, html)
			}
			b, err := os.ReadFile(txt[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{"process: liveleak\n", "current_bytes: 53000\n", "leak_blocks: 60\n", "peak_bytes: 53000\n"} {
				if !strings.Contains(string(b), w) {
					t.Errorf("%s lacks %q:\n%s", txt[0], w, b)
				}
			}
			logText, _ := os.ReadFile(log)
			if snaps := leakSnaps.FindAll(logText, -1); len(snaps) < 2 {
				t.Errorf("%d --interval snapshots (50 ms) with the 53000 leaked bytes in a minute, want 2 or more", len(snaps))
			}
		}},
		// One run for the closing lines and -v's phases line.
		{"closing+phases", func(t *testing.T, mode string, args []string, dir, log string) {
			// liveleak waits for its stdin after its leaks: 300 ms
			// held there are in the run phase, not in the others.
			se := runLiveleak(t, append(args, "-v", "--stack-depth", "16", "-o", log, "--", prog), func() { time.Sleep(300 * time.Millisecond) })
			code, out, rse := memtraceRun(t, nil, "report", "-a", "0", "-p", "0", "-l", "0", "-T", "0", log)
			if code != 0 {
				t.Fatalf("report exit %d: %s", code, rse)
			}
			c1, p1, l1 := closingFigures(t, se)
			c2, p2, l2 := closingFigures(t, out)
			if c1 != c2 || p1 != p2 || l1 != l2 {
				t.Errorf("closing lines say %s calls, peak %s, leaked %s; the report %s, %s, %s\n%s", c1, p1, l1, c2, p2, l2, se)
			}
			if p1 != "53.00K" || l1 != "53.00K (60" {
				t.Errorf("closing lines: peak %s, leaked %s; want 53.00K and 53.00K in 60 leaks\n%s", p1, l1, se)
			}
			for _, w := range []string{"memtrace stats:\n", "\trun: exited with status 0\n", "\tlost events: 0\n", "the log is " + log + ";", "\n  memview " + log + "\n"} {
				if !strings.Contains(se, w) {
					t.Errorf("closing lines lack %q:\n%s", w, se)
				}
			}
			m := regexp.MustCompile(`(?m)^memtrace: phases: start-up ([0-9.]+) ms .*, run ([0-9.]+) ms, end ([0-9.]+) ms `).FindStringSubmatch(se)
			if m == nil {
				t.Fatalf("no phases line in memtrace -v's stderr:\n%s", se)
			}
			start, _ := strconv.ParseFloat(m[1], 64)
			run, _ := strconv.ParseFloat(m[2], 64)
			end, _ := strconv.ParseFloat(m[3], 64)
			// The end's bound catches a figure that is not a duration
			// (runLiveleak waits a bounded time for memtrace's exit),
			// not a slow end: a loaded machine's is.
			if start <= 0 || run < 300 || end <= 0 || end > run+start+60000 {
				t.Errorf("phases start-up %v ms, run %v ms, end %v ms: want each above 0 and the run at least liveleak's 300 ms\n%s", start, run, end, se)
			}
		}},
	}
	for _, src := range sources {
		for _, c := range checks {
			t.Run(src.name+"/"+c.name, func(t *testing.T) {
				if src.name == "bpf" {
					requireBPF(t)
				}
				dir := t.TempDir()
				log := filepath.Join(dir, "app.log")
				c.run(t, src.name, src.args, dir, log)
				if got := logMode(t, log); got != src.name {
					t.Errorf("the log's header says mode=%s, want mode=%s", got, src.name)
				}
			})
		}
	}
}

// runLiveleak runs memtrace with args over liveleak, calls during (when
// not nil) once the program has leaked, then lets the program end and
// wants memtrace's exit 0. It returns memtrace's stderr.
func runLiveleak(t *testing.T, args []string, during func()) string {
	t.Helper()
	cmd := command(need(t, "bin/memtrace"), args...)
	r := &liveRun{cmd: cmd, stderr: &lockedBuffer{}}
	cmd.Stderr = r.stderr
	var err error
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.stdout = bufio.NewReader(out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := false
	t.Cleanup(func() {
		if !ended {
			r.stdin.Close()
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	r.waitOut(t, "leaked")
	if during != nil {
		during()
	}
	r.stdin.Close()
	err = runWait(cmd, 30*time.Second)
	ended = true
	if err != nil {
		t.Fatalf("memtrace %v: %v\n%s", args, err, r.stderr)
	}
	return r.stderr.String()
}

// newestProfile is the newest complete profile in dir written after
// since, or nil.
func newestProfile(t *testing.T, dir string, since time.Time) *profile.Profile {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var newest string
	var at time.Time
	for _, e := range ents {
		if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".pb.gz") && info.ModTime().After(since) && info.ModTime().After(at) {
			newest, at = filepath.Join(dir, e.Name()), info.ModTime()
		}
	}
	if newest == "" {
		return nil
	}
	f, err := os.Open(newest)
	if err != nil {
		return nil
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil || p.CheckValid() != nil {
		t.Fatalf("%s: %v", newest, err)
	}
	return p
}

var headerModeRE = regexp.MustCompile(`(?m)^\[memtrace\] header .* mode=(\S+)`)

// logMode is the mode= of the log's header.
func logMode(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the log: %v", err)
	}
	m := headerModeRE.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no header line", path)
	}
	return string(m[1])
}
