package preload

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
)

// rawFrame is a frame as bin_frames writes it.
type rawFrame struct {
	addr, off uint64
	slot      uint32
}

// frameBlob lays frames out as bin_frames does (mt_abi.h), followed by pad.
func frameBlob(frames []rawFrame, stop uint32, pad []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(frames)))
	b = binary.LittleEndian.AppendUint32(b, stop)
	for _, f := range frames {
		b = binary.LittleEndian.AppendUint64(b, f.addr)
		b = binary.LittleEndian.AppendUint64(b, f.off)
		b = binary.LittleEndian.AppendUint32(b, f.slot)
	}
	return append(b, pad...)
}

// testConverter converts from a small real region (file slots included).
func testConverter(t testing.TB, out *bytes.Buffer, depth int) (*converter, *stream) {
	r, err := newRegion(4 * chunkSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	c := newConverter(r, testSession(Options{StackDepth: depth}, out), 0, depth)
	st := &stream{id: 1, pid: 10, tid: 10}
	copy(st.comm[:], "prog")
	return c, st
}

// askFile writes slot i as the library does.
func askFile(r *region, i int, path string, dev, ino uint64) {
	base := r.file(i)
	r.put64(base+fileDev, dev)
	r.put64(base+fileIno, ino)
	copy(r.mem[base+filePath:], path)
	r.put32(base+filePathLen, uint32(len(path)))
	r.put32(base+fileState, fileAsked)
}

// funcFileOff returns the file offset of a function of the ELF file.
func funcFileOff(t *testing.T, path, name string) uint64 {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name != name {
			continue
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && s.Value >= p.Vaddr && s.Value < p.Vaddr+p.Memsz {
				return s.Value - p.Vaddr + p.Off
			}
		}
	}
	t.Fatalf("%s: no function %s", path, name)
	return 0
}

// TestStackFrames: the library's raw frames (address, file slot, offset)
// are named as the eBPF path's are, from the file and the offset: the
// slot's file gets its unwind table, a slot whose file is not the one the
// library mapped (another inode) none, and still its path; a frame in no
// file is its address alone. The same frames with other bytes in the
// record's padding are one stack; a record cut short keeps its whole
// frames; the depth stop is written as the eBPF path writes it.
func TestStackFrames(t *testing.T) {
	_, exe := build(t)
	var st unix.Stat_t
	if err := unix.Stat(exe, &st); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c, s := testConverter(t, &out, 8)
	askFile(c.r, 0, exe, uint64(st.Dev), uint64(st.Ino))
	askFile(c.r, 1, exe, uint64(st.Dev), uint64(st.Ino)+1)
	off := funcFileOff(t, exe, "main")
	frames := []rawFrame{{0x5555, off + 5, 0}, {0x7777, 0x20, 1}, {0x9999, 0, noFile}}
	a := frameBlob(frames, stopEnd, []byte{1, 2, 3})
	b := frameBlob(frames, stopEnd, []byte{9, 9, 9, 9, 9})
	other := frameBlob(frames[:2], stopEnd, nil)
	c.tb.pass()
	ida, idb, ido := c.stack(a, 10, 1), c.stack(b, 10, 2), c.stack(other, 10, 3)
	if ida == 0 || ida != idb || ido == ida || ido == 0 {
		t.Fatalf("stack IDs %d, %d (same frames, other padding), %d (other frames): want the first two equal, the third apart, none 0", ida, idb, ido)
	}
	if got := c.r.load(c.r.file(0) + fileState); got != fileReady || c.r.load(c.r.file(0)+fileNRows) == 0 {
		t.Errorf("slot 0 (the test binary): state %d, %d rows; want %d and rows", got, c.r.load(c.r.file(0)+fileNRows), fileReady)
	}
	if got := c.r.load(c.r.file(1) + fileState); got != fileNoTable {
		t.Errorf("slot 1 (another inode): state %d, want %d", got, fileNoTable)
	}
	c.call(s, &ev{ts: 1000, ptr: 0x10, size: 8, op: uint16(logfmt.OpMalloc), data: a}, event.KindAlloc)
	c.call(s, &ev{ts: 2000, ptr: 0x10, op: uint16(logfmt.OpFree), data: b}, event.KindFree)
	deep := frameBlob(frames[:1], stopDepth, nil)
	c.call(s, &ev{ts: 3000, ptr: 0x20, size: 8, op: uint16(logfmt.OpMalloc), data: deep}, event.KindAlloc)
	c.flush()
	text := out.String()
	f0 := string(logfmt.AppendFrame(nil, 0, exe, "main", 5, 0x5555))
	if n := strings.Count(text, f0); n != 3 {
		t.Errorf("frame #0 %q written %d times, want 3:\n%s", f0, n, text)
	}
	f2 := string(logfmt.AppendFrame(nil, 2, "", "", 0, 0x9999))
	if n := strings.Count(text, f2); n != 2 {
		t.Errorf("frame #2 %q written %d times, want 2:\n%s", f2, n, text)
	}
	if !strings.Contains(text, "(+0x") && !strings.Contains(text, exe+"(") {
		t.Errorf("frame #1 not named by its file:\n%s", text)
	}
	if n := strings.Count(text, string(logfmt.AppendStackTruncated(nil, "depth"))); n != 1 {
		t.Errorf("%d depth lines, want 1 (the third event's):\n%s", n, text)
	}
	// Three frames announced, the record cut inside the second.
	cut := frameBlob(frames, stopEnd, nil)[:framesHdr+frameSize+7]
	one := frameBlob(frames[:1], stopEnd, nil)
	if id, want := c.stack(cut, 10, 4), c.stack(one, 10, 5); id == 0 || id != want {
		t.Errorf("a cut record: stack %d, want the one of its whole first frame (%d)", id, want)
	}
	for _, d := range [][]byte{nil, {1, 0}, frameBlob(nil, stopEnd, []byte{7, 7, 7})} {
		if id := c.stack(d, 10, 6); id != 0 {
			t.Errorf("no frames in %v: stack %d, want 0", d, id)
		}
	}
}

