package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/fdtrace"
	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/internal/cli"
	"github.com/memtrace/memtrace/runner"
)

// waitFile waits (bounded) until path holds want.
func waitFile(t *testing.T, path, want string) string {
	t.Helper()
	var b []byte
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if b, _ = os.ReadFile(path); strings.Contains(string(b), want) {
			return string(b)
		}
	}
	t.Fatalf("%s has no %q after 10 s:\n%s", path, want, b)
	return ""
}

// TestAttachLogsUntilLastExits attaches (through a fake tracer) to two
// running processes: the log has the header naming both, one attach line
// each, and ends with the summary only once the last of them has exited;
// they were probed in order and the probes came off at the end.
func TestAttachLogsUntilLastExits(t *testing.T) {
	a, b := startSleep(t), startSleep(t)
	pa, pb := a.Process.Pid, b.Process.Pid
	fake := newFake()
	fake.scanned = []string{"malloc", "free"}
	log := filepath.Join(t.TempDir(), "attach.log")
	o := &Options{PIDs: []int{pa, pb}, Output: runner.ParseOutput(log)}
	done := make(chan error, 1)
	var stderr syncBuf
	go func() { done <- attach(o, fake, &stderr) }()
	waitFile(t, log, "event=attach pid="+strconv.Itoa(pb))
	a.Process.Kill()
	a.Wait()
	select {
	case err := <-done:
		t.Fatalf("attach returned (%v) while process %d still runs", err, pb)
	case <-time.After(300 * time.Millisecond):
	}
	if b, _ := os.ReadFile(log); strings.Contains(string(b), "summary") {
		t.Fatalf("the log was finished while process %d still runs:\n%s", pb, b)
	}
	b.Process.Kill()
	b.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("attach: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("attach did not return in 10 s after both processes exited")
	}
	got, _ := os.ReadFile(log)
	sa, sb := strconv.Itoa(pa), strconv.Itoa(pb)
	diffLines(t, stable(string(got)), []string{
		`[memtrace] header version=` + cli.Version + ` pid=` + sa + ` pids=` + sa + `,` + sb + ` comm=sleep cmd="sleep 30" start=S mode=bpf probes=uprobe_session`,
		`[memtrace] proc event=attach pid=` + sa + ` comm=sleep cmd="sleep 30"`,
		`[memtrace] proc event=attach pid=` + sb + ` comm=sleep cmd="sleep 30"`,
		`[memtrace] summary events=0 allocs=0 frees=0 lost=0 duration_us=D`,
	})
	calls := fake.callList()
	if i := slices.Index(calls, "detach"); i < 0 || !slices.Equal(calls[:4], []string{"add " + sa, "scan " + sa, "add " + sb, "scan " + sb}) {
		t.Errorf("calls %q, want add and scan of each process in order, then detach", calls)
	}
	if s := withoutClosing(stderr.String()); s != "" {
		t.Errorf("stderr: %q, want nothing but the closing lines", s)
	}
}

// TestAttachErrors: each way a probe can fail ends attach with one line
// that names the process, before the log is created.
func TestAttachErrors(t *testing.T) {
	sleepPath, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	sleepPath, _ = filepath.EvalSymlinks(sleepPath)
	for _, c := range []struct {
		name  string
		setup func(f *fakeTracer, pid int)
		want  string
	}{
		{"exited", func(f *fakeTracer, pid int) {
			f.scanErr[pid] = &fs.PathError{Op: "open", Path: "/proc/" + strconv.Itoa(pid) + "/maps", Err: fs.ErrNotExist}
		}, "process %d exited before memtrace could attach"},
		{"scan fails", func(f *fakeTracer, pid int) { f.scanErr[pid] = errors.New("uprobe: bad luck") }, "attach to process %d: uprobe: bad luck"},
		{"nothing to probe", func(f *fakeTracer, pid int) {}, "process %d (" + sleepPath + ") links no library with allocation functions: memtrace traces programs that use libc's malloc, libstdc++ or a malloc library"},
		{"filter full", func(f *fakeTracer, pid int) { f.addErr = errors.New("add process to the BPF filter: no space left") }, "add process to the BPF filter: no space left"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := startSleep(t)
			pid := cmd.Process.Pid
			fake := newFake()
			c.setup(fake, pid)
			log := filepath.Join(t.TempDir(), "attach.log")
			err := attach(&Options{PIDs: []int{pid}, Output: runner.ParseOutput(log)}, fake, &syncBuf{})
			want := c.want
			if strings.Contains(want, "%d") {
				want = fmt.Sprintf(want, pid)
			}
			if err == nil || err.Error() != want {
				t.Fatalf("attach: %v\nwant %s", err, want)
			}
			if _, err := os.Stat(log); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the log exists after a failed attach (%v)", err)
			}
			if err := syscall.Kill(pid, 0); err != nil {
				t.Errorf("the process is gone after a failed attach: %v", err)
			}
		})
	}
}

// TestCheckAttachableNotRoot: a process another user owns is refused up
// front, saying to run as root, when memtrace runs as a user who may not
// read its mappings (the check runs in a helper process as nobody).
func TestCheckAttachableNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		bpftest.Unavailable(t, "running as another user needs root")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// nobody must be able to run the test binary: a copy outside the
	// build cache's private directory.
	dir, err := os.MkdirTemp("", "memtrace-launch")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "launch.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	target := startSleep(t).Process.Pid // root's
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), helperEnv+"=checkattach:"+strconv.Itoa(target))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper as nobody: %v", err)
	}
	want := fmt.Sprintf("read the mappings of process %d: permission denied: run memtrace as root (sudo memtrace -p %d)", target, target)
	if string(out) != want {
		t.Errorf("as nobody: %q\nwant %q", out, want)
	}
}

// TestFDRefusedStillTracesAllocations: a kernel that refuses the
// descriptor programs (as every kernel did when their stack went past the
// verifier's 512 bytes) costs the descriptors, with one notice, not the
// run: the allocations are still traced and the log is whole.
func TestFDRefusedStillTracesAllocations(t *testing.T) {
	old := newFDTracer
	newFDTracer = func(fdtrace.Options) (*fdtrace.Tracer, error) {
		return nil, fmt.Errorf("%w: load the fd BPF programs: program fd_sys_exit: combined stack size of 5 calls is 560. Too large", fdtrace.ErrUnavailable)
	}
	defer func() { newFDTracer = old }()
	a := startSleep(t)
	pa := a.Process.Pid
	fake := newFake()
	fake.scanned = []string{"malloc", "free"}
	log := filepath.Join(t.TempDir(), "attach.log")
	o := &Options{PIDs: []int{pa}, Output: runner.ParseOutput(log), Track: config.DefaultTrack | config.TrackFD}
	done := make(chan error, 1)
	var stderr syncBuf
	go func() { done <- attach(o, fake, &stderr) }()
	waitFile(t, log, "event=attach pid="+strconv.Itoa(pa))
	a.Process.Kill()
	a.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("attach with the descriptor programs refused: %v, want the run to go on", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("attach did not return in 10 s after the process exited")
	}
	got, _ := os.ReadFile(log)
	if !strings.Contains(string(got), "[memtrace] summary ") {
		t.Errorf("the log has no summary:\n%s", got)
	}
	want := "memtrace: notice: descriptor tracing (--track fd) is off: "
	if s := withoutClosing(stderr.String()); !strings.HasPrefix(s, want) || strings.Count(s, "\n") != 1 || !strings.Contains(s, "allocations are still traced") {
		t.Errorf("stderr %q, want one line starting %q that says allocations are still traced", s, want)
	}
}
