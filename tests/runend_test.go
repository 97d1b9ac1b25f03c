package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
)

// runEndBin builds tests/progs/runend.c (how a run ends: exit 3, a
// signal, or running until killed), which the --preload tests build too.
func runEndBin(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("progs/runend.c")
	if err != nil {
		t.Fatal(err)
	}
	return buildC(t, "runend", string(src), "-fno-builtin")
}

// reportText runs memtrace report on log.
func reportText(t *testing.T, log string) string {
	t.Helper()
	code, out, se := memtraceRun(t, nil, "report", "-a", "0", "-p", "0", "-T", "0", log)
	if code != 0 {
		t.Fatalf("report exit %d: %s", code, se)
	}
	return out
}

// TestRunEndExitAndSignal: the eBPF log's exit line of the program
// memtrace started carries its exit status or the signal that killed it,
// and the report says so and calls the blocks it never freed leaks.
func TestRunEndExitAndSignal(t *testing.T) {
	requireBPF(t)
	bin := runEndBin(t)
	for _, c := range []struct {
		arg   string
		code  int
		field string
		end   string
	}{
		{"", 3, "status=3", "run: exited with status 3\n"},
		{"segv", 128 + int(syscall.SIGSEGV), "signal=SIGSEGV", "run: killed by SIGSEGV\n"},
	} {
		log := filepath.Join(t.TempDir(), "log")
		args := []string{"-o", log, "--", bin}
		if c.arg != "" {
			args = append(args, c.arg)
		}
		code, _, se := memtraceRun(t, nil, args...)
		if code != c.code {
			t.Fatalf("%s: memtrace exit %d, want %d: %s", c.arg, code, c.code, se)
		}
		b := bpfLog(t, log)
		var exit string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "proc event=exit") {
				exit = l
			}
		}
		if !strings.HasSuffix(exit, " "+c.field) {
			t.Errorf("%s: exit line %q, want %s", c.arg, exit, c.field)
		}
		out := reportText(t, log)
		if !strings.Contains(out, c.end) || !strings.Contains(out, "MEMORY LEAKS\n") || !strings.Contains(out, "5.00K leaked over 5 calls from") ||
			!strings.Contains(out, "total memory leaked: ") || strings.Contains(out, "still allocated") {
			t.Errorf("%s: want %q and the five blocks as leaks:\n%s", c.arg, c.end, out)
		}
	}
}

// TestRunEndDetachAndInterrupt: a -p detach and a Ctrl-C of memtrace --
// PROG leave the program running, so what it holds is reported as still
// allocated at detach, not as leaks, and the report says how the run ended.
// Three rounds of each: a Ctrl-C races the program's own events.
func TestRunEndDetachAndInterrupt(t *testing.T) {
	requireBPF(t)
	bin := runEndBin(t)
	for round := range rounds(6, 2) {
		mode := []string{"attach", "launch"}[round%2]
		log := filepath.Join(t.TempDir(), "log")
		var args []string
		var prog *exec.Cmd
		if mode == "attach" {
			prog = command(bin, "forever")
			if err := prog.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { prog.Process.Kill(); prog.Wait() })
			args = []string{"-o", log, "-p", itoa(prog.Process.Pid)}
		} else {
			args = []string{"-o", log, "--", bin, "forever"}
		}
		// A file, not a pipe: the program memtrace leaves running holds
		// memtrace's stdout, and Wait would wait for a pipe's end.
		outPath := filepath.Join(t.TempDir(), "out")
		mtOut, err := os.Create(outPath)
		if err != nil {
			t.Fatal(err)
		}
		defer mtOut.Close()
		said := func() string { b, _ := os.ReadFile(outPath); return string(b) }
		mt := command(need(t, "bin/memtrace"), args...)
		mt.Stdout, mt.Stderr = mtOut, mtOut
		if err := mt.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mt.Process.Kill() })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = waitHeader(ctx, log)
		cancel()
		if mode == "launch" {
			// The program runs on after the Ctrl-C: end it here.
			if pid := headerPID(log); pid > 0 {
				t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			}
		}
		if err != nil {
			t.Fatalf("%s: %v\nmemtrace: %s", mode, err, said())
		}
		// Ring blocks freed and allocated again in the log before the
		// Ctrl-C, however slowly a loaded machine runs the program.
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		err = waitFreeThenMalloc(ctx, log)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\nmemtrace: %s", mode, err, said())
		}
		mt.Process.Signal(syscall.SIGINT)
		if err := runWait(mt, 30*time.Second); err != nil && mode == "attach" {
			t.Fatalf("%s: memtrace after SIGINT: %v\n%s", mode, err, said())
		}
		bpfLog(t, log)
		want := map[string]string{"attach": "run: detached\n", "launch": "run: interrupted\n"}[mode]
		out := reportText(t, log)
		if !strings.Contains(out, want) || !strings.Contains(out, "STILL ALLOCATED AT DETACH") || !strings.Contains(out, "still allocated at detach: ") ||
			strings.Contains(out, "MEMORY LEAKS") || strings.Contains(out, "total memory leaked") || !strings.Contains(out, " still allocated over ") {
			t.Errorf("%s: want %q and blocks still allocated, not leaks:\n%s", mode, want, out)
		}
	}
}

// headerPID is the pid= of log's header line, 0 when it has none.
func headerPID(log string) int {
	b, _ := os.ReadFile(log)
	line, _, _ := strings.Cut(string(b), "\n")
	_, rest, ok := strings.Cut(line, "[memtrace] header ")
	if !ok {
		return 0
	}
	h, err := logfmt.ParseHeader([]byte(rest))
	if err != nil {
		return 0
	}
	return int(h.PID)
}

// waitFreeThenMalloc waits until the log at path has a free event line
// followed by a malloc one.
func waitFreeThenMalloc(ctx context.Context, path string) error {
	for {
		if data, err := os.ReadFile(path); err == nil {
			seenFree := false
			for _, l := range strings.Split(string(data), "\n") {
				if !strings.HasPrefix(l, "[memtrack] tid=") {
					continue
				}
				if strings.Contains(l, " free ") {
					seenFree = true
				} else if seenFree && strings.Contains(l, " malloc ") {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no free then malloc in %s: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
