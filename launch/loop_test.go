package launch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/internal/cli"
	"github.com/memtrace/memtrace/logfmt"
)

// deadPIDs returns n PIDs no process can have (above pid_max): the loop's
// probes of them (/proc reads, pidfds) find nothing, as for a process
// that is gone.
func deadPIDs(t *testing.T, n int) []int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for i := 1; i <= n; i++ {
		out = append(out, max+i)
	}
	return out
}

// syncBuf is the log, written by the loop and read by the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuf) Close() error { return nil }
func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func comm(s string) (c [16]byte) {
	copy(c[:], s)
	return c
}

var (
	startRE    = regexp.MustCompile(` start=\S+`)
	durationRE = regexp.MustCompile(` duration_us=\d+`)
	nowTSRE    = regexp.MustCompile(`^(\[memtrace\] (lost|proc event=untraced) .*) ts=\d+`)
)

// stable masks what depends on the clock: the header's start=, the
// summary's duration_us= and the ts= of lines written at the moment they
// are noticed (lost, untraced) rather than at an event's time.
func stable(log string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		l = startRE.ReplaceAllString(l, " start=S")
		l = durationRE.ReplaceAllString(l, " duration_us=D")
		l = nowTSRE.ReplaceAllString(l, "$1 ts=T")
		out = append(out, l)
	}
	return out
}

func diffLines(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLoopLaunched feeds the loop what the kernel side sends for a
// launched program that forks a child, which frees a block it inherited
// and exits, while the ring loses records: every line of the log, and
// what the loop asked of the tracer (probe the new image, resume the
// held processes, release the exited child), are checked.
func TestLoopLaunched(t *testing.T) {
	pids := deadPIDs(t, 2)
	pid, child := pids[0], pids[1]
	p32, c32 := uint32(pid), uint32(child)
	fake := newFake()
	out := &syncBuf{}
	var stderr syncBuf
	start := monoNow() - uint64(10*time.Second)
	at := func(us uint64) uint64 { return start + us*1000 }
	o := &Options{}
	l := newLoop(o, fake, out, &stderr, start)
	var libsAsked []string
	l.libs = func(exe string, env []string) []string {
		libsAsked = append(libsAsked, exe)
		return []string{"/lib/fake-libc.so.6"}
	}
	// What launch does before it lets the shim exec PROG.
	l.pids[pid] = true
	l.sess.AddLaunched(p32)
	l.header([]int{pid}, "prog", "prog a b")
	l.sess.Released(p32, at(5))
	pc, cc := comm("prog"), comm("prog")
	fake.push(
		// The shim's threads end at its exec: not the program's.
		event.Event{Kind: event.KindExit, TGID: p32, TID: p32 + 100, TS: at(8), Comm: pc},
		event.Event{Kind: event.KindExec, TGID: p32, TID: p32, TS: at(10), Comm: pc, Flags: event.FlagHeld},
		event.Event{Kind: event.KindAlloc, Op: uint8(logfmt.OpMalloc), TGID: p32, TID: p32, TS: at(20), Ptr: 0x1000, Size: 100, Comm: pc},
		event.Event{Kind: event.KindAlloc, Op: uint8(logfmt.OpCalloc), TGID: p32, TID: p32, TS: at(25), Ptr: 0x2000, Size: 48, Comm: pc},
		event.Event{Kind: event.KindFork, TGID: p32, TID: p32, TS: at(30), Ptr: uint64(child), Flags: event.FlagHeld, Comm: pc},
		event.Event{Kind: event.KindFree, Op: uint8(logfmt.OpFree), TGID: c32, TID: c32, TS: at(40), Ptr: 0x1000, Comm: cc},
		event.Event{Kind: event.KindExit, TGID: c32, TID: c32, TS: at(50), Comm: cc},
		event.Event{Kind: event.KindFree, Op: uint8(logfmt.OpFree), TGID: p32, TID: p32, TS: at(60), Ptr: 0x2000, Comm: pc},
		// A free of a block the launched program never allocated is
		// libc's bookkeeping, not logged.
		event.Event{Kind: event.KindFree, Op: uint8(logfmt.OpFree), TGID: p32, TID: p32, TS: at(61), Ptr: 0x9000, Comm: pc},
		event.Event{Kind: event.KindExit, TGID: p32, TID: p32, TS: at(70), Comm: pc},
	)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- l.run(stop) }()
	fake.waitCall(t, "release "+strconv.Itoa(child))
	fake.setLost(3)
	close(stop)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not finish in 10 s after stop")
	}
	bpftest.RequireModeBPF(t, []byte(out.String()))
	p, c := strconv.Itoa(pid), strconv.Itoa(child)
	// Time stamps count from the release (at 5), not the loop's start.
	diffLines(t, stable(out.String()), []string{
		`[memtrace] header version=` + cli.Version + ` pid=` + p + ` pids=` + p + ` comm=prog cmd="prog a b" start=S mode=bpf probes=uprobe_session`,
		`[memtrace] proc event=exec pid=` + p + ` ts=5 comm=prog`,
		`[memtrace] thread tid=` + p + ` pid=` + p + ` name=prog`,
		alloc(pid, "malloc", 15, 100, 100, 0x1000),
		alloc(pid, "calloc", 20, 48, 148, 0x2000),
		`[memtrace] proc event=fork pid=` + c + ` ppid=` + p + ` ts=25`,
		`[memtrace] thread tid=` + c + ` pid=` + c + ` name=prog`,
		free(child, "free", 35, 100, 0x1000),
		`[memtrace] proc event=exit pid=` + c + ` ts=45`,
		exit(child, 45, 0),
		free(pid, "free", 55, 48, 0x2000),
		`[memtrace] proc event=exit pid=` + p + ` ts=65`,
		exit(pid, 65, 148),
		`[memtrace] lost count=3 total=3 ts=T`,
		`[memtrace] summary events=10 allocs=2 frees=2 lost=3 duration_us=D`,
	})
	if want := "/proc/" + p + "/exe"; !slices.Equal(libsAsked, []string{want}) {
		t.Errorf("libraries listed for %q, want once for %s (the exec'd image)", libsAsked, want)
	}
	calls := fake.callList()
	order := []string{"attach " + p + " /lib/fake-libc.so.6", "resume " + p, "scan " + c, "resume " + c, "release " + c, "detach"}
	at0 := 0
	for _, want := range order {
		i := slices.Index(calls[at0:], want)
		if i < 0 {
			t.Fatalf("calls %q: no %q after %q (want the order %q)", calls, want, calls[:at0], order)
		}
		at0 += i + 1
	}
	if !strings.Contains(stderr.String(), "memtrace: 3 records lost: the reader fell behind; raise --buffer-size\n") {
		t.Errorf("stderr %q does not say records were lost", stderr.String())
	}
}

