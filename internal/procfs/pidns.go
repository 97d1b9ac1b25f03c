package procfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// initPIDNSIno is the inode of the initial PID namespace
// (PROC_PID_INIT_INO, fixed by the kernel).
const initPIDNSIno = 0xEFFFFFFC

// ErrForeignProc is wrapped by PIDNamespace's error when /proc is not
// a view of memtrace's own PID namespace.
var ErrForeignProc = errors.New("/proc is not mounted for memtrace's PID namespace")

// PIDNS is memtrace's PID namespace as the kernel side takes it: the
// device (the kernel's own encoding, major<<20|minor) and inode of
// /proc/self/ns/pid, both 0 for the initial namespace. Every process id
// memtrace handles is a number of this namespace: its /proc, kill,
// perf_event_open and the eBPF side's records (bpf/mt_pidns.h) all use
// them.
type PIDNS struct {
	Dev, Ino uint64
}

// Initial reports whether memtrace runs in the initial PID namespace,
// whose ids are the kernel's own.
func (n PIDNS) Initial() bool { return n.Ino == 0 }

// PIDNamespace is memtrace's PID namespace, read once. It fails when
// /proc shows another namespace's processes (a container's /proc left
// mounted after unshare --pid, or the host's in a new namespace): every
// pid memtrace has would name another process there, so nothing is
// traced rather than the wrong process read.
var PIDNamespace = sync.OnceValues(pidNamespace)

func pidNamespace() (PIDNS, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return PIDNS{}, fmt.Errorf("read memtrace's PID namespace (/proc/self/ns/pid): %w: mount /proc", err)
	}
	// /proc/self names memtrace by its number in /proc's namespace.
	self, err := os.Readlink("/proc/self")
	if err != nil || self != strconv.Itoa(os.Getpid()) {
		return PIDNS{}, fmt.Errorf("%w (memtrace is process %d, /proc knows it by another number): mount a /proc of its namespace (unshare --pid --fork --mount-proc, or mount -t proc proc /proc in a mount namespace of its own)", ErrForeignProc, os.Getpid())
	}
	if st.Ino == initPIDNSIno {
		return PIDNS{}, nil
	}
	dev := uint64(st.Dev)
	return PIDNS{Dev: uint64(unix.Major(dev))<<20 | uint64(unix.Minor(dev)), Ino: st.Ino}, nil
}
