package logfmt

import (
	"bytes"
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

// The example lines of docs/fd.md, and a leak and a close_range line:
// parsed and written again, each is the same bytes, so AppendFD keeps the
// documented key order and ParseFD reads every field it writes.
func TestAppendFDLayout(t *testing.T) {
	lines := []string{
		`[memtrace] fd event=open tid=812 pid=812 ts=1032 name=app fd=3 call=openat kind=file path=/etc/hosts flags=0x80000 cloexec=1`,
		`[memtrace] fd event=open tid=812 pid=812 ts=1040 name=app fd=4 call=pipe2 kind=pipe peer=5`,
		`[memtrace] fd event=open tid=812 pid=812 ts=1051 name=app fd=6 call=dup kind=pipe old=4`,
		`[memtrace] fd event=open tid=812 pid=812 ts=1060 name=app fd=7 call=socket kind=socket domain=inet6 flags=0x80001 cloexec=1`,
		`[memtrace] fd event=close tid=812 pid=812 ts=1100 name=app fd=3 call=close kind=file path=/etc/hosts`,
		`[memtrace] fd event=open tid=812 pid=812 ts=2000 name=app fd=9 call=ioctl kind=dmabuf dev=8 flags=0x80002 cloexec=1`,
		`[memtrace] dmabuf event=alloc tid=812 pid=812 ts=2000 name=app fd=9 size=1048576 heap=system dev=8 flags=0x80002 heap_flags=0x0 buf=1`,
		`[memtrace] fd event=close tid=812 pid=812 ts=2500 name=app fd=9 call=close kind=dmabuf`,
		`[memtrace] dmabuf event=release tid=812 pid=812 ts=2500 name=app fd=9 size=1048576 heap=system buf=1 call=close`,
		`[memtrace] ion event=alloc tid=812 pid=812 ts=3000 name=app fd=10 size=8192 heap_mask=0x1 flags=0x0 dev=5 buf=2`,
		`[memtrace] ion event=alloc tid=812 pid=812 ts=3100 name=app handle=3 size=4096 heap_mask=0x2 flags=0x0 dev=5 align=4096 layout=legacy buf=3`,
		`[memtrace] ion event=release tid=812 pid=812 ts=3200 name=app handle=3 dev=5 size=4096 heap_mask=0x2 buf=3 call=ioctl`,
		`[memtrace] ion event=release tid=812 pid=812 ts=3300 name=app fd=10 size=8192 heap_mask=0x1 buf=2 call=close_range`,
		`[memtrace] ion event=free tid=812 pid=812 ts=3400 name=app handle=3 dev=5`,
		`[memtrace] fd event=close_range tid=1 pid=1 ts=9 name="a b" first=3 last=4294967295 flags=0x2`,
		`[memtrace] fd event=leak tid=10 pid=9 ts=2000 fd=7 call=ioctl kind=dmabuf cloexec=1 buf=1 size=4096`,
		`[memtrace] fd event=open tid=1 pid=1 ts=5 name=p fd=3 call=openat kind=file path="/a b" trunc=1 stack="open < main"`,
		`[memtrace] fd event=unknown tid=1 pid=1 ts=5 name=p type=99`,
	}
	for _, line := range lines {
		var l Line
		if err := l.Parse([]byte(line)); err != nil || l.Kind != KindMeta {
			t.Fatalf("%s: %v", line, err)
		}
		r, err := ParseFD(l.Word, l.Rest)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if got := string(AppendFD(nil, &r)); got != line+"\n" {
			t.Errorf("written again\n got %q\nwant %q", got, line)
		}
	}
	// A record from NewFDRecord has no descriptor to write by mistake.
	r := NewFDRecord(WordFD, FDOpen)
	r.FD, r.Call, r.Kind = 3, "openat", "file"
	if got, want := string(AppendFD(nil, &r)), `[memtrace] fd event=open tid=0 pid=0 ts=0 name="" fd=3 call=openat kind=file`+"\n"; got != want {
		t.Errorf("NewFDRecord: %q, want %q", got, want)
	}
}

// The keys that AppendFD added to the parser are read leniently: a line
// older readers accepted is still accepted, with the same old fields.
func TestParseFDNewKeysLenient(t *testing.T) {
	rest := []byte(`event=open tid=1 pid=1 ts=1 fd=3 flags=zz heap_flags=-1 align=x type=99999999999999999999 trunc=2 layout=new`)
	r, err := ParseFD([]byte(WordFD), rest)
	want := NewFDRecord(WordFD, FDOpen)
	want.TID, want.PID, want.TS, want.FD = 1, 1, 1, 3
	if err != nil || r != want {
		t.Fatalf("got %+v, %v\nwant %+v", r, err, want)
	}
}

// fdLayouts: for each word and event, the fields its line carries, filled
// from the fuzzer's values; every other field stays as NewFDRecord and the
// head leave it.
var fdLayouts = []struct {
	word, event string
	fill        func(r *FDRecord, d1, d2 int64, s1, s2 string, u1, u2, u3 uint64, flag bool)
}{
	{WordFD, FDOpen, func(r *FDRecord, d1, d2 int64, s1, s2 string, u1, u2, u3 uint64, flag bool) {
		r.FD, r.Call, r.Kind, r.Path, r.Trunc = d1, s1, s2, s1+s2, flag && s1+s2 != ""
		switch u1 % 4 {
		case 1:
			r.Peer = d2
		case 2:
			r.Old = d2
		case 3:
			r.Dev = d2
		}
		r.Domain, r.Flags, r.Cloexec = s2, u2, flag
	}},
	{WordFD, FDClose, func(r *FDRecord, d1, d2 int64, s1, s2 string, u1, u2, u3 uint64, flag bool) {
		r.FD, r.Call, r.Kind, r.Path = d1, s1, s2, s2
	}},
	{WordFD, FDLeak, func(r *FDRecord, d1, d2 int64, s1, s2 string, u1, u2, u3 uint64, flag bool) {
		r.Name = ""
		r.FD, r.Call, r.Kind, r.Path, r.Cloexec, r.Buf = d1, s1, s2, s1, flag, u1
		if u1 != 0 {
			r.Size = u2
		}
	}},
	{WordFD, FDCloseRange, func(r *FDRecord, d1, d2 int64, s1, s2 string, u1, u2, u3 uint64, flag bool) {
		r.First, r.Last, r.Flags = int64(u1), int64(u2), u3
	}},
	{WordDmabuf, BufAlloc, func(r *FDRecord, d1, d2 int64, s1, s2 string, u1, u2, u3 uint64, flag bool) {
		r.FD, r.Size, r.Heap, r.Dev, r.Flags, r.HeapFlags, r.Buf = d1, u1, s1, d2, u2, u3, u1^u3
	}},
	{WordDmabuf, BufRelease, func(r *FDRecord, d1, d2 int64, s1, s2 string, u1, u2, u3 uint64, flag bool) {
		r.FD, r.Size, r.Heap, r.Buf, r.Call = d1, u1, s1, u2, s2
	}},
	{WordION, BufAlloc, func(r *FDRecord, d1, d2 int64, s1, s2 string, u1, u2, u3 uint64, flag bool) {
		if flag {
			r.Handle, r.Legacy, r.Align = d1, true, u3
		} else {
			r.FD = d1
		}
		r.Size, r.HeapMask, r.Flags, r.Dev, r.Buf = u1, u2, u3, d2, u1+u2
	}},
	{WordION, BufRelease, func(r *FDRecord, d1, d2 int64, s1, s2 string, u1, u2, u3 uint64, flag bool) {
		if flag {
			r.Handle, r.Dev = d1, d2
		} else {
			r.FD = d1
		}
		r.Size, r.HeapMask, r.Buf, r.Call = u1, u2, u3, s1
	}},
	{WordION, BufFree, func(r *FDRecord, d1, d2 int64, s1, s2 string, u1, u2, u3 uint64, flag bool) {
		r.Handle, r.Dev = d1, d2
	}},
	{WordDmabuf, FDUnknown, func(r *FDRecord, d1, d2 int64, s1, s2 string, u1, u2, u3 uint64, flag bool) {
		r.Type = u3
	}},
}

// FuzzAppendFD: every layout, with any values (descriptors are what the
// kernel gives, 0 to 2^31-1), parses back to the record written.
func FuzzAppendFD(f *testing.F) {
	f.Add(uint8(0), int64(812), int64(3), int32(4), int32(5), "openat", "file", "open < main", uint64(1), uint64(0x80000), uint64(0), true)
	f.Add(uint8(6), int64(-1), int64(1<<62), int32(0), int32(1<<30), "a \"b\"", "\xff\n", "", uint64(1<<64-1), uint64(0), uint64(7), false)
	f.Add(uint8(2), int64(0), int64(0), int32(9), int32(0), "", "", "", uint64(0), uint64(1), uint64(2), true)
	f.Fuzz(func(t *testing.T, which uint8, tid, pid int64, fd1, fd2 int32, s1, s2, stack string, u1, u2, u3 uint64, flag bool) {
		lay := fdLayouts[int(which)%len(fdLayouts)]
		d := func(v int32) int64 {
			if v < 0 {
				return int64(-(v + 1))
			}
			return int64(v)
		}
		r := NewFDRecord(lay.word, lay.event)
		r.TID, r.PID, r.TS, r.Name, r.Stack = tid, pid, u3/2, s2+s1, stack
		lay.fill(&r, d(fd1), d(fd2), s1, s2, u1, u2, u3, flag)
		b := AppendFD(nil, &r)
		var l Line
		if err := l.Parse(b[:len(b)-1]); err != nil || l.Kind != KindMeta || bytes.Count(b, []byte("\n")) != 1 {
			t.Fatalf("%q: %v", b, err)
		}
		back, err := ParseFD(l.Word, l.Rest)
		if err != nil || back != r {
			t.Fatalf("%q\nread back %+v (%v)\nwritten   %+v", b, back, err, r)
		}
	})
}
