package fdtrace

import (
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/event/fdevent"
)

// syscallCalls maps arm64 syscall numbers to the calls traced. arm64 has
// only the generic table: no open, creat, pipe, dup2, eventfd, signalfd,
// epoll_create or inotify_init (libc implements them with the *at / 2 / 1
// / 4 variants).
var syscallCalls = map[uint32]fdevent.Call{
	unix.SYS_OPENAT: fdevent.CallOpenat, unix.SYS_OPENAT2: fdevent.CallOpenat2,
	unix.SYS_SOCKET: fdevent.CallSocket, unix.SYS_SOCKETPAIR: fdevent.CallSocketpair, unix.SYS_ACCEPT: fdevent.CallAccept,
	unix.SYS_ACCEPT4: fdevent.CallAccept4, unix.SYS_PIPE2: fdevent.CallPipe2,
	unix.SYS_DUP: fdevent.CallDup, unix.SYS_DUP3: fdevent.CallDup3, unix.SYS_FCNTL: fdevent.CallFcntl,
	unix.SYS_EVENTFD2: fdevent.CallEventfd2, unix.SYS_TIMERFD_CREATE: fdevent.CallTimerfdCreate,
	unix.SYS_SIGNALFD4: fdevent.CallSignalfd4, unix.SYS_MEMFD_CREATE: fdevent.CallMemfdCreate,
	unix.SYS_EPOLL_CREATE1: fdevent.CallEpollCreate1, unix.SYS_INOTIFY_INIT1: fdevent.CallInotifyInit1,
	unix.SYS_CLOSE: fdevent.CallClose, unix.SYS_CLOSE_RANGE: fdevent.CallCloseRange, unix.SYS_IOCTL: fdevent.CallIoctl,
}
