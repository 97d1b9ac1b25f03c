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

// TestKernelLimitDegrades: on a kernel that has every BPF helper memtrace
// calls (Linux 5.17 or later), a launch and an attach trace with eBPF and
// say nothing of a fallback; on an older one (the matrix's 5.10) the
// launch runs under LD_PRELOAD after one notice naming the helper the
// kernel lacks, and an attach is one line saying the program must be
// restarted under --preload, with the target left running.
func TestKernelLimitDegrades(t *testing.T) {
	requireBPF(t)
	mt := need(t, "bin/memtrace")
	prog := need(t, "tests/progs/build/basic")
	old := kernelBefore(t, 5, 17)
	dir := t.TempDir()

	logPath := filepath.Join(dir, "launch.log")
	out, err := command(mt, "--stack-depth", "16", "-o", logPath, "--", prog).CombinedOutput()
	if err != nil {
		t.Fatalf("memtrace -- basic: %v\n%s", err, out)
	}
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(string(log), "\n")
	notice := "memtrace: notice: eBPF tracing unavailable: this kernel ("
	if old {
		if !strings.Contains(header, " mode=preload") {
			t.Errorf("on a kernel before 5.17 the launch's header is %q, want mode=preload", header)
		}
		if !strings.Contains(string(out), notice) || !strings.Contains(string(out), "lacks the BPF helper bpf_") || !strings.Contains(string(out), "using the LD_PRELOAD fallback") {
			t.Errorf("on a kernel before 5.17 the launch said:\n%s\nwant one notice naming the helper the kernel lacks and the fallback", out)
		}
		if strings.Contains(string(out), "bug in memtrace") {
			t.Errorf("a kernel's limit blamed on memtrace:\n%s", out)
		}
	} else {
		if !strings.Contains(header, " mode=bpf") {
			t.Errorf("on a kernel with every helper the launch's header is %q, want mode=bpf", header)
		}
		if strings.Contains(string(out), "notice:") {
			t.Errorf("on a kernel with every helper the launch gave a notice:\n%s", out)
		}
	}

	// A target that links libc's malloc (not sleep, a static busybox on
	// the arm64 guest's root) and waits on its stdin.
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
	if old {
		out, err = command(mt, "-p", strconv.Itoa(target.Process.Pid), "-o", attachLog).CombinedOutput()
		if err == nil {
			t.Fatalf("memtrace -p on a kernel before 5.17 succeeded:\n%s", out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], "lacks the BPF helper bpf_") || !strings.Contains(lines[0], "memtrace --preload -- PROG") {
			t.Errorf("memtrace -p on a kernel before 5.17 said:\n%s\nwant one line naming the helper and the restart under --preload", out)
		}
		if _, err := os.Stat(attachLog); err == nil {
			t.Errorf("a refused attach left a log")
		}
	} else {
		cmd := command(mt, "-p", strconv.Itoa(target.Process.Pid), "-o", attachLog)
		var se strings.Builder
		cmd.Stderr = &se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
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
			cmd.Process.Kill()
			t.Fatalf("%v\nmemtrace -p: %s", err, se.String())
		}
		cmd.Process.Signal(unix.SIGINT)
		if err := <-exited; err != nil {
			t.Fatalf("memtrace -p, then Ctrl-C: %v\n%s", err, se.String())
		}
		bpfLog(t, attachLog)
	}
	// Whatever the kernel, the target runs on, not stopped.
	if st := procStateOf(target.Process.Pid); st == "T" || st == "t" {
		t.Errorf("the target is left in state %s", st)
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
