package launch

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	st, flags, ok := parseStat("42 (a) b (c)) S 1 42 42 0 -1 2097216 0 0")
	if !ok || st != 'S' || flags != 2097216 {
		t.Fatalf("parseStat = %c %d %v, want S 2097216 true", st, flags, ok)
	}
	if _, _, ok := parseStat("42 (no close"); ok {
		t.Fatal("parseStat accepted a line without the comm's closing parenthesis")
	}
}

func TestCheckAttachable(t *testing.T) {
	if err := checkAttachable(os.Getpid()); err != nil {
		t.Fatalf("this test process: %v", err)
	}
	// kthreadd is PID 2 on every Linux with a PID namespace of its own
	// that shows kernel threads; elsewhere there is none to try.
	if b, err := os.ReadFile("/proc/2/stat"); err == nil {
		if _, flags, _ := parseStat(string(b)); flags&pfKthread != 0 {
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
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat"); len(b) > 0 {
			if st, _, _ := parseStat(string(b)); st == 'Z' {
				break
			}
		}
	}
	if err := checkAttachable(cmd.Process.Pid); err == nil || !strings.Contains(err.Error(), "zombie") {
		t.Errorf("a zombie: %v, want a zombie error", err)
	}
	if err := checkAttachable(1 << 30); err == nil || !strings.Contains(err.Error(), "no process") {
		t.Errorf("a PID that does not exist: %v", err)
	}
}