// alloc, free and exit are docs/spec.md §2.1's memtrack lines (its printf
// formats) of a thread named prog.
func alloc(tid int, op string, ts, size, total, ptr uint64) string {
	return fmt.Sprintf("[memtrack] tid=%-6d (%-15s) %-10s ts=%-12d size=%-12d  total=%-12d  ptr=0x%x", tid, "prog", op, ts, size, total, ptr)
}

func free(tid int, op string, ts, size, ptr uint64) string {
	return fmt.Sprintf("[memtrack] tid=%-6d (%-15s) %-10s ts=%-12d size=%-12d  ptr=0x%x", tid, "prog", op, ts, size, ptr)
}

func exit(tid int, ts, total uint64) string {
	return fmt.Sprintf("[memtrack] tid=%-6d (%-15s) EXIT       ts=%-12d total=%-12d bytes allocated", tid, "prog", ts, total)
}

// TestLoopUntraced: a forked child that cannot be probed, and an exec'd
// image whose library cannot be, are given up on: an untraced line with
// the reason, one stderr line, its probes released, no rescans of it; a
// held child is resumed all the same, so nothing stays stopped.
func TestLoopUntraced(t *testing.T) {
	pids := deadPIDs(t, 3)
	parent, child, execer := pids[0], pids[1], pids[2]
	fake := newFake()
	fake.session, fake.multi = false, true
	fake.fellBack = []string{"malloc"}
	fake.scanErr[child] = errors.New("too many open files")
	out := &syncBuf{}
	var stderr syncBuf
	start := monoNow() - uint64(10*time.Second)
	l := newLoop(&Options{}, fake, out, &stderr, start)
	l.libs = func(string, []string) []string { return []string{"/lib/a.so", "/lib/b.so"} }
	l.pids[parent] = true
	l.sess.AddProcess(uint32(parent), true)
	l.header([]int{parent, execer}, "prog", "prog")
	fake.attachE = errors.New("attach uprobe: bad file descriptor")
	fake.push(
		event.Event{Kind: event.KindFork, TGID: uint32(parent), TID: uint32(parent), TS: start + 1000, Ptr: uint64(child), Flags: event.FlagHeld, Comm: comm("prog")},
		event.Event{Kind: event.KindExec, TGID: uint32(execer), TID: uint32(execer), TS: start + 2000, Flags: event.FlagHeld, Comm: comm("next")},
	)
	l.pids[execer] = true
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- l.run(stop) }()
	fake.waitCall(t, "resume "+strconv.Itoa(execer))
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p, c, e := strconv.Itoa(parent), strconv.Itoa(child), strconv.Itoa(execer)
	diffLines(t, stable(out.String()), []string{
		`[memtrace] header version=` + cli.Version + ` pid=` + p + ` pids=` + p + `,` + e + ` comm=prog cmd=prog start=S mode=bpf probes=uprobe_multi singlestep=malloc`,
		`[memtrace] proc event=untraced pid=` + c + ` ts=T reason="too many open files"`,
		`[memtrace] proc event=untraced pid=` + e + ` ts=T reason="attach uprobe: bad file descriptor"`,
		`[memtrace] proc event=fork pid=` + c + ` ppid=` + p + ` ts=1`,
		`[memtrace] proc event=exec pid=` + e + ` ts=2 comm=next`,
		`[memtrace] summary events=2 allocs=0 frees=0 lost=0 duration_us=D`,
	})
	calls := fake.callList()
	for _, want := range []string{"release " + c, "resume " + c, "release " + e, "resume " + e, "attach " + e + " /lib/a.so"} {
		if !slices.Contains(calls, want) {
			t.Errorf("calls %q lack %q", calls, want)
		}
	}
	if slices.Contains(calls, "attach "+e+" /lib/b.so") {
		t.Errorf("calls %q: probes went on after the image was given up on", calls)
	}
	l.mu.Lock()
	if l.pids[child] || l.pids[execer] {
		t.Errorf("untraced processes are still among the traced: %v", l.pids)
	}
	l.mu.Unlock()
	for _, want := range []string{
		"memtrace: warning: no emulated instruction to probe in malloc: probing the first instruction, which the kernel single-steps (slower)\n",
		"memtrace: process " + c + " is not traced: too many open files\n",
		"memtrace: process " + e + " is not traced: attach uprobe: bad file descriptor\n",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}
}

