package fdtrace

import "golang.org/x/sys/unix"

// syscallCalls maps arm64 syscall numbers to the calls traced. arm64 has
// only the generic table: no open, creat, pipe, dup2, eventfd, signalfd,
// epoll_create or inotify_init (libc implements them with the *at / 2 / 1
// / 4 variants).
var syscallCalls = map[uint32]Call{
	unix.SYS_OPENAT: CallOpenat, unix.SYS_OPENAT2: CallOpenat2,
	unix.SYS_SOCKET: CallSocket, unix.SYS_SOCKETPAIR: CallSocketpair, unix.SYS_ACCEPT: CallAccept,
	unix.SYS_ACCEPT4: CallAccept4, unix.SYS_PIPE2: CallPipe2,
	unix.SYS_DUP: CallDup, unix.SYS_DUP3: CallDup3, unix.SYS_FCNTL: CallFcntl,
	unix.SYS_EVENTFD2: CallEventfd2, unix.SYS_TIMERFD_CREATE: CallTimerfdCreate,
	unix.SYS_SIGNALFD4: CallSignalfd4, unix.SYS_MEMFD_CREATE: CallMemfdCreate,
	unix.SYS_EPOLL_CREATE1: CallEpollCreate1, unix.SYS_INOTIFY_INIT1: CallInotifyInit1,
	unix.SYS_CLOSE: CallClose, unix.SYS_CLOSE_RANGE: CallCloseRange, unix.SYS_IOCTL: CallIoctl,
}
