package tests

// End-to-end tests of files memtrace opens under sudo (SUDO_UID/SUDO_GID
// set, run as root): the --config file, the -o log and the --report-dir
// files are opened as the invoking user, so the kernel applies that user's
// rights, and no error shows what a file contains.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/procreport"
)

// attacker is a user other than the one behind sudo and other than root.
const attacker = 12345

var sudoEnv = []string{"SUDO_UID=" + nobody, "SUDO_GID=" + nobody}

// sudoDir makes a directory with mode and owner in /tmp (t.TempDir's
// parent is private to root, so the invoking user could not reach it).
func sudoDir(t *testing.T, mode os.FileMode, uid int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		bpftest.Unavailable(t, "simulating sudo needs root")
	}
	dir, err := os.MkdirTemp("", "memtrace-sudo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

func uidOf(t *testing.T, path string) (uint32, uint32) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid, st.Gid
}

const shadowSecret = "root:$y$j9T$s3cr3tSALT$s3cr3tHASH:19000:0:99999:7:::"

// TestSudoConfigRootOnlyFile: `sudo memtrace --config /etc/shadow` must not
// read a file the user cannot, let alone print its first line.
func TestSudoConfigRootOnlyFile(t *testing.T) {
	dir := sudoDir(t, 0o755, 0)
	p := filepath.Join(dir, "shadow")
	if err := os.WriteFile(p, []byte(shadowSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, how := range [][]string{{"--config", p}, nil} {
		env := sudoEnv
		if how == nil {
			env = append(env, "MEMTRACE_CONFIG="+p)
		}
		code, _, se := memtraceRun(t, env, append(how, "--", "/bin/true")...)
		if code != 2 || strings.Contains(se, "s3cr3t") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and nothing of the file", how, code, se)
		}
		oneLine(t, se, "cannot read config file "+p+": permission denied")
	}
}

// TestSudoConfigUserFileContent: a bad file the user may read still has
// none of its content in the error, only its name, line and a short key.
func TestSudoConfigUserFileContent(t *testing.T) {
	dir := sudoDir(t, 0o755, 65534)
	cases := []struct{ body, want string }{
		{"# mine\npassword: s3cr3tPW\n", "config file %s: line 2 is not key=value"},
		{"token=s3cr3tPW\n", `config file %s:1: unknown key "token"`},
		{"stack_depth=s3cr3tPW\n", "config file %s:1: bad stack_depth value: want a whole number"},
		{"track=malloc,s3cr3tPW\n", "config file %s:1: bad track value"},
	}
	for i, c := range cases {
		p := filepath.Join(dir, "c"+itoa(i)+".cfg")
		if err := os.WriteFile(p, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, 65534, 65534)
		code, _, se := memtraceRun(t, sudoEnv, "--config", p, "--", "/bin/true")
		if code != 2 || strings.Contains(se, "s3cr3t") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and no content", c.body, code, se)
		}
		oneLine(t, se, strings.Replace(c.want, "%s", p, 1))
	}
}

// TestSudoLogOwnedByUser: the -o log belongs to the user behind sudo.
func TestSudoLogOwnedByUser(t *testing.T) {
	requireBPF(t)
	dir := sudoDir(t, 0o777, 0)
	log := filepath.Join(dir, "app.log")
	code, so, se := memtraceRun(t, sudoEnv, "-o", log, "--", "/usr/bin/id", "-u")
	if code != 0 || strings.TrimSpace(so) != nobody {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, so, se)
	}
	bpfLog(t, log)
	if uid, gid := uidOf(t, log); uid != 65534 || gid != 65534 {
		t.Errorf("log owned by %d:%d, want %s:%s", uid, gid, nobody, nobody)
	}
}

