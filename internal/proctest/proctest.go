package proctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// OddComm is a comm with spaces at its ends and parentheses in it, which
// a stat parser that trims or splits at the first ')' gets wrong.
const OddComm = " a) b ( "

// StartOddComm starts sleep(1) under a copy named OddComm (the kernel takes
// the comm from the file name) and returns its pid; it is killed at the
// test's end.
func StartOddComm(t *testing.T) int {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		bpftest.Unavailable(t, "sleep(1) not installed")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(t.TempDir(), OddComm)
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "30")
	if err := cmd.Start(); err != nil { // returns once the exec is done
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}
