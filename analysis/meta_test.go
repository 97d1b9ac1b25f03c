package analysis

import (
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
)

// Every [memtrace] line written by its typed writer reads back into the
// model with what the record said: the reader and the writers share
// logfmt's one grammar.
func TestMetaLinesFromTypedWriters(t *testing.T) {
	start := time.Date(2025, 3, 1, 9, 30, 0, 123456789, time.UTC)
	var b []byte
	b = logfmt.AppendHeader(b, logfmt.Header{Version: "9", PID: 100, Comm: "app", Cmd: "./app \"x\"", Start: start, Mode: logfmt.ModePreload})
	b = logfmt.AppendThread(b, logfmt.Thread{TID: 101, PID: 100, Name: "worker one"})
	b = logfmt.AppendAlloc(b, 101, "worker one", "malloc", 5, 10, 10, 0x10)
	b = logfmt.AppendFrame(b, 0, "./app", "f", 1, 0x1001)
	b = logfmt.AppendStackTruncated(b, "depth")
	b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcFork, PID: 200, PPID: 100, TS: 6})
	b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcAttach, PID: 300, Comm: "daemon", Cmd: "/usr/bin/daemon -f"})
	b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcUntraced, PID: 400, TS: 7, Reason: "too many open files"})
	b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcExit, PID: 200, TS: 8, HasStatus: true, Status: 3})
	b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcExit, PID: 300, TS: 9, Signal: "SIGSEGV"})
	b = logfmt.AppendLost(b, logfmt.Lost{Count: 4, Total: 4, TS: 10})
	b = logfmt.AppendNotice(b, logfmt.Notice{Msg: "waiting for a viewer"})
	b = logfmt.AppendSummary(b, logfmt.Summary{Events: 1, Allocs: 1, Lost: 6, DurationUS: 11})
	m := load(t, b)

	if h := m.Header; !h.Seen || h.PID != 100 || h.Comm != "app" || h.Cmd != "./app \"x\"" || h.Version != "9" ||
		h.Mode != logfmt.ModePreload || h.Start != "2025-03-01T09:30:00.123456789Z" {
		t.Errorf("header %+v", h)
	}
	if m.Counts.Malformed != 0 || m.Counts.Meta != 11 {
		t.Errorf("counts %+v, want 11 meta lines and none malformed", m.Counts)
	}
	if len(m.Threads) != 1 || m.Threads[0].Name != "worker one" || m.Procs[m.Threads[0].Proc].PID != 100 {
		t.Errorf("threads %+v", m.Threads)
	}
	if tr := m.Truncations(); len(tr) != 1 || tr[0].Reason != "depth" || tr[0].Events != 1 {
		t.Errorf("truncations %+v, want the stack line's reason=depth", tr)
	}
	byPID := map[int64]*Proc{}
	for i := range m.Procs {
		byPID[m.Procs[i].PID] = &m.Procs[i]
	}
	if p := byPID[200]; p == nil || p.PPID != 100 || !p.Exited || !p.HasStatus || p.ExitStatus != 3 {
		t.Errorf("forked process %+v", p)
	}
	if p := byPID[300]; p == nil || !p.Attached || p.Comm != "daemon" || p.Cmd != "/usr/bin/daemon -f" || !p.Exited || p.ExitSignal != "SIGSEGV" || p.HasStatus {
		t.Errorf("attached process %+v", p)
	}
	if p := byPID[400]; p == nil || p.Untraced != "too many open files" {
		t.Errorf("untraced process %+v", p)
	}
	if m.LostEvents != 6 || !m.Ended || len(m.Notices) != 1 || m.Notices[0] != "waiting for a viewer" {
		t.Errorf("lost %d, ended %v, notices %q", m.LostEvents, m.Ended, m.Notices)
	}
}

// A [memtrace] line whose fields do not parse is counted as malformed and
// not applied in part: a thread with a broken pid= is not given to a
// process, an exit with a status out of range does not end its process.
// A header keeps what parses: a start= in another format loses only it.
func TestMalformedMetaLinesCounted(t *testing.T) {
	var l logb
	l.meta("header", "pid", "100", "comm", "app", "mode", "bpf")
	l.raw("[memtrace] thread tid=101 pid=1x name=w\n")
	l.raw("[memtrace] proc event=exit pid=100 ts=5 status=300\n")
	l.raw("[memtrace] proc event=fork pid=200 ppid=100 ts=nope\n")
	l.raw("[memtrace] lost count=-3 total=3 ts=1\n")
	l.alloc(101, "w", "malloc", 6, 10, 0x10)
	m := load(t, l.b)
	if m.Counts.Malformed != 4 {
		t.Errorf("%d malformed lines, want 4 (%+v)", m.Counts.Malformed, m.Counts)
	}
	if len(m.Procs) != 1 || m.Procs[0].Exited {
		t.Errorf("procs %+v: a malformed proc line was applied", m.Procs)
	}
	if m.LostEvents != 0 {
		t.Errorf("lost %d from a malformed lost line", m.LostEvents)
	}

	h := load(t, []byte("[memtrace] header version=1 pid=7 comm=app start=yesterday mode=bpf\n"))
	if !h.Header.Seen || h.Header.PID != 7 || h.Header.Comm != "app" || h.Header.Mode != "bpf" || h.Header.Start != "" || h.Counts.Malformed != 0 {
		t.Errorf("a header with an unreadable start=: %+v, counts %+v", h.Header, h.Counts)
	}
}
