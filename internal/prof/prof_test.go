package prof

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// spin burns CPU for d so that the profile has samples to show.
func spin(d time.Duration) int {
	n := 0
	for t0 := time.Now(); time.Since(t0) < d; n++ {
	}
	return n
}

func TestDoWritesAProfileWithSamples(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		bpftest.Unavailable(t, "go tool not on PATH: cannot read the profile back")
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	var stderr bytes.Buffer
	code := do(path, &stderr, func() int { spin(300 * time.Millisecond); return 7 })
	if code != 7 {
		t.Fatalf("Do returned %d, want fn's 7", code)
	}
	if stderr.Len() != 0 {
		t.Fatalf("unexpected stderr: %q", stderr.String())
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "prof.spin") {
		t.Fatalf("profile does not show the spinning function:\n%s", out)
	}
}

func TestDoWithoutEnvRunsFnOnly(t *testing.T) {
	var stderr bytes.Buffer
	if code := do("", &stderr, func() int { return 3 }); code != 3 || stderr.Len() != 0 {
		t.Fatalf("code %d stderr %q", code, stderr.String())
	}
}

func TestDoBadPathStillRunsFn(t *testing.T) {
	var stderr bytes.Buffer
	ran := false
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.pprof")
	code := do(path, &stderr, func() int { ran = true; return 5 })
	if !ran || code != 5 {
		t.Fatalf("fn ran %v, code %d", ran, code)
	}
	msg := stderr.String()
	if !strings.Contains(msg, Env) || strings.Count(msg, "\n") != 1 {
		t.Fatalf("want one line naming %s, got %q", Env, msg)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a profile file appeared at a path that cannot exist")
	}
}
