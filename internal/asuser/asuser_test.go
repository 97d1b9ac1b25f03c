package asuser

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
)

const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		bpftest.Unavailable(t, "changing credentials needs root")
	}
}

// sharedDir is a directory nobody can write to: t.TempDir's parent is
// private to root.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "asuser")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

func owner(t *testing.T, path string) (int, int) {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	s := st.Sys().(*syscall.Stat_t)
	return int(s.Uid), int(s.Gid)
}

// nonRootThreads lists the tasks of this process whose user IDs are not
// all 0, waiting up to a second for discarded threads to finish exiting.
func nonRootThreads(t *testing.T) []string {
	t.Helper()
	var bad []string
	for deadline := time.Now().Add(time.Second); ; {
		bad = bad[:0]
		tasks, _ := filepath.Glob("/proc/self/task/*/status")
		for _, p := range tasks {
			b, err := os.ReadFile(p)
			if err != nil {
				continue // exited meanwhile
			}
			for _, ln := range strings.Split(string(b), "\n") {
				if (strings.HasPrefix(ln, "Uid:") || strings.HasPrefix(ln, "Gid:")) && strings.Trim(ln[4:], "\t 0") != "" {
					bad = append(bad, p+": "+ln)
				}
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			return bad
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAsCreatesFileOwnedByUser(t *testing.T) {
	needRoot(t)
	p := filepath.Join(sharedDir(t), "log")
	var f *os.File
	err := As(User{UID: nobody, GID: nobody}, func() error {
		var err error
		f, err = os.Create(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Written after As returned, from whatever thread: the descriptor
	// keeps the rights it was opened with.
	if _, err := f.WriteString("x"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if uid, gid := owner(t, p); uid != nobody || gid != nobody {
		t.Errorf("file owned by %d:%d, want %d:%d", uid, gid, nobody, nobody)
	}
}

func TestAsIsRefusedRootFiles(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	secret := filepath.Join(sharedDir(t), "secret")
	if err := os.WriteFile(secret, []byte("root:$6$secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nb := User{UID: nobody, GID: nobody}
	cases := map[string]func() error{
		"read a root-only file": func() error { _, err := os.ReadFile(secret); return err },
		"write a root file":     func() error { return os.WriteFile(secret, []byte("x"), 0o600) },
		"create in a private directory": func() error {
			_, err := os.Create(filepath.Join(dir, "x"))
			return err
		},
	}
	for name, fn := range cases {
		if err := As(nb, fn); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("%s as nobody: %v, want permission denied", name, err)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "root:$6$secret\n" {
		t.Errorf("root's file changed: %q", b)
	}
}

// A supplementary group from User.Groups grants what it grants in the
// file system, and without it the same read is refused.
func TestAsSupplementaryGroups(t *testing.T) {
	needRoot(t)
	p := filepath.Join(sharedDir(t), "group-readable")
	if err := os.WriteFile(p, []byte("ok"), 0o640); err != nil {
		t.Fatal(err)
	}
	const grp = 54321
	if err := os.Chown(p, 0, grp); err != nil {
		t.Fatal(err)
	}
	read := func() error { _, err := os.ReadFile(p); return err }
	if err := As(User{UID: nobody, GID: nobody, Groups: []int{grp}}, read); err != nil {
		t.Errorf("with group %d: %v", grp, err)
	}
	if err := As(User{UID: nobody, GID: nobody}, read); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("without group %d: %v, want permission denied", grp, err)
	}
	if err := As(User{UID: nobody, GID: grp}, read); err != nil {
		t.Errorf("with primary group %d: %v", grp, err)
	}
}

// Only As's own thread changes credentials, and it does not survive: after
// many concurrent calls, every thread of the process is root again, and
// other goroutines kept root's rights while the calls ran.
func TestAsLeavesOtherThreadsAlone(t *testing.T) {
	needRoot(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := As(User{UID: nobody, GID: nobody}, func() error {
				<-release // hold the credentials while root works elsewhere
				if os.Geteuid() != nobody {
					return errors.New("fn does not run as the user")
				}
				return nil
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	// While 32 threads hold nobody's credentials, other goroutines (on
	// other threads) still read root's file.
	var rg sync.WaitGroup
	for i := 0; i < 64; i++ {
		rg.Add(1)
		go func() {
			defer rg.Done()
			if _, err := os.ReadFile(secret); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	rg.Wait()
	close(release)
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if bad := nonRootThreads(t); len(bad) > 0 {
		t.Errorf("threads kept the user's credentials after As returned (pid %d):\n%s", os.Getpid(), strings.Join(bad, "\n"))
	}
	if _, err := os.ReadFile(secret); err != nil {
		t.Errorf("root lost access afterwards: %v", err)
	}
}

func TestAsRecoversPanic(t *testing.T) {
	needRoot(t)
	err := As(User{UID: nobody, GID: nobody}, func() error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("panic in fn: %v", err)
	}
}

func TestInvoker(t *testing.T) {
	needRoot(t)
	cases := []struct {
		uid, gid string
		ok       bool
		err      string
	}{
		{"", "", false, ""},
		{"0", "0", false, ""}, // root ran sudo
		{"65534", "65534", true, ""},
		{"abc", "1", false, `SUDO_UID="abc" is not a user ID`},
		{"1000", "", false, "SUDO_GID=\"\" is not a group ID"},
		{"-5", "1", false, "is not a user ID"},
		{"4294967296", "1", false, "is not a user ID"},
	}
	for _, c := range cases {
		t.Setenv("SUDO_UID", c.uid)
		t.Setenv("SUDO_GID", c.gid)
		u, ok, err := Invoker()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("SUDO_UID=%q SUDO_GID=%q: error %v, want %q", c.uid, c.gid, err, c.err)
			}
			continue
		}
		if err != nil || ok != c.ok {
			t.Errorf("SUDO_UID=%q SUDO_GID=%q: ok=%v err=%v, want ok=%v", c.uid, c.gid, ok, err, c.ok)
		}
		if ok && (u.UID != nobody || u.GID != nobody) {
			t.Errorf("SUDO_UID=%q: user %+v", c.uid, u)
		}
	}
}

// Create, OpenFile and MkdirAll act as the user under sudo and as root
// without it; and a bad SUDO_UID stops them rather than falling back to
// root.
func TestHelpersFollowSudo(t *testing.T) {
	needRoot(t)
	dir := sharedDir(t)
	t.Setenv("SUDO_UID", "")
	t.Setenv("SUDO_GID", "")
	f, err := Create(filepath.Join(dir, "plain"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if uid, _ := owner(t, filepath.Join(dir, "plain")); uid != 0 {
		t.Errorf("without sudo the file is owned by %d, want root", uid)
	}

	t.Setenv("SUDO_UID", "65534")
	t.Setenv("SUDO_GID", "65534")
	if err := MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "a/b"} {
		if uid, gid := owner(t, filepath.Join(dir, p)); uid != nobody || gid != nobody {
			t.Errorf("%s owned by %d:%d", p, uid, gid)
		}
	}
	f, err = Create(filepath.Join(dir, "a", "b", "log"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if uid, _ := owner(t, filepath.Join(dir, "a", "b", "log")); uid != nobody {
		t.Errorf("under sudo the file is owned by %d, want %d", uid, nobody)
	}
	if _, err := Open(filepath.Join(dir, "plain")); err != nil {
		t.Errorf("a world-readable root file: %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, "plain"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(dir, "plain")); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("a root-only file under sudo: %v, want permission denied", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "plain")); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("ReadFile of a root-only file under sudo: %v, want permission denied", err)
	}
	if b, err := ReadFile(filepath.Join(dir, "a", "b", "log")); err != nil || len(b) != 0 {
		t.Errorf("ReadFile of the user's file: %q, %v", b, err)
	}

	t.Setenv("SUDO_UID", "nobody")
	if _, err := Create(filepath.Join(dir, "bad")); err == nil || !strings.Contains(err.Error(), "SUDO_UID") {
		t.Errorf("bad SUDO_UID: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "bad")); err == nil {
		t.Error("a bad SUDO_UID still created the file")
	}
}

// TestEnv: the user's HOME, USER and LOGNAME replace root's, once each;
// a user without a passwd entry keeps the environment as it is.
func TestEnv(t *testing.T) {
	env := []string{"HOME=/root", "PATH=/bin", "USER=root", "LOGNAME=root", "HOME=/again"}
	got := Env(env, User{UID: 65534, GID: 65534})
	want := []string{"PATH=/bin", "HOME=/nonexistent", "USER=nobody", "LOGNAME=nobody"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Env = %q, want %q", got, want)
	}
	if got := Env(env, User{UID: 54321}); strings.Join(got, " ") != strings.Join(env, " ") {
		t.Fatalf("Env for a user without a passwd entry = %q, want it unchanged", got)
	}
}
