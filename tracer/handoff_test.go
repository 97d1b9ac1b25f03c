//go:build amd64 || arm64

package tracer

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// takeLinks is a SetHandOff receiver that takes its own reference to each
// descriptor, as the watchdog's socket does.
type takeLinks struct {
	calls int
	fds   []int
}

func (k *takeLinks) give(fds []int) error {
	k.calls++
	for _, fd := range fds {
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return err
		}
		k.fds = append(k.fds, d)
	}
	return nil
}

func (k *takeLinks) close() {
	for _, fd := range k.fds {
		unix.Close(fd)
	}
}

// isLink reports whether fd is a BPF link of type typ, by its fdinfo.
func isLink(fd int, typ string) bool {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	return err == nil && strings.Contains(string(b), "link_type:\t"+typ+"\n")
}

// probed starts a program that waits on its stdin and probes its libc.
func probed(t *testing.T, tr *Tracer) (*exec.Cmd, func()) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "read x || exit 0")
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := tr.AddProcess(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		added, err := tr.ScanProcess(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if len(added) > 0 {
			break
		}
		if i == 100 {
			t.Fatal("nothing to probe in /bin/sh after 1 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd, func() { stdin.Close() }
}

// TestHandOffOnlyWhenTargetsExited: Detach gives the probes away only
// after AllowHandOff and only when no process of the BPF filter is alive;
// otherwise it closes them itself as before. What it gives are live
// uprobe links, the exited process's among them (kept by ReleaseProcess
// instead of being closed in the background).
func TestHandOffOnlyWhenTargetsExited(t *testing.T) {
	requireBPF(t)
	for _, c := range []struct {
		name        string
		allow, exit bool
		want        bool
	}{
		{"target-alive", true, false, false},
		{"not-allowed", false, true, false},
		{"exited", true, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			var k takeLinks
			defer k.close()
			tr.SetHandOff(k.give)
			cmd, end := probed(t, tr)
			defer cmd.Wait()
			defer cmd.Process.Kill()
			if c.exit {
				end()
				if err := cmd.Wait(); err != nil {
					t.Fatalf("the program: %v", err)
				}
				tr.ReleaseProcess(cmd.Process.Pid)
			}
			if c.allow {
				tr.AllowHandOff()
			}
			tr.Detach()
			if got := k.calls > 0; got != c.want {
				t.Fatalf("handed over: %v (%d descriptors), want %v", got, len(k.fds), c.want)
			}
			if !c.want {
				return
			}
			for _, fd := range k.fds {
				if !isLink(fd, "uprobe_multi") && !isLink(fd, "perf") {
					t.Errorf("descriptor %d handed over is not a uprobe link", fd)
				}
			}
			if len(k.fds) == 0 {
				t.Error("nothing handed over")
			}
		})
	}
}
