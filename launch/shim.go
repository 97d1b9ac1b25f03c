package launch

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/memtrace/memtrace/runner"
)

// ShimArg, as os.Args[1], marks memtrace re-executed as the launcher shim:
// it waits on fd 3 until the probes are attached, drops root if asked, and
// execs PROG, which keeps the PID the probes were attached to. The
// executable's main calls RunShim then, and nothing else.
const ShimArg = "__memtrace_exec_shim"

// shimCredEnv carries "uid:gid:g1,g2" of the user behind sudo to the shim.
const shimCredEnv = "MEMTRACE_SHIM_CRED"

// RunShim is the shim's whole life; it does not return. The probes are
// bound to the shim's thread-group leader task, and an exec from any other
// thread would hand the PID to a different task and leave the probes on a
// dead one: the caller must run it on the main thread, which an init
// function's runtime.LockOSThread in package main ensures (see
// cmd/memtrace).
func RunShim() {
	if len(os.Args) < 4 {
		os.Exit(127)
	}
	path, argv := os.Args[2], os.Args[3:]
	start := os.NewFile(3, "memtrace-start")
	// Running Go code means the shim's own exec is over: memtrace may now
	// make this PID a target without the kernel side holding that exec.
	ready := os.NewFile(4, "memtrace-ready")
	if _, err := ready.Write([]byte{1}); err != nil {
		os.Exit(127)
	}
	ready.Close()
	var b [1]byte
	if n, _ := start.Read(b[:]); n != 1 {
		// memtrace gave up (or died) before attaching: do not run
		// PROG untraced behind the user's back.
		os.Exit(127)
	}
	// Closed by the exec, not here: a close(2) now would be logged as
	// the program's under --track fd.
	syscall.CloseOnExec(3)
	env := os.Environ()
	if cred := os.Getenv(shimCredEnv); cred != "" {
		if err := dropTo(cred); err != nil {
			fmt.Fprintf(os.Stderr, "memtrace: drop root before running %s: %v\n", argv[0], err)
			os.Exit(126)
		}
		env = withoutEnv(env, shimCredEnv)
	}
	err := syscall.Exec(path, argv, env)
	fmt.Fprintf(os.Stderr, "memtrace: run %s: %v\n", path, err)
	os.Exit(execStatus(err))
}

func withoutEnv(env []string, key string) []string {
	out := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func dropTo(cred string) error {
	uid, gid, groups, err := runner.ParseCred(cred)
	if err != nil {
		return err
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("setgid %d: %w", gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	return nil
}

// execStatus is a shell's status for a failed exec: 127 for a file not
// found, 126 for one found but not executable (a format the kernel does
// not run, no permission).
func execStatus(err error) int {
	if errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EISDIR) {
		return 126
	}
	return 127
}
