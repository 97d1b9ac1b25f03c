//go:build amd64 || arm64

package tracer

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
)

func requireBPF(t *testing.T) {
	t.Helper()
	bpftest.Require(t)
}

const probeProg = `
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void) {
	char c;
	if (write(1, "ready\n", 6) != 6) return 1;
	if (read(0, &c, 1) != 1) return 1;
	void *volatile p[5];
	for (int i = 0; i < 5; i++) p[i] = malloc(100 + i);
	for (int i = 0; i < 5; i++) free(p[i]);
	char *volatile s = strdup("abcdef");
	void *volatile q = calloc(4, 8);
	q = realloc(q, 4000);
	free(NULL);
	printf("%p %p %p %p %p %p %p\n", p[0], p[1], p[2], p[3], p[4], (void *)s, q);
	return 0;
}
`

// TestAttachCountsExact attaches to a real program and checks every
// recorded call: op, size and pointer, nothing logged twice.
func TestAttachCountsExact(t *testing.T) {
	requireBPF(t)
	bin := probeProgBin(t)
	modes := []string{"session", "multi", "classic"}
	if testing.Short() {
		// The newest kind of link; the others are make test's.
		modes = modes[:1]
	}
	for _, mode := range modes {
		multi := mode != "classic"
		t.Run(mode, func(t *testing.T) {
			tr, err := New(Options{NoMulti: !multi, NoSession: mode != "session"})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			pid, line := runProbeProg(t, tr, bin)
			if multi != tr.Multi() {
				t.Logf("uprobe_multi unavailable; classic links used")
			}
			var evs []event.Event
			for i := 0; i < 20; i++ {
				if err := tr.Read(handlerFunc(func(e *event.Event) {
					if e.TGID == uint32(pid) && e.Kind != event.KindExit {
						evs = append(evs, *e)
					}
				})); err != nil {
					t.Fatal(err)
				}
			}
			var ptrs []uint64
			for _, f := range strings.Fields(line) {
				v, err := strconv.ParseUint(strings.TrimPrefix(f, "0x"), 16, 64)
				if err != nil {
					t.Fatalf("program output %q", line)
				}
				ptrs = append(ptrs, v)
			}
			type want struct {
				kind uint8
				op   logfmt.Op
				size uint64
				ptr  uint64
			}
			var ws []want
			for i := 0; i < 5; i++ {
				ws = append(ws, want{event.KindAlloc, logfmt.OpMalloc, uint64(100 + i), ptrs[i]})
			}
			for i := 0; i < 5; i++ {
				ws = append(ws, want{event.KindFree, logfmt.OpFree, 0, ptrs[i]})
			}
			ws = append(ws, want{event.KindAlloc, logfmt.OpStrdup, 7, ptrs[5]})
			// calloc's pointer is not printed; realloc's is.
			var got []want
			for _, e := range evs {
				got = append(got, want{e.Kind, logfmt.Op(e.Op), e.Size, e.Ptr})
			}
			// The program's stdout buffer (printf) is one malloc at the end.
			if len(got) < len(ws)+2 {
				t.Fatalf("got %d events, want at least %d: %+v", len(got), len(ws)+2, got)
			}
			for i, w := range ws {
				if got[i] != w {
					t.Errorf("event %d: got %+v want %+v", i, got[i], w)
				}
			}
			c := got[len(ws)]
			if c.kind != event.KindAlloc || c.op != logfmt.OpCalloc || c.size != 32 {
				t.Errorf("calloc: got %+v", c)
			}
			// realloc: the old block's free, timed at the call (another
			// thread may be given it before realloc returns), then the
			// new block, timed at the return.
			if len(evs) < len(ws)+3 {
				t.Fatalf("got %d events, want at least %d", len(evs), len(ws)+3)
			}
			rf, r := evs[len(ws)+1], evs[len(ws)+2]
			if rf.Kind != event.KindFree || logfmt.Op(rf.Op) != logfmt.OpFree || rf.Ptr != c.ptr {
				t.Errorf("realloc's free: got %+v (calloc ptr %#x)", rf, c.ptr)
			}
			if r.Kind != event.KindAlloc || logfmt.Op(r.Op) != logfmt.OpRealloc || r.Size != 4000 || r.Ptr != ptrs[6] {
				t.Errorf("realloc: got %+v", r)
			}
			if rf.TS >= r.TS {
				t.Errorf("realloc's free at %d, not before its return at %d", rf.TS, r.TS)
			}
			if tr.Lost() != 0 {
				t.Errorf("lost %d records", tr.Lost())
			}
		})
	}
}

