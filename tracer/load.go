//go:build amd64 || arm64

package tracer

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// loadObjects loads spec into objs as spec.LoadAndAssign(objs, nil) does,
// but verifies the programs concurrently, one loader per CPU. With
// --stack-depth the verifier is almost all of memtrace's start-up: each
// allocation program carries the DWARF walk, and one takes it 0.3-1.1 s
// (issue 14: `memtrace --stack-depth 32 -- /bin/true` took 4-8 s, 3.7 s of
// it in BPF_PROG_LOAD, one program after the other). The maps and
// variables are created first, once; every program's loader then uses
// them as replacements, so all programs share the same maps, as they do
// when loaded together.
//
// The programs in skip are not loaded (their fields stay nil); the maps
// and the BTF cache are returned so that ensure can load them later over
// the same maps.
func loadObjects(spec *ebpf.CollectionSpec, objs *MemtraceObjects, skip map[string]bool) (_ map[string]*ebpf.Map, _ *btf.Cache, err error) {
	var mapNames, varNames []string
	for name := range spec.Maps {
		mapNames = append(mapNames, name)
	}
	for name := range spec.Variables {
		varNames = append(varNames, name)
	}
	sort.Strings(mapNames)
	sort.Strings(varNames)
	mapT := reflect.TypeFor[*ebpf.Map]()
	varT := reflect.TypeFor[*ebpf.Variable]()
	// One cache of the kernel's BTF for every loader: decoding it is most
	// of a loader's own cost.
	cache := kernelBTF
	mv := tagged(append(fieldsOf(mapT, mapNames), fieldsOf(varT, varNames)...))
	if err := spec.LoadAndAssign(mv.Interface(), &ebpf.CollectionOptions{Cache: cache}); err != nil {
		return nil, nil, err
	}
	maps := make(map[string]*ebpf.Map, len(mapNames))
	vars := make(map[string]*ebpf.Variable, len(varNames))
	for i, name := range mapNames {
		maps[name] = mv.Elem().Field(i).Interface().(*ebpf.Map)
	}
	for i, name := range varNames {
		vars[name] = mv.Elem().Field(len(mapNames) + i).Interface().(*ebpf.Variable)
	}
	progs := map[string]*ebpf.Program{}
	defer func() {
		if err != nil {
			for _, p := range progs {
				p.Close()
			}
			for _, m := range maps {
				m.Close()
			}
		}
	}()

	// One group of programs per CPU, balanced by instruction count (the
	// verifier's time grows with it), the largest placed first.
	var names []string
	for _, n := range tagsOf(reflect.TypeFor[MemtracePrograms]()) {
		if !skip[n] {
			names = append(names, n)
		}
	}
	sort.SliceStable(names, func(i, j int) bool { return insns(spec, names[i]) > insns(spec, names[j]) })
	groups := make([][]string, max(1, min(runtime.GOMAXPROCS(0), runtime.NumCPU(), len(names))))
	load := make([]int, len(groups))
	for _, n := range names {
		g := 0
		for i := range groups {
			if load[i] < load[g] {
				g = i
			}
		}
		groups[g] = append(groups[g], n)
		load[g] += insns(spec, n) + 1
	}
	errs := make([]error, len(groups))
	loaded := make([]map[string]*ebpf.Program, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loaded[i], errs[i] = loadPrograms(spec, g, maps, cache)
		}()
	}
	wg.Wait()
	for _, l := range loaded {
		for n, p := range l {
			progs[n] = p
		}
	}
	// A refused program is the first error of its group's loader, with
	// the verifier's verdict, as LoadAndAssign returns it.
	for _, e := range errs {
		if e != nil {
			return nil, nil, e
		}
	}
	for n := range skip {
		progs[n] = nil
	}
	return maps, cache, assign(objs, maps, vars, progs)
}

// loadPrograms loads the programs names of spec with one loader, spec's
// maps replaced by maps.
func loadPrograms(spec *ebpf.CollectionSpec, names []string, maps map[string]*ebpf.Map, cache *btf.Cache) (map[string]*ebpf.Program, error) {
	v := tagged(fieldsOf(reflect.TypeFor[*ebpf.Program](), names))
	if err := spec.LoadAndAssign(v.Interface(), &ebpf.CollectionOptions{MapReplacements: maps, Cache: cache}); err != nil {
		return nil, err
	}
	out := make(map[string]*ebpf.Program, len(names))
	for i, n := range names {
		out[n] = v.Elem().Field(i).Interface().(*ebpf.Program)
	}
	return out, nil
}

func insns(spec *ebpf.CollectionSpec, name string) int {
	if p := spec.Programs[name]; p != nil {
		return len(p.Instructions)
	}
	return 0
}

// fieldsOf is one exported struct field of type t per name, tagged
// `ebpf:"name"`, as LoadAndAssign looks objects up.
func fieldsOf(t reflect.Type, names []string) []reflect.StructField {
	fs := make([]reflect.StructField, len(names))
	for i, n := range names {
		fs[i] = reflect.StructField{Name: "F" + strconv.Itoa(i) + "_" + t.Elem().Name(), Type: t,
			Tag: reflect.StructTag(`ebpf:"` + n + `"`)}
	}
	return fs
}

// tagged is a pointer to a new struct of fields fs.
func tagged(fs []reflect.StructField) reflect.Value {
	return reflect.New(reflect.StructOf(fs))
}

// tagsOf lists the ebpf tags of struct type t's fields.
func tagsOf(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("ebpf"); tag != "" {
			out = append(out, tag)
		}
	}
	return out
}

// assign sets every tagged field of objs (through its embedded structs)
// from the loaded objects; one missing is an error, as in LoadAndAssign.
func assign(objs *MemtraceObjects, maps map[string]*ebpf.Map, vars map[string]*ebpf.Variable, progs map[string]*ebpf.Program) error {
	var walk func(v reflect.Value) error
	walk = func(v reflect.Value) error {
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				if err := walk(v.Field(i)); err != nil {
					return err
				}
				continue
			}
			name := f.Tag.Get("ebpf")
			if name == "" {
				continue
			}
			var obj any
			var ok bool
			switch f.Type {
			case reflect.TypeFor[*ebpf.Map]():
				obj, ok = maps[name]
			case reflect.TypeFor[*ebpf.Variable]():
				obj, ok = vars[name]
			case reflect.TypeFor[*ebpf.Program]():
				obj, ok = progs[name]
			}
			if !ok {
				return fmt.Errorf("assign values: %w: %s", errMissingObject, name)
			}
			v.Field(i).Set(reflect.ValueOf(obj))
		}
		return nil
	}
	return walk(reflect.ValueOf(objs).Elem())
}

var errMissingObject = errors.New("no such object in the BPF object file")
