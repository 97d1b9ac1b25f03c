package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// jemalloc is Debian's libjemalloc2 (make deps installs it).
const jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

// TestPreloadedAllocator: an allocator preloaded into the program, in its
// own environment (memtrace -- env LD_PRELOAD=... PROG: the exec'd image
// is resolved with the environment it got, not memtrace's), in memtrace's
// (LD_PRELOAD=... memtrace -- PROG, which the program inherits) or by
// /etc/ld.so.preload (in a mount namespace of the test's own, where an
// overlay adds the file), is probed before the program's first
// instruction: its calls are logged exactly from the first one, as the
// program recorded them.
func TestPreloadedAllocator(t *testing.T) {
	requireBPF(t)
	if _, err := os.Stat(jemalloc); err != nil {
		bpftest.Unavailable(t, "%s is missing (Debian's libjemalloc2, which make deps installs)", jemalloc)
	}
	memtrace := need(t, "bin/memtrace")
	exe := filepath.Join(need(t, "tests/progs/build"), "threads")
	envPath, err := exec.LookPath("env")
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{"target-env", "memtrace-env", "ld.so.preload"} {
		t.Run(form, func(t *testing.T) {
			rounds := 3
			if testing.Short() {
				rounds = 1 // make check's; make test repeats the race
			}
			for i := 0; i < rounds; i++ {
				r := newRun(t)
				switch form {
				case "target-env":
					r.runMemtrace(t, memtrace, []string{"-o", r.log, "--", envPath, "LD_PRELOAD=" + jemalloc, exe})
				case "memtrace-env":
					cmd := command(memtrace, "-o", r.log, "--", exe)
					cmd.Env = r.env("LD_PRELOAD=" + jemalloc)
					cmd.Stderr, cmd.Stdout = &r.stderr, &r.stderr
					if err := runCmd(t, cmd, runLimit); err != nil {
						t.Fatalf("memtrace: %v\n%s", err, r.stderr.String())
					}
				case "ld.so.preload":
					dir := t.TempDir()
					upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
					os.Mkdir(upper, 0o755)
					os.Mkdir(work, 0o755)
					if err := os.WriteFile(filepath.Join(upper, "ld.so.preload"), []byte(jemalloc+"\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					// Only this namespace sees the file: every other
					// process on the machine would preload jemalloc.
					script := `mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc || exit 99; shift 2; exec "$@"`
					cmd := command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", upper, work, memtrace, "-o", r.log, "--", exe)
					cmd.Env = r.env()
					cmd.Stderr, cmd.Stdout = &r.stderr, &r.stderr
					if err := runCmd(t, cmd, runLimit); err != nil {
						if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 99 {
							bpftest.Unavailable(t, "no overlay mount in a private mount namespace here: %s", r.stderr.String())
						}
						t.Fatalf("memtrace under /etc/ld.so.preload: %v\n%s", err, r.stderr.String())
					}
				}
				bpfLog(t, r.log)
				r.check(t, false)
				if t.Failed() {
					return
				}
			}
		})
	}
}
