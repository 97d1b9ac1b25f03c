package tests

// Containers (issue 21): a process whose files are not the host's under
// the same paths. With another library bind-mounted over a host library
// in a mount namespace, its frames must be named from the file it maps,
// not from the host file of that path; a chroot'ed program must be
// traced, launched (memtrace -- chroot DIR PROG) and attached (-p).
//
//	go test ./tests -run Container -v

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// nsSite is a line of nsprog's sites file: an allocation made in libns.so,
// the function that called malloc and the file the loader mapped for it.
type nsSite struct {
	ptr        uint64
	fn, module string
}

func readSites(t *testing.T, path string) []nsSite {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the program's sites: %v", err)
	}
	var out []nsSite
	for _, ln := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(ln)
		if len(f) != 3 {
			t.Fatalf("bad sites line %q", ln)
		}
		ptr, err := strconv.ParseUint(strings.TrimPrefix(f[0], "0x"), 16, 64)
		if err != nil {
			t.Fatalf("bad sites line %q", ln)
		}
		out = append(out, nsSite{ptr, f[1], f[2]})
	}
	if len(out) == 0 {
		t.Fatal("the program recorded no allocation sites")
	}
	return out
}

// checkSites: each allocation the program made in libns.so has, in the
// log, frame #0 in the function that made it, in the file the program
// mapped, named as module(recorded path) says.
func checkSites(t *testing.T, r *run, module func(string) string) {
	t.Helper()
	evs := readStacks(t, r.log)
	for _, s := range readSites(t, r.truth+".sites") {
		var hit *stackEvent
		for _, e := range evs {
			if e.op == "malloc" && e.ptr == s.ptr && e.size >= 1000 && e.size < 1100 {
				hit = e
			}
		}
		switch {
		case hit == nil:
			t.Errorf("malloc at %#x (by %s): not in the log", s.ptr, s.fn)
		case len(hit.frames) == 0:
			t.Errorf("malloc at %#x (by %s): no frames in the log", s.ptr, s.fn)
		case hit.frames[0].symbol != s.fn || hit.frames[0].module != module(s.module):
			t.Errorf("malloc at %#x: frame #0 is %s(%s+%#x), want %s(%s+...)", s.ptr,
				hit.frames[0].module, hit.frames[0].symbol, hit.frames[0].off, module(s.module), s.fn)
		}
	}
	if t.Failed() {
		keep(t, r)
	}
}

// needTools skips (through bpftest.Unavailable) when a command the test
// runs is missing.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			bpftest.Unavailable(t, "%s is not installed: %v", n, err)
		}
	}
}

// copyFile copies src to dst (a new inode: a file of its own, not the
// host's under another name), creating dst's directory.
func copyFile(t *testing.T, src, dst string) {
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

// nsDir copies nsprog and both builds of libns.so into a new directory:
// the program finds libns.so beside itself.
func nsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"nsprog", "libns.so", "libns-alt.so"} {
		copyFile(t, need(t, "tests/progs/build/"+f), filepath.Join(dir, f))
	}
	out, err := command("nm", "-D", "--defined-only", filepath.Join(dir, "libns.so")).Output()
	if err != nil {
		bpftest.Unavailable(t, "nm: %v", err)
	}
	if strings.Contains(string(out), "alt_inner_ns") {
		t.Fatal("the host build of libns.so has alt_inner_ns: its frames would be named right by chance")
	}
	return dir
}

