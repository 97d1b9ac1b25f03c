package tests

// The DWARF (.eh_frame) stack walk in BPF, end to end: code built
// -O2 -fomit-frame-pointer unwound frame for frame through frames of every
// size (an extended rule, a frame pointer set up by alloca), through libc
// (a qsort callback) and libstdc++ (std::thread), across a signal frame,
// in threads, in a dlopen'ed library, to the root of each stack; and the
// frame-pointer walk still there with --stack-unwind fp.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/unwind"
)

// mainRoot is how glibc's start of a program appears below main.
var mainRoot = []string{"main", "__libc_start_call_main", "__libc_start_main", "_start"}

func hasSuffix(got, want []string) bool {
	return len(got) >= len(want) && strings.Join(got[len(got)-len(want):], " ") == strings.Join(want, " ")
}

func oneEvent(t *testing.T, evs []*stackEvent, op string, size uint64) *stackEvent {
	t.Helper()
	es := find(evs, op, size)
	if len(es) == 0 {
		t.Fatalf("no %s(%d) event", op, size)
	}
	return es[0]
}

const frameSizesSrc = `#include <stdlib.h>
#include <string.h>
#include <alloca.h>
#define NI __attribute__((noinline))
void *volatile sink;
NI void *leaf(int n) { void *p = malloc(n); __asm__ volatile(""); return p; }
/* Over 512 KiB: the CFA offset needs an extended rule. */
NI void *huge(int n) { volatile char buf[600 * 1024]; buf[0] = 1; buf[sizeof buf - 1] = 2; void *p = leaf(n); __asm__ volatile(""); return (char *)p + buf[0] - 1; }
/* alloca: gcc sets up rbp and the CFA follows it. */
NI void *var(int n) { char *a = alloca(n / 8); memset(a, 1, n / 8); sink = a; void *p = huge(n); __asm__ volatile(""); return p; }
NI void *big(int n) { volatile char buf[5000]; buf[0] = 0; void *p = var(n + buf[0]); __asm__ volatile(""); return p; }
NI void *small(int n) { volatile int x = n; void *p = big(x); __asm__ volatile(""); return p; }
int main(void) { void *p = small(3030); free(p); return 0; }
`

// TestStackDwarfFrameSizes: frames of 8 bytes to 600 KiB, one found
// through rbp, all come out, down to _start, marked complete; with a
// smaller --stack-depth the stack is cut there and said so.
func TestStackDwarfFrameSizes(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "gcc", "frames", frameSizesSrc, "-O2", "-fomit-frame-pointer")
	tab, err := unwind.BuildTableFile(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tab.Stats.Extended == 0 || tab.Stats.RowsByType[unwind.CFAFP] == 0 {
		t.Fatalf("the program's table has %d extended rules and %d fp rows: the test needs both", tab.Stats.Extended, tab.Stats.RowsByType[unwind.CFAFP])
	}
	e := oneEvent(t, traceStacks(t, 32, nil, bin), "malloc", 3030)
	want := append([]string{"leaf", "huge", "var", "big", "small"}, mainRoot...)
	if got := symbolsOf(e.frames); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("frames %v\nwant     %v", got, want)
	}
	if e.truncated != "" {
		t.Errorf("a stack that reached _start is marked truncated=%s", e.truncated)
	}
	for _, f := range e.frames[:6] {
		if f.module != bin {
			t.Errorf("frame %s in %q, want %q", f.symbol, f.module, bin)
		}
	}
	e = oneEvent(t, traceStacks(t, 4, nil, bin), "malloc", 3030)
	if got := symbolsOf(e.frames); strings.Join(got, " ") != "leaf huge var big" || e.truncated != "depth" {
		t.Fatalf("depth 4: frames %v truncated=%q, want leaf huge var big, depth", got, e.truncated)
	}
}

