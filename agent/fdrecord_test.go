package agent

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/config"
	"github.com/memtrace/memtrace/event/fdevent"
	"github.com/memtrace/memtrace/logfmt"
)

// fdRoundTrip renders e as a log line and reads it back as a reader would.
func fdRoundTrip(t *testing.T, e *fdevent.Event, start uint64) logfmt.FDRecord {
	t.Helper()
	r := FDRecord(e, start)
	b := logfmt.AppendFD(nil, &r)
	var l logfmt.Line
	if err := l.Parse(b[:len(b)-1]); err != nil || l.Kind != logfmt.KindMeta {
		t.Fatalf("%q: %v", b, err)
	}
	r, err := logfmt.ParseFD(l.Word, l.Rest)
	if err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return r
}

func TestMetaTimestamps(t *testing.T) {
	e := fdevent.Event{Type: fdevent.TypeClose, Call: fdevent.CallClose, FD: 3, TS: 5_000_000_000, TGID: 7, TID: 8}
	if r := fdRoundTrip(t, &e, 4_000_000_000); r.TS != 1_000_000 || r.PID != 7 || r.TID != 8 {
		t.Errorf("ts: %+v", r)
	}
	// Before the start (a record stamped before the agent's clock read).
	if r := fdRoundTrip(t, &e, 6_000_000_000); r.TS != 0 {
		t.Errorf("early ts: %+v", r)
	}
}

func TestMetaCloseRange(t *testing.T) {
	e := fdevent.Event{Type: fdevent.TypeCloseRange, Call: fdevent.CallCloseRange, FD: 3, FD2: -1, Flags: 2}
	r := fdRoundTrip(t, &e, 0)
	if r.Event != logfmt.FDCloseRange || r.First != 3 || r.Last != 4294967295 {
		t.Errorf("%+v", r)
	}
}

// FuzzMetaRoundTrip: whatever the kernel sends (a path with any bytes, any
// numbers), the line parses back to the same values.
func FuzzMetaRoundTrip(f *testing.F) {
	f.Add(uint8(fdevent.TypeOpen), uint8(fdevent.CallOpenat), int32(3), int32(-1), uint64(1), uint64(2), "/etc/passwd", "prog")
	f.Add(uint8(fdevent.TypeDmabufAlloc), uint8(fdevent.CallIoctl), int32(7), int32(3), uint64(4096), uint64(0), "system", "a b")
	f.Add(uint8(fdevent.TypeIONLegacyAlloc), uint8(fdevent.CallIoctl), int32(1), int32(5), uint64(4096), uint64(1), "", "x=\"")
	f.Add(uint8(fdevent.TypeOpen), uint8(fdevent.CallMemfdCreate), int32(9), int32(-1), uint64(0), uint64(0), "a\nb\x00\"c d=e", "\xff")
	f.Fuzz(func(t *testing.T, typ, call uint8, fd, fd2 int32, size, flags uint64, path, comm string) {
		if fd < 0 {
			fd = -fd - 1
		}
		if fd2 < 0 {
			fd2 = -fd2 - 1
		}
		e := fdevent.Event{Type: fdevent.Type(typ), Call: fdevent.Call(call), FD: fd, FD2: fd2, Size: size, Flags: flags, Path: path,
			TS: 1e9, TGID: 4, TID: 5}
		copy(e.Comm[:], comm)
		r := fdRoundTrip(t, &e, 0)
		if r.TS != 1e6 || r.PID != 4 || r.TID != 5 || r.Name != e.CommString() {
			t.Fatalf("head: %+v from %+v", r, e)
		}
		switch e.Type {
		case fdevent.TypeOpen:
			if r.FD != int64(fd) || r.Path != path || r.Call != e.Call.String() {
				t.Fatalf("open: %+v from %+v", r, e)
			}
		case fdevent.TypeDmabufAlloc:
			if r.FD != int64(fd) || r.Size != size || r.Heap != path || r.Dev != int64(fd2) {
				t.Fatalf("dmabuf: %+v from %+v", r, e)
			}
		case fdevent.TypeIONLegacyAlloc:
			if r.Handle != int64(fd) || r.Size != size || r.Dev != int64(fd2) {
				t.Fatalf("ion: %+v from %+v", r, e)
			}
		}
	})
}

func TestLeakLine(t *testing.T) {
	tab := fdevent.NewTable(trackAll)
	e := fdevent.Event{Type: fdevent.TypeDmabufAlloc, Call: fdevent.CallIoctl, FD: 7, FD2: 3, Size: 4096, Path: "system", TS: 3_000_000, TGID: 9, TID: 10, Flags: oCloexec}
	tab.Apply(&e, func(*fdevent.Event) {})
	e = fdevent.Event{Type: fdevent.TypeOpen, Call: fdevent.CallOpenat, FD: 4, FD2: -1, Path: "/a b", TS: 4_000_000, TGID: 9, TID: 11}
	tab.Apply(&e, func(*fdevent.Event) {})
	var got []string
	for _, o := range tab.Exit(9) {
		r := fdLeakRecord(o, 9, 1_000_000)
		got = append(got, string(logfmt.AppendFD(nil, &r)))
	}
	want := []string{
		"[memtrace] fd event=leak tid=11 pid=9 ts=3000 fd=4 call=openat kind=file path=\"/a b\"\n",
		"[memtrace] fd event=leak tid=10 pid=9 ts=2000 fd=7 call=ioctl kind=dmabuf cloexec=1 buf=1 size=4096\n",
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	var l logfmt.Line
	if err := l.Parse([]byte(got[0][:len(got[0])-1])); err != nil {
		t.Fatal(err)
	}
	if r, err := logfmt.ParseFD(l.Word, l.Rest); err != nil || r.Event != logfmt.FDLeak || r.FD != 4 || r.Path != "/a b" {
		t.Fatalf("%+v %v", r, err)
	}
}

const trackAll = config.TrackFD | config.TrackDmabuf | config.TrackION

const oCloexec = unix.O_CLOEXEC
