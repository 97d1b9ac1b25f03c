package launch

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// pfKthread is PF_KTHREAD in /proc/PID/stat's flags (include/linux/sched.h).
const pfKthread = 0x00200000

// checkAttachable says, before any probe, why pid cannot be traced: gone, a
// zombie, a kernel thread, or maps memtrace may not read.
func checkAttachable(pid int) error {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return fmt.Errorf("no process with PID %d: check it with ps -p %d", pid, pid)
	}
	state, flags, ok := parseStat(string(b))
	if !ok {
		return fmt.Errorf("process %d: unreadable /proc/%d/stat", pid, pid)
	}
	switch {
	case state == 'Z' || state == 'X':
		return fmt.Errorf("process %d is a zombie: it has exited and only waits for its parent to reap it; nothing to trace", pid)
	case flags&pfKthread != 0:
		return fmt.Errorf("process %d is a kernel thread: it has no user-space allocations to trace", pid)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("read the mappings of process %d: %w: run memtrace as root (sudo memtrace -p %d)", pid, os.ErrPermission, pid)
	}
	if err != nil {
		return fmt.Errorf("read the mappings of process %d: %w", pid, err)
	}
	f.Close()
	return nil
}

// parseStat returns the state and flags fields of a /proc/PID/stat line,
// whose comm may hold spaces and parentheses.
func parseStat(s string) (byte, uint64, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	// state ppid pgrp session tty_nr tpgid flags
	if len(f) < 7 || len(f[0]) != 1 {
		return 0, 0, false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], flags, true
}
