package symbols

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The files of a process that is not in memtrace's root or mount
// namespace (a chroot, a container, a bind mount over a library): a path
// names the file the process maps only where the inode says so.

func fileIdentity(t *testing.T, path string) FileID {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return FileID{Major: unix.Major(st.Dev), Minor: unix.Minor(st.Dev), Inode: st.Ino}
}

// TestLookupFileByInode: a frame located by the kernel in (inode, offset)
// resolves in the mapping of that file, also when another file is mapped
// at its address now.
func TestLookupFileByInode(t *testing.T) {
	as, _ := NewAddressSpace(NewCache(nil), 0)
	a := Mapping{Start: 0x1000, End: 0x3000, Perms: "r--p", Offset: 0x1000, File: FileID{8, 1, 11}, Path: "/a"}
	b := Mapping{Start: 0x1000, End: 0x2000, Perms: "r--p", File: FileID{8, 1, 22}, Path: "/b"}
	as.AddMapping(a, 1)
	as.AddMapping(b, 5) // dlclose of a, dlopen of b at its address
	if l, ok := as.LookupFile(0x1800, 11); !ok || l.Mapping.Path != "/a" || l.ModuleOffset != 0x1800 {
		t.Errorf("inode 11 at 0x1800: %+v %v, want /a at 0x1800", l, ok)
	}
	if l, ok := as.LookupFile(0x1800, 22); !ok || l.Mapping.Path != "/b" {
		t.Errorf("inode 22 at 0x1800: %+v %v, want /b", l, ok)
	}
	if l, ok := as.LookupFile(0x2800, 11); !ok || l.Mapping.Path != "/a" {
		t.Errorf("inode 11 at 0x2800 (a's part still mapped): %+v %v", l, ok)
	}
	for _, c := range []struct{ addr, ino uint64 }{{0x1800, 33}, {0x2800, 22}, {0x9000, 11}, {0x1800, 0}} {
		if l, ok := as.LookupFile(c.addr, c.ino); ok {
			t.Errorf("inode %d at %#x: found %+v", c.ino, c.addr, l)
		}
	}
}

// TestOpenByPathTakesOnlyTheMappedFile: a path whose file is not the one
// mapped (another file's inode, or the same inode number on another
// device) is refused, by AddMapping and by OpenFile; the right file is
// taken.
func TestOpenByPathTakesOnlyTheMappedFile(t *testing.T) {
	f := fixtures(t)
	other := filepath.Join(t.TempDir(), "other")
	data, err := os.ReadFile(f.plug)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, other, string(data))
	id := fileIdentity(t, f.prog)
	otherID := fileIdentity(t, other)

	as, _ := NewAddressSpace(NewCache(nil), 0)
	m := Mapping{Start: 0x10000, End: 0x20000, Perms: "r-xp", Path: f.prog, File: otherID}
	if err := as.AddMapping(m, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("mapping of another file's inode by %s: %v, want ErrNotFound", f.prog, err)
	}
	devID := id
	devID.Minor++
	m = Mapping{Start: 0x30000, End: 0x40000, Perms: "r-xp", Path: f.prog, File: devID}
	if err := as.AddMapping(m, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("mapping of the same inode on another device by %s: %v, want ErrNotFound", f.prog, err)
	}
	m = Mapping{Start: 0x50000, End: 0x60000, Perms: "r-xp", Path: f.prog, File: id}
	if err := as.AddMapping(m, 1); err != nil {
		t.Errorf("mapping of %s itself: %v", f.prog, err)
	}
	if l, ok := as.LookupFile(0x50000, id.Inode); !ok || l.Module == nil {
		t.Errorf("the mapping of %s has no module: %+v", f.prog, l)
	}

	if _, err := as.OpenFile(f.prog, otherID.Inode); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenFile(%s, another inode): %v, want ErrNotFound", f.prog, err)
	}
	mod, err := as.OpenFile(other, otherID.Inode)
	if err != nil {
		t.Fatalf("OpenFile(%s, its inode): %v", other, err)
	}
	if _, _, err := mod.Symbol(0); err != nil && !errors.Is(err, ErrNotFound) {
		t.Errorf("module of %s: %v", other, err)
	}
}

// TestRerootFollowsMountNamespace: a process that unshares its mount
// namespace and bind-mounts another file over a path is looked up in its
// new namespace after Reroot (before it, the path is the host's file and
// is refused), and still after the process and its namespace's last
// process are gone.
func TestRerootFollowsMountNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: bind mounts in a mount namespace")
	}
	for _, n := range []string{"unshare", "mount", "sh"} {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s is not installed", n)
		}
	}
	f := fixtures(t)
	dir := t.TempDir()
	lib, alt := filepath.Join(dir, "lib.so"), filepath.Join(dir, "alt.so")
	for p, src := range map[string]string{lib: f.plug, alt: f.prog} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, string(data))
	}
	altIno := fileIdentity(t, alt).Inode
	inner := "mount --bind " + alt + " " + lib + " && echo ready && read y"
	cmd := exec.Command("sh", "-c", "read x; exec unshare -m --propagation private sh -c '"+inner+"'")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	as, err := NewAddressSpace(NewCache(nil), cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer as.Close()
	if _, err := stdin.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- s
	}()
	select {
	case s := <-ready:
		if strings.TrimSpace(s) != "ready" {
			t.Fatalf("the namespace was not set up (%q)", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the namespace was not set up within 10 s")
	}

	if _, err := as.OpenFile(lib, altIno); !errors.Is(err, ErrNotFound) {
		t.Errorf("before Reroot, %s (the host's file): %v, want ErrNotFound", lib, err)
	}
	if err := as.Reroot(); err != nil {
		t.Fatal(err)
	}
	if _, err := as.OpenFile(lib, altIno); err != nil {
		t.Errorf("after Reroot, %s in the namespace: %v", lib, err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if _, err := as.OpenFile(lib, altIno); err != nil {
		t.Errorf("after the namespace's last process exited, %s: %v", lib, err)
	}
}