// chrootDir builds a minimal root holding nsprog, the libraries ldd lists
// and the dynamic linker, each a copy of the host's file. libns.so goes
// into the directory of libc: without /proc in the root, the dynamic
// linker cannot expand nsprog's $ORIGIN.
func chrootDir(t *testing.T) string {
	t.Helper()
	needTools(t, "ldd", "chroot")
	root := t.TempDir()
	build := need(t, "tests/progs/build")
	copyFile(t, filepath.Join(build, "nsprog"), filepath.Join(root, "nsprog"))
	out, err := command("ldd", filepath.Join(build, "nsprog")).Output()
	if err != nil {
		t.Fatalf("ldd: %v", err)
	}
	libdir := ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if !strings.HasPrefix(f, "/") || strings.HasPrefix(f, build) {
				continue
			}
			copyFile(t, f, filepath.Join(root, f))
			if filepath.Base(f) == "libc.so.6" {
				libdir = filepath.Dir(f)
			}
		}
	}
	if libdir == "" {
		t.Fatalf("ldd listed no libc.so.6:\n%s", out)
	}
	copyFile(t, filepath.Join(build, "libns.so"), filepath.Join(root, libdir, "libns.so"))
	return root
}

// runAttachCmd starts prog (nsprog, maybe through unshare or chroot)
// waiting, attaches memtrace -p with args, waits for its header, then
// lets the program go and waits for both.
func (r *run) runAttachCmd(t *testing.T, memtrace string, prog *exec.Cmd, args ...string) {
	t.Helper()
	stdin, progDone := r.startWaiting(t, prog)
	mtErr := new(lockedBuffer)
	mt := command(memtrace, append(append([]string{"-o", r.log}, args...), "-p", itoa(prog.Process.Pid))...)
	mt.Stderr, mt.Stdout = mtErr, mtErr
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	mtDone := make(chan error, 1)
	go func() { mtDone <- mt.Wait() }()
	defer func() { _ = mt.Process.Kill() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hdr := make(chan error, 1)
	go func() { hdr <- waitHeader(ctx, r.log) }()
	select {
	case err := <-hdr:
		if err != nil {
			t.Fatalf("%v\nmemtrace: %s", err, mtErr.String())
		}
	case err := <-mtDone:
		t.Fatalf("memtrace -p exited before its header: %v\n%s", err, mtErr.String())
	}
	if _, err := io.WriteString(stdin, "g"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-progDone:
		if err != nil {
			t.Fatalf("program: %v\n%s", err, r.stderr.String())
		}
	case <-time.After(runLimit):
		t.Fatalf("program did not finish within %v", runLimit)
	}
	select {
	case err := <-mtDone:
		if err != nil {
			t.Fatalf("memtrace -p: %v\n%s", err, mtErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("memtrace -p did not exit after its target did\n%s", mtErr.String())
	}
}

// TestContainerBindMountBPF: nsprog runs in its own mount namespace
// (unshare -m) with libns-alt.so bind-mounted over the libns.so it links;
// memtrace, in the host's namespace, launches it or attaches to it. Every
// allocation is in the log, and the frames in the library name the
// functions of the file the program mapped (alt_inner_ns), under the path
// the program sees it by, not the host file's symbols at those offsets.
func TestContainerBindMountBPF(t *testing.T) {
	requireBPF(t)
	needTools(t, "unshare", "mount", "sh")
	memtrace := need(t, "bin/memtrace")
	for _, mode := range []string{"launch", "attach"} {
		t.Run(mode, func(t *testing.T) {
			dir := nsDir(t)
			lib := filepath.Join(dir, "libns.so")
			script := "mount --bind " + filepath.Join(dir, "libns-alt.so") + " " + lib + " && exec " + filepath.Join(dir, "nsprog")
			r := newRun(t)
			cmd := []string{"unshare", "-m", "--propagation", "private", "sh", "-c", script}
			if mode == "launch" {
				r.runMemtrace(t, memtrace, append([]string{"--stack-depth", "8", "-o", r.log, "--"}, cmd...))
			} else {
				prog := command(cmd[0], cmd[1:]...)
				prog.Env = r.env("MEMTRACE_TEST_WAIT=1")
				r.runAttachCmd(t, memtrace, prog, "--stack-depth", "8")
			}
			bpfLog(t, r.log)
			r.check(t, false)
			checkSites(t, r, func(recorded string) string {
				if recorded != lib {
					t.Errorf("the program mapped libns.so as %s, want %s", recorded, lib)
				}
				return recorded
			})
		})
	}
}

// TestContainerChrootBPF: nsprog in a minimal chroot (copies of its
// libraries and dynamic linker, so no file of it is the host's), launched
// as memtrace -- chroot DIR /nsprog and attached to with -p: every
// allocation after the exec is in the log, and the frames in libns.so name
// its function, in the file under DIR (the log names a chroot'ed
// process's files by their host paths, which readers on this machine can
// open).
func TestContainerChrootBPF(t *testing.T) {
	requireBPF(t)
	memtrace := need(t, "bin/memtrace")
	for _, mode := range []string{"launch", "attach"} {
		t.Run(mode, func(t *testing.T) {
			root := chrootDir(t)
			r := &run{log: filepath.Join(t.TempDir(), "log"), truth: filepath.Join(root, "truth")}
			cmd := []string{"chroot", root, "/nsprog"}
			// The truth file as the program sees it, inside its root.
			env := []string{"MEMTRACE_TRUTH=/truth"}
			if mode == "launch" {
				r.runMemtraceEnv(t, memtrace, env, append([]string{"--stack-depth", "8", "-o", r.log, "--"}, cmd...)...)
			} else {
				prog := command(cmd[0], cmd[1:]...)
				prog.Env = append(r.env("MEMTRACE_TEST_WAIT=1"), env...)
				r.runAttachCmd(t, memtrace, prog, "--stack-depth", "8")
			}
			bpfLog(t, r.log)
			r.check(t, false)
			checkSites(t, r, func(recorded string) string { return root + recorded })
		})
	}
}

// TestContainerPivotRootBPF: nsprog in a pivot_root'ed container (a mount
// namespace whose root is a minimal root of copies) that has, at the path
// where the host has libns.so, the other build, libns-alt.so: launched
// (memtrace -- unshare ... pivot_root ... exec /nsprog) and attached to,
// every allocation is in the log and the library's frames name the
// container's file's functions (alt_inner_ns), under its path inside the
// container, not the host file's of that path.
func TestContainerPivotRootBPF(t *testing.T) {
	requireBPF(t)
	needTools(t, "unshare", "mount", "pivot_root", "sh")
	memtrace := need(t, "bin/memtrace")
	for _, mode := range []string{"launch", "attach"} {
		t.Run(mode, func(t *testing.T) {
			host := nsDir(t)
			root := chrootDir(t)
			copyFile(t, filepath.Join(host, "libns-alt.so"), filepath.Join(root, host, "libns.so"))
			if err := os.Mkdir(filepath.Join(root, "old"), 0o755); err != nil {
				t.Fatal(err)
			}
			r := &run{log: filepath.Join(t.TempDir(), "log"), truth: filepath.Join(root, "truth")}
			script := "mount --bind " + root + " " + root + " && cd " + root + " && pivot_root . old && exec /nsprog"
			cmd := []string{"unshare", "-m", "--propagation", "private", "sh", "-c", script}
			// The container's libns.so is found by the host one's path.
			env := []string{"MEMTRACE_TRUTH=/truth", "LD_LIBRARY_PATH=" + host}
			if mode == "launch" {
				r.runMemtraceEnv(t, memtrace, env, append([]string{"--stack-depth", "8", "-o", r.log, "--"}, cmd...)...)
			} else {
				prog := command(cmd[0], cmd[1:]...)
				prog.Env = append(r.env("MEMTRACE_TEST_WAIT=1"), env...)
				r.runAttachCmd(t, memtrace, prog, "--stack-depth", "8")
			}
			bpfLog(t, r.log)
			r.check(t, false)
			checkSites(t, r, func(recorded string) string {
				if want := filepath.Join(host, "libns.so"); recorded != want {
					t.Errorf("the program mapped libns.so as %s, want %s", recorded, want)
				}
				return recorded
			})
		})
	}
}
