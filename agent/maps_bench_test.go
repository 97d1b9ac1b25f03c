package agent

import (
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// pythonChild starts a python3 that has loaded its C modules, for a maps
// file of a real interpreter's size.
func pythonChild(b *testing.B) int {
	b.Helper()
	cmd := exec.Command("python3", "-c", "import ssl, hashlib, sqlite3, ctypes, decimal, json, lzma, bz2, socket, array, math, unicodedata, struct, datetime, sys; sys.stdout.write('ok\\n'); sys.stdout.flush(); sys.stdin.read()")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Skipf("no python3: %v", err)
	}
	b.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, 3)
	done := make(chan error, 1)
	go func() { _, err := io.ReadFull(out, buf); done <- err }()
	select {
	case err := <-done:
		if err != nil || !strings.HasPrefix(string(buf), "ok") {
			b.Fatalf("python3 did not start: %v", err)
		}
	case <-time.After(10 * time.Second):
		b.Fatal("python3 did not start in 10s")
	}
	return cmd.Process.Pid
}

// BenchmarkKnownProcessRescan is the agent's rescan of a process it knows
// (a dlopen, a frame in no known mapping): /proc/PID/maps read and parsed,
// its mappings checked against the address space's.
func BenchmarkKnownProcessRescan(b *testing.B) {
	pid := pythonChild(b)
	s := New(Config{Out: io.Discard})
	s.AddProcess(uint32(pid), false)
	s.KnownProcess(pid, false)
	b.ReportAllocs()
	for b.Loop() {
		s.KnownProcess(pid, false)
	}
}
