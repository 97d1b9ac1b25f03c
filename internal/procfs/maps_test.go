package procfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func perms(s string) Perms {
	var p Perms
	copy(p[:], s)
	return p
}

// TestParseMapsLine: the kernel's lines, the odd ones included, parse to
// their columns, the name exactly as printed.
func TestParseMapsLine(t *testing.T) {
	for _, g := range []struct {
		name, line string
		want       Mapping
	}{
		{"library", "7f0c1a2b3000-7f0c1a2d5000 r-xp 00022000 08:01 1311                       /usr/lib/x86_64-linux-gnu/libc.so.6",
			Mapping{Start: 0x7f0c1a2b3000, End: 0x7f0c1a2d5000, Perms: perms("r-xp"), Offset: 0x22000, Major: 8, Minor: 1, Inode: 1311, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"}},
		{"spaces and deleted", "00400000-00401000 r-xp 00000000 fd:1a 99 /tmp/dir with  spaces/my prog  (deleted)",
			Mapping{Start: 0x400000, End: 0x401000, Perms: perms("r-xp"), Major: 0xfd, Minor: 0x1a, Inode: 99, Path: "/tmp/dir with  spaces/my prog  (deleted)"}},
		{"trailing space in the name", "55e38a4bb000-55e38a4bd000 r--p 00000000 fe:00 9986116                    /tmp/sp dir/sle ep ",
			Mapping{Start: 0x55e38a4bb000, End: 0x55e38a4bd000, Perms: perms("r--p"), Major: 0xfe, Inode: 9986116, Path: "/tmp/sp dir/sle ep "}},
		{"vdso", "7ffd1000-7ffd3000 r-xp 00000000 00:00 0                          [vdso]",
			Mapping{Start: 0x7ffd1000, End: 0x7ffd3000, Perms: perms("r-xp"), Path: "[vdso]"}},
		{"anonymous, the kernel's trailing space", "7f00000000-7f00001000 rw-p 00000000 00:00 0 ",
			Mapping{Start: 0x7f00000000, End: 0x7f00001000, Perms: perms("rw-p")}},
		{"32-bit short line", "08048000-08049000 r-xp 00000000 03:0c 64593",
			Mapping{Start: 0x08048000, End: 0x08049000, Perms: perms("r-xp"), Major: 3, Minor: 0xc, Inode: 64593}},
		{"32-bit with a path", "b7e00000-b7f26000 r-xp 00000000 08:01 131093     /lib/libc-2.3.2.so",
			Mapping{Start: 0xb7e00000, End: 0xb7f26000, Perms: perms("r-xp"), Major: 8, Minor: 1, Inode: 131093, Path: "/lib/libc-2.3.2.so"}},
		{"huge inode, big minor", "1000-2000 r--s 00000000 103:fffff 18446744073709551615 /dev/shm/x",
			Mapping{Start: 0x1000, End: 0x2000, Perms: perms("r--s"), Major: 0x103, Minor: 0xfffff, Inode: 1<<64 - 1, Path: "/dev/shm/x"}},
		{"vsyscall at the top", "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
			Mapping{Start: 0xffffffffff600000, End: 0xffffffffff601000, Perms: perms("--xp"), Path: "[vsyscall]"}},
		{"anon name with spaces", "7f0000000000-7f0000001000 rw-p 00000000 00:00 0  [anon:my arena]",
			Mapping{Start: 0x7f0000000000, End: 0x7f0000001000, Perms: perms("rw-p"), Path: "[anon:my arena]"}},
		{"newline escaped by the kernel", "1000-2000 r-xp 00000000 08:01 7 /tmp/a\\012b",
			Mapping{Start: 0x1000, End: 0x2000, Perms: perms("r-xp"), Major: 8, Minor: 1, Inode: 7, Path: `/tmp/a\012b`}},
	} {
		m, err := ParseMapsLine(g.line)
		if err != nil || m != g.want {
			t.Errorf("%s: ParseMapsLine(%q)\n got %+v, %v\nwant %+v", g.name, g.line, m, err, g.want)
		}
	}
	for _, bad := range []string{"", "garbage", "1000-0fff r-xp 0 08:01 1 /x", "1000-1000 r-xp 0 08:01 1 /x",
		"1000-2000 r-x 0 08:01 1 /x", "1000-2000 r-xpp 0 08:01 1 /x", "1000-2000 rwxq 0 08:01 1 /x", "1000-2000 xr-p 0 08:01 1 /x",
		"1000-2000 r-xp zz 08:01 1 /x", "1000-2000 r-xp 0 0801 1 /x", "1000-2000 r-xp 0 08:01 -1 /x",
		"1000-2000 r-xp 0 08:01 1x /x", "1000-2000 r-xp 0 08:01", "1000 r-xp 0 08:01 1", "-2000 r-xp 0 08:01 1",
		"10000000000000000-10000000000000001 r-xp 0 08:01 1 /x", "1000-2000 r-xp 10000000000000000 08:01 1 /x",
		"1000-2000 r-xp 0 100000000:01 1 /x", "1000-2000 r-xp 0 08:01 18446744073709551616 /x"} {
		if m, err := ParseMapsLine(bad); !errors.Is(err, ErrBadMaps) {
			t.Errorf("ParseMapsLine(%q) = %+v, %v, want ErrBadMaps", bad, m, err)
		} else if strings.Contains(err.Error(), "/x") {
			t.Errorf("the error echoes the line: %v", err)
		}
	}
}

func TestMappingMethods(t *testing.T) {
	m, _ := ParseMapsLine("1000-2000 r-xp 0 08:01 5 /a b (deleted)")
	if !m.Deleted() || m.File() != "/a b" || !m.Exec() || !m.FileBacked() || m.Perms.String() != "r-xp" {
		t.Fatalf("%+v: deleted %v file %q exec %v file-backed %v perms %q", m, m.Deleted(), m.File(), m.Exec(), m.FileBacked(), m.Perms)
	}
	m, _ = ParseMapsLine("1000-2000 rw-s 0 00:01 5 anon_inode:[perf_event]")
	if m.Deleted() || m.Exec() || m.FileBacked() || !m.Perms.Shared() || !m.Perms.Write() || m.Perms.String() != "rw-s" {
		t.Fatalf("%+v", m)
	}
	m, _ = ParseMapsLine("1000-2000 r-xp 0 00:00 0 [vdso]")
	if m.FileBacked() || m.Deleted() || m.File() != "[vdso]" {
		t.Fatalf("%+v", m)
	}
	for i, s := range permStrings {
		if p := perms(s); p.String() != s {
			t.Errorf("perms %d: %q prints %q", i, s, p.String())
		}
	}
	if got := MapFile(12, 0x7f00, 0x8f00); got != "/proc/12/map_files/7f00-8f00" {
		t.Errorf("MapFile = %q", got)
	}
}

// TestParseMapsBadLines: a line that is not a maps line is skipped and
// named by its number; the lines around it are still read.
func TestParseMapsBadLines(t *testing.T) {
	in := "1000-2000 r-xp 0 08:01 5 /a\n\njunk\n3000-4000 rw-p 0 00:00 0 \nmore junk\n5000-6000 r--p 0 08:01 5 /a"
	ms, err := ParseMaps(strings.NewReader(in))
	if len(ms) != 3 || ms[2].Start != 0x5000 || ms[2].Path != "/a" {
		t.Fatalf("got %+v", ms)
	}
	if !errors.Is(err, ErrBadMaps) || !strings.Contains(err.Error(), "line 3 and 1 more") || strings.Contains(err.Error(), "junk") {
		t.Fatalf("error %v", err)
	}
	// A line longer than any the kernel writes is one bad line.
	long := "1000-2000 r-xp 0 08:01 5 /" + strings.Repeat("x", 3*mapsBufSize) + "\n7000-8000 r-xp 0 08:01 6 /b\n"
	ms, err = ParseMaps(strings.NewReader(long))
	if len(ms) != 1 || ms[0].Path != "/b" || !errors.Is(err, ErrBadMaps) || !strings.Contains(err.Error(), "line 1:") {
		t.Fatalf("a long line: %+v, %v", ms, err)
	}
	if ms, err := ParseMaps(strings.NewReader("")); len(ms) != 0 || err != nil {
		t.Fatalf("empty: %+v, %v", ms, err)
	}
}

// TestReadMapsSelf: a real maps file parses whole, and names the test
// binary's own executable mapping.
func TestReadMapsSelf(t *testing.T) {
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
	ms, err = ReadMaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	found := false
	for _, m := range ms {
		if m.Path == exe && m.Exec() && m.FileBacked() {
			found = true
		}
	}
	if !found {
		t.Fatalf("no executable mapping of %s", exe)
	}
	if _, err := ReadMaps(1 << 30); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no such process: %v", err)
	}
}

// TestReadMapsOddPaths: a program run from a path with spaces, then
// unlinked, is named by the kernel's text exactly.
func TestReadMapsOddPaths(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "a  dir (x)")
	os.Mkdir(dir, 0o755)
	prog := filepath.Join(dir, "sle ep ")
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	find := func(want string) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			ms, err := ReadMaps(cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if m.Path == want && m.Exec() {
					return
				}
			}
		}
		t.Fatalf("no executable mapping named %q", want)
	}
	find(prog)
	os.Remove(prog)
	find(prog + " (deleted)")
}
