package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCreateLogUnderSudo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("simulating sudo needs root")
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
	f, err := createLog(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil || st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("log owned by %d:%d (%v), want 65534:65534", st.Uid, st.Gid, err)
	}

	private := filepath.Join(t.TempDir(), "app.log") // root's 0700 directory
	_, err = createLog(private)
	want := "create log " + private + ": permission denied; under sudo the log is created as the user who ran sudo: give a path that user can write"
	if err == nil || err.Error() != want {
		t.Errorf("log in root's directory: %v\nwant %s", err, want)
	}

	t.Setenv("SUDO_UID", "")
	f, err = createLog(private)
	if err != nil {
		t.Fatalf("without sudo, root's own directory: %v", err)
	}
	f.Close()
	t.Setenv("SUDO_UID", "x1")
	if _, err := createLog(filepath.Join(shared, "other.log")); err == nil || !strings.Contains(err.Error(), `SUDO_UID="x1" is not a user ID`) {
		t.Errorf("bad SUDO_UID: %v", err)
	}
}
