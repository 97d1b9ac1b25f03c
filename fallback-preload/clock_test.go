package preload

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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
		t.Skip("the TSC choice is x86-64's (arm64 always reads its counter)")
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
