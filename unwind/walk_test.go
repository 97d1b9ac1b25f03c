package unwind

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// requireTool returns the path of a tool, failing when a native one is
// missing and skipping for cross tools unless MEMTRACE_REQUIRE_CROSS=1.
func requireTool(t testing.TB, name string, cross bool) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if !cross {
		t.Fatalf("%s is required (make deps installs it)", name)
	}
	if os.Getenv("MEMTRACE_REQUIRE_CROSS") == "1" {
		t.Fatalf("%s is missing but MEMTRACE_REQUIRE_CROSS=1: run make deps", name)
	}
	bpftest.Unavailable(t, "%s not installed", name)
	return ""
}

// walkTarget is how to build and run testdata/walk.cc for one arch.
type walkTarget struct {
	arch   Arch
	cxx    string
	runner []string // prefix to run the binary (qemu for arm64)
	cross  bool
}

func walkTargets() []walkTarget {
	return []walkTarget{
		{arch: ArchAMD64, cxx: "g++"},
		{arch: ArchARM64, cxx: "aarch64-linux-gnu-g++", runner: []string{"qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"}, cross: true},
	}
}

var buildOnce sync.Map // arch -> *builtWalk

// tempDirs are the build directories shared by tests, removed by TestMain.
var tempDirs sync.Map

func TestMain(m *testing.M) {
	code := m.Run()
	tempDirs.Range(func(k, _ any) bool { os.RemoveAll(k.(string)); return true })
	os.Exit(code)
}

type builtWalk struct {
	once sync.Once
	bin  string
	err  error
}

