package asuser

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/asuser/asusertest"
)

// rootDir is a directory of root's that others may not write.
func rootDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// stickyDir is a root-owned world-writable sticky directory, as /tmp.
func stickyDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "memtrace-sticky")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCreateRefusesPlantedLinks: as root, Create follows no final link
// that another user made or could replace, wherever it is planted, and
// leaves what it points at alone; the error names the path.
func TestCreateRefusesPlantedLinks(t *testing.T) {
	asusertest.NeedRoot(t)
	t.Setenv("SUDO_UID", "")
	for name, dir := range map[string]func(*testing.T) string{
		"the other user's directory": asusertest.Dir,
		"a sticky /tmp-like one":     stickyDir,
		"root's own directory":       rootDir,
	} {
		t.Run(name, func(t *testing.T) {
			link := filepath.Join(dir(t), "out.log")
			victim := asusertest.PlantAt(t, link)
			for _, create := range []func(string) (*os.File, error){Create, CreateNew} {
				f, err := create(link)
				if err == nil {
					f.Close()
					t.Fatalf("%s created through the planted link", link)
				}
				if !strings.Contains(err.Error(), link) {
					t.Errorf("error %q does not name %s", err, link)
				}
				asusertest.Untouched(t, link, victim)
			}
			if err := WriteOutput(link, false, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); !errors.Is(err, ErrForeignLink) {
				t.Errorf("WriteOutput through the link: %v, want ErrForeignLink", err)
			}
			asusertest.Untouched(t, link, victim)
		})
	}
}

// TestCreateFollowsRootsOwnLinks: a link root made in a directory only root
// may change (or a sticky one, where only root may remove root's link) is
// root's own choice and is followed; a root link that the directory's
// other writers could replace, or one that leads on to another user's link,
// is not.
func TestCreateFollowsRootsOwnLinks(t *testing.T) {
	asusertest.NeedRoot(t)
	t.Setenv("SUDO_UID", "")
	for _, dir := range []string{rootDir(t), stickyDir(t)} {
		target := filepath.Join(t.TempDir(), "real.log")
		link := filepath.Join(dir, "current.log")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		f, err := Create(link)
		if err != nil {
			t.Fatalf("root's own link in %s: %v", dir, err)
		}
		f.WriteString("log\n")
		f.Close()
		if b, _ := os.ReadFile(target); string(b) != "log\n" {
			t.Errorf("%s holds %q, want the log written through root's link", target, b)
		}
	}

	// Root's link in a directory the other user owns: they may swap it.
	other := filepath.Join(asusertest.Dir(t), "out.log")
	victim := asusertest.Victim(t)
	if err := os.Symlink(victim, other); err != nil {
		t.Fatal(err)
	}
	if f, err := Create(other); !errors.Is(err, ErrForeignLink) {
		f.Close()
		t.Errorf("root's link in another user's directory: %v, want ErrForeignLink", err)
	}
	asusertest.Untouched(t, other, victim)

	// Root's own link leading to a planted one.
	planted, victim := asusertest.Plant(t, "evil.log")
	chain := filepath.Join(rootDir(t), "chain.log")
	if err := os.Symlink(planted, chain); err != nil {
		t.Fatal(err)
	}
	if f, err := Create(chain); !errors.Is(err, ErrForeignLink) {
		f.Close()
		t.Errorf("root's link to a planted link: %v, want ErrForeignLink", err)
	}
	asusertest.Untouched(t, planted, victim)
}

// TestCreateNewIsExclusive: a name memtrace chose is created only if
// nothing is there: not a file, not a link (not even root's).
func TestCreateNewIsExclusive(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "memtrace.prog.1.log.zst")
	f, err := CreateNew(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := CreateNew(p); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second CreateNew: %v, want it to exist", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "absent"), link); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateNew(link); !errors.Is(err, fs.ErrExist) {
		t.Errorf("CreateNew over a dangling link: %v, want it to exist", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "absent")); err == nil {
		t.Error("CreateNew created the dangling link's target")
	}
}

// TestCreateSpecialNames: memtrace's own descriptors are links in /dev and
// /proc that lead to whatever the shell opened; they are written as named.
func TestCreateSpecialNames(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	name := "/dev/fd/" + strconv.Itoa(int(w.Fd()))
	f, err := Create(name)
	if err != nil {
		t.Fatalf("Create(%s): %v", name, err)
	}
	f.WriteString("through\n")
	f.Close()
	w.Close()
	if b, _ := io.ReadAll(r); string(b) != "through\n" {
		t.Errorf("read %q from the pipe", b)
	}
}

