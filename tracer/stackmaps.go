//go:build amd64 || arm64

package tracer

import "github.com/cilium/ebpf"

// StackMaps returns the maps another BPF object needs to walk and send
// stacks as this tracer's programs do (fdtrace's descriptor stacks): the
// unwind tables and mappings, the ring, and the sets of stacks and files
// already sent, by their names in bpf/. The maps stay the tracer's: the
// caller must not close them, and they live until Close.
func (t *Tracer) StackMaps() map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	if t.lazy == nil {
		return out
	}
	for _, name := range []string{"events", "stacks_sent", "files_sent", "unwind_rows", "unwind_pages", "unwind_ext",
		"unwind_procs", "unwind_files", "unwind_stale"} {
		if m := t.lazy.maps[name]; m != nil {
			out[name] = m
		}
	}
	return out
}

// StackDWARF reports whether stacks are walked over the unwind tables
// (--stack-depth with --stack-unwind dwarf) rather than frame pointers.
func (t *Tracer) StackDWARF() bool { return t.unw != nil }
