//go:build amd64 || arm64

package tracer

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/procfs"
)

// FuzzExecMapping: any line of /proc/PID/maps, however mangled, is an
// executable file mapping with a sane range and a path, or refused; never
// a panic. The seeds run in plain go test.
func FuzzExecMapping(f *testing.F) {
	for _, s := range []string{
		"7f12a4c28000-7f12a4d7d000 r-xp 00028000 fe:01 1311213                    /usr/lib/x86_64-linux-gnu/libc.so.6",
		"55d0c7a00000-55d0c7a01000 r-xp 00001000 08:02 42 /tmp/a b (deleted)",
		"7ffd5a1f2000-7ffd5a1f4000 r-xp 00000000 00:00 0                          [vdso]",
		"ffffffffffffffff-0 r-xp ffffffffffffffff ffffffff:ffffffff 18446744073709551615 /x",
		"1-2 --x 0 0:0 1 /",
		"", "-", "1-2", "a-b r-xp",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		pm, err := procfs.ParseMapsLine(line)
		if err != nil {
			return
		}
		m, ok := execMapping(&pm)
		if !ok {
			return
		}
		if m.end <= m.start || m.id.ino == 0 || !strings.HasPrefix(m.path, "/") {
			t.Fatalf("%q parsed as %+v", line, m)
		}
	})
}

// FuzzStackDecode: any stack record of a stack's size decodes to at most
// MT_MAX_FRAMES frames with its reason, never a panic.
func FuzzStackDecode(f *testing.F) {
	b := make([]byte, stackSize)
	b[0], b[1] = byte(recStack), byte(event.StopDepth)
	binary.LittleEndian.PutUint16(b[2:], 3)
	f.Add(b)
	f.Add(b[:stackSize-1])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s event.Stack
		if err := decodeStack(&s, b); err != nil {
			if len(b) >= stackSize && recordType(b) == recStack {
				t.Fatalf("a %d-byte record refused: %v", len(b), err)
			}
			return
		}
		if len(s.Frames) > maxFrames || s.Stop.Truncation() == "" && s.Stop != event.StopEnd && s.Stop != event.StopFPWalk {
			t.Fatalf("decoded %d frames, stop %d (%q)", len(s.Frames), s.Stop, s.Stop.Truncation())
		}
	})
}
