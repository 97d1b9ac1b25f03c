package agent

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/internal/stackz"
	"github.com/memtrace/memtrace/logfmt"
)

// TestStackStopReasons: a stack the DWARF walk took carries the kernel's
// reason for stopping into the log, every frame kept (the frame-pointer
// path cuts at a root symbol or a frame in no file and guesses "fp");
// a walk that reached its end is not marked.
func TestStackStopReasons(t *testing.T) {
	for _, c := range []struct {
		stop   event.StopReason
		frames int
		want   string
	}{
		{event.StopEnd, 3, ""},
		{event.StopDepth, 3, "depth"},
		{event.StopNoInfo, 3, "no-unwind-info"},
		{event.StopBadRead, 2, "bad-read"},
		{event.StopFP, 1, "fp"},
		// The kernel's frame-pointer walk says nothing: frames in no
		// file after frame 0 are its garbage, cut and marked fp.
		{event.StopFPWalk, 1, "fp"},
	} {
		var buf bytes.Buffer
		s := New(Config{Out: &buf, StackDepth: 8})
		s.AddProcess(1, false)
		s.procs[1].scanned = true
		// Anonymous memory (ino 0): no module, as JIT code would be.
		fr := []event.Frame{{Addr: 0x1000}, {Addr: 0x2000}, {Addr: 0x3000}}
		s.Stack(&event.Stack{ID: 7, TGID: 1, Stop: c.stop, Frames: fr[:c.frames]})
		e := ev(100, 1, event.KindAlloc, logfmt.OpMalloc, 0xa0, 100, "main")
		e.Stack = 7
		s.Add(e)
		s.Drain(true)
		s.Flush()
		out := buf.String()
		nframes := strings.Count(out, "  #")
		wantFrames := c.frames
		if c.stop == event.StopFPWalk {
			wantFrames = 1
		}
		if nframes != wantFrames {
			t.Errorf("stop %d: %d frames in the log, want %d:\n%s", c.stop, nframes, wantFrames, out)
		}
		marked := strings.Contains(out, "stack truncated=1")
		if c.want == "" && marked || c.want != "" && !strings.Contains(out, "stack truncated=1 reason="+c.want) {
			t.Errorf("stop %d: want reason %q in\n%s", c.stop, c.want, out)
		}
	}
}

// TestStackFrameMappedSinceScan: the kernel side could not read a frame's
// VMA (another thread held the mappings) and the frame lies in a file
// mapped after the agent last read the process's maps, as a library
// dlopen'ed by one thread while another allocates: the agent reads the
// maps again and names the file, instead of printing a frame in nothing.
func TestStackFrameMappedSinceScan(t *testing.T) {
	for _, old := range []bool{false, true} {
		var buf bytes.Buffer
		s := New(Config{Out: &buf, StackDepth: 8})
		pid := os.Getpid()
		s.AddProcess(uint32(pid), false)
		s.procs[uint32(pid)].scanned = true
		s.KnownProcess(pid, false)
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		mem, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		addr := uint64(uintptr(unsafe.Pointer(&mem[0]))) + 0x100
		ts := monotonicNS()
		if old {
			// A stack taken before the last read: the maps already
			// said all they could, and are not read again.
			ts = s.calls.readAt[pid] - 1
		}
		s.Stack(&event.Stack{ID: 7, TGID: uint32(pid), TS: ts, Stop: event.StopEnd,
			Frames: []event.Frame{{Addr: addr, Ino: event.InoUnknown}}})
		e := ev(100, uint32(pid), event.KindAlloc, logfmt.OpMalloc, 0xa0, 100, "main")
		e.Stack = 7
		s.Add(e)
		s.Drain(true)
		s.Flush()
		_ = syscall.Munmap(mem)
		out := buf.String()
		named := strings.Contains(out, filepath.Base(exe))
		if named == old {
			t.Errorf("stack taken before the last read %v: frame named %v in\n%s", old, named, out)
		}
	}
}

// markRecorder is a compressed log's writer as the session sees it: it
// keeps what WriteMarked was given.
type markRecorder struct {
	bytes.Buffer
	marks [][]byte // the marked text
	texts [][]byte // the slices the marks came from
}

func (m *markRecorder) WriteMarked(p []byte, marks []stackz.Mark) error {
	for _, k := range marks {
		m.marks = append(m.marks, bytes.Clone(p[k.Off:k.Off+k.Len]))
		m.texts = append(m.texts, k.Text)
	}
	_, err := m.Write(p)
	return err
}

// TestStacksMarked: a writer that takes marks is told where each copy of a
// stack's text is, from the one slice the session formatted it into, so
// that the zstd encoder matches it without a search.
func TestStacksMarked(t *testing.T) {
	var w markRecorder
	s := New(Config{Out: &w, StackDepth: 8})
	s.AddProcess(1, false)
	s.procs[1].scanned = true
	s.Stack(&event.Stack{ID: 7, TGID: 1, Stop: event.StopEnd, Frames: []event.Frame{{Addr: 0x1000}, {Addr: 0x2000}}})
	for i := range 3 {
		e := ev(uint64(100+i), 1, event.KindAlloc, logfmt.OpMalloc, uint64(0xa0+i*0x10), 100, "main")
		e.Stack = 7
		s.Add(e)
	}
	s.Drain(true)
	s.Flush()
	if len(w.marks) != 3 {
		t.Fatalf("%d marks for 3 events with a stack:\n%s", len(w.marks), w.String())
	}
	for i, m := range w.marks {
		if !bytes.HasPrefix(m, []byte("[memtrack]   #0 ")) || !bytes.Equal(m, w.texts[i]) {
			t.Errorf("mark %d covers %q, its slice holds %q", i, m, w.texts[i])
		}
		if unsafe.SliceData(w.texts[i]) != unsafe.SliceData(w.texts[0]) {
			t.Errorf("mark %d's text is another slice than the first's", i)
		}
	}
	if strings.Count(w.String(), "  #0 ") != 3 {
		t.Errorf("the log lost a stack:\n%s", w.String())
	}
}

