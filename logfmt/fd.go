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
)

// FDRecord is one fd, dmabuf or ion line read back. Numbers absent from the
// line are -1 (descriptors, handles) or 0.
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
}

// ParseFD reads the fields of an fd, dmabuf or ion meta line (word and the
// rest as Line.Parse splits them). Unknown keys are ignored so that later
// versions can add some; a missing event, tid, pid or ts, or a number that
// does not parse, is an error.
func ParseFD(word, rest []byte) (FDRecord, error) {
	r := FDRecord{Word: string(word), FD: -1, Handle: -1, Old: -1, Peer: -1, Dev: -1, First: -1, Last: -1}
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