// FuzzStackFrames: whatever bytes a record's data holds (it is memory the
// traced program can write), the frames reader neither panics nor reads
// past them, and the same bytes are the same stack.
func FuzzStackFrames(f *testing.F) {
	f.Add(frameBlob([]rawFrame{{2, 1, 0}, {3, 0, noFile}}, stopEnd, []byte{0xff}))
	f.Add(frameBlob(nil, stopDepth, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, d []byte) {
		var out bytes.Buffer
		c, _ := testConverter(t, &out, 0)
		id := c.stack(d, 1, 1)
		if again := c.stack(bytes.Clone(d), 1, 2); again != id {
			t.Fatalf("the same bytes gave stacks %d and %d", id, again)
		}
		if id == 0 {
			return
		}
		if got := len(c.frames); got == 0 || framesHdr+got*frameSize > len(d) {
			t.Fatalf("%d frames from %d bytes", got, len(d))
		}
	})
}

// TestStackIDs: an event that names its stack by id gets the frames its
// stream last sent under that id (a thread's table may forget an id and
// send it again with other frames); ids are the stream's own, so another
// thread's id 1 is not this one's; an id never sent writes the
// missing-stack line rather than another stack.
func TestStackIDs(t *testing.T) {
	var out bytes.Buffer
	c, s := testConverter(t, &out, 8)
	other := &stream{id: 2, pid: 10, tid: 11}
	copy(other.comm[:], "other")
	a := frameBlob([]rawFrame{{0x1111, 0, noFile}, {0x2222, 0, noFile}}, stopEnd, nil)
	b := frameBlob([]rawFrame{{0x3333, 0, noFile}}, stopEnd, nil)
	c.tb.pass()
	c.call(s, &ev{ts: 1000, ptr: 0x10, size: 8, op: uint16(logfmt.OpMalloc), stack: 1, data: a}, event.KindAlloc)
	c.call(s, &ev{ts: 2000, ptr: 0x20, size: 8, op: uint16(logfmt.OpMalloc), stack: 1}, event.KindAlloc)
	c.call(s, &ev{ts: 3000, ptr: 0x30, size: 8, op: uint16(logfmt.OpMalloc), stack: 1, data: b}, event.KindAlloc)
	c.call(s, &ev{ts: 4000, ptr: 0x40, size: 8, op: uint16(logfmt.OpMalloc), stack: 1}, event.KindAlloc)
	c.call(other, &ev{ts: 5000, ptr: 0x50, size: 8, op: uint16(logfmt.OpMalloc), stack: 1}, event.KindAlloc)
	c.call(s, &ev{ts: 6000, ptr: 0x60, size: 8, op: uint16(logfmt.OpMalloc), stack: stackIDMax + 1}, event.KindAlloc)
	c.flush()
	// The frames after each event line, by its pointer.
	got := map[string]string{}
	ptr := ""
	for _, ln := range strings.Split(out.String(), "\n") {
		if i := strings.Index(ln, "ptr="); i >= 0 && strings.HasPrefix(ln, "[memtrack] tid=") {
			ptr = strings.Fields(ln[i+4:])[0]
		} else if ptr != "" && strings.HasPrefix(ln, "[memtrack]   #") || ptr != "" && strings.Contains(ln, "stack ") {
			got[ptr] += strings.TrimSpace(ln[strings.Index(ln, "]")+1:]) + ";"
		}
	}
	wantA := "#0  [0x1111];#1  [0x2222];"
	wantB := "#0  [0x3333];"
	for p, want := range map[string]string{"0x10": wantA, "0x20": wantA, "0x30": wantB, "0x40": wantB} {
		if got[p] != want {
			t.Errorf("event %s: frames %q, want %q\n%s", p, got[p], want, out.String())
		}
	}
	for _, p := range []string{"0x50", "0x60"} {
		if !strings.Contains(got[p], "missing") || strings.Contains(got[p], "#0") {
			t.Errorf("event %s (an id its stream never sent): %q, want the missing-stack line alone\n%s", p, got[p], out.String())
		}
	}
}