// TestLoopReleasedWaitsForExit: an exited main thread's process is
// released only once the whole process is gone, not while other threads
// still run.
func TestLoopReleasedWaitsForExit(t *testing.T) {
	cmd := startSleep(t)
	pid := cmd.Process.Pid
	fake := newFake()
	l := newLoop(&Options{}, fake, &syncBuf{}, &syncBuf{}, monoNow())
	l.released(pid)
	time.Sleep(100 * time.Millisecond)
	if slices.Contains(fake.callList(), "release "+strconv.Itoa(pid)) {
		t.Fatal("released a process that still runs")
	}
	cmd.Process.Kill()
	fake.waitCall(t, "release "+strconv.Itoa(pid))
	cmd.Wait()
}

// TestLoopReadError: a ring-buffer read that fails (not closed) ends the
// loop with the error, named.
func TestLoopReadError(t *testing.T) {
	l := newLoop(&Options{}, errTracer{newFake()}, &syncBuf{}, &syncBuf{}, monoNow())
	err := l.run(make(chan struct{}))
	if err == nil || err.Error() != "read ring buffer: bad ring" {
		t.Fatalf("run = %v, want read ring buffer: bad ring", err)
	}
}

type errTracer struct{ *fakeTracer }

func (errTracer) Read(event.Handler) error { return errors.New("bad ring") }

// TestLoopClosedRing: a ring closed under the loop finishes the log.
func TestLoopClosedRing(t *testing.T) {
	fake := newFake()
	fake.closed = true
	out := &syncBuf{}
	l := newLoop(&Options{}, fake, out, &syncBuf{}, monoNow())
	if err := l.run(make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	diffLines(t, stable(out.String()), []string{"[memtrace] summary events=0 allocs=0 frees=0 lost=0 duration_us=D"})
}

// TestLoopWriteError: a log that cannot be written ends the loop with
// the write error, at the latest at its next flush.
func TestLoopWriteError(t *testing.T) {
	fake := newFake()
	l := newLoop(&Options{}, fake, failWriter{}, &syncBuf{}, monoNow())
	l.header([]int{1}, "a", "a")
	done := make(chan error, 1)
	go func() { done <- l.run(make(chan struct{})) }()
	select {
	case err := <-done:
		if err == nil || !strings.HasPrefix(err.Error(), "write log: ") || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("run = %v, want write log: ... disk full", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the loop went on for 5 s writing to a log that fails")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
func (failWriter) Close() error              { return nil }

// startSleep starts a process that runs until the test kills it (and
// kills it at the end of the test at the latest).
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}
