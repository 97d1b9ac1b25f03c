package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// FuzzMaps: any input is mappings with sane columns and an error wrapping
// ErrBadMaps, never a panic; every mapping printed back as the kernel
// prints it parses to itself, and a good line is never lost to a bad one.
func FuzzMaps(f *testing.F) {
	raw, _ := os.ReadFile("/proc/self/maps")
	f.Add(string(raw))
	py, _ := os.ReadFile("testdata/python3.maps")
	f.Add(string(py))
	for _, s := range []string{
		"00400000-00401000 r-xp 00000000 fd:1a 99 /tmp/dir with spaces/p (deleted)\n",
		"1000-2000 rw-p 0 00:00 0 \n\n",
		"08048000-08049000 r-xp 00000000 03:0c 64593\n",
		"ffffffffffffffff-0 r-xp ffffffffffffffff ffffffff:ffffffff 18446744073709551615 /x",
		"1-2 --xp 0 0:0 1 /  \njunk\n3-4 r--s 0 0:0 1 [anon:a b]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseMaps(strings.NewReader(s))
		if err != nil && !errors.Is(err, ErrBadMaps) {
			t.Fatalf("error %v does not wrap ErrBadMaps", err)
		}
		if len(ms) > strings.Count(s, "\n")+1 {
			t.Fatalf("%d mappings from %d lines", len(ms), strings.Count(s, "\n")+1)
		}
		for _, m := range ms {
			if m.End <= m.Start || strings.ContainsRune(m.Path, '\n') {
				t.Fatalf("accepted an impossible mapping %+v", m)
			}
			if _, ok := m.Perms.index(); !ok {
				t.Fatalf("accepted permissions %q", m.Perms[:])
			}
			if m.Path != "" && (m.Path[0] == ' ' || m.Path[0] == '\t') {
				t.Fatalf("path %q keeps the padding", m.Path)
			}
			line := fmt.Sprintf("%08x-%08x %s %08x %02x:%02x %d ", m.Start, m.End, m.Perms, m.Offset, m.Major, m.Minor, m.Inode)
			if m.Path != "" {
				line += strings.Repeat(" ", max(0, 73-len(line))) + m.Path
			}
			if m2, err := ParseMapsLine(line); err != nil || m2 != m {
				t.Fatalf("round trip of %+v via %q: %+v, %v", m, line, m2, err)
			}
		}
		// Each line alone parses as it did among the others.
		var good []Mapping
		for _, l := range strings.Split(s, "\n") {
			if len(l) > mapsBufSize-1 {
				continue
			}
			if m, err := ParseMapsLine(l); err == nil {
				good = append(good, m)
			}
		}
		if len(good) != len(ms) {
			t.Fatalf("%d lines parse alone, %d together", len(good), len(ms))
		}
		for i := range good {
			if good[i] != ms[i] {
				t.Fatalf("line alone %+v, together %+v", good[i], ms[i])
			}
		}
	})
}

// FuzzStat: any stat text is a stat with its comm between the first '('
// and the last ')', or refused with ErrBadStat; a comm of any bytes in a
// real line's place reads back as itself.
func FuzzStat(f *testing.F) {
	self, _ := os.ReadFile("/proc/self/stat")
	f.Add(self, "a) b (c")
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 9"), "")
	f.Add([]byte("42 ())) R"), "x\ny")
	f.Fuzz(func(t *testing.T, b []byte, comm string) {
		st, err := ParseStat(b)
		if err != nil {
			if !errors.Is(err, ErrBadStat) {
				t.Fatalf("error %v does not wrap ErrBadStat", err)
			}
		} else if i := bytes.IndexByte(b, '('); st.Comm != string(b[i+1:bytes.LastIndexByte(b, ')')]) || st.PID <= 0 {
			t.Fatalf("%q parsed as %+v", b, st)
		}
		line := []byte("42 (" + comm + ")" + statTail)
		if bytes.IndexByte([]byte(comm), 0) >= 0 {
			return
		}
		st, err = ParseStat(line)
		if err != nil || st.Comm != comm || st.State != 'S' || st.StartTime != 8590 {
			t.Fatalf("comm %q: %+v, %v", comm, st, err)
		}
		if _, err := ParseStatus(b); err != nil && !errors.Is(err, ErrBadStat) {
			t.Fatalf("status error %v does not wrap ErrBadStat", err)
		}
	})
}
