package symbols

import (
	"os"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/procfs"
)

// TestProcMapping: a maps line becomes the address space's mapping, the
// " (deleted)" mark moved into Deleted and the name otherwise as printed.
func TestProcMapping(t *testing.T) {
	for _, g := range []struct {
		line string
		want Mapping
	}{
		{"7f0c1a2b3000-7f0c1a2d5000 r-xp 00022000 08:01 1311                       /usr/lib/x86_64-linux-gnu/libc.so.6",
			Mapping{Start: 0x7f0c1a2b3000, End: 0x7f0c1a2d5000, Perms: "r-xp", Offset: 0x22000, File: FileID{8, 1, 1311}, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"}},
		{"00400000-00401000 r-xp 00000000 fd:1a 99 /tmp/dir with  spaces/my prog  (deleted)",
			Mapping{Start: 0x400000, End: 0x401000, Perms: "r-xp", File: FileID{0xfd, 0x1a, 99}, Path: "/tmp/dir with  spaces/my prog ", Deleted: true}},
		{"7ffd1000-7ffd3000 r-xp 00000000 00:00 0                          [vdso]",
			Mapping{Start: 0x7ffd1000, End: 0x7ffd3000, Perms: "r-xp", Path: "[vdso]"}},
		{"7f00000000-7f00001000 rw-p 00000000 00:00 0 ",
			Mapping{Start: 0x7f00000000, End: 0x7f00001000, Perms: "rw-p"}},
	} {
		pm, err := procfs.ParseMapsLine(g.line)
		if m := ProcMapping(&pm); err != nil || m != g.want {
			t.Errorf("%q\n got %+v, %v\nwant %+v", g.line, m, err, g.want)
		}
	}
}

// TestReadProcMapsSelf: this process's maps go into an address space whole,
// its executable among them.
func TestReadProcMapsSelf(t *testing.T) {
	as, err := NewAddressSpace(NewCache(nil), os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer as.Close()
	if err := as.ReadProcMaps(1); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	raw, _ := os.ReadFile("/proc/self/maps")
	found := false
	for _, line := range strings.Split(string(raw), "\n") {
		pm, err := procfs.ParseMapsLine(line)
		if err != nil || pm.Path != exe || !pm.Exec() {
			continue
		}
		if loc, ok := as.Lookup(pm.Start); ok && loc.Mapping.Path == exe && loc.Mapping.FileBacked() && loc.Module != nil {
			found = true
		}
	}
	if !found {
		t.Fatalf("no executable mapping of %s in the address space", exe)
	}
}
