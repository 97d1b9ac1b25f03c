package fdevent

import (
	"slices"

	"github.com/memtrace/memtrace/config"
)

// Table follows the descriptors of the traced processes from the events of
// a Tracer, applied in time order. Descriptors point to open file
// descriptions (what dup shares and fork copies); a buffer is released when
// the last descriptor of its description closes (or, for a legacy ION
// handle, when it is freed or its device's description goes). A Table is
// not safe for concurrent use.
type Table struct {
	track   config.Track
	procs   map[uint32]map[int32]*entry
	nextBuf uint64
	// Stale counts descriptors found open when a call returned their
	// number again: a close memtrace could not see (SCM_RIGHTS, a
	// descriptor closed by a call it does not trace).
	Stale uint64
}

type entry struct {
	d       *desc
	call    Call // the call that made this descriptor (dups included)
	cloexec bool
	ts      uint64
	tid     uint32
	stack   uint64 // the opening call's stack id (Event.Stack)
}

// desc is an open file description.
type desc struct {
	refs    int
	kind    Kind
	call    Call
	path    string
	flags   uint64
	buf     *buffer           // a dma-buf or ION buffer
	handles map[int32]*buffer // legacy ION handles made through this device
}

type buffer struct {
	id     uint64
	typ    Type // TypeDmabufAlloc, TypeIONAlloc or TypeIONLegacyAlloc
	size   uint64
	heap   string
	mask   uint32
	handle int32
	dev    int32
}

// NewTable returns an empty table; track says which of fd, dmabuf and ion
// lines Apply emits.
func NewTable(track config.Track) *Table {
	return &Table{track: track, procs: map[uint32]map[int32]*entry{}}
}

func (t *Table) proc(pid uint32) map[int32]*entry {
	p := t.procs[pid]
	if p == nil {
		p = map[int32]*entry{}
		t.procs[pid] = p
	}
	return p
}

// Apply updates the table with one event from a Tracer and calls emit with
// each event to log, in order: the open and close lines (when fd is
// tracked), with close_range turned into one close per descriptor the
// table knows in the range and a pipe or socketpair into two opens; and the
// buffer allocations and releases (when dmabuf or ion is tracked). The
// events passed to emit carry Kind, Buf and Known and are valid only during
// the call.
func (t *Table) Apply(e *Event, emit func(*Event)) {
	p := t.proc(e.TGID)
	switch e.Type {
	case TypeOpen:
		t.open(p, e, emit)
	case TypeClose:
		t.close(p, e.FD, e, CallClose, emit)
	case TypeCloseRange:
		first, last := uint32(e.FD), uint32(e.FD2)
		var fds []int32
		for fd := range p {
			if uint32(fd) >= first && uint32(fd) <= last {
				fds = append(fds, fd)
			}
		}
		slices.Sort(fds)
		for _, fd := range fds {
			t.close(p, fd, e, CallCloseRange, emit)
		}
	case TypeDmabufAlloc, TypeIONAlloc:
		kind, track, flags := KindDmabuf, config.TrackDmabuf, e.Flags
		if e.Type == TypeIONAlloc {
			// ION hands out its buffers close-on-exec.
			kind, track, flags = KindION, config.TrackION, oCloexec
		}
		t.nextBuf++
		b := &buffer{id: t.nextBuf, typ: e.Type, size: e.Size, heap: e.Path, mask: e.Aux, dev: e.FD2}
		d := &desc{kind: kind, call: CallIoctl, flags: flags, buf: b}
		o := *e
		o.Type, o.Call, o.Flags, o.Kind, o.Path, o.Buf = TypeOpen, CallIoctl, flags, kind, "", b.id
		t.install(p, e.FD, d, &o, emit)
		if t.track.Has(track) {
			a := *e
			a.Kind, a.Buf = kind, b.id
			emit(&a)
		}
	case TypeIONLegacyAlloc:
		dev := p[e.FD2]
		if dev == nil {
			// A device opened before tracing started.
			dev = &entry{d: &desc{refs: 1, kind: KindUnknown}}
			p[e.FD2] = dev
		}
		if dev.d.handles == nil {
			dev.d.handles = map[int32]*buffer{}
		}
		t.nextBuf++
		b := &buffer{id: t.nextBuf, typ: e.Type, size: e.Size, mask: e.Aux, handle: e.FD, dev: e.FD2}
		dev.d.handles[e.FD] = b
		if t.track.Has(config.TrackION) {
			a := *e
			a.Kind, a.Buf = KindION, b.id
			emit(&a)
		}
	case TypeIONFree:
		if dev := p[e.FD2]; dev != nil {
			if b := dev.d.handles[e.FD]; b != nil {
				delete(dev.d.handles, e.FD)
				t.release(b, e, CallIoctl, emit)
			}
		}
	}
}