const callbackSrc = `#include <stdlib.h>
#include <pthread.h>
#define NI __attribute__((noinline))
NI static int cmp(const void *a, const void *b) {
	void *volatile p = malloc(4040);
	free(p);
	return *(const int *)a - *(const int *)b;
}
NI static void *worker(void *arg) { void *volatile p = malloc(4141); free(p); return arg; }
int main(void) {
	int v[] = {3, 1, 2, 5, 4};
	qsort(v, 5, sizeof v[0], cmp);
	pthread_t th;
	pthread_create(&th, 0, worker, 0);
	pthread_join(th, 0);
	return 0;
}
`

// TestStackDwarfThroughLibc: a qsort comparator's allocation shows the
// comparator, libc's sort below it, then main down to _start; a thread's
// ends at its root in libc (start_thread, clone3).
func TestStackDwarfThroughLibc(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "gcc", "callback", callbackSrc, "-O2", "-fomit-frame-pointer", "-lpthread")
	evs := traceStacks(t, 32, nil, bin)
	e := oneEvent(t, evs, "malloc", 4040)
	got := symbolsOf(e.frames)
	if len(got) < 6 || got[0] != "cmp" || e.frames[0].module != bin || !hasSuffix(got, mainRoot) || e.truncated != "" {
		t.Fatalf("qsort callback: frames %v truncated=%q, want cmp, libc's sort, %v", got, e.truncated, mainRoot)
	}
	inLibc := 0
	for _, f := range e.frames[1 : len(e.frames)-len(mainRoot)] {
		if !strings.Contains(f.module, "libc.so") {
			t.Errorf("frame %s between cmp and main is in %q, not libc", f.symbol, f.module)
		}
		inLibc++
	}
	if inLibc == 0 {
		t.Errorf("no libc frame between cmp and main: %v", got)
	}
	e = oneEvent(t, evs, "malloc", 4141)
	got = symbolsOf(e.frames)
	last := got[len(got)-1]
	if got[0] != "worker" || (last != "clone3" && last != "__clone3") || !strings.Contains(strings.Join(got, " "), "start_thread") || e.truncated != "" {
		t.Fatalf("thread: frames %v truncated=%q, want worker ... start_thread clone3", got, e.truncated)
	}
}

const cxxSrc = `#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>
__attribute__((noinline)) static bool less(int a, int b) {
	void *volatile p = malloc(5050);
	free(p);
	return a < b;
}
__attribute__((noinline)) static void work() { void *volatile p = malloc(6060); free(p); }
int main() {
	std::vector<int> v{5, 3, 1, 4, 2};
	std::sort(v.begin(), v.end(), less);
	std::thread th(work);
	th.join();
	return 0;
}
`

// TestStackDwarfThroughLibstdcxx: a std::sort comparator (template code
// without frame pointers) and a std::thread, whose function libstdc++
// calls: the thread's stack runs through libstdc++ into libc's root.
func TestStackDwarfThroughLibstdcxx(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "g++", "cxx", cxxSrc, "-O2", "-fomit-frame-pointer", "-pthread")
	evs := traceStacks(t, 48, nil, bin)
	e := oneEvent(t, evs, "malloc", 5050)
	got := symbolsOf(e.frames)
	if got[0] != "_ZL4lessii" || !hasSuffix(got, mainRoot) || e.truncated != "" {
		t.Fatalf("std::sort comparator: frames %v truncated=%q, want _ZL4lessii ... %v", got, e.truncated, mainRoot)
	}
	e = oneEvent(t, evs, "malloc", 6060)
	got = symbolsOf(e.frames)
	stdcxx := false
	for _, f := range e.frames {
		stdcxx = stdcxx || strings.Contains(f.module, "libstdc++")
	}
	last := got[len(got)-1]
	if got[0] != "_ZL4workv" || !stdcxx || (last != "clone3" && last != "__clone3") || e.truncated != "" {
		t.Fatalf("std::thread: frames %v (libstdc++ frame %v) truncated=%q, want _ZL4workv ... libstdc++ ... clone3", got, stdcxx, e.truncated)
	}
}

const sigSrc = `#include <signal.h>
#include <stdlib.h>
#define NI __attribute__((noinline))
NI static void handler(int sig) { void *volatile p = malloc(7070 + sig - SIGUSR1); free(p); }
NI static void trigger(void) { raise(SIGUSR1); __asm__ volatile(""); }
int main(void) { signal(SIGUSR1, handler); trigger(); return 0; }
`