// buildWalk compiles testdata/walk.cc -O2 -fomit-frame-pointer once per
// test binary run.
func buildWalk(t *testing.T, wt walkTarget) string {
	t.Helper()
	cxx := requireTool(t, wt.cxx, wt.cross)
	for _, r := range wt.runner[:min(1, len(wt.runner))] {
		requireTool(t, r, wt.cross)
	}
	v, _ := buildOnce.LoadOrStore(wt.arch, &builtWalk{})
	b := v.(*builtWalk)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "unwind-walk-")
		if err != nil {
			b.err = err
			return
		}
		tempDirs.Store(dir, true)
		b.bin = filepath.Join(dir, "walk")
		out, err := exec.Command(cxx, "-O2", "-fomit-frame-pointer", "-pthread", "-o", b.bin, "testdata/walk.cc").CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("%s: %v\n%s", cxx, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// snapshot is one record written by walk.cc's snap_c.
type snapshot struct {
	regs      Regs
	stackLo   uint64
	stack     []byte
	backtrace []uint64
	maps      []mapLine
	name      string
}

type mapLine struct {
	start, end, off uint64
	perms, path     string
}

func readSnapshot(t *testing.T, dir, name string) *snapshot {
	t.Helper()
	txt, err := os.ReadFile(filepath.Join(dir, name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	s := &snapshot{name: name}
	s.stack, err = os.ReadFile(filepath.Join(dir, name+".stack"))
	if err != nil {
		t.Fatal(err)
	}
	hex := func(x string) uint64 {
		v, err := strconv.ParseUint(strings.TrimPrefix(x, "0x"), 16, 64)
		if err != nil {
			t.Fatalf("%s: bad number %q", name, x)
		}
		return v
	}
	sc := bufio.NewScanner(bytes.NewReader(txt))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "regs":
			s.regs = Regs{PC: hex(f[1]), SP: hex(f[2]), FP: hex(f[3]), LR: hex(f[4])}
		case "stack":
			s.stackLo = hex(f[1])
			if want := hex(f[2]) - s.stackLo; want != uint64(len(s.stack)) {
				t.Fatalf("%s: stack file has %d bytes, want %d", name, len(s.stack), want)
			}
		case "bt":
			for _, a := range f[1:] {
				s.backtrace = append(s.backtrace, hex(a))
			}
		case "map":
			if len(f) < 7 {
				continue // anonymous
			}
			r := strings.SplitN(f[1], "-", 2)
			s.maps = append(s.maps, mapLine{start: hex(r[0]), end: hex(r[1]), perms: f[2], off: hex(f[3]), path: f[6]})
		}
	}
	if len(s.backtrace) < 2 {
		t.Fatalf("%s: backtrace() gave %d frames", name, len(s.backtrace))
	}
	return s
}

func (s *snapshot) readMem(addr uint64) (uint64, bool) {
	if addr < s.stackLo || addr-s.stackLo+8 > uint64(len(s.stack)) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(s.stack[addr-s.stackLo:]), true
}

var tableCache sync.Map // path -> *Table

func cachedTable(t *testing.T, path string) *Table {
	t.Helper()
	if v, ok := tableCache.Load(path); ok {
		return v.(*Table)
	}
	tab, err := BuildTableFile(path, nil)
	if err != nil {
		t.Fatalf("building the table of %s: %v", path, err)
	}
	tableCache.Store(path, tab)
	return tab
}

// mappings builds a Mapping for every executable file mapping.
func (s *snapshot) mappings(t *testing.T, arch Arch) []Mapping {
	t.Helper()
	var ms []Mapping
	for _, m := range s.maps {
		if !strings.Contains(m.perms, "x") || !strings.HasPrefix(m.path, "/") {
			continue
		}
		tab := cachedTable(t, m.path)
		if tab.Arch != arch {
			t.Fatalf("%s is %v, want %v", m.path, tab.Arch, arch)
		}
		bias, ok := tab.Bias(m.start, m.off)
		if !ok {
			t.Fatalf("%s: no executable segment at file offset %#x", m.path, m.off)
		}
		ms = append(ms, Mapping{Start: m.start, End: m.end, Bias: bias, Table: tab})
	}
	return ms
}

func (s *snapshot) describe(ms []Mapping, pcs []uint64) string {
	var b strings.Builder
	for i, pc := range pcs {
		where := "?"
		for _, m := range s.maps {
			if pc >= m.start && pc < m.end {
				where = fmt.Sprintf("%s+%#x", filepath.Base(m.path), pc-m.start+m.off)
			}
		}
		fmt.Fprintf(&b, "  #%d %#x %s\n", i, pc, where)
	}
	return b.String()
}

// TestWalkMatchesBacktrace runs testdata/walk.cc, built -O2
// -fomit-frame-pointer, and walks each stack it dumped with the tables of
// the program, libc and libstdc++: the frames must be glibc backtrace()'s,
// one for one. backtrace()'s first frame is in snap_c, which snap jumped
// to; the walk starts at snap's entry instead, so frame 0 differs and the
// rest must not.
func TestWalkMatchesBacktrace(t *testing.T) {
	for _, wt := range walkTargets() {
		t.Run(wt.arch.String(), func(t *testing.T) {
			bin := buildWalk(t, wt)
			dir := t.TempDir()
			args := append(append([]string(nil), wt.runner...), bin, dir)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
			cases := []string{"qsort", "stdsort", "recursion", "signal", "newhandler", "thread", "noreturn"}
			if wt.arch == ArchARM64 {
				// The signal trampoline under qemu-user is an anonymous page
				// with no CFI (on a real arm64 kernel it is the vDSO's):
				// covered on x86-64 only.
				cases = slices.DeleteFunc(cases, func(c string) bool { return c == "signal" })
			}
			var tail []uint64 // main's callers, for the nocfi case
			for _, c := range cases {
				s := readSnapshot(t, dir, c)
				ms := s.mappings(t, wt.arch)
				res := WalkDetailed(s.regs, s.readMem, ms, 128)
				want := s.backtrace[1:]
				got := res.Frames[1:]
				if res.Frames[0] != s.regs.PC || !slices.Equal(got, want) || res.Stop != StopEnd {
					t.Errorf("%s: walk (stop %v):\n%sbacktrace():\n%s", c, res.Stop, s.describe(ms, res.Frames), s.describe(ms, s.backtrace))
					continue
				}
				if c == "qsort" {
					tail = want[len(want)-3:]
				}
				t.Logf("%s: %d frames, as backtrace()", c, len(res.Frames))
			}
			if t.Failed() {
				return
			}

			// In nocfi, backtrace() stops at the frame without CFI (libgcc
			// has no rule there); the walk goes on through the frame
			// pointer and must reach main's callers like the other stacks.
			s := readSnapshot(t, dir, "nocfi")
			ms := s.mappings(t, wt.arch)
			res := WalkDetailed(s.regs, s.readMem, ms, 128)
			bt := s.backtrace[1:]
			got := res.Frames[1:]
			// call_nocfi(2) recursion: 3 frames, then main and its 3 callers.
			if res.Stop != StopEnd || len(got) != len(bt)+3+1+len(tail) ||
				!slices.Equal(got[:len(bt)], bt) || !slices.Equal(got[len(got)-len(tail):], tail) {
				t.Errorf("nocfi: walk (stop %v):\n%sbacktrace():\n%smain's callers:\n%s", res.Stop,
					s.describe(ms, res.Frames), s.describe(ms, s.backtrace), s.describe(ms, tail))
			}
		})
	}
}
