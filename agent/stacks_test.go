package agent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/tracer"
)

// TestStackStopReasons: a stack the DWARF walk took carries the kernel's
// reason for stopping into the log, every frame kept (the frame-pointer
// path cuts at a root symbol or a frame in no file and guesses "fp");
// a walk that reached its end is not marked.
func TestStackStopReasons(t *testing.T) {
	for _, c := range []struct {
		stop   tracer.StopReason
		frames int
		want   string
	}{
		{tracer.StopEnd, 3, ""},
		{tracer.StopDepth, 3, "depth"},
		{tracer.StopNoInfo, 3, "no-unwind-info"},
		{tracer.StopBadRead, 2, "bad-read"},
		{tracer.StopFP, 1, "fp"},
		// The kernel's frame-pointer walk says nothing: frames in no
		// file after frame 0 are its garbage, cut and marked fp.
		{tracer.StopFPWalk, 1, "fp"},
	} {
		var buf bytes.Buffer
		s := New(Config{Out: &buf, StackDepth: 8})
		s.AddProcess(1, false)
		s.procs[1].scanned = true
		// Anonymous memory (ino 0): no module, as JIT code would be.
		fr := []tracer.Frame{{Addr: 0x1000}, {Addr: 0x2000}, {Addr: 0x3000}}
		s.Stack(&tracer.Stack{ID: 7, TGID: 1, Stop: c.stop, Frames: fr[:c.frames]})
		e := ev(100, 1, tracer.KindAlloc, logfmt.OpMalloc, 0xa0, 100, "main")
		e.Stack = 7
		s.Add(e)
		s.Drain(true)
		s.Flush()
		out := buf.String()
		nframes := strings.Count(out, "  #")
		wantFrames := c.frames
		if c.stop == tracer.StopFPWalk {
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
