package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/procfs"
)

// runWatched runs cmd with its output combined, as CombinedOutput, for at
// most limit (runWait: a hang's error carries the threads' dump).
func runWatched(cmd *exec.Cmd, limit time.Duration) ([]byte, error) {
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	err := runWait(cmd, limit)
	return []byte(out.String()), err
}

// maxGDB is how many processes of a dump gdb attaches to.
const maxGDB = 6

// threadDump describes each thread of pid and of its descendants: gdb's
// backtrace where gdb is installed (user-space frames, what a deadlock
// between threads shows in), and from /proc the state, wait channel and
// kernel stack (the latter for root only).
func threadDump(pid int) string {
	var b strings.Builder
	pids := []int{pid}
	for _, p := range descendants(pid) {
		pids = append(pids, p.pid)
	}
	gdb, _ := exec.LookPath("gdb")
	for i, p := range pids {
		if i == maxGDB {
			// Each attach takes seconds on a loaded machine: a
			// fleet's hundred processes are listed from /proc only.
			gdb = ""
		}
		fmt.Fprintf(&b, "process %d:\n", p)
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", p))
		for _, d := range tasks {
			raw, _ := os.ReadFile(d + "/stat")
			st, err := procfs.ParseStat(raw)
			if err != nil {
				fmt.Fprintf(&b, "  task %s: %v\n", filepath.Base(d), err)
				continue
			}
			wchan, _ := os.ReadFile(d + "/wchan")
			fmt.Fprintf(&b, "  task %s (%s) state %c wchan %s\n", filepath.Base(d), st.Comm, st.State, wchan)
			if ks, err := os.ReadFile(d + "/stack"); err == nil && len(ks) > 0 {
				for _, l := range strings.Split(strings.TrimSpace(string(ks)), "\n") {
					fmt.Fprintf(&b, "    %s\n", l)
				}
			}
		}
		if gdb == "" {
			b.WriteString("  (no gdb: no user-space frames)\n")
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		bt, err := exec.CommandContext(ctx, gdb, "-p", fmt.Sprint(p), "-batch", "-nx",
			"-ex", "set pagination off", "-ex", "thread apply all bt 40").CombinedOutput()
		cancel()
		for _, l := range strings.Split(string(bt), "\n") {
			// gdb's chatter about symbols and threads as it attaches.
			if strings.HasPrefix(l, "#") || strings.HasPrefix(l, "Thread ") {
				fmt.Fprintf(&b, "  %s\n", l)
			}
		}
		if err != nil {
			fmt.Fprintf(&b, "  gdb: %v\n", err)
		}
	}
	return b.String()
}

// TestThreadDumpNamesAHungThread holds runWatched to a program whose one
// thread waits for ever: the dump must come, name the process and show
// the waiting thread's frames in the program (when gdb is installed).
func TestThreadDumpNamesAHungThread(t *testing.T) {
	bin := buildC(t, "hang", `#include <pthread.h>
#include <unistd.h>
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *stuck_here(void *a) { (void)a; pthread_mutex_lock(&mu); return 0; }
int main(void) { pthread_mutex_lock(&mu); pthread_t t; pthread_create(&t, 0, stuck_here, 0); pthread_join(t, 0); return 0; }`)
	_, err := runWatched(command(bin), 2*time.Second)
	if err == nil {
		t.Fatalf("a program that hangs ended")
	}
	s := err.Error()
	if !strings.Contains(s, "did not finish within 2s") || !strings.Contains(s, "process ") || !strings.Contains(s, "  task ") {
		t.Fatalf("no thread dump:\n%s", s)
	}
	if _, lerr := exec.LookPath("gdb"); lerr == nil && !strings.Contains(s, "stuck_here") {
		t.Errorf("gdb's frames lack the waiting thread's function:\n%s", s)
	}
}
