package preload

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/procreport"
	"github.com/memtrace/memtrace/runner"
)

// Run uses the binary mode (shared memory, converted here) unless told
// otherwise; these tests exercise it directly.

func TestBinaryLayoutAndStacks(t *testing.T) {
	lib, prog := build(t)
	t.Setenv(LibEnv, lib)
	log := filepath.Join(t.TempDir(), "log")
	if st, err := Run(context.Background(), Options{Output: runner.ParseOutput(log), StackDepth: 6}, []string{prog, "fmt"}); err != nil || st != 0 {
		t.Fatalf("status %d, err %v", st, err)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	checkLayout(t, data, true)
}

// An exec'd program writes into the same region: one header, a proc
// exec line, the parent's and the child's events.
func TestBinaryExec(t *testing.T) {
	lib, prog := build(t)
	t.Setenv(LibEnv, lib)
	log := filepath.Join(t.TempDir(), "log")
	st, err := Run(context.Background(), Options{Output: runner.ParseOutput(log)}, []string{prog, "exec"})
	if err != nil || st != 3 {
		t.Fatalf("status %d, err %v", st, err)
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
		case l.Kind == logfmt.KindAlloc && l.Size == 4321 && execs == 0:
			sawParent = true
		case l.Kind == logfmt.KindAlloc && l.Size == 5 && execs == 1:
			sawChild = true
		}
	})
	if headers != 1 || execs != 1 || !sawParent || !sawChild {
		t.Fatalf("headers=%d execs=%d parent=%v child=%v", headers, execs, sawParent, sawChild)
	}
}

// A program killed with SIGKILL: what reached the region is converted,
// and its threads get EXIT lines.
func TestBinaryKilled(t *testing.T) {
	lib, prog := build(t)
	t.Setenv(LibEnv, lib)
	log := filepath.Join(t.TempDir(), "log")
	st, err := Run(context.Background(), Options{Output: runner.ParseOutput(log)}, []string{prog, "kill"})
	if err != nil || st != 128+9 {
		t.Fatalf("status %d, err %v", st, err)
	}
	var alloc, exit bool
	forEach(t, log, func(l *logfmt.Line) {
		alloc = alloc || (l.Kind == logfmt.KindAlloc && l.Size == 5)
		exit = exit || (l.Kind == logfmt.KindExit && l.Total >= 5)
	})
	if !alloc || !exit {
		t.Fatalf("malloc(5) logged: %v, EXIT line: %v", alloc, exit)
	}
}

// runRegion runs cmd with a region of size bytes; with convertLive the
// converter runs alongside, otherwise only after the program has ended
// (memtrace gone while the program runs). It returns the log.
func runRegion(t *testing.T, size int, cmd *exec.Cmd, convertLive bool, extraArgs func(env string) []string) []byte {
	t.Helper()
	return runRegionWith(t, size, cmd, convertLive, extraArgs, nil)
}

