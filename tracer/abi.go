package tracer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"

	"github.com/memtrace/memtrace/event"
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
	sigXallocx
)

// recType is a ring-buffer record's type, its byte 0 (enum mt_rec):
// records are decoded by it, never by their length.
type recType uint8

const (
	recPacked recType = 1 // MT_REC_PACKED: struct mt_event_packed
	recEvent  recType = 2 // MT_REC_EVENT: struct mt_event
	recThread recType = 3 // MT_REC_THREAD: struct mt_thread
	recStack  recType = 4 // MT_REC_STACK: struct mt_stack
	recFile   recType = 5 // MT_REC_FILE: struct mt_file
	recRemap  recType = 6 // MT_REC_REMAP: struct mt_remap
)

// The records' sizes and mt_event_packed's bit fields (MT_PK_* and
// MT_PTR_BITS, MT_SIZE_BITS); abi_test.go checks them against the BTF of
// the compiled object and packs events as the C side does.
const (
	eventSize  = 56
	packedSize = 24
	threadSize = 28
	maxFrames  = 127
	frameSize  = 24
	stackSize  = 24 + maxFrames*frameSize
	pathParts  = 24
	partLen    = 64
	fileSize   = 16 + pathParts*partLen
	// remapSize is sizeof(struct mt_remap): the kernel side asks for a
	// process's mappings again.
	remapSize = 12
	// backlogSize is sizeof(struct mt_backlog), whose event starts at
	// backlogEventOff; backlogMax is the queue's size, the most one
	// drain reads.
	backlogSize     = 88
	backlogEventOff = 32
	backlogMax      = 4096

	pkOpShift    = 8
	pkPtrShift   = 16
	ptrBits      = 48
	sizeBits     = 36
	pkKindShift  = 36
	pkKindBits   = 3
	pkFlagsShift = 39
	pkFlagsBits  = 3 // MT_PACKED_FLAGS is 1<<pkFlagsBits - 1
	pkTIDShift   = 42
)

// recordType returns the type byte of a ring-buffer record, 0 for an
// empty one.
func recordType(b []byte) recType {
	if len(b) == 0 {
		return 0
	}
	return recType(b[0])
}

