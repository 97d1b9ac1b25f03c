package logfmt

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// memtrackLine formats with memtrack's own printf formats, so the writer is
// checked against the format it must stay compatible with.
func memtrackAlloc(tid int, name, op string, ts, size, total uint64, ptr uint64) string {
	return fmt.Sprintf("[memtrack] tid=%-6d (%-15s) %-10s ts=%-12d size=%-12d  total=%-12d  ptr=0x%x\n", tid, name, op, ts, size, total, ptr)
}

func TestWriterMatchesMemtrackPrintf(t *testing.T) {
	got := string(AppendAlloc(nil, 1234, "worker-1", "malloc", 42, 100, 300, 0x55aa00))
	want := memtrackAlloc(1234, "worker-1", "malloc", 42, 100, 300, 0x55aa00)
	if got != want {
		t.Fatalf("alloc\n got %q\nwant %q", got, want)
	}
	got = string(AppendFree(nil, 7, "main", "delete[]", 9, 16, 0xdead0))
	want = fmt.Sprintf("[memtrack] tid=%-6d (%-15s) %-10s ts=%-12d size=%-12d  ptr=0x%x\n", 7, "main", "delete[]", 9, 16, 0xdead0)
	if got != want {
		t.Fatalf("free\n got %q\nwant %q", got, want)
	}
	got = string(AppendExit(nil, 7, "main", 9, 16))
	want = fmt.Sprintf("[memtrack] tid=%-6d (%-15s) EXIT       ts=%-12d total=%-12d bytes allocated\n", 7, "main", 9, 16)
	if got != want {
		t.Fatalf("exit\n got %q\nwant %q", got, want)
	}
	got = string(AppendFrame(nil, 3, "./app", "_Z3foov", 0x2a, 0x5555))
	want = "[memtrack]   #3  ./app(_Z3foov+0x2a) [0x5555]\n"
	if got != want {
		t.Fatalf("frame\n got %q\nwant %q", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	var b []byte
	b = AppendAlloc(b, 99, "a (b) c", "new[]", 1, 2, 3, 0x10)
	b = AppendFrame(b, 0, "/lib/libx.so", "ns::f(int) const", 0x10, 0x7f00)
	b = AppendFrame(b, 12, "", "", 0, 0x7f01)
	b = AppendFree(b, 100, "x", "free", 5, 0, 0x10)
	b = AppendExit(b, 99, "a (b) c", 6, 2)
	b = AppendMeta(b, WordHeader, KV{"pid", "12"}, KV{"cmd", "./app \"x\" y"})
	sc := NewScanner(bytes.NewReader(b))
	var l Line
	var kinds []Kind
	for sc.Scan() {
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("parse %q: %v", sc.Line(), err)
		}
		kinds = append(kinds, l.Kind)
		switch len(kinds) {
		case 1:
			if l.TID != 99 || string(l.Name) != "a (b) c" || l.Op != OpNewArr || l.TS != 1 || l.Size != 2 || l.Total != 3 || l.Ptr != 0x10 {
				t.Fatalf("alloc: %+v", l)
			}
		case 2:
			if string(l.Module) != "/lib/libx.so" || string(l.Symbol) != "ns::f(int) const" || l.Offset != 0x10 || l.Addr != 0x7f00 {
				t.Fatalf("frame: %+v", l)
			}
		case 3:
			if l.FrameIndex != 12 || len(l.Module) != 0 || l.Addr != 0x7f01 {
				t.Fatalf("bare frame: %+v", l)
			}
		case 4:
			if l.Kind != KindFree || !l.HasSize || l.Size != 0 || l.Ptr != 0x10 {
				t.Fatalf("free: %+v", l)
			}
		case 6:
			kv := Fields(l.Rest)
			if v, _ := Field(kv, "cmd"); v != "./app \"x\" y" || string(l.Word) != WordHeader {
				t.Fatalf("meta: %q %+v", l.Word, kv)
			}
		}
	}
	want := []Kind{KindAlloc, KindFrame, KindFrame, KindFree, KindExit, KindMeta}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("kinds %v want %v", kinds, want)
	}
}

