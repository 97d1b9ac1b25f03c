package agent

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/symbols"
)

// TestFrameNamedFromTheMappedFile: the kernel side names a frame's file by
// a path that, for memtrace, is another file (a library bind-mounted over
// a host path in the process's mount namespace, a container's file under
// a host path): the frame is named from the file the process maps, found
// by its inode, not from the file at that path.
func TestFrameNamedFromTheMappedFile(t *testing.T) {
	// A file with symbols (go test strips its binaries): the C library.
	libs, _ := filepath.Glob("/lib/*/libc.so.6")
	more, _ := filepath.Glob("/usr/lib*/libc.so.6")
	libs = append(libs, more...)
	if len(libs) == 0 {
		t.Skip("no libc.so.6 to map")
	}
	exe := libs[0]
	fileOff := funcFileOffset(t, exe, "malloc")
	ret := fileOff + 0x10 // a return address inside the function
	c := symbols.NewCache(nil)
	defer c.Close()
	m, err := c.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	want, off, err := m.Symbol(m.VAddr(ret) - 1)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(exe, &st); err != nil {
		t.Fatal(err)
	}
	// The path the kernel named that inode by holds another program.
	other := filepath.Join(t.TempDir(), "other")
	trueBin, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skipf("no /bin/true to stand for the host's file: %v", err)
	}
	if err := os.WriteFile(other, trueBin, 0o755); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	page := uint64(os.Getpagesize())
	base := fileOff &^ (page - 1)
	mem, err := syscall.Mmap(int(f.Fd()), int64(base), int(2*page), syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)

	var buf bytes.Buffer
	s := New(Config{Out: &buf, StackDepth: 8})
	pid := os.Getpid()
	s.AddProcess(uint32(pid), false)
	s.procs[uint32(pid)].scanned = true
	s.File(&event.File{Ino: st.Ino, Path: other})
	addr := uint64(uintptr(unsafe.Pointer(&mem[0]))) + ret - base
	s.Stack(&event.Stack{ID: 7, TGID: uint32(pid), TS: monotonicNS(), Stop: event.StopEnd,
		Frames: []event.Frame{{Addr: addr, FileOff: ret, Ino: st.Ino}}})
	e := ev(100, uint32(pid), event.KindAlloc, logfmt.OpMalloc, 0xa0, 100, "main")
	e.Stack = 7
	s.Add(e)
	s.Drain(true)
	s.Flush()
	out := buf.String()
	name := fmt.Sprintf("(%s+%#x)", want, off+1)
	if !strings.Contains(out, name) {
		t.Errorf("frame not named %s from the mapped file:\n%s", name, out)
	}
}

// funcFileOffset is the file offset of function name in the ELF file at path.
func funcFileOffset(t *testing.T, path, name string) uint64 {
	t.Helper()
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, err := ef.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name != name {
			continue
		}
		for _, p := range ef.Progs {
			if p.Type == elf.PT_LOAD && s.Value >= p.Vaddr && s.Value < p.Vaddr+p.Filesz {
				return s.Value - p.Vaddr + p.Off
			}
		}
	}
	t.Fatalf("no function %s in %s", name, path)
	return 0
}
