package tests

// Programs that carry their own allocator: static glibc and musl builds are
// traced through the malloc in their own file (its .symtab), exactly, in
// both modes; a stripped static program and a Go program, which offer
// nothing to probe, get one line and a non-zero exit instead of an empty
// log.

import (
	"bufio"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// staticProgs are progs linked statically (progs/Makefile): basic's every
// row of docs/spec.md §3, threads' stacks (which libc maps itself), mmaps' calls
// of the program's own, mmapcalls' calls from the program's functions and
// threads between malloc's own maps of large blocks; the -o2 builds put
// main in .text.startup, before the start-up files' functions and the
// program's other functions after them.
var staticProgs = []struct{ name, compiler string }{
	{"basic-static", "gcc"},
	{"threads-static", "gcc"},
	{"mmaps-static", "gcc"},
	{"mmapcalls-static", "gcc"},
	{"threads-static-o2", "gcc"},
	{"mmapcalls-static-o2", "gcc"},
	{"basic-musl", "musl-gcc"},
	{"threads-musl", "musl-gcc"},
	{"mmaps-musl", "musl-gcc"},
	{"mmapcalls-musl", "musl-gcc"},
}

func staticProg(t *testing.T, name, compiler string) string {
	t.Helper()
	if _, err := exec.LookPath(compiler); err != nil {
		bpftest.Unavailable(t, "%s is not installed (make deps installs it)", compiler)
	}
	exe := filepath.Join(need(t, "tests/progs/build"), name)
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatalf("%s: %v: run make progs", exe, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s is dynamically linked: the test needs a static build", exe)
		}
	}
	return exe
}

// TestStaticPrograms: every call, made through the allocator linked into
// the program itself, is logged exactly once, with -- and with -p:
// strdup's malloc, realloc's malloc, free's munmap of a large block and a
// thread's stack are in the same file as the program's own calls, and must
// not be logged (again), while the program's own mmap calls must be. One
// memtrace -p attaches to all the programs at once (each is checked
// against its own record, by its threads): the probes are placed in each
// program's file all the same, with one start-up instead of one a program.
func TestStaticPrograms(t *testing.T) {
	memtrace := need(t, "bin/memtrace")
	for _, p := range staticProgs {
		t.Run(p.name+"/launch", func(t *testing.T) {
			requireBPF(t)
			exe := staticProg(t, p.name, p.compiler)
			for round := range rounds(3, 1) {
				r := newRun(t)
				r.runMemtrace(t, memtrace, []string{"-o", r.log, "--", exe})
				bpfLog(t, r.log)
				r.check(t, false)
				if t.Failed() {
					t.Fatalf("round %d", round)
				}
			}
		})
	}
	for round := range rounds(3, 1) {
		t.Run(fmt.Sprintf("attach/%d", round), func(t *testing.T) {
			requireBPF(t)
			var names, exes []string
			for _, p := range staticProgs {
				// A missing compiler is the launch subtest's to report.
				if _, err := exec.LookPath(p.compiler); err == nil {
					names = append(names, p.name)
					exes = append(exes, staticProg(t, p.name, p.compiler))
				}
			}
			if len(exes) == 0 {
				bpftest.Unavailable(t, "no static program: gcc and musl-gcc are missing")
			}
			runs := runAttachAll(t, memtrace, exes, nil)
			bpfLog(t, runs[0].log)
			for i, r := range runs {
				t.Run(names[i], func(t *testing.T) { r.check(t, false) })
			}
		})
	}
}

// runAttachAll is runAttachEnv over several programs at once, each with
// its own record and one log they share.
func runAttachAll(t *testing.T, memtrace string, exes []string, envs [][]string) []*run {
	t.Helper()
	log := filepath.Join(t.TempDir(), "log")
	runs := make([]*run, len(exes))
	for i := range runs {
		runs[i] = newRun(t)
		runs[i].log = log
	}
	attachAll(t, memtrace, runs, exes, envs)
	return runs
}

