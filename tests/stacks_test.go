package tests

// Stack capture end to end (eBPF mode): frames as the program's call chain
// says they must be, symbols from stripped binaries through their debug
// files, dlopen'ed-then-closed libraries, --stack-threads, source lines,
// long C++ names, a Rust program, and honest truncation.

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/symbols"
)

type stackEvent struct {
	kind      logfmt.Kind
	op        string
	size, ptr uint64
	thread    string
	frames    []stackFrame
	truncated string
}

type stackFrame struct {
	module, symbol string
	off, addr      uint64
}

func readStacks(t *testing.T, path string) []*stackEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*stackEvent
	var cur *stackEvent
	sc := logfmt.NewScanner(bytes.NewReader(b))
	var l logfmt.Line
	for sc.Scan() {
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("unreadable line %q: %v", sc.Line(), err)
		}
		switch l.Kind {
		case logfmt.KindAlloc, logfmt.KindFree:
			cur = &stackEvent{kind: l.Kind, op: string(l.OpText), size: l.Size, ptr: l.Ptr, thread: string(l.Name)}
			out = append(out, cur)
		case logfmt.KindFrame:
			if cur == nil {
				t.Fatalf("frame before any event: %q", sc.Line())
			}
			if l.FrameIndex != len(cur.frames) {
				t.Fatalf("frame #%d after %d frames", l.FrameIndex, len(cur.frames))
			}
			cur.frames = append(cur.frames, stackFrame{string(l.Module), string(l.Symbol), l.Offset, l.Addr})
		case logfmt.KindMeta:
			if string(l.Word) == logfmt.WordStack && cur != nil {
				cur.truncated, _ = logfmt.Field(logfmt.Fields(l.Rest), "reason")
			}
		case logfmt.KindExit:
			cur = nil
		}
	}
	return out
}

// buildWith is src compiled with compiler and args into a program named
// name, in a directory of the test's own (keptBuild compiles it).
func buildWith(t *testing.T, compiler, name, src string, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	built := keptBuild(t, compiler, name, src, args)
	data, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	// A file of the test's own, which it may strip or rewrite, as a
	// fresh build was.
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// keptBuild compiles src with compiler into a program named name once
// for all the tests' processes and make check's runs: the build is kept
// in bin/testbuild under a hash of the compiler's identity (its resolved
// file and the C library's headers, by size and modification time), the
// arguments, the name and the source, and a lock makes concurrent tests
// wait for the one building it. Compiling the same programs in every
// test process was CPU that make check paid each time.
func keptBuild(t *testing.T, compiler, name, src string, args []string) string {
	t.Helper()
	ext := ".c"
	if compiler == "g++" {
		ext = ".cc"
	}
	ident := fmt.Sprintf("%q %q %q %q", compiler, name, ext, args)
	if p, err := exec.LookPath(compiler); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		for _, f := range []string{p, "/usr/include/features.h", "/usr/include/stdlib.h"} {
			if st, err := os.Stat(f); err == nil {
				ident += fmt.Sprintf(" %s:%d:%d", f, st.Size(), st.ModTime().UnixNano())
			}
		}
	}
	h := sha256.Sum256([]byte(ident + "\x00" + src))
	dir := filepath.Join(repoRoot(t), "bin", "testbuild", fmt.Sprintf("%x", h[:12]))
	bin := filepath.Join(dir, name)
	done := filepath.Join(dir, ".done")
	// .done is written after the program: a build it marks is whole,
	// and needs no lock to be read.
	if _, err := os.Stat(done); err == nil {
		return bin
	}
	var lock *os.File
	err := os.MkdirAll(filepath.Dir(dir), 0o755)
	if err == nil {
		lock, err = os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	}
	if err != nil {
		// No bin/ to keep it in (the kernel matrix's guests see the
		// tree read-only): a build of the test's own.
		return compileIn(t, t.TempDir(), compiler, name, ext, src, args)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(done); err == nil {
		return bin
	}
	// A build cut short (a killed test) left what it left: start over.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	compileIn(t, dir, compiler, name, ext, src, args)
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return bin
}

// compileIn compiles src with compiler into dir/name.
func compileIn(t *testing.T, dir, compiler, name, ext, src string, args []string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	s := filepath.Join(dir, name+ext)
	if err := os.WriteFile(s, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := command(compiler, append([]string{"-o", bin, s}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", compiler, err, out)
	}
	return bin
}

func traceStacks(t *testing.T, depth int, extra []string, prog ...string) []*stackEvent {
	t.Helper()
	return traceStacksIn(t, "bpf", depth, extra, prog...)
}

// traceStacksIn is traceStacks on the path mode names ("bpf", or
// "preload" with --preload in extra), held to it by the log's header.
func traceStacksIn(t *testing.T, mode string, depth int, extra []string, prog ...string) []*stackEvent {
	t.Helper()
	return traceStacksEnv(t, mode, nil, depth, extra, prog...)
}

// traceStacksEnv is traceStacksIn with env added to memtrace's.
func traceStacksEnv(t *testing.T, mode string, env []string, depth int, extra []string, prog ...string) []*stackEvent {
	t.Helper()
	log := filepath.Join(t.TempDir(), "log")
	args := append([]string{"--stack-depth", fmt.Sprint(depth), "-o", log}, extra...)
	args = append(append(args, "--"), prog...)
	code, _, se := memtraceRun(t, env, args...)
	if code != 0 {
		t.Fatalf("memtrace exit %d: %s", code, se)
	}
	if mode == "bpf" {
		bpfLog(t, log)
	} else if m := logMode(t, log); m != mode {
		t.Fatalf("the log says mode=%s, want %s", m, mode)
	}
	return readStacks(t, log)
}

// find returns the events with this op and size.
func find(evs []*stackEvent, op string, size uint64) []*stackEvent {
	var out []*stackEvent
	for _, e := range evs {
		if e.op == op && e.size == size {
			out = append(out, e)
		}
	}
	return out
}

func symbolsOf(fs []stackFrame) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.symbol)
	}
	return out
}