// TestSudoLogSymlinkNotFollowed: a symlink another user planted where the
// log goes does not make root overwrite what it points at. Two plantings:
// in a sticky world-writable directory (which fs.protected_symlinks also
// guards when it is on; it is off on some systems, and this machine), and
// in a directory the attacker owns (which that sysctl allows). Either way
// memtrace stops with one line and never runs the program untraced.
func TestSudoLogSymlinkNotFollowed(t *testing.T) {
	requireBPF(t)
	victimDir := sudoDir(t, 0o755, 0)
	victim := filepath.Join(victimDir, "precious")
	markers := sudoDir(t, 0o777, 0)
	plant := map[string]string{
		"sticky /tmp-like": sudoDir(t, 0o777|os.ModeSticky, 0),
		"attacker's dir":   sudoDir(t, 0o755, attacker),
	}
	for name, dir := range plant {
		link := filepath.Join(dir, "app.log")
		if err := os.Symlink(victim, link); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(link, attacker, attacker); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(markers, "ran")
			code, _, se := memtraceRun(t, sudoEnv, "-o", link, "--", "/usr/bin/touch", marker)
			if code == 0 {
				t.Errorf("%s: memtrace exited 0 writing through the symlink", name)
			}
			oneLine(t, se, "create log "+link+": permission denied")
			if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
				t.Fatalf("%s: root's file overwritten through the symlink: %q", name, b)
			}
			if uid, _ := uidOf(t, victim); uid != 0 {
				t.Errorf("%s: root's file now owned by %d", name, uid)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("%s: the program ran although the log could not be opened", name)
				os.Remove(marker)
			}
		}
	}
}

// TestSudoLogUnwritableDir: a directory the user cannot write is one line
// and a prompt non-zero exit, every time.
func TestSudoLogUnwritableDir(t *testing.T) {
	requireBPF(t)
	dir := sudoDir(t, 0o755, 0)
	log := filepath.Join(dir, "app.log")
	for i := 0; i < 3; i++ {
		start := time.Now()
		code, _, se := memtraceRun(t, sudoEnv, "-o", log, "--", "/bin/true")
		if code == 0 {
			t.Errorf("exit 0 with a log the user cannot create")
		}
		oneLine(t, se, "create log "+log+": permission denied; under sudo the log is created as the user who ran sudo")
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("took %v to give up", d)
		}
		if _, err := os.Lstat(log); err == nil {
			t.Fatalf("root created %s for the user", log)
		}
	}
}

// TestSudoReportDirOwnedByUser: --report-dir's directory and files, and
// the summary of `memtrace report --aggregate`, belong to the user.
func TestSudoReportDirOwnedByUser(t *testing.T) {
	requireBPF(t)
	base := sudoDir(t, 0o777, 0)
	reports := filepath.Join(base, "reports")
	log := filepath.Join(base, "app.log")
	code, _, se := memtraceRun(t, sudoEnv, "-o", log, "--report-dir", reports, "--", "/usr/bin/id", "-u")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	bpfLog(t, log)
	files, _ := filepath.Glob(filepath.Join(reports, "*"))
	if len(files) < 2 {
		t.Fatalf("report dir holds %v; want a .txt and an .html", files)
	}
	for _, p := range append(files, reports) {
		if uid, gid := uidOf(t, p); uid != 65534 || gid != 65534 {
			t.Errorf("%s owned by %d:%d, want %s:%s", p, uid, gid, nobody, nobody)
		}
	}
	code, so, se := memtraceRun(t, sudoEnv, "report", "--aggregate", reports)
	if code != 0 || !strings.Contains(so, "1 processes") {
		t.Fatalf("aggregate: exit %d, %s%s", code, so, se)
	}
	for _, s := range []string{"memtrace_summary.txt", "memtrace_summary.html"} {
		if uid, _ := uidOf(t, filepath.Join(reports, s)); uid != 65534 {
			t.Errorf("%s owned by %d", s, uid)
		}
	}
}

