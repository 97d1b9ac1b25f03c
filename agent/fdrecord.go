package agent

import (
	"strconv"

	"github.com/memtrace/memtrace/event/fdevent"
	"github.com/memtrace/memtrace/logfmt"
)

// FDRecord gives e as the fields of its [memtrace] line, to write with
// logfmt.AppendFD (which decides the layout; see docs/fd.md); startNS is
// CLOCK_MONOTONIC at the start of tracing, from which ts= counts
// microseconds.
func FDRecord(e *fdevent.Event, startNS uint64) logfmt.FDRecord {
	r := logfmt.NewFDRecord(logfmt.WordFD, "")
	r.TID, r.PID = int64(e.TID), int64(e.TGID)
	r.TS = sinceStart(e.TS, startNS)
	r.Name = e.CommString()
	switch e.Type {
	case fdevent.TypeOpen:
		r.Event = logfmt.FDOpen
		r.FD, r.Call, r.Kind = int64(e.FD), e.Call.String(), descKind(e).String()
		r.Path, r.Trunc = e.Path, e.Truncated
		switch e.Call {
		case fdevent.CallPipe, fdevent.CallPipe2, fdevent.CallSocketpair:
			r.Peer = int64(e.FD2)
		case fdevent.CallDup, fdevent.CallDup2, fdevent.CallDup3, fdevent.CallFcntl:
			r.Old = int64(e.FD2)
		case fdevent.CallIoctl:
			r.Dev = int64(e.FD2)
		}
		if e.Call == fdevent.CallSocket || e.Call == fdevent.CallSocketpair {
			if d, ok := domainNames[e.Aux]; ok {
				r.Domain = d
			} else {
				r.Domain = strconv.FormatUint(uint64(e.Aux), 10)
			}
		}
		// fcntl's flags are F_DUPFD's command, not open flags.
		if e.Call != fdevent.CallFcntl {
			r.Flags = e.Flags
		}
		r.Cloexec = fdevent.Cloexec(e.Call, e.Flags)
	case fdevent.TypeClose:
		r.Event = logfmt.FDClose
		r.FD, r.Call, r.Kind = int64(e.FD), e.Call.String(), e.Kind.String()
		r.Path, r.Trunc = e.Path, e.Truncated
	case fdevent.TypeCloseRange:
		r.Event = logfmt.FDCloseRange
		r.First, r.Last, r.Flags = int64(uint32(e.FD)), int64(uint32(e.FD2)), e.Flags
	case fdevent.TypeDmabufAlloc:
		r.Word, r.Event = logfmt.WordDmabuf, logfmt.BufAlloc
		r.FD, r.Size, r.Heap, r.Dev = int64(e.FD), e.Size, e.Path, int64(e.FD2)
		r.Flags, r.HeapFlags, r.Buf = e.Flags, e.Extra, e.Buf
	case fdevent.TypeDmabufRelease:
		r.Word, r.Event = logfmt.WordDmabuf, logfmt.BufRelease
		r.FD, r.Size, r.Heap, r.Buf, r.Call = int64(e.FD), e.Size, e.Path, e.Buf, e.Call.String()
	case fdevent.TypeIONAlloc, fdevent.TypeIONLegacyAlloc:
		r.Word, r.Event = logfmt.WordION, logfmt.BufAlloc
		if e.Type == fdevent.TypeIONLegacyAlloc {
			r.Handle, r.Legacy, r.Align = int64(e.FD), true, e.Extra
		} else {
			r.FD = int64(e.FD)
		}
		r.Size, r.HeapMask, r.Flags, r.Dev, r.Buf = e.Size, uint64(e.Aux), e.Flags, int64(e.FD2), e.Buf
	case fdevent.TypeIONRelease:
		r.Word, r.Event = logfmt.WordION, logfmt.BufRelease
		if e.Legacy {
			r.Handle, r.Dev = int64(e.FD), int64(e.FD2)
		} else {
			r.FD = int64(e.FD)
		}
		r.Size, r.HeapMask, r.Buf, r.Call = e.Size, uint64(e.Aux), e.Buf, e.Call.String()
	case fdevent.TypeIONFree:
		r.Word, r.Event = logfmt.WordION, logfmt.BufFree
		r.Handle, r.Dev = int64(e.FD), int64(e.FD2)
	default:
		r.Event, r.Type = logfmt.FDUnknown, uint64(e.Type)
	}
	return r
}

// descKind is e.Kind, or for an event that has not been through a Table
// the kind its call makes.
func descKind(e *fdevent.Event) fdevent.Kind {
	if e.Kind == fdevent.KindUnknown {
		return fdevent.KindOf(e.Call)
	}
	return e.Kind
}

// fdLeakRecord gives an open descriptor of process pid as the fields of its
// summary line at the end of a session, "fd event=leak" (logfmt.AppendFD
// writes it): ts and tid say when and by which thread it was opened, and
// the buffer it holds if any.
func fdLeakRecord(o fdevent.Open, pid uint32, startNS uint64) logfmt.FDRecord {
	r := logfmt.NewFDRecord(logfmt.WordFD, logfmt.FDLeak)
	r.TID, r.PID, r.TS = int64(o.TID), int64(pid), sinceStart(o.TS, startNS)
	r.FD, r.Call, r.Kind, r.Path, r.Cloexec = int64(o.FD), o.Call.String(), o.Kind.String(), o.Path, o.Cloexec
	if o.Buf != 0 {
		r.Buf, r.Size = o.Buf, o.Size
	}
	return r
}

// sinceStart is ts in microseconds since startNS; a record stamped before
// the agent read its clock is at 0.
func sinceStart(ts, startNS uint64) uint64 {
	if ts > startNS {
		return (ts - startNS) / 1000
	}
	return 0
}

// domainNames are the socket domains a socket line names.
var domainNames = map[uint32]string{1: "unix", 2: "inet", 10: "inet6", 16: "netlink", 17: "packet", 40: "vsock"}
