package analysis

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"

	"github.com/memtrace/memtrace/logfmt"
)

// manyStacksLog is a memtrace log of n allocations, each with a stack of
// its own made of three of 300 frames (a large program's many call paths
// over far fewer functions), every tenth block leaked.
func manyStacksLog(n int) []byte {
	b := logfmt.AppendHeader(nil, logfmt.Header{Version: "t", PID: 7, Comm: "app", Cmd: "./app", Mode: "bpf"})
	for i := range n {
		ptr := uint64(0x10000 + i*64)
		b = logfmt.AppendAlloc(b, 7, "app", "malloc", uint64(2*i), 64, 0, ptr)
		for k, f := range []int{i % 100, 100 + i/100%100, 200 + i/10000%100} {
			b = logfmt.AppendFrame(b, k, "/usr/lib/libapp.so", "_ZN3app"+strconv.Itoa(len(strconv.Itoa(f))+1)+"f"+strconv.Itoa(f)+"Ev", uint64(f), 0x7f0000000000+uint64(f)*16)
		}
		if i%10 != 0 {
			b = logfmt.AppendFree(b, 7, "app", "free", uint64(2*i+1), 64, ptr)
		}
	}
	b = logfmt.AppendProc(b, logfmt.Proc{Event: logfmt.ProcExit, PID: 7, TS: uint64(2 * n), HasStatus: true})
	return logfmt.AppendSummary(b, logfmt.Summary{Allocs: uint64(n)})
}

// heapInUse is the heap's live bytes after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// The finished model's heap beyond its per-allocation columns and its
// frames stays within a few words per distinct stack: its frame ids once
// and its start (the table that finds a stack again is dropped at the end
// of the log). Keyed by a string of its frame ids in a map, each stack
// cost about twice the bound (issue 31). A stack interned after the end is
// found again all the same.
func TestHeapPerDistinctStack(t *testing.T) {
	const n, maxPerStack = 200_000, 32
	data := manyStacksLog(n)
	before := heapInUse()
	m := New()
	if err := m.ReadAll(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	after := heapInUse()
	if got := m.NumStacks() - 1; got != n {
		t.Fatalf("%d distinct stacks read, want %d", got, n)
	}
	if m.NumFrames() > 300 {
		t.Fatalf("%d distinct frames read, want at most 300", m.NumFrames())
	}
	rest := int64(after) - int64(before) - int64(m.columnBytes()) - int64(m.frames.size())
	per := float64(rest) / n
	t.Logf("%d stacks: heap %d MB, of it %d MB columns, %d KB frames, %.1f bytes per stack beside", n,
		(after-before)>>20, m.columnBytes()>>20, m.frames.size()>>10, per)
	if per > maxPerStack {
		t.Errorf("the model holds %.1f bytes per distinct stack beside its columns and frames, want at most %d", per, maxPerStack)
	}
	for _, s := range []uint32{1, n / 2, n} {
		frames := m.Frames(s)
		if got := m.internStack(append([]uint32(nil), frames...)); got != s {
			t.Errorf("stack %d interned again after the end: id %d", s, got)
		}
		for _, f := range frames {
			mod, rest := m.frames.keyOf(f)
			if got, ok := m.frames.find(append([]byte(mod), rest...)); !ok || got != f {
				t.Errorf("frame %d not found again after the end: %d %v", f, got, ok)
			}
		}
	}
	if m.NumStacks() != n+1 {
		t.Errorf("interning known stacks again made new ones: %d stacks", m.NumStacks())
	}
	runtime.KeepAlive(data)
	runtime.KeepAlive(m)
}