// TestSudoAggregateReadsAsUser: --aggregate under sudo skips a report only
// root may read, and does not write its summary through a planted symlink.
func TestSudoAggregateReadsAsUser(t *testing.T) {
	dir := sudoDir(t, 0o777, 0)
	end := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mine, _, err := procreport.Write(dir, &procreport.Report{Process: "mine", PID: 1, End: end, AllocCalls: 1, Peak: 1})
	if err != nil {
		t.Fatal(err)
	}
	os.Chown(mine, 65534, 65534)
	roots, _, err := procreport.Write(dir, &procreport.Report{Process: "rootsecret", PID: 2, End: end, AllocCalls: 1, Peak: 2})
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(roots, 0o600)
	victim := filepath.Join(sudoDir(t, 0o755, 0), "precious")
	os.WriteFile(victim, []byte("precious\n"), 0o644)
	code, so, se := memtraceRun(t, sudoEnv, "report", "--aggregate", dir)
	if code != 0 || !strings.Contains(so, "1 processes") || strings.Contains(so, "rootsecret") || !strings.Contains(se, filepath.Base(roots)) {
		t.Errorf("aggregate: exit %d, stdout %q, stderr %q; want only the user's report, root's skipped", code, so, se)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "evil.txt")); err != nil {
		t.Fatal(err)
	}
	code, _, se = memtraceRun(t, sudoEnv, "report", "--aggregate", dir, "--output-prefix", "evil")
	if code == 0 {
		t.Errorf("aggregate through a symlink to root's file exited 0")
	}
	oneLine(t, se, "permission denied")
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("root's file overwritten: %q", b)
	}
}

// TestSudoLogToStdout: `sudo memtrace -o /dev/stdout -- PROG | memview -f -`
// keeps working (the user may not reopen a root process's descriptors, so
// memtrace writes to the one it was given); a descriptor given only for
// reading is refused, where reopening it as root would truncate the file.
func TestSudoLogToStdout(t *testing.T) {
	requireBPF(t)
	code, so, se := memtraceRun(t, sudoEnv, "-o", "/dev/stdout", "--", "/bin/true")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	p := filepath.Join(t.TempDir(), "stdout.log")
	os.WriteFile(p, []byte(so), 0o600)
	bpfLog(t, p)

	victim := filepath.Join(sudoDir(t, 0o755, 0), "precious")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(victim)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := command(need(t, "bin/memtrace"), "-o", "/dev/stdin", "--", "/bin/true")
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr = in, &stderr
	cmd.Env = append(os.Environ(), sudoEnv...)
	if err := runCmd(t, cmd, 60*time.Second); err == nil {
		t.Errorf("-o /dev/stdin with a read-only stdin exited 0")
	}
	oneLine(t, stderr.String(), "create log /dev/stdin: descriptor 0 is not open for writing")
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("root's file, given as stdin, became %q", b)
	}
}

// TestSudoReportFilesAsUser: `sudo memtrace report` writes its exports as
// the invoking user and cannot read a log that user may not read.
func TestSudoReportFilesAsUser(t *testing.T) {
	dir := sudoDir(t, 0o777, 0)
	log := filepath.Join(dir, "run.log")
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "5"}, logfmt.KV{Key: "mode", Value: "bpf"})
	b = logfmt.AppendAlloc(b, 5, "main", "malloc", 10, 64, 64, 0x1000)
	if err := os.WriteFile(log, b, 0o644); err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(dir, "r.html")
	code, _, se := memtraceRun(t, sudoEnv, "report", "--html", html, log)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, se)
	}
	if uid, gid := uidOf(t, html); uid != 65534 || gid != 65534 {
		t.Errorf("the HTML report is owned by %d:%d, want the user behind sudo", uid, gid)
	}
	secret := filepath.Join(sudoDir(t, 0o700, 0), "root.log")
	if err := os.WriteFile(secret, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, so, se := memtraceRun(t, sudoEnv, "report", secret)
	if code == 0 || strings.Contains(so, "main") {
		t.Errorf("a root-only log was read under sudo: exit %d, %q %q", code, so, se)
	}
}
