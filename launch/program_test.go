package launch

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/cli"
	"github.com/memtrace/memtrace/runner"
)

// children lists the live or unreaped processes whose parent is this test
// and that are not in before (the watchdogs of earlier tests, say).
func children(t *testing.T, before ...int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	me := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if f := strings.Fields(string(b[i+1:])); len(f) > 2 && f[1] == strconv.Itoa(me) && !slices.Contains(before, pid) {
			out = append(out, pid)
		}
	}
	return out
}

// TestLaunchRunsProgram launches (through a fake tracer, with this test
// binary as the exec shim) programs that exit with a status and that a
// signal kills: memtrace's status is the program's, 128+N for a signal;
// the log is a header naming the program and the summary; the shim's PID
// was made a target and probed in every library before PROG ran.
func TestLaunchRunsProgram(t *testing.T) {
	for _, c := range []struct {
		script string
		want   int
	}{
		{`echo ran > "$MARK"; exit 3`, 3},
		{`echo ran > "$MARK"; exit 0`, 0},
		{`echo ran > "$MARK"; kill -KILL $$`, 128 + 9},
		{`echo ran > "$MARK"; kill -TERM $$`, 128 + 15},
	} {
		t.Run(c.script, func(t *testing.T) {
			dir := t.TempDir()
			mark := filepath.Join(dir, "mark")
			t.Setenv("MARK", mark)
			log := filepath.Join(dir, "app.log")
			fake := newFake()
			var stderr syncBuf
			o := &Options{Argv: []string{"sh", "-c", c.script}, Output: runner.ParseOutput(log)}
			before := children(t)
			status, err := launch(o, fake, &stderr)
			if err != nil || status != c.want {
				t.Fatalf("launch = %d, %v; want %d, nil", status, err, c.want)
			}
			if b, _ := os.ReadFile(mark); string(b) != "ran\n" {
				t.Errorf("PROG did not run (mark file %q)", b)
			}
			calls := fake.callList()
			if len(calls) < 2 || !strings.HasPrefix(calls[0], "add ") {
				t.Fatalf("calls %q, want add PID first", calls)
			}
			pid := strings.TrimPrefix(calls[0], "add ")
			sh, _ := exec.LookPath("sh")
			libs := launchLibs(sh, os.Environ())
			for i, lib := range libs {
				if want := "attach " + pid + " " + lib; i+1 >= len(calls) || calls[i+1] != want {
					t.Fatalf("calls %q: want %q at %d (each of %q)", calls, want, i+1, libs)
				}
			}
			if calls[len(calls)-1] != "detach" {
				t.Errorf("calls %q, want detach last", calls)
			}
			got, _ := os.ReadFile(log)
			// sh is a link to dash on Debian: the header names the file.
			exe := ""
			if real, _ := filepath.EvalSymlinks(sh); filepath.Base(real) != "sh" {
				exe = " exe=" + real
			}
			diffLines(t, stable(string(got)), []string{
				`[memtrace] header version=` + cli.Version + ` pid=` + pid + ` pids=` + pid + ` comm=sh cmd="sh -c ` + strings.ReplaceAll(c.script, `"`, `\"`) + `"` + exe + ` start=S mode=bpf probes=uprobe_session`,
				`[memtrace] summary events=0 allocs=0 frees=0 lost=0 duration_us=D`,
			})
			if s := withoutClosing(stderr.String()); s != "" {
				t.Errorf("stderr %q, want nothing but the closing lines", s)
			}
			if left := children(t, before...); len(left) > 0 {
				t.Errorf("processes left behind: %v", left)
			}
		})
	}
}

