package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/internal/cli"
	"github.com/memtrace/memtrace/live"
	"github.com/memtrace/memtrace/procreport"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// memtraceBin is this package built (no preload library needed: the
// cases never trace).
func memtraceBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "memtrace-cli"); buildErr != nil {
			return
		}
		built = filepath.Join(buildDir, "memtrace")
		var out []byte
		if out, buildErr = exec.Command("go", "build", "-o", built, ".").CombinedOutput(); buildErr != nil {
			buildErr = &buildError{buildErr, string(out)}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// TestCommandLineErrors: each bad command line of memtrace and memtrace
// report is one GNU-style line, exit 2; a file that is not a log is one
// line, exit 1, quoting none of it; -h and --version exit 0.
func TestCommandLineErrors(t *testing.T) {
	bin := memtraceBin(t)
	src := filepath.Join(t.TempDir(), "leaky.cc")
	if err := os.WriteFile(src, []byte("#include <stdlib.h>\nint main() { malloc(10); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--stack-dept", "4", "--", "true"}, 2, "memtrace: unknown option '--stack-dept'; did you mean '--stack-depth'?"},
		{[]string{"-folow", "--", "true"}, 2, "memtrace: unknown option '-folow'; did you mean '--follow'?"},
		{[]string{"--frobnicate", "--", "true"}, 2, "memtrace: unknown option '--frobnicate' (see memtrace --help)"},
		{[]string{"--stack-depth"}, 2, "memtrace: option '--stack-depth' requires an argument N (see memtrace --help)"},
		{[]string{"-stack-depth", "lots", "--", "true"}, 2, "memtrace: invalid argument 'lots' for '-stack-depth': not a number"},
		{[]string{"--stack-depth", "500", "--", "true"}, 2, "memtrace: bad --stack-depth 500: give 1 to 127 (0 turns stacks off)"},
		{[]string{"--interval=soon", "--", "true"}, 2, "memtrace: invalid argument 'soon' for '--interval': give a duration such as 500ms, 10s or 1m"},
		{[]string{"report", "--print-leak", "0", "x.log"}, 2, "memtrace report: unknown option '--print-leak'; did you mean '--print-leaks'?"},
		{[]string{"report", "-n"}, 2, "memtrace report: option '-n' requires an argument N (see memtrace report --help)"},
		{[]string{"report", "--peak-limit", "many", "x.log"}, 2, "memtrace report: invalid argument 'many' for '--peak-limit': not a number"},
		{[]string{"report", "--aggregate"}, 2, "memtrace report: option '--aggregate' requires an argument DIR (see memtrace report --help)"},
		{[]string{"report", "--aggregate", "d", "--json", "x"}, 2, "memtrace report: --aggregate takes --output-prefix P, not --json (see memtrace report --help)"},
		{[]string{"report", "-l", "2", "x.log"}, 2, "memtrace report: invalid argument '2' for '-l': give 0 or 1"},
		{[]string{"report", "-n5", "-l2", "x.log"}, 2, "memtrace report: invalid argument '2' for '-l': give 0 or 1"},
		{[]string{"reprot", "x.log"}, 127, "memtrace: reprot: no such program or subcommand; did you mean 'report'?"},
		{[]string{"rep", "x.log"}, 127, "memtrace: rep: no such program or subcommand; did you mean 'report'?"},
		{[]string{"report", src}, 1, "memtrace report: leaky.cc is not a memtrace or memtrack log: none of its 2 lines read is a log line"},
	} {
		cmd := exec.Command(bin, c.args...)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || se.String() != c.want+"\n" || so.Len() != 0 || strings.Contains(se.String(), "malloc") {
			t.Errorf("memtrace %q: exit %d, stdout %q, stderr %q; want %d, %q", c.args, code, so.String(), se.String(), c.code, c.want)
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"report", "-h"}, {"report", "--help"}, {"--version"}, {"report", "--version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil || len(out) == 0 {
			t.Errorf("memtrace %q: %v", args, err)
		}
	}
}

// TestMistypedWord: the first word, not found as a program, is read as a
// typo of report, help or version only where it stands for PROG and names
// no file; a program found under that name is never second-guessed.
func TestMistypedWord(t *testing.T) {
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	found := func(p string) (string, error) { return "/usr/bin/" + p, nil }
	for _, c := range []struct {
		args, argv []string
		look       func(string) (string, error)
		want       string
	}{
		{[]string{"reprot", "x.log"}, []string{"reprot", "x.log"}, missing, "report"},
		{[]string{"repotr"}, []string{"repotr"}, missing, "report"},
		{[]string{"rep", "x.log"}, []string{"rep", "x.log"}, missing, "report"},
		{[]string{"hlep"}, []string{"hlep"}, missing, "help"},
		{[]string{"versoin"}, []string{"versoin"}, missing, "version"},
		{[]string{"reprot", "x.log"}, []string{"reprot", "x.log"}, found, ""},                                      // a program of that name runs
		{[]string{"./reprot"}, []string{"./reprot"}, missing, ""},                                                  // a path is a path
		{[]string{"--", "reprot"}, []string{"reprot"}, missing, ""},                                                // -- says PROG
		{[]string{"-v", "reprot"}, []string{"reprot"}, missing, ""},                                                // not where report goes
		{[]string{"frobnicate"}, []string{"frobnicate"}, missing, ""},                                              // near nothing
		{[]string{"help", "x"}, []string{"help", "x"}, missing, ""},                                                // the word itself: a program's name
		{[]string{"reprot"}, []string{"reprot"}, func(string) (string, error) { return "", os.ErrPermission }, ""}, // found, not executable: 126's
	} {
		if got := mistypedWord(c.args, c.argv, c.look); got != c.want {
			t.Errorf("%q: %q, want %q", c.args, got, c.want)
		}
	}
}

