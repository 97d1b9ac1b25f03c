package launch

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/internal/procfs"
)

// checkAttachable says, before any probe, why pid cannot be traced: gone, a
// zombie, a kernel thread, or maps memtrace may not read.
func checkAttachable(pid int) error {
	st, err := procfs.ReadStat(pid)
	if errors.Is(err, procfs.ErrBadStat) {
		return fmt.Errorf("process %d: unreadable /proc/%d/stat", pid, pid)
	}
	if err != nil {
		return fmt.Errorf("no process with PID %d: check it with ps -p %d", pid, pid)
	}
	switch {
	case st.Gone():
		return fmt.Errorf("process %d is a zombie: it has exited and only waits for its parent to reap it; nothing to trace", pid)
	case st.Flags&procfs.PFKthread != 0:
		return fmt.Errorf("process %d is a kernel thread: it has no user-space allocations to trace", pid)
	}
	_, err = procfs.ReadMaps(pid)
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("read the mappings of process %d: %w: %s", pid, os.ErrPermission, permissionCause(pid, readFacts(pid)))
	}
	if err != nil && !errors.Is(err, procfs.ErrBadMaps) {
		return fmt.Errorf("read the mappings of process %d: %w", pid, err)
	}
	return nil
}

// attachFacts are what decides whether the kernel lets memtrace read a
// process's memory map (ptrace_may_access, PTRACE_MODE_READ).
type attachFacts struct {
	euid, targetUID int
	// caps is memtrace's effective capability set, targetCaps the
	// target's permitted one; ok false when its status was unreadable.
	caps, targetCaps uint64
	capsKnown        bool
	// ptraceScope is kernel.yama.ptrace_scope, -1 without Yama.
	ptraceScope int
}

const capSysPtrace = 19

func readFacts(pid int) attachFacts {
	f := attachFacts{euid: os.Geteuid(), targetUID: -1, ptraceScope: -1}
	self, serr := procfs.ReadStatus(os.Getpid())
	target, terr := procfs.ReadStatus(pid)
	if serr == nil && terr == nil {
		f.caps, f.targetCaps = self.CapEff, target.CapPrm
		f.capsKnown = self.CapsKnown && target.CapsKnown
	}
	if terr == nil {
		f.targetUID = target.UID
	}
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			f.ptraceScope = n
		}
	}
	return f
}

// permissionCause names why the kernel refused memtrace the mappings of
// pid, from the conditions its ptrace access check tests, in the order it
// tests them: the first that holds is the cause.
func permissionCause(pid int, f attachFacts) string {
	hasPtrace := f.capsKnown && f.caps&(1<<capSysPtrace) != 0
	switch {
	case f.ptraceScope == 3:
		return "kernel.yama.ptrace_scope is 3, which lets no process attach to another, root included (it can be lowered only by a reboot)"
	case f.euid != 0 && f.targetUID != f.euid:
		return fmt.Sprintf("run memtrace as root (sudo memtrace -p %d)", pid)
	case f.ptraceScope == 2 && !hasPtrace:
		return "kernel.yama.ptrace_scope is 2: only a process with CAP_SYS_PTRACE may attach: give memtrace that capability"
	case f.euid != 0 && f.ptraceScope == 1:
		return fmt.Sprintf("kernel.yama.ptrace_scope is 1: only a parent may attach to its children; run memtrace as root (sudo memtrace -p %d) or start the program under memtrace (memtrace -- PROG)", pid)
	case f.capsKnown && !hasPtrace:
		return "memtrace runs without CAP_SYS_PTRACE (a container started without --cap-add=SYS_PTRACE?): give it that capability"
	case f.capsKnown && f.targetCaps&^f.caps != 0:
		what := fmt.Sprintf("process %d", pid)
		if pid == 1 {
			what = "process 1 (this PID namespace's init: the container's or machine's own)"
		}
		return fmt.Sprintf("%s holds capabilities memtrace lacks (%s): memtrace runs with a reduced capability set (a sandbox or a container), and the kernel refuses it a more privileged process; run it with the full set", what, capNames(f.targetCaps&^f.caps))
	case pid == 1:
		return "process 1 is this PID namespace's init (the container's or machine's own), which a security module or its own prctl(PR_SET_DUMPABLE, 0) keeps from being read"
	}
	return "the process made itself undumpable (prctl PR_SET_DUMPABLE 0, a setuid program) or a security module refuses it"
}

var capName = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
	"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
	"CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"}

func capNames(set uint64) string {
	var out []string
	for set != 0 {
		i := bits.TrailingZeros64(set)
		set &^= 1 << i
		if i < len(capName) {
			out = append(out, capName[i])
		} else {
			out = append(out, "capability "+strconv.Itoa(i))
		}
	}
	return strings.Join(out, ", ")
}
