package tests

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// crossArchs are the ARM targets of issue 5: Debian's cross compilers and
// qemu-user (packages gcc-aarch64-linux-gnu g++-aarch64-linux-gnu
// gcc-arm-linux-gnueabihf g++-arm-linux-gnueabihf libc6-dev-arm64-cross
// libc6-dev-armhf-cross qemu-user).
var crossArchs = []struct{ name, triplet, qemu string }{
	{"arm64", "aarch64-linux-gnu", "qemu-aarch64"},
	{"arm", "arm-linux-gnueabihf", "qemu-arm"},
}

// requireCross skips when a tool is missing, unless MEMTRACE_REQUIRE_CROSS=1
// (CI) makes that a failure.
func requireCross(t *testing.T, triplet, qemu string) {
	t.Helper()
	for _, tool := range []string{triplet + "-gcc", triplet + "-g++", qemu, "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			bpftest.Unavailable(t, "%s is missing (make deps installs it)", tool)
		}
	}
}

// TestCross builds the library and the test programs for each ARM target
// and checks the programs' logs under qemu-user exactly as TestPrograms
// does natively.
func TestCross(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every program for each ARM target under qemu-user: make test (and make cross) run it")
	}
	root := repoRoot(t)
	for _, a := range crossArchs {
		t.Run(a.name, func(t *testing.T) {
			requireCross(t, a.triplet, a.qemu)
			lib := filepath.Join(t.TempDir(), "memtrace-preload.so")
			mk := func(args ...string) {
				cmd := command("make", args...)
				cmd.Dir = root
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("make %v: %v\n%s", args, err, out)
				}
			}
			mk("-s", "-C", "fallback-preload", "CC="+a.triplet+"-gcc", "OUT="+lib)
			mk("-s", "-C", "tests/progs", "CROSS="+a.triplet)
			progDir := filepath.Join(root, "tests/progs/build", a.triplet)
			sysroot := "/usr/" + a.triplet
			for _, prog := range programs {
				t.Run(prog, func(t *testing.T) {
					r := newRun(t)
					args := []string{"-L", sysroot,
						"-E", "LD_PRELOAD=" + lib,
						"-E", "MEMTRACK_OUTPUT=" + r.log,
						"-E", "MEMTRACE_TRUTH=" + r.truth}
					if prog == "livethreads" {
						// Its point is the binary region, on the
						// host; under qemu-user 2,000 thread
						// starts take tens of seconds.
						args = append(args, "-E", "LIVETHREADS=200")
					}
					cmd := command(a.qemu, append(args, filepath.Join(progDir, prog))...)
					cmd.Stdout = &r.stderr
					cmd.Stderr = &r.stderr
					if err := runCmd(t, cmd, runLimit); err != nil {
						t.Fatalf("%s %s: %v\n%s", a.qemu, prog, err, r.stderr.String())
					}
					r.check(t, true)
				})
			}
		})
	}
}
