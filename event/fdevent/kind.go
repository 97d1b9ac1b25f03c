package fdevent

// Kind is what a descriptor refers to.
type Kind uint8

const (
	KindUnknown Kind = iota // opened before tracing, or by a call not traced
	KindFile
	KindSocket
	KindPipe
	KindEventfd
	KindTimerfd
	KindSignalfd
	KindMemfd
	KindEpoll
	KindInotify
	KindDmabuf // a dma-heap buffer
	KindION    // an ION buffer (4.12+ layout)
)

var kindNames = [...]string{"unknown", "file", "socket", "pipe", "eventfd", "timerfd", "signalfd",
	"memfd", "epoll", "inotify", "dmabuf", "ion"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// KindOf is the kind of descriptor a creating call makes (dups take their
// source's).
func KindOf(c Call) Kind {
	switch c {
	case CallOpen, CallOpenat, CallOpenat2, CallCreat:
		return KindFile
	case CallSocket, CallSocketpair, CallAccept, CallAccept4:
		return KindSocket
	case CallPipe, CallPipe2:
		return KindPipe
	case CallEventfd, CallEventfd2:
		return KindEventfd
	case CallTimerfdCreate:
		return KindTimerfd
	case CallSignalfd, CallSignalfd4:
		return KindSignalfd
	case CallMemfdCreate:
		return KindMemfd
	case CallEpollCreate, CallEpollCreate1:
		return KindEpoll
	case CallInotifyInit, CallInotifyInit1:
		return KindInotify
	}
	return KindUnknown
}

// Close-on-exec bits. O_CLOEXEC is the same on x86-64 and arm64, and
// SOCK_CLOEXEC, EFD_CLOEXEC, TFD_CLOEXEC, SFD_CLOEXEC, EPOLL_CLOEXEC and
// IN_CLOEXEC equal it; memfd_create has its own.
const (
	oCloexec      = 0x80000
	mfdCloexec    = 0x1
	fDupfdCloexec = 1030
)

// Cloexec says whether a new descriptor closes on exec, from the call and
// its flags as the kernel side sends them.
func Cloexec(c Call, flags uint64) bool {
	switch c {
	case CallMemfdCreate:
		return flags&mfdCloexec != 0
	case CallFcntl:
		return flags == fDupfdCloexec
	case CallDup, CallDup2, CallCreat, CallPipe, CallAccept, CallEventfd, CallSignalfd,
		CallEpollCreate, CallInotifyInit:
		return false
	}
	return flags&oCloexec != 0
}
