package tests

// End-to-end tests of compressed logs (-o FILE.zst, -o FILE.gz): the eBPF
// path and the LD_PRELOAD path write them, memtrace report and the model
// memview uses read them (whole, growing, cut by a SIGKILL), zstdcat and
// gzip decode them to the same memtrack-format lines, and reading one
// takes no more memory than reading the plain log.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/analysis"
	preload "github.com/memtrace/memtrace/fallback-preload"
	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/runner"
)

// decompress reads a log file in any form. err is nil for a whole log and
// logio.ErrTruncated (wrapped) for a cut one.
func decompress(t *testing.T, path string) ([]byte, logio.Kind, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open the log: %v", err)
	}
	defer f.Close()
	r, err := logio.Open(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer r.Close()
	k, _ := r.Kind()
	data, err := io.ReadAll(r)
	return data, k, err
}

// pairsOnDisk counts the malloc/free lines of 4242 bytes that the
// compressed log being written at path holds so far: what a reader gets
// of it now (0 before its first block).
func pairsOnDisk(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	r, err := logio.Open(f)
	if err != nil {
		return 0
	}
	defer r.Close()
	data, _ := io.ReadAll(r)
	return bytes.Count(data, []byte("size=4242 "))
}

// toolDecode is what zstd(1) or gzip(1) make of a file: the route to
// memtrack's own memview (zstdcat FILE | memview -f -).
func toolDecode(t *testing.T, path string, k logio.Kind) ([]byte, error) {
	t.Helper()
	tool := map[logio.Kind][]string{logio.Zstd: {"zstd", "-dc"}, logio.Gzip: {"gzip", "-dc"}}[k]
	if _, err := exec.LookPath(tool[0]); err != nil {
		t.Fatalf("%s is not installed (make deps installs it)", tool[0])
	}
	var out, errb bytes.Buffer
	cmd := command(tool[0], append(tool[1:], path)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := runCmd(t, cmd, 60*time.Second)
	if err != nil {
		err = fmt.Errorf("%s: %w: %s", tool[0], err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), err
}

var (
	// The summary's events= counts every record memtrace received,
	// logged or not (the exec shim's own threads ending at its exec,
	// as many as its Go runtime had started), so it varies between runs.
	runValues  = regexp.MustCompile(`\b(ts|tid|pid|pids|ppid|start|duration_us|events)=\S+`)
	hexValues  = regexp.MustCompile(`0x[0-9a-f]+`)
	spaceRuns  = regexp.MustCompile(` +`)
	frameAddrs = regexp.MustCompile(`\[0x[0-9a-f]+\]`)
)

// normalize drops what differs between two runs of one deterministic
// program (times, ids, addresses under ASLR, the column padding they
// change), keeping every line, its kind, op, sizes, totals, names and
// frames.
func normalize(log []byte) string {
	s := frameAddrs.ReplaceAllString(string(log), "[ADDR]")
	s = runValues.ReplaceAllString(s, "$1=N")
	s = hexValues.ReplaceAllString(s, "0xN")
	return spaceRuns.ReplaceAllString(s, " ")
}

// firstDiff names the first line where a and b differ.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n  %s\n  %s", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("%d lines against %d", len(la), len(lb))
}

// TestCompressedLogBPF: the eBPF path's -o run.log.zst and -o run.log.gz
// hold exactly the events a plain -o run.log of the same deterministic
// program holds (checked against the program's own record, and line by
// line against the plain run with times, ids and addresses set aside);
// zstd(1) and gzip(1) decode them to the bytes memtrace's reader does; and
// memtrace report reads them whole.
func TestCompressedLogBPF(t *testing.T) {
	requireBPF(t)
	memtrace := need(t, "bin/memtrace")
	exe := need(t, "tests/progs/build/basic")
	var plain string
	for _, suffix := range []string{"", ".zst", ".gz"} {
		t.Run("log"+suffix, func(t *testing.T) {
			r := newRun(t)
			out := r.log + suffix
			r.runMemtrace(t, memtrace, []string{"--stack-depth", "8", "-o", out, "--", exe})
			data, kind, err := decompress(t, out)
			if err != nil {
				t.Fatalf("read %s: %v", out, err)
			}
			bpftest.RequireModeBPF(t, data)
			if kind != logio.KindOf(out) {
				t.Fatalf("%s holds a %v log", out, kind)
			}
			if suffix != "" {
				raw, _ := os.ReadFile(out)
				if len(raw)*3 > len(data) {
					t.Errorf("%s: %d bytes for %d of log: not compressed", out, len(raw), len(data))
				}
				got, err := toolDecode(t, out, kind)
				if err != nil || !bytes.Equal(got, data) {
					t.Errorf("the %v tool decodes %d bytes (%v), memtrace %d: not the same log", kind, len(got), err, len(data))
				}
				if err := os.WriteFile(r.log, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r.check(t, false)
			norm := normalize(data)
			if suffix == "" {
				plain = norm
			} else if plain != "" && norm != plain {
				t.Errorf("the %v log differs from the plain run's beyond times, ids and addresses: %s", kind, firstDiff(plain, norm))
			}
			code, so, se := memtraceRun(t, nil, "report", out)
			if code != 0 || !strings.Contains(so, "calls to allocation functions: ") || strings.Contains(so, "ends early") {
				t.Errorf("memtrace report %s: exit %d, stderr %q\n%s", out, code, se, so)
			}
		})
	}
}

// allocLoop allocates and frees 4242 bytes in a paced loop, printing its
// pid and then its count every 100 pairs (as it goes: what the log must
// have reached by a given moment).
const allocLoop = `#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(void) {
	printf("pid %d\n", getpid());
	fflush(stdout);
	struct timespec d = {0, 2000000};
	for (long i = 1; i <= 3000000; i++) {
		void *volatile p = malloc(4242);
		free(p);
		if (i % 100 == 0) {
			printf("%ld\n", i);
			fflush(stdout);
			nanosleep(&d, NULL);
		}
	}
	return 0;
}
`

// progress records the counts a program printed, with when they came.
type progress struct {
	mu     sync.Mutex
	pid    int
	counts []int
	times  []time.Time
}

func (p *progress) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		if s, ok := strings.CutPrefix(line, "pid "); ok {
			p.pid, _ = strconv.Atoi(s)
		} else if n, err := strconv.Atoi(line); err == nil {
			p.counts = append(p.counts, n)
			p.times = append(p.times, time.Now())
		}
		p.mu.Unlock()
	}
}

// at is the last count printed at or before t.
func (p *progress) at(t time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for i, at := range p.times {
		if !at.After(t) {
			n = p.counts[i]
		}
	}
	return n
}

func (p *progress) started() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.counts) > 0
}

