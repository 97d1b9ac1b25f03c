package preload

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/tracer"
)

// frameBlob lays frames out as bin_frames does (mt_abi.h), followed by pad.
func frameBlob(frames []agent.Frame, pad []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(frames)))
	for _, f := range frames {
		ml, sl := uint16(len(f.Module)), uint16(len(f.Symbol))
		if f.Module == "" {
			ml, sl = frameNoMod, 0
		}
		b = binary.LittleEndian.AppendUint64(b, f.Addr)
		b = binary.LittleEndian.AppendUint64(b, f.Offset)
		b = binary.LittleEndian.AppendUint16(b, ml)
		b = binary.LittleEndian.AppendUint16(b, sl)
		if f.Module != "" {
			b = append(append(b, f.Module...), f.Symbol...)
		}
	}
	return append(b, pad...)
}

func testConverter(out *bytes.Buffer) (*converter, *stream) {
	c := newConverter(&region{}, testSession(Options{}, out), 0)
	st := &stream{id: 1, pid: 10, tid: 10}
	copy(st.comm[:], "prog")
	return c, st
}

// TestStackFrames: the library's frames are written as it named them
// (module, symbol, offset; a frame in no module as its address alone),
// after each event that carries them; the same frames with other bytes in
// the record's padding are one stack, formatted once; a record cut short
// keeps the frames that are whole.
func TestStackFrames(t *testing.T) {
	frames := []agent.Frame{
		{Module: "/bin/prog", Symbol: "leaf", Offset: 0x12, Addr: 0x5555},
		{Module: "/lib/libc.so.6", Offset: 0x2724a, Addr: 0x7777},
		{Addr: 0x9999},
	}
	var out bytes.Buffer
	c, st := testConverter(&out)
	a := frameBlob(frames, []byte{1, 2, 3})
	b := frameBlob(frames, []byte{9, 9, 9, 9, 9})
	other := frameBlob(frames[:2], nil)
	ida, idb, ido := c.stack(a), c.stack(b), c.stack(other)
	if ida == 0 || ida != idb || ido == ida || ido == 0 {
		t.Fatalf("stack IDs %d, %d (same frames, other padding), %d (other frames): want the first two equal, the third apart, none 0", ida, idb, ido)
	}
	if len(c.stackID) != 2 {
		t.Errorf("%d stacks kept, want 2", len(c.stackID))
	}
	c.call(st, &ev{ts: 1000, ptr: 0x10, size: 8, op: opMalloc, data: a}, tracer.KindAlloc)
	c.call(st, &ev{ts: 2000, ptr: 0x10, op: opFree, data: b}, tracer.KindFree)
	c.flush()
	var want []byte
	for i, f := range frames {
		want = logfmt.AppendFrame(want, i, f.Module, f.Symbol, f.Offset, f.Addr)
	}
	if n := strings.Count(out.String(), string(want)); n != 2 {
		t.Errorf("frames written %d times, want 2:\n%s\nwant after each event:\n%s", n, out.String(), want)
	}
	// Three frames announced, the record cut inside the second.
	cut := frameBlob(frames, nil)[:framesHdr+frameHdr+len("/bin/prog")+len("leaf")+frameHdr+3]
	id := c.stack(cut)
	one := frameBlob(frames[:1], nil)
	if id == 0 || id != c.stack(one) {
		t.Errorf("a cut record: stack %d, want the one of its whole first frame (%d)", id, c.stack(one))
	}
	for _, d := range [][]byte{nil, {1, 0}, frameBlob(nil, []byte{7, 7, 7})} {
		if id := c.stack(d); id != 0 {
			t.Errorf("no frames in %v: stack %d, want 0", d, id)
		}
	}
}

// FuzzStackFrames: whatever bytes a record's data holds (it is memory the
// traced program can write), the frames reader neither panics nor reads
// past them, and the same bytes are the same stack.
func FuzzStackFrames(f *testing.F) {
	f.Add(frameBlob([]agent.Frame{{Module: "/bin/prog", Symbol: "leaf", Offset: 1, Addr: 2}, {Addr: 3}}, []byte{0xff}))
	f.Add(frameBlob(nil, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, d []byte) {
		var out bytes.Buffer
		c, _ := testConverter(&out)
		id := c.stack(d)
		if again := c.stack(bytes.Clone(d)); again != id {
			t.Fatalf("the same bytes gave stacks %d and %d", id, again)
		}
		if id == 0 {
			return
		}
		if got := len(c.frames); got == 0 || got*frameHdr > len(d) {
			t.Fatalf("%d frames from %d bytes", got, len(d))
		}
	})
}
