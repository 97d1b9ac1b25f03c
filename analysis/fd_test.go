package analysis

import (
	"fmt"
	"strings"
	"testing"
)

// fdSummary lists descriptors as "pid:fd:kind:state" in SelectFDs order.
func fdSummary(m *Model, ids []int) string {
	var s []string
	for _, i := range ids {
		d := m.Descriptors()[i]
		s = append(s, fmt.Sprintf("%d:%d:%s:%s", d.PID, d.FD, d.Kind, m.FDState(i)))
	}
	return strings.Join(s, " ")
}

// A log with a header, one process (100) and its thread 101 whose answers
// are worked out by hand: what is closed, what is reused, what leaks.
const fdLog = `[memtrace] header version=1 pid=100 comm=app cmd=./app start=0 mode=launch
[memtrack] tid=100 (app            ) malloc ts=1 size=16 total=16 ptr=0x10
[memtrace] thread tid=101 pid=100 name=worker
[memtrack] tid=101 (worker         ) malloc ts=2 size=16 total=16 ptr=0x20
[memtrace] fd event=open tid=100 pid=100 ts=10 name=app fd=3 call=openat kind=file path=/etc/hosts flags=0x80000 cloexec=1
[memtrace] fd event=close tid=100 pid=100 ts=11 name=app fd=3 call=close kind=file path=/etc/hosts
[memtrace] fd event=open tid=100 pid=100 ts=12 name=app fd=3 call=openat kind=file path=/tmp/reused
[memtrace] fd event=open tid=100 pid=100 ts=13 name=app fd=4 call=pipe2 kind=pipe peer=5
[memtrace] fd event=open tid=100 pid=100 ts=13 name=app fd=5 call=pipe2 kind=pipe peer=4
[memtrace] fd event=open tid=101 pid=100 ts=14 name=worker fd=6 call=dup kind=pipe old=4
[memtrace] fd event=open tid=101 pid=100 ts=15 name=worker fd=7 call=socket kind=socket domain=inet
[memtrace] fd event=open tid=101 pid=100 ts=16 name=worker fd=8 call=eventfd2 kind=eventfd
[memtrace] fd event=open tid=101 pid=100 ts=17 name=worker fd=9 call=memfd_create kind=memfd path=buf
[memtrace] fd event=close tid=100 pid=100 ts=20 name=app fd=8 call=close_range kind=eventfd
[memtrace] fd event=close tid=100 pid=100 ts=20 name=app fd=9 call=close_range kind=memfd
[memtrace] fd event=close tid=100 pid=100 ts=21 name=app fd=0 call=close kind=unknown
[memtrace] fd event=open tid=100 pid=100 ts=22 name=app fd=10 call=ioctl kind=dmabuf dev=11 flags=0x80002 cloexec=1
[memtrace] dmabuf event=alloc tid=100 pid=100 ts=22 name=app fd=10 size=4096 heap=system dev=11 flags=0x80002 heap_flags=0x0 buf=1
[memtrace] proc event=exit pid=100 ts=30
[memtrace] fd event=leak tid=100 pid=100 ts=12 fd=3 call=openat kind=file path=/tmp/reused
[memtrace] fd event=leak tid=100 pid=100 ts=13 fd=4 call=pipe2 kind=pipe
[memtrace] fd event=leak tid=100 pid=100 ts=13 fd=5 call=pipe2 kind=pipe
[memtrace] fd event=leak tid=101 pid=100 ts=14 fd=6 call=dup kind=pipe
[memtrace] fd event=leak tid=101 pid=100 ts=15 fd=7 call=socket kind=socket
[memtrace] fd event=leak tid=100 pid=100 ts=22 fd=10 call=ioctl kind=dmabuf cloexec=1 buf=1 size=4096
[memtrace] fd event=leak tid=100 pid=100 ts=5 fd=12 call=openat kind=file path=/from/before
`

func TestFDLeaks(t *testing.T) {
	m := load(t, []byte(fdLog))
	if got, want := fdSummary(m, m.FDLeaks(-1)), "100:12:file:leak 100:3:file:leak 100:4:pipe:leak 100:5:pipe:leak 100:6:pipe:leak 100:7:socket:leak 100:10:dmabuf:leak"; got != want {
		t.Fatalf("leaks\n got %s\nwant %s", got, want)
	}
	if got, want := fdSummary(m, m.SelectFDs(FilterFreed, -1, NoThread)), "100:3:file:closed 100:8:eventfd:closed 100:9:memfd:closed"; got != want {
		t.Fatalf("closed\n got %s\nwant %s", got, want)
	}
	if n := m.FDLeakCount(-1); n != 7 {
		t.Fatalf("FDLeakCount %d, want 7", n)
	}
	ds := m.Descriptors()
	first := ds[0]
	if first.Path != "/etc/hosts" || !first.Closed || first.CloseCall != "close" || first.CloseTS != 11 || !first.Cloexec {
		t.Fatalf("first /etc/hosts: %+v", first)
	}
	for _, i := range m.FDLeaks(-1) {
		d := ds[i]
		if !d.TracerLeak {
			t.Errorf("fd %d: not marked as listed by the tracer", d.FD)
		}
		if d.FromLeak != (d.FD == 12) {
			t.Errorf("fd %d: FromLeak %v", d.FD, d.FromLeak)
		}
		if d.FD == 10 && (d.Size != 4096 || d.Heap != "system" || d.Buf != 1) {
			t.Errorf("dma-buf: %+v", d)
		}
		if d.FD == 3 && d.Path != "/tmp/reused" {
			t.Errorf("reused fd 3: %+v", d)
		}
	}
	// The worker (thread index 1) opened 6 and 7 (its leaks), 8 and 9.
	w := uint32(1)
	if m.Threads[w].TID != 101 {
		t.Fatalf("thread 1 is %d", m.Threads[w].TID)
	}
	if got, want := fdSummary(m, m.SelectFDs(FilterLeaks, -1, w)), "100:6:pipe:leak 100:7:socket:leak"; got != want {
		t.Fatalf("worker leaks %s, want %s", got, want)
	}
	if got := fdSummary(m, m.SelectFDs(FilterAll, 5, NoThread)); got != "" {
		t.Fatalf("process filter 5 (none): %s", got)
	}
	c := m.FDCounts()
	if c.Opens != 9 || c.Closes != 4 || c.UnknownCloses != 1 || c.Reused != 0 {
		t.Fatalf("counts %+v", c)
	}
	if bl := m.BufferLeaks(-1); len(bl) != 1 || m.Buffers()[bl[0]].Size != 4096 {
		t.Fatalf("buffer leaks %v", bl)
	}
}

