package preload

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The pause follows the thread's figures: none while it got the CPU when
// it asked, yieldRatio times its CPU when it waited at least half that
// long, bounded, and none when the figures go back or cannot be read.
func TestYielderPause(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedstat")
	put := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	put("1000000 3000000 5\n")
	y := newYielder(path)
	defer y.close()
	for _, c := range []struct {
		stat string
		want time.Duration
	}{
		{"2000000 3400000 6\n", 0},                    // waited 0.4 ms for 1 ms run
		{"3000000 3900000 7\n", yieldRatio * 1000000}, // waited 0.5 ms for 1 ms run
		{"4000000 9000000 9\n", yieldRatio * 1000000}, // waited long
		{"900000000 9900000000 10\n", yieldMax},       // bounded
		{"100 0 1\n", 0},                              // went back (another task)
		{"200 1000 2\n", yieldRatio * 100},            // from the new figures
		{"garbage\n", 0},                              // unreadable
	} {
		put(c.stat)
		if got := y.pause(); got != c.want {
			t.Errorf("after %q: pause %v, want %v", c.stat, got, c.want)
		}
	}
	if got := newYielder(filepath.Join(t.TempDir(), "none")).pause(); got != 0 {
		t.Errorf("without the file: pause %v, want 0", got)
	}
}

// A thread that shares its CPU with a busy one waits for it on the run
// queue, and its yielder says to sleep; the kernel's figures, not a
// stand-in, are read.
func TestYielderSeesContention(t *testing.T) {
	if _, err := os.Stat(schedstatSelf); err != nil {
		t.Skipf("no scheduler statistics here: %v", err)
	}
	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpus); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for i := 0; i < 1024 && cpu < 0; i++ {
		if cpus.IsSet(i) {
			cpu = i
		}
	}
	var one unix.CPUSet
	one.Set(cpu)
	var stop atomic.Bool
	pinned := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pinned <- unix.SchedSetaffinity(0, &one)
		for !stop.Load() {
		}
	}()
	defer stop.Store(true)
	if err := <-pinned; err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &cpus)
	y := newYielder(schedstatSelf)
	defer y.close()
	// Some CPU time of its own, shared with the busy thread.
	end := time.Now().Add(200 * time.Millisecond)
	x := 0
	for time.Now().Before(end) {
		x++
	}
	if d := y.pause(); d <= 0 {
		t.Errorf("sharing one CPU with a busy thread (%d turns): pause %v, want > 0", x, d)
	}
}

// FuzzSchedstat: any file content parses or is refused, without a panic;
// what parses is its first two fields as numbers.
func FuzzSchedstat(f *testing.F) {
	for _, s := range []string{"7210443 0 1\n", "1 2", "", "x y z", "18446744073709551615 1 0", "1", " 3\t4 5"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ran, waited, ok := parseSchedstat(b)
		if !ok {
			return
		}
		again, _, ok2 := parseSchedstat([]byte(fmt.Sprintf("%d %d", ran, waited)))
		if !ok2 || again != ran {
			t.Errorf("%q: %d %d does not parse back", b, ran, waited)
		}
	})
}
