package agent

import (
	"testing"

	"github.com/memtrace/memtrace/internal/proctest"
)

// TestCommExact: a process's name is its comm exactly, spaces at its ends
// and parentheses in it included (the kernel takes it from the file name).
func TestCommExact(t *testing.T) {
	pid := proctest.StartOddComm(t)
	if got := procName(pid); got != proctest.OddComm {
		t.Fatalf("comm %q, want %q", got, proctest.OddComm)
	}
}
