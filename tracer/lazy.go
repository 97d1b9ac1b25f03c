//go:build amd64 || arm64

package tracer

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// allocProgs are the programs that carry the allocation logic and, with
// --stack-depth, the stack walk: each takes the verifier 0.3-1.1 s with
// stacks, and a run uses one set of them (session, multi or classic
// links). New loads the set the kernel's features choose; the others
// are loaded only if an attach falls back to them (issue 14: seven walk
// programs verified at start-up were 3.7 s of `memtrace --stack-depth
// 32 -- /bin/true`).
var allocProgs = []string{
	"mt_session", "mt_enter_multi", "mt_return_multi", "mt_free_multi", "mt_new_multi",
	"mt_enter", "mt_return", "mt_free", "mt_new",
	// Not an allocation program, but one a kernel without uprobe_multi
	// would refuse (its attach type): loaded with the multi set.
	"mt_dl_state_multi",
}

// lazyProgs loads deferred programs over the maps New created, so that a
// program loaded late shares every map with the others.
type lazyProgs struct {
	mu    sync.Mutex
	spec  *ebpf.CollectionSpec
	maps  map[string]*ebpf.Map
	cache *btf.Cache
	field map[string]*(*ebpf.Program) // a deferred program's field in objs
}

// wantedProgs is the set of allocProgs a run starts with: none for the
// floor (its programs are the empty ones), else session (when the kernel
// has session uprobes), multi or classic.
func wantedProgs(opts Options, session bool) map[string]bool {
	w := map[string]bool{}
	switch {
	case opts.Floor:
	case opts.NoMulti:
		for _, n := range []string{"mt_enter", "mt_return", "mt_free", "mt_new"} {
			w[n] = true
		}
	case session:
		for _, n := range []string{"mt_session", "mt_free_multi", "mt_new_multi", "mt_dl_state_multi"} {
			w[n] = true
		}
	default:
		for _, n := range []string{"mt_enter_multi", "mt_return_multi", "mt_free_multi", "mt_new_multi", "mt_dl_state_multi"} {
			w[n] = true
		}
	}
	return w
}

// deferred lists the allocProgs not in want.
func deferred(want map[string]bool) map[string]bool {
	d := map[string]bool{}
	for _, n := range allocProgs {
		if !want[n] {
			d[n] = true
		}
	}
	return d
}

// programFields maps each program name of objs to its field.
func programFields(objs *MemtraceObjects) map[string]*(*ebpf.Program) {
	out := map[string]*(*ebpf.Program){}
	v := reflect.ValueOf(&objs.MemtracePrograms).Elem()
	for i := range v.NumField() {
		if name := v.Type().Field(i).Tag.Get("ebpf"); name != "" {
			out[name] = v.Field(i).Addr().Interface().(**ebpf.Program)
		}
	}
	return out
}

// ensure loads every program of ps still missing (a nil field of objs):
// a fallback's programs, verified when the fallback happens.
func (t *Tracer) ensure(ps ...**ebpf.Program) error {
	l := t.lazy
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for name, f := range l.field {
		for _, p := range ps {
			if f == p && *p == nil {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	t.logf("loading the fallback programs %v", names)
	got, err := loadPrograms(l.spec, names, l.maps, l.cache)
	if err != nil {
		return loadError(fmt.Errorf("load %v: %w", names, err))
	}
	for _, n := range names {
		*l.field[n] = got[n]
	}
	return nil
}

// logf is opts.Logf or nothing.
func (t *Tracer) logf(format string, a ...any) {
	if t.opts.Logf != nil {
		t.opts.Logf(format, a...)
	}
}
