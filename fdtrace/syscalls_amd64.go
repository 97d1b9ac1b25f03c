package fdtrace

import (
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/event/fdevent"
)

// syscallCalls maps x86-64 syscall numbers to the calls traced.
var syscallCalls = map[uint32]fdevent.Call{
	unix.SYS_OPEN: fdevent.CallOpen, unix.SYS_OPENAT: fdevent.CallOpenat, unix.SYS_OPENAT2: fdevent.CallOpenat2, unix.SYS_CREAT: fdevent.CallCreat,
	unix.SYS_SOCKET: fdevent.CallSocket, unix.SYS_SOCKETPAIR: fdevent.CallSocketpair, unix.SYS_ACCEPT: fdevent.CallAccept,
	unix.SYS_ACCEPT4: fdevent.CallAccept4, unix.SYS_PIPE: fdevent.CallPipe, unix.SYS_PIPE2: fdevent.CallPipe2,
	unix.SYS_DUP: fdevent.CallDup, unix.SYS_DUP2: fdevent.CallDup2, unix.SYS_DUP3: fdevent.CallDup3, unix.SYS_FCNTL: fdevent.CallFcntl,
	unix.SYS_EVENTFD: fdevent.CallEventfd, unix.SYS_EVENTFD2: fdevent.CallEventfd2, unix.SYS_TIMERFD_CREATE: fdevent.CallTimerfdCreate,
	unix.SYS_SIGNALFD: fdevent.CallSignalfd, unix.SYS_SIGNALFD4: fdevent.CallSignalfd4, unix.SYS_MEMFD_CREATE: fdevent.CallMemfdCreate,
	unix.SYS_EPOLL_CREATE: fdevent.CallEpollCreate, unix.SYS_EPOLL_CREATE1: fdevent.CallEpollCreate1,
	unix.SYS_INOTIFY_INIT: fdevent.CallInotifyInit, unix.SYS_INOTIFY_INIT1: fdevent.CallInotifyInit1,
	unix.SYS_CLOSE: fdevent.CallClose, unix.SYS_CLOSE_RANGE: fdevent.CallCloseRange, unix.SYS_IOCTL: fdevent.CallIoctl,
}