// TestStackDwarfSignalFrame: an allocation in a signal handler unwinds
// through the kernel's signal frame (__restore_rt) into the code the
// signal interrupted, down to _start.
func TestStackDwarfSignalFrame(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "gcc", "sig", sigSrc, "-O2", "-fomit-frame-pointer")
	e := oneEvent(t, traceStacks(t, 32, nil, bin), "malloc", 7070)
	got := symbolsOf(e.frames)
	j := strings.Join(got, " ")
	// Frame 1 is the return address the kernel gave the handler: libc's
	// __restore_rt, whose FDE starts a byte early, so a symbol lookup at
	// the call (address - 1) names no function, as backtrace_symbols
	// shows it too.
	if len(got) < 4 || got[0] != "handler" || !strings.Contains(e.frames[1].module, "libc.so") ||
		(got[1] != "" && got[1] != "__restore_rt") || !strings.Contains(j, "raise trigger main") || !hasSuffix(got, mainRoot) || e.truncated != "" {
		t.Fatalf("frames %v truncated=%q, want handler, libc's __restore_rt, ...raise trigger %v", got, e.truncated, mainRoot)
	}
}

const dlNoFPLibSrc = `#include <stdlib.h>
#define NI __attribute__((noinline))
NI static void *inner(int n) { volatile char pad[300]; pad[0] = 0; void *p = malloc(n + pad[0]); __asm__ volatile(""); return p; }
NI void *lib_alloc(int n) { void *p = inner(n); __asm__ volatile(""); return p; }
`

const dlNoFPMainSrc = `#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) static void *call(void *(*f)(int)) { void *p = f(3232); __asm__ volatile(""); return p; }
int main(int argc, char **argv) {
	void *h = dlopen(argv[1], RTLD_NOW);
	if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
	void *p = call((void *(*)(int))dlsym(h, "lib_alloc"));
	free(p);
	return 0;
}
`

// TestStackDwarfDlopen: a library dlopen'ed and called at once, built
// without frame pointers, is unwound with its own table from its first
// call (ld.so's hook holds the process until the table is in): every
// round, not only when the timing is kind.
func TestStackDwarfDlopen(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "libnofp.so")
	src := filepath.Join(dir, "lib.c")
	os.WriteFile(src, []byte(dlNoFPLibSrc), 0o644)
	if out, err := command("gcc", "-shared", "-fPIC", "-O2", "-fomit-frame-pointer", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	bin := buildWith(t, "gcc", "dlnofp", dlNoFPMainSrc, "-O2", "-fomit-frame-pointer", "-ldl")
	want := append([]string{"inner", "lib_alloc", "call"}, mainRoot...)
	for round := range rounds(5, 1) {
		e := oneEvent(t, traceStacks(t, 32, nil, bin, lib), "malloc", 3232)
		if got := symbolsOf(e.frames); strings.Join(got, " ") != strings.Join(want, " ") || e.truncated != "" {
			t.Fatalf("round %d: frames %v truncated=%q\nwant %v", round, got, e.truncated, want)
		}
		if e.frames[0].module != lib || e.frames[2].module != bin {
			t.Fatalf("round %d: modules %q, %q", round, e.frames[0].module, e.frames[2].module)
		}
	}
}

// TestStackFramePointerMode: --stack-unwind fp keeps the kernel's
// frame-pointer walk, which on code without frame pointers gives the
// caller only and says why.
func TestStackFramePointerMode(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "gcc", "nofp", deepSrc, "-O2", "-fomit-frame-pointer")
	e := oneEvent(t, traceStacks(t, 32, []string{"--stack-unwind", "fp"}, bin), "malloc", 2020)
	if len(e.frames) == 0 || e.frames[0].symbol != "f20" || len(e.frames) >= 21 || e.truncated != "fp" {
		t.Fatalf("frames %v truncated=%q, want f20 and a cut marked fp", symbolsOf(e.frames), e.truncated)
	}
	code, _, se := memtraceRun(t, nil, "--stack-depth", "8", "--stack-unwind", "lbr", "--", bin)
	if code != 2 || !strings.Contains(se, "--stack-unwind") || strings.Count(strings.TrimSpace(se), "\n") != 0 {
		t.Fatalf("--stack-unwind lbr: exit %d, stderr %q; want one line and exit 2", code, se)
	}
}

