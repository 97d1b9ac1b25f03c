package fdtrace

import (
	"strconv"

	"github.com/memtrace/memtrace/logfmt"
)

// Meta renders e as the word and fields of a [memtrace] line (see
// docs/fd.md); startNS is CLOCK_MONOTONIC at the start of tracing, from
// which ts= counts microseconds. Write it with logfmt.AppendMeta.
func (e *Event) Meta(startNS uint64) (string, []logfmt.KV) {
	kv := make([]logfmt.KV, 0, 16)
	add := func(k, v string) { kv = append(kv, logfmt.KV{Key: k, Value: v}) }
	num := func(k string, v int64) { add(k, strconv.FormatInt(v, 10)) }
	unum := func(k string, v uint64) { add(k, strconv.FormatUint(v, 10)) }
	hex := func(k string, v uint64) { add(k, "0x"+strconv.FormatUint(v, 16)) }
	head := func(event string) {
		add("event", event)
		unum("tid", uint64(e.TID))
		unum("pid", uint64(e.TGID))
		ts := uint64(0)
		if e.TS > startNS {
			ts = (e.TS - startNS) / 1000
		}
		unum("ts", ts)
		add("name", e.CommString())
	}
	path := func() {
		if e.Path != "" {
			add("path", e.Path)
			if e.Truncated {
				add("trunc", "1")
			}
		}
	}
	word := logfmt.WordFD
	switch e.Type {
	case TypeOpen:
		head(logfmt.FDOpen)
		num("fd", int64(e.FD))
		add("call", e.Call.String())
		add("kind", e.kind().String())
		path()
		switch e.Call {
		case CallPipe, CallPipe2, CallSocketpair:
			num("peer", int64(e.FD2))
		case CallDup, CallDup2, CallDup3, CallFcntl:
			num("old", int64(e.FD2))
		case CallIoctl:
			num("dev", int64(e.FD2))
		}
		if d, ok := domainNames[e.Aux]; ok && (e.Call == CallSocket || e.Call == CallSocketpair) {
			add("domain", d)
		} else if e.Call == CallSocket || e.Call == CallSocketpair {
			unum("domain", uint64(e.Aux))
		}
		if e.Flags != 0 && e.Call != CallFcntl {
			hex("flags", e.Flags)
		}
		if cloexec(e.Call, e.Flags) {
			add("cloexec", "1")
		}
	case TypeClose:
		head(logfmt.FDClose)
		num("fd", int64(e.FD))
		add("call", e.Call.String())
		add("kind", e.Kind.String())
		path()
	case TypeCloseRange:
		head(logfmt.FDCloseRange)
		num("first", int64(uint32(e.FD)))
		num("last", int64(uint32(e.FD2)))
		if e.Flags != 0 {
			hex("flags", e.Flags)
		}
	case TypeDmabufAlloc:
		word = logfmt.WordDmabuf
		head(logfmt.BufAlloc)
		num("fd", int64(e.FD))
		unum("size", e.Size)
		add("heap", e.Path)
		num("dev", int64(e.FD2))
		hex("flags", e.Flags)
		hex("heap_flags", e.Extra)
		unum("buf", e.Buf)
	case TypeDmabufRelease:
		word = logfmt.WordDmabuf
		head(logfmt.BufRelease)
		num("fd", int64(e.FD))
		unum("size", e.Size)
		add("heap", e.Path)
		unum("buf", e.Buf)
		add("call", e.Call.String())
	case TypeIONAlloc, TypeIONLegacyAlloc:
		word = logfmt.WordION
		head(logfmt.BufAlloc)
		if e.Type == TypeIONLegacyAlloc {
			num("handle", int64(e.FD))
		} else {
			num("fd", int64(e.FD))
		}
		unum("size", e.Size)
		hex("heap_mask", uint64(e.Aux))
		hex("flags", e.Flags)
		num("dev", int64(e.FD2))
		if e.Type == TypeIONLegacyAlloc {
			unum("align", e.Extra)
			add("layout", "legacy")
		}
		unum("buf", e.Buf)
	case TypeIONRelease:
		word = logfmt.WordION
		head(logfmt.BufRelease)
		if e.Legacy {
			num("handle", int64(e.FD))
			num("dev", int64(e.FD2))
		} else {
			num("fd", int64(e.FD))
		}
		unum("size", e.Size)
		hex("heap_mask", uint64(e.Aux))
		unum("buf", e.Buf)
		add("call", e.Call.String())
	case TypeIONFree:
		word = logfmt.WordION
		head(logfmt.BufFree)
		num("handle", int64(e.FD))
		num("dev", int64(e.FD2))
	default:
		head("unknown")
		unum("type", uint64(e.Type))
	}
	return word, kv
}

// kind is e.Kind, or for an event that has not been through a Table the
// kind its call makes.
func (e *Event) kind() Kind {
	if e.Kind == KindUnknown {
		return kindOf(e.Call)
	}
	return e.Kind
}

// Meta renders an open descriptor of process pid as a summary line for
// the end of a session: "fd event=leak", with ts and tid saying when and by
// which thread it was opened, and the buffer it holds if any.
func (o Open) Meta(pid uint32, startNS uint64) (string, []logfmt.KV) {
	ts := uint64(0)
	if o.TS > startNS {
		ts = (o.TS - startNS) / 1000
	}
	kv := []logfmt.KV{
		{Key: "event", Value: logfmt.FDLeak},
		{Key: "tid", Value: strconv.FormatUint(uint64(o.TID), 10)},
		{Key: "pid", Value: strconv.FormatUint(uint64(pid), 10)},
		{Key: "ts", Value: strconv.FormatUint(ts, 10)},
		{Key: "fd", Value: strconv.FormatInt(int64(o.FD), 10)},
		{Key: "call", Value: o.Call.String()},
		{Key: "kind", Value: o.Kind.String()},
	}
	if o.Path != "" {
		kv = append(kv, logfmt.KV{Key: "path", Value: o.Path})
	}
	if o.Cloexec {
		kv = append(kv, logfmt.KV{Key: "cloexec", Value: "1"})
	}
	if o.Buf != 0 {
		kv = append(kv, logfmt.KV{Key: "buf", Value: strconv.FormatUint(o.Buf, 10)},
			logfmt.KV{Key: "size", Value: strconv.FormatUint(o.Size, 10)})
	}
	return logfmt.WordFD, kv
}