const deepSrc = `#include <stdlib.h>
#define F(n, m) __attribute__((noinline)) void *f##n(void) { void *p = f##m(); __asm__ volatile(""); return p; }
__attribute__((noinline)) void *f20(void) { void *p = malloc(2020); __asm__ volatile(""); return p; }
F(19,20) F(18,19) F(17,18) F(16,17) F(15,16) F(14,15) F(13,14) F(12,13) F(11,12) F(10,11)
F(9,10) F(8,9) F(7,8) F(6,7) F(5,6) F(4,5) F(3,4) F(2,3) F(1,2)
int main(void) { void *volatile p = f1(); free(p); return 0; }
`

// TestStackT20: a 20-level call chain comes out frame for frame.
func TestStackT20(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "gcc", "deep", deepSrc, "-O1", "-g", "-fno-omit-frame-pointer")
	evs := find(traceStacks(t, 32, nil, bin), "malloc", 2020)
	if len(evs) != 1 {
		t.Fatalf("%d malloc(2020) events", len(evs))
	}
	var want []string
	for i := 20; i >= 1; i-- {
		want = append(want, fmt.Sprintf("f%d", i))
	}
	want = append(want, "main")
	got := symbolsOf(evs[0].frames)
	if len(got) < len(want) || strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
		t.Fatalf("frames %v\nwant prefix %v", got, want)
	}
	for _, f := range evs[0].frames[:len(want)] {
		if f.module != bin {
			t.Errorf("frame %s in module %q, want %q", f.symbol, f.module, bin)
		}
	}
	if evs[0].truncated != "" {
		t.Errorf("a complete stack is marked truncated (%s)", evs[0].truncated)
	}
	// The same call with a depth of 8: cut by depth, and said so.
	evs = find(traceStacks(t, 8, nil, bin), "malloc", 2020)
	if len(evs) != 1 || len(evs[0].frames) != 8 || evs[0].truncated != "depth" {
		t.Fatalf("depth 8: %d events, frames %v, truncated %q", len(evs), symbolsOf(evs[0].frames), evs[0].truncated)
	}
}

const templSrc = `#include <map>
#include <string>
#include <vector>
#include <cstdlib>
using Long = std::map<std::string, std::vector<std::pair<int, double>>>;
template <int N, class T> struct Rec {
	__attribute__((noinline)) static void *go(const T &t) { void *p = Rec<N - 1, T>::go(t); __asm__ volatile(""); return p; }
};
template <class T> struct Rec<0, T> {
	__attribute__((noinline)) static void *go(const T &) { return malloc(6060); }
};
int main() { Long l; void *volatile p = Rec<60, Long>::go(l); free(p); return 0; }
`