// runProbeProg runs bin (probeProg) traced by tr from its first call into
// the allocation library: it scans the process once the loader has mapped
// libc, lets it run, and returns its pid and the pointers it printed.
func runProbeProg(t *testing.T, tr *Tracer, bin string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Scanned once the program is in main: the loader is done, and its
	// last report of a consistent state (where the hooks ScanProcess
	// adds hold a process for an agent this test does not run) is
	// behind it. Scanning while the loader ran left the program held
	// for good on a loaded machine.
	out := bufio.NewReader(stdout)
	if l, err := out.ReadString('\n'); l != "ready\n" {
		t.Fatalf("the test program said %q (%v)", l, err)
	}
	added, err := tr.ScanProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) == 0 {
		t.Fatal("no allocation library found in the test program")
	}
	if err := tr.AddProcess(pid); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte{1})
	stdin.Close()
	line, _ := out.ReadString('\n')
	cmd.Wait()
	return pid, line
}

// probeProgBin builds probeProg.
func probeProgBin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "p.c")
	bin := filepath.Join(dir, "p")
	if err := os.WriteFile(src, []byte(probeProg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O1", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

type handlerFunc func(*event.Event)

func (f handlerFunc) Event(e *event.Event) { f(e) }
func (handlerFunc) Stack(*event.Stack)     {}
func (handlerFunc) File(*event.File)       {}

// TestNoFreeStacksKernelSide: with NoFreeStacks the kernel side walks no
// free's stack (the events carry none), while allocations keep theirs;
// without it frees carry stacks too.
func TestNoFreeStacksKernelSide(t *testing.T) {
	requireBPF(t)
	bin := probeProgBin(t)
	for _, noFree := range []bool{false, true} {
		tr, err := New(Options{StackDepth: 8, NoFreeStacks: noFree})
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := runProbeProg(t, tr, bin)
		var evs []event.Event
		for i := 0; i < 20; i++ {
			if err := tr.Read(handlerFunc(func(e *event.Event) {
				if e.TGID == uint32(pid) && (e.Kind == event.KindAlloc || e.Kind == event.KindFree) {
					evs = append(evs, *e)
				}
			})); err != nil {
				t.Fatal(err)
			}
		}
		var allocs, frees, allocStacks, freeStacks int
		for i, e := range evs {
			switch {
			case e.Kind == event.KindAlloc:
				allocs++
				if e.Stack != 0 {
					allocStacks++
				}
			case i+1 < len(evs) && logfmt.Op(evs[i+1].Op) == logfmt.OpRealloc:
				// realloc's free shares the call's one walk (the
				// agent leaves its frames out of the log).
			default:
				frees++
				if e.Stack != 0 {
					freeStacks++
				}
			}
		}
		tr.Close()
		if allocs < 5 || frees < 5 || allocStacks != allocs {
			t.Fatalf("NoFreeStacks %v: %d allocs (%d with stacks), %d frees", noFree, allocs, allocStacks, frees)
		}
		if noFree && freeStacks != 0 || !noFree && freeStacks != frees {
			t.Errorf("NoFreeStacks %v: %d of %d frees carry a stack", noFree, freeStacks, frees)
		}
	}
}
