package tests

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/runner"
)

// TestMain turns the closing check on for every memtrace the tests run
// (runner.CheckEnv, docs/closing.md): each run that writes its log to a
// file reads it back after its closing lines and fails, with one line and
// runner.CheckStatus, if the agent's figures differ from the report's.
// Under -short (make check) only TestPrograms' runs are checked (run.closing):
// reading a log back costs about as much CPU as the run's own start-up,
// mostly the C library's debug information, and every test runs memtrace.
//
// It also adds a hang report to the package: go test's own timeout
// panics with every goroutine's stack, and a CI log that keeps only its
// tail then shows neither which test hung nor on what. Shortly before the
// timeout this prints, last, the tests still running and every process
// the test binary started (state, wait channel, command line: a stopped
// target is what memtrace must never leave), then fails the package.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		os.Setenv(runner.CheckEnv, "1")
	}
	if g, ok := flag.Lookup("test.timeout").Value.(flag.Getter); ok {
		if d, ok := g.Get().(time.Duration); ok && d > 3*time.Minute {
			time.AfterFunc(d-90*time.Second, hangReport)
		}
	}
	os.Exit(m.Run())
}

var testFunc = regexp.MustCompile(`memtrace/tests\.(Test\w+)`)

func hangReport() {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	os.Stderr.Write(buf)
	running := map[string]bool{}
	for _, s := range testFunc.FindAllSubmatch(buf, -1) {
		running[string(s[1])] = true
	}
	var names []string
	for n := range running {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "\ntests: about to time out; tests still running: %s\n", strings.Join(names, " "))
	fmt.Fprintln(os.Stderr, "tests: processes started by the test binary (pid state wchan command):")
	for _, p := range descendants(os.Getpid()) {
		fmt.Fprintf(os.Stderr, "  %s\n", p.line)
	}
	// A target memtrace left stopped may have been reparented away.
	fmt.Fprintln(os.Stderr, "tests: stopped processes anywhere (pid state wchan command):")
	for _, p := range descendants(0) {
		if f := strings.Fields(p.line); len(f) > 1 && (f[1] == "T" || f[1] == "t") {
			fmt.Fprintf(os.Stderr, "  %s\n", p.line)
		}
	}
	// Leave nothing behind on the machine: a stopped descendant is
	// resumed and killed with the rest.
	for _, p := range descendants(os.Getpid()) {
		syscall.Kill(p.pid, syscall.SIGCONT)
		syscall.Kill(p.pid, syscall.SIGKILL)
	}
	os.Exit(3)
}

type procLine struct {
	pid  int
	line string
}

// descendants lists the processes below root (0: every process), from
// /proc.
func descendants(root int) []procLine {
	parent := map[int]int{}
	info := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid] = ppid
		wchan, _ := os.ReadFile(d + "/wchan")
		cmd, _ := os.ReadFile(d + "/cmdline")
		c := strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		if len(c) > 300 {
			c = c[:300] + "…"
		}
		info[pid] = fmt.Sprintf("%d %s %s %s", pid, f[0], wchan, c)
	}
	var out []procLine
	for pid := range info {
		if root == 0 {
			out = append(out, procLine{pid, info[pid]})
			continue
		}
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				out = append(out, procLine{pid, info[pid]})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// TestHangReportFindsChildren holds descendants() to a real child.
func TestHangReportFindsChildren(t *testing.T) {
	var attr syscall.ProcAttr
	pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "5"}, &attr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	}()
	for _, p := range descendants(os.Getpid()) {
		if p.pid == pid {
			if !strings.Contains(p.line, "sleep 5") {
				t.Errorf("child listed as %q, want its command line", p.line)
			}
			return
		}
	}
	t.Errorf("child %d not among the descendants", pid)
}
