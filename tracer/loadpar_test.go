//go:build amd64 || arm64

package tracer

import (
	"reflect"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// loadObjects verifies the programs on several loaders at once; what it
// loads must be what one LoadAndAssign loads: every program, all of them
// bound to one set of maps (a program bound to a copy of a map would write
// events or counters nobody reads), and those the tracer holds.
func TestLoadObjectsSharesOneSetOfMaps(t *testing.T) {
	requireBPF(t)
	for _, depth := range []int{0, 8} {
		tr, err := New(Options{StackDepth: depth})
		if err != nil {
			t.Fatalf("depth %d: New: %v", depth, err)
		}
		held := map[ebpf.MapID]bool{}
		mv := reflect.ValueOf(tr.objs.MemtraceMaps)
		for i := range mv.NumField() {
			m := mv.Field(i).Interface().(*ebpf.Map)
			if m == nil {
				t.Fatalf("depth %d: map %s not loaded", depth, mv.Type().Field(i).Name)
			}
			info, err := m.Info()
			if err != nil {
				t.Fatal(err)
			}
			id, _ := info.ID()
			held[id] = true
		}
		byName := map[string]map[ebpf.MapID]bool{}
		pv := reflect.ValueOf(tr.objs.MemtracePrograms)
		for i := range pv.NumField() {
			name := pv.Type().Field(i).Name
			p := pv.Field(i).Interface().(*ebpf.Program)
			if p == nil {
				t.Fatalf("depth %d: program %s not loaded", depth, name)
			}
			info, err := p.Info()
			if err != nil {
				t.Fatal(err)
			}
			ids, ok := info.MapIDs()
			if !ok {
				bpftest.Unavailable(t, "the kernel does not list a program's maps")
			}
			for _, id := range ids {
				m, err := ebpf.NewMapFromID(id)
				if err != nil {
					t.Fatal(err)
				}
				mi, err := m.Info()
				m.Close()
				if err != nil {
					t.Fatal(err)
				}
				if byName[mi.Name] == nil {
					byName[mi.Name] = map[ebpf.MapID]bool{}
				}
				byName[mi.Name][id] = true
			}
		}
		for name, ids := range byName {
			if len(ids) != 1 {
				t.Errorf("depth %d: the programs use %d maps named %q, want one", depth, len(ids), name)
			}
		}
		// The ring buffer every logging program writes to is the one the
		// tracer reads.
		ev, _ := tr.objs.Events.Info()
		evID, _ := ev.ID()
		if !byName[ev.Name][evID] || !held[evID] {
			t.Errorf("depth %d: the programs' ring buffer %v is not the tracer's (%d)", depth, byName[ev.Name], evID)
		}
		if tr.objs.LostRecords == nil || tr.objs.MtSession == nil {
			t.Errorf("depth %d: objects not assigned", depth)
		}
		tr.Close()
	}
}
