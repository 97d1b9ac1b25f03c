package tests

// The DWARF walk at the edges of a stack, each against glibc's
// backtrace() (the program writes its return addresses to argv[1]): a
// stack of exactly --stack-depth frames, code without any CFI, the root of
// a makecontext context, and the names of the signal and context
// trampolines.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/symbols"
)

// edgesSrc: main [recursions] leaf allocates 7373 after recording
// backtrace(); "ctx" does it in a makecontext context, "sig" in a signal
// handler.
const edgesSrc = `#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#define NI __attribute__((noinline))
static const char *out;
static void *volatile sink;
NI static void leaf(void) {
	void *bt[200];
	int n = backtrace(bt, 200);
	__asm__ volatile("" ::: "memory");
	sink = malloc(7373);
	__asm__ volatile("" ::: "memory");
	char buf[200 * 20];
	int len = 0;
	for (int i = 0; i < n; i++)
		len += snprintf(buf + len, sizeof buf - len, "%lx\n", (unsigned long)bt[i]);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) { write(fd, buf, len); close(fd); }
}
NI int rec(int n) { if (n <= 0) leaf(); else rec(n - 1); __asm__ volatile(""); return n; }
static ucontext_t uc_main, uc_fn;
static char stk[65536];
NI static void in_context(void) { rec(0); __asm__ volatile(""); }
NI static void handler(int sig) { rec(sig - SIGUSR1); __asm__ volatile(""); }
int main(int argc, char **argv) {
	out = argv[1];
	if (strcmp(argv[2], "ctx") == 0) {
		getcontext(&uc_fn);
		uc_fn.uc_stack.ss_sp = stk;
		uc_fn.uc_stack.ss_size = sizeof stk;
		uc_fn.uc_link = &uc_main;
		makecontext(&uc_fn, in_context, 0);
		swapcontext(&uc_main, &uc_fn);
	} else if (strcmp(argv[2], "sig") == 0) {
		signal(SIGUSR1, handler);
		raise(SIGUSR1);
	} else {
		rec(atoi(argv[2]));
	}
	free(sink);
	return 0;
}
`

// edgesRun traces the program with arg at depth and returns the 7373
// allocation's event and backtrace()'s frames.
func edgesRun(t *testing.T, bin string, depth int, arg string) (*stackEvent, []uint64) {
	t.Helper()
	truth := filepath.Join(t.TempDir(), "bt")
	e := oneEvent(t, traceStacks(t, depth, nil, bin, truth, arg), "malloc", 7373)
	b, err := os.ReadFile(truth)
	if err != nil {
		t.Fatalf("the program wrote no backtrace: %v", err)
	}
	var bt []uint64
	for _, l := range strings.Fields(string(b)) {
		v, err := strconv.ParseUint(l, 16, 64)
		if err != nil {
			t.Fatalf("backtrace line %q: %v", l, err)
		}
		bt = append(bt, v)
	}
	return e, bt
}

// sameAsBacktrace: frame 0 is malloc's return address in leaf, backtrace()'s
// frame 0 its own in leaf; from frame 1 on they are the same addresses.
func sameAsBacktrace(t *testing.T, e *stackEvent, bt []uint64, n int) {
	t.Helper()
	if len(e.frames) != n || len(bt) < n {
		t.Fatalf("%d frames, backtrace() %d, want %d: %v", len(e.frames), len(bt), n, symbolsOf(e.frames))
	}
	if e.frames[0].symbol != "leaf" {
		t.Errorf("frame 0 in %q, want leaf", e.frames[0].symbol)
	}
	for i := 1; i < n; i++ {
		if e.frames[i].addr != bt[i] {
			t.Fatalf("frame %d %#x (%s), backtrace() %#x", i, e.frames[i].addr, e.frames[i].symbol, bt[i])
		}
	}
}

func buildEdges(t *testing.T) string {
	return buildWith(t, "gcc", "edges", edgesSrc, "-O2", "-fomit-frame-pointer")
}