func decodeFile(f *event.File, b []byte) error {
	if recordType(b) != recFile {
		return errRecordType
	}
	if len(b) < fileSize {
		return errShortRecord
	}
	le := binary.LittleEndian
	f.Truncated = b[1] != 0
	n := int(le.Uint16(b[2:]))
	f.Ino = le.Uint64(b[8:])
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

func decodeStack(s *event.Stack, b []byte) error {
	if recordType(b) != recStack {
		return errRecordType
	}
	if len(b) < stackSize {
		return errShortRecord
	}
	le := binary.LittleEndian
	s.Stop = event.StopReason(b[1])
	n := int(le.Uint16(b[2:]))
	s.TGID = le.Uint32(b[4:])
	s.TS = le.Uint64(b[8:])
	s.ID = le.Uint64(b[16:])
	if n > maxFrames {
		n = maxFrames
	}
	s.Frames = make([]event.Frame, n)
	for i := range s.Frames {
		o := 24 + i*frameSize
		s.Frames[i] = event.Frame{Addr: le.Uint64(b[o:]), FileOff: le.Uint64(b[o+8:]), Ino: le.Uint64(b[o+16:])}
	}
	return nil
}

var (
	errShortRecord = errors.New("short ring-buffer record")
	errRecordType  = errors.New("ring-buffer record of another type")
)

// decodeEvent reads struct mt_event or mt_event_packed, as its type byte
// says, by hand: binary.Read's reflection would cost more than the rest of
// the agent's per-event work.
func decodeEvent(e *event.Event, b []byte) error {
	le := binary.LittleEndian
	switch recordType(b) {
	case recPacked:
		if len(b) < packedSize {
			return errShortRecord
		}
		op, st := le.Uint64(b[0:]), le.Uint64(b[16:])
		e.Op = uint8(op >> pkOpShift)
		e.Ptr = op >> pkPtrShift
		e.TS = le.Uint64(b[8:])
		e.Size = st & (1<<sizeBits - 1)
		e.Kind = uint8(st>>pkKindShift) & (1<<pkKindBits - 1)
		e.Flags = uint16(st>>pkFlagsShift) & (1<<pkFlagsBits - 1)
		e.TID = uint32(st >> pkTIDShift)
		e.Stack, e.OldPtr, e.OldSize = 0, 0, 0
		return nil
	case recEvent:
	default:
		return errRecordType
	}
	if len(b) < eventSize {
		return errShortRecord
	}
	e.Kind = b[1]
	e.Op = b[2]
	e.Flags = uint16(b[3])
	e.TID = le.Uint32(b[4:])
	e.TS = le.Uint64(b[8:])
	e.Ptr = le.Uint64(b[16:])
	e.Size = le.Uint64(b[24:])
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
	if recordType(b) != recThread {
		return 0, t, errRecordType
	}
	if len(b) < threadSize {
		return 0, t, errShortRecord
	}
	le := binary.LittleEndian
	t.tgid = le.Uint32(b[4:])
	tid = le.Uint32(b[8:])
	copy(t.comm[:], b[12:28])
	return tid, t, nil
}

// remapRequest is what an mt_remap record asks: write pid's mappings
// again, and when held, resume it and delete holdKey from the hold map.
type remapRequest struct {
	pid     int
	held    bool
	holdKey uint32
}

func decodeRemap(b []byte) (remapRequest, error) {
	if recordType(b) != recRemap {
		return remapRequest{}, errRecordType
	}
	if len(b) < remapSize {
		return remapRequest{}, errShortRecord
	}
	le := binary.LittleEndian
	return remapRequest{pid: int(le.Uint32(b[4:])), held: b[1] != 0, holdKey: le.Uint32(b[8:])}, nil
}

// The attach cookie's bit ranges (MT_CK_* in bpf/memtrace.h, which
// describes each); abi_test.go decodes cookies made here with the C
// macros.
const (
	ckOpShift         = 0
	ckOpBits          = 8
	ckSigShift        = 8
	ckSigBits         = 8
	ckFreeDeltaShift  = 16 // MT_SIG_FREE_CHECKED only
	ckFreeDeltaBits   = 8
	ckFreeBeforeShift = 24
	ckFreeBeforeBits  = 20
	ckFreeAfterShift  = 44
	ckFreeAfterBits   = 20
	ckBeforeShift     = 16 // any other signature
	ckBeforeBits      = 24
	ckAfterShift      = 40
	ckAfterBits       = 24
	ckAliasShift      = 16 // any signature but the mmap family's and MT_SIG_FREE_CHECKED
)

// retCookie is a classic uretprobe link's cookie (mt_return): the pid
// the link is made for, which the program compares with the current
// process's, since kernels without the fix of 2024 run every uretprobe
// link of a function at its return in any process one of them traces.
func retCookie(pid int) uint64 { return uint64(uint32(pid)) }

// cookie is the one encoder of the attach cookie: what the BPF programs
// need to know about a probe point. For MT_SIG_FREE_CHECKED, delta is the
// probe's offset into free (the caller checks that it fits) and before
// and after are clamped, which narrows the test (a far internal call is
// logged); for any other signature delta is unused, and before and after
// are dropped both when either does not fit, which turns the test off.
func cookie(op uint8, sig int, delta, before, after uint64) uint64 {
	c := uint64(op)<<ckOpShift | (uint64(sig)&(1<<ckSigBits-1))<<ckSigShift
	if sig == sigFreeChecked {
		return c | min(delta, 1<<ckFreeDeltaBits-1)<<ckFreeDeltaShift |
			min(before, 1<<ckFreeBeforeBits-1)<<ckFreeBeforeShift | min(after, 1<<ckFreeAfterBits-1)<<ckFreeAfterShift
	}
	if before >= 1<<ckBeforeBits || after >= 1<<ckAfterBits {
		before, after = 0, 0
	}
	return c | before<<ckBeforeShift | after<<ckAfterShift
}
