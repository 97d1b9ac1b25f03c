package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/event/fdevent"
	"github.com/memtrace/memtrace/logfmt"
)

const testPID = 100

// feed applies events to a table and returns the lines it makes, as a log
// would hold them (without the common head: tid, pid, name).
type feed struct {
	t     *testing.T
	tab   *fdevent.Table
	lines []string
	ts    uint64
}

func newFeed(t *testing.T, track config.Track) *feed {
	return &feed{t: t, tab: fdevent.NewTable(track)}
}

func (f *feed) emit(o *fdevent.Event) {
	r := FDRecord(o, 0)
	line := string(logfmt.AppendFD(nil, &r))
	// Drop the fields every line has, to keep the expectations short;
	// check them once here.
	var keep []string
	for _, field := range strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), logfmt.TracePrefix)) {
		switch {
		case strings.HasPrefix(field, "tid="), strings.HasPrefix(field, "name="):
		case strings.HasPrefix(field, "pid="):
			if field != "pid=100" && field != "pid=101" {
				f.t.Errorf("%s: %s", line, field)
			}
		case strings.HasPrefix(field, "ts="):
		default:
			keep = append(keep, field)
		}
	}
	f.lines = append(f.lines, strings.Join(keep, " "))
}

func (f *feed) apply(e fdevent.Event) {
	f.ts += 1000
	if e.TGID == 0 {
		e.TGID = testPID
	}
	e.TID = e.TGID
	e.TS = f.ts
	copy(e.Comm[:], "prog")
	f.tab.Apply(&e, f.emit)
}

func (f *feed) expect(want ...string) {
	f.t.Helper()
	if !slices.Equal(f.lines, want) {
		f.t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(f.lines, "\n"), strings.Join(want, "\n"))
	}
	f.lines = nil
}

func open(call fdevent.Call, fd int32, path string) fdevent.Event {
	return fdevent.Event{Type: fdevent.TypeOpen, Call: call, FD: fd, FD2: -1, Path: path}
}

func dup(call fdevent.Call, old, fd int32) fdevent.Event {
	return fdevent.Event{Type: fdevent.TypeOpen, Call: call, FD: fd, FD2: old}
}

func closeEv(fd int32) fdevent.Event {
	return fdevent.Event{Type: fdevent.TypeClose, Call: fdevent.CallClose, FD: fd, FD2: -1}
}

// TestDmabufSharedByDups: a buffer is released when the last descriptor
// of its description goes, whichever call closes it.
func TestDmabufSharedByDups(t *testing.T) {
	f := newFeed(t, config.TrackFD|config.TrackDmabuf)
	f.apply(open(fdevent.CallOpenat, 3, "/dev/dma_heap/system"))
	f.apply(open(fdevent.CallOpenat, 9, "/tmp/x"))
	f.apply(fdevent.Event{Type: fdevent.TypeDmabufAlloc, Call: fdevent.CallIoctl, FD: 7, FD2: 3, Size: 4096, Path: "system", Flags: 0x80002})
	f.apply(dup(fdevent.CallDup, 7, 8))
	f.apply(dup(fdevent.CallDup2, 7, 9))
	f.apply(closeEv(7))
	f.apply(fdevent.Event{Type: fdevent.TypeCloseRange, Call: fdevent.CallCloseRange, FD: 8, FD2: -1})
	f.expect(
		"fd event=open fd=3 call=openat kind=file path=/dev/dma_heap/system",
		"fd event=open fd=9 call=openat kind=file path=/tmp/x",
		"fd event=open fd=7 call=ioctl kind=dmabuf dev=3 flags=0x80002 cloexec=1",
		"dmabuf event=alloc fd=7 size=4096 heap=system dev=3 flags=0x80002 heap_flags=0x0 buf=1",
		"fd event=open fd=8 call=dup kind=dmabuf old=7",
		"fd event=close fd=9 call=dup2 kind=file path=/tmp/x",
		"fd event=open fd=9 call=dup2 kind=dmabuf old=7",
		"fd event=close fd=7 call=close kind=dmabuf",
		"fd event=close fd=8 call=close_range kind=dmabuf",
		"fd event=close fd=9 call=close_range kind=dmabuf",
		"dmabuf event=release fd=9 size=4096 heap=system buf=1 call=close_range",
	)
	if open := f.tab.Open(testPID); len(open) != 1 || open[0].FD != 3 {
		t.Errorf("open: %+v", open)
	}
}

