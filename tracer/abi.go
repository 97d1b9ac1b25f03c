package tracer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
)

// Handler receives what Read decodes. Files and stacks arrive before the
// events that need them.
type Handler interface {
	Event(*Event)
	Stack(*Stack)
	File(*File)
}

// Event kinds, mirroring enum mt_kind in bpf/memtrace.h.
const (
	KindAlloc   = 1
	KindFree    = 2
	KindRealloc = 3 // free OldPtr (OldSize for mremap), then alloc Ptr
	KindExit    = 4
	KindFork    = 5 // TGID forked the process Ptr
	KindExec    = 6 // TGID exec'd
)

// Signatures, mirroring enum mt_sig: how the entry program finds the size.
const (
	sigSize0 = iota
	sigCalloc
	sigRealloc
	sigReallocarray
	sigAlignSize
	sigPosixMemalign
	sigStrdup
	sigMmap
	sigMremap
	sigNewAligned
	sigFreeChecked
)

// Event flags, mirroring MT_FLAG_* in bpf/memtrace.h.
const (
	FlagFile     = 0x1 // an mmap of a file
	FlagCallsite = 0x2 // OldPtr holds the PLT stub the program called
	FlagHeld     = 0x4 // the process is stopped until the agent sends SIGCONT
)

// eventSize is sizeof(struct mt_event), packedSize sizeof(struct
// mt_event_packed), threadSize sizeof(struct mt_thread), stackSize
// sizeof(struct mt_stack);
// abi_test.go checks them against the BTF of the compiled object.
const (
	eventSize  = 56
	packedSize = 24
	threadSize = 32
	ptrBits    = 48 // MT_PTR_BITS
	sizeBits   = 42 // MT_SIZE_BITS
	maxFrames  = 127
	frameSize  = 24
	stackSize  = 24 + maxFrames*frameSize
	pathParts  = 24
	partLen    = 64
	fileSize   = 16 + pathParts*partLen
	// remapSize is sizeof(struct mt_remap): the kernel side asks for a
	// process's mappings again.
	remapSize  = 16
	remapMagic = 0x70616d72 // MT_REMAP_MAGIC
	remapHold  = 1          // MT_REMAP_HOLD
)

// File names the file behind an inode that frames lie in, as the kernel
// saw it when a stack first used it.
type File struct {
	Ino       uint64
	Path      string
	Truncated bool // a component or the depth was cut: the path is unreliable
}

func (f *File) decode(b []byte) error {
	if len(b) < fileSize {
		return errShortRecord
	}
	le := binary.LittleEndian
	f.Ino = le.Uint64(b[0:])
	n := int(le.Uint32(b[8:]))
	f.Truncated = le.Uint32(b[12:]) != 0
	if n > pathParts {
		n = pathParts
	}
	// Components come leaf first.
	parts := make([]string, 0, n)
	for i := n - 1; i >= 0; i-- {
		c := b[16+i*partLen : 16+(i+1)*partLen]
		if j := bytes.IndexByte(c, 0); j >= 0 {
			c = c[:j]
		}
		parts = append(parts, string(c))
	}
	f.Path = "/" + strings.Join(parts, "/")
	return nil
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
type StopReason uint16

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

func (s *Stack) decode(b []byte) error {
	if len(b) < stackSize {
		return errShortRecord
	}
	le := binary.LittleEndian
	s.TS = le.Uint64(b[0:])
	s.ID = le.Uint64(b[8:])
	s.TGID = le.Uint32(b[16:])
	n := int(le.Uint16(b[20:]))
	s.Stop = StopReason(le.Uint16(b[22:]))
	if n > maxFrames {
		n = maxFrames
	}
	s.Frames = make([]Frame, n)
	for i := range s.Frames {
		o := 24 + i*frameSize
		s.Frames[i] = Frame{Addr: le.Uint64(b[o:]), FileOff: le.Uint64(b[o+8:]), Ino: le.Uint64(b[o+16:])}
	}
	return nil
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

var errShortRecord = errors.New("short ring-buffer record")

// decode reads struct mt_event or mt_event_packed by hand: binary.Read's
// reflection would cost more than the rest of the agent's per-event work.
func (e *Event) decode(b []byte) error {
	le := binary.LittleEndian
	if len(b) == packedSize {
		e.TS = le.Uint64(b[0:])
		po, st := le.Uint64(b[8:]), le.Uint64(b[16:])
		e.Ptr = po & (1<<ptrBits - 1)
		e.Op = uint8(po >> ptrBits)
		e.Kind = uint8(po>>56) & 7
		e.Flags = uint16(po >> 59)
		e.Size = st & (1<<sizeBits - 1)
		e.TID = uint32(st >> sizeBits)
		e.Stack, e.OldPtr, e.OldSize = 0, 0, 0
		return nil
	}
	if len(b) < eventSize {
		return errShortRecord
	}
	e.TS = le.Uint64(b[0:])
	e.Ptr = le.Uint64(b[8:])
	e.Size = le.Uint64(b[16:])
	e.TID = le.Uint32(b[24:])
	e.Kind = b[28]
	e.Op = b[29]
	e.Flags = le.Uint16(b[30:])
	e.Stack = le.Uint64(b[32:])
	e.OldPtr = le.Uint64(b[40:])
	e.OldSize = le.Uint64(b[48:])
	return nil
}

// threadInfo is what an mt_thread record says of a thread.
type threadInfo struct {
	tgid uint32
	comm [16]byte
}

func decodeThread(b []byte) (tid uint32, t threadInfo, err error) {
	if len(b) < threadSize {
		return 0, t, errShortRecord
	}
	le := binary.LittleEndian
	t.tgid = le.Uint32(b[0:])
	tid = le.Uint32(b[4:])
	copy(t.comm[:], b[8:24])
	return tid, t, nil
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

// cookie packs what the BPF programs need to know about a probe point.
func cookie(op uint8, sig int, before, after uint64) uint64 {
	const lim = 1<<24 - 1
	if before > lim || after > lim {
		before, after = 0, 0
	}
	return uint64(op) | uint64(sig)<<8 | before<<16 | after<<40
}
