//go:build amd64 || arm64

package tracer

import (
	"github.com/cilium/ebpf"
)

// ProgramStats returns the probe programs that ran, by the kernel's
// counters, which count only while kernel.bpf_stats_enabled is 1 (the
// stack benchmark's figures of time per run come from here).
func (t *Tracer) ProgramStats() []ProgramStat {
	var out []ProgramStat
	for _, p := range []struct {
		name string
		prog *ebpf.Program
	}{
		{"mt_session", t.objs.MtSession}, {"mt_enter_multi", t.objs.MtEnterMulti}, {"mt_return_multi", t.objs.MtReturnMulti},
		{"mt_free_multi", t.objs.MtFreeMulti}, {"mt_new_multi", t.objs.MtNewMulti}, {"mt_enter", t.objs.MtEnter},
		{"mt_return", t.objs.MtReturn}, {"mt_free", t.objs.MtFree}, {"mt_new", t.objs.MtNew}, {"mt_dl_state", t.objs.MtDlState}, {"mt_dl_state_multi", t.objs.MtDlStateMulti},
	} {
		if p.prog == nil {
			continue
		}
		st, err := p.prog.Stats()
		if err != nil || st.RunCount == 0 {
			continue
		}
		out = append(out, ProgramStat{Name: p.name, Runs: st.RunCount, Runtime: st.Runtime})
	}
	return out
}

// WalkReuse returns how many steps of the DWARF walks were replayed from
// the previous walk (docs/unwind.md) and how many were walked, summed
// over the CPUs; zeros where no walk ran or the compat build walks.
func (t *Tracer) WalkReuse() (replayed, walked uint64) {
	if t.objs.WalkKeep == nil {
		return 0, 0
	}
	var per []MemtraceMtWkrec
	if err := t.objs.WalkKeep.Lookup(uint32(0), &per); err != nil {
		return 0, 0
	}
	for i := range per {
		replayed += per[i].Replayed
		walked += per[i].Walked
	}
	return replayed, walked
}
