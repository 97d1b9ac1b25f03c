//go:build amd64 || arm64

package tracer

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/unwind"
)

// TestPageIndex: the page entries bound the rows that can cover each PC
// of a page, so a search between them finds what a search of the whole
// table finds, in at most 4096 rows.
func TestPageIndex(t *testing.T) {
	tab, err := unwind.BuildTableFile(libcPath(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := tab.Rows
	pages := pageIndex(rows)
	if want := int(rows[len(rows)-1].PC>>uPageShift) + 1; len(pages) != want {
		t.Fatalf("%d pages for a last row at %#x, want %d", len(pages), rows[len(rows)-1].PC, want)
	}
	whole := func(off uint32) int { return sort.Search(len(rows), func(i int) bool { return rows[i].PC > off }) - 1 }
	// The kernel side's search: the last row in [lo, hi] with PC <= off.
	paged := func(off uint32) int {
		p := int(off >> uPageShift)
		if p >= len(pages) {
			return len(rows) - 1
		}
		lo, hi := uint32(pages[p]), uint32(pages[p]>>32)
		if hi-lo > 4096 {
			t.Fatalf("page %d spans %d rows", p, hi-lo)
		}
		for i := 0; i < 13 && lo < hi; i++ {
			mid := (lo + hi + 1) / 2
			if rows[mid].PC <= off {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		if rows[lo].PC > off {
			return -1
		}
		return int(lo)
	}
	r := rand.New(rand.NewSource(1))
	end := rows[len(rows)-1].PC + 64
	for i := 0; i < 200000; i++ {
		off := uint32(r.Int63n(int64(end)))
		if i < len(rows) {
			off = rows[i].PC // every row's own start too
		}
		if w, g := whole(off), paged(off); w != g {
			t.Fatalf("offset %#x: whole-table search row %d, paged search row %d", off, w, g)
		}
	}
}

func libcPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/usr/lib/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	bpftest.Unavailable(t, "no glibc to build a table of")
	return ""
}

// TestExecMapping: the unwinder takes the executable file mappings of a
// maps file, by their names less the " (deleted)" mark, spaces kept.
func TestExecMapping(t *testing.T) {
	parse := func(l string) (procMapping, bool) {
		pm, err := procfs.ParseMapsLine(l)
		if err != nil {
			return procMapping{}, false
		}
		return execMapping(&pm)
	}
	m, ok := parse("7f12a4c28000-7f12a4d7d000 r-xp 00028000 fe:01 1311213                    /usr/lib/x86_64-linux-gnu/libc.so.6")
	if !ok || m.start != 0x7f12a4c28000 || m.end != 0x7f12a4d7d000 || m.offset != 0x28000 ||
		m.id != (fileID{dev: 0xfe<<20 | 1, ino: 1311213}) || m.path != "/usr/lib/x86_64-linux-gnu/libc.so.6" {
		t.Fatalf("parsed %+v %v", m, ok)
	}
	m, ok = parse("55d0c7a00000-55d0c7a01000 r-xp 00001000 08:02 42 /tmp/a  b  (deleted)")
	if !ok || m.path != "/tmp/a  b " {
		t.Fatalf("a deleted file with spaces: %+v %v", m, ok)
	}
	for _, l := range []string{
		"7f12a4c00000-7f12a4c28000 r--p 00000000 fe:01 1311213 /usr/lib/x86_64-linux-gnu/libc.so.6", // not executable
		"7ffd5a1f2000-7ffd5a1f4000 r-xp 00000000 00:00 0                          [vdso]",
		"7f0000000000-7f0000001000 r-xp 00000000 00:00 0",
		"7f0000000000-7f0000001000 r-xp 00000000 00:0f 5 anon_inode:[bpf_prog]",
	} {
		if m, ok := parse(l); ok {
			t.Errorf("%q taken as %+v", l, m)
		}
	}
}

// TestExecMapsOddPath: a program whose path has two spaces in a row and
// one at its end is named by that path, not by its words rejoined.
func TestExecMapsOddPath(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(t.TempDir(), "a  b ")
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var paths []string
	// The exec maps the program a moment after Start returns.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		maps, err := readExecMaps(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		paths = paths[:0]
		for _, m := range maps {
			if m.path == prog {
				return
			}
			paths = append(paths, m.path)
		}
	}
	t.Fatalf("no mapping named %q among %q", prog, paths)
}

// TestUnwindMappingsOfProcess fills the maps for a real process (a C
// program built here, linked with libc) and reads them back: every
// executable file mapping of /proc/PID/maps is in the array in order,
// the rest is padding, each entry's table is where the tables say, and
// its base turns the runtime address of a function into the row the
// table gives for that function's ELF address.
func TestUnwindMappingsOfProcess(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "w.c")
	bin := filepath.Join(dir, "w")
	os.WriteFile(src, []byte("#include <unistd.h>\nint work(int x) { return x * 3; }\nint main(void) { pause(); return work(1); }\n"), 0o644)
	if out, err := exec.Command("gcc", "-O2", "-fomit-frame-pointer", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v %s", err, out)
	}
	cmd := exec.Command(bin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	// Wait for ld.so to have mapped libc.
	var maps []procMapping
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var err error
		if maps, err = readExecMaps(pid); err == nil && len(maps) >= 3 {
			break
		}
	}
	if len(maps) < 3 {
		t.Fatalf("process %d maps %d executable files, want the program, libc and ld.so", pid, len(maps))
	}

	tr, err := New(Options{StackDepth: 16, UnwindRows: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	u := tr.unw
	if u == nil {
		t.Fatal("no unwinder with --stack-depth 16")
	}
	if err := u.updateProcess(pid, true); err != nil {
		t.Fatal(err)
	}
	raw, err := tr.objs.UnwindProcs.LookupBytes(uint32(pid))
	if err != nil || len(raw) != uMapsSize {
		t.Fatalf("mapping array: %d bytes, %v", len(raw), err)
	}
	le := binary.LittleEndian
	n := int(le.Uint32(raw))
	if n != len(maps) {
		t.Fatalf("array has %d mappings, /proc/%d/maps %d executable file mappings", n, pid, len(maps))
	}
	entry := func(i int) (start, end, base uint64, at utable) {
		o := 8 + i*uMapSize
		at = utable{le.Uint32(raw[o+24:]), le.Uint32(raw[o+28:]), le.Uint32(raw[o+32:]), le.Uint32(raw[o+36:]),
			le.Uint32(raw[o+40:]), le.Uint32(raw[o+44:])}
		return le.Uint64(raw[o:]), le.Uint64(raw[o+8:]), le.Uint64(raw[o+16:]), at
	}
	for i := n; i < uMaxMaps; i++ {
		if s, e, _, _ := entry(i); s != uMapsPad || e != uMapsPad {
			t.Fatalf("entry %d past n is %#x-%#x, want padding", i, s, e)
		}
	}
	sort.Slice(maps, func(i, j int) bool { return maps[i].start < maps[j].start })
	rowsMem := make([]byte, int(u.nextRow)*unwind.RowSize)
	if _, err := u.rows.ReadAt(rowsMem, 0); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i, m := range maps {
		start, end, base, at := entry(i)
		if start != m.start || end != m.end {
			t.Fatalf("entry %d is %#x-%#x, /proc says %#x-%#x", i, start, end, m.start, m.end)
		}
		if at.rowCount == 0 || at.rowFirst+at.rowCount > u.nextRow {
			t.Fatalf("entry %d (%s): rows %d+%d of %d", i, m.path, at.rowFirst, at.rowCount, u.nextRow)
		}
		// A function of this file: its runtime address through base
		// must find the row its ELF address has in the file's table.
		path := "/proc/" + strconv.Itoa(pid) + "/root" + m.path
		tab, err := unwind.BuildTableFile(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		fn, ok := someFunc(t, path, m)
		if !ok {
			continue
		}
		bias := m.start - m.offset + fileOffOf(t, path, fn) - fn
		runtime := fn + bias
		off := uint32(runtime - base)
		rows := make([]unwind.Row, at.rowCount)
		for k := range rows {
			rows[k] = unwind.ReadRow(rowsMem[int(at.rowFirst+uint32(k))*unwind.RowSize:])
		}
		k := sort.Search(len(rows), func(k int) bool { return rows[k].PC > off }) - 1
		if k < 0 {
			t.Fatalf("%s: no row at %#x (ELF %#x)", m.path, off, fn)
		}
		// The same row, not merely the same rule: most rules repeat.
		kt := sort.Search(len(tab.Rows), func(k int) bool { return tab.Rows[k].PC > uint32(fn-tab.Base) }) - 1
		if k != kt || rows[k] != tab.Rows[kt] {
			t.Fatalf("%s: runtime %#x finds row %d %+v in the map, ELF %#x row %d in the table", m.path, runtime, k, rows[k], fn, kt)
		}
		if got, want := tab.RowRule(rows[k]), tab.Lookup(fn); got != want {
			t.Fatalf("%s: the map gives %+v at runtime %#x, the table %+v at ELF %#x", m.path, got, runtime, want, fn)
		}
		checked++
	}
	if checked < 2 {
		t.Fatalf("checked %d files' functions, want the program's and libc's at least", checked)
	}

	// Each write carries a number of its own, never 0: the walk's replay
	// trusts a kept step's mapping only within the write it came from.
	gen := le.Uint32(raw[4:])
	if gen == 0 {
		t.Fatal("the mapping array's number (mt_umaps.gen) is 0")
	}
	u.mu.Lock()
	delete(u.written, pid) // as if the mappings had changed
	u.mu.Unlock()
	if err := u.updateProcess(pid, true); err != nil {
		t.Fatal(err)
	}
	if raw, err = tr.objs.UnwindProcs.LookupBytes(uint32(pid)); err != nil || len(raw) != uMapsSize {
		t.Fatalf("mapping array after a rewrite: %d bytes, %v", len(raw), err)
	}
	if again := le.Uint32(raw[4:]); again == 0 || again == gen {
		t.Fatalf("the array's number after a rewrite is %d, before %d: want a new one", again, gen)
	}
}

// someFunc returns the ELF address of a function of the file that lies in
// mapping m's part of the file.
func someFunc(t *testing.T, path string, m procMapping) (uint64, bool) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, _ := f.DynamicSymbols()
	if s, _ := f.Symbols(); len(s) > 0 {
		syms = append(syms, s...)
	}
	for _, name := range []string{"malloc", "work", "_dl_debug_state"} {
		for _, s := range syms {
			if s.Name == name && s.Value != 0 && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
				off := fileOffOf(t, path, s.Value)
				if off >= m.offset && off < m.offset+(m.end-m.start) {
					return s.Value, true
				}
			}
		}
	}
	return 0, false
}

func fileOffOf(t *testing.T, path string, vaddr uint64) uint64 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && vaddr >= p.Vaddr && vaddr < p.Vaddr+p.Filesz {
			return vaddr - p.Vaddr + p.Off
		}
	}
	t.Fatalf("%s: %#x in no segment", path, vaddr)
	return 0
}