// TestCompressedLogSIGKILLBPF: memtrace -o FILE.zst (or .gz) killed with
// SIGKILL at a random moment leaves a file that reads up to its last
// flush: every allocation the program had made 600 ms before (two flush
// intervals and the machine's slack; on a loaded machine the test waits,
// bounded, for the periodic flushes to bring them to the file before the
// kill) is in it, zstd(1) and gzip(1)
// decode the same bytes (up to where each stops at the cut), memtrace
// report reads it, says the log ends early and exits 0, and the program
// runs on, not stopped.
func TestCompressedLogSIGKILLBPF(t *testing.T) {
	requireBPF(t)
	memtrace := need(t, "bin/memtrace")
	exe := buildC(t, "allocloop", allocLoop, "-fno-builtin")
	rounds := faultRounds()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for round := range rounds {
		suffix := []string{".zst", ".gz"}[round%2]
		out := filepath.Join(t.TempDir(), "run.log"+suffix)
		cmd := command(memtrace, "-o", out, "--", exe)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		// A file, not a pipe: the program, which outlives memtrace,
		// holds memtrace's stderr, and Wait would wait for its end.
		stderr, err := os.CreateTemp(t.TempDir(), "stderr")
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var p progress
		go p.read(stdout)
		deadline := time.Now().Add(30 * time.Second)
		for !p.started() {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("round %d: the program never started under memtrace: %s", round, readFile(stderr.Name()))
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(700+rng.IntN(1000)) * time.Millisecond)
		due := p.at(time.Now().Add(-600 * time.Millisecond))
		// The log on disk holds them within two flush intervals on a
		// machine with CPU to spare; a loaded one may keep the agent
		// from its CPU longer. So wait (bounded) for the periodic
		// flushes to bring them to the file, with memtrace running and
		// nothing asking it to flush; then kill it.
		for end := time.Now().Add(15 * time.Second); pairsOnDisk(out) < 2*due && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		stderr.Close()
		p.mu.Lock()
		pid := p.pid
		p.mu.Unlock()
		// The program runs on; it is this test's to end.
		state := procStateOf(pid)
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if state == "" || state == "T" || state == "t" {
			t.Errorf("round %d: the program (pid %d) is %q after memtrace's SIGKILL, want running", round, pid, state)
		}

		data, kind, err := decompress(t, out)
		if !errors.Is(err, logio.ErrTruncated) {
			t.Fatalf("round %d (%s): a killed writer's log read with %v, want ErrTruncated", round, suffix, err)
		}
		bpftest.RequireModeBPF(t, data)
		n := bytes.Count(data, []byte("size=4242 "))
		t.Logf("round %d (%s): %d pairs made 600 ms before the kill, %d lines of them in the log, %d bytes decoded", round, suffix, due, n, len(data))
		if n < 2*due {
			t.Errorf("round %d (%s): %d malloc/free lines of 4242 bytes in the log; the program had made %d pairs 600 ms before the kill", round, suffix, n, due)
		}
		// At a cut the tools and memtrace's reader stop at slightly
		// different places: gzip(1) gives out what it decoded of the
		// cut block, zstd(1) keeps back its last output buffer (up to
		// 128 KiB), memtrace's reader gives out whole blocks. The bytes
		// are the same up to there.
		got, _ := toolDecode(t, out, kind)
		short, long := got, data
		if len(short) > len(long) {
			short, long = long, short
		}
		if !bytes.HasPrefix(long, short) || len(long)-len(short) > 256<<10 {
			t.Errorf("round %d: the %v tool decodes %d bytes of the cut log, memtrace %d: not one the start of the other", round, kind, len(got), len(data))
		}
		// What came before the cut is reported, the cut said with
		// where it is, exit 1; the blocks are live at the cut.
		code, so, se := memtraceRun(t, nil, "report", out)
		if code != 1 || !strings.Contains(so, "the compressed log ends early") || !strings.Contains(so, "calls to allocation functions: ") ||
			!strings.Contains(se, "at byte ") || !strings.Contains(so, "live at the cut: ") {
			t.Errorf("round %d: memtrace report of the cut log: exit %d, stderr %q\n%s", round, code, se, so)
		}
		if t.Failed() {
			t.Logf("round %d: %d bytes of log; memtrace stderr: %s", round, len(data), readFile(stderr.Name()))
			return
		}
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// procStateOf is a process's state letter ("" when it is gone).
func procStateOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// stepper allocates N blocks of 777 bytes for each line N on stdin (kept
// until exit), says "done N" and exits at the end of stdin.
const stepper = `#include <stdio.h>
#include <stdlib.h>
int main(void) {
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		int n = atoi(line);
		for (int i = 0; i < n; i++) {
			void *volatile p = malloc(777);
			(void)p;
		}
		printf("done %d\n", n);
		fflush(stdout);
	}
	return 0;
}
`

// TestFollowCompressedLogBPF: what memview -f does with a compressed log
// that memtrace is writing (logio.Follow under analysis.Follower, into the
// model): each step the program takes shows up while it runs, within the
// flush intervals, and the model ends at memtrace's summary.
func TestFollowCompressedLogBPF(t *testing.T) {
	requireBPF(t)
	memtrace := need(t, "bin/memtrace")
	exe := buildC(t, "stepper", stepper, "-fno-builtin")
	for _, suffix := range []string{".zst", ".gz"} {
		t.Run(suffix[1:], func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "live.log"+suffix)
			cmd := command(memtrace, "-o", out, "--", exe)
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				stdin.Close()
				runWait(cmd, 30*time.Second)
			}()
			lines := bufio.NewScanner(stdout)
			if err := waitForFile(out, 30*time.Second); err != nil {
				t.Fatalf("%v: %s", err, stderr.String())
			}
			f, err := os.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fr := logio.Follow(f, 20*time.Millisecond)
			defer fr.Close()
			m := analysis.New()
			var mu sync.Mutex
			stop := make(chan struct{})
			defer close(stop)
			ended := make(chan error, 1)
			go func() {
				ended <- m.Stream(&analysis.Follower{R: fr, Poll: 50 * time.Millisecond}, analysis.StreamOptions{Lock: &mu, Stop: stop})
			}()
			count := func() int {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for i := 0; i < m.Len(); i++ {
					if m.Size[i] == 777 {
						n++
					}
				}
				return n
			}
			for step := 1; step <= 5; step++ {
				fmt.Fprintf(stdin, "%d\n", 100*step)
				if !lines.Scan() || lines.Text() != fmt.Sprintf("done %d", 100*step) {
					t.Fatalf("step %d: the program did not answer: %q %s", step, lines.Text(), stderr.String())
				}
				want := 100 * step * (step + 1) / 2
				t0 := time.Now()
				for count() < want {
					if time.Since(t0) > 5*time.Second {
						t.Fatalf("step %d: the followed log shows %d of the %d allocations made, 5 s later", step, count(), want)
					}
					time.Sleep(10 * time.Millisecond)
				}
				if got := count(); got != want {
					t.Fatalf("step %d: %d allocations of 777 bytes shown, the program made %d", step, got, want)
				}
				t.Logf("step %d: shown %v after the program made them", step, time.Since(t0).Round(time.Millisecond))
			}
			stdin.Close()
			select {
			case err := <-ended:
				if err != nil {
					t.Fatalf("the followed log ended with %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("the followed log did not end at memtrace's summary: %s", stderr.String())
			}
			mu.Lock()
			done := m.Done
			mu.Unlock()
			if !done {
				t.Errorf("the model is not done after the summary")
			}
			data, _, err := decompress(t, out)
			if err != nil {
				t.Fatalf("the finished log: %v", err)
			}
			bpftest.RequireModeBPF(t, data)
		})
	}
}

// TestCompressedReportMemory: memtrace report of a 1M-event log takes no
// more memory compressed than plain (the decoder streams, with its window
// bounded), and reports the same.
func TestCompressedReportMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and reports a 1M-event log twice: make test runs it")
	}
	memtrace := need(t, "bin/memtrace")
	dir := t.TempDir()
	gen := filepath.Join(dir, "genlog")
	if out, err := command("go", "build", "-o", gen, filepath.Join(repoRoot(t), "cmd/memtrace-genlog")).CombinedOutput(); err != nil {
		t.Fatalf("build memtrace-genlog: %v\n%s", err, out)
	}
	plain := filepath.Join(dir, "big.log")
	if out, err := command(gen, "-events", "1000000", "-o", plain).CombinedOutput(); err != nil {
		t.Fatalf("memtrace-genlog: %v\n%s", err, out)
	}
	for _, suffix := range []string{".zst", ".gz"} {
		if err := compressFile(plain, plain+suffix); err != nil {
			t.Fatal(err)
		}
	}
	maxrss := buildC(t, "maxrss", maxRSS)
	report := func(path string) (string, int64) {
		cmd := command(maxrss, memtrace, "report", path)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := runCmd(t, cmd, 120*time.Second); err != nil {
			t.Fatalf("memtrace report %s: %v: %s", path, err, se.String())
		}
		kb, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(se.String()), "maxrss_kb="), 10, 64)
		if err != nil {
			t.Fatalf("memtrace report %s: stderr %q", path, se.String())
		}
		// The report names its log: the same name for all three.
		return strings.ReplaceAll(so.String(), filepath.Base(path), "LOG"), kb << 10
	}
	wantText, plainRSS := report(plain)
	st, _ := os.Stat(plain)
	t.Logf("plain: %d MB of log, max RSS %d MB", st.Size()>>20, plainRSS>>20)
	for _, suffix := range []string{".zst", ".gz"} {
		text, rss := report(plain + suffix)
		zst, _ := os.Stat(plain + suffix)
		t.Logf("%s: %d MB of log, max RSS %d MB", suffix, zst.Size()>>20, rss>>20)
		if text != wantText {
			t.Errorf("the report of the %s log differs from the plain one's: %s", suffix, firstDiff(wantText, text))
		}
		if rss > plainRSS+plainRSS/5+32<<20 {
			t.Errorf("reading the %s log took %d MB, the plain one %d MB", suffix, rss>>20, plainRSS>>20)
		}
	}
}

