package agent

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/event/fdevent"
	"github.com/memtrace/memtrace/logfmt"
)

// TestFDWaitsForItsStack: a descriptor event whose stack record has not
// been read yet (it comes through the allocation tracer's ring, read apart
// from the descriptors') is not written without it, nor is any newer
// event; once the stack is there the line carries it. One whose stack
// never came goes out, without it, fdStackWait after the window.
func TestFDWaitsForItsStack(t *testing.T) {
	var buf bytes.Buffer
	s := fdSession(&buf)
	now := monotonicNS()
	s.AddFD(&fdevent.Event{TS: now - uint64(20*time.Millisecond), TGID: 1, TID: 1, FD: 3, Type: fdevent.TypeOpen, Call: fdevent.CallOpenat, Path: "/etc/passwd", Stack: 7})
	s.Add(ev(now-uint64(10*time.Millisecond), 1, event.KindAlloc, logfmt.OpMalloc, 0x10, 100, "app"))
	s.Drain(false)
	s.Flush()
	if out := buf.String(); strings.Contains(out, "/etc/passwd") || strings.Contains(out, "ptr=0x10") {
		t.Fatalf("written before the descriptor event's stack came:\n%s", out)
	}
	s.ResolvedStack(7, []Frame{{Symbol: "open_stream"}, {Symbol: "main"}})
	s.Drain(false)
	s.Flush()
	out := buf.String()
	fd, alloc := strings.Index(out, "/etc/passwd"), strings.Index(out, "ptr=0x10")
	if fd < 0 || alloc < fd || !strings.Contains(out, `stack="open_stream < main"`) {
		t.Fatalf("once its stack came, want the descriptor line with it, then the newer allocation:\n%s", out)
	}

	// A stack that never comes: the event waits fdStackWait, no longer.
	buf.Reset()
	s.AddFD(&fdevent.Event{TS: now - fdStackWait - uint64(time.Second), TGID: 1, TID: 1, FD: 4, Type: fdevent.TypeOpen, Call: fdevent.CallOpenat, Path: "/etc/group", Stack: 9})
	s.Drain(false)
	s.Flush()
	if !strings.Contains(buf.String(), "/etc/group") {
		t.Fatalf("an event whose stack never came is held past fdStackWait:\n%s", buf.String())
	}
}

// TestNothingPassesTheFDHorizon: with the descriptors' reader behind (its
// horizon older than the window), an allocation event newer than the
// horizon waits, so that a descriptor event read late still goes out
// before it, in time order; once the horizon passes, both go out. A
// horizon stuck for longer than fdStackWait holds nothing back.
func TestNothingPassesTheFDHorizon(t *testing.T) {
	var buf bytes.Buffer
	s := fdSession(&buf)
	now := monotonicNS()
	s.SetFDHorizon(now - uint64(50*time.Millisecond))
	s.Add(ev(now-uint64(10*time.Millisecond), 1, event.KindAlloc, logfmt.OpMalloc, 0x10, 100, "app"))
	s.Drain(false)
	s.Flush()
	if out := buf.String(); strings.Contains(out, "ptr=0x10") {
		t.Fatalf("written past the descriptors' reader's horizon:\n%s", out)
	}
	// The reader catches up: its event is older than the allocation.
	s.AddFD(&fdevent.Event{TS: now - uint64(20*time.Millisecond), TGID: 1, TID: 1, FD: 3, Type: fdevent.TypeOpen, Call: fdevent.CallOpenat, Path: "/etc/passwd"})
	s.SetFDHorizon(monotonicNS())
	s.Drain(false)
	s.Flush()
	out := buf.String()
	fd, alloc := strings.Index(out, "/etc/passwd"), strings.Index(out, "ptr=0x10")
	if fd < 0 || alloc < fd {
		t.Fatalf("want the late descriptor line, then the newer allocation:\n%s", out)
	}

	// A reader stuck for good holds nothing back for longer than fdStackWait.
	buf.Reset()
	s.SetFDHorizon(now - fdStackWait - uint64(time.Second))
	s.Add(ev(now-uint64(5*time.Millisecond), 1, event.KindAlloc, logfmt.OpMalloc, 0x20, 100, "app"))
	s.Drain(false)
	s.Flush()
	if !strings.Contains(buf.String(), "ptr=0x20") {
		t.Fatalf("an allocation is held back by a reader stuck past fdStackWait:\n%s", buf.String())
	}
}

// fdSession is a session tracking allocations and descriptors of process
// 1, already scanned, writing to buf with a 1 ms window.
func fdSession(buf *bytes.Buffer) *Session {
	s := New(Config{Out: buf, Track: config.TrackMalloc | config.TrackFD, Window: time.Millisecond})
	s.Header(logfmt.Header{Version: "t", PID: 1, Comm: "app", Mode: logfmt.ModeBPF})
	s.AddProcess(1, false)
	s.procs[1].scanned = true
	return s
}
