package preload

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/runner"
)

var (
	buildOnce sync.Once
	builtLib  string
	builtProg string
	buildErr  error
)

// build compiles the library (through its Makefile, as make build does) and
// the test program, once per test binary.
func build(t *testing.T) (lib, prog string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "memtrace-preload-test-")
		if err != nil {
			buildErr = err
			return
		}
		builtLib = filepath.Join(dir, LibName)
		builtProg = filepath.Join(dir, "prog")
		if out, err := exec.Command("make", "-s", "OUT="+builtLib).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("make the library (needs gcc and make): %v\n%s", err, out)
			return
		}
		if out, err := exec.Command("gcc", "-O1", "-g", "-fno-builtin", "-pthread", "-rdynamic", "-o", builtProg, "testdata/prog.c").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("compile testdata/prog.c: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtLib, builtProg
}

func runDirect(t *testing.T, env []string, args ...string) ([]byte, error) {
	lib, prog := build(t)
	cmd := exec.Command(prog, args...)
	cmd.Env = append(append(os.Environ(), "LD_PRELOAD="+lib), env...)
	return cmd.CombinedOutput()
}

// TestLayoutMatchesLogfmt parses every line the library writes with logfmt
// and renders it again with logfmt's writers: the bytes must be identical,
// the header's too (an argument with bytes to quote goes into its cmd=).
func TestLayoutMatchesLogfmt(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	if out, err := runDirect(t, []string{"MEMTRACK_OUTPUT=" + log, "MEMTRACK_STACK_DEPTH=6"}, "fmt", "a\tb\r\a\"c\\ d\x7f"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	checkLayout(t, data, true)
}

// checkLayout re-renders every line of a log of "prog fmt" with logfmt and
// checks the names and (with stacks) the leaf frame the program produces.
func checkLayout(t *testing.T, data []byte, stacks bool) {
	t.Helper()
	counts := map[logfmt.Kind]int{}
	sc := logfmt.NewScanner(bytes.NewReader(data))
	var l logfmt.Line
	var names = map[string]bool{}
	var sawLeafFrame bool
	headers := 0
	for sc.Scan() {
		line := sc.Line()
		if err := l.Parse(line); err != nil {
			t.Fatalf("logfmt cannot read %q: %v", line, err)
		}
		counts[l.Kind]++
		var again []byte
		switch l.Kind {
		case logfmt.KindAlloc:
			again = logfmt.AppendAlloc(nil, l.TID, string(l.Name), string(l.OpText), l.TS, l.Size, l.Total, l.Ptr)
			names[string(l.Name)] = true
		case logfmt.KindFree:
			again = logfmt.AppendFree(nil, l.TID, string(l.Name), string(l.OpText), l.TS, l.Size, l.Ptr)
		case logfmt.KindExit:
			again = logfmt.AppendExit(nil, l.TID, string(l.Name), l.TS, l.Total)
		case logfmt.KindFrame:
			again = logfmt.AppendFrame(nil, l.FrameIndex, string(l.Module), string(l.Symbol), l.Offset, l.Addr)
			if l.FrameIndex == 0 && string(l.Symbol) == "leaf" {
				sawLeafFrame = true
			}
		case logfmt.KindMeta:
			// The typed writer where there is one: it fixes the order
			// of the keys, and the header's start= format.
			switch string(l.Word) {
			case logfmt.WordHeader:
				h, err := logfmt.ParseHeader(l.Rest)
				if err != nil || h.Mode != logfmt.ModePreload || h.PID <= 0 || h.Start.IsZero() || h.Cmd == "" {
					t.Errorf("header %q: %+v %v", line, h, err)
				}
				again = logfmt.AppendHeader(nil, h)
				headers++
			case logfmt.WordProc:
				p, err := logfmt.ParseProc(l.Rest)
				if err != nil {
					t.Errorf("%q: %v", line, err)
				}
				again = logfmt.AppendProc(nil, p)
			default:
				again = logfmt.AppendMeta(nil, string(l.Word), logfmt.Fields(l.Rest)...)
			}
		default:
			t.Fatalf("not a log line: %q", line)
		}
		if got := strings.TrimSuffix(string(again), "\n"); got != string(line) {
			t.Errorf("layout differs from logfmt\nlibrary: %q\nlogfmt:  %q", line, got)
		}
	}
	for _, k := range []logfmt.Kind{logfmt.KindAlloc, logfmt.KindFree, logfmt.KindExit, logfmt.KindFrame, logfmt.KindMeta} {
		if counts[k] == 0 && (stacks || k != logfmt.KindFrame) {
			t.Errorf("no line of kind %d in the log", k)
		}
	}
	if headers != 1 {
		t.Errorf("%d header lines, want 1", headers)
	}
	// A tab in a thread name is written as '?', as logfmt writes it.
	if !names["a (b) c?"] || !names["worker"] {
		t.Errorf("thread names seen: %v", names)
	}
	if stacks && !sawLeafFrame {
		t.Errorf("no frame #0 in leaf(): frame #0 must be the allocation's caller")
	}
}

func TestRunStatusAndOrder(t *testing.T) {
	lib, prog := build(t)
	t.Setenv(LibEnv, lib)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	st, err := Run(context.Background(), Options{Output: runner.ParseOutput(log)}, []string{prog, "exit3"})
	if err != nil || st != 3 {
		t.Fatalf("exit3: status %d, err %v", st, err)
	}
	st, err = Run(context.Background(), Options{Output: runner.ParseOutput(log)}, []string{prog, "kill"})
	if err != nil || st != 128+9 {
		t.Fatalf("kill: status %d, err %v", st, err)
	}
	// A run with threads gives a log in global time order.
	if st, err = Run(context.Background(), Options{Output: runner.ParseOutput(log), StackDepth: 2}, []string{prog, "fmt"}); err != nil || st != 0 {
		t.Fatalf("fmt: status %d, err %v", st, err)
	}
	var last uint64
	n := 0
	forEach(t, log, func(l *logfmt.Line) {
		if l.Kind == logfmt.KindAlloc || l.Kind == logfmt.KindFree || l.Kind == logfmt.KindExit {
			if l.TS < last {
				t.Fatalf("log not in time order: ts %d after %d", l.TS, last)
			}
			last = l.TS
			n++
		}
	})
	if n < 50 {
		t.Fatalf("only %d events", n)
	}
	if _, err := Run(context.Background(), Options{}, []string{filepath.Join(dir, "no-such-program")}); err == nil {
		t.Fatal("a missing program gave no error")
	}
}

func TestFilters(t *testing.T) {
	lib, prog := build(t)
	t.Setenv(LibEnv, lib)
	log := filepath.Join(t.TempDir(), "log")
	if _, err := Run(context.Background(), Options{Output: runner.ParseOutput(log), TrackThreads: []string{"keep"}, MinSize: 100}, []string{prog, "threads"}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	forEach(t, log, func(l *logfmt.Line) {
		if l.Kind == logfmt.KindAlloc || l.Kind == logfmt.KindFree {
			seen[string(l.Name)]++
			if l.Size < 100 {
				t.Errorf("event below MinSize: %+v", l)
			}
		}
	})
	// Each named thread allocates 20 blocks of 10..390 bytes: 15 of them
	// are >= 100, each with its free.
	if seen["keep-1"] != 30 || seen["keep-2"] != 30 || len(seen) != 2 {
		t.Fatalf("events per thread: %v", seen)
	}
}

// A reader that goes away never kills the program with SIGPIPE.
func TestReaderGoneNoSIGPIPE(t *testing.T) {
	lib, prog := build(t)
	cmd := exec.Command(prog, "spam")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "MEMTRACK_BUFFER_SIZE=4K")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stderr)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	stderr.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("program died after its log reader left: %v", err)
	}
	if out.String() != "done\n" {
		t.Fatalf("stdout %q", out.String())
	}
}

