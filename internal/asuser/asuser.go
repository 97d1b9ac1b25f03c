package asuser

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// User is a set of credentials a file operation runs with.
type User struct {
	UID, GID int
	Groups   []int // supplementary groups; GID is added if missing
}

// Invoker returns the user behind sudo when memtrace runs as root under
// sudo (euid 0, SUDO_UID set and not 0), with that user's supplementary
// groups from the group database, as sudo itself would set them. ok is
// false when there is no such user and files are opened as memtrace runs.
// SUDO_UID without SUDO_GID, or a value that is not a number, is an error
// rather than a reason to fall back to root.
func Invoker() (u User, ok bool, err error) {
	if os.Geteuid() != 0 {
		return User{}, false, nil
	}
	uidS, gidS := os.Getenv("SUDO_UID"), os.Getenv("SUDO_GID")
	if uidS == "" || uidS == "0" {
		return User{}, false, nil
	}
	uid, err := strconv.ParseUint(uidS, 10, 31)
	if err != nil {
		return User{}, false, fmt.Errorf("SUDO_UID=%q is not a user ID: unset it, or run memtrace through sudo", clip(uidS))
	}
	gid, err := strconv.ParseUint(gidS, 10, 31)
	if err != nil {
		return User{}, false, fmt.Errorf("SUDO_GID=%q is not a group ID (SUDO_UID is %d): set both, or neither", clip(gidS), uid)
	}
	u = User{UID: int(uid), GID: int(gid)}
	// A user missing from the group database keeps just SUDO_GID, which
	// is never more than sudo gave them.
	if pw, err := user.LookupId(uidS); err == nil {
		if gs, err := pw.GroupIds(); err == nil {
			for _, g := range gs {
				if n, err := strconv.ParseUint(g, 10, 31); err == nil {
					u.Groups = append(u.Groups, int(n))
				}
			}
		}
	}
	return u, true, nil
}

func clip(s string) string {
	if len(s) > 24 {
		return s[:24] + "..."
	}
	return s
}

// Do runs fn as the user behind sudo (see Invoker) on a thread of its own,
// or, without sudo, directly. fn must do its work on the calling goroutine:
// a goroutine it starts runs with memtrace's own credentials.
func Do(fn func() error) error {
	u, ok, err := Invoker()
	if err != nil {
		return err
	}
	if !ok {
		return fn()
	}
	return As(u, fn)
}

// As runs fn with u's credentials on an OS thread that no other goroutine
// ever runs on, and returns fn's error. If the credentials cannot be
// changed, fn does not run.
func As(u User, fn func() error) error {
	errc := make(chan error, 1)
	go asThread(u, fn, errc)
	return <-errc
}

func asThread(u User, fn func() error, errc chan<- error) {
	// Never unlocked once the credentials change: a goroutine that exits
	// locked takes its thread with it, so they end here. While locked,
	// the runtime also creates new threads from a clean template thread,
	// never by cloning this one.
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread is not discarded but parked for good, and
		// its credentials are what the kernel checks for the whole
		// process (kill, /proc): the user could signal memtrace. Hold
		// it while another goroutine does the work, which therefore
		// runs on some other thread.
		done := make(chan struct{})
		go func() {
			asThread(u, fn, errc)
			close(done)
		}()
		<-done
		runtime.UnlockOSThread()
		return
	}
	defer func() {
		if p := recover(); p != nil {
			errc <- fmt.Errorf("internal error while acting as user %d: %v", u.UID, p)
		}
	}()
	if err := become(u); err != nil {
		errc <- fmt.Errorf("switch to user %d (group %d): %w", u.UID, u.GID, err)
		return
	}
	errc <- fn()
}

// become changes the calling thread's credentials, and only its: the raw
// system calls, unlike syscall.Setuid and glibc, do not broadcast to the
// other threads. All three IDs change, so the thread keeps no capability
// and cannot take root back. (A side effect: the kernel marks the process
// not dumpable, as after any change of effective ID, so the user gets no
// ptrace or core dump of memtrace either.) Groups go first and the UID last, while the
// thread may still change the others.
func become(u User) error {
	groups := []uint32{uint32(u.GID)}
	for _, g := range u.Groups {
		if g != u.GID {
			groups = append(groups, uint32(g))
		}
	}
	if _, _, e := unix.RawSyscall(sysSetgroups, uintptr(len(groups)), uintptr(unsafe.Pointer(&groups[0])), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	runtime.KeepAlive(groups)
	if _, _, e := unix.RawSyscall(sysSetresgid, uintptr(u.GID), uintptr(u.GID), uintptr(u.GID)); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := unix.RawSyscall(sysSetresuid, uintptr(u.UID), uintptr(u.UID), uintptr(u.UID)); e != 0 {
		return fmt.Errorf("setresuid: %w", e)
	}
	// Checked on this thread, since an unexpected kernel or seccomp
	// policy must not leave the operation running as root.
	if unix.Geteuid() != u.UID || unix.Getegid() != u.GID {
		return errors.New("the thread's credentials did not change")
	}
	return nil
}

// OpenFile is os.OpenFile as the user behind sudo (see Do).
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	var f *os.File
	err := Do(func() error {
		var err error
		f, err = os.OpenFile(name, flag, perm)
		return err
	})
	return f, err
}

// Open is os.Open as the user behind sudo.
func Open(name string) (*os.File, error) { return OpenFile(name, os.O_RDONLY, 0) }

// MkdirAll is os.MkdirAll as the user behind sudo.
func MkdirAll(path string, perm os.FileMode) error {
	return Do(func() error { return os.MkdirAll(path, perm) })
}

// ReadFile is os.ReadFile as the user behind sudo.
func ReadFile(name string) ([]byte, error) {
	var b []byte
	err := Do(func() error {
		var err error
		b, err = os.ReadFile(name)
		return err
	})
	return b, err
}

// Env is env for a program run as u: HOME, USER and LOGNAME from u's
// passwd entry, as login and `sudo -i` set them. Under sudo they are
// root's (sudo resets them for its target user), and a program running
// as u would read root's configuration or fail to write its own. With no
// passwd entry for u, env is returned as it is: there is nothing truer
// to put there.
func Env(env []string, u User) []string {
	pw, err := user.LookupId(strconv.Itoa(u.UID))
	if err != nil || pw.Username == "" {
		return env
	}
	set := map[string]string{"HOME": pw.HomeDir, "USER": pw.Username, "LOGNAME": pw.Username}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range []string{"HOME", "USER", "LOGNAME"} {
		if set[k] != "" {
			out = append(out, k+"="+set[k])
		}
	}
	return out
}
