package tests

import (
	"bytes"
	"strconv"
	"sync"
	"testing"
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
