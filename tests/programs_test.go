package tests

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/runner"
)

// programs are the test programs of progs/ (T01-T24 and every row of
// docs/spec.md §3; see docs/preload.md for the scenario table).
var programs = []string{"basic", "libcmemalign", "mmaps", "mmapcalls", "cxx", "threads", "handoff", "livethreads", "dlopen", "fork", "forkmt", "exitthread"}

// modes: preload = memtrace --preload; ldpreload = the library used
// directly as memtrack.so is (which follows children, as memtrack did);
// ldsync = the same without its writer thread (MEMTRACE_WRITER=0); launch
// and attach = the eBPF tracer; follow and preload-follow = launch and
// --preload with --follow, where forked children must be logged exactly
// (without it, on both paths, they must not be logged at all).
var modes = []string{"preload", "ldpreload", "ldsync", "launch", "attach", "follow", "preload-follow"}

const runLimit = 90 * time.Second

// inShortMatrix: make check's part of TestPrograms' matrix. Both paths
// (preload, launch) run every program; attach the ones whose state at the
// attach differs (threads, a library loaded later); follow the forking
// ones; the library without memtrace (ldpreload, ldsync) the ones that
// stress its writer (threads, forks, threads that exit).
func inShortMatrix(prog, mode string) bool {
	switch mode {
	case "preload", "launch":
		return true
	case "attach":
		return prog == "basic" || prog == "threads" || prog == "dlopen"
	case "follow", "preload-follow":
		return prog == "fork" || prog == "forkmt"
	default:
		return prog == "threads" || prog == "handoff" || prog == "forkmt" || prog == "exitthread"
	}
}

func TestPrograms(t *testing.T) {
	memtrace := need(t, "bin/memtrace")
	lib := need(t, "bin/memtrace-preload.so")
	progDir := need(t, "tests/progs/build")
	for _, prog := range programs {
		for _, mode := range modes {
			t.Run(prog+"/"+mode, func(t *testing.T) {
				if testing.Short() && !inShortMatrix(prog, mode) {
					t.Skip("-short: make check runs both paths over every program and each other mode over the programs it matters most for; make test runs all")
				}
				exe := filepath.Join(progDir, prog)
				if _, err := os.Stat(exe); err != nil {
					t.Fatalf("%s is missing: run make progs", exe)
				}
				r := newRun(t)
				// make check reads back the logs of every program on both
				// paths (TestMain: the closing check is off elsewhere).
				r.closing = true
				switch mode {
				case "preload":
					r.runMemtrace(t, memtrace, []string{"--preload", "-o", r.log, "--", exe})
					r.unfollowed = true
					r.check(t, false)
				case "preload-follow":
					r.runMemtrace(t, memtrace, []string{"--preload", "--follow", "-o", r.log, "--", exe})
					r.check(t, true)
				case "ldpreload":
					r.runDirect(t, exe, []string{"LD_PRELOAD=" + lib, "MEMTRACK_OUTPUT=" + r.log})
					r.check(t, true)
				case "ldsync":
					r.runDirect(t, exe, []string{"LD_PRELOAD=" + lib, "MEMTRACK_OUTPUT=" + r.log, "MEMTRACE_WRITER=0"})
					r.check(t, true)
				case "launch":
					requireBPF(t)
					r.runMemtrace(t, memtrace, []string{"-o", r.log, "--", exe})
					bpfLog(t, r.log)
					r.unfollowed = true
					r.check(t, false)
				case "attach":
					requireBPF(t)
					r.runAttach(t, memtrace, exe)
					bpfLog(t, r.log)
					r.check(t, false)
				case "follow":
					requireBPF(t)
					r.runMemtrace(t, memtrace, []string{"--follow", "-o", r.log, "--", exe})
					bpfLog(t, r.log)
					r.check(t, true)
				}
			})
		}
	}
}

func (r *run) env(extra ...string) []string {
	env := append(os.Environ(), "MEMTRACE_TRUTH="+r.truth)
	if r.closing {
		env = append(env, runner.CheckEnv+"=1")
	}
	return append(env, extra...)
}

