package launch

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/procfs"
)

func TestCheckAttachable(t *testing.T) {
	if err := checkAttachable(os.Getpid()); err != nil {
		t.Fatalf("this test process: %v", err)
	}
	// kthreadd is PID 2 on every Linux with a PID namespace of its own
	// that shows kernel threads; elsewhere there is none to try.
	if st, err := procfs.ReadStat(2); err == nil {
		if st.Flags&procfs.PFKthread != 0 {
			if err := checkAttachable(2); err == nil || !strings.Contains(err.Error(), "kernel thread") {
				t.Errorf("PID 2 (a kernel thread): %v, want a kernel-thread error", err)
			}
		}
	}
	// A zombie: a child that has exited and is not waited for yet.
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if st, err := procfs.ReadStat(cmd.Process.Pid); err == nil && st.State == 'Z' {
			break
		}
	}
	if err := checkAttachable(cmd.Process.Pid); err == nil || !strings.Contains(err.Error(), "zombie") {
		t.Errorf("a zombie: %v, want a zombie error", err)
	}
	if err := checkAttachable(1 << 30); err == nil || !strings.Contains(err.Error(), "no process") {
		t.Errorf("a PID that does not exist: %v", err)
	}
}
