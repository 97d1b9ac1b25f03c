package logfmt

import (
	"bytes"
	"testing"
)

func TestFrameText(t *testing.T) {
	for _, c := range []struct {
		line string
		text string
		ok   bool
	}{
		{"[memtrack]   #0  /lib/a.so(f+0x1) [0x10]", "/lib/a.so(f+0x1) [0x10]", true},
		{"[memtrack]   #12 \t x [0x1] \r", "x [0x1]", true},
		{"[memtrack]   #  x", "", false},
		{"[memtrack]   #1234567890123456789 x", "", false},
		{"[memtrack]   #3   ", "", false},
		{"[memtrack] tid=1 (x) malloc", "", false},
		{"junk [memtrack]   #0  x [0x1]", "", false},
	} {
		s, e, ok := FrameText([]byte(c.line))
		if ok != c.ok || ok && c.line[s:e] != c.text {
			t.Errorf("FrameText(%q) = %q %v, want %q %v", c.line, c.line[s:e], ok, c.text, c.ok)
		}
	}
}

// FuzzFrameText: a line FrameText accepts is one Parse reads as a frame
// or refuses, and its text alone decides the frame, whatever the index:
// the promise a reader's cache of frame texts relies on.
func FuzzFrameText(f *testing.F) {
	f.Add(AppendFrame(nil, 1, "/lib/m.so", "s", 1, 2))
	f.Add(AppendFrame(nil, 12, "", "", 0, 0x7f))
	f.Add([]byte("[memtrack]   #3  m(+0x10) [0x1]"))
	f.Add([]byte("[memtrack]   #3  m() [0x1]\r"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, e, ok := FrameText(b)
		var l Line
		err := l.Parse(b)
		if !ok {
			return
		}
		if s < len(FramePrefix) || e > len(b) || s >= e {
			t.Fatalf("FrameText(%q) = %d, %d out of range", b, s, e)
		}
		if err == nil && l.Kind != KindFrame {
			t.Fatalf("FrameText accepts %q, Parse reads kind %d", b, l.Kind)
		}
		text := b[s:e]
		var m Line
		err2 := m.Parse(append([]byte(FramePrefix+"0 "), text...))
		if (err == nil) != (err2 == nil) {
			t.Fatalf("%q: Parse %v, of its text alone %v", b, err, err2)
		}
		if err == nil && (!bytes.Equal(l.Module, m.Module) || !bytes.Equal(l.Symbol, m.Symbol) || l.Offset != m.Offset || l.Addr != m.Addr) {
			t.Fatalf("%q and its text alone parse to different frames", b)
		}
	})
}

func TestMetaTS(t *testing.T) {
	for _, c := range []struct {
		rest string
		ts   uint64
		ok   bool
	}{
		{"event=fork pid=2 ppid=1 ts=42", 42, true},
		{"count=1 total=1 ts=0", 0, true},
		{"version=1 pid=2", 0, false},
		{"event=fork ts=4x", 0, false},
		{"ts=", 0, false},
		{"ts=-1", 0, false},
		{"ts=99999999999999999999", 0, false},
		{`msg="ts=5"`, 0, false},
	} {
		ts, ok := MetaTS([]byte(c.rest))
		if ts != c.ts || ok != c.ok {
			t.Errorf("MetaTS(%q) = %d %v, want %d %v", c.rest, ts, ok, c.ts, c.ok)
		}
	}
}

// FuzzMetaTS: what MetaTS reads is the ts= a typed writer put there.
func FuzzMetaTS(f *testing.F) {
	f.Add([]byte("event=fork pid=2 ts=42"), uint64(7))
	f.Add([]byte(`a="x ts=1" ts=3`), uint64(0))
	f.Fuzz(func(t *testing.T, rest []byte, want uint64) {
		MetaTS(rest)
		line := AppendLost(nil, Lost{Count: 1, Total: 2, TS: want})
		var l Line
		if err := l.Parse(bytes.TrimSuffix(line, []byte("\n"))); err != nil {
			t.Fatal(err)
		}
		if ts, ok := MetaTS(l.Rest); !ok || ts != want {
			t.Fatalf("MetaTS of %q = %d %v", line, ts, ok)
		}
	})
}

// FuzzNotice: any message a notice line carries reads back as written.
func FuzzNotice(f *testing.F) {
	f.Add("waiting for a viewer on 127.0.0.1:4242")
	f.Add("a \"quoted\"\tmsg\n")
	f.Fuzz(func(t *testing.T, msg string) {
		line := AppendNotice(nil, Notice{Msg: msg})
		var l Line
		if err := l.Parse(bytes.TrimSuffix(line, []byte("\n"))); err != nil || l.Kind != KindMeta {
			t.Fatalf("%q: %v", line, err)
		}
		if n, err := ParseNotice(l.Rest); err != nil || n.Msg != msg {
			t.Fatalf("notice %q reads back as %q (line %q, %v)", msg, n.Msg, line, err)
		}
	})
}