func (t *Table) open(p map[int32]*entry, e *Event, emit func(*Event)) {
	switch e.Call {
	case CallDup, CallDup2, CallDup3, CallFcntl:
		src := p[e.FD2]
		if src == nil {
			// A source opened before tracing started: what it is is
			// unknown, but the two now share it.
			src = &entry{d: &desc{refs: 1, kind: KindUnknown}}
			p[e.FD2] = src
		}
		o := *e
		o.Kind, o.Path = src.d.kind, src.d.path
		if src.d.buf != nil {
			o.Buf = src.d.buf.id
		}
		t.install(p, e.FD, src.d, &o, emit)
	case CallPipe, CallPipe2, CallSocketpair:
		for i, fd := range [2]int32{e.FD, e.FD2} {
			o := *e
			o.FD, o.FD2 = fd, e.FD2
			if i == 1 {
				o.FD2 = e.FD
			}
			o.Kind = KindOf(e.Call)
			t.install(p, fd, &desc{kind: o.Kind, call: e.Call, flags: e.Flags}, &o, emit)
		}
	default:
		o := *e
		o.Kind = KindOf(e.Call)
		t.install(p, e.FD, &desc{kind: o.Kind, call: e.Call, path: e.Path, flags: e.Flags}, &o, emit)
	}
}

// install points fd at d and emits the open line o. A descriptor already
// there was replaced: by dup2/dup3 (the kernel closes it first, and the
// close is logged) or by a close that was not seen.
func (t *Table) install(p map[int32]*entry, fd int32, d *desc, o *Event, emit func(*Event)) {
	if old := p[fd]; old != nil {
		if o.Call == CallDup2 || o.Call == CallDup3 {
			t.close(p, fd, o, o.Call, emit)
		} else {
			t.Stale++
			delete(p, fd)
			t.unref(old.d, o, o.Call, emit)
		}
	}
	d.refs++
	p[fd] = &entry{d: d, call: o.Call, cloexec: Cloexec(o.Call, o.Flags), ts: o.TS, tid: o.TID, stack: o.Stack}
	if t.track.Has(config.TrackFD) {
		o.Known = true
		emit(o)
	}
}

func (t *Table) close(p map[int32]*entry, fd int32, e *Event, call Call, emit func(*Event)) {
	en := p[fd]
	delete(p, fd)
	if t.track.Has(config.TrackFD) {
		c := *e
		c.Type, c.FD, c.FD2, c.Call, c.Flags, c.Path, c.Kind, c.Buf, c.Known = TypeClose, fd, -1, call, 0, "", KindUnknown, 0, en != nil
		c.Size, c.Aux, c.Extra, c.Truncated = 0, 0, 0, false
		if en != nil {
			c.Kind, c.Path = en.d.kind, en.d.path
		}
		emit(&c)
	}
	if en != nil {
		e2 := *e
		e2.FD = fd
		t.unref(en.d, &e2, call, emit)
	}
}