// runRegionWith is runRegion with prep called before the converter starts.
func runRegionWith(t *testing.T, size int, cmd *exec.Cmd, convertLive bool, extraArgs func(env string) []string, prep func(b *binLog)) []byte {
	t.Helper()
	log := filepath.Join(t.TempDir(), "log")
	opts := Options{Output: runner.ParseOutput(log), SharedMemory: size}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	b, err := startBinaryLog(t, opts, cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if extraArgs != nil {
		cmd.Args = append(cmd.Args[:1], append(extraArgs(b.reg.env), cmd.Args[1:]...)...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if prep != nil {
		prep(b)
	}
	if convertLive {
		b.start()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the program blocked: %s", out.String())
	}
	if err != nil {
		t.Fatalf("program: %v\n%s", err, out.String())
	}
	if !convertLive {
		b.start()
	}
	if err := b.finish(opts); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// With nobody converting, the program fills the region, waits a bounded
// time for memtrace, then drops records and counts them: it never blocks,
// and the count reaches the log once the region is read (never silent).
func TestBinaryConsumerGoneCountsLost(t *testing.T) {
	lib, prog := build(t)
	cmd := exec.Command(prog, "spam")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	start := time.Now()
	data := runRegion(t, 4*chunkSize, cmd, false, nil)
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the program took %v without a consumer", d)
	}
	var events, lost uint64
	var lostLines int
	sc := logfmt.NewScanner(bytes.NewReader(data))
	var l logfmt.Line
	for sc.Scan() {
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("%q: %v", sc.Line(), err)
		}
		switch {
		case (l.Kind == logfmt.KindAlloc || l.Kind == logfmt.KindFree) && l.Size == 32:
			events++
		case l.Kind == logfmt.KindMeta && string(l.Word) == "lost":
			lostLines++
			kv := logfmt.Fields(l.Rest)
			v, _ := logfmt.Field(kv, "total")
			var err error
			if lost, err = strconv.ParseUint(v, 10, 64); err != nil {
				t.Fatalf("lost line %q: %v", sc.Line(), err)
			}
		}
	}
	// spam: 200000 malloc(32)+free pairs; a few other records (the exit
	// record, the program's own start-up) may be among the lost.
	if lostLines != 1 || lost == 0 || events+lost < 400000 || events+lost > 400010 {
		t.Fatalf("events=%d lost=%d (lines %d): want events+lost = 400000 (+ a few), lost > 0", events, lost, lostLines)
	}
}

// A memtrace that was stopped, not killed (Ctrl-Z, a debugger), and comes
// back: the program found no heartbeat for a second and dropped, but once
// the heartbeat moves again its threads wait for room as before, so
// what they write after memtrace resumed is not dropped. Here nobody converts
// while the program writes 400,000 records of 32 bytes into 4 chunks;
// then the converter starts and the program writes 400,000 of 48 bytes.
func TestBinaryConsumerBackAfterStall(t *testing.T) {
	lib, prog := build(t)
	cmd := exec.Command(prog, "stall")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	log := filepath.Join(t.TempDir(), "log")
	opts := Options{Output: runner.ParseOutput(log), SharedMemory: 4 * chunkSize}
	b, err := startBinaryLog(t, opts, cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	stalled := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := sc.Scan() && sc.Text() == "stalled"
		stalled <- ok
		io.Copy(io.Discard, stdout)
	}()
	select {
	case ok := <-stalled:
		if !ok {
			t.Fatalf("the program did not say stalled: %s", stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the program blocked without a consumer: %s", stderr.String())
	}
	// The program can only tell memtrace is back from its heartbeat:
	// what it writes before the first beat is still dropped.
	beat := atomic.LoadUint32(b.reg.p32(hBeat))
	b.start()
	for deadline := time.Now().Add(30 * time.Second); atomic.LoadUint32(b.reg.p32(hBeat)) == beat; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the converter never beat")
		}
	}
	if _, err := stdin.Write([]byte("g")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the program blocked once memtrace was back: %s", stderr.String())
	}
	if err != nil {
		t.Fatalf("program: %v\n%s", err, stderr.String())
	}
	if err := b.finish(opts); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var before, after int
	var lost uint64
	forEachLine(t, data, func(l *logfmt.Line) {
		switch {
		case (l.Kind == logfmt.KindAlloc || l.Kind == logfmt.KindFree) && l.Size == 32:
			before++
		case (l.Kind == logfmt.KindAlloc || l.Kind == logfmt.KindFree) && l.Size == 48:
			after++
		case l.Kind == logfmt.KindMeta && string(l.Word) == "lost":
			v, _ := logfmt.Field(logfmt.Fields(l.Rest), "total")
			lost, _ = strconv.ParseUint(v, 10, 64)
		}
	})
	// The premise: the first part did give up waiting and drop.
	if lost == 0 || before+int(lost) < 400000 {
		t.Fatalf("before the stall ended: %d records of 32 bytes logged, %d lost: want some lost, the sum 400,000 or more", before, lost)
	}
	// Without the waits the second part loses most of its records (508 to
	// 39,356 of 400,000 logged when the library never waited again, quiet
	// or under three busy loops). With them it loses none, under load
	// too, once the program starts after the 10 ms a dropping thread
	// waits before it tries a chunk again (the sleep in prog.c).
	if after != 400000 {
		t.Fatalf("%d records of 48 bytes logged after memtrace came back, want 400,000 (%d lost in all)", after, lost)
	}
}

// A converter whose low-priority loop gets no CPU (other work on the
// machine starves it) must not make the program wait for it, nor lose
// records: the boost, at memtrace's priority, takes over once the region
// fills. The region here holds 4 chunks, the program writes 400,000
// records; without the boost the program waits 2 s, then drops records.
// The copies (copy.go) hold 4 slots too: the drain, once they are full,
// converts in several passes.
func TestBoostTakesOverAStarvedConverter(t *testing.T) {
	lib, prog := build(t)
	cmd := exec.Command(prog, "spam")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	var conv *converter
	data := runRegionWith(t, 4*chunkSize, cmd, true, nil, func(b *binLog) {
		conv = b.conv
		conv.stallRun = true
	})
	var events int
	lost := ""
	forEachLine(t, data, func(l *logfmt.Line) {
		switch {
		case (l.Kind == logfmt.KindAlloc || l.Kind == logfmt.KindFree) && l.Size == 32:
			events++
		case l.Kind == logfmt.KindMeta && string(l.Word) == "lost":
			lost = string(l.Rest)
		}
	})
	if events != 400000 || lost != "" || conv.boosts == 0 {
		t.Fatalf("events=%d (want 400000), lost line %q (want none), boosts %d (want > 0)", events, lost, conv.boosts)
	}
}

// Live threads that wrote all they had hold the copies' slots without a
// backlog: past three quarters of them the boost must not take over for
// as long as the threads live, polling at memtrace's priority without
// the run loop's yield. Here 15 threads hold 15 of the 16 small slots,
// quiet for a second.
func TestBoostLeavesIdleThreadsAlone(t *testing.T) {
	lib, prog := build(t)
	cmd := exec.Command(prog, "idle")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	var conv *converter
	data := runRegionWith(t, 4*chunkSize, cmd, true, nil, func(b *binLog) { conv = b.conv })
	if n := conv.q.tier(true).soft; n != 16 {
		t.Fatalf("%d small slots, want 16 (the test's premise)", n)
	}
	var allocs, frees int
	forEachLine(t, data, func(l *logfmt.Line) {
		switch {
		case l.Kind == logfmt.KindAlloc && l.Size == 4242:
			allocs++
		case l.Kind == logfmt.KindFree && l.Size == 4242:
			frees++
		}
	})
	if allocs != 15 || frees != 15 {
		t.Errorf("%d allocations and %d frees of 4242 bytes, want 15 each", allocs, frees)
	}
	// Until the records are written (the merge holds them for
	// mergeSlack) the boost may poll every millisecond; over the second
	// the threads idle it would poll about a thousand times.
	t.Logf("boost: %d takeovers, %d passes", conv.boosts, conv.boostSteps)
	if conv.boostSteps > 200 {
		t.Errorf("the boost made %d passes over idle threads' slots (takeovers %d)", conv.boostSteps, conv.boosts)
	}
}

// TestEndedStreamsDropped: the converter forgets a stream once every record
// of it is written and none can follow (its thread gone after its EXIT, or
// its process untraced): a program that starts a thread per request must
// not grow memtrace's memory, nor each pass's walk over the streams, with
// every thread it ever had (2000 here: the build before kept all of them,
// and its CPU grew with their square).
func TestEndedStreamsDropped(t *testing.T) {
	lib, prog := build(t)
	cmd := exec.Command(prog, "serial")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "MEMTRACE_FOLLOW=0")
	var conv *converter
	data := runRegionWith(t, 64*chunkSize, cmd, true, nil, func(b *binLog) { conv = b.conv })
	var allocs, frees, exits, untraced int
	forEachLine(t, data, func(l *logfmt.Line) {
		switch {
		case l.Kind == logfmt.KindAlloc && l.Size == 3131:
			allocs++
		case l.Kind == logfmt.KindFree && l.Size == 3131:
			frees++
		case l.Kind == logfmt.KindExit:
			exits++
		case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordProc && bytes.Contains(l.Rest, []byte("event=untraced")):
			untraced++
		}
	})
	if allocs != 2000 || frees != 2000 || exits < 2000 || untraced != 1 {
		t.Errorf("%d allocations and %d frees of 3131 bytes, %d EXIT lines, %d untraced lines; want 2000, 2000, >= 2000, 1",
			allocs, frees, exits, untraced)
		t.Logf("records read after later ones were written: %d", conv.late)
	}
	// The main thread's stream may stay; a few ended threads' chunks may
	// wait for the copier's sweep that finds them gone.
	t.Logf("streams kept %d, dropped %d", len(conv.streams), conv.gone)
	if n := len(conv.streams); n > 20 || conv.gone < 1980 {
		t.Errorf("the converter keeps %d streams and dropped %d, after 2001 threads ended", n, conv.gone)
	}
}

// TestCrowdedCopies: more threads than CPUs pass blocks from thread to
// thread (one frees what another allocated, and allocates it again) in a
// region of 20 chunks for 15 threads, so that the region and the copies
// fill, records wait in the region and threads are preempted in the
// middle of their records. Every free must still come after its block's
// allocation: a record written before an older one that waited gives a
// free of an unknown block (size 0) and a leak that is not one. The build
// before failed it four ways: the TSC read out of order with the call (a
// free timed before the allocation it follows: 1,439 of 280,000 even with
// the default region), records written past one a preempted thread held
// or the copier left in the region, the end writing what it read before
// the copies' leftovers (3,016 frees of unknown blocks, 121,763 records
// read late here), and, once the watermark waited for those, threads
// that waited for a chunk in the middle of a record holding it back
// until memtrace wrote past them.
func TestCrowdedCopies(t *testing.T) {
	lib, prog := build(t)
	const per = 20000
	cmd := exec.Command(prog, "crowd", "14", strconv.Itoa(per))
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	var conv *converter
	data := runRegionWith(t, 4*chunkSize, cmd, true, nil, func(b *binLog) { conv = b.conv })
	var allocs, frees, unknown int
	forEachLine(t, data, func(l *logfmt.Line) {
		switch {
		case l.Kind == logfmt.KindAlloc && l.Size == 5555:
			allocs++
		case l.Kind == logfmt.KindFree && l.Size == 5555:
			frees++
		case l.Kind == logfmt.KindFree && l.Size == 0:
			unknown++
		}
	})
	t.Logf("overflows %d; passes that wrote past a record left in the region: %d; records read after later ones were written: %d", conv.overflows, conv.gaveUp, conv.late)
	if want := 14 * per; allocs != want || frees != want || unknown != 0 {
		t.Errorf("%d allocations and %d frees of 5555 bytes, %d frees of blocks not allocated; want %d, %d, 0", allocs, frees, unknown, want, want)
	}
}

// The library in binary mode for the ARM targets, under qemu-user, with the
// converter running here (the 32-bit ARM layout is the same as 64-bit).
func TestBinaryCrossARM(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds the library and runs it under qemu-user: make test runs it")
	}
	for _, a := range []struct{ triplet, qemu string }{{"arm-linux-gnueabihf", "qemu-arm"}, {"aarch64-linux-gnu", "qemu-aarch64"}} {
		t.Run(a.triplet, func(t *testing.T) {
			for _, tool := range []string{a.triplet + "-gcc", a.qemu} {
				if _, err := exec.LookPath(tool); err != nil {
					bpftest.Unavailable(t, "%s is missing (make deps installs it)", tool)
				}
			}
			dir := t.TempDir()
			lib, prog := filepath.Join(dir, LibName), filepath.Join(dir, "prog")
			if out, err := exec.Command("make", "-s", "CC="+a.triplet+"-gcc", "OUT="+lib).CombinedOutput(); err != nil {
				t.Fatalf("make: %v\n%s", err, out)
			}
			if out, err := exec.Command(a.triplet+"-gcc", "-O1", "-g", "-fno-builtin", "-pthread", "-rdynamic", "-o", prog, "testdata/prog.c").CombinedOutput(); err != nil {
				t.Fatalf("compile: %v\n%s", err, out)
			}
			cmd := exec.Command(a.qemu, prog, "fmt")
			data := runRegion(t, 0, cmd, true, func(env string) []string {
				return []string{"-L", "/usr/" + a.triplet, "-E", "LD_PRELOAD=" + lib, "-E", env}
			})
			if !strings.Contains(string(data), "mode=preload") {
				t.Fatalf("no header in\n%s", data)
			}
			// No stacks here: qemu's backtrace differs; the layout and
			// names must match as natively.
			checkLayout(t, data, false)
		})
	}
}

