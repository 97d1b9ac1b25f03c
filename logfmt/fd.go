package logfmt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Meta words of the descriptor and buffer lines (WordFD is in scan.go).
// See docs/fd.md for the whole vocabulary.
const (
	WordDmabuf = "dmabuf" // event=alloc|release: dma-heap buffers
	WordION    = "ion"    // event=alloc|release|free: ION buffers
)

// Values of event= on fd, dmabuf and ion lines.
const (
	FDOpen       = "open"        // fd: a new descriptor
	FDClose      = "close"       // fd: a descriptor closed
	FDCloseRange = "close_range" // fd: a range not expanded (only from a raw tracer event)
	FDLeak       = "leak"        // fd: still open when its process exited (summary; ts/tid: when and by whom opened)
	BufAlloc     = "alloc"       // dmabuf, ion: a buffer allocated
	BufRelease   = "release"     // dmabuf, ion: its last descriptor (or handle) is gone
	BufFree      = "free"        // ion: a legacy handle freed (only from a raw tracer event)
	FDUnknown    = "unknown"     // a tracer record of a type this version does not know (type=)
)

// FDRecord is one fd, dmabuf or ion line, to write (AppendFD) or read back
// (ParseFD). Numbers absent from the line are -1 (descriptors, handles) or
// 0; start a record to write from NewFDRecord, which sets the -1s.
type FDRecord struct {
	Word     string // WordFD, WordDmabuf or WordION
	Event    string
	TID, PID int64
	TS       uint64 // microseconds since tracing started
	Name     string
	FD       int64  // the descriptor (fd=), or -1
	Handle   int64  // legacy ION handle (handle=), or -1
	Call     string // the syscall (call=)
	Kind     string // fd lines: file, socket, pipe, ... (kind=)
	Path     string
	Old      int64 // dup source (old=), or -1
	Peer     int64 // the other end of a pipe or socketpair (peer=), or -1
	Dev      int64 // the heap or ION device descriptor (dev=), or -1
	Cloexec  bool
	Size     uint64
	Heap     string // dma-heap name (heap=)
	HeapMask uint64 // ION heap_id_mask (heap_mask=)
	Buf      uint64 // the buffer's number in the session (buf=)
	First    int64  // close_range first=, last=
	Last     int64

	// Written by AppendFD and read by ParseFD, which leaves them zero
	// when their value does not parse (readers before them ignored the
	// keys, and still accept every such line).
	Trunc     bool   // the path was cut at the tracer's limit (trunc=1)
	Domain    string // socket, socketpair: inet6, unix, ... or the number
	Flags     uint64 // flags=0x..: open flags (only when not 0), buffer flags
	HeapFlags uint64 // dmabuf heap_flags=
	Align     uint64 // legacy ION align=
	Legacy    bool   // legacy ION allocation layout (layout=legacy)
	Type      uint64 // the record type of an FDUnknown event (type=)
	Stack     string // "open < main < ...", with --stack-depth
}

// NewFDRecord returns a record of word and event with no descriptor,
// handle or range set.
func NewFDRecord(word, event string) FDRecord {
	return FDRecord{Word: word, Event: event, FD: -1, Handle: -1, Old: -1, Peer: -1, Dev: -1, First: -1, Last: -1}
}