// unref drops one descriptor's hold on d; the last one releases its
// buffers. e.FD is the descriptor that went.
func (t *Table) unref(d *desc, e *Event, call Call, emit func(*Event)) {
	d.refs--
	if d.refs > 0 {
		return
	}
	if d.buf != nil {
		t.release(d.buf, e, call, emit)
	}
	hs := make([]int32, 0, len(d.handles))
	for h := range d.handles {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	for _, h := range hs {
		t.release(d.handles[h], e, call, emit)
	}
	d.handles = nil
}

func (t *Table) release(b *buffer, e *Event, call Call, emit func(*Event)) {
	r := Event{TS: e.TS, TGID: e.TGID, TID: e.TID, Comm: e.Comm, Call: call, FD: e.FD, FD2: -1,
		Size: b.size, Aux: b.mask, Path: b.heap, Buf: b.id}
	switch b.typ {
	case TypeDmabufAlloc:
		if !t.track.Has(config.TrackDmabuf) {
			return
		}
		r.Type, r.Kind = TypeDmabufRelease, KindDmabuf
	case TypeIONLegacyAlloc:
		r.Legacy, r.FD, r.FD2 = true, b.handle, b.dev
		fallthrough
	default:
		if !t.track.Has(config.TrackION) {
			return
		}
		r.Type, r.Kind = TypeIONRelease, KindION
	}
	emit(&r)
}

// Fork gives child a copy of parent's descriptors, sharing their
// descriptions as the kernel does.
func (t *Table) Fork(parent, child uint32) {
	src := t.procs[parent]
	dst := map[int32]*entry{}
	for fd, en := range src {
		en.d.refs++
		c := *en
		dst[fd] = &c
	}
	t.procs[child] = dst
}

// Exec closes pid's close-on-exec descriptors, as execve does, emitting
// their close lines (call=execve) with time ts (CLOCK_MONOTONIC ns).
func (t *Table) Exec(pid uint32, ts uint64, emit func(*Event)) {
	p := t.procs[pid]
	var fds []int32
	for fd, en := range p {
		if en.cloexec {
			fds = append(fds, fd)
		}
	}
	slices.Sort(fds)
	e := Event{TS: ts, TGID: pid, TID: pid}
	for _, fd := range fds {
		t.close(p, fd, &e, CallExecve, emit)
	}
}

// Open is a descriptor a process holds.
type Open struct {
	FD      int32
	Kind    Kind
	Call    Call   // the call that made it (for a dup, the dup)
	Path    string // as opened (a dup's is its source's)
	TS      uint64 // when it was made (CLOCK_MONOTONIC ns)
	TID     uint32
	Cloexec bool
	Buf     uint64 // the buffer it holds (dmabuf, ion), or 0
	Size    uint64 // that buffer's size
	Stack   uint64 // the stack id of the call that made it (Event.Stack), or 0
}

// Open lists the descriptors that pid made while traced and still holds,
// in number order: at the process's exit, its descriptor leaks.
func (t *Table) Open(pid uint32) []Open {
	p := t.procs[pid]
	out := make([]Open, 0, len(p))
	for fd, en := range p {
		if en.call == CallNone {
			continue // held before tracing started
		}
		o := Open{FD: fd, Kind: en.d.kind, Call: en.call, Path: en.d.path, TS: en.ts, TID: en.tid, Cloexec: en.cloexec, Stack: en.stack}
		if en.d.buf != nil {
			o.Buf, o.Size = en.d.buf.id, en.d.buf.size
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b Open) int { return int(a.FD) - int(b.FD) })
	return out
}

// Buffer is a live dma-buf or ION buffer.
type Buffer struct {
	Buf    uint64
	Type   Type // TypeDmabufAlloc, TypeIONAlloc or TypeIONLegacyAlloc
	Size   uint64
	Heap   string
	Mask   uint32
	FDs    []int32 // descriptors of the process that hold it
	Handle int32   // legacy ION: the handle (FDs is then the device's)
}

// Buffers lists the buffers that pid's descriptors keep alive, by number.
func (t *Table) Buffers(pid uint32) []Buffer {
	byID := map[uint64]*Buffer{}
	add := func(b *buffer, fd int32) {
		x := byID[b.id]
		if x == nil {
			x = &Buffer{Buf: b.id, Type: b.typ, Size: b.size, Heap: b.heap, Mask: b.mask, Handle: -1}
			if b.typ == TypeIONLegacyAlloc {
				x.Handle = b.handle
			}
			byID[b.id] = x
		}
		x.FDs = append(x.FDs, fd)
	}
	for fd, en := range t.procs[pid] {
		if en.d.buf != nil {
			add(en.d.buf, fd)
		}
		for _, b := range en.d.handles {
			add(b, fd)
		}
	}
	out := make([]Buffer, 0, len(byID))
	for _, b := range byID {
		slices.Sort(b.FDs)
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b Buffer) int {
		if a.Buf < b.Buf {
			return -1
		}
		if a.Buf > b.Buf {
			return 1
		}
		return 0
	})
	return out
}

// Exit forgets pid and returns what it held open: its descriptor leaks.
// Nothing is emitted: the kernel's closing at exit is not the program's.
func (t *Table) Exit(pid uint32) []Open {
	open := t.Open(pid)
	for _, en := range t.procs[pid] {
		en.d.refs--
	}
	delete(t.procs, pid)
	return open
}
