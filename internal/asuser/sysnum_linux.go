//go:build linux && !(arm || 386)

package asuser

import "golang.org/x/sys/unix"

const (
	sysSetgroups = unix.SYS_SETGROUPS
	sysSetresgid = unix.SYS_SETRESGID
	sysSetresuid = unix.SYS_SETRESUID
)
