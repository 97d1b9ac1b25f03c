package tests

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// kernelBefore reports whether the running kernel's release is older than
// major.minor: the test's own oracle, independent of memtrace's probes of
// the kernel's helpers.
func kernelBefore(t *testing.T, major, minor int) bool {
	t.Helper()
	rel := kernelRelease(t)
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		t.Fatalf("kernel release %q: no major.minor", rel)
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		t.Fatalf("kernel release %q: no major.minor", rel)
	}
	return ma < major || ma == major && mi < minor
}

// TestKernelLimitDegrades: on a kernel that has every BPF helper the
// default programs call (Linux 5.17 or later), a launch and an attach
// trace with eBPF and say nothing; on an older one (the matrix's 5.10)
// both trace with eBPF through the compat programs (probes=uprobe_compat
// in the header), after one notice naming the helper the kernel lacks,
// which blames nothing on memtrace. MEMTRACE_BPF_COMPAT=1 takes the
// compat programs on any kernel, with a notice naming the variable
// where the kernel does not need them. Whatever the kernel, the attached target runs on.
func TestKernelLimitDegrades(t *testing.T) {
	requireBPF(t)
	mt := need(t, "bin/memtrace")
	prog := need(t, "tests/progs/build/basic")
	old := kernelBefore(t, 5, 17)
	for _, forced := range []bool{false, true} {
		compat := old || forced
		name := "default"
		if forced {
			name = "MEMTRACE_BPF_COMPAT=1"
		}
		t.Run(name, func(t *testing.T) {
			env := []string{}
			if forced {
				env = append(env, "MEMTRACE_BPF_COMPAT=1")
			}
			dir := t.TempDir()
			check := func(what, logPath, out string) {
				t.Helper()
				log, err := os.ReadFile(logPath)
				if err != nil {
					t.Fatalf("%s: %v\n%s", what, err, out)
				}
				header, _, _ := strings.Cut(string(log), "\n")
				if !strings.Contains(header, " mode=bpf") {
					t.Errorf("%s: the header is %q, want mode=bpf", what, header)
				}
				notice := "memtrace: notice: this kernel ("
				if forced && !old {
					notice = "memtrace: notice: MEMTRACE_BPF_COMPAT=1: "
				}
				switch {
				case compat && !strings.Contains(header, " probes=uprobe_compat"):
					t.Errorf("%s: the header is %q, want probes=uprobe_compat", what, header)
				case !compat && strings.Contains(header, "uprobe_compat"):
					t.Errorf("%s: on a kernel with every helper the header is %q", what, header)
				case compat && (strings.Count(out, "notice:") != 1 || !strings.Contains(out, notice) ||
					!strings.Contains(out, "tracing with the eBPF programs for kernels before 5.17")):
					t.Errorf("%s said:\n%s\nwant one notice %q... naming what the compat programs are for", what, out, notice)
				case old && !strings.Contains(out, "lacks the BPF helper bpf_"):
					t.Errorf("%s said:\n%s\nwant the notice to name the helper the kernel lacks", what, out)
				case !compat && strings.Contains(out, "notice:"):
					t.Errorf("%s: on a kernel with every helper a notice:\n%s", what, out)
				}
				if strings.Contains(out, "bug in memtrace") {
					t.Errorf("%s: a kernel's limit blamed on memtrace:\n%s", what, out)
				}
			}

			logPath := filepath.Join(dir, "launch.log")
			cmd := command(mt, "--stack-depth", "16", "-o", logPath, "--", prog)
			cmd.Env = append(cmd.Environ(), env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("memtrace -- basic: %v\n%s", err, out)
			}
			check("memtrace -- basic", logPath, string(out))

			// A target that links libc's malloc (not sleep, a static
			// busybox on the arm64 guest's root) and waits on its stdin.
			target := command(need(t, "tests/progs/build/liveleak"))
			stdin, err := target.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := target.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { stdin.Close(); target.Process.Kill(); target.Wait() }()
			attachLog := filepath.Join(dir, "attach.log")
			acmd := command(mt, "-p", strconv.Itoa(target.Process.Pid), "-o", attachLog)
			acmd.Env = append(acmd.Environ(), env...)
			var se strings.Builder
			acmd.Stderr = &se
			if err := acmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- acmd.Wait() }()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			go func() {
				// memtrace ending first is the answer: no header will come.
				select {
				case err := <-exited:
					exited <- err
					cancel()
				case <-ctx.Done():
				}
			}()
			if err := waitHeader(ctx, attachLog); err != nil {
				acmd.Process.Kill()
				t.Fatalf("%v\nmemtrace -p: %s", err, se.String())
			}
			acmd.Process.Signal(unix.SIGINT)
			if err := <-exited; err != nil {
				t.Fatalf("memtrace -p, then Ctrl-C: %v\n%s", err, se.String())
			}
			bpfLog(t, attachLog)
			notices := se.String()
			if i := strings.Index(notices, "memtrace stats:"); i >= 0 {
				notices = notices[:i]
			}
			check("memtrace -p", attachLog, notices)
			// The target runs on, not stopped.
			if st := procStateOf(target.Process.Pid); st == "T" || st == "t" {
				t.Errorf("the target is left in state %s", st)
			}
		})
	}
}

// kernelRelease is uname -r.
func kernelRelease(t *testing.T) string {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}
