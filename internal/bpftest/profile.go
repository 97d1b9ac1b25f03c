package bpftest

import (
	"slices"
	"testing"

	"github.com/google/pprof/profile"
)

// RequireProfileModeBPF fails t unless p, a profile memtrace wrote (a
// --sample run has no log, so no header), says mode=bpf in its comments.
func RequireProfileModeBPF(t testing.TB, p *profile.Profile) {
	t.Helper()
	if !slices.Contains(p.Comments, "mode=bpf") {
		t.Fatalf("the profile's comments %q do not say mode=bpf: it did not come from the eBPF tracer", p.Comments)
	}
}
