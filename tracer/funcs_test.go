package tracer

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/memtrace/memtrace/internal/bpftest"
)

func systemLib(t *testing.T, names ...string) string {
	for _, n := range names {
		if _, err := os.Stat(n); err == nil {
			return n
		}
	}
	bpftest.Unavailable(t, "none of %v on this system (make deps installs them)", names)
	return ""
}

// TestPlacementOnSystemLibs checks every probe point chosen in the real
// libc and libstdc++: it must be an instruction the kernel emulates, and
// every instruction before it must leave the arguments and the stack alone.
func TestPlacementOnSystemLibs(t *testing.T) {
	for _, lib := range []string{
		systemLib(t, "/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
		systemLib(t, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"),
	} {
		pps, err := resolveLib(lib)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := os.Open(lib)
		defer f.Close()
		ef, _ := elf.NewFile(f)
		if ef.Machine != elf.EM_X86_64 {
			t.Skip("x86 placement")
		}
		placed := 0
		for _, pp := range pps {
			code := make([]byte, 16)
			f.ReadAt(code, int64(pp.fileOff))
			inst, err := x86asm.Decode(code, 64)
			if err != nil {
				t.Fatalf("%s: decode at probe: %v", pp.symbol, err)
			}
			t.Logf("%-40s placed=%v insn=%v", pp.symbol, pp.placed, inst)
			if pp.placed {
				placed++
				if !emulated(inst) {
					t.Errorf("%s: probe on %v, which the kernel single-steps", pp.symbol, inst)
				}
			}
		}
		if placed*2 < len(pps) {
			t.Errorf("%s: only %d of %d probes on emulated instructions", lib, placed, len(pps))
		}
	}
}

func TestPlaceX86(t *testing.T) {
	cases := []struct {
		name string
		code []byte
		spec probeSpec
		off  uint64
		ok   bool
	}{
		{"push first", []byte{0x41, 0x54, 0x55}, probeSpec{args: 1}, 0, true},
		{"endbr then push", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x55}, probeSpec{args: 1}, 4, true},
		// free: test rdi,rdi; je +0xbf; push rbp
		{"free null test", []byte{0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0, 0, 0, 0x55}, probeSpec{args: 1, skipNullTest: true}, 9, true},
		// the same without permission to skip the NULL test
		{"null test kept", []byte{0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0, 0, 0, 0x55}, probeSpec{args: 1}, 0, false},
		// mov rbx,rdi is harmless; mov rdi,rbx clobbers the argument
		{"harmless mov", []byte{0x48, 0x89, 0xfb, 0x55}, probeSpec{args: 1}, 3, true},
		{"clobbered arg", []byte{0x48, 0x89, 0xdf, 0x55}, probeSpec{args: 1}, 0, false},
		{"sub rsp", []byte{0x48, 0x83, 0xec, 0x08, 0x55}, probeSpec{args: 1}, 0, false},
		{"jmp tail call", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xe9, 1, 2, 3, 4}, probeSpec{args: 1}, 4, true},
		{"garbage", []byte{0x0f, 0x0b}, probeSpec{args: 1}, 0, false},
		{"empty", nil, probeSpec{args: 1}, 0, false},
	}
	for _, c := range cases {
		off, ok := placeX86(c.code, c.spec)
		if off != c.off || ok != c.ok {
			t.Errorf("%s: got %d,%v want %d,%v", c.name, off, ok, c.off, c.ok)
		}
	}
}

func FuzzPlaceX86(f *testing.F) {
	f.Add([]byte{0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0, 0, 0, 0x55})
	f.Fuzz(func(t *testing.T, b []byte) {
		off, ok := placeX86(b, probeSpec{args: 2, skipNullTest: true})
		if ok && int(off) >= len(b) {
			t.Fatalf("offset %d past %d bytes", off, len(b))
		}
	})
}

// buildStatic compiles src with gcc -static (libc6-dev's libc.a).
func buildStatic(t *testing.T, src string, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, "p.c")
	bin := filepath.Join(dir, "p")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-O1", "-static", "-o", bin, c}, extra...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc -static: %v\n%s", err, out)
	}
	return bin
}

const staticSrc = `#include <stdlib.h>
#include <sys/mman.h>
int main(void) { void *volatile p = malloc(10); free(p); p = mmap(0, 4096, 3, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); return 0; }
`

