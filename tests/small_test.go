package tests

// End-to-end tests of the small defects of issue 21: a script without #!,
// a log that cannot be written, empty -o, an unwritable --report-dir, the
// environment of a program started under sudo, and --aggregate of a
// directory the user may not read.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// launchers are the two launchers, each tested alike.
var launchers = []struct {
	name string
	args []string
}{{"bpf", nil}, {"preload", []string{"--preload"}}}

// TestScriptWithoutShebang: `memtrace -- ./script` runs a script without
// #! through /bin/sh as a shell does, with the script's exit status; a
// binary file the kernel cannot run is one line, exit 126, and no log.
func TestScriptWithoutShebang(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "noshebang")
	if err := os.WriteFile(script, []byte("echo from-script \"$1\"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(dir, "binary")
	if err := os.WriteFile(binary, []byte("MZ\x90\x00\x03\x00\x00\x00\x04\x00"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, m := range launchers {
		log := filepath.Join(dir, m.name+".log")
		code, so, se := memtraceRun(t, nil, append(m.args, "-o", log, "--", script, "arg")...)
		if code != 3 || strings.TrimSpace(so) != "from-script arg" || strings.Contains(se, "format error") {
			t.Errorf("%s: script without #!: exit %d, stdout %q, stderr %q; want the script run by /bin/sh, exit 3", m.name, code, so, se)
		}
		if m.name == "bpf" {
			bpfLog(t, log)
		}
		log = filepath.Join(dir, m.name+"-bin.log")
		code, _, se = memtraceRun(t, nil, append(m.args, "-o", log, "--", binary)...)
		if code != 126 {
			t.Errorf("%s: binary file: exit %d, want 126 (stderr %q)", m.name, code, se)
		}
		oneLine(t, se, "exec format error")
		if _, err := os.Stat(log); err == nil {
			t.Errorf("%s: a log was written for a program that could not start", m.name)
		}
	}
}

// TestLogWriteFailureKeepsStatus: -o /dev/full: the program runs to its
// end, memtrace exits with its status, and the failed log is one line.
func TestLogWriteFailureKeepsStatus(t *testing.T) {
	requireBPF(t)
	for _, m := range launchers {
		code, so, se := memtraceRun(t, nil, append(m.args, "-o", "/dev/full", "--", "/bin/sh", "-c", "echo ran; exit 5")...)
		if code != 5 || strings.TrimSpace(so) != "ran" {
			t.Errorf("%s: -o /dev/full: exit %d, stdout %q, want the program's 5 and its output (stderr %q)", m.name, code, so, se)
		}
		oneLine(t, se, "no space left on device")
	}
}

// TestEmptyValuesRefused: -o "" (an unset shell variable, most often)
// and its likes are one line and exit 2, not a log on stderr.
func TestEmptyValuesRefused(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	for _, flag := range []string{"-o", "--report-dir", "--profile-dir", "--http"} {
		code, _, se := memtraceRun(t, nil, flag, "", "--", "/bin/sh", "-c", "touch "+marker)
		if code != 2 {
			t.Errorf("%s \"\": exit %d, want 2 (stderr %q)", flag, code, se)
		}
		oneLine(t, se, flag+` ""`)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the program ran")
	}
}

// TestUnwritableReportDir: a --report-dir the user cannot write is one
// line and exit 2 before the program starts, in both launchers.
func TestUnwritableReportDir(t *testing.T) {
	requireBPF(t)
	root := sudoDir(t, 0o755, 0) // root's: the user behind sudo may not write it
	marker := filepath.Join(sudoDir(t, 0o777, 0), "ran")
	for _, m := range launchers {
		for _, c := range []struct {
			env  []string
			dir  string
			want string
		}{
			{sudoEnv, filepath.Join(root, "reports"), "permission denied"},
			{nil, "/proc/self/reports", "no such file or directory"},
			{nil, "/etc/passwd", "not a directory"},
		} {
			code, _, se := memtraceRun(t, c.env, append(m.args, "--report-dir", c.dir, "--", "/bin/sh", "-c", "touch "+marker)...)
			if code != 2 {
				t.Errorf("%s: --report-dir %s: exit %d, want 2 (stderr %q)", m.name, c.dir, code, se)
			}
			oneLine(t, se, "--report-dir "+c.dir+": "+c.want)
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("%s: --report-dir %s: the program ran", m.name, c.dir)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(root, "reports")); err == nil {
		t.Fatal("root made the report directory for the user")
	}
}

// TestSudoProgramEnvironment: under sudo the program gets the invoking
// user's HOME, USER and LOGNAME (their passwd entry), not root's.
func TestSudoProgramEnvironment(t *testing.T) {
	requireBPF(t)
	dir := sudoDir(t, 0o777, 0)
	for _, m := range launchers {
		log := filepath.Join(dir, m.name+".log")
		env := append([]string{"HOME=/root", "USER=root", "LOGNAME=root"}, sudoEnv...)
		code, so, se := memtraceRun(t, env, append(m.args, "-o", log, "--", "/bin/sh", "-c", `echo "$HOME $USER $LOGNAME $(id -u)"`)...)
		if want := "/nonexistent nobody nobody " + nobody; code != 0 || strings.TrimSpace(so) != want {
			t.Errorf("%s: the program saw %q (exit %d, %s), want %q", m.name, so, code, se, want)
		}
		if m.name == "bpf" {
			bpfLog(t, log)
		}
	}
}

// TestAggregateUnreadableDir: --aggregate of a directory the user may
// not read says so, not "no reports".
func TestAggregateUnreadableDir(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed")
	}
	dir := sudoDir(t, 0o700, 0)
	cmd := command(setpriv, "--reuid="+nobody, "--regid="+nobody, "--clear-groups", need(t, "bin/memtrace"), "report", "--aggregate", dir)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("exit 0 for a directory the user may not read: %s", out)
	}
	oneLine(t, string(out), "read report directory "+dir+": permission denied")
	code, _, se := memtraceRun(t, nil, "report", "--aggregate", filepath.Join(dir, "missing"))
	if code != 1 {
		t.Errorf("missing directory: exit %d", code)
	}
	oneLine(t, se, "no such file or directory")
}

// TestPreloadRefusesDescriptorTracking: the LD_PRELOAD library does not
// see descriptors, so --preload --track fd is refused in one line rather
// than writing a log in which the program seems to open nothing.
func TestPreloadRefusesDescriptorTracking(t *testing.T) {
	for _, track := range []string{"fd", "malloc,dmabuf", "ion"} {
		code, _, se := memtraceRun(t, nil, "--preload", "--track", track, "-o", filepath.Join(t.TempDir(), "x.log"), "--", "/bin/true")
		if code != 2 {
			t.Errorf("--preload --track %s: exit %d, want 2\n%s", track, code, se)
		}
		oneLine(t, se, "need the eBPF tracer")
	}
}
