package logfmt

import (
	"strings"
	"testing"
)

func TestParseFD(t *testing.T) {
	line := `[memtrace] fd event=open tid=12 pid=10 ts=345 name="my prog" fd=7 call=openat kind=file path="/tmp/a b" cloexec=1 future=x`
	var l Line
	if err := l.Parse([]byte(line)); err != nil || l.Kind != KindMeta {
		t.Fatal(err)
	}
	r, err := ParseFD(l.Word, l.Rest)
	if err != nil {
		t.Fatal(err)
	}
	want := FDRecord{Word: "fd", Event: "open", TID: 12, PID: 10, TS: 345, Name: "my prog", FD: 7, Handle: -1,
		Call: "openat", Kind: "file", Path: "/tmp/a b", Old: -1, Peer: -1, Dev: -1, Cloexec: true, First: -1, Last: -1}
	if r != want {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	line = `[memtrace] ion event=alloc tid=1 pid=1 ts=0 name=x handle=3 size=4096 heap_mask=0x1f flags=0x0 dev=5 buf=9`
	if err := l.Parse([]byte(line)); err != nil {
		t.Fatal(err)
	}
	if r, err = ParseFD(l.Word, l.Rest); err != nil || r.Handle != 3 || r.FD != -1 || r.HeapMask != 0x1f || r.Dev != 5 || r.Buf != 9 || r.Size != 4096 {
		t.Fatalf("got %+v, %v", r, err)
	}
}

func TestParseFDErrors(t *testing.T) {
	for _, c := range []struct{ word, rest, want string }{
		{"lost", "count=1", "not an fd"},
		{"fd", "event=open tid=1 pid=1", "without event, tid, pid and ts"},
		{"fd", "event=open tid=1 pid=1 ts=1 fd=-3", "bad fd="},
		{"fd", "event=open tid=1 pid=1 ts=1 fd=99999999999", "bad fd="},
		{"dmabuf", "event=alloc tid=x pid=1 ts=1", "bad tid="},
		{"ion", "event=alloc tid=1 pid=1 ts=1 heap_mask=zz", "bad heap_mask="},
		{"dmabuf", "event=alloc tid=1 pid=1 ts=1 size=-1", "bad size="},
	} {
		_, err := ParseFD([]byte(c.word), []byte(c.rest))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want %q", c.word, c.rest, err, c.want)
		}
	}
}

func FuzzParseFD(f *testing.F) {
	f.Add([]byte(`[memtrace] fd event=open tid=12 pid=10 ts=345 name=p fd=7 call=openat kind=file path="/a" cloexec=1`))
	f.Add([]byte(`[memtrace] dmabuf event=release tid=1 pid=1 ts=9 name=p fd=9 size=1 heap=system buf=1 call=close_range`))
	f.Add([]byte(`[memtrace] fd event=close_range tid=1 pid=1 ts=9 first=3 last=4294967295`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l Line
		if l.Parse(b) != nil || l.Kind != KindMeta {
			return
		}
		r, err := ParseFD(l.Word, l.Rest)
		if err != nil {
			return
		}
		if r.FD < -1 || r.Old < -1 || r.Peer < -1 || r.Dev < -1 || r.Handle < -1 {
			t.Fatalf("negative descriptor accepted: %+v", r)
		}
	})
}
