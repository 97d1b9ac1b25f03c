package bpftest

import (
	"fmt"
	"os"
	"testing"
)

// Unavailable skips t because something it needs is missing here (root, an
// installed tool, a compiler), or fails it under CI: .ci/run sets
// MEMTRACE_REQUIRE_BPF and MEMTRACE_REQUIRE_CROSS, and CI machines have
// everything `make deps` installs, so a skip there is a bug. Every such skip
// goes through here, so that one place decides.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if os.Getenv("MEMTRACE_REQUIRE_BPF") == "1" || os.Getenv("MEMTRACE_REQUIRE_CROSS") == "1" {
		t.Fatalf("%s, but MEMTRACE_REQUIRE_BPF/MEMTRACE_REQUIRE_CROSS is set: run make deps as root", why)
	}
	t.Skip(why)
}
