package unwindtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// SeparateDebugOnly builds, in dir, a program whose call frame
// information is only in its separate debug file: compiled without
// .eh_frame, its .debug_frame moved to p.debug by objcopy and stripped
// from the binary (what a distribution's -dbg package holds). It returns
// the binary and the debug file; a missing tool fails the test.
func SeparateDebugOnly(t testing.TB, dir string) (bin, dbg string) {
	t.Helper()
	for _, tool := range []string{"gcc", "objcopy", "strip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run make deps", tool)
		}
	}
	src := filepath.Join(dir, "p.c")
	if err := os.WriteFile(src, []byte("int f(int x) { return x * 3; }\nint main(int c, char **v) { (void)v; return f(c); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin, dbg = filepath.Join(dir, "p"), filepath.Join(dir, "p.debug")
	for _, c := range [][]string{
		{"gcc", "-g", "-O2", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-o", bin, src},
		{"objcopy", "--only-keep-debug", bin, dbg},
		{"strip", "--strip-debug", bin},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	return bin, dbg
}
