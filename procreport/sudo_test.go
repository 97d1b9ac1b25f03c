package procreport

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
)

const nobody = 65534

func simulateSudo(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		bpftest.Unavailable(t, "simulating sudo needs root")
	}
	t.Setenv("SUDO_UID", "65534")
	t.Setenv("SUDO_GID", "65534")
}

// walkable is a fresh directory with the given mode in a parent anyone can
// walk (t.TempDir's parent is private to root).
func walkable(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "memtrace-procreport")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

func ownerOf(t *testing.T, p string) uint32 {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Uid
}

func sampleReport(pid uint32) *Report {
	return &Report{Process: "svc", PID: pid, End: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), AllocCalls: 3, AllocBytes: 30, Peak: 20}
}

// Under sudo the report directory and files are the invoking user's.
func TestWriteUnderSudoOwnedByUser(t *testing.T) {
	simulateSudo(t)
	dir := filepath.Join(walkable(t, 0o777), "reports", "run1")
	txt, htm, err := Write(dir, sampleReport(42))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(dir), dir, txt, htm} {
		if uid := ownerOf(t, p); uid != nobody {
			t.Errorf("%s owned by %d, want %d", p, uid, nobody)
		}
	}
	if s, err := Read(txt); err != nil || s.PID != 42 {
		t.Errorf("read back: %+v, %v", s, err)
	}
}

// A directory the user cannot write is refused by the kernel, as it would
// be without sudo, and nothing is written there.
func TestWriteUnderSudoUnwritableDir(t *testing.T) {
	simulateSudo(t)
	dir := walkable(t, 0o755) // root's
	_, _, err := Write(dir, sampleReport(7))
	if !errors.Is(err, fs.ErrPermission) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("write into root's directory under sudo: %v, want one line, permission denied", err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 0 {
		t.Errorf("files created: %v", names)
	}
	_, _, err = Write(filepath.Join(dir, "sub"), sampleReport(7))
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "create report directory") {
		t.Fatalf("create a directory in root's: %v", err)
	}
}

// --aggregate under sudo reads and writes as the user: a report the user
// may not read is skipped, the summary is theirs, and a summary name
// planted as a symlink to a root file does not overwrite it.
func TestAggregateUnderSudo(t *testing.T) {
	simulateSudo(t)
	dir := walkable(t, 0o777)
	if _, _, err := Write(dir, sampleReport(1)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SUDO_UID", "") // root's own report, readable by root only
	txt, _, err := Write(dir, sampleReport(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(txt, 0o600); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(walkable(t, 0o755), "victim")
	if err := os.WriteFile(victim, []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "evil.html")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SUDO_UID", "65534")

	sums, skipped, err := Aggregate(dir, "sum")
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || sums[0].PID != 1 || len(skipped) != 1 || skipped[0] != filepath.Base(txt)+" (permission denied)" {
		t.Errorf("aggregate as the user: %+v, skipped %v; want pid 1 only, root's report skipped", sums, skipped)
	}
	for _, p := range []string{"sum.txt", "sum.html"} {
		if uid := ownerOf(t, filepath.Join(dir, p)); uid != nobody {
			t.Errorf("%s owned by %d, want %d", p, uid, nobody)
		}
	}
	if _, _, err := Aggregate(dir, "evil"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("summary through a symlink to root's file: %v, want permission denied", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "root's\n" {
		t.Errorf("root's file overwritten: %q", b)
	}
}

// TestPrepare: the report directory is made and probed as the user
// before a run; what the user cannot write, or not a directory, is an
// error naming the directory and the cause, and nothing is left in it.
func TestPrepare(t *testing.T) {
	simulateSudo(t)
	ok := filepath.Join(walkable(t, 0o777), "a", "b")
	if err := Prepare(ok); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(ok); len(ents) != 0 || ownerOf(t, ok) != nobody {
		t.Fatalf("Prepare left %v in %s (owner %d)", ents, ok, ownerOf(t, ok))
	}
	root := walkable(t, 0o755)
	for dir, want := range map[string]error{filepath.Join(root, "r"): fs.ErrPermission, root: fs.ErrPermission, "/etc/passwd": syscall.ENOTDIR} {
		err := Prepare(dir)
		if !errors.Is(err, want) || !strings.HasPrefix(err.Error(), "--report-dir "+dir+": ") {
			t.Errorf("Prepare(%s) = %v, want %v", dir, err, want)
		}
	}
}

// TestAggregateUnreadableDir: a directory the user may not list is that
// error, not "no reports".
func TestAggregateUnreadableDir(t *testing.T) {
	simulateSudo(t)
	dir := walkable(t, 0o700)
	if _, _, err := Write(dir, sampleReport(1)); err == nil {
		t.Fatal("wrote into root's 0700 directory as the user")
	}
	if _, _, err := Aggregate(dir, "sum"); !errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrNoReports) {
		t.Fatalf("Aggregate = %v, want permission denied", err)
	}
}
