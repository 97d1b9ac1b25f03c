package viewer

import (
	"bytes"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/logfmt"
)

var (
	benchOnce  sync.Once
	benchModel *analysis.Model
)

// benchData is $MEMTRACE_BENCH_LOG (the 4M-event log of
// scripts/bench-viewer.sh) or a generated 400k-event log.
func loadBenchModel(b *testing.B) *analysis.Model {
	benchOnce.Do(func() {
		var data []byte
		if p := os.Getenv("MEMTRACE_BENCH_LOG"); p != "" {
			var err error
			if data, err = os.ReadFile(p); err != nil {
				b.Fatal(err)
			}
		} else {
			data = genBenchLog(400_000)
		}
		m := analysis.New()
		if err := m.ReadAll(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		// As memview does once a file is loaded.
		var mu sync.Mutex
		m.PrecomputeOrders(&mu)
		benchModel = m
	})
	return benchModel
}

func genBenchLog(n int) []byte {
	r := rand.New(rand.NewPCG(1, 1))
	var b []byte
	var live []uint64
	next := uint64(0x10000)
	for i := 0; i < n; i++ {
		tid := int64(1 + r.IntN(8))
		name := "worker-" + string(rune('0'+tid))
		if len(live) > 0 && r.IntN(2) == 0 {
			k := r.IntN(len(live))
			b = logfmt.AppendFree(b, tid, name, "free", uint64(i), 0, live[k])
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
			continue
		}
		b = logfmt.AppendAlloc(b, tid, name, "malloc", uint64(i), uint64(16<<r.IntN(10)), 0, next)
		if r.IntN(4) == 0 {
			for f := 0; f < 4; f++ {
				b = logfmt.AppendFrame(b, f, "./app", "_ZN3app4workEv", uint64(r.IntN(8)), 0x400000)
			}
		}
		if r.IntN(100) > 0 {
			live = append(live, next)
		}
		next += 0x20
	}
	return b
}

// BenchmarkKeypress is the time from a key to a finished redraw (model
// query, render into a 200x60 SimulationScreen), per key.
func BenchmarkKeypress(b *testing.B) {
	m := loadBenchModel(b)
	b.Logf("model: %d allocations", m.Len())
	for _, k := range []struct {
		name string
		key  tcell.Key
		r    rune
	}{
		{"down", tcell.KeyRune, 'j'},
		{"pagedown", tcell.KeyPgDn, 0},
		{"end", tcell.KeyRune, 'G'},
		{"filter", tcell.KeyRune, 'f'},
		{"sort", tcell.KeyRune, 's'},
		{"thread", tcell.KeyRune, 't'},
		{"group", tcell.KeyRune, '\\'},
		{"histogram", tcell.KeyRune, 'H'},
		{"charts", tcell.KeyRune, 'A'}, // allocations, temporary, off
		{"timeline", tcell.KeyRune, 'Z'},
		{"delta", tcell.KeyRune, 'm'},
		{"tree", tcell.KeyRune, 'c'},   // on and off: the tree is built once
		{"icicle", tcell.KeyRune, 'i'}, // likewise
	} {
		b.Run(k.name, func(b *testing.B) {
			sim := tcell.NewSimulationScreen("UTF-8")
			if err := sim.Init(); err != nil {
				b.Fatal(err)
			}
			defer sim.Fini()
			sim.SetSize(200, 60)
			a := New(sim, m, Options{Source: "bench"})
			a.Draw()
			ev := tcell.NewEventKey(k.key, k.r, tcell.ModNone)
			b.ResetTimer()
			for range b.N {
				a.HandleEvent(ev)
			}
		})
	}
}

// BenchmarkSearch: a search over frames, thread, op and pointer, redrawn.
func BenchmarkSearch(b *testing.B) {
	m := loadBenchModel(b)
	sim := tcell.NewSimulationScreen("UTF-8")
	if err := sim.Init(); err != nil {
		b.Fatal(err)
	}
	defer sim.Fini()
	sim.SetSize(200, 60)
	a := New(sim, m, Options{Source: "bench"})
	words := []string{"work", "worker-3", "0x1234", "malloc"}
	b.ResetTimer()
	for i := range b.N {
		a.Mu.Lock()
		a.q.Search = words[i%len(words)]
		a.draw()
		a.Mu.Unlock()
	}
}

// BenchmarkCostTree: the tree and icicle views' first draw, the report's
// costs over every event and the tree of one cost (later keys reuse the
// costs; C and u rebuild the tree only).
func BenchmarkCostTree(b *testing.B) {
	m := loadBenchModel(b)
	b.Run("costs", func(b *testing.B) {
		for range b.N {
			m.ReportCosts()
		}
	})
	c := m.ReportCosts()
	b.Run("tree", func(b *testing.B) {
		for range b.N {
			BuildTree(m, c, -1, CostAllocated, false, nil, nil, nil)
		}
	})
}
