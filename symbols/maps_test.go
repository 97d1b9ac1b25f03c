package symbols

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseMapsLine(t *testing.T) {
	good := []struct {
		line string
		want Mapping
	}{
		{"7f0c1a2b3000-7f0c1a2d5000 r-xp 00022000 08:01 1311                       /usr/lib/x86_64-linux-gnu/libc.so.6",
			Mapping{Start: 0x7f0c1a2b3000, End: 0x7f0c1a2d5000, Perms: "r-xp", Offset: 0x22000, File: FileID{8, 1, 1311}, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"}},
		{"00400000-00401000 r-xp 00000000 fd:1a 99 /tmp/dir with spaces/my prog (deleted)",
			Mapping{Start: 0x400000, End: 0x401000, Perms: "r-xp", File: FileID{0xfd, 0x1a, 99}, Path: "/tmp/dir with spaces/my prog", Deleted: true}},
		{"7ffd1000-7ffd3000 r-xp 00000000 00:00 0                          [vdso]",
			Mapping{Start: 0x7ffd1000, End: 0x7ffd3000, Perms: "r-xp", Path: "[vdso]"}},
		{"7f00000000-7f00001000 rw-p 00000000 00:00 0 ",
			Mapping{Start: 0x7f00000000, End: 0x7f00001000, Perms: "rw-p"}},
	}
	for _, g := range good {
		m, err := ParseMapsLine(g.line)
		if err != nil || m != g.want {
			t.Errorf("ParseMapsLine(%q)\n got %+v, %v\nwant %+v", g.line, m, err, g.want)
		}
	}
	for _, bad := range []string{"", "garbage", "1000-0fff r-xp 0 08:01 1 /x", "1000-2000 r-x 0 08:01 1 /x",
		"1000-2000 r-xp zz 08:01 1 /x", "1000-2000 r-xp 0 0801 1 /x", "1000-2000 r-xp 0 08:01 -1 /x", "1000 r-xp 0 08:01 1"} {
		if _, err := ParseMapsLine(bad); !errors.Is(err, ErrBadMaps) {
			t.Errorf("ParseMapsLine(%q): %v, want ErrBadMaps", bad, err)
		}
	}
}

func TestParseMapsSelf(t *testing.T) {
	raw, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := ParseMaps(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); len(ms) != n {
		t.Fatalf("%d mappings from %d lines", len(ms), n)
	}
	exe, _ := os.Executable()
	found := false
	for _, m := range ms {
		if m.Path == exe && m.Exec() && m.FileBacked() {
			found = true
		}
	}
	if !found {
		t.Fatalf("no executable mapping of %s in /proc/self/maps", exe)
	}
	// A bad line stops parsing with the line number and what was read.
	ms, err = ParseMaps(strings.NewReader(string(raw) + "junk\n"))
	if !errors.Is(err, ErrBadMaps) || len(ms) != strings.Count(string(raw), "\n") || !strings.Contains(err.Error(), "line") {
		t.Fatalf("junk line: %d mappings, %v", len(ms), err)
	}
}