// figuresProg keeps twenty 1000-byte blocks of small() taken 8 ms apart
// (snapshots see them come), then ten 5000-byte blocks of big() (the
// peak), frees back to ten blocks of small() and waits, so that the last
// snapshots come after the peak.
const figuresProg = `#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline)) char *small(int i) { char *p = malloc(1000 + i); p[0] = 1; return p; }
__attribute__((noinline)) char *big(int i) { char *p = malloc(5000 + i); p[0] = 2; return p; }
int main(int argc, char **argv) {
	char *blocks[30];
	for (int i = 0; i < 30; i++) {
		blocks[i] = i < 20 ? small(i) : big(i);
		if (i < 20) usleep(8000);
	}
	for (int i = 29; i >= 10; i--) free(blocks[i]);
	/* argv[1].freed says so; the program then waits for argv[1] (the
	   test's word that the snapshots it wants are written). */
	char path[4096];
	snprintf(path, sizeof path, "%s.freed", argv[1]);
	close(open(path, O_CREAT | O_WRONLY, 0644)); /* no allocation */
	for (int i = 0; i < 3000 && access(argv[1], F_OK) != 0; i++) usleep(10000);
	return 0;
}
`

// TestSnapshotsAndReportDir: with Interval and ReportDir the preload path
// writes --interval snapshots and a --report-dir file per process, through
// the eBPF path's session: the last snapshot and the report file give the
// peak and the bytes live at exit that the log's own lines add up to, and
// the stack holding most at the peak is named from the library's frames.
//
// The program waits before it exits until two snapshots after its frees
// are in the log: the converter takes no snapshot while it handles a batch
// of records, and the first batch with stacks has their libraries' symbols
// read, which on a loaded machine (make check's shards) took half a
// second, the whole of a shorter fixed wait.
func TestSnapshotsAndReportDir(t *testing.T) {
	lib, _ := build(t)
	t.Setenv(LibEnv, lib)
	dir := t.TempDir()
	src, prog := filepath.Join(dir, "figures.c"), filepath.Join(dir, "figures")
	if err := os.WriteFile(src, []byte(figuresProg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O1", "-g", "-rdynamic", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	log, reports, gate := filepath.Join(dir, "log"), filepath.Join(dir, "reports"), filepath.Join(dir, "gate")
	opts := Options{Output: runner.ParseOutput(log), StackDepth: 8, Interval: 20 * time.Millisecond, ReportDir: reports}
	type result struct {
		st  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := Run(context.Background(), opts, []string{prog, gate})
		done <- result{st, err}
	}()
	// Once the frees are made, two more snapshots, then the exit.
	snapsNow := func() int {
		b, _ := os.ReadFile(log)
		return bytes.Count(b, []byte("[memtrace] snapshot "))
	}
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(gate + ".freed"); err == nil {
			break
		}
	}
	// The converter writes a record once it is mergeSlack old: the
	// second snapshot from here follows a read of the last free.
	time.Sleep(2 * mergeSlack)
	for k, end := snapsNow(), time.Now().Add(30*time.Second); snapsNow() < k+2 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.st != 0 {
		t.Fatalf("status %d, err %v", r.st, r.err)
	}
	var pid int64
	var live, peak int64
	var snaps []logfmt.Snapshot
	var tops []logfmt.SnapshotTop
	forEach(t, log, func(l *logfmt.Line) {
		switch {
		case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordHeader:
			h, err := logfmt.ParseHeader(l.Rest)
			if err != nil {
				t.Fatal(err)
			}
			pid = h.PID
		case l.Kind == logfmt.KindAlloc:
			live += int64(l.Size)
			peak = max(peak, live)
		case l.Kind == logfmt.KindFree:
			live -= int64(l.Size)
		case l.Kind == logfmt.KindMeta && string(l.Word) == "snapshot":
			s, err := logfmt.ParseSnapshot(l.Rest)
			if err != nil {
				t.Fatal(err)
			}
			snaps = append(snaps, s)
			tops = nil
		case l.Kind == logfmt.KindMeta && string(l.Word) == "snapshot-top":
			s, err := logfmt.ParseSnapshotTop(l.Rest)
			if err != nil {
				t.Fatal(err)
			}
			tops = append(tops, s)
		}
	})
	if peak < 20*1000+10*5000 {
		t.Fatalf("the log's peak is %d bytes, the program's is at least 70000", peak)
	}
	if len(snaps) < 2 {
		t.Fatalf("%d snapshots in the log, want several", len(snaps))
	}
	last := snaps[len(snaps)-1]
	if last.PID != pid || int64(last.Peak) != peak || int64(last.Current) != live {
		t.Errorf("last snapshot %+v: want pid %d, peak %d, current %d (the log's lines)", last, pid, peak, live)
	}
	if len(tops) == 0 || !strings.HasPrefix(tops[0].Stack, "small < main") {
		t.Errorf("last snapshot's stacks %+v: want small < main first (ten blocks of it live)", tops)
	}
	txts, _ := filepath.Glob(filepath.Join(reports, "figures-"+strconv.FormatInt(pid, 10)+"_*.txt"))
	if len(txts) != 1 {
		all, _ := os.ReadDir(reports)
		t.Fatalf("report dir holds %v, want one figures-%d_*.txt", all, pid)
	}
	sum, err := procreport.Read(txts[0])
	if err != nil {
		t.Fatal(err)
	}
	if int64(sum.Peak) != peak || int64(sum.Current) != live || int64(sum.PID) != pid {
		t.Errorf("report file %+v: the log's lines give peak %d, current %d, pid %d", sum, peak, live, pid)
	}
	rep, err := os.ReadFile(txts[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(rep, []byte("big < main")) {
		t.Errorf("report file does not name big < main, the peak's biggest stack:\n%s", rep)
	}
}

// TestLogNotCreatable: a log that cannot be created ends the run before
// the program starts, with the error and no panic: the source is closed
// before Trace made its converter.
func TestLogNotCreatable(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	for _, out := range []string{filepath.Join(dir, "no/such/dir/x.log"), dir} {
		st, err := Run(context.Background(), Options{Output: runner.ParseOutput(out)}, []string{"/usr/bin/touch", marker})
		if err == nil || st != 1 || !strings.HasPrefix(err.Error(), "create log "+out+": ") {
			t.Errorf("-o %s: status %d, %v; want 1 and create log %s", out, st, err, out)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("-o %s: the program ran", out)
		}
	}
}
