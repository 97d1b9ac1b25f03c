//go:build amd64 || arm64

package tracer

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProcThread: a thread whose record is missing gets its process and
// its comm from /proc as the kernel has them, not as status escapes the
// comm (a backslash doubled, a newline as "\n").
func TestProcThread(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	const name = "a\\b\nc (d)"
	prog := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "30")
	if err := cmd.Start(); err != nil { // returns once the exec is done
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ti := procThread(uint32(cmd.Process.Pid))
	if got := string(bytes.TrimRight(ti.comm[:], "\x00")); got != name || ti.tgid != uint32(cmd.Process.Pid) {
		t.Errorf("process: comm %q tgid %d, want %q %d", got, ti.tgid, name, cmd.Process.Pid)
	}
	// A thread other than the main one belongs to its process.
	done := make(chan threadInfo)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- procThread(uint32(unix.Gettid()))
	}()
	if ti := <-done; ti.tgid != uint32(os.Getpid()) {
		t.Errorf("a thread of this process: tgid %d, want %d", ti.tgid, os.Getpid())
	}
	if ti := procThread(1 << 30); ti.tgid != 1<<30 {
		t.Errorf("a thread that is gone: tgid %d, want its own id", ti.tgid)
	}
}