// TestStackT21: 60 levels of template recursion, long names intact once
// demangled.
func TestStackT21(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "g++", "templ", templSrc, "-O1", "-fno-omit-frame-pointer")
	evs := find(traceStacks(t, 70, nil, bin), "malloc", 6060)
	if len(evs) != 1 {
		t.Fatalf("%d malloc(6060) events", len(evs))
	}
	fs := evs[0].frames
	if len(fs) < 62 {
		t.Fatalf("%d frames, want 61 Rec levels and main: %v", len(fs), symbolsOf(fs))
	}
	long := "std::map<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::vector<std::pair<int, double>, std::allocator<std::pair<int, double> > >"
	for i := 0; i <= 60; i++ {
		d := symbols.Demangle(fs[i].symbol)
		want := fmt.Sprintf("Rec<%d, %s", i, long)
		if !strings.HasPrefix(d, want) || !strings.Contains(d, ">::go(") {
			t.Fatalf("frame #%d: %q\n demangles to %q\n want prefix %q", i, fs[i].symbol, d, want)
		}
	}
	if fs[61].symbol != "main" {
		t.Errorf("frame #61 is %q, want main", fs[61].symbol)
	}
}

const dlLibSrc = `#include <stdlib.h>
__attribute__((noinline)) void *lib_alloc(void) { void *p = malloc(3131); __asm__ volatile(""); return p; }
`

const dlMainSrc = `#include <dlfcn.h>
#include <stdlib.h>
#include <stdio.h>
int main(int argc, char **argv) {
	void *h = dlopen(argv[1], RTLD_NOW);
	if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
	void *(*f)(void) = (void *(*)(void))dlsym(h, "lib_alloc");
	void *volatile p = f();
	dlclose(h);
	free(p);
	return 0; /* exits at once: nothing is left mapped to look at */
}
`

// TestStackDlopenClosed: frames in a library that was dlopen'ed, used and
// dlclose'd, in a program that exits right after, still resolve.
func TestStackDlopenClosed(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "libdl_alloc.so")
	src := filepath.Join(dir, "lib.c")
	os.WriteFile(src, []byte(dlLibSrc), 0o644)
	if out, err := command("gcc", "-shared", "-fPIC", "-O1", "-fno-omit-frame-pointer", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	bin := buildWith(t, "gcc", "dlmain", dlMainSrc, "-O1", "-fno-omit-frame-pointer", "-ldl")
	for round := range rounds(3, 1) {
		evs := find(traceStacks(t, 8, nil, bin, lib), "malloc", 3131)
		if len(evs) != 1 || len(evs[0].frames) < 2 {
			t.Fatalf("round %d: %d events", round, len(evs))
		}
		f0, f1 := evs[0].frames[0], evs[0].frames[1]
		if f0.module != lib || f0.symbol != "lib_alloc" || f1.symbol != "main" || f1.module != bin {
			t.Fatalf("round %d: frames %+v", round, evs[0].frames)
		}
	}
}

// TestStackStrippedDebugFile: a stripped binary's frames get their names
// from the debug file beside it (.gnu_debuglink), and a frame's source
// line is the line of the call.
func TestStackStrippedDebugFile(t *testing.T) {
	requireBPF(t)
	src := "#include <stdlib.h>\n__attribute__((noinline)) void *make(int n) {\n\tvoid *p = malloc(n); /* line 3 */\n\t__asm__ volatile(\"\");\n\treturn p;\n}\nint main(void) { void *volatile p = make(4242); free(p); return 0; }\n"
	bin := buildWith(t, "gcc", "stripped", src, "-O1", "-g", "-fno-omit-frame-pointer")
	dbg := bin + ".debug"
	for _, c := range [][]string{
		{"objcopy", "--only-keep-debug", bin, dbg},
		{"strip", "--strip-all", bin},
		{"objcopy", "--add-gnu-debuglink=" + dbg, bin},
	} {
		if out, err := command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	if out, _ := command("nm", bin).CombinedOutput(); !bytes.Contains(out, []byte("no symbols")) {
		t.Fatalf("binary not stripped: %s", out)
	}
	evs := find(traceStacks(t, 8, nil, bin), "malloc", 4242)
	if len(evs) != 1 || len(evs[0].frames) < 2 {
		t.Fatalf("%d events", len(evs))
	}
	f := evs[0].frames[0]
	if f.symbol != "make" || evs[0].frames[1].symbol != "main" {
		t.Fatalf("frames %+v", evs[0].frames)
	}
	file, line, err := symbols.NewCache(nil).SourceLine(f.module, f.symbol, f.off)
	if err != nil || filepath.Base(file) != "stripped.c" || line != 3 {
		t.Fatalf("source of frame #0: %s:%d (%v), want stripped.c:3", file, line, err)
	}
}

const threadsSrc = `#include <pthread.h>
#include <stdlib.h>
static void *w(void *name) {
	pthread_setname_np(pthread_self(), (const char *)name);
	void *volatile p = malloc(777); free(p);
	return 0;
}
int main(void) {
	pthread_t a, b;
	pthread_create(&a, 0, w, "Remote-1"); pthread_join(a, 0);
	pthread_create(&b, 0, w, "Local-1"); pthread_join(b, 0);
	return 0;
}
`

// TestStackThreadsT22: --stack-threads captures stacks only in the threads
// named, through every kind of link. With --stack-depth its programs once
// failed the verifier and memtrace went on in the LD_PRELOAD fallback,
// which passed this test too: traceStacks asserts mode=bpf.
func TestStackThreadsT22(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "gcc", "named", threadsSrc, "-O1", "-fno-omit-frame-pointer", "-lpthread")
	linkKinds := [][]string{nil, {"--no-uprobe-multi"}}
	if testing.Short() {
		// The filter is the subject; the classic links are make test's.
		linkKinds = linkKinds[:1]
	}
	for _, links := range linkKinds {
		for _, filter := range []string{"", "Remote", "ote-"} {
			extra := links
			if filter != "" {
				extra = append([]string{"--stack-threads", "Mars," + filter}, links...)
			}
			evs := traceStacks(t, 8, extra, bin)
			seen := map[string]bool{}
			for _, e := range evs {
				if e.size != 777 || e.kind != logfmt.KindAlloc {
					continue
				}
				seen[e.thread] = true
				want := filter == "" || strings.Contains(e.thread, filter)
				if got := len(e.frames) > 0; got != want {
					t.Errorf("%v filter %q: thread %s has %d frames", links, filter, e.thread, len(e.frames))
				}
				if want && len(e.frames) > 0 && e.frames[0].symbol != "w" {
					t.Errorf("%v filter %q: thread %s: frame #0 is %q, want w", links, filter, e.thread, e.frames[0].symbol)
				}
			}
			if !seen["Remote-1"] || !seen["Local-1"] {
				t.Errorf("%v filter %q: threads seen %v", links, filter, seen)
			}
		}
	}
}

