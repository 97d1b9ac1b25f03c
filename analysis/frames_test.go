package analysis

import (
	"bytes"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// frameCase is one frame given to the store: its key text, module and
// symbol, as the parser hands them over.
type frameCase struct{ key, mod, sym string }

// frameCases splits fuzz input into frames: lines of KEY|MOD|SYM.
func frameCases(in []byte) []frameCase {
	var out []frameCase
	for _, line := range bytes.Split(in, []byte("\n")) {
		p := strings.SplitN(string(line), "|", 3)
		for len(p) < 3 {
			p = append(p, "")
		}
		out = append(out, frameCase{p[0], p[1], p[2]})
	}
	return out
}

// checkStore gives the cases to a store, as internFrame does, and holds
// it to a map: equal key text, equal frame; every frame reads back its
// module and symbol; the table survives its growth.
func checkStore(t *testing.T, cases []frameCase) {
	s := newFrameStore()
	want := map[string]uint32{}
	given := map[uint32]frameCase{}
	for i, c := range cases {
		if c.key == "" {
			continue
		}
		id, found := s.find([]byte(c.key))
		wid, known := want[c.key]
		if found != known || (found && id != wid) {
			t.Fatalf("case %d %q: found %v (%d), a map says %v (%d)", i, c.key, found, id, known, wid)
		}
		if !found {
			id = s.add([]byte(c.key), []byte(c.mod), []byte(c.sym), uint64(i), uint64(i)*16)
			want[c.key], given[id] = id, c
		}
	}
	for key, id := range want {
		if got, ok := s.find([]byte(key)); !ok || got != id {
			t.Fatalf("%q: found %d %v after the table grew, want %d", key, got, ok, id)
		}
		c := given[id]
		f := s.frame(id)
		if f.Module != c.mod || f.Symbol != c.sym || f.Offset != f.Addr/16 {
			t.Fatalf("frame %d reads back %+v, was given %+v", id, f, c)
		}
		if !s.keyIs(id, []byte(key)) || s.keyIs(id, []byte(key+"x")) {
			t.Fatalf("frame %d's key text is not %q", id, key)
		}
	}
}

// TestFrameStore: keys with their module in front (stored without it),
// symbols inside the key and outside it, the empty module, and enough
// frames to grow the table and fill arena chunks.
func TestFrameStore(t *testing.T) {
	var cases []frameCase
	for i := 0; i < 50000; i++ {
		sym := "_Z" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
		mod := []string{"/usr/lib/libc.so.6", "./app", ""}[i%3]
		key := mod + "(" + sym + "+0x1) [0x" + strings.Repeat("f", i%5) + "]" + string(rune('0'+i%10)) + strings.Repeat("k", i/1000)
		switch i % 11 {
		case 0:
			sym = "not-in-the-key"
		case 1:
			mod = "elsewhere" // a module that does not start the key
		}
		cases = append(cases, frameCase{key, mod, sym}, frameCase{key, mod, sym}) // every key twice
	}
	cases = append(cases, frameCase{strings.Repeat("z", frameArenaChunk+10), "z", "zz"})
	checkStore(t, cases)
}

// FuzzFrameStore: any sequence of frames is stored and found as a map
// would, and reads back what it was given.
func FuzzFrameStore(f *testing.F) {
	f.Add([]byte("./a(f+0x1) [0x2]|./a|f\n./a(f+0x1) [0x2]|./a|f\n./a(g+0x1) [0x3]|./a|g"))
	f.Add([]byte("(f+0x1)|x|y\n||\nm|m|\nmm|m|m\nm|mm|m"))
	f.Add([]byte("k|k|k\nk|k|k\nkk|k|kk\nk||"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 1<<16 {
			return
		}
		checkStore(t, frameCases(in))
	})
}

// FuzzPrelude: any input gives back, when it has a log line, a prefix of
// itself that ends with that line's start on, and nothing to read again
// beyond what it was sent; it never fails on its own.
func FuzzPrelude(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte("program output\nmore\n[memtrace] header pid=1\n"))
	f.Add([]byte("no newline [memtrack] tid=1"))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, found, err := Prelude(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("Prelude of %d bytes: %v", len(in), err)
		}
		if !bytes.HasPrefix(in, got) && !bytes.Equal(got, in) {
			t.Fatalf("Prelude returned bytes that are not the input's start")
		}
		has := false
		for _, line := range bytes.Split(in, []byte("\n")) {
			if logPrefixed(line) && len(line) <= logfmt.MaxLine {
				has = true
				break
			}
		}
		if found != has {
			t.Fatalf("found %v, the input has a log line: %v", found, has)
		}
	})
}