// TestLaunchErrors: every way launch can fail before PROG runs is one
// line, and leaves nothing behind: the shim killed and reaped, PROG never
// run, no log created where the log could not be. Each case runs many
// times: a shim left stopped or waiting shows only now and then.
func TestLaunchErrors(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "mark")
	t.Setenv("MARK", mark)
	missingDir := filepath.Join(dir, "missing", "app.log")
	for _, c := range []struct {
		name  string
		setup func(*fakeTracer, *Options)
		want  string
	}{
		{"log in a missing directory", func(f *fakeTracer, o *Options) { o.Output = runner.FileOutput(missingDir) },
			"create log " + missingDir + ": no such file or directory; give a path in a directory you can write"},
		{"nothing probed", func(f *fakeTracer, o *Options) { f.attachOK = false },
			"sh links no library with allocation functions: memtrace traces programs that use libc's malloc, libstdc++ or a malloc library; try --preload"},
		{"attach fails", func(f *fakeTracer, o *Options) { f.attachE = errors.New("attach uprobe to malloc: no space left") },
			"attach uprobe to malloc: no space left"},
		{"filter full", func(f *fakeTracer, o *Options) { f.addErr = errors.New("add process to the BPF filter: no space left") },
			"add process to the BPF filter: no space left"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := 0; i < 10; i++ {
				fake := newFake()
				o := &Options{Argv: []string{"sh", "-c", `echo ran > "$MARK"`}, Output: runner.ParseOutput(filepath.Join(dir, "app.log"))}
				c.setup(fake, o)
				var stderr syncBuf
				before := children(t)
				status, err := launch(o, fake, &stderr)
				if status != 1 || err == nil || err.Error() != c.want {
					t.Fatalf("run %d: launch = %d, %v\nwant 1, %s", i, status, err, c.want)
				}
				if stderr.String() != "" {
					t.Fatalf("run %d: stderr %q, want nothing (the one line is the error)", i, stderr.String())
				}
				calls := fake.callList()
				if len(calls) == 0 {
					t.Fatalf("run %d: no shim was made a target", i)
				}
				pid, _ := strconv.Atoi(strings.TrimPrefix(calls[0], "add "))
				if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("run %d: the shim (pid %d) is still there (%v)", i, pid, err)
				}
				if left := children(t, before...); len(left) > 0 {
					t.Fatalf("run %d: processes left behind: %v", i, left)
				}
			}
			time.Sleep(20 * time.Millisecond) // a PROG run by mistake would have written by now
			if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("PROG ran although launch failed (%v)", err)
			}
			if _, err := os.Stat(missingDir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a log was created in the missing directory (%v)", err)
			}
		})
	}
}

// TestRunBadProgram: a program that is not there is one line with exit
// status 127, one that is not executable 126 (a shell's), before BPF is
// even looked at and without falling back to LD_PRELOAD.
func TestRunBadProgram(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "prog")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		prog   string
		status int
		want   string
	}{
		{filepath.Join(dir, "missing"), 127, "cannot run " + filepath.Join(dir, "missing") + ": stat " + filepath.Join(dir, "missing") + ": no such file or directory: check the program's path"},
		{notExec, 126, "cannot execute " + notExec + ": permission denied: make it executable (chmod +x) or give the right path"},
		{"memtrace-no-such-program", 127, "cannot run memtrace-no-such-program: executable file not found in $PATH: check the program's path"},
	} {
		var stderr syncBuf
		status, err := Run(Options{Argv: []string{c.prog}}, &stderr, noFallback{t})
		if status != c.status || err == nil || err.Error() != c.want {
			t.Errorf("%s: Run = %d, %v\nwant %d, %s", c.prog, status, err, c.status, c.want)
		}
		if stderr.String() != "" {
			t.Errorf("%s: stderr %q", c.prog, stderr.String())
		}
	}
}

// TestExitStatus: a program's exit code, 128+N for signal N (as a shell
// reports it), 1 without a status.
func TestExitStatus(t *testing.T) {
	if got := exitStatus(nil); got != 1 {
		t.Errorf("no status: %d, want 1", got)
	}
	for script, want := range map[string]int{"exit 0": 0, "exit 7": 7, "exit 255": 255, "kill -INT $$": 130, "kill -SEGV $$": 139, "kill -KILL $$": 137} {
		cmd := exec.Command("sh", "-c", script)
		_ = cmd.Run()
		if got := exitStatus(cmd.ProcessState); got != want {
			t.Errorf("%s: %d, want %d", script, got, want)
		}
	}
}

// TestWaitShim: the shim's byte is its start; a pipe closed without it (a
// shim that died) and one that stays silent (a shim that hangs) are one
// error each, the second within the limit.
func TestWaitShim(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte{1})
	if err := waitShim(r, time.Second); err != nil {
		t.Errorf("after the byte: %v", err)
	}
	w.Close()
	if err := waitShim(r, time.Second); err == nil || err.Error() != "the exec shim did not start: EOF" {
		t.Errorf("closed pipe: %v, want the exec shim did not start: EOF", err)
	}
	r.Close()
	r, w, err = os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	begin := time.Now()
	err = waitShim(r, 50*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.HasPrefix(err.Error(), "the exec shim did not start: ") {
		t.Errorf("silent pipe: %v, want a deadline error", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("silent pipe: waited %v for a 50ms limit", d)
	}
}
