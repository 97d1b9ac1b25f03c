package tests

import (
	"path/filepath"
	"strings"
	"testing"
)

// statsBlock is the "memtrace stats:" block of memtrace's stderr, without
// the line that says where the log went.
func statsBlock(t *testing.T, stderr string) string {
	t.Helper()
	_, after, ok := strings.Cut(stderr, "memtrace stats:\n")
	if !ok {
		t.Fatalf("no closing figures in\n%s", stderr)
	}
	block, _, ok := strings.Cut(after, "memtrace finished: ")
	if !ok {
		t.Fatalf("no line saying where the log went in\n%s", stderr)
	}
	return block
}

// TestClosingFiguresEveryDestination: the closing figures come from the
// agent, not from the log, so a run gets them wherever its log went: to a
// file (checked against the report by the closing check, TestMain), a
// compressed file, stderr (-o /dev/stderr; without -o the log is a file,
// TestClosingLinesMatchReport), or nowhere (-o none). The same deterministic C++
// program gives the same figures each time, its libstdc++ pool among the
// suppressed leaks in the report's words (bytes, then the count). Both
// tracers.
func TestClosingFiguresEveryDestination(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memtrace eight times")
	}
	bin, _ := buildSites(t)
	for _, mode := range []string{"bpf", "preload"} {
		t.Run(mode, func(t *testing.T) { closingEveryDestination(t, bin, mode) })
	}
}

func closingEveryDestination(t *testing.T, bin, mode string) {
	if mode == "bpf" {
		requireBPF(t)
	}
	{
		dir := t.TempDir()
		var want string
		for _, dest := range []struct {
			args  []string
			where string
		}{
			{[]string{"-o", filepath.Join(dir, "app.log")}, "the log is " + filepath.Join(dir, "app.log") + ";"},
			{[]string{"-o", filepath.Join(dir, "app.log.zst")}, "the log is " + filepath.Join(dir, "app.log.zst") + ";"},
			{[]string{"-o", "/dev/stderr"}, "the log is on stderr, above"},
			{[]string{"-o", "none", "--profile-dir", filepath.Join(dir, "prof")}, "no log was written (-o none)"},
		} {
			args := append(append([]string{"--stack-depth", "16"}, dest.args...), "--", bin)
			if mode == "preload" {
				args = append([]string{"--preload"}, args...)
			}
			code, _, se := memtraceRun(t, nil, args...)
			if code != 0 {
				t.Fatalf("%s %v: memtrace exit %d: %s", mode, dest.args, code, se)
			}
			if mode == "bpf" && len(dest.args) == 2 && dest.args[0] == "-o" && !strings.HasSuffix(dest.args[1], ".zst") && dest.args[1] != "/dev/stderr" {
				bpfLog(t, dest.args[1])
			}
			got := statsBlock(t, se)
			lines := strings.Split(strings.TrimSpace(se), "\n")
			if !strings.Contains(se, "memtrace finished: "+dest.where) {
				t.Errorf("%s %v: the closing lines do not say %q:\n%s", mode, dest.args, dest.where, se)
			}
			if dest.args[1] == "/dev/stderr" && !strings.Contains(lines[len(lines)-1], "the log is on stderr") {
				t.Errorf("%s: with the log on stderr the last line should say so:\n%s", mode, se)
			}
			if !strings.Contains(got, "\tsuppressed leaks: ") || !strings.Contains(got, " leaks)\n\tlost events: 0\n") {
				t.Errorf("%s %v: want suppressed leaks as bytes (N leaks), then no lost events:\n%s", mode, dest.args, got)
			}
			if want == "" {
				want = got
			} else if got != want {
				t.Errorf("%s %v: figures\n%s\nwant those of the run to a file:\n%s", mode, dest.args, got, want)
			}
		}
	}
}
