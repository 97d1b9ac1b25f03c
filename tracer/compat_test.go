//go:build amd64 || arm64

package tracer

import (
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/memtrace/memtrace/fdtrace"
)

// TestCompatBuildUsesOnlyOldBPF holds the compat build (bpf/mt_compat.h)
// to what a 5.8-5.16 kernel verifies, on any machine: no helper of
// fullHelpers, no kfunc, no callback, no atomic but a plain add (5.10
// refuses the others as "BPF_STX uses reserved fields"), and no global
// function taking a pointer other than the context (5.12). The matrix's
// 5.10 guest is the real proof; this one fails in make check already.
func TestCompatBuildUsesOnlyOldBPF(t *testing.T) {
	banned := map[asm.BuiltinFunc]string{asm.FnForEachMapElem: "bpf_for_each_map_elem"}
	for _, h := range fullHelpers {
		banned[h.fn] = h.name
	}
	for _, obj := range []struct {
		name string
		load func() (*ebpf.CollectionSpec, error)
	}{{"memtrace", LoadMemtraceCompat}, {"fdtrack", fdtrace.LoadFdtrackCompat}} {
		spec, err := obj.load()
		if err != nil {
			t.Fatal(err)
		}
		for pname, p := range spec.Programs {
			if pname == "mt_session" || pname == "mt_empty_session" || pname == "mt_floor_stack_session" {
				// Never loaded without session uprobes (6.13).
				continue
			}
			for i, ins := range p.Instructions {
				where := func() string { return fmt.Sprintf("%s %s insn %d (%v)", obj.name, pname, i, ins) }
				switch {
				case ins.IsBuiltinCall():
					if name, ok := banned[asm.BuiltinFunc(ins.Constant)]; ok {
						t.Errorf("%s: calls %s", where(), name)
					}
				case ins.IsKfuncCall():
					t.Errorf("%s: calls a kfunc", where())
				case ins.IsLoadOfFunctionPointer():
					t.Errorf("%s: takes a callback's address", where())
				case ins.OpCode.Class() == asm.StXClass && ins.OpCode.Mode() == asm.AtomicMode && ins.Constant != 0:
					t.Errorf("%s: an atomic other than a plain add", where())
				}
				fn := btf.FuncMetadata(&p.Instructions[i])
				if fn == nil || fn.Linkage != btf.GlobalFunc || fn.Name == pname {
					continue
				}
				proto, ok := fn.Type.(*btf.FuncProto)
				if !ok {
					continue
				}
				for _, prm := range proto.Params {
					ptr, ok := btf.UnderlyingType(prm.Type).(*btf.Pointer)
					if !ok {
						continue
					}
					if td, ok := ptr.Target.(*btf.Typedef); ok && td.Name == "bpf_user_pt_regs_t" {
						continue
					}
					t.Errorf("%s %s: global function %s takes the pointer %s", obj.name, pname, fn.Name, prm.Name)
				}
			}
		}
	}
}
