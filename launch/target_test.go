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

// TestPermissionCause: a refused -p names the condition that holds, not
// "run memtrace as root" to a root already.
func TestPermissionCause(t *testing.T) {
	full := uint64(1)<<41 - 1
	noResource := full &^ (1 << 24)
	for _, c := range []struct {
		name string
		pid  int
		f    attachFacts
		want string
	}{
		{"user, root's process", 42, attachFacts{euid: 1000, targetUID: 0, caps: 0, targetCaps: full, capsKnown: true, ptraceScope: 1}, "run memtrace as root (sudo memtrace -p 42)"},
		{"user, own process, scope 1", 42, attachFacts{euid: 1000, targetUID: 1000, capsKnown: true, ptraceScope: 1}, "ptrace_scope is 1: only a parent"},
		{"scope 3", 42, attachFacts{euid: 0, targetUID: 0, caps: full, targetCaps: full, capsKnown: true, ptraceScope: 3}, "ptrace_scope is 3"},
		{"scope 2 without the capability", 42, attachFacts{euid: 0, caps: full &^ (1 << 19), capsKnown: true, ptraceScope: 2}, "ptrace_scope is 2"},
		{"root without CAP_SYS_PTRACE", 42, attachFacts{euid: 0, caps: full &^ (1 << 19), targetCaps: 0, capsKnown: true, ptraceScope: -1}, "without CAP_SYS_PTRACE"},
		{"init more privileged", 1, attachFacts{euid: 0, caps: noResource, targetCaps: full, capsKnown: true, ptraceScope: -1}, "process 1 (this PID namespace's init: the container's or machine's own) holds capabilities memtrace lacks (CAP_SYS_RESOURCE)"},
		{"init otherwise", 1, attachFacts{euid: 0, caps: full, targetCaps: full, capsKnown: true, ptraceScope: 0}, "process 1 is this PID namespace's init"},
		{"undumpable", 42, attachFacts{euid: 0, caps: full, targetCaps: full, capsKnown: true, ptraceScope: 0}, "undumpable"},
	} {
		got := permissionCause(c.pid, c.f)
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if os.Geteuid() == 0 && c.f.euid == 0 && strings.Contains(got, "run memtrace as root") {
			t.Errorf("%s: root told to run as root: %q", c.name, got)
		}
	}
}
