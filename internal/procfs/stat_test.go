package procfs

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// statTail is a stat line's fields after the comm, from a real process:
// state S, ppid 1, pgrp 42, flags 4194560, 1 thread, started at 8590.
const statTail = " S 1 42 42 0 -1 4194560 123 0 0 0 1 2 0 0 20 0 1 0 8590 10000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"

func TestParseStat(t *testing.T) {
	for _, comm := range []string{"sleep", "a) b (c", "x) S 9 9 9 0 -1 0 0", ")", "(", "", "with\nnewline", "kworker/u8:2-events_unbound"} {
		st, err := ParseStat([]byte("42 (" + comm + ")" + statTail))
		want := Stat{PID: 42, Comm: comm, State: 'S', PPID: 1, PGRP: 42, Flags: 4194560, NumThreads: 1, StartTime: 8590}
		if err != nil || st != want {
			t.Errorf("comm %q: %+v, %v\nwant %+v", comm, st, err, want)
		}
	}
	for _, bad := range []string{"", "42", "42 (no close S 1", "(a) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"x (a)" + statTail, "42 (a) S 1 42", "42 (a) SS" + statTail[2:], "42 (a)" + strings.Replace(statTail, "8590", "-1", 1),
		"0 (a)" + statTail, "42(a)" + statTail} {
		if st, err := ParseStat([]byte(bad)); !errors.Is(err, ErrBadStat) {
			t.Errorf("ParseStat(%q) = %+v, %v, want ErrBadStat", bad, st, err)
		}
	}
}

func TestParseStatus(t *testing.T) {
	in := "Name:\tx\\ny\\\\z\t \nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4000\nNgid:\t0\nPid:\t4001\nPPid:\t3999\n"
	st, err := ParseStatus([]byte(in))
	if want := (Status{Name: "x\ny\\z\t ", State: 'S', Tgid: 4000, PPID: 3999, UID: -1}); err != nil || st != want {
		t.Fatalf("%+v, %v, want %+v", st, err, want)
	}
	// The effective uid and the capability sets, for the attach check.
	st, err = ParseStatus([]byte(in + "Uid:\t1000\t0\t0\t0\nCapPrm:\t000001ffffffffff\nCapEff:\t0000000000080000\n"))
	if want := (Status{Name: "x\ny\\z\t ", State: 'S', Tgid: 4000, PPID: 3999, UID: 0, CapPrm: 0x1ffffffffff, CapEff: 1 << 19, CapsKnown: true}); err != nil || st != want {
		t.Fatalf("with Uid and caps: %+v, %v, want %+v", st, err, want)
	}
	// Kernels before 5.13 escaped in octal.
	st, err = ParseStatus([]byte("Name:\ta\\012b\\134c\\d\\\nTgid:\t1\n"))
	if err != nil || st.Name != "a\nb\\c\\d\\" {
		t.Fatalf("octal: %q, %v", st.Name, err)
	}
	for _, bad := range []string{"", "Name:\tx\n", "Tgid:\t1\n", "Name:\tx\nTgid:\tq\n", "Name:\tx\nTgid:\t1\nState:\t\n"} {
		if st, err := ParseStatus([]byte(bad)); !errors.Is(err, ErrBadStat) {
			t.Errorf("ParseStatus(%q) = %+v, %v, want ErrBadStat", bad, st, err)
		}
	}
}

// TestReadOwnName: a thread named with spaces, parentheses, a backslash
// and a newline reads back the same through comm, stat and status, with
// its process's tgid.
func TestReadOwnName(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	old, _ := ReadComm(tid)
	defer setName(old)
	for _, name := range []string{"a) b (c", "x\ny\\z\t ", "trailing "} {
		if err := setName(name); err != nil {
			t.Fatal(err)
		}
		if c, err := ReadComm(tid); err != nil || c != name {
			t.Errorf("comm %q: read %q, %v", name, c, err)
		}
		if st, err := ReadStat(tid); err != nil || st.Comm != name || st.PID != tid || st.State != 'R' || st.PPID != os.Getppid() {
			t.Errorf("stat of %q: %+v, %v", name, st, err)
		}
		if st, err := ReadStatus(tid); err != nil || st.Name != name || st.Tgid != os.Getpid() || st.State != 'R' {
			t.Errorf("status of %q: %+v, %v", name, st, err)
		}
	}
}

// TestStatOfProcesses: a stopped child is stopped, a zombie is gone, a
// kernel thread carries PF_KTHREAD, and a command line and environment
// read back as given.
func TestStatOfProcesses(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30; exit 0", "x", "a b", "")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "A=1", "B=x y"}
	if err := cmd.Start(); err != nil {
		t.Skipf("no sh(1): %v", err)
	}
	pid := cmd.Process.Pid
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Start returns once the exec is past its point of no return; the
	// new image's arguments are in place a moment later.
	args, err := ReadCmdline(pid)
	for end := time.Now().Add(5 * time.Second); err == nil && (len(args) == 0 || args[0] != "sh") && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
		args, err = ReadCmdline(pid)
	}
	if !slices.Equal(args, []string{"sh", "-c", "sleep 30; exit 0", "x", "a b", ""}) || err != nil {
		t.Errorf("cmdline %q, %v", args, err)
	}
	if env, err := ReadEnviron(pid); !slices.Equal(env, cmd.Env) || err != nil {
		t.Errorf("environ %q, %v", env, err)
	}
	st, err := ReadStat(pid)
	if err != nil || st.PPID != os.Getpid() || st.Gone() || st.Comm != "sh" || st.StartTime == 0 {
		t.Fatalf("%+v, %v", st, err)
	}
	cmd.Process.Signal(unix.SIGSTOP)
	waitState(t, pid, (*Stat).Stopped)
	cmd.Process.Kill()
	waitState(t, pid, (*Stat).Gone)
	if st, err := ReadStat(2); err == nil && st.Flags&PFKthread == 0 {
		t.Errorf("kthreadd: flags %#x lack PF_KTHREAD", st.Flags)
	}
	if _, err := ReadStat(1 << 30); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no such process: %v", err)
	}
}

func setName(name string) error {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	return unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0)
}

func waitState(t *testing.T, pid int, is func(*Stat) bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if st, err := ReadStat(pid); err == nil && is(&st) {
			return
		}
	}
	st, err := ReadStat(pid)
	t.Fatalf("process %d never reached the state: %+v, %v", pid, st, err)
}

// TestSameFS: this process and its child see memtrace's filesystem; one
// in a mount namespace of its own does not, though its root reads "/".
func TestSameFS(t *testing.T) {
	if !SameFS(os.Getpid()) || !SameMountNS(os.Getpid()) {
		t.Fatal("this process does not share its own filesystem")
	}
	if SameFS(1<<30) || SameMountNS(1<<30) {
		t.Fatal("a process that does not exist shares the filesystem")
	}
	if os.Geteuid() != 0 {
		t.Skip("unshare -m needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1)")
	}
	cmd := exec.Command(unshare, "-m", "--propagation", "private", "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if c, _ := ReadComm(pid); c == "sleep" {
			break
		}
	}
	if l, err := os.Readlink(Dir(pid) + "/root"); err != nil || l != "/" {
		t.Fatalf("root of the unshared process: %q, %v", l, err)
	}
	if SameMountNS(pid) || SameFS(pid) {
		t.Fatal("a process in a mount namespace of its own shares memtrace's filesystem")
	}
}
