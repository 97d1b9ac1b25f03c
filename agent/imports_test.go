package agent

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// deps lists the packages pkg depends on (itself included, tests not) for
// goarch, as the go command resolves them.
func deps(t *testing.T, pkg, goarch string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestEngineOwnsItsInterfaces: the agent reads the event vocabulary
// (event, event/fdevent) and calls the observers and sinks it defines,
// so it depends on neither capture, nor the live server (nor through it
// prometheus), nor the report-dir writer, nor the log's readers
// (analysis: the definitions they share are internal/figures'); and the
// captures produce events knowing nothing of the log format. Any of
// these imports, direct or not, fails here.
func TestEngineOwnsItsInterfaces(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	const mod = "github.com/memtrace/memtrace/"
	rules := []struct {
		pkg       string
		forbidden []string // import paths, or a part of one ending in "/"
	}{
		{mod + "agent", []string{mod + "tracer", mod + "fdtrace", mod + "live", mod + "procreport", mod + "analysis", "prometheus/"}},
		{mod + "tracer", []string{mod + "logfmt"}},
		{mod + "fdtrace", []string{mod + "logfmt"}},
	}
	for _, goarch := range []string{"amd64", "arm64", "arm"} {
		for _, r := range rules {
			ds := deps(t, r.pkg, goarch)
			for _, f := range r.forbidden {
				for _, d := range ds {
					if d == f || strings.HasSuffix(f, "/") && strings.Contains(d, f) {
						t.Errorf("GOARCH=%s: %s depends on %s", goarch, strings.TrimPrefix(r.pkg, mod), d)
						break
					}
				}
			}
		}
	}
}