// TestHelpNamesFiles: --help names the files --report-dir and
// --profile-dir write as the code that names them does (issue 33: it said
// <process>_<timestamp>.txt for grow-25958_…Z.txt).
func TestHelpNamesFiles(t *testing.T) {
	var b strings.Builder
	cli.Help(&b, cli.Memtrace)
	help := strings.Join(strings.Fields(b.String()), " ")
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	r := &procreport.Report{Process: "grow", PID: 25958, End: at}
	if name := r.Name() + ".txt"; !strings.Contains(help, name) {
		t.Errorf("--help does not show --report-dir's name %s:\n%s", name, b.String())
	}
	if !strings.Contains(help, "COMM-PID_TIME.txt") {
		t.Errorf("--help does not give --report-dir's pattern COMM-PID_TIME.txt")
	}
	if name := live.ProfileName(at); !strings.Contains(help, strings.ReplaceAll(name, "20260102T150405.000Z", "TIME")) {
		t.Errorf("--help does not show --profile-dir's name %s", name)
	}
}

// TestHelpSizes: the options that take a byte count say the suffixes
// config.ParseSize reads, and each reads its largest the help allows.
func TestHelpSizes(t *testing.T) {
	if v, err := config.ParseSize("1G"); err != nil || v != 1<<30 {
		t.Fatalf("ParseSize(1G) = %d, %v", v, err)
	}
	for _, name := range []string{"min-size", "sample", "buffer-size"} {
		if f := cli.Memtrace.Lookup(name); f == nil || !strings.Contains(f.Help, "K/M/G suffixes") {
			t.Errorf("--%s's help does not say K/M/G suffixes", name)
		}
	}
	for _, args := range [][]string{{"--sample", "1G", "-o", "x.pb.gz", "--", "true"}, {"--buffer-size", "1G", "--", "true"}, {"--min-size", "1G", "--", "true"}} {
		if _, err := parseArgs(args, io.Discard); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// TestBufferSizeBothPaths: --buffer-size is the eBPF ring's size and the
// LD_PRELOAD library's shared region's (which --preload once ignored
// without a word); without it each is its default.
func TestBufferSizeBothPaths(t *testing.T) {
	for _, c := range []struct {
		args         []string
		ring, region int
	}{
		{[]string{"--buffer-size", "64M", "--", "true"}, 64 << 20, 64 << 20},
		{[]string{"--preload", "--buffer-size", "1G", "--", "true"}, 1 << 30, 1 << 30},
		{[]string{"--preload", "--", "true"}, 0, 0},
	} {
		o, err := parseArgs(c.args, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if ro := o.runnerOptions(false); ro.RingBytes != c.ring || ro.SharedMemory != c.region {
			t.Errorf("%q: ring %d, region %d; want %d, %d", c.args, ro.RingBytes, ro.SharedMemory, c.ring, c.region)
		}
	}
	if _, err := parseArgs([]string{"--preload", "--buffer-size", "3M", "--", "true"}, io.Discard); err == nil {
		t.Error("--preload --buffer-size 3M (not a power of two) was taken")
	}
}

// TestPreloadRefusesEBPFOnlyFlags: the flags that choose how the eBPF
// tracer works are refused with --preload, in one line, rather than
// ignored. --floor is the library's to refuse (tests: TestCLIWithoutPrivilege).
func TestPreloadRefusesEBPFOnlyFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--preload", "--no-uprobe-multi", "--", "true"}, "--no-uprobe-multi picks the eBPF probes' links"},
		{[]string{"--preload", "--stack-unwind", "fp", "--", "true"}, "--stack-unwind fp is the eBPF walk's"},
	} {
		_, err := parseArgs(c.args, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want one usage line with %q", c.args, err, c.want)
		}
	}
	for _, args := range [][]string{{"--floor", "--", "true"}, {"--no-uprobe-multi", "--", "true"}, {"--stack-unwind", "fp", "--", "true"}, {"--preload", "--stack-unwind", "dwarf", "--", "true"}} {
		if _, err := parseArgs(args, io.Discard); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}