// TestStackFramePointerWalkMatchesDwarf: memtrace's own frame-pointer walk
// (--stack-unwind fp: the kernel's rule, read from chunks of the stack)
// gives, on code built with frame pointers, frame for frame the DWARF
// walk's stack (the one the oracle holds to glibc's backtrace()), down to
// __libc_start_call_main, where libc's code without frame pointers ends
// the chain; the addresses too, every round.
func TestStackFramePointerWalkMatchesDwarf(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "gcc", "deepfp", deepSrc, "-O1", "-fno-omit-frame-pointer")
	for round := range rounds(5, 1) {
		fp := oneEvent(t, traceStacks(t, 32, []string{"--stack-unwind", "fp"}, bin), "malloc", 2020)
		dw := oneEvent(t, traceStacks(t, 32, nil, bin), "malloc", 2020)
		if len(fp.frames) != 22 || fp.truncated != "" {
			t.Fatalf("round %d: fp walk: %d frames %v truncated=%q, want f20..f1, main, __libc_start_call_main", round, len(fp.frames), symbolsOf(fp.frames), fp.truncated)
		}
		if len(dw.frames) < len(fp.frames) {
			t.Fatalf("round %d: DWARF walk %d frames, fp walk %d", round, len(dw.frames), len(fp.frames))
		}
		for i, f := range fp.frames {
			d := dw.frames[i]
			if f.symbol != d.symbol || f.off != d.off || f.module != d.module {
				t.Fatalf("round %d: frame #%d: fp %s(%s+%#x), DWARF %s(%s+%#x)", round, i, f.module, f.symbol, f.off, d.module, d.symbol, d.off)
			}
		}
		if got := fp.frames[21].symbol; got != "__libc_start_call_main" {
			t.Fatalf("round %d: last frame %q", round, got)
		}
	}
}

// TestNoFreeStacks: --no-free-stacks leaves free lines without frames and
// allocations with theirs, under eBPF (the kernel side takes none for
// frees) and --preload (the log the same); without it, frees carry their
// stacks, as memtrack's do.
func TestNoFreeStacks(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "gcc", "deepfree", deepSrc, "-O1", "-fno-omit-frame-pointer")
	for _, preload := range []bool{false, true} {
		for _, noFree := range []bool{false, true} {
			var extra []string
			if noFree {
				extra = append(extra, "--no-free-stacks")
			}
			var evs []*stackEvent
			if preload {
				log := filepath.Join(t.TempDir(), "log")
				args := append([]string{"--preload", "--stack-depth", "32", "-o", log}, extra...)
				if code, _, se := memtraceRun(t, nil, append(append(args, "--"), bin)...); code != 0 {
					t.Fatalf("memtrace --preload exit %d: %s", code, se)
				}
				evs = readStacks(t, log)
			} else {
				evs = traceStacks(t, 32, extra, bin)
			}
			a := oneEvent(t, evs, "malloc", 2020)
			var f *stackEvent
			for _, e := range evs {
				if e.kind == logfmt.KindFree && e.ptr == a.ptr {
					f = e
				}
			}
			if f == nil {
				t.Fatalf("preload %v: no free of %#x", preload, a.ptr)
			}
			// dladdr names no static function of a program built
			// without -rdynamic: under --preload the frames count.
			if len(a.frames) < 21 || !preload && a.frames[0].symbol != "f20" {
				t.Errorf("preload %v, --no-free-stacks %v: malloc frames %v, want f20 .. main", preload, noFree, symbolsOf(a.frames))
			}
			if noFree && len(f.frames) != 0 || !noFree && (len(f.frames) < 2 || !preload && f.frames[0].symbol != "main") {
				t.Errorf("preload %v, --no-free-stacks %v: free frames %v", preload, noFree, symbolsOf(f.frames))
			}
		}
	}
}
