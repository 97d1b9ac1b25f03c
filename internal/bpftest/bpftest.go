package bpftest

import (
	"os"
	"testing"
)

// Require skips or fails t when BPF cannot be used here.
func Require(t testing.TB) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		why = "no kernel BTF (/sys/kernel/btf/vmlinux)"
	}
	if why == "" {
		return
	}
	if os.Getenv("MEMTRACE_REQUIRE_BPF") == "1" {
		t.Fatalf("BPF unavailable (%s) but MEMTRACE_REQUIRE_BPF=1", why)
	}
	t.Skipf("BPF unavailable: %s", why)
}