// failAfter fails every write after the first n.
type failAfter struct {
	markRecorder
	n int
}

func (f *failAfter) WriteMarked(p []byte, marks []stackz.Mark) error {
	if f.n == 0 {
		return errors.New("disk full")
	}
	f.n--
	return f.markRecorder.WriteMarked(p, marks)
}

// TestConcurrentOut: a session that writes its buffers on another
// goroutine (Concurrent, the end of a run) writes the same bytes, with
// every stack's copy marked where it lies, as one that writes them itself;
// Flush waits for them; a write that fails there is the session's error
// and stops the writing.
func TestConcurrentOut(t *testing.T) {
	run := func(w markedWriter, concurrent bool) (*Session, error) {
		s := writeStackedEvents(w, concurrent)
		return s, s.Flush()
	}
	var sync, conc markRecorder
	if _, err := run(&sync, false); err != nil {
		t.Fatal(err)
	}
	s, err := run(&conc, true)
	if err != nil {
		t.Fatal(err)
	}
	if s.async != nil {
		t.Error("Flush left the writer goroutine running")
	}
	if sync.Len() < 4*outSize || !bytes.Equal(sync.Bytes(), conc.Bytes()) {
		t.Fatalf("concurrent writes gave %d bytes, the session's own %d (want equal, over several buffers)", conc.Len(), sync.Len())
	}
	if len(conc.marks) != 20000 {
		t.Errorf("%d marks, want one per event (20000)", len(conc.marks))
	}
	for i, m := range conc.marks {
		if !bytes.Equal(m, conc.texts[i]) {
			t.Fatalf("mark %d covers %q, its text is %q", i, m, conc.texts[i])
		}
	}
	f := &failAfter{n: 2}
	if _, err := run(f, true); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("a write failing on the goroutine: Flush says %v, want the write's error", err)
	}
}

// markedWriter is what TestConcurrentOut's sessions write to.
type markedWriter interface {
	io.Writer
	stackz.MarkedWriter
}

// TestSparseOut: into a zstd log, whose encoder takes the stacks' texts
// apart (stackz.SparseWriter), the session leaves them out of its buffer;
// the log decodes to the text a session writing whole text writes, also
// with the buffers and the checksum on other goroutines (Concurrent).
func TestSparseOut(t *testing.T) {
	run := func(w io.Writer, concurrent bool) *Session {
		s := writeStackedEvents(w, concurrent)
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	var whole markRecorder
	run(&whole, false)
	for _, concurrent := range []bool{false, true} {
		var z bytes.Buffer
		zw, err := logio.NewWriter(&z, logio.Zstd, 0)
		if err != nil {
			t.Fatal(err)
		}
		if s := run(zw, concurrent); s.sw == nil {
			t.Fatal("the session did not give a zstd log the stacks' texts apart")
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if zw.TextBytes() != int64(whole.Len()) {
			t.Errorf("concurrent %v: the writer counts %d bytes of text, the log has %d", concurrent, zw.TextBytes(), whole.Len())
		}
		got, err := io.ReadAll(logio.NewReader(&z))
		if err != nil {
			t.Fatalf("concurrent %v: %v", concurrent, err)
		}
		if whole.Len() < 4*outSize || !bytes.Equal(got, whole.Bytes()) {
			t.Fatalf("concurrent %v: the zstd log decodes to %d bytes, the whole text is %d (want equal, over several buffers)", concurrent, len(got), whole.Len())
		}
	}
}

// writeStackedEvents has a session write 20,000 events over 50 stacks into
// w, draining every 1,000, going Concurrent at the 5,000th where asked;
// the caller flushes.
func writeStackedEvents(w io.Writer, concurrent bool) *Session {
	s := New(Config{Out: w, StackDepth: 8})
	s.AddProcess(1, false)
	s.procs[1].scanned = true
	for id := uint64(1); id <= 50; id++ {
		s.Stack(&event.Stack{ID: id, TGID: 1, Stop: event.StopEnd, Frames: []event.Frame{{Addr: 0x1000 * id}, {Addr: 0x2000}, {Addr: 0x3000 + id}}})
	}
	for i := range 20000 {
		if concurrent && i == 5000 {
			s.Concurrent()
		}
		e := ev(uint64(100+i), 1, event.KindAlloc, logfmt.OpMalloc, uint64(0x1000+i*0x10), uint64(16+i%300), "main")
		e.Stack = uint64(1 + i%50)
		s.Add(e)
		if i%1000 == 999 {
			s.Drain(false)
		}
	}
	s.Drain(true)
	return s
}