// MEMTRACK_PORT serves the log on loopback to one viewer; the viewer may
// leave early.
func TestPort(t *testing.T) {
	lib, prog := build(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for _, leaveEarly := range []bool{false, true} {
		cmd := exec.Command(prog, map[bool]string{false: "fmt", true: "spam"}[leaveEarly])
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "MEMTRACK_PORT="+strconv.Itoa(port))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var c net.Conn
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err = net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			cmd.Process.Kill()
			t.Fatalf("connect: %v", err)
		}
		sc := logfmt.NewScanner(c)
		var l logfmt.Line
		events := 0
		for sc.Scan() {
			if err := l.Parse(sc.Line()); err != nil {
				t.Fatal(err)
			}
			if l.Kind == logfmt.KindAlloc {
				events++
			}
			if leaveEarly && events == 10 {
				break
			}
		}
		c.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("leaveEarly=%v: program: %v\n%s", leaveEarly, err, stderr.String())
		}
		if events < 10 {
			t.Fatalf("only %d alloc events over TCP", events)
		}
		if !strings.Contains(stderr.String(), "127.0.0.1:"+strconv.Itoa(port)) {
			t.Fatalf("no notice of the loopback address: %q", stderr.String())
		}
	}
}

// An exec'd program appends to the same log, announced by a proc line,
// on the same time axis; the parent's lines stay.
func TestExecAppends(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	out, err := runDirect(t, []string{"MEMTRACK_OUTPUT=" + log}, "exec")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("exec: %v\n%s", err, out)
	}
	var headers, execs int
	var sawParent, sawChild bool
	forEach(t, log, func(l *logfmt.Line) {
		switch {
		case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordHeader:
			headers++
		case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordProc:
			if v, _ := logfmt.Field(logfmt.Fields(l.Rest), "event"); v == "exec" {
				execs++
			}
		case l.Kind == logfmt.KindAlloc && l.Size == 4321:
			sawParent = true
		case l.Kind == logfmt.KindAlloc && l.Size == 5 && execs == 1:
			sawChild = true
		}
	})
	if headers != 1 || execs != 1 || !sawParent || !sawChild {
		t.Fatalf("headers=%d execs=%d parent=%v child=%v", headers, execs, sawParent, sawChild)
	}
}

