package launch

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWatchdogSparedByNameAndGroup: the watchdog is what resumes held
// processes on a kernel that cannot itself, so neither a kill of the
// processes named memtrace (killall, pkill: comm, and pkill -f: the
// command line) nor a signal to memtrace's process group may reach it;
// and it ends once memtrace's end of its socket closes.
func TestWatchdogSparedByNameAndGroup(t *testing.T) {
	wd, err := startWatchdog()
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(wd.pid)
	var comm []byte
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		comm, _ = os.ReadFile("/proc/" + pid + "/comm")
		if string(bytes.TrimSpace(comm)) == watchdogName {
			break
		}
	}
	if got := string(bytes.TrimSpace(comm)); got != watchdogName {
		t.Errorf("the watchdog's name is %q, want %q", got, watchdogName)
	}
	cl, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	if strings.Contains(strings.ToLower(string(cl)), "memtrace") {
		t.Errorf("the watchdog's command line %q names memtrace: pkill -f memtrace would end it", bytes.ReplaceAll(cl, []byte{0}, []byte{' '}))
	}
	ours, _ := syscall.Getpgid(0)
	if g, err := syscall.Getpgid(wd.pid); err != nil || g == ours {
		t.Errorf("the watchdog's process group is %d (%v), memtrace's %d: a signal to the group would reach it", g, err, ours)
	}
	if sid, _ := getsid(wd.pid); sid != wd.pid {
		t.Errorf("the watchdog is not in a session of its own (sid %d)", sid)
	}
	wd.sock.Close()
	for end := time.Now().Add(10 * time.Second); syscall.Kill(wd.pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the watchdog still runs 10 s after its socket closed")
		}
	}
}

func getsid(pid int) (int, error) {
	r, _, e := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
