//go:build linux && (arm || 386)

package asuser

import "golang.org/x/sys/unix"

// The plain numbers on these architectures are the 16-bit-ID calls of old
// kernels; the 32 variants take full user and group IDs.
const (
	sysSetgroups = unix.SYS_SETGROUPS32
	sysSetresgid = unix.SYS_SETRESGID32
	sysSetresuid = unix.SYS_SETRESUID32
)
