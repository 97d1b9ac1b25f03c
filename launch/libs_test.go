package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
)

func gccBuild(t *testing.T, src string, flags ...string) string {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, "p.c")
	bin := filepath.Join(dir, "p")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", append([]string{"-O1", "-o", bin, c}, flags...)...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", flags, err, out)
	}
	return bin
}

const mallocSrc = "#include <stdlib.h>\nint main(void) { void *volatile p = malloc(10); free(p); return 0; }\n"

// TestLaunchLibs: a static program is probed in its own file and nowhere
// else (the system libc it never loads would make an empty trace look
// like a working one); a dynamic one through its libraries, not its file;
// a script through the system libc its interpreter loads.
func TestLaunchLibs(t *testing.T) {
	static := gccBuild(t, mallocSrc, "-static")
	if got := launchLibs(static, nil); !slices.Equal(got, []string{static}) {
		t.Errorf("static program: %v, want only the program", got)
	}
	if got := launchLibs(gccBuild(t, mallocSrc, "-static", "-s"), nil); len(got) != 0 {
		t.Errorf("stripped static program: %v, want nothing", got)
	}
	dyn := gccBuild(t, mallocSrc)
	got := launchLibs(dyn, nil)
	if slices.Contains(got, dyn) || !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(filepath.Base(p), "libc.so") }) {
		t.Errorf("dynamic program: %v, want its libc and not the program", got)
	}
	script := filepath.Join(t.TempDir(), "s.sh")
	os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	if got := launchLibs(script, nil); !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(filepath.Base(p), "libc.so") }) {
		t.Errorf("script: %v, want the system libc", got)
	}
}

// TestUntraceable: the one line names what could not be traced and why.
func TestUntraceable(t *testing.T) {
	self, err := os.Executable() // this test binary is a Go program
	if err != nil {
		t.Fatal(err)
	}
	stripped := gccBuild(t, mallocSrc, "-static", "-s")
	noMalloc := gccBuild(t, "int main(void) { return 0; }\n", "-static", "-nostartfiles", "-nostdlib", "-e", "main")
	dyn := gccBuild(t, mallocSrc)
	for _, c := range []struct {
		exe    string
		launch bool
		want   string
	}{
		{self, true, "PROG is a Go program: its allocator is Go's own, not malloc: memtrace cannot trace it"},
		{stripped, false, "PROG is statically linked and stripped: its malloc has no symbol to probe: memtrace cannot trace it; trace a build that is not stripped"},
		{noMalloc, true, "PROG is statically linked and has no malloc or operator new of its own"},
		{dyn, true, "PROG links no library with allocation functions: memtrace traces programs that use libc's malloc, libstdc++ or a malloc library; try --preload"},
		{dyn, false, "PROG links no library with allocation functions: memtrace traces programs that use libc's malloc, libstdc++ or a malloc library"},
	} {
		msg := untraceable("PROG", c.exe, c.launch).Error()
		if !strings.HasPrefix(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q, want %q", c.exe, msg, c.want)
		}
		if !c.launch && strings.Contains(msg, "--preload") {
			t.Errorf("%s: -p offers --preload: %q", c.exe, msg)
		}
	}
}

// jemalloc is Debian's libjemalloc2 (make deps installs it).
const jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

// TestLaunchLibsPreloaded: a library preloaded in PROG's environment, by
// path or by name, is among PROG's libraries, found with PROG's
// environment and not memtrace's; variables that would make the linker
// run code are not passed to it.
func TestLaunchLibsPreloaded(t *testing.T) {
	if _, err := os.Stat(jemalloc); err != nil {
		bpftest.Unavailable(t, "%s is missing (Debian's libjemalloc2, which make deps installs)", jemalloc)
	}
	dyn := gccBuild(t, mallocSrc)
	t.Setenv("LD_PRELOAD", "") // memtrace's own: not PROG's
	if got := launchLibs(dyn, nil); slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, "jemalloc") }) {
		t.Fatalf("without LD_PRELOAD: %v has jemalloc", got)
	}
	for _, v := range []string{jemalloc, "libjemalloc.so.2", "libnothere.so " + jemalloc} {
		got := launchLibs(dyn, []string{"PATH=/usr/bin", "LD_PRELOAD=" + v})
		if !slices.ContainsFunc(got, func(p string) bool { return strings.HasSuffix(p, "/libjemalloc.so.2") }) {
			t.Errorf("LD_PRELOAD=%s: %v, want jemalloc", v, got)
		}
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(filepath.Base(p), "libc.so") }) {
			t.Errorf("LD_PRELOAD=%s: %v, want libc too", v, got)
		}
	}
	t.Setenv("LD_PRELOAD", jemalloc)
	if got := launchLibs(dyn, nil); slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, "jemalloc") }) {
		t.Errorf("LD_PRELOAD in memtrace's environment only: %v has jemalloc, which PROG does not load", got)
	}
}

func TestLoaderEnv(t *testing.T) {
	got := loaderEnv([]string{"HOME=/root", "LD_PRELOAD=/a.so", "LD_AUDIT=/evil.so", "LD_BIND_NOW=1", "LD_WARN=1", "LD_LIBRARY_PATH=/opt/lib", "XLD_PRELOAD=x"})
	if want := []string{"LD_PRELOAD=/a.so", "LD_LIBRARY_PATH=/opt/lib"}; !slices.Equal(got, want) {
		t.Errorf("loaderEnv = %q, want %q", got, want)
	}
	if got := loaderEnv(nil); got == nil || len(got) != 0 {
		t.Errorf("loaderEnv(nil) = %#v, want empty and not nil (nil would pass memtrace's own)", got)
	}
}

// TestListedLibs reads ld.so --list as glibc writes it: libraries found by
// name and preloaded by path, without the linker itself and the vDSO.
func TestListedLibs(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ff4edcdb000)\n" +
		"\t/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 (0x00007ff4ed800000)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007ff4ed61e000)\n" +
		"\tlibgone.so.1 => not found\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007ff4edcdd000)\n"
	got := listedLibs(out, "/lib64/ld-linux-x86-64.so.2")
	if want := []string{"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/lib/x86_64-linux-gnu/libc.so.6"}; !slices.Equal(got, want) {
		t.Errorf("listedLibs = %q, want %q", got, want)
	}
}

// TestProcEnviron reads another process's environment.
func TestProcEnviron(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{"A=1", "LD_PRELOAD=/x.so"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	// Start returns while the kernel may still be setting up the new
	// image, whose environment reads empty until then: wait for its
	// command line, which is set up with it.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline"); string(b) == "sleep\x0030\x00" {
			break
		}
	}
	if got := procEnviron(cmd.Process.Pid); !slices.Equal(got, cmd.Env) {
		t.Errorf("procEnviron = %q, want %q", got, cmd.Env)
	}
	if got := procEnviron(1 << 30); got != nil {
		t.Errorf("procEnviron of no process = %q, want nil", got)
	}
}