// black_box here, not std::hint's: Debian's rustc (1.63) has it unstable.
const rustSrc = `fn black_box<T>(x: T) -> T {
    let r = unsafe { std::ptr::read_volatile(&x) };
    std::mem::forget(x);
    r
}
#[inline(never)]
fn make_box(n: usize) -> Vec<u8> { black_box(vec![7u8; n]) }
fn main() { let v = make_box(5151); black_box(&v); }
`

// TestStackRust: a Rust program (whose default allocator is the system
// malloc) shows its own functions in the frames.
func TestStackRust(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a Rust program: make test runs it")
	}
	requireBPF(t)
	rustc, err := exec.LookPath("rustc")
	if err != nil {
		bpftest.Unavailable(t, "rustc not installed (make deps installs it)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "r.rs")
	os.WriteFile(src, []byte(rustSrc), 0o644)
	bin := filepath.Join(dir, "r")
	if out, err := command(rustc, "-O", "-C", "force-frame-pointers=yes", "-g", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("rustc: %v %s", err, out)
	}
	evs := traceStacks(t, 16, nil, bin)
	var hit *stackEvent
	for _, e := range evs {
		if e.kind == logfmt.KindAlloc && e.size == 5151 {
			hit = e
		}
	}
	if hit == nil {
		t.Fatal("no 5151-byte allocation from the Rust program")
	}
	var names []string
	for _, f := range hit.frames {
		names = append(names, symbols.Demangle(f.symbol))
	}
	if !strings.Contains(strings.Join(names, "|"), "r::make_box") {
		t.Errorf("frames do not name r::make_box: %v", names)
	}
}

// TestStackWithoutFramePointers: -O2 code without frame pointers, which
// the kernel's frame-pointer walk left at frame #0, comes out whole through
// the DWARF walk: the 21-deep chain, main, and glibc's start below it.
func TestStackWithoutFramePointers(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "gcc", "nofp", deepSrc, "-O2", "-fomit-frame-pointer")
	evs := find(traceStacks(t, 32, nil, bin), "malloc", 2020)
	if len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	e := evs[0]
	var want []string
	for i := 20; i >= 1; i-- {
		want = append(want, fmt.Sprintf("f%d", i))
	}
	want = append(want, "main", "__libc_start_call_main", "__libc_start_main", "_start")
	t.Logf("-O2 without frame pointers: %d frames (%v), truncated=%q", len(e.frames), symbolsOf(e.frames), e.truncated)
	if got := symbolsOf(e.frames); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("frames %v\nwant %v", got, want)
	}
	if e.truncated != "" {
		t.Errorf("a stack that reached _start is marked truncated=%s", e.truncated)
	}
}
