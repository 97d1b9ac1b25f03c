package fdtrace

import "golang.org/x/sys/unix"

// syscallCalls maps x86-64 syscall numbers to the calls traced.
var syscallCalls = map[uint32]Call{
	unix.SYS_OPEN: CallOpen, unix.SYS_OPENAT: CallOpenat, unix.SYS_OPENAT2: CallOpenat2, unix.SYS_CREAT: CallCreat,
	unix.SYS_SOCKET: CallSocket, unix.SYS_SOCKETPAIR: CallSocketpair, unix.SYS_ACCEPT: CallAccept,
	unix.SYS_ACCEPT4: CallAccept4, unix.SYS_PIPE: CallPipe, unix.SYS_PIPE2: CallPipe2,
	unix.SYS_DUP: CallDup, unix.SYS_DUP2: CallDup2, unix.SYS_DUP3: CallDup3, unix.SYS_FCNTL: CallFcntl,
	unix.SYS_EVENTFD: CallEventfd, unix.SYS_EVENTFD2: CallEventfd2, unix.SYS_TIMERFD_CREATE: CallTimerfdCreate,
	unix.SYS_SIGNALFD: CallSignalfd, unix.SYS_SIGNALFD4: CallSignalfd4, unix.SYS_MEMFD_CREATE: CallMemfdCreate,
	unix.SYS_EPOLL_CREATE: CallEpollCreate, unix.SYS_EPOLL_CREATE1: CallEpollCreate1,
	unix.SYS_INOTIFY_INIT: CallInotifyInit, unix.SYS_INOTIFY_INIT1: CallInotifyInit1,
	unix.SYS_CLOSE: CallClose, unix.SYS_CLOSE_RANGE: CallCloseRange, unix.SYS_IOCTL: CallIoctl,
}