func TestMemtrackVariants(t *testing.T) {
	cases := []struct {
		in   string
		kind Kind
		err  bool
	}{
		// memtrack's newer free lines have no size=.
		{"[memtrack] tid=5      (main           ) free       ts=10           ptr=0x1234", KindFree, false},
		{"[memtrack] tid=5      (main           ) free       ts=10           ptr=(nil)", KindFree, false},
		{"[memtrack]   #1  ./binary(+0x1234) [0x5555]", KindFrame, false},
		{"[memtrack]   #1  [0x5555]", KindFrame, false},
		{"program output", KindOther, false},
		{"", KindOther, false},
		{"noise[memtrack] tid=5 (main           ) malloc ts=1 size=2  total=2  ptr=0x10", KindAlloc, false},
		{"[memtrack] tid=5 (main", KindOther, true},
		{"[memtrack] tid=5      (main           ) malloc     ts=1 size=2", KindOther, true},
		{"[memtrack] tid=x", KindOther, true},
		{"[memtrack] tid=5      (main           ) malloc     ts=99999999999999999999999 size=2  total=2  ptr=0x1", KindOther, true},
	}
	for _, c := range cases {
		var l Line
		err := l.Parse([]byte(c.in))
		if (err != nil) != c.err || (err == nil && l.Kind != c.kind) {
			t.Errorf("%q: kind %v err %v, want kind %v err %v", c.in, l.Kind, err, c.kind, c.err)
		}
	}
	var l Line
	if err := l.Parse([]byte("[memtrack] tid=5      (main           ) free       ts=10           ptr=0x1234")); err != nil || l.HasSize {
		t.Fatalf("free without size: HasSize=%v err=%v", l.HasSize, err)
	}
}

// slowReader returns one byte at a time and io.EOF in between, as a file
// that is still being written does.
type growing struct {
	data []byte
	pos  int
	lim  int
}

func (g *growing) Read(p []byte) (int, error) {
	if g.pos >= g.lim {
		return 0, io.EOF
	}
	n := copy(p, g.data[g.pos:g.lim])
	g.pos += n
	return n, nil
}

func TestScannerResumesAfterEOF(t *testing.T) {
	data := []byte("line one\nline two\n")
	g := &growing{data: data, lim: 12}
	sc := NewScanner(g)
	sc.Final = false
	var got []string
	for sc.Scan() {
		got = append(got, string(sc.Line()))
	}
	if len(got) != 1 {
		t.Fatalf("before growth: %q", got)
	}
	g.lim = len(data)
	for sc.Scan() {
		got = append(got, string(sc.Line()))
	}
	if strings.Join(got, "|") != "line one|line two" {
		t.Fatalf("after growth: %q", got)
	}
}

func TestScannerSkipsOverlong(t *testing.T) {
	data := "a\n" + strings.Repeat("x", MaxLine+10) + "\nb"
	sc := NewScanner(strings.NewReader(data))
	var got []string
	for sc.Scan() {
		got = append(got, string(sc.Line()))
	}
	if strings.Join(got, "|") != "a|b" || sc.Overlong != 1 {
		t.Fatalf("got %q overlong %d", got, sc.Overlong)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(memtrackAlloc(1, "x", "malloc", 1, 2, 3, 4)))
	f.Add(AppendFrame(nil, 1, "m", "s", 1, 2))
	f.Add(AppendMeta(nil, "lost", KV{"count", "3"}))
	f.Add([]byte("[memtrack] tid=5      (main           ) free       ts=10           ptr=0x1234"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l Line
		if err := l.Parse(b); err != nil {
			return
		}
		if l.Kind == KindAlloc {
			// What parses as an alloc must write back and parse the same.
			out := AppendAlloc(nil, l.TID, string(l.Name), string(l.OpText), l.TS, l.Size, l.Total, l.Ptr)
			var m Line
			if err := m.Parse(bytes.TrimSuffix(out, []byte("\n"))); err != nil || m.Kind != KindAlloc || m.Ptr != l.Ptr || m.Size != l.Size {
				t.Fatalf("round trip of %q: %q %v", b, out, err)
			}
		}
		if l.Kind == KindMeta {
			Fields(l.Rest)
		}
	})
}

func BenchmarkParseAlloc(b *testing.B) {
	line := []byte(strings.TrimSuffix(memtrackAlloc(1234, "worker-1", "malloc", 123456, 100, 300000, 0x55aa00ff10), "\n"))
	var l Line
	b.SetBytes(int64(len(line)))
	for i := 0; i < b.N; i++ {
		if err := l.Parse(line); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendAlloc(b *testing.B) {
	buf := make([]byte, 0, 256)
	for i := 0; i < b.N; i++ {
		buf = AppendAlloc(buf[:0], 1234, "worker-1", "malloc", uint64(i), 100, 300000, 0x55aa00ff10)
	}
}
