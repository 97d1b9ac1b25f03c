//go:build amd64 || arm64

package tracer

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// bpfNoPrealloc is BPF_F_NO_PREALLOC: a hash map whose elements are
// allocated as they are added rather than all at creation.
const bpfNoPrealloc = 1

// setUpMaps decides, before load, which of the object's hash maps are
// preallocated and how large the maps a run does not use are. Creating
// a preallocated hash map fills its free list with every element it can
// hold, in the creating thread: for tstates alone that was the largest
// part of a start-up's map creation, paid by every run for threads that
// almost never need it. A map left preallocated is one the programs add
// to on every new thread or stack in the default build, or an LRU hash
// (which the kernel only builds preallocated).
//
//   - unwind_files is only written by memtrace (the unwinder), never by
//     the programs, so its elements may come from the kernel's
//     allocator: lookups are the same.
//   - tstates holds, in the default build, only the threads whose slot
//     in tslots another live thread holds: rare, so allocated as needed
//     (a failed allocation there is what a full map was before). The
//     compat build keeps every thread there and runs on kernels older
//     than the BPF memory allocator (6.1), whose allocation from a
//     program is an atomic kmalloc: it stays preallocated, and its
//     unused tslots array shrinks to one element.
//   - stacks_sent is only read with --stack-depth, sample_counts only
//     with --sample and --max-proc-samples: one element otherwise.
//
// fdtrace takes the same maps' sizes and flags from the loaded maps
// (StackMaps).
func setUpMaps(spec *ebpf.CollectionSpec, opts Options, compat bool) error {
	get := func(name string) (*ebpf.MapSpec, error) {
		m, ok := spec.Maps[name]
		if !ok {
			return nil, fmt.Errorf("BPF object has no %s map: rebuild it (make generate)", name)
		}
		return m, nil
	}
	noPrealloc := []string{"unwind_files"}
	if !compat {
		noPrealloc = append(noPrealloc, "tstates")
	}
	for _, name := range noPrealloc {
		m, err := get(name)
		if err != nil {
			return err
		}
		if m.Type != ebpf.Hash {
			return fmt.Errorf("BPF map %s is a %s, not a hash: rebuild memtrace (make generate)", name, m.Type)
		}
		m.Flags |= bpfNoPrealloc
	}
	unused := map[string]bool{
		"stacks_sent":   opts.StackDepth == 0,
		"sample_counts": opts.SampleRate == 0 || opts.SampleProcBlocks <= 0 || opts.Floor,
		"tslots":        compat,
	}
	for name, off := range unused {
		m, err := get(name)
		if err != nil {
			return err
		}
		if off {
			m.MaxEntries = 1
		}
	}
	return nil
}
