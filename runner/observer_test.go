package runner

import (
	"bytes"
	"testing"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/live"
	"github.com/memtrace/memtrace/logfmt"
)

// The live model fed through a session, by the agent's Observer, holds
// what the log holds live, and the stack the log named.
func TestObserverFeedsLiveModel(t *testing.T) {
	m := live.NewModel()
	s := agent.New(agent.Config{Out: &bytes.Buffer{}, InProcess: true, Observer: LiveObserver(m)})
	s.AddProcess(1, false)
	s.ResolvedStack(7, []agent.Frame{{Module: "/bin/prog", Symbol: "main", Offset: 4, Addr: 0x1004}})
	for i := range uint64(100) {
		e := &event.Event{TS: 10 + i, TGID: 1, TID: 1, Kind: event.KindAlloc, Op: uint8(logfmt.OpMalloc), Ptr: 0x1000 + i*16, Size: 16, Stack: 7}
		s.Emit(e)
		if i%2 == 0 {
			s.Emit(&event.Event{TS: 10 + i, TGID: 1, TID: 1, Kind: event.KindFree, Op: uint8(logfmt.OpFree), Ptr: e.Ptr})
		}
	}
	s.Drain(true)
	procs, _, stacks := m.Stats()
	if len(procs) != 1 || procs[0].LiveBlocks != 50 || procs[0].LiveBytes != 800 || procs[0].Allocs != 100 || procs[0].Frees != 50 {
		t.Fatalf("model %+v", procs)
	}
	if stacks != 1 {
		t.Fatalf("the model holds %d stacks, want the one the log named", stacks)
	}
}
