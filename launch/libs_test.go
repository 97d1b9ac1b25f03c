package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	if got := launchLibs(static); !slices.Equal(got, []string{static}) {
		t.Errorf("static program: %v, want only the program", got)
	}
	if got := launchLibs(gccBuild(t, mallocSrc, "-static", "-s")); len(got) != 0 {
		t.Errorf("stripped static program: %v, want nothing", got)
	}
	dyn := gccBuild(t, mallocSrc)
	got := launchLibs(dyn)
	if slices.Contains(got, dyn) || !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(filepath.Base(p), "libc.so") }) {
		t.Errorf("dynamic program: %v, want its libc and not the program", got)
	}
	script := filepath.Join(t.TempDir(), "s.sh")
	os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	if got := launchLibs(script); !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(filepath.Base(p), "libc.so") }) {
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
