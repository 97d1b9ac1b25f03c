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
		// The programs New deferred, loaded as a fallback would load
		// them: they too must share the maps.
		var all []**ebpf.Program
		for _, f := range programFields(&tr.objs) {
			all = append(all, f)
		}
		if err := tr.ensure(all...); err != nil {
			t.Fatalf("depth %d: loading the deferred programs: %v", depth, err)
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

// New verifies only the allocation programs of the link kind it will use
// (the others carry the stack walk too and cost the verifier up to a
// second each); a fallback to another kind loads its programs then.
func TestNewDefersTheOtherLinkKinds(t *testing.T) {
	requireBPF(t)
	for _, c := range []struct {
		opts   Options
		loaded []string
	}{
		{Options{StackDepth: 8}, nil}, // the session or multi set, by the kernel
		{Options{StackDepth: 8, NoMulti: true}, []string{"mt_enter", "mt_return", "mt_free", "mt_new"}},
		{Options{StackDepth: 8, Floor: true}, []string{}},
	} {
		tr, err := New(c.opts)
		if err != nil {
			t.Fatalf("%+v: New: %v", c.opts, err)
		}
		want := c.loaded
		if want == nil {
			want = []string{"mt_enter_multi", "mt_return_multi", "mt_free_multi", "mt_new_multi", "mt_dl_state_multi"}
			if tr.session {
				want = []string{"mt_session", "mt_free_multi", "mt_new_multi", "mt_dl_state_multi"}
			}
		}
		fields := programFields(&tr.objs)
		isWanted := map[string]bool{}
		for _, n := range want {
			isWanted[n] = true
		}
		for _, n := range allocProgs {
			if got := *fields[n] != nil; got != isWanted[n] {
				t.Errorf("%+v: %s loaded=%v, want %v", c.opts, n, got, isWanted[n])
			}
		}
		if !c.opts.Floor {
			// An attach falling back from session to multi, or from
			// multi to classic links, gets loaded programs.
			tr.session, tr.multi = false, true
			enter, ret, free, nw, err := tr.progs(true)
			if err != nil || enter == nil || ret == nil || free == nil || nw == nil {
				t.Errorf("%+v: multi fallback: %v %v %v %v %v", c.opts, enter, ret, free, nw, err)
			}
			tr.multi = false
			enter, ret, free, nw, err = tr.progs(true)
			if err != nil || enter == nil || ret == nil || free == nil || nw == nil {
				t.Errorf("%+v: classic fallback: %v %v %v %v %v", c.opts, enter, ret, free, nw, err)
			}
		}
		tr.Close()
	}
}
