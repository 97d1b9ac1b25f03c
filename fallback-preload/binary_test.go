package preload

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
)

// Run uses the binary mode (shared memory, converted here) unless told
// otherwise; these tests exercise it directly.

func TestBinaryLayoutAndStacks(t *testing.T) {
	lib, prog := build(t)
	t.Setenv(LibEnv, lib)
	log := filepath.Join(t.TempDir(), "log")
	if st, err := Run(context.Background(), Options{Output: log, StackDepth: 6}, []string{prog, "fmt"}); err != nil || st != 0 {
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
	st, err := Run(context.Background(), Options{Output: log}, []string{prog, "exec"})
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
	st, err := Run(context.Background(), Options{Output: log}, []string{prog, "kill"})
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
	log := filepath.Join(t.TempDir(), "log")
	opts := Options{Output: log, SharedMemory: size}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	b, err := startBinary(opts, cmd, nil)
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

// The library in binary mode for the ARM targets, under qemu-user, with the
// converter running here (the 32-bit ARM layout is the same as 64-bit).
func TestBinaryCrossARM(t *testing.T) {
	for _, a := range []struct{ triplet, qemu string }{{"arm-linux-gnueabihf", "qemu-arm"}, {"aarch64-linux-gnu", "qemu-aarch64"}} {
		t.Run(a.triplet, func(t *testing.T) {
			for _, tool := range []string{a.triplet + "-gcc", a.qemu} {
				if _, err := exec.LookPath(tool); err != nil {
					if os.Getenv("MEMTRACE_REQUIRE_CROSS") == "1" {
						t.Fatalf("%s is missing but MEMTRACE_REQUIRE_CROSS=1: run make deps", tool)
					}
					t.Skipf("%s not installed", tool)
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