// TestBuffersOnly: tracking dmabuf and ion without fd gives only buffer
// lines, and releases still follow the descriptors.
func TestBuffersOnly(t *testing.T) {
	f := newFeed(t, config.TrackDmabuf|config.TrackION)
	f.apply(fdevent.Event{Type: fdevent.TypeDmabufAlloc, Call: fdevent.CallIoctl, FD: 7, FD2: 3, Size: 1 << 20, Path: "system"})
	f.apply(fdevent.Event{Type: fdevent.TypeIONAlloc, Call: fdevent.CallIoctl, FD: 8, FD2: 4, Size: 8192, Aux: 0x4})
	f.apply(dup(fdevent.CallFcntl, 7, 20))
	f.apply(closeEv(8))
	f.apply(closeEv(7))
	if b := f.tab.Buffers(testPID); len(b) != 1 || b[0].Buf != 1 || !slices.Equal(b[0].FDs, []int32{20}) || b[0].Size != 1<<20 {
		t.Errorf("buffers: %+v", b)
	}
	f.apply(closeEv(20))
	f.expect(
		"dmabuf event=alloc fd=7 size=1048576 heap=system dev=3 flags=0x0 heap_flags=0x0 buf=1",
		"ion event=alloc fd=8 size=8192 heap_mask=0x4 flags=0x0 dev=4 buf=2",
		"ion event=release fd=8 size=8192 heap_mask=0x4 buf=2 call=close",
		"dmabuf event=release fd=20 size=1048576 heap=system buf=1 call=close",
	)
	if b := f.tab.Buffers(testPID); len(b) != 0 {
		t.Errorf("buffers after release: %+v", b)
	}
}

// TestIONLegacyHandles: handles are freed by ION_IOC_FREE or released
// with the last descriptor of their device.
func TestIONLegacyHandles(t *testing.T) {
	f := newFeed(t, config.TrackION)
	f.apply(open(fdevent.CallOpenat, 5, "/dev/ion"))
	f.apply(fdevent.Event{Type: fdevent.TypeIONLegacyAlloc, Call: fdevent.CallIoctl, FD: 1, FD2: 5, Size: 4096, Aux: 1, Extra: 4096})
	f.apply(fdevent.Event{Type: fdevent.TypeIONLegacyAlloc, Call: fdevent.CallIoctl, FD: 2, FD2: 5, Size: 8192, Aux: 2})
	f.apply(fdevent.Event{Type: fdevent.TypeIONLegacyAlloc, Call: fdevent.CallIoctl, FD: 3, FD2: 5, Size: 100, Aux: 2})
	f.apply(fdevent.Event{Type: fdevent.TypeIONFree, Call: fdevent.CallIoctl, FD: 1, FD2: 5})
	f.apply(fdevent.Event{Type: fdevent.TypeIONFree, Call: fdevent.CallIoctl, FD: 1, FD2: 5}) // twice: nothing
	f.apply(dup(fdevent.CallDup, 5, 6))
	f.apply(closeEv(5))
	if b := f.tab.Buffers(testPID); len(b) != 2 || b[0].Handle != 2 || !slices.Equal(b[0].FDs, []int32{6}) {
		t.Errorf("buffers: %+v", b)
	}
	f.apply(closeEv(6))
	f.expect(
		"ion event=alloc handle=1 size=4096 heap_mask=0x1 flags=0x0 dev=5 align=4096 layout=legacy buf=1",
		"ion event=alloc handle=2 size=8192 heap_mask=0x2 flags=0x0 dev=5 align=0 layout=legacy buf=2",
		"ion event=alloc handle=3 size=100 heap_mask=0x2 flags=0x0 dev=5 align=0 layout=legacy buf=3",
		"ion event=release handle=1 dev=5 size=4096 heap_mask=0x1 buf=1 call=ioctl",
		"ion event=release handle=2 dev=5 size=8192 heap_mask=0x2 buf=2 call=close",
		"ion event=release handle=3 dev=5 size=100 heap_mask=0x2 buf=3 call=close",
	)
}