// TestStackDwarfExactDepth: a stack of exactly --stack-depth frames (127,
// the most there is) is whole and not marked; one frame more is cut at the
// depth and marked so.
func TestStackDwarfExactDepth(t *testing.T) {
	requireBPF(t)
	bin := buildEdges(t)
	_, bt := edgesRun(t, bin, 32, "0")
	base := len(bt) // leaf rec main ... _start
	n := strconv.Itoa(127 - base)
	e, bt := edgesRun(t, bin, 127, n)
	if len(bt) != 127 {
		t.Fatalf("backtrace() has %d frames, want 127", len(bt))
	}
	sameAsBacktrace(t, e, bt, 127)
	if e.truncated != "" {
		t.Errorf("a whole stack of 127 frames at --stack-depth 127 is marked truncated=1 reason=%s", e.truncated)
	}
	e, bt = edgesRun(t, bin, 127, strconv.Itoa(128-base))
	if len(bt) != 128 || len(e.frames) != 127 || e.truncated != "depth" {
		t.Errorf("128 frames at --stack-depth 127: %d frames, reason %q (backtrace() %d), want 127 and depth", len(e.frames), e.truncated, len(bt))
	}
	e, bt = edgesRun(t, bin, base, "0")
	sameAsBacktrace(t, e, bt, base)
	if e.truncated != "" {
		t.Errorf("a whole stack of %d frames at --stack-depth %d is marked truncated=1 reason=%s", base, base, e.truncated)
	}
}

const noCFISrc = `#include <stdlib.h>
#define NI __attribute__((noinline))
void *volatile sink;
NI void leaf(int n) { sink = malloc(n); __asm__ volatile(""); }
NI void mid(int n) { volatile int x = n; leaf(x); __asm__ volatile(""); }
int main(void) { mid(5151); free(sink); return 0; }
`

// TestStackDwarfNoCFIIsNoUnwindInfo: code built without CFI or frame
// pointers stops after its first frame, marked no-unwind-info (the
// reason docs/stacks.md gives a PC without a rule or frame pointer), not
// bad-read.
func TestStackDwarfNoCFIIsNoUnwindInfo(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "gcc", "nocfi", noCFISrc, "-O2", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables")
	e := oneEvent(t, traceStacks(t, 32, nil, bin), "malloc", 5151)
	if got := symbolsOf(e.frames); len(got) != 1 || got[0] != "leaf" || e.truncated != "no-unwind-info" {
		t.Fatalf("frames %v truncated=%q, want leaf, no-unwind-info", got, e.truncated)
	}
}

// requireLibcDebug skips unless libc's separate debug file (libc6-dbg)
// names its local functions.
func requireLibcDebug(t *testing.T, e *stackEvent) {
	t.Helper()
	for _, f := range e.frames {
		if !inLibrary(f, "libc.so.6") {
			continue
		}
		c := symbols.NewCache(nil)
		defer c.Close()
		m, err := c.Open(f.module)
		if err != nil {
			t.Fatalf("open %s: %v", f.module, err)
		}
		if _, err := m.SymbolValue("__libc_start_call_main"); err != nil {
			t.Skipf("%s: no local names (%v): install libc6-dbg", f.module, err)
		}
		return
	}
	t.Fatalf("no frame in libc: %v", symbolsOf(e.frames))
}

// TestStackDwarfMakecontextRoot: a makecontext context's stack ends at
// __start_context, named, as backtrace() and gdb end it; the walk used to
// go on with the rule of the function before it and add a frame from .bss.
func TestStackDwarfMakecontextRoot(t *testing.T) {
	requireBPF(t)
	bin := buildEdges(t)
	e, bt := edgesRun(t, bin, 32, "ctx")
	sameAsBacktrace(t, e, bt, len(bt))
	requireLibcDebug(t, e)
	want := []string{"leaf", "rec", "in_context", "__start_context"}
	if got := symbolsOf(e.frames); strings.Join(got, " ") != strings.Join(want, " ") || e.truncated != "" {
		t.Fatalf("frames %v truncated=%q, want %v, whole", got, e.truncated, want)
	}
}

