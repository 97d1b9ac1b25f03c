//go:build amd64 || arm64

package tracer

import (
	"testing"

	"github.com/cilium/ebpf"
)

// TestSetUpMapsSpec: the maps a start-up need not fill are not filled,
// and those the programs add to on every new thread or stack stay
// preallocated, in both builds.
func TestSetUpMapsSpec(t *testing.T) {
	for _, c := range []struct {
		name   string
		load   func() (*ebpf.CollectionSpec, error)
		compat bool
	}{{"default", LoadMemtrace, false}, {"compat", LoadMemtraceCompat, true}} {
		t.Run(c.name, func(t *testing.T) {
			for _, o := range []struct {
				name                     string
				opts                     Options
				stacksSent, sampleCounts bool // full size
			}{
				{"plain", Options{}, false, false},
				{"stacks", Options{StackDepth: 16}, true, false},
				{"sample", Options{SampleRate: 4096}, false, false},
				{"sample per process", Options{SampleRate: 4096, SampleProcBlocks: 10, StackDepth: 8}, true, true},
			} {
				spec, err := c.load()
				if err != nil {
					t.Fatal(err)
				}
				full := map[string]uint32{}
				for n, m := range spec.Maps {
					full[n] = m.MaxEntries
				}
				if err := setUpMaps(spec, o.opts, c.compat); err != nil {
					t.Fatal(err)
				}
				prealloc := func(name string) bool { return spec.Maps[name].Flags&bpfNoPrealloc == 0 }
				if prealloc("unwind_files") {
					t.Errorf("%s: unwind_files preallocated: only memtrace writes it", o.name)
				}
				if got := prealloc("tstates"); got != c.compat {
					t.Errorf("%s: tstates preallocated = %v, want %v (the compat build keeps every thread there)", o.name, got, c.compat)
				}
				for _, n := range []string{"targets", "hold", "stacks_sent", "files_sent", "alloc_texts"} {
					if !prealloc(n) {
						t.Errorf("%s: %s not preallocated: the programs add to it", o.name, n)
					}
				}
				for n, want := range map[string]bool{"stacks_sent": o.stacksSent, "sample_counts": o.sampleCounts, "tslots": !c.compat} {
					size := spec.Maps[n].MaxEntries
					if want && size != full[n] || !want && size != 1 {
						t.Errorf("%s: %s has %d entries, want %d (full size: %v)", o.name, n, size, map[bool]uint32{true: full[n], false: 1}[want], want)
					}
				}
				for n, m := range spec.Maps {
					if n != "stacks_sent" && n != "sample_counts" && n != "tslots" && m.MaxEntries != full[n] {
						t.Errorf("%s: %s resized to %d", o.name, n, m.MaxEntries)
					}
				}
			}
		})
	}
}

// TestSetUpMapsLoaded: the kernel takes the maps as set up, and the
// loaded tracer's tstates and unwind_files are not preallocated.
func TestSetUpMapsLoaded(t *testing.T) {
	requireBPF(t)
	tr, err := New(Options{StackDepth: 8})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer tr.Close()
	if tr.objs.UnwindFiles.Flags()&bpfNoPrealloc == 0 {
		t.Error("unwind_files is preallocated")
	}
	if got := tr.objs.Tstates.Flags()&bpfNoPrealloc == 0; got != (tr.compat != nil) {
		t.Errorf("tstates preallocated = %v with the compat build %v", got, tr.compat != nil)
	}
	if tr.objs.StacksSent.MaxEntries() <= 1 {
		t.Errorf("stacks_sent has %d entries with --stack-depth", tr.objs.StacksSent.MaxEntries())
	}
}