// TestUnwindTablesFull: tables that do not fit are refused with a note,
// and a mapping of such a file is listed without a table (the kernel side
// then follows the frame pointer there) instead of failing.
func TestUnwindTablesFull(t *testing.T) {
	requireBPF(t)
	var notes []string
	tr, err := New(Options{StackDepth: 8, UnwindRows: 1000, Logf: func(f string, a ...any) { notes = append(notes, f) }})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	u := tr.unw
	u.loadPath(libcPath(t)) // 23k rows: too many
	rows, capacity, tables := tr.UnwindUsage()
	if rows != 0 || capacity != 1000 || tables != 0 {
		t.Fatalf("usage %d of %d rows, %d tables after a table too big", rows, capacity, tables)
	}
	full := 0
	for _, n := range notes {
		if strings.Contains(n, "are full") {
			full++
		}
	}
	if full != 1 {
		t.Fatalf("notes %q, want one saying the tables are full", notes)
	}
	if err := u.updateProcess(os.Getpid(), true); err != nil {
		t.Fatal(err)
	}
}

// TestResumeHeldDlopenKey: the watchdog's sweep resumes a process held
// at dlopen, whose hold-map key is its pid with the dlopen kind and a
// sequence, and forgets the key.
func TestResumeHeldDlopenKey(t *testing.T) {
	requireBPF(t)
	tr, err := New(Options{StackDepth: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	state := func() byte {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return 0
		}
		return b[i+2]
	}
	wait := func(want byte) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); state() != want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d in state %c, want %c", pid, state(), want)
			}
		}
	}
	cmd.Process.Signal(syscall.SIGSTOP)
	wait('T')
	key := holdKey(pid, holdDL, 0xa5)
	if err := tr.objs.Hold.Put(key, uint8(holdStopped)); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Dup(tr.HoldFD()) // ResumeHeld closes what it is given, as the watchdog's copy
	if err != nil {
		t.Fatal(err)
	}
	n, err := ResumeHeld(fd)
	if err != nil || n != 1 {
		t.Fatalf("ResumeHeld: %d, %v", n, err)
	}
	wait('S')
	var v uint8
	if err := tr.objs.Hold.Lookup(key, &v); err == nil {
		t.Errorf("the key is still in the hold map")
	}
}