// TestStackDwarfSignalTrampolineNamed: the return address the kernel gives
// a signal handler is libc's __restore_rt, exactly: named so, as libc6-dbg
// names it, though no function holds the byte before it.
func TestStackDwarfSignalTrampolineNamed(t *testing.T) {
	requireBPF(t)
	bin := buildEdges(t)
	e, bt := edgesRun(t, bin, 64, "sig")
	sameAsBacktrace(t, e, bt, len(bt))
	requireLibcDebug(t, e)
	got := symbolsOf(e.frames)
	if len(got) < 5 || strings.Join(got[:4], " ") != "leaf rec handler __restore_rt" || !hasSuffix(got, mainRoot) || e.truncated != "" {
		t.Fatalf("frames %v truncated=%q, want leaf rec handler __restore_rt ... %v", got, e.truncated, mainRoot)
	}
}

// TestStackSeparateDebugFrame: a binary built without .eh_frame whose
// .debug_frame went into its separate debug file (objcopy
// --only-keep-debug, strip --strip-debug, a debuglink) unwinds through
// that file's CFI on both paths, as gdb does, to the same frames
// (function and offset: each run has its own load addresses); with
// the debug file gone it stops at its first frame, marked so.
func TestStackSeparateDebugFrame(t *testing.T) {
	bin := buildWith(t, "gcc", "sepdebug", noCFISrc, "-g", "-O2", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables")
	dbg := bin + ".debug"
	for _, c := range [][]string{
		{"objcopy", "--only-keep-debug", bin, dbg},
		{"strip", "--strip-debug", bin},
		{"objcopy", "--add-gnu-debuglink=" + dbg, bin},
	} {
		if out, err := command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	if out, _ := command("readelf", "-S", bin).CombinedOutput(); strings.Contains(string(out), ".debug_frame") {
		t.Fatalf("the stripped binary still has its .debug_frame")
	}
	want := []string{"leaf", "mid", "main"}
	var frames []string
	// preload-slow-table: memtrace builds every table 0.6 s late (more
	// than the quarter second the library once waited at most), as on a
	// loaded machine; the library must wait for it rather than take
	// backtrace(), which stops at leaf (its CFI is only in .debug_frame).
	for _, src := range []string{"bpf", "preload", "preload-slow-table"} {
		var evs []*stackEvent
		switch src {
		case "bpf":
			requireBPF(t)
			evs = traceStacks(t, 32, nil, bin)
		case "preload":
			evs = traceStacksIn(t, "preload", 32, []string{"--preload"}, bin)
		default:
			evs = traceStacksEnv(t, "preload", []string{"MEMTRACE_TEST_TABLE_DELAY=600ms"}, 32, []string{"--preload"}, bin)
		}
		e := oneEvent(t, evs, "malloc", 5151)
		got := symbolsOf(e.frames)
		if len(got) < len(want) || strings.Join(got[:len(want)], " ") != strings.Join(want, " ") || e.truncated != "" {
			t.Fatalf("%s: frames %v truncated=%q, want %v first, whole", src, got, e.truncated, want)
		}
		var fs []string
		for _, f := range e.frames {
			fs = append(fs, fmt.Sprintf("%s(%s+%#x)", filepath.Base(f.module), f.symbol, f.off))
		}
		frames = append(frames, strings.Join(fs, " "))
	}
	for _, f := range frames[1:] {
		if f != frames[0] {
			t.Errorf("eBPF frames %s\npreload frames %s", frames[0], f)
		}
	}
	if err := os.Remove(dbg); err != nil {
		t.Fatal(err)
	}
	e := oneEvent(t, traceStacks(t, 32, nil, bin), "malloc", 5151)
	if len(e.frames) != 1 || e.truncated != "no-unwind-info" {
		t.Errorf("without the debug file: frames %v truncated=%q, want leaf alone, no-unwind-info", symbolsOf(e.frames), e.truncated)
	}
}