// failAfter is a disk that fills after a few bytes.
func failAfter(n int) func(io.Writer) error {
	return func(w io.Writer) error {
		if _, err := w.Write(make([]byte, n)); err != nil {
			return err
		}
		return syscall.ENOSPC
	}
}

// TestWriteOutputRemovesPartialFile: a write that fails (a full disk)
// leaves no file behind, for a new name and for one renamed into place;
// a file that existed before a failed rewrite is gone too (it was
// truncated: a half-written one would read as complete).
func TestWriteOutputRemovesPartialFile(t *testing.T) {
	dir := t.TempDir()
	for _, excl := range []bool{false, true} {
		p := filepath.Join(dir, "report.txt")
		if err := WriteOutput(p, excl, failAfter(10)); !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("WriteOutput: %v, want ENOSPC", err)
		}
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("excl %v: the partial %s is left", excl, p)
		}
	}
	final := filepath.Join(dir, "heap.pb.gz")
	if err := WriteRenamed(final, failAfter(10)); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("WriteRenamed: %v, want ENOSPC", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left after a failed write: %v", ents)
	}
	if err := WriteRenamed(final, func(w io.Writer) error { _, err := io.WriteString(w, "ok"); return err }); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "heap.pb.gz" {
		t.Errorf("after a good write: %v", ents)
	}
}

// TestWriteRenamedOverPlantedLinks: a link planted at the temporary name
// is refused (it is created exclusively); one planted at the final name is
// replaced by the rename, and what it pointed at is left alone.
func TestWriteRenamedOverPlantedLinks(t *testing.T) {
	asusertest.NeedRoot(t)
	t.Setenv("SUDO_UID", "")
	dir := asusertest.Dir(t)
	final := filepath.Join(dir, "heap.pb.gz")
	tmp := filepath.Join(dir, ".heap.pb.gz.tmp")
	victim := asusertest.PlantAt(t, tmp)
	if err := WriteRenamed(final, failAfter(0)); !errors.Is(err, fs.ErrExist) {
		t.Errorf("planted temporary name: %v, want it to exist", err)
	}
	asusertest.Untouched(t, tmp, victim)
	os.Remove(tmp)

	victim = asusertest.PlantAt(t, final)
	ok := func(w io.Writer) error { _, err := io.WriteString(w, "profile"); return err }
	if err := WriteRenamed(final, ok); err != nil {
		t.Fatal(err)
	}
	asusertest.Untouched(t, "", victim)
	if st, err := os.Lstat(final); err != nil || !st.Mode().IsRegular() {
		t.Errorf("%s is not the profile: %v", final, err)
	}
}

func TestOwnDescriptor(t *testing.T) {
	cases := map[string]int{"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2, "/dev/fd/7": 7, "/proc/self/fd/12": 12, "/dev//fd/3/": 3}
	for p, want := range cases {
		if fd, ok := OwnDescriptor(p); !ok || fd != want {
			t.Errorf("OwnDescriptor(%q) = %d, %v; want %d", p, fd, ok, want)
		}
	}
	for _, p := range []string{"/dev/fd/x", "/dev/fd/-1", "/dev/null", "app.log", "/tmp/dev/stdout", "/proc/1/fd/1"} {
		if fd, ok := OwnDescriptor(p); ok {
			t.Errorf("OwnDescriptor(%q) = %d, true", p, fd)
		}
	}
}

// TestWriteOutputKeepsWhatItDidNotCreate: a failed write removes only a
// regular file, and the one written: not a device such as /dev/full (a
// node of the same device here), and through root's own link the file,
// not the link.
func TestWriteOutputKeepsWhatItDidNotCreate(t *testing.T) {
	asusertest.NeedRoot(t)
	t.Setenv("SUDO_UID", "")
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	if err := unix.Mknod(full, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 7))); err != nil {
		t.Skipf("mknod /dev/full's twin: %v", err)
	}
	if err := WriteOutput(full, false, func(w io.Writer) error { _, err := w.Write([]byte("x")); return err }); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write to /dev/full's twin: %v, want ENOSPC", err)
	}
	if _, err := os.Lstat(full); err != nil {
		t.Errorf("the device node was removed: %v", err)
	}

	target := filepath.Join(dir, "real.html")
	link := filepath.Join(dir, "current.html")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteOutput(link, false, failAfter(10)); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("WriteOutput: %v, want ENOSPC", err)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Errorf("the partial %s behind the link is left", target)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("root's link was removed: %v", err)
	}
}
