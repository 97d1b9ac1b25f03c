package analysis

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

func (l *logb) truncated(reason string) *logb {
	return l.meta("stack", "truncated", "1", "reason", reason)
}

func TestTruncatedStacks(t *testing.T) {
	m := New()
	var l logb
	l.meta("header", "pid", "1", "mode", "bpf")
	l.truncated("fp") // stray: no event before it
	l.alloc(1, "m", "malloc", 1, 8, 0x10).frame(0, "f1", 1).frame(1, "f2", 2).truncated("fp")
	l.alloc(1, "m", "malloc", 2, 8, 0x20).frame(0, "f1", 1).frame(1, "f2", 2).truncated("fp")   // the same stack again
	l.alloc(1, "m", "malloc", 3, 8, 0x30).frame(0, "g1", 1).frame(1, "g2", 2).frame(2, "g3", 3) // cut by --stack-depth 3
	applyText(m, l.b)
	// The stack line comes in the next read: it still belongs to the event before it.
	l.b = nil
	l.truncated("depth")
	l.alloc(1, "m", "malloc", 4, 8, 0x40).frame(0, "h1", 1)                                   // whole
	l.free(1, "m", "free", 5, 8, 0x10).frame(0, "k1", 1).truncated("bad-read")                // a free's stack
	l.alloc(1, "m", "malloc", 6, 8, 0x60).frame(0, "n1", 1).truncated("no-unwind-info")       //
	l.alloc(1, "m", "malloc", 7, 8, 0x70).meta("thread", "tid", "1", "pid", "1", "name", "m") // no frames: counted, no stack marked
	l.truncated("depth")
	l.alloc(1, "m", "malloc", 8, 8, 0x80)
	for i := 0; i < 200; i++ {
		l.frame(i, fmt.Sprintf("deep%d", i), uint64(i))
	}
	l.alloc(1, "m", "malloc", 9, 8, 0x90)
	applyText(m, l.b)
	m.Finish()

	got := m.Truncations()
	want := []Truncation{{"depth", 1, 2}, {"fp", 1, 2}, {"bad-read", 1, 1}, {ReasonMaxFrames, 1, 1}, {"no-unwind-info", 1, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("truncations\n got %v\nwant %v", got, want)
	}
	if s, e := TruncatedTotal(got); s != 5 || e != 7 {
		t.Fatalf("totals %d stacks, %d events", s, e)
	}
	for i, want := range []string{"fp", "fp", "depth", "", "no-unwind-info", "", ReasonMaxFrames, ""} {
		if got := m.StackTruncation(m.Stack[i]); got != want {
			t.Errorf("allocation %d (stack %d): truncation %q, want %q", i, m.Stack[i], got, want)
		}
	}
	if got := m.StackTruncation(m.FreeStack[0]); got != "bad-read" {
		t.Errorf("free stack: %q", got)
	}
	if m.StackTruncation(0) != "" {
		t.Error("the empty stack was marked")
	}
	if n := len(m.Frames(m.Stack[6])); n != logfmt.MaxFrames {
		t.Fatalf("kept %d frames of 200", n)
	}
	if m.Counts.SkippedFrames != 200-logfmt.MaxFrames || m.Counts.Frames != 210 {
		t.Fatalf("frames %d, skipped %d", m.Counts.Frames, m.Counts.SkippedFrames)
	}
}

// frameFlood is one allocation followed by n distinct frame lines, made
// as they are read so that the test holds no copy of the log.
type frameFlood struct {
	n, i int
	buf  []byte
}

func (f *frameFlood) Read(p []byte) (int, error) {
	for len(f.buf) < len(p) && f.i <= f.n {
		if f.i == 0 {
			f.buf = logfmt.AppendAlloc(f.buf, 1, "m", "malloc", 1, 8, 8, 0x10)
		} else {
			f.buf = logfmt.AppendFrame(f.buf, f.i, "/lib/libdeep.so", fmt.Sprintf("_Z5deep%dv", f.i), uint64(f.i), 0x7f0000000000+uint64(f.i))
		}
		f.i++
	}
	if len(f.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, f.buf)
	f.buf = f.buf[:copy(f.buf, f.buf[n:])]
	return n, nil
}

// One event followed by a million frame lines: the model keeps
// logfmt.MaxFrames of them and counts the rest; its memory stays small.
func TestFrameFloodBounded(t *testing.T) {
	const n = 1_000_000
	m := New()
	if err := m.ReadAll(&frameFlood{n: n}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if got := len(m.Frames(m.Stack[0])); got != logfmt.MaxFrames {
		t.Fatalf("kept %d frames", got)
	}
	if m.NumFrames() != logfmt.MaxFrames {
		t.Fatalf("interned %d frames", m.NumFrames())
	}
	if m.Counts.SkippedFrames != n-logfmt.MaxFrames {
		t.Fatalf("skipped %d", m.Counts.SkippedFrames)
	}
	if m.StackTruncation(m.Stack[0]) != ReasonMaxFrames {
		t.Fatalf("stack not marked cut: %q", m.StackTruncation(m.Stack[0]))
	}
	// Interning every frame took over 100 MB.
	if ms.HeapAlloc > 32<<20 {
		t.Fatalf("heap %d MB after reading one event and %d frames", ms.HeapAlloc>>20, n)
	}
	runtime.KeepAlive(m)
}