// TestResolveStaticExecutable: a static program's allocator is found in
// its .symtab, and the internal-call ranges cover the C library's part of
// its text only.
func TestResolveStaticExecutable(t *testing.T) {
	bin := buildStatic(t, staticSrc)
	if !OwnAllocator(bin) {
		t.Fatalf("OwnAllocator(%s) = false for a static glibc program", bin)
	}
	pps, err := resolveLib(bin)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, _ := ef.Symbols()
	addr := map[string]uint64{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			addr[s.Name] = s.Value
		}
	}
	got := map[string]probePoint{}
	for _, pp := range pps {
		got[pp.symbol] = pp
	}
	for _, n := range []string{"malloc", "free", "calloc", "realloc", "strdup", "posix_memalign", "memalign", "mmap", "munmap"} {
		if _, ok := got[n]; !ok {
			t.Errorf("%s not probed (found %v)", n, keys(got))
		}
	}
	if addr["aligned_alloc"] == addr["memalign"] {
		if _, ok := got["aligned_alloc"]; ok {
			t.Errorf("aligned_alloc probed under its own name, though it is memalign's alias and no PLT tells them apart")
		}
	}
	if f := got["free"]; f.textFrom != 0 || f.textTo != 0 {
		t.Errorf("free's direct-call test is on (%#x, %#x): every call a static program makes is direct", f.textFrom, f.textTo)
	}
	m := got["mmap"]
	seg := execSegment(ef, addr["mmap"])
	from := addr["mmap"] + m.delta - m.textFrom
	if m.textFrom == 0 || from <= addr["main"] || from > addr["malloc"] || addr["mmap"]+m.delta+m.textTo != seg.Vaddr+seg.Memsz {
		t.Errorf("mmap's internal range starts at %#x (main %#x, malloc %#x) and ends at %#x (text ends %#x)",
			from, addr["main"], addr["malloc"], addr["mmap"]+m.delta+m.textTo, seg.Vaddr+seg.Memsz)
	}
}

// TestResolveStaticO2: built -O2, main is in .text.startup, ahead of the
// start-up files' _start and of the program's other functions: the C
// library's part of the text still begins after those, so the mmap calls
// of the program's own functions are not taken for libc's.
func TestResolveStaticO2(t *testing.T) {
	bin := buildStatic(t, `#include <stdlib.h>
#include <sys/mman.h>
__attribute__((noinline)) static void *get(size_t n) { void *p = mmap(0, n, 3, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); return p == MAP_FAILED ? 0 : p; }
int main(int c, char **v) { (void)v; void *p = get(4096 * (size_t)c); return p == 0; }
`, "-O2")
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, _ := ef.Symbols()
	addr := map[string]uint64{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			addr[s.Name] = s.Value
		}
	}
	if !(addr["main"] < addr["_start"] && addr["_start"] < addr["get"]) {
		t.Fatalf("gcc -O2 laid out main %#x, _start %#x, get %#x: not the layout this test is about", addr["main"], addr["_start"], addr["get"])
	}
	pps, err := resolveLib(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, pp := range pps {
		if pp.symbol != "mmap" && pp.symbol != "munmap" {
			continue
		}
		from := addr[pp.symbol] + pp.delta - pp.textFrom
		if from <= addr["get"] || from > addr["malloc"] {
			t.Errorf("%s's internal range starts at %#x: want after the program's get (%#x), at or before malloc (%#x)", pp.symbol, from, addr["get"], addr["malloc"])
		}
	}
}

func keys(m map[string]probePoint) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestResolveNotOwnAllocator: a dynamic program, a stripped static one and
// libc itself (which names an interpreter, to be runnable) have no
// allocator of their own; libc keeps its whole text as internal range.
func TestResolveNotOwnAllocator(t *testing.T) {
	dir := t.TempDir()
	c := filepath.Join(dir, "d.c")
	os.WriteFile(c, []byte(staticSrc), 0o644)
	dyn := filepath.Join(dir, "d")
	if out, err := exec.Command("gcc", "-O1", "-o", dyn, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	stripped := buildStatic(t, staticSrc, "-s")
	libc := systemLib(t, "/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6")
	for _, p := range []string{dyn, stripped, libc} {
		if OwnAllocator(p) {
			t.Errorf("OwnAllocator(%s) = true", p)
		}
	}
	for _, p := range []string{dyn, stripped} {
		if _, err := resolveLib(p); !errors.Is(err, ErrNoAllocFuncs) {
			t.Errorf("resolveLib(%s): %v, want ErrNoAllocFuncs", p, err)
		}
	}
	pps, err := resolveLib(libc)
	if err != nil {
		t.Fatal(err)
	}
	for _, pp := range pps {
		if pp.symbol == "free" || pp.symbol == "mmap" {
			if pp.textFrom+pp.textTo < 1<<20 {
				t.Errorf("libc %s: internal range %#x+%#x does not cover libc's text", pp.symbol, pp.textFrom, pp.textTo)
			}
		}
	}
}
