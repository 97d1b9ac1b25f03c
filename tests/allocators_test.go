package tests

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// allocLibs are the allocators of issue 17, by the .so.N that Debian's
// packages install (libjemalloc2, libtcmalloc-minimal4, libmimalloc2.0;
// make deps installs them). glibc's has no file of its own.
var allocLibs = []struct{ name, lib string }{
	{"glibc", ""},
	{"jemalloc", "libjemalloc.so.2"},
	{"tcmalloc", "libtcmalloc_minimal.so.4"},
	{"mimalloc", "libmimalloc.so.2"},
}

func allocLibPath(t *testing.T, lib string) string {
	t.Helper()
	out, err := command("gcc", "-print-multiarch").Output()
	if err != nil {
		t.Fatalf("gcc -print-multiarch: %v", err)
	}
	p := filepath.Join("/usr/lib", string(out[:len(out)-1]), lib)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed: run make deps", p)
	}
	return p
}

// TestAllocators: a C program (docs/spec.md §3's functions, blocks large enough
// that the allocator maps memory of its own, and, linked, the allocator's
// own API) and a C++ one (every operator new/delete overload, a throwing
// new caught but under mimalloc, a failing nothrow new) under glibc, jemalloc, tcmalloc and
// mimalloc, each linked and each preloaded (LD_PRELOAD set by env for the
// program, or in memtrace's own environment), launched and attached: the
// log equals what the program recorded, event for event (op, size,
// pointer, thread), with nothing else between (no allocator-internal
// mmap), in a mode=bpf log.
func TestAllocators(t *testing.T) {
	requireBPF(t)
	memtrace := need(t, "bin/memtrace")
	progDir := need(t, "tests/progs/build")
	type attached struct {
		name, exe string
		env       []string
	}
	var attach []attached
	for _, a := range allocLibs {
		lib := ""
		if a.lib != "" {
			lib = allocLibPath(t, a.lib)
		}
		for _, prog := range []string{"allocs", "cxxalloc"} {
			// mimalloc's new calls abort() where the others throw
			// (tests/progs/cxxalloc.cc): no throwing new under it.
			var env []string
			if a.name == "mimalloc" && prog == "cxxalloc" {
				env = append(env, "CXXALLOC_NO_THROW=1")
			}
			linked := filepath.Join(progDir, prog)
			if lib != "" {
				linked += "-" + a.name
			}
			if _, err := os.Stat(linked); err != nil {
				t.Fatalf("%s is missing: run make progs", linked)
			}
			plain := filepath.Join(progDir, prog)
			cases := []struct {
				mode string
				run  func(t *testing.T, r *run)
			}{
				{"linked/launch", func(t *testing.T, r *run) {
					r.runMemtraceEnv(t, memtrace, env, "-o", r.log, "--", linked)
				}},
			}
			// Linked and attached: all at once, below. -short attaches
			// to the C program only: the C++ one's functions are found
			// the same way at an attach.
			if !testing.Short() || prog != "cxxalloc" {
				attach = append(attach, attached{a.name + "/" + prog, linked, env})
			}
			// Preloaded, the same functions are found another way:
			// make test's; -short keeps linked, launched and attached.
			if lib != "" && !testing.Short() {
				pre := append([]string{"LD_PRELOAD=" + lib}, env...)
				cases = append(cases,
					struct {
						mode string
						run  func(t *testing.T, r *run)
					}{"preload-env/launch", func(t *testing.T, r *run) {
						r.runMemtraceEnv(t, memtrace, env, append([]string{"-o", r.log, "--", "env"}, append(pre, plain)...)...)
					}},
					struct {
						mode string
						run  func(t *testing.T, r *run)
					}{"preload-memtrace-env/launch", func(t *testing.T, r *run) {
						r.runMemtraceEnv(t, memtrace, pre, "-o", r.log, "--", plain)
					}},
					struct {
						mode string
						run  func(t *testing.T, r *run)
					}{"preload-env/attach", func(t *testing.T, r *run) {
						r.runAttachEnv(t, memtrace, plain, pre)
					}})
			}
			for _, c := range cases {
				t.Run(a.name+"/"+prog+"/"+c.mode, func(t *testing.T) {
					r := newRun(t)
					c.run(t, r)
					bpfLog(t, r.log)
					r.check(t, false)
				})
			}
		}
	}
	// One memtrace -p for every linked program: the functions are found
	// in each program's own allocator all the same, each program is
	// checked against its own record.
	t.Run("linked/attach", func(t *testing.T) {
		var exes []string
		var envs [][]string
		for _, a := range attach {
			exes, envs = append(exes, a.exe), append(envs, a.env)
		}
		runs := runAttachAll(t, memtrace, exes, envs)
		bpfLog(t, runs[0].log)
		for i, r := range runs {
			t.Run(attach[i].name, func(t *testing.T) { r.check(t, false) })
		}
	})
}

func (r *run) runMemtraceEnv(t *testing.T, memtrace string, env []string, args ...string) {
	t.Helper()
	cmd := command(memtrace, args...)
	cmd.Env = r.env(env...)
	cmd.Stderr = &r.stderr
	cmd.Stdout = &r.stderr
	if err := runCmd(t, cmd, runLimit); err != nil {
		t.Fatalf("memtrace %v: %v\n%s", args, err, r.stderr.String())
	}
}

// TestAllocatorsLibcxx: the C++ program (every operator new/delete
// overload, a throwing new caught, a failing nothrow new) built against
// LLVM's libc++, whose operators are its own, not libstdc++'s: launched
// and attached, the log equals what the program recorded, in a mode=bpf
// log.
func TestAllocatorsLibcxx(t *testing.T) {
	requireBPF(t)
	memtrace := need(t, "bin/memtrace")
	bin := filepath.Join(need(t, "tests/progs/build"), "cxxalloc-libcxx")
	if _, err := os.Stat(bin); err != nil {
		bpftest.Unavailable(t, "%s is not built (libc++-19-dev missing: run make deps, then make progs)", bin)
	}
	for _, mode := range []string{"launch", "attach"} {
		t.Run(mode, func(t *testing.T) {
			r := newRun(t)
			if mode == "launch" {
				r.runMemtraceEnv(t, memtrace, nil, "-o", r.log, "--", bin)
			} else {
				r.runAttachEnv(t, memtrace, bin, nil)
			}
			bpfLog(t, r.log)
			r.check(t, false)
		})
	}
}