func TestSortLog(t *testing.T) {
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "1"})
	b = logfmt.AppendAlloc(b, 1, "a", "malloc", 5, 1, 1, 0x10)
	b = logfmt.AppendFrame(b, 0, "m", "f", 1, 2)
	b = logfmt.AppendAlloc(b, 1, "a", "malloc", 9, 1, 2, 0x20)
	b = logfmt.AppendAlloc(b, 2, "b", "malloc", 3, 1, 1, 0x30)
	b = logfmt.AppendFrame(b, 0, "m", "g", 1, 3)
	b = logfmt.AppendAlloc(b, 2, "b", "malloc", 7, 1, 2, 0x40)
	out, sorted := SortLog(b)
	if sorted {
		t.Fatal("unsorted input reported sorted")
	}
	var want []byte
	want = logfmt.AppendMeta(want, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "1"})
	want = logfmt.AppendAlloc(want, 2, "b", "malloc", 3, 1, 1, 0x30)
	want = logfmt.AppendFrame(want, 0, "m", "g", 1, 3)
	want = logfmt.AppendAlloc(want, 1, "a", "malloc", 5, 1, 1, 0x10)
	want = logfmt.AppendFrame(want, 0, "m", "f", 1, 2)
	want = logfmt.AppendAlloc(want, 2, "b", "malloc", 7, 1, 2, 0x40)
	want = logfmt.AppendAlloc(want, 1, "a", "malloc", 9, 1, 2, 0x20)
	if !bytes.Equal(out, want) {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	if _, sorted := SortLog(want); !sorted {
		t.Fatal("sorted input reported unsorted")
	}
}

func TestEnv(t *testing.T) {
	env, err := libEnv(Options{Listen: "0.0.0.0:4242", MinSize: 8, StackDepth: 3, StackThreads: []string{"a", "b"}, BufferSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(env, " ")
	// Without --follow only memtrace's own child is traced (MEMTRACE_PPID).
	want := "MEMTRACE_LISTEN=0.0.0.0:4242 MEMTRACK_PORT=4242 MEMTRACK_MIN_SIZE=8 MEMTRACK_STACK_DEPTH=3 MEMTRACK_STACK_THREADS=a,b " +
		"MEMTRACE_FOLLOW=0 MEMTRACE_PPID=" + strconv.Itoa(os.Getpid()) + " MEMTRACK_BUFFER_SIZE=0"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// With it, and in the drop-in text mode (memtrack's default), the
	// library follows: neither is set.
	for _, o := range []Options{{Follow: true}, {Text: true}} {
		env, err := libEnv(o)
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.Join(env, " "); strings.Contains(s, "MEMTRACE_FOLLOW") || strings.Contains(s, ppidEnv) {
			t.Errorf("follow %v, text %v: %s", o.Follow, o.Text, s)
		}
	}
	// Inherited values never speak for memtrace's options.
	ce := strings.Join(childEnv([]string{"MEMTRACE_FOLLOW=1", ppidEnv + "=1", "HOME=/h"}, "/lib.so", nil), " ")
	if ce != "HOME=/h LD_PRELOAD=/lib.so" {
		t.Errorf("child environment %q keeps inherited follow settings", ce)
	}
	for _, listen := range []string{"[::1]:x", "127.0.0.1:70000", "127.0.0.1", ":0"} {
		if _, err := libEnv(Options{Listen: listen}); err == nil {
			t.Errorf("--listen %s accepted", listen)
		}
	}
}

// forEachLine is forEach over a log's bytes.
func forEachLine(t *testing.T, data []byte, fn func(*logfmt.Line)) {
	t.Helper()
	forEachIn(t, bytes.NewReader(data), fn)
}

func forEach(t *testing.T, path string, fn func(*logfmt.Line)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	forEachIn(t, f, fn)
}

// forEachIn parses every line r holds and calls fn with it.
func forEachIn(t *testing.T, r io.Reader, fn func(*logfmt.Line)) {
	t.Helper()
	sc := logfmt.NewScanner(r)
	var l logfmt.Line
	for sc.Scan() {
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("%q: %v", sc.Line(), err)
		}
		fn(&l)
	}
}