// TestForkExec: a child shares its parent's descriptions; exec closes the
// close-on-exec descriptors.
func TestForkExec(t *testing.T) {
	f := newFeed(t, config.TrackFD|config.TrackDmabuf)
	f.apply(fdevent.Event{Type: fdevent.TypeDmabufAlloc, Call: fdevent.CallIoctl, FD: 7, FD2: 3, Size: 64, Path: "system", Flags: oCloexec})
	f.apply(open(fdevent.CallOpenat, 4, "/etc/a"))
	f.apply(fdevent.Event{Type: fdevent.TypeOpen, Call: fdevent.CallOpenat, FD: 5, FD2: -1, Path: "/etc/b", Flags: oCloexec})
	f.tab.Fork(testPID, testPID+1)
	f.lines = nil
	f.apply(closeEv(7)) // parent: the child still holds it
	f.tab.Exec(testPID+1, 99000, f.emit)
	f.expect(
		"fd event=close fd=7 call=close kind=dmabuf",
		"fd event=close fd=5 call=execve kind=file path=/etc/b",
		"fd event=close fd=7 call=execve kind=dmabuf",
		"dmabuf event=release fd=7 size=64 heap=system buf=1 call=execve",
	)
	got := f.tab.Exit(testPID + 1)
	if len(got) != 1 || got[0].FD != 4 || got[0].Path != "/etc/a" || got[0].Kind != fdevent.KindFile || got[0].Call != fdevent.CallOpenat {
		t.Errorf("child's leaks: %+v", got)
	}
	if o := f.tab.Open(testPID + 1); len(o) != 0 {
		t.Errorf("after Exit: %+v", o)
	}
	if o := f.tab.Open(testPID); len(o) != 2 {
		t.Errorf("parent: %+v", o)
	}
}

// TestUnknownDescriptors: in attach mode descriptors opened before tracing
// appear only in closes and dups, as kind unknown, and never as leaks.
func TestUnknownDescriptors(t *testing.T) {
	f := newFeed(t, config.TrackFD)
	f.apply(closeEv(3))
	f.apply(dup(fdevent.CallDup, 0, 10))
	f.apply(open(fdevent.CallOpenat, 11, "/x"))
	f.apply(open(fdevent.CallOpenat, 11, "/y")) // a close memtrace did not see
	f.expect(
		"fd event=close fd=3 call=close kind=unknown",
		"fd event=open fd=10 call=dup kind=unknown old=0",
		"fd event=open fd=11 call=openat kind=file path=/x",
		"fd event=open fd=11 call=openat kind=file path=/y",
	)
	if f.tab.Stale != 1 {
		t.Errorf("stale = %d", f.tab.Stale)
	}
	open := f.tab.Open(testPID)
	if len(open) != 2 || open[0].FD != 10 || open[1].FD != 11 || open[1].Path != "/y" {
		t.Errorf("open: %+v", open)
	}
}

// TestPairs: pipes and socketpairs are two descriptors, each with its own
// description, each line naming the other end.
func TestPairs(t *testing.T) {
	f := newFeed(t, config.TrackFD)
	f.apply(fdevent.Event{Type: fdevent.TypeOpen, Call: fdevent.CallPipe2, FD: 3, FD2: 4, Flags: oCloexec})
	f.apply(fdevent.Event{Type: fdevent.TypeOpen, Call: fdevent.CallSocketpair, FD: 5, FD2: 6, Aux: 1, Flags: 1})
	f.apply(closeEv(3))
	f.expect(
		"fd event=open fd=3 call=pipe2 kind=pipe peer=4 flags=0x80000 cloexec=1",
		"fd event=open fd=4 call=pipe2 kind=pipe peer=3 flags=0x80000 cloexec=1",
		"fd event=open fd=5 call=socketpair kind=socket peer=6 domain=unix flags=0x1",
		"fd event=open fd=6 call=socketpair kind=socket peer=5 domain=unix flags=0x1",
		"fd event=close fd=3 call=close kind=pipe",
	)
}