// maxRSS runs its arguments and prints their peak resident size. A child
// of the test process itself would count the test's own (a vfork'ed child
// shares the parent's pages until exec, and the peak carries over exec):
// this small process forks it instead.
const maxRSS = `#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
	(void)argc;
	pid_t pid = fork();
	if (pid == 0) {
		execv(argv[1], argv + 1);
		_exit(127);
	}
	int st;
	struct rusage ru;
	if (wait4(pid, &st, 0, &ru) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 1;
	fprintf(stderr, "maxrss_kb=%ld\n", ru.ru_maxrss);
	return 0;
}
`

// compressFile writes src compressed (by dst's suffix) as memtrace does.
func compressFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	w, err := logio.Create(f, dst)
	if err != nil {
		f.Close()
		return err
	}
	if _, err := io.Copy(w, in); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// TestPreloadCompressedLog: the LD_PRELOAD path writes -o FILE.zst through
// memtrace's converter, compressed and exact; its sort by time keeps the
// form; the library's own text mode refuses a compressed name (it writes
// text itself) with one line.
func TestPreloadCompressedLog(t *testing.T) {
	memtrace := need(t, "bin/memtrace")
	exe := need(t, "tests/progs/build/basic")
	for _, suffix := range []string{".zst", ".gz"} {
		t.Run(suffix[1:], func(t *testing.T) {
			r := newRun(t)
			out := r.log + suffix
			r.runMemtrace(t, memtrace, []string{"--preload", "-o", out, "--", exe})
			data, kind, err := decompress(t, out)
			if err != nil || kind != logio.KindOf(out) {
				t.Fatalf("%s: a %v log, %v", out, kind, err)
			}
			if !bytes.Contains(data, []byte("mode=preload")) {
				t.Fatalf("the log does not come from the LD_PRELOAD path")
			}
			if err := os.WriteFile(r.log, data, 0o644); err != nil {
				t.Fatal(err)
			}
			r.check(t, true)
		})
	}
	t.Run("sort", func(t *testing.T) {
		var b []byte
		b = logfmt.AppendAlloc(b, 2, "b", "malloc", 30, 8, 8, 0x30)
		b = logfmt.AppendFrame(b, 0, "/bin/b", "f", 1, 0x401001)
		b = logfmt.AppendAlloc(b, 1, "a", "malloc", 10, 8, 8, 0x10)
		b = logfmt.AppendAlloc(b, 1, "a", "malloc", 20, 8, 16, 0x20)
		want, sorted := preload.SortLog(b)
		if sorted {
			t.Fatal("the sample is already in order")
		}
		p := filepath.Join(t.TempDir(), "unsorted.log.zst")
		f, _ := os.Create(p)
		w, _ := logio.Create(f, p)
		w.Write(b)
		w.Close()
		if err := preload.SortFile(p); err != nil {
			t.Fatal(err)
		}
		got, kind, err := decompress(t, p)
		if err != nil || kind != logio.Zstd || !bytes.Equal(got, want) {
			t.Fatalf("sorted: a %v log, %v, %q; want zstd of %q", kind, err, got, want)
		}
	})
	t.Run("text mode", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "text.log.zst")
		code, err := preload.Run(context.Background(), preload.Options{Output: runner.ParseOutput(p), Text: true}, []string{"/bin/true"})
		if code != 2 || err == nil || !strings.Contains(err.Error(), "compressed logs (.zst, .gz) need memtrace's own writer") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("text mode with %s: %d, %v", p, code, err)
		}
		if _, err := os.Stat(p); err == nil {
			t.Errorf("text mode left %s behind", p)
		}
	})
}

// TestSudoCompressedLogOwnedByUser: under sudo the compressed log is
// created as the user behind it, as the plain one is.
func TestSudoCompressedLogOwnedByUser(t *testing.T) {
	requireBPF(t)
	dir := sudoDir(t, 0o777, 0)
	log := filepath.Join(dir, "app.log.zst")
	code, so, se := memtraceRun(t, sudoEnv, "-o", log, "--", "/usr/bin/id", "-u")
	if code != 0 || strings.TrimSpace(so) != nobody {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, so, se)
	}
	data, kind, err := decompress(t, log)
	if err != nil || kind != logio.Zstd {
		t.Fatalf("a %v log, %v", kind, err)
	}
	bpftest.RequireModeBPF(t, data)
	if uid, gid := uidOf(t, log); uid != 65534 || gid != 65534 {
		t.Errorf("log owned by %d:%d, want %s:%s", uid, gid, nobody, nobody)
	}
}