// attachAll starts each program waiting (with envs[i], where envs is not
// nil) under its run's record, attaches one memtrace -p to them all with
// runs[0]'s log, waits for its header (probes attached), then lets every
// program go and waits for them and for memtrace.
func attachAll(t *testing.T, memtrace string, runs []*run, exes []string, envs [][]string) {
	t.Helper()
	var pids []string
	var stdins []io.WriteCloser
	var dones []chan error
	for i, exe := range exes {
		r := runs[i]
		prog := command(exe)
		env := []string{"MEMTRACE_TEST_WAIT=1"}
		if envs != nil {
			env = append(env, envs[i]...)
		}
		prog.Env = r.env(env...)
		stdin, done := r.startWaiting(t, prog)
		stdins, dones = append(stdins, stdin), append(dones, done)
		pids = append(pids, itoa(prog.Process.Pid))
	}
	log := runs[0].log
	mtErr := new(lockedBuffer)
	mt := command(memtrace, "-o", log, "-p", strings.Join(pids, ","))
	mt.Stderr, mt.Stdout = mtErr, mtErr
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	mtDone := make(chan error, 1)
	go func() { mtDone <- mt.Wait() }()
	defer func() { _ = mt.Process.Kill() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitHeader(ctx, log); err != nil {
		t.Fatalf("%v\nmemtrace: %s", err, mtErr.String())
	}
	for _, in := range stdins {
		if _, err := in.Write([]byte{'g'}); err != nil {
			t.Fatal(err)
		}
	}
	for i, done := range dones {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v\n%s", exes[i], err, runs[i].stderr.String())
			}
		case <-time.After(runLimit):
			t.Fatalf("%s did not finish within %v", exes[i], runLimit)
		}
	}
	select {
	case err := <-mtDone:
		if err != nil {
			t.Fatalf("memtrace -p: %v\n%s", err, mtErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("memtrace -p did not exit after its targets did\n%s", mtErr.String())
	}
}

const goProgSrc = `package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadByte()
	b := make([]byte, 1<<20)
	fmt.Println(len(b))
}
`

// TestUntraceablePrograms: a stripped static program and a Go program say
// in one line why they cannot be traced, and memtrace exits non-zero,
// with -- and with -p; neither is left stopped or running.
func TestUntraceablePrograms(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	stripped := filepath.Join(dir, "stripped-static")
	data, err := os.ReadFile(staticProg(t, "basic-static", "gcc"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stripped, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := command("strip", "--strip-all", stripped).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v %s", err, out)
	}
	goSrc := filepath.Join(dir, "main.go")
	if err := os.WriteFile(goSrc, []byte(goProgSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	goProg := filepath.Join(dir, "goprog")
	build := command("go", "build", "-o", goProg, goSrc)
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v %s", err, out)
	}
	for _, c := range []struct {
		name, exe, want string
	}{
		{"stripped static", stripped, "is statically linked and stripped: its malloc has no symbol to probe: memtrace cannot trace it"},
		{"go", goProg, "is a Go program: its allocator is Go's own, not malloc: memtrace cannot trace it"},
	} {
		t.Run(c.name+"/launch", func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			marker := filepath.Join(t.TempDir(), "truth")
			code, so, se := memtraceRun(t, []string{"MEMTRACE_TRUTH=" + marker}, "-o", log, "--", c.exe)
			if code == 0 {
				t.Errorf("exit 0, want non-zero (stdout %q)", so)
			}
			oneLine(t, se, c.exe+" "+c.want)
			// The program never ran: it would have written ready (Go)
			// or its record (basic).
			if strings.Contains(so, "ready") {
				t.Errorf("the program ran: %q", so)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the program ran: it wrote its record")
			}
		})
		t.Run(c.name+"/attach", func(t *testing.T) {
			prog := command(c.exe)
			prog.Env = append(os.Environ(), "MEMTRACE_TEST_WAIT=1", "MEMTRACE_TRUTH="+filepath.Join(t.TempDir(), "truth"))
			in, _ := prog.StdinPipe()
			out, _ := prog.StdoutPipe()
			if err := prog.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- prog.Wait() }()
			defer prog.Process.Kill()
			rd := bufio.NewReader(out)
			if l, _ := rd.ReadString('\n'); l != "ready\n" {
				t.Fatalf("program said %q", l)
			}
			code, _, se := memtraceRun(t, nil, "-p", fmt.Sprint(prog.Process.Pid))
			if code == 0 {
				t.Errorf("exit 0, want non-zero")
			}
			oneLine(t, se, fmt.Sprintf("process %d (%s) %s", prog.Process.Pid, c.exe, c.want))
			// Left as it was: it still runs, and finishes when let go.
			in.Write([]byte{'g'})
			in.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("the program after memtrace -p: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("the program did not finish after memtrace -p gave up")
			}
		})
	}
}
