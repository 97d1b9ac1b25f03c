package live

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCommExact: a process's name is its comm exactly, spaces at its ends
// and parentheses in it included (the kernel takes it from the file name).
func TestCommExact(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	const name = " a) b ( "
	prog := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "30")
	if err := cmd.Start(); err != nil { // returns once the exec is done
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	if got := readComm(uint32(pid)); got != name {
		t.Fatalf("comm %q, want %q", got, name)
	}
}
