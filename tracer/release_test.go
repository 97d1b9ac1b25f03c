//go:build amd64 || arm64

package tracer

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/event"
)

// procState is the state letter of /proc/PID/stat (0 once pid is gone).
func procState(pid int) byte {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// stoppedSleeps starts n sleeping processes and stops them, as the kernel
// side's holds do; they are killed at the test's end.
func stoppedSleeps(t *testing.T, n int) []int {
	t.Helper()
	var pids []int
	for i := 0; i < n; i++ {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); syscall.Kill(cmd.Process.Pid, syscall.SIGCONT); cmd.Wait() })
		pids = append(pids, cmd.Process.Pid)
		cmd.Process.Signal(syscall.SIGSTOP)
	}
	for _, pid := range pids {
		waitState(t, pid, 'T', 5*time.Second)
	}
	return pids
}

func waitState(t *testing.T, pid int, want byte, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for procState(pid) != want {
		if time.Since(start) > limit {
			t.Fatalf("process %d in state %c after %v, want %c", pid, procState(pid), limit, want)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// TestReleaseResumesEveryHold: Release, memtrace's sweep on every way
// out, resumes each stopped hold of every kind, forgets pending ones,
// and tells the programs that no process may be held from then on.
func TestReleaseResumesEveryHold(t *testing.T) {
	requireBPF(t)
	tr, err := New(Options{StackDepth: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	pids := stoppedSleeps(t, 4)
	for i, kind := range []uint32{holdFork, holdExec, holdDL} {
		if err := tr.objs.Hold.Put(holdKey(pids[i], kind, 7), uint8(holdStopped)); err != nil {
			t.Fatal(err)
		}
	}
	// One a memtrace began to resume and did not finish (its SIGCONT
	// not sent): the sweep still resumes it.
	if err := tr.objs.Hold.Put(holdKey(pids[3], holdExec, 9), uint8(holdResuming)); err != nil {
		t.Fatal(err)
	}
	// A fork hold whose child has not stopped yet: forgotten, or it
	// would stop after memtrace.
	if err := tr.objs.Hold.Put(holdKey(pids[0]+100000, holdFork, 0), uint8(holdPending)); err != nil {
		t.Fatal(err)
	}
	tr.Release()
	for _, pid := range pids {
		waitState(t, pid, 'S', 5*time.Second)
	}
	var k uint32
	var v uint8
	if it := tr.objs.Hold.Iterate(); it.Next(&k, &v) {
		t.Errorf("hold %#x (state %d) is left after Release", k, v)
	}
	var rel uint32
	if err := tr.objs.Released.Get(&rel); err != nil || rel != 1 {
		t.Errorf("released = %d (%v) after Release, want 1", rel, err)
	}
}

// TestKernelReleaseAtExit: a memtrace killed by SIGKILL, which runs none
// of its own code, leaves no process stopped: the kernel side's exit
// program resumes every hold (bpf_send_signal_task), with no watchdog;
// killed in the middle of its own resume of one hold (after it took the
// hold, before its SIGCONT) or of its release of all, too.
func TestKernelReleaseAtExit(t *testing.T) {
	requireBPF(t)
	if !KernelRelease() {
		t.Skip("this kernel has no bpf_send_signal_task: the watchdog releases holds here (launch's tests)")
	}
	for _, mode := range []string{"", "resume", "release"} {
		t.Run("killed-mid-"+map[string]string{"": "hold"}[mode]+mode, func(t *testing.T) {
			killHolder(t, mode)
		})
	}
}

// killHolder runs TestHoldingAgent over four stopped processes, mode
// telling it what to be doing when it is killed, kills it and waits for
// every process to run again.
func killHolder(t *testing.T, mode string) {
	pids := stoppedSleeps(t, 4)
	args := make([]string, len(pids))
	for i, p := range pids {
		args[i] = strconv.Itoa(p)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldingAgent$")
	cmd.Env = append(os.Environ(), "MEMTRACE_TEST_HOLD="+strings.Join(args, ","), "MEMTRACE_TEST_HOLD_MODE="+mode)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	want := "holding"
	if mode != "" {
		want = "resuming"
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, want) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the holding agent said %q, want %q", line, want)
	}
	for _, pid := range pids {
		if procState(pid) != 'T' {
			t.Fatalf("process %d is not stopped before the kill", pid)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	var worst time.Duration
	for _, pid := range pids {
		worst = max(worst, waitState(t, pid, 'S', 5*time.Second))
	}
	t.Logf("all %d held processes resumed %v after the holder's end", len(pids), worst)
}

// TestHoldingAgent is TestKernelReleaseAtExit's memtrace: it records holds
// of the processes it is given and waits to be killed; with
// MEMTRACE_TEST_HOLD_MODE it waits in the middle of Resume of the first
// hold (resume) or of Release (release), between taking a hold and its
// SIGCONT.
func TestHoldingAgent(t *testing.T) {
	list := os.Getenv("MEMTRACE_TEST_HOLD")
	if list == "" {
		t.Skip("run by TestKernelReleaseAtExit")
	}
	tr, err := New(Options{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	var keys []uint32
	var pids []int
	for i, s := range strings.Split(list, ",") {
		pid, _ := strconv.Atoi(s)
		key := holdKey(pid, uint32(1+i%3), uint32(i))
		if err := tr.objs.Hold.Put(key, uint8(holdStopped)); err != nil {
			t.Fatal(err)
		}
		keys, pids = append(keys, key), append(pids, pid)
	}
	resumeHook = func(int) {
		os.Stdout.WriteString("resuming\n")
		time.Sleep(time.Minute)
	}
	switch os.Getenv("MEMTRACE_TEST_HOLD_MODE") {
	case "resume":
		tr.Resume(pids[0], keys[0])
	case "release":
		tr.Release()
	}
	os.Stdout.WriteString("holding\n")
	time.Sleep(time.Minute)
}

const threadsProg = `
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
static void *run(void *arg) {
	for (int i = 0; i < 50; i++) free(malloc(16 + i));
	return arg;
}
int main(void) {
	char c;
	if (read(0, &c, 1) != 1) return 1;
	pthread_t th[64];
	for (int i = 0; i < 64; i++) pthread_create(&th[i], 0, run, 0);
	for (int i = 0; i < 64; i++) pthread_join(th[i], 0);
	return 0;
}
`

// TestBacklogKeepsExits: with a ring far too small for what a program
// does while nobody reads, allocation records are lost, and counted, but
// no thread's exit record is: they wait in the backlog.
func TestBacklogKeepsExits(t *testing.T) {
	requireBPF(t)
	tr, err := New(Options{RingBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "t.c"), filepath.Join(dir, "t")
	if err := os.WriteFile(src, []byte(threadsProg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O1", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for i := 0; i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
		if added, err := tr.ScanProcess(pid); err != nil {
			t.Fatal(err)
		} else if len(added) > 0 {
			break
		}
	}
	if err := tr.AddProcess(pid); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte{1})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	exits := map[uint32]bool{}
	for i := 0; i < 20; i++ {
		if err := tr.Read(handlerFunc(func(e *event.Event) {
			if e.Kind == event.KindExit && e.TGID == uint32(pid) {
				exits[e.TID] = true
			}
		})); err != nil {
			t.Fatal(err)
		}
	}
	if tr.Lost() == 0 {
		t.Fatalf("nothing was lost: the ring did not fill, the test proves nothing")
	}
	if len(exits) != 65 {
		t.Errorf("%d of the 65 threads' exits reached the reader (%d records lost)", len(exits), tr.Lost())
	}
}
