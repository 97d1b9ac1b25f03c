package fdevent

import "bytes"

// Call is the syscall behind an event, mirroring enum fd_call in
// bpf/fdtrack.h.
type Call uint8

const (
	CallNone Call = iota
	CallOpen
	CallOpenat
	CallOpenat2
	CallCreat
	CallSocket
	CallSocketpair
	CallAccept
	CallAccept4
	CallPipe
	CallPipe2
	CallDup
	CallDup2
	CallDup3
	CallFcntl
	CallEventfd
	CallEventfd2
	CallTimerfdCreate
	CallSignalfd
	CallSignalfd4
	CallMemfdCreate
	CallEpollCreate
	CallEpollCreate1
	CallInotifyInit
	CallInotifyInit1
	CallClose
	CallCloseRange
	CallIoctl
	CallMax // one past the last syscall (FD_CALL_MAX)

	// Not syscalls that the kernel side sees: closes that the Table
	// infers.
	CallExecve Call = 100 // a close-on-exec descriptor closed by Table.Exec
)

var callNames = [...]string{
	CallNone: "none", CallOpen: "open", CallOpenat: "openat", CallOpenat2: "openat2", CallCreat: "creat",
	CallSocket: "socket", CallSocketpair: "socketpair", CallAccept: "accept", CallAccept4: "accept4",
	CallPipe: "pipe", CallPipe2: "pipe2", CallDup: "dup", CallDup2: "dup2", CallDup3: "dup3",
	CallFcntl: "fcntl", CallEventfd: "eventfd", CallEventfd2: "eventfd2", CallTimerfdCreate: "timerfd_create",
	CallSignalfd: "signalfd", CallSignalfd4: "signalfd4", CallMemfdCreate: "memfd_create",
	CallEpollCreate: "epoll_create", CallEpollCreate1: "epoll_create1", CallInotifyInit: "inotify_init",
	CallInotifyInit1: "inotify_init1", CallClose: "close", CallCloseRange: "close_range", CallIoctl: "ioctl",
}

// String returns the syscall's name.
func (c Call) String() string {
	if c == CallExecve {
		return "execve"
	}
	if int(c) < len(callNames) && callNames[c] != "" {
		return callNames[c]
	}
	return "unknown"
}

// Type says what an event is. The first ones mirror enum fd_type; the
// releases are inferred by the Table.
type Type uint8

const (
	TypeOpen           Type = 1 // FD; FD2 = the pair's other end or the dup source
	TypeClose          Type = 2 // FD
	TypeCloseRange     Type = 3 // FD..FD2, Flags; the Table turns it into closes
	TypeDmabufAlloc    Type = 4 // FD = buffer, FD2 = heap device, Size, Path = heap, Flags = fd_flags, Extra = heap_flags
	TypeIONAlloc       Type = 5 // FD = buffer, FD2 = /dev/ion, Size, Aux = heap_id_mask, Flags
	TypeIONLegacyAlloc Type = 6 // FD = handle, FD2 = /dev/ion, Size, Aux, Flags, Extra = align
	TypeIONFree        Type = 7 // FD = handle, FD2 = /dev/ion
	TypeDmabufRelease  Type = 16
	TypeIONRelease     Type = 17 // Legacy: FD = handle, FD2 = the device fd
)

// Event is one record from the kernel or one the Table emits.
type Event struct {
	TS        uint64 // CLOCK_MONOTONIC ns (a close's at its entry)
	Size      uint64 // buffer bytes
	Flags     uint64 // the call's flags argument (see Type)
	Extra     uint64
	TGID, TID uint32
	FD, FD2   int32
	Aux       uint32 // socket domain; ION heap_id_mask
	Call      Call
	Type      Type
	Truncated bool // Path was cut at 255 bytes
	Comm      [16]byte
	Path      string // the path opened, a memfd's name, or a device's name (the heap)
	// Stack is the id of the user stack at the call (--stack-depth), a
	// event.Stack sent through the allocation tracer's ring as an
	// allocation's is; frame 0 lies in the system call's libc wrapper.
	// 0: none.
	Stack uint64

	// Set by the Table.
	Kind   Kind   // what the descriptor is
	Legacy bool   // an ION release of a legacy handle: FD is the handle, FD2 the device
	Buf    uint64 // the buffer's number in this session (allocs and releases)
	Known  bool   // a close of a descriptor the Table saw opened
}

// CommString returns the thread name up to its NUL.
func (e *Event) CommString() string {
	if i := bytes.IndexByte(e.Comm[:], 0); i >= 0 {
		return string(e.Comm[:i])
	}
	return string(e.Comm[:])
}
