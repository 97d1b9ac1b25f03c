package launch

import (
	"errors"
	"fmt"
	"os"

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
		return fmt.Errorf("read the mappings of process %d: %w: run memtrace as root (sudo memtrace -p %d)", pid, os.ErrPermission, pid)
	}
	if err != nil && !errors.Is(err, procfs.ErrBadMaps) {
		return fmt.Errorf("read the mappings of process %d: %w", pid, err)
	}
	return nil
}
