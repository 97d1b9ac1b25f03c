package tests

// The release's two designs side by side (make bench, scripts/bench-release.sh):
// how long a process memtrace held stays stopped after memtrace is killed
// by SIGKILL, with the kernel side's release at memtrace's exit and with
// the watchdog process alone (MEMTRACE_TEST_WATCHDOG=1). A measurement,
// not a test: it runs only when MEMTRACE_RELEASE_ROUNDS is set, and fails
// only on a process left stopped.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const dlopenLoop = `
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
	for (int i = 0; i < atoi(argv[2]); i++) {
		void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
		if (!h)
			return 1;
		void *(*a)(size_t) = (void *(*)(size_t))dlsym(h, "dl_alloc");
		void (*f)(void *) = (void (*)(void *))dlsym(h, "dl_free");
		f(a(100));
		dlclose(h);
		usleep(1000);
	}
	return 7;
}
`

func statState(pid int) byte {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

func TestReleaseLatency(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("MEMTRACE_RELEASE_ROUNDS"))
	if rounds <= 0 {
		t.Skip("a measurement: set MEMTRACE_RELEASE_ROUNDS (scripts/bench-release.sh)")
	}
	requireBPF(t)
	mt := need(t, "bin/memtrace")
	lib := need(t, "tests/progs/build/libdlalloc.so")
	dir := t.TempDir()
	src, prog := filepath.Join(dir, "dlloop.c"), filepath.Join(dir, "dlloop")
	if err := os.WriteFile(src, []byte(dlopenLoop), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := command("gcc", "-O1", "-o", prog, src, "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	for _, design := range []string{"kernel", "watchdog"} {
		var lat, dying []time.Duration
		stuck, missed := 0, 0
		for r := 0; r < rounds; r++ {
			target := command(prog, lib, "1000000")
			if err := target.Start(); err != nil {
				t.Fatal(err)
			}
			pid := target.Process.Pid
			cmd := command(mt, "--stack-depth", "16", "-o", "/dev/null", "-p", strconv.Itoa(pid))
			if design == "watchdog" {
				cmd.Env = append(os.Environ(), "MEMTRACE_TEST_WATCHDOG=1")
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Killed at a moment the target is held (at a dlopen).
			held := false
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
				if statState(pid) == 'T' {
					held = true
					break
				}
			}
			cmd.Process.Kill()
			killed := time.Now()
			if !held {
				missed++
			} else {
				for statState(pid) == 'T' && time.Since(killed) < 5*time.Second {
					time.Sleep(20 * time.Microsecond)
				}
				if statState(pid) == 'T' {
					stuck++
				} else {
					lat = append(lat, time.Since(killed))
				}
			}
			cmd.Wait()
			dying = append(dying, time.Since(killed))
			target.Process.Kill()
			syscall.Kill(pid, syscall.SIGCONT)
			target.Wait()
		}
		q := func(d []time.Duration, f float64) time.Duration {
			if len(d) == 0 {
				return 0
			}
			slices.Sort(d)
			return d[min(len(d)-1, int(f*float64(len(d))))]
		}
		// Resumed: from the SIGKILL to the target's leaving the
		// stopped state; reaped: to memtrace's own end (the kernel
		// releases its links, a grace period each, after the release).
		fmt.Printf("release %-8s rounds %d, killed while held %d, left stopped %d; resumed after the SIGKILL: median %v, p90 %v, max %v; memtrace reaped: median %v\n",
			design, rounds, len(lat)+stuck, stuck, q(lat, 0.5).Round(time.Microsecond), q(lat, 0.9).Round(time.Microsecond),
			q(lat, 1).Round(time.Microsecond), q(dying, 0.5).Round(time.Millisecond))
		if stuck > 0 {
			t.Errorf("%s: %d of %d held processes were left stopped", design, stuck, len(lat)+stuck)
		}
		if missed > rounds/2 {
			t.Errorf("%s: the target was held in only %d of %d rounds", design, rounds-missed, rounds)
		}
	}
}
