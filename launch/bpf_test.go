package launch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/runner"
)

// allocLines is the log's allocation and free lines of tid, as
// "op size ptr".
func allocLines(t *testing.T, log []byte, tid int) []string {
	t.Helper()
	var out []string
	sc := logfmt.NewScanner(bytes.NewReader(log))
	var l logfmt.Line
	for sc.Scan() {
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("bad log line %q: %v", sc.Line(), err)
		}
		if (l.Kind == logfmt.KindAlloc || l.Kind == logfmt.KindFree) && l.TID == int64(tid) {
			out = append(out, fmt.Sprintf("%s %d %#x", l.Op, l.Size, l.Ptr))
		}
	}
	return out
}

// cProgram builds src, a program that writes the pointers it got to the
// file named by its last argument.
func cProgram(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755) // run as the user behind sudo, if there is one
	c, bin := filepath.Join(dir, "p.c"), filepath.Join(dir, "p")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O0", "-o", bin, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// ptrs reads the pointers the program wrote.
func ptrs(t *testing.T, path string, n int) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the program's record: %v", err)
	}
	f := strings.Fields(string(b))
	if len(f) != n {
		t.Fatalf("the program's record %q: want %d pointers", b, n)
	}
	return f
}

const recordSrc = `#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void record(const char *path, void *a, void *b, void *c) {
	char buf[128]; /* snprintf, not stdio's FILE: no allocation of its own */
	int n = snprintf(buf, sizeof buf, "%p %p %p\n", a, b, c);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	write(fd, buf, n);
	close(fd);
}
`

// TestRunLaunchBPF launches a C program with the real eBPF tracer through
// Run: memtrace's status is the program's, and the log (mode=bpf) has
// exactly the program's calls with its pointers, from the first.
func TestRunLaunchBPF(t *testing.T) {
	bpftest.Require(t)
	bin := cProgram(t, recordSrc+`
int main(int argc, char **argv) {
	void *volatile a = malloc(12345);
	void *volatile b = calloc(3, 1000);
	void *volatile c = realloc(a, 20000);
	free(b);
	free(c);
	record(argv[1], a, b, c);
	return 4;
}
`)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	rec := filepath.Join(dir, "rec")
	got := launchBPF(t, []string{bin, rec}, 4)
	p := ptrs(t, rec, 3)
	pid := headerPID(t, got)
	want := []string{"malloc 12345 " + p[0], "calloc 3000 " + p[1], "free 12345 " + p[0], "realloc 20000 " + p[2], "free 3000 " + p[1], "free 20000 " + p[2]}
	if lines := allocLines(t, got, pid); !slices.Equal(lines, want) {
		t.Errorf("the program's calls in the log:\n%s\nwant:\n%s\nlog:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"), got)
	}
}

// launchBPF runs argv through Run with the real eBPF tracer, wants its
// exit status and a log of mode=bpf (no fallback), and returns the log.
func launchBPF(t *testing.T, argv []string, status int) []byte {
	t.Helper()
	log := filepath.Join(t.TempDir(), "app.log")
	var stderr syncBuf
	got, err := Run(Options{Argv: argv, Output: runner.ParseOutput(log), StackUnwind: "dwarf", PeakTopN: 10}, &stderr, noFallback{t})
	if err != nil || got != status {
		t.Fatalf("Run = %d, %v (stderr %q); want %d, nil", got, err, stderr.String(), status)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	bpftest.RequireModeBPF(t, b)
	return b
}

// TestRunAttachBPF attaches to a running C program with the real eBPF
// tracer through Run: once the header is written (the probes are on),
// the program's calls are logged exactly, and Run ends when it exits,
// leaving its status alone.
func TestRunAttachBPF(t *testing.T) {
	bpftest.Require(t)
	bin := cProgram(t, recordSrc+`
int main(int argc, char **argv) {
	char ch;
	if (read(0, &ch, 1) != 1)
		return 1;
	void *volatile a = malloc(23456);
	void *volatile b = malloc(7);
	free(a);
	record(argv[1], a, b, 0);
	return 0;
}
`)
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	prog, finish := attachBPF(t, Options{}, bin, rec)
	got := finish()
	if err := prog.Wait(); err != nil {
		t.Errorf("the attached program: %v, want exit 0", err)
	}
	p := ptrs(t, rec, 3)
	want := []string{"malloc 23456 " + p[0], "malloc 7 " + p[1], "free 23456 " + p[0]}
	if lines := allocLines(t, got, prog.Process.Pid); !slices.Equal(lines, want) {
		t.Errorf("the program's calls in the log:\n%s\nwant:\n%s\nlog:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"), got)
	}
}

// attachBPF starts argv, which waits for a byte on its stdin, and
// attaches Run to it with the real eBPF tracer (o's other options kept).
// Once the log says the probes are on, it returns the program and finish,
// which lets the program go, wants Run to end with status 0 within 30 s,
// and returns the log, of mode=bpf.
func attachBPF(t *testing.T, o Options, argv ...string) (*exec.Cmd, func() []byte) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "attach.log")
	prog := exec.Command(argv[0], argv[1:]...)
	stdin, err := prog.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); prog.Process.Kill(); prog.Wait() })
	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	var stderr syncBuf
	o.PIDs, o.Output, o.StackUnwind, o.PeakTopN = []int{prog.Process.Pid}, runner.ParseOutput(log), "dwarf", 10
	go func() {
		s, err := Run(o, &stderr, nil)
		done <- result{s, err}
	}()
	waitFile(t, log, "[memtrace] proc event=attach")
	return prog, func() []byte {
		t.Helper()
		stdin.Write([]byte{1})
		select {
		case r := <-done:
			if r.err != nil || r.status != 0 {
				t.Fatalf("Run = %d, %v (stderr %q)", r.status, r.err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return in 30 s after the program exited")
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		bpftest.RequireModeBPF(t, b)
		return b
	}
}

// headerPID is the header's pid=.
func headerPID(t *testing.T, log []byte) int {
	t.Helper()
	sc := logfmt.NewScanner(bytes.NewReader(log))
	var l logfmt.Line
	for sc.Scan() {
		if l.Parse(sc.Line()) == nil && l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordHeader {
			v, _ := logfmt.Field(logfmt.Fields(l.Rest), "pid")
			var pid int
			fmt.Sscan(v, &pid)
			return pid
		}
	}
	t.Fatal("no header")
	return 0
}
