package runner

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/memtrace/memtrace/internal/bpftest"
)

func TestCreateLogUnderSudo(t *testing.T) {
	if os.Geteuid() != 0 {
		bpftest.Unavailable(t, "simulating sudo needs root")
	}
	t.Setenv("SUDO_UID", "65534")
	t.Setenv("SUDO_GID", "65534")
	shared, err := os.MkdirTemp("", "memtrace-log")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shared)
	os.Chmod(shared, 0o777)

	p := filepath.Join(shared, "app.log")
	f, err := CreateLog(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil || st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("log owned by %d:%d (%v), want 65534:65534", st.Uid, st.Gid, err)
	}

	private := filepath.Join(t.TempDir(), "app.log") // root's 0700 directory
	_, err = CreateLog(private)
	want := "create log " + private + ": permission denied; under sudo the log is created as the user who ran sudo: give a path that user can write"
	if err == nil || err.Error() != want {
		t.Errorf("log in root's directory: %v\nwant %s", err, want)
	}

	t.Setenv("SUDO_UID", "")
	f, err = CreateLog(private)
	if err != nil {
		t.Fatalf("without sudo, root's own directory: %v", err)
	}
	f.Close()
	t.Setenv("SUDO_UID", "x1")
	if _, err := CreateLog(filepath.Join(shared, "other.log")); err == nil || !strings.Contains(err.Error(), `SUDO_UID="x1" is not a user ID`) {
		t.Errorf("bad SUDO_UID: %v", err)
	}
}

// Under sudo, -o /dev/fd/N writes to the descriptor memtrace was given
// (the user may not reopen a root process's descriptors), and only to one
// open for writing: reopening it as root would write a file the user only
// gave memtrace to read.
func TestCreateLogOwnDescriptorUnderSudo(t *testing.T) {
	if os.Geteuid() != 0 {
		bpftest.Unavailable(t, "simulating sudo needs root")
	}
	t.Setenv("SUDO_UID", "65534")
	t.Setenv("SUDO_GID", "65534")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := CreateLog("/dev/fd/" + strconv.Itoa(int(w.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	w.Close() // the log has a descriptor of its own
	f.WriteString("logged")
	f.Close()
	if b, _ := io.ReadAll(r); string(b) != "logged" {
		t.Errorf("read %q from the pipe", b)
	}

	ro := filepath.Join(t.TempDir(), "readonly")
	os.WriteFile(ro, []byte("keep"), 0o644)
	in, err := os.Open(ro)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	p := "/proc/self/fd/" + strconv.Itoa(int(in.Fd()))
	if _, err := CreateLog(p); err == nil || !strings.Contains(err.Error(), "is not open for writing") {
		t.Errorf("read-only descriptor: %v", err)
	}
	if b, _ := os.ReadFile(ro); string(b) != "keep" {
		t.Errorf("the read-only file became %q", b)
	}
	if _, err := CreateLog("/dev/fd/987"); err == nil || !strings.Contains(err.Error(), "descriptor 987 is not open") {
		t.Errorf("closed descriptor: %v", err)
	}
}
