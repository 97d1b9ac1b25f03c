package fdtrace

import "golang.org/x/sys/unix"

const sysDup2 = unix.SYS_DUP2