// AppendFD appends r's line to b. Every line starts "WORD event= tid= pid=
// ts= name=" (a leak line has no name=: the thread that opened the
// descriptor may be long gone); which fields follow, in which order, is
// decided by word and event (docs/fd.md has the table). stack= comes last.
func AppendFD(b []byte, r *FDRecord) []byte {
	b = appendWord(b, r.Word)
	b = appendStr(b, "event", r.Event)
	b = appendInt(b, "tid", r.TID)
	b = appendInt(b, "pid", r.PID)
	b = appendUint(b, "ts", r.TS)
	leak := r.Word == WordFD && r.Event == FDLeak
	if !leak {
		b = appendStr(b, "name", r.Name)
	}
	switch {
	case r.Word == WordFD && (r.Event == FDOpen || r.Event == FDClose || leak):
		b = appendInt(b, "fd", r.FD)
		b = appendStr(b, "call", r.Call)
		b = appendStr(b, "kind", r.Kind)
		if r.Path != "" {
			b = appendStr(b, "path", r.Path)
			if r.Trunc {
				b = append(b, " trunc=1"...)
			}
		}
		switch r.Event {
		case FDOpen:
			if r.Peer >= 0 {
				b = appendInt(b, "peer", r.Peer)
			}
			if r.Old >= 0 {
				b = appendInt(b, "old", r.Old)
			}
			if r.Dev >= 0 {
				b = appendInt(b, "dev", r.Dev)
			}
			if r.Domain != "" {
				b = appendStr(b, "domain", r.Domain)
			}
			if r.Flags != 0 {
				b = appendHex(b, "flags", r.Flags)
			}
			if r.Cloexec {
				b = append(b, " cloexec=1"...)
			}
		case FDLeak:
			if r.Cloexec {
				b = append(b, " cloexec=1"...)
			}
			if r.Buf != 0 {
				b = appendUint(b, "buf", r.Buf)
				b = appendUint(b, "size", r.Size)
			}
		}
	case r.Word == WordFD && r.Event == FDCloseRange:
		b = appendInt(b, "first", r.First)
		b = appendInt(b, "last", r.Last)
		if r.Flags != 0 {
			b = appendHex(b, "flags", r.Flags)
		}
	case r.Word == WordDmabuf && r.Event == BufAlloc:
		b = appendInt(b, "fd", r.FD)
		b = appendUint(b, "size", r.Size)
		b = appendStr(b, "heap", r.Heap)
		b = appendInt(b, "dev", r.Dev)
		b = appendHex(b, "flags", r.Flags)
		b = appendHex(b, "heap_flags", r.HeapFlags)
		b = appendUint(b, "buf", r.Buf)
	case r.Word == WordDmabuf && r.Event == BufRelease:
		b = appendInt(b, "fd", r.FD)
		b = appendUint(b, "size", r.Size)
		b = appendStr(b, "heap", r.Heap)
		b = appendUint(b, "buf", r.Buf)
		b = appendStr(b, "call", r.Call)
	case r.Word == WordION && r.Event == BufAlloc:
		if r.Handle >= 0 {
			b = appendInt(b, "handle", r.Handle)
		} else {
			b = appendInt(b, "fd", r.FD)
		}
		b = appendUint(b, "size", r.Size)
		b = appendHex(b, "heap_mask", r.HeapMask)
		b = appendHex(b, "flags", r.Flags)
		b = appendInt(b, "dev", r.Dev)
		if r.Legacy {
			b = appendUint(b, "align", r.Align)
			b = append(b, " layout=legacy"...)
		}
		b = appendUint(b, "buf", r.Buf)
	case r.Word == WordION && r.Event == BufRelease:
		if r.Handle >= 0 {
			b = appendInt(b, "handle", r.Handle)
			b = appendInt(b, "dev", r.Dev)
		} else {
			b = appendInt(b, "fd", r.FD)
		}
		b = appendUint(b, "size", r.Size)
		b = appendHex(b, "heap_mask", r.HeapMask)
		b = appendUint(b, "buf", r.Buf)
		b = appendStr(b, "call", r.Call)
	case r.Word == WordION && r.Event == BufFree:
		b = appendInt(b, "handle", r.Handle)
		b = appendInt(b, "dev", r.Dev)
	default:
		b = appendUint(b, "type", r.Type)
	}
	if r.Stack != "" {
		b = appendStr(b, "stack", r.Stack)
	}
	return append(b, '\n')
}

// ParseFD reads the fields of an fd, dmabuf or ion meta line (word and the
// rest as Line.Parse splits them). Unknown keys are ignored so that later
// versions can add some; a missing event, tid, pid or ts, or a number that
// does not parse, is an error.
func ParseFD(word, rest []byte) (FDRecord, error) {
	r := NewFDRecord(string(word), "")
	switch r.Word {
	case WordFD, WordDmabuf, WordION:
	default:
		return r, fmt.Errorf("%q is not an fd, dmabuf or ion line", r.Word)
	}
	var have uint8
	for _, kv := range Fields(rest) {
		var err error
		v := kv.Value
		switch kv.Key {
		case "event":
			r.Event = v
			have |= 1
		case "tid":
			r.TID, err = strconv.ParseInt(v, 10, 64)
			have |= 2
		case "pid":
			r.PID, err = strconv.ParseInt(v, 10, 64)
			have |= 4
		case "ts":
			r.TS, err = strconv.ParseUint(v, 10, 64)
			have |= 8
		case "name":
			r.Name = v
		case "fd":
			r.FD, err = parseFDNum(v)
		case "handle":
			r.Handle, err = parseFDNum(v)
		case "old":
			r.Old, err = parseFDNum(v)
		case "peer":
			r.Peer, err = parseFDNum(v)
		case "dev":
			r.Dev, err = parseFDNum(v)
		case "first":
			r.First, err = strconv.ParseInt(v, 10, 64)
		case "last":
			r.Last, err = strconv.ParseInt(v, 10, 64)
		case "call":
			r.Call = v
		case "kind":
			r.Kind = v
		case "path":
			r.Path = v
		case "cloexec":
			r.Cloexec = v == "1"
		case "size":
			r.Size, err = strconv.ParseUint(v, 10, 64)
		case "heap":
			r.Heap = v
		case "heap_mask":
			r.HeapMask, err = strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 64)
		case "buf":
			r.Buf, err = strconv.ParseUint(v, 10, 64)
		case "trunc":
			r.Trunc = v == "1"
		case "domain":
			r.Domain = v
		case "flags":
			r.Flags = lenientUint(strings.TrimPrefix(v, "0x"), 16)
		case "heap_flags":
			r.HeapFlags = lenientUint(strings.TrimPrefix(v, "0x"), 16)
		case "align":
			r.Align = lenientUint(v, 10)
		case "layout":
			r.Legacy = v == "legacy"
		case "type":
			r.Type = lenientUint(v, 10)
		case "stack":
			r.Stack = v
		}
		if err != nil {
			return r, fmt.Errorf("%s line: bad %s=%q", r.Word, kv.Key, v)
		}
	}
	if have != 15 {
		return r, errors.New(r.Word + " line without event, tid, pid and ts")
	}
	return r, nil
}

func parseFDNum(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return -1, errors.New("not a descriptor")
	}
	return n, nil
}

// lenientUint reads a number of the keys older readers ignored; one that
// does not parse is 0, never an error.
func lenientUint(v string, base int) uint64 {
	n, err := strconv.ParseUint(v, base, 64)
	if err != nil {
		return 0
	}
	return n
}
