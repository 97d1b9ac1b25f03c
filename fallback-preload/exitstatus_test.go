package preload

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memtrace/memtrace/report"
	"github.com/memtrace/memtrace/runner"
)

// TestExitLineStatusPreload: the --preload log's exit line of the program
// carries its exit status or the signal that killed it (the wait status
// reaches the agent as on the eBPF path), and the report says how the run
// ended and calls the five blocks leaks. Each case runs several times: the
// library's exit record and the wait race.
func TestExitLineStatusPreload(t *testing.T) {
	lib, _ := build(t)
	t.Setenv(LibEnv, lib)
	dir := t.TempDir()
	// tests/progs/runend.c: five 1000-byte blocks kept, then exit 3
	// or the signal its argument names.
	src, prog := "../tests/progs/runend.c", filepath.Join(dir, "exit")
	if out, err := exec.Command("gcc", "-O1", "-fno-builtin", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	for _, c := range []struct {
		arg   string
		code  int
		field string
		end   string
	}{
		{"", 3, "status=3", "run: exited with status 3\n"},
		{"segv", 128 + int(syscall.SIGSEGV), "signal=SIGSEGV", "run: killed by SIGSEGV\n"},
		{"term", 128 + int(syscall.SIGTERM), "signal=SIGTERM", "run: killed by SIGTERM\n"},
	} {
		for round := range 4 {
			log := filepath.Join(dir, "log")
			argv := []string{prog}
			if c.arg != "" {
				argv = append(argv, c.arg)
			}
			errf, err := os.Create(filepath.Join(dir, "stderr"))
			if err != nil {
				t.Fatal(err)
			}
			st, err := Run(context.Background(), Options{Output: runner.ParseOutput(log), Stderr: errf}, argv)
			errf.Close()
			if err != nil || st != c.code {
				t.Fatalf("%s #%d: status %d, err %v, want %d", c.arg, round, st, err, c.code)
			}
			var exits []string
			b, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "[memtrace] proc event=exit") {
					exits = append(exits, l)
				}
			}
			if len(exits) != 1 || !strings.HasSuffix(exits[0], " "+c.field) {
				t.Errorf("%s #%d: exit lines %q, want one ending %s", c.arg, round, exits, c.field)
			}
			var out, se bytes.Buffer
			if code := report.Main([]string{"-a", "0", "-p", "0", "-T", "0", log}, &out, &se); code != 0 {
				t.Fatalf("report exit %d: %s", code, se.String())
			}
			r := out.String()
			if !strings.Contains(r, c.end) || !strings.Contains(r, "MEMORY LEAKS\n") || !strings.Contains(r, "5.00K leaked over 5 calls from") ||
				strings.Contains(r, "still allocated") {
				t.Errorf("%s #%d: want %q and the five blocks as leaks:\n%s", c.arg, round, c.end, r)
			}
			if se, _ := os.ReadFile(errf.Name()); !strings.Contains(string(se), "\t"+c.end) {
				t.Errorf("%s #%d: closing lines do not say how the run ended (%q):\n%s", c.arg, round, c.end, se)
			}
		}
	}
}
