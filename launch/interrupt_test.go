package launch

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/runner"
)

// fileBuf is a helper's stdout or stderr: a file, not a pipe, whose
// writer PROG inherits and, detached, keeps open after memtrace exits.
type fileBuf struct{ path string }

func (f fileBuf) String() string {
	b, _ := os.ReadFile(f.path)
	return string(b)
}

// helperLaunch starts the test binary as memtrace would run launch, with
// o, and returns it and its stdout and stderr.
func helperLaunch(t *testing.T, o Options) (*exec.Cmd, fileBuf, fileBuf) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"=launch", helperArgsEnv+"="+string(b))
	dir := t.TempDir()
	stdout, stderr := fileBuf{filepath.Join(dir, "stdout")}, fileBuf{filepath.Join(dir, "stderr")}
	so, err := os.Create(stdout.path)
	if err != nil {
		t.Fatal(err)
	}
	defer so.Close()
	se, err := os.Create(stderr.path)
	if err != nil {
		t.Fatal(err)
	}
	defer se.Close()
	cmd.Stdout, cmd.Stderr = so, se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, stdout, stderr
}

// waitBuf waits (bounded) until b holds want.
func waitBuf(t *testing.T, b fileBuf, want string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if strings.Contains(b.String(), want) {
			return
		}
	}
	t.Fatalf("no %q in 10 s: %q", want, b.String())
}

// waitHelper waits (bounded) for the helper's end and returns its report.
func waitHelper(t *testing.T, cmd *exec.Cmd, stdout fileBuf) string {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("helper: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("launch did not end in 15 s after the Ctrl-C")
	}
	return stdout.String()
}

var shimPIDRE = regexp.MustCompile(`calls=\["add (\d+)"`)

// TestInterruptBeforeStart: Ctrl-C while memtrace waits for a viewer ends
// it with 130 and one line; the shim, which has not run PROG, is killed
// and reaped, and PROG never runs. Many times: a shim left behind shows
// only now and then.
func TestInterruptBeforeStart(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "mark")
	t.Setenv("MARK", mark)
	for i := 0; i < 5; i++ {
		cmd, stdout, stderr := helperLaunch(t, Options{Argv: []string{"sh", "-c", `echo ran > "$MARK"`}, Listen: "127.0.0.1:0"})
		waitBuf(t, stderr, "memtrace: waiting for a viewer on 127.0.0.1:")
		cmd.Process.Signal(syscall.SIGINT)
		out := waitHelper(t, cmd, stdout)
		if !strings.HasPrefix(out, "status=130 err=interrupted before the program started; it did not run calls=") {
			t.Fatalf("run %d: %q", i, out)
		}
		m := shimPIDRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("run %d: no shim made a target: %q", i, out)
		}
		if _, err := os.Stat("/proc/" + m[1]); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("run %d: the shim (pid %s) outlived memtrace (%v)", i, m[1], err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("PROG ran although memtrace was interrupted before it started (%v)", err)
	}
}

// TestInterruptDetaches: Ctrl-C after PROG started detaches: the log is
// finished, memtrace exits 130 saying PROG keeps running, and PROG does,
// neither stopped nor killed. Many times.
func TestInterruptDetaches(t *testing.T) {
	for i := 0; i < 5; i++ {
		dir := t.TempDir()
		log, pidFile := filepath.Join(dir, "app.log"), filepath.Join(dir, "pid")
		// exec: the program is the shim's PID itself, no shell between.
		cmd, stdout, stderr := helperLaunch(t, Options{Argv: []string{"sh", "-c", `echo $$ > ` + pidFile + `; exec sleep 30`}, Output: runner.ParseOutput(log)})
		waitFile(t, log, "[memtrace] header")
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			if b, _ := os.ReadFile(pidFile); bytes.HasSuffix(b, []byte("\n")) {
				break
			}
		}
		cmd.Process.Signal(syscall.SIGINT)
		out := waitHelper(t, cmd, stdout)
		b, _ := os.ReadFile(pidFile)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("run %d: PROG did not run (pid file %q)", i, b)
		}
		if !strings.HasPrefix(out, "status=130 err=<nil> calls=") {
			t.Errorf("run %d: %q", i, out)
		}
		if want := "memtrace: detached; sh (pid " + strconv.Itoa(pid) + ") keeps running\n"; !strings.Contains(stderr.String(), want) {
			t.Errorf("run %d: stderr %q lacks %q", i, stderr.String(), want)
		}
		if got, _ := os.ReadFile(log); !strings.Contains(string(got), "[memtrace] summary ") {
			t.Errorf("run %d: the log was not finished:\n%s", i, got)
		}
		st, err := procfs.ReadStat(pid)
		if err != nil {
			t.Fatalf("run %d: PROG is gone or its stat unreadable after the detach: %v", i, err)
		}
		if st.Stopped() || st.Gone() {
			t.Errorf("run %d: PROG is in state %c after the detach, want running or sleeping", i, st.State)
		}
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
