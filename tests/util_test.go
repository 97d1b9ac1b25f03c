package tests

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

func itoa(n int) string { return strconv.Itoa(n) }

// rounds is how often a test repeats a scenario that fails only now and
// then (a race, a hang): n times, or short under -short (make check),
// which keeps one pass of each variant in the fast loop and leaves the
// repetition to make test.
func rounds(n, short int) int {
	if testing.Short() {
		return short
	}
	return n
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// commandLimit bounds one command of a test: no command of this package
// runs for minutes, and one that hangs must fail its own test, named,
// rather than time the whole package out.
const commandLimit = 5 * time.Minute

// command is exec.Command with two bounds. The process is killed after
// commandLimit. Wait stops waiting for its output 30 s after it exits:
// a descendant that keeps the output pipe open (a target that memtrace
// left running or stopped) must not block the test forever; Wait then
// fails with exec.ErrWaitDelay.
func command(name string, args ...string) *exec.Cmd {
	return commandWithin(commandLimit, name, args...)
}

// commandWithin is command with its own limit, for the one kind of test
// whose command runs longer by design: a soak (MEMTRACE_SOAK).
func commandWithin(limit time.Duration, name string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 30 * time.Second
	// The context's timer is released once the limit passes; a command
	// that ended before then no longer needs it.
	_ = cancel
	return cmd
}
