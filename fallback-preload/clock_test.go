package preload

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// pvclockStable reads, through a pipe (a refused read is EFAULT, not a
// SIGBUS), the flags of the pvclock page the vDSO maps at [vvar_vclock],
// and says whether PVCLOCK_TSC_STABLE_BIT is set; ok is false where
// there is no such page or it cannot be read.
func pvclockStable(t *testing.T) (stable, ok bool) {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	var addr uint64
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		if strings.HasSuffix(sc.Text(), "[vvar_vclock]") {
			start, _, _ := strings.Cut(sc.Text(), "-")
			if addr, err = strconv.ParseUint(start, 16, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	if addr == 0 {
		return false, false
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	// The page is the vDSO's, not Go memory: its address goes to write(2)
	// as a number.
	if n, _, errno := unix.Syscall(unix.SYS_WRITE, uintptr(p[1]), uintptr(addr), 32); errno != 0 || n != 32 {
		return false, false
	}
	var ti [32]byte
	if n, err := unix.Read(p[0], ti[:]); err != nil || n != 32 {
		return false, false
	}
	return ti[29]&1 != 0, true
}

// TestCounterUnderStablePvclock: the library times events with the TSC
// where the kernel's clocksource is the TSC, and also under kvm-clock when
// the hypervisor marks the TSC stable (the vDSO then computes
// CLOCK_MONOTONIC from it); elsewhere with clock_gettime. The choice shows
// in the session variable a process passes its exec'd children (its last
// field, the counter's scale, 0 for clock_gettime).
func TestCounterUnderStablePvclock(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the TSC choice is x86-64's (TestCounterNotWallClockARM has arm64's)")
	}
	src, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	if err != nil {
		t.Skipf("no clocksource to compare with: %v", err)
	}
	want := false
	switch cs := strings.TrimSpace(string(src)); cs {
	case "tsc":
		want = true
	case "kvm-clock":
		stable, ok := pvclockStable(t)
		if !ok {
			t.Skip("kvm-clock without a readable pvclock page (a kernel before 6.13, or a vDSO that does not use it)")
		}
		want = stable
	default:
		t.Logf("clocksource %s: clock_gettime expected", cs)
	}
	lib, _ := build(t)
	mult := func(extra ...string) uint64 {
		t.Helper()
		cmd := exec.Command("env")
		cmd.Env = append(append(os.Environ(), "LD_PRELOAD="+lib, "MEMTRACK_OUTPUT="+t.TempDir()+"/log"), extra...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("env under the library: %v\n%s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, "MEMTRACE_PRELOAD_SESSION="); ok {
				f := strings.Split(v, ":")
				m, err := strconv.ParseUint(f[len(f)-1], 10, 64)
				if err != nil {
					t.Fatalf("session variable %q: %v", v, err)
				}
				return m
			}
		}
		t.Fatalf("no MEMTRACE_PRELOAD_SESSION in the traced env's output:\n%s", out)
		return 0
	}
	if got := mult() != 0; got != want {
		t.Errorf("the library reads the counter: %v, want %v (clocksource %s)", got, want, strings.TrimSpace(string(src)))
	}
	if m := mult("MEMTRACE_CLOCK=monotonic"); m != 0 {
		t.Errorf("MEMTRACE_CLOCK=monotonic: the counter is still read (scale %d)", m)
	}
}

// TestCounterNotWallClockARM: qemu-user gives an arm64 program the host's
// wall clock as its counter (cntvct_el0), which NTP steps back and forth,
// so the library must not time events with it there: the session
// variable's last field, the counter's scale, is 0 (clock_gettime).
func TestCounterNotWallClockARM(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds the library and runs it under qemu-user: make test runs it")
	}
	const triplet, qemu = "aarch64-linux-gnu", "qemu-aarch64"
	for _, tool := range []string{triplet + "-gcc", qemu} {
		if _, err := exec.LookPath(tool); err != nil {
			bpftest.Unavailable(t, "%s is missing (make deps installs it)", tool)
		}
	}
	dir := t.TempDir()
	lib, prog, src := filepath.Join(dir, LibName), filepath.Join(dir, "prog"), filepath.Join(dir, "prog.c")
	if out, err := exec.Command("make", "-s", "CC="+triplet+"-gcc", "OUT="+lib).CombinedOutput(); err != nil {
		t.Fatalf("make: %v\n%s", err, out)
	}
	// The program reads the counter itself too: the test is only
	// meaningful where that counter is the wall clock.
	const progC = `#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(void) {
	unsigned long c, f;
	__asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(c));
	__asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(f));
	printf("counter=%lu realtime=%ld\n", f ? c / f : 0, (long)time(NULL));
	const char *s = getenv("MEMTRACE_PRELOAD_SESSION");
	printf("session=%s\n", s ? s : "");
	return 0;
}
`
	if err := os.WriteFile(src, []byte(progC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(triplet+"-gcc", "-O1", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	run := func(extra ...string) (counter, realtime int64, scale uint64) {
		t.Helper()
		args := []string{"-L", "/usr/" + triplet, "-E", "LD_PRELOAD=" + lib, "-E", "MEMTRACK_OUTPUT=" + filepath.Join(t.TempDir(), "log")}
		for _, e := range extra {
			args = append(args, "-E", e)
		}
		out, err := exec.Command(qemu, append(args, prog)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s under the library: %v\n%s", qemu, err, out)
		}
		var session string
		if _, err := fmt.Sscanf(string(out), "counter=%d realtime=%d\nsession=%s", &counter, &realtime, &session); err != nil {
			t.Fatalf("the program's output %q: %v", out, err)
		}
		f := strings.Split(session, ":")
		scale, err = strconv.ParseUint(f[len(f)-1], 10, 64)
		if err != nil {
			t.Fatalf("session variable %q: %v", session, err)
		}
		return counter, realtime, scale
	}
	counter, realtime, scale := run()
	if d := counter - realtime; d <= -86400 || d >= 86400 {
		t.Skipf("%s's counter (%d s) is not the wall clock (%d s) here", qemu, counter, realtime)
	}
	if scale != 0 {
		t.Errorf("the library times events with a counter that is the wall clock (scale %d), want clock_gettime (0)", scale)
	}
}
