package event

// Handler receives decoded captures. Files and stacks arrive before the
// events that need them.
type Handler interface {
	Event(*Event)
	Stack(*Stack)
	File(*File)
}

// Event kinds, mirroring enum mt_kind in bpf/memtrace.h. A realloc comes
// as two events, the old block's free then the new block's alloc (the
// alloc's Op says which call), from both captures: the kernel side's
// MT_EV_REALLOC is its own state and never sent.
const (
	KindAlloc = 1
	KindFree  = 2
	KindExit  = 4
	KindFork  = 5 // TGID forked the process Ptr
	KindExec  = 6 // TGID exec'd
)

// Event flags, mirroring MT_FLAG_* in bpf/memtrace.h.
const (
	FlagFile     = 0x1 // an mmap of a file
	FlagCallsite = 0x2 // OldPtr holds the PLT stub the program called
	FlagHeld     = 0x4 // the process is stopped until the agent sends SIGCONT
	// FlagUnfollowed marks a KindFork whose child runs untraced (no
	// --follow): the log says so instead of leaving it out unsaid.
	FlagUnfollowed = 0x8
)

// File names the file behind an inode that frames lie in, as the kernel
// saw it when a stack first used it.
type File struct {
	Ino       uint64
	Path      string
	Truncated bool // a component or the depth was cut: the path is unreliable
}

// InoUnknown in a Frame means the VMA could not be read when the stack was
// captured: resolve Addr against the process's recorded mappings instead.
const InoUnknown = ^uint64(0)

// Frame is one frame of a captured stack, located in its file when it was
// captured. Ino is 0 for anonymous memory.
type Frame struct {
	Addr, FileOff, Ino uint64
}

// Stack is a stack the kernel side sends once; events refer to it by ID.
type Stack struct {
	TS     uint64
	ID     uint64
	TGID   uint32
	Stop   StopReason
	Frames []Frame
}

// StopReason says why the kernel side's stack walk ended (enum mt_stop).
type StopReason uint8

const (
	// StopFPWalk: the kernel's frame-pointer walk took the stack, which
	// does not say why it ended; the frames must tell.
	StopFPWalk StopReason = 0
	StopEnd    StopReason = 1 // the outermost frame: complete
	StopDepth  StopReason = 2 // the stack depth asked for
	// StopNoInfo: a PC with no usable unwind rule (no table, an
	// unsupported rule, a lost frame pointer) and no frame pointer.
	StopNoInfo StopReason = 3
	// StopBadRead: a stack read failed, or gave no frame.
	StopBadRead StopReason = 4
	// StopFP: the frame-pointer fallback was used and then broke.
	StopFP StopReason = 5
)

// Truncation is the reason the log gives for a stack that stopped
// short, or "" for a complete one (and for StopFPWalk, which says
// nothing).
func (r StopReason) Truncation() string {
	switch r {
	case StopEnd, StopFPWalk:
		return ""
	case StopDepth:
		return "depth"
	case StopNoInfo:
		return "no-unwind-info"
	case StopBadRead:
		return "bad-read"
	case StopFP:
		return "fp"
	}
	return "bad-read"
}

// Event is one decoded ring-buffer record. TGID and Comm come from the
// thread record that preceded it.
type Event struct {
	TS      uint64 // CLOCK_MONOTONIC nanoseconds
	Ptr     uint64
	Size    uint64
	OldPtr  uint64
	OldSize uint64
	Stack   uint64 // 0: none
	TGID    uint32
	TID     uint32
	Kind    uint8
	Op      uint8 // a logfmt.Op value
	Flags   uint16
	Comm    [16]byte
}

// CommString returns the thread name up to its NUL.
func (e *Event) CommString() string {
	for i, c := range e.Comm {
		if c == 0 {
			return string(e.Comm[:i])
		}
	}
	return string(e.Comm[:])
}
