package tracer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestParseLdCacheMatchesLdconfig: every library of the host's
// /etc/ld.so.cache, as ldconfig -p lists it, is read from the file.
func TestParseLdCacheMatchesLdconfig(t *testing.T) {
	b, err := os.ReadFile("/etc/ld.so.cache")
	if err != nil {
		t.Skipf("no /etc/ld.so.cache: %v", err)
	}
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		t.Skip("no ldconfig to compare with")
	}
	out, err := exec.Command(ldconfig, "-p").Output()
	if err != nil {
		t.Fatalf("ldconfig -p: %v", err)
	}
	ents, err := parseLdCache(b)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range ents {
		got[e.name+" => "+e.path] = true
	}
	want := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[len(f)-2] != "=>" {
			continue
		}
		want++
		if k := f[0] + " => " + f[len(f)-1]; !got[k] {
			t.Errorf("ldconfig -p lists %s; not read from the cache", k)
		}
	}
	if want == 0 || want != len(ents) {
		t.Errorf("ldconfig -p lists %d libraries, the cache read has %d", want, len(ents))
	}
}

// FuzzParseLdCache: any file a container has as its /etc/ld.so.cache is
// entries with names and paths, or refused; never a panic, never a string
// past the file. The seeds run in plain go test.
func FuzzParseLdCache(f *testing.F) {
	f.Add(buildLdCache(false, "libc.so.6", "/lib/libc.so.6", "libm.so.6", "/usr/lib/libm.so.6"))
	f.Add(buildLdCache(true, "libz.so.1", "/lib/libz.so.1"))
	f.Add([]byte(ldCacheMagicNew))
	f.Add([]byte(ldCacheMagicOld + "\x00\xff\xff\xff\xff"))
	if b, err := os.ReadFile("/etc/ld.so.cache"); err == nil && len(b) < 1<<20 {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ents, _ := parseLdCache(b)
		if len(ents) > len(b)/ldCacheEntNew {
			t.Fatalf("%d entries from %d bytes", len(ents), len(b))
		}
		for _, e := range ents {
			if e.name == "" || e.path == "" || strings.ContainsRune(e.name+e.path, 0) ||
				len(e.name) > len(b) || len(e.path) > len(b) {
				t.Fatalf("bad entry %q => %q", e.name, e.path)
			}
		}
	})
}

// buildLdCache writes a new-format cache of name, path pairs, after an
// empty old-format part when old is set (the layout of glibc before 2.32).
func buildLdCache(old bool, pairs ...string) []byte {
	var pre []byte
	if old {
		pre = make([]byte, ldCacheHdrOld)
		copy(pre, ldCacheMagicOld)
	}
	n := len(pairs) / 2
	hdr := make([]byte, ldCacheHdrNew+n*ldCacheEntNew)
	copy(hdr, ldCacheMagicNew)
	binary.LittleEndian.PutUint32(hdr[20:], uint32(n))
	var strs []byte
	for i := 0; i < n; i++ {
		e := hdr[ldCacheHdrNew+i*ldCacheEntNew:]
		binary.LittleEndian.PutUint32(e[0:], 0x0303)
		binary.LittleEndian.PutUint32(e[4:], uint32(len(hdr)+len(strs)))
		strs = append(append(strs, pairs[2*i]...), 0)
		binary.LittleEndian.PutUint32(e[8:], uint32(len(hdr)+len(strs)))
		strs = append(append(strs, pairs[2*i+1]...), 0)
	}
	binary.LittleEndian.PutUint32(hdr[24:], uint32(len(strs)))
	return append(append(pre, hdr...), strs...)
}

// TestParseLdCacheOldPrefix: a cache written with the old format before
// the new one is read through its new part.
func TestParseLdCacheOldPrefix(t *testing.T) {
	ents, err := parseLdCache(buildLdCache(true, "libz.so.1", "/lib/libz.so.1", "libq.so", "/q/libq.so"))
	if err != nil || len(ents) != 2 || ents[1].name != "libq.so" || ents[1].path != "/q/libq.so" {
		t.Fatalf("entries %+v, %v", ents, err)
	}
	if _, err := parseLdCache([]byte("garbage")); err == nil {
		t.Error("garbage read as a cache")
	}
}

const rootProg = `#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
void rootlib_fn(void);
int main(void) { char c; rootlib_fn(); if (write(1, "ready\n", 6) != 6) return 1; return read(0, &c, 1) == 1 ? 0 : 1; }
`