// dwarfUnwinder is the unwinder of a tracer with DWARF stacks, closed
// at the test's end.
func dwarfUnwinder(t *testing.T) *unwinder {
	t.Helper()
	requireBPF(t)
	tr, err := New(Options{StackDepth: 16, UnwindRows: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr.unw
}

// TestFillFramesMappedSinceRead: a frame whose VMA the kernel side could
// not read lies in a file mapped after the mappings were last read (a
// dlopen in one thread while another allocates): fillFrames reads them
// again and names the file, once the stack is newer than that read.
func TestFillFramesMappedSinceRead(t *testing.T) {
	u := dwarfUnwinder(t)
	pid := os.Getpid()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(exe, &st); err != nil {
		t.Fatal(err)
	}
	for _, old := range []bool{false, true} {
		if err := u.updateProcess(pid, true); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		mem, err := syscall.Mmap(int(f.Fd()), 4096, 4096, syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		ts := monotonicNS()
		if old {
			ts = u.readAt[pid] - 1
		}
		fr := []event.Frame{{Addr: uint64(uintptr(unsafe.Pointer(&mem[0]))) + 0x10, Ino: event.InoUnknown}}
		named := u.fillFrames(uint32(pid), ts, fr)
		if !old && (len(named) != 1 || named[0].Ino != st.Ino) {
			t.Errorf("files named: %+v, want the executable's inode %d", named, st.Ino)
		}
		_ = syscall.Munmap(mem)
		switch {
		case old && fr[0].Ino != event.InoUnknown:
			t.Errorf("stack older than the read: frame filled as inode %d", fr[0].Ino)
		case !old && (fr[0].Ino != st.Ino || fr[0].FileOff != 4096+0x10):
			t.Errorf("frame in a file mapped since the read: inode %d offset %#x, want %d %#x", fr[0].Ino, fr[0].FileOff, st.Ino, 4096+0x10)
		}
	}
}

// TestFillFramesAfterExit: the stack of a process that has exited by the
// time its record is decoded (the reader runs behind) still gets its
// files named, from the mappings read while it lived: the frames then
// resolve by path (a dlopen'ed library's frames printed as in no file
// when the process was gone: TestDwarfOracleBPF/*/dlopen).
func TestFillFramesAfterExit(t *testing.T) {
	u := dwarfUnwinder(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	var maps []procMapping
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(maps) < 2; time.Sleep(10 * time.Millisecond) {
		maps, _ = readExecMaps(pid)
	}
	if err := u.updateProcess(pid, true); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if len(maps) == 0 {
		t.Fatal("no executable mappings of sleep")
	}
	m := maps[0]
	fr := []event.Frame{{Addr: m.start + 0x10, Ino: event.InoUnknown}}
	named := u.fillFrames(uint32(pid), monotonicNS(), fr)
	if fr[0].Ino != m.id.ino {
		t.Errorf("frame filled as inode %d, want %d (%s)", fr[0].Ino, m.id.ino, m.path)
	}
	if len(named) != 1 || named[0].Path != m.path {
		t.Errorf("files named after the exit: %+v, want %s", named, m.path)
	}
}

// TestNoNamesInOtherMountNS: a process in a mount namespace of its own
// has "/" for its root link, but its maps paths name files of its own
// mounts (a bind mount may put another file under a host path): its
// frames are filled by inode and their files are not named by path.
func TestNoNamesInOtherMountNS(t *testing.T) {
	u := dwarfUnwinder(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		bpftest.Unavailable(t, "no unshare(1)")
	}
	cmd := exec.Command(unshare, "-m", "--propagation", "private", "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	var maps []procMapping
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c, _ := procfs.ReadComm(pid); c == "sleep" {
			if maps, _ = readExecMaps(pid); len(maps) >= 2 {
				break
			}
		}
	}
	if l, err := os.Readlink(procfs.Dir(pid) + "/root"); err != nil || l != "/" || len(maps) == 0 {
		t.Fatalf("sleep under unshare -m: root %q (%v), %d executable mappings", l, err, len(maps))
	}
	if err := u.updateProcess(pid, true); err != nil {
		t.Fatal(err)
	}
	m := maps[0]
	fr := []event.Frame{{Addr: m.start + 0x10, Ino: event.InoUnknown}}
	named := u.fillFrames(uint32(pid), monotonicNS(), fr)
	if fr[0].Ino != m.id.ino {
		t.Errorf("frame filled as inode %d, want %d (%s)", fr[0].Ino, m.id.ino, m.path)
	}
	if len(named) != 0 {
		t.Errorf("files named by their paths in another mount namespace: %+v", named)
	}
}

// TestMapWindow: writes through a window of pages land where the kernel
// side reads them (lookups agree, across a page boundary and at an
// unaligned offset), and leave nothing of the array mapped: memtrace's RSS
// does not count the unwind arrays' 40 MB.
func TestMapWindow(t *testing.T) {
	requireBPF(t)
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 4096, Flags: unix.BPF_F_MMAPABLE})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mappedMaps := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "anon_inode:bpf-map")
	}
	before := mappedMaps()
	w := &mapWindow{m: m}
	data := make([]byte, 3000*8)
	for i := range 3000 {
		binary.LittleEndian.PutUint64(data[i*8:], uint64(i)*0x10001+7)
	}
	const first = 500 // entry 500: 4000 bytes in, so the write spans pages
	if n, err := w.WriteAt(data, first*8); err != nil || n != len(data) {
		t.Fatalf("WriteAt: %d, %v", n, err)
	}
	if got := mappedMaps(); got != before {
		t.Errorf("%d BPF maps mapped after the write, %d before", got, before)
	}
	for _, i := range []uint32{0, 499, 500, 501, 511, 512, 1000, 3499, 3500} {
		var v uint64
		if err := m.Lookup(i, &v); err != nil {
			t.Fatal(err)
		}
		want := uint64(0)
		if i >= first && i < first+3000 {
			want = uint64(i-first)*0x10001 + 7
		}
		if v != want {
			t.Errorf("entry %d: %#x, want %#x", i, v, want)
		}
	}
	back := make([]byte, len(data))
	if _, err := w.ReadAt(back, first*8); err != nil || !bytes.Equal(back, data) {
		t.Errorf("ReadAt: %v, equal %v", err, bytes.Equal(back, data))
	}
	if _, err := w.WriteAt(data, 4096*8-8); err == nil {
		t.Error("a write past the array's end was accepted")
	}
}