// A killed program writes no exit line: what is open at the end of the
// log leaks, and before the end it is only open.
func TestFDLeakAtEndOfLog(t *testing.T) {
	text := `[memtrace] fd event=open tid=7 pid=7 ts=1 name=a fd=3 call=openat kind=file path=/a
[memtrace] fd event=open tid=7 pid=7 ts=2 name=a fd=4 call=socket kind=socket
[memtrace] fd event=close tid=7 pid=7 ts=3 name=a fd=3 call=close kind=file
[memtrace] fd event=open tid=7 pid=7 ts=4 name=a fd=3 call=dup kind=socket old=4
[memtrace] fd event=open tid=7 pid=7 ts=5 name=a fd=5 call=openat kind=file path=/b
[memtrace] fd event=open tid=7 pid=7 ts=6 name=a fd=5 call=openat kind=file path=/c
`
	m := New()
	applyText(m, []byte(text))
	if got, want := fdSummary(m, m.SelectFDs(FilterAll, -1, NoThread)), "7:3:file:closed 7:4:socket:open 7:3:socket:open 7:5:file:closed 7:5:file:open"; got != want {
		t.Fatalf("live\n got %s\nwant %s", got, want)
	}
	if m.FDLeakCount(-1) != 0 {
		t.Fatalf("leaks before the end: %d", m.FDLeakCount(-1))
	}
	if c := m.FDCounts(); c.Reused != 1 {
		t.Fatalf("reused %d, want 1 (fd 5 opened twice)", c.Reused)
	}
	m.Finish()
	if got, want := fdSummary(m, m.FDLeaks(-1)), "7:4:socket:leak 7:3:socket:leak 7:5:file:leak"; got != want {
		t.Fatalf("at end\n got %s\nwant %s", got, want)
	}
}

// A fork copies the parent's open descriptors; the child's closes are its
// own, and the parent's exit makes only the parent's leaks.
func TestFDFork(t *testing.T) {
	text := `[memtrace] fd event=open tid=1 pid=1 ts=1 name=p fd=3 call=pipe kind=pipe peer=4
[memtrace] fd event=open tid=1 pid=1 ts=1 name=p fd=4 call=pipe kind=pipe peer=3
[memtrace] proc event=fork pid=2 ppid=1 ts=2
[memtrace] fd event=close tid=2 pid=2 ts=3 name=c fd=3 call=close kind=pipe
[memtrace] fd event=close tid=1 pid=1 ts=4 name=p fd=4 call=close kind=pipe
[memtrace] proc event=exit pid=1 ts=5
[memtrace] fd event=leak tid=1 pid=1 ts=1 fd=3 call=pipe kind=pipe
[memtrace] fd event=close_range tid=2 pid=2 ts=6 name=c first=0 last=100
`
	m := New()
	applyText(m, []byte(text))
	if got, want := fdSummary(m, m.SelectFDs(FilterAll, -1, NoThread)), "1:3:pipe:leak 1:4:pipe:closed 2:3:pipe:closed 2:4:pipe:closed"; got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	for _, i := range m.SelectFDs(FilterAll, m.procIdx[2], NoThread) {
		if !m.Descriptors()[i].Inherited {
			t.Fatalf("child fd %d not inherited", m.Descriptors()[i].FD)
		}
	}
}

// Bad descriptor lines are counted as bad lines and do not stop the model.
func TestFDBadLines(t *testing.T) {
	text := `[memtrace] fd event=open tid=x pid=1 ts=1 fd=3
[memtrace] fd event=open pid=1 ts=1 fd=3
[memtrace] fd event=open tid=1 pid=1 ts=1 call=openat
[memtrace] fd event=leak tid=1 pid=1 ts=1 fd=-4
[memtrace] dmabuf event=release tid=1 pid=1 ts=1 buf=99
[memtrace] fd event=close tid=1 pid=1 ts=1 fd=9 call=close kind=file
[memtrace] fd event=open tid=1 pid=1 ts=2 fd=3 call=openat kind=file
`
	m := load(t, []byte(text))
	if m.Counts.Malformed != 4 {
		t.Fatalf("malformed %d, want 4", m.Counts.Malformed)
	}
	if got := fdSummary(m, m.FDLeaks(-1)); got != "1:3:file:leak" {
		t.Fatalf("leaks %s", got)
	}
	if c := m.FDCounts(); c.UnknownCloses != 1 {
		t.Fatalf("unknown closes %d", c.UnknownCloses)
	}
}

// The descriptor logs join the fuzz corpus (and TestFuzzSeeds' mixes).
func init() { fuzzSeeds = append(fuzzSeeds, fdLog) }