func (r *run) runMemtrace(t *testing.T, memtrace string, args []string) {
	t.Helper()
	cmd := command(memtrace, args...)
	cmd.Env = r.env()
	cmd.Stderr = &r.stderr
	cmd.Stdout = &r.stderr
	if err := runCmd(t, cmd, runLimit); err != nil {
		t.Fatalf("memtrace %v: %v\n%s", args, err, r.stderr.String())
	}
}

func (r *run) runDirect(t *testing.T, exe string, env []string) {
	t.Helper()
	cmd := command(exe)
	cmd.Env = r.env(env...)
	cmd.Stderr = &r.stderr
	cmd.Stdout = &r.stderr
	if err := runCmd(t, cmd, runLimit); err != nil {
		t.Fatalf("%s: %v\n%s", exe, err, r.stderr.String())
	}
}

// runAttach starts the program waiting, attaches memtrace -p, waits for
// its header (probes attached), then lets the program go.
func (r *run) runAttach(t *testing.T, memtrace, exe string) {
	t.Helper()
	r.runAttachEnv(t, memtrace, exe, nil)
}

// runAttachEnv is runAttach with more of the program's environment.
func (r *run) runAttachEnv(t *testing.T, memtrace, exe string, env []string) {
	t.Helper()
	attachAll(t, memtrace, []*run{r}, []string{exe}, [][]string{env})
}

// startWaiting starts prog, which waits on its stdin after printing
// "ready" (MEMTRACE_TEST_WAIT=1), and returns once it is ready: its stdin
// lets it go, done gets its exit. The test's end kills it if still there.
func (r *run) startWaiting(t *testing.T, prog *exec.Cmd) (stdin io.WriteCloser, done chan error) {
	t.Helper()
	stdin, err := prog.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := prog.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	prog.Stderr = &r.stderr
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func() { done <- prog.Wait() }()
	t.Cleanup(func() { _ = prog.Process.Kill() })
	if err := waitLine(stdout, "ready", 30*time.Second); err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(prog.Path), err, r.stderr.String())
	}
	return stdin, done
}

// TestPreloadBufferSizeBoundsThreads: with --preload, --buffer-size sizes
// the shared region, whose chunks bound the threads alive at once
// (docs/preload.md, "Many threads"): livethreads' 1,000 threads, each
// holding its chunk across a barrier, lose records in a 16M region (304
// chunks) and are exact in a 64M one (1,216).
func TestPreloadBufferSizeBoundsThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a region too small makes the program's threads wait for chunks for seconds; make test runs it")
	}
	memtrace := need(t, "bin/memtrace")
	exe := filepath.Join(need(t, "tests/progs/build"), "livethreads")
	t.Setenv("LIVETHREADS", "1000")
	for _, c := range []struct {
		size  string
		exact bool
	}{{"16M", false}, {"64M", true}} {
		t.Run(c.size, func(t *testing.T) {
			r := newRun(t)
			r.runMemtrace(t, memtrace, []string{"--preload", "--buffer-size", c.size, "-o", r.log, "--", exe})
			if m := logMode(t, r.log); m != "preload" {
				t.Fatalf("the log says mode=%s, want preload", m)
			}
			lost := summaryLost(t, r.log)
			said := strings.Contains(r.stderr.String(), "records lost: the shared region was full") && strings.Contains(r.stderr.String(), "raise --buffer-size")
			if !c.exact {
				if lost == 0 {
					t.Errorf("1,000 live threads in a %s region lost no record: the region is not that size", c.size)
				}
				if !said {
					t.Errorf("the loss is not said on stderr with what to do:\n%s", r.stderr.String())
				}
				return
			}
			if lost != 0 || said {
				t.Errorf("%d records lost in a %s region; stderr:\n%s", lost, c.size, r.stderr.String())
			}
			r.check(t, true)
		})
	}
}

// summaryLost is the lost count of the log's summary line.
func summaryLost(t *testing.T, log string) uint64 {
	t.Helper()
	v, _ := logfmt.Field(summaryFields(t, log), "lost")
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s: the summary line's lost=%q: %v", log, v, err)
	}
	return n
}