// rootFixture builds a root holding a program (waiting for a byte on
// standard input) that needs librootlib.so through an absolute DT_RUNPATH
// of the root's (/opt/rl, which the host lacks), its other libraries and
// the dynamic linker, all copies; and a preloadable library in the root's
// default directory.
func rootFixture(t *testing.T) (root string) {
	t.Helper()
	for _, n := range []string{"gcc", "ldd"} {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s is not installed", n)
		}
	}
	root = t.TempDir()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "p.c"), []byte(rootProg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "l.c"), []byte("void rootlib_fn(void) {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "gcc", "-shared", "-fPIC", "-o", filepath.Join(src, "librootlib.so"), filepath.Join(src, "l.c"))
	mustRun(t, "gcc", "-shared", "-fPIC", "-o", filepath.Join(src, "libpre.so"), filepath.Join(src, "l.c"))
	mustRun(t, "gcc", "-o", filepath.Join(src, "prog"), filepath.Join(src, "p.c"), "-L"+src, "-lrootlib", "-Wl,-rpath,/opt/rl")
	out, err := exec.Command("ldd", filepath.Join(src, "prog")).Output()
	if err != nil {
		t.Fatalf("ldd: %v", err)
	}
	libdir := ""
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") && !strings.HasPrefix(f, src) {
			copyTo(t, f, filepath.Join(root, f))
			if filepath.Base(f) == "libc.so.6" {
				libdir = filepath.Dir(f)
			}
		}
	}
	if libdir == "" {
		t.Fatalf("ldd lists no libc.so.6:\n%s", out)
	}
	copyTo(t, filepath.Join(src, "prog"), filepath.Join(root, "prog"))
	copyTo(t, filepath.Join(src, "librootlib.so"), filepath.Join(root, "opt/rl/librootlib.so"))
	copyTo(t, filepath.Join(src, "libpre.so"), filepath.Join(root, libdir, "libpre.so"))
	return root
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func copyTo(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// startWaiting starts cmd and waits for its "ready" line.
func startWaiting(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if strings.TrimSpace(s) != "ready" {
			t.Fatalf("%v: %q\n%s", cmd.Args, s, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%v: not ready within 20 s\n%s", cmd.Args, stderr.String())
	}
}

// sameFileAs reports whether path a and b are one file.
func sameFileAs(a, b string) bool {
	var sa, sb syscall.Stat_t
	return syscall.Stat(a, &sa) == nil && syscall.Stat(b, &sb) == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// TestRootLibrariesChroot: for a chroot'ed program, the libraries are the
// root's own, as the root's dynamic linker lists them (run inside it:
// the test's own files), LD_PRELOAD and an absolute DT_RUNPATH resolved in
// the root, none of them a host file; a process that sees memtrace's
// filesystem gets no answer (the host's dynamic linker gives it).
func TestRootLibrariesChroot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chroot")
	}
	root := rootFixture(t)
	env := []string{"LD_PRELOAD=libpre.so"}
	interp := ""
	if m, err := filepath.Glob(filepath.Join(root, "lib*/ld-linux*.so*")); err == nil && len(m) > 0 {
		interp = strings.TrimPrefix(m[0], root)
	}
	if interp == "" {
		t.Skip("no glibc dynamic linker in the root")
	}
	list := exec.Command("chroot", root, interp, "--list", "/prog")
	list.Env = env
	out, err := list.Output()
	if err != nil {
		t.Fatalf("%s --list in the root: %v", interp, err)
	}
	var want []string
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") && !sameFileAs(root+f, root+interp) {
			want = append(want, root+f)
		}
	}
	if len(want) < 3 {
		t.Fatalf("the root's dynamic linker lists %v", want)
	}

	cmd := exec.Command("chroot", root, "/prog")
	cmd.Env = env
	startWaiting(t, cmd)
	got, ok := RootLibraries(cmd.Process.Pid, env)
	if !ok {
		t.Fatal("a chroot'ed process was taken for one in memtrace's root")
	}
	t.Logf("root's dynamic linker: %v; RootLibraries: %v", want, got)
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return sameFileAs(g, w) }) {
			t.Errorf("%s (listed by the root's dynamic linker) is not among %v", w, got)
		}
	}
	for _, g := range got {
		if !strings.HasPrefix(g, root+"/") {
			t.Errorf("%s is not a file of the root %s", g, root)
		}
	}

	self := exec.Command(filepath.Join(root, "prog"))
	self.Env = []string{"LD_LIBRARY_PATH=" + filepath.Join(root, "opt/rl")}
	startWaiting(t, self)
	if got, ok := RootLibraries(self.Process.Pid, nil); ok {
		t.Errorf("a process in memtrace's root got %v", got)
	}
}

// TestRootLibrariesBindMount: in a mount namespace of its own, where
// another library is bind-mounted over the one the program needs, the
// answer is that other library, by a path memtrace reaches it by.
func TestRootLibrariesBindMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mount namespaces")
	}
	for _, n := range []string{"unshare", "mount", "sh"} {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s is not installed", n)
		}
	}
	root := rootFixture(t)
	dir := t.TempDir()
	lib, alt := filepath.Join(dir, "librootlib.so"), filepath.Join(dir, "alt.so")
	copyTo(t, filepath.Join(root, "opt/rl/librootlib.so"), lib)
	copyTo(t, filepath.Join(root, "opt/rl/librootlib.so"), alt)
	prog := filepath.Join(root, "prog")
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"mount --bind "+alt+" "+lib+" && exec "+prog)
	cmd.Env = []string{"LD_LIBRARY_PATH=" + dir}
	startWaiting(t, cmd)
	got, ok := RootLibraries(cmd.Process.Pid, cmd.Env)
	if !ok {
		t.Fatal("a process in its own mount namespace was taken for one in memtrace's")
	}
	found := false
	for _, g := range got {
		if sameFileAs(g, alt) {
			found = true
		}
		if sameFileAs(g, lib) {
			t.Errorf("%s is the host's file under the bind mount", g)
		}
	}
	if !found {
		t.Errorf("the bind-mounted library %s is not among %v", alt, got)
	}
}
