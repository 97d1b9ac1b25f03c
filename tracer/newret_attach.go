//go:build amd64 || arm64

package tracer

import (
	"fmt"
	"syscall"

	"github.com/cilium/ebpf"
)

// newRetProg serves the ret sites of the link kind in use; the floor
// measures them with an empty program, as every other probe.
func (t *Tracer) newRetProg() *ebpf.Program {
	switch {
	case t.opts.Floor && t.multi:
		return t.objs.MtEmptyMulti
	case t.opts.Floor:
		return t.objs.MtEmpty
	case t.multi:
		return t.objs.MtNewRetMulti
	}
	return t.objs.MtNewRet
}

// markAllocLib tells the BPF side that the library whose probe points
// these are has its own allocator (from_allocator): its inode, so that
// its mmaps, munmaps and mremaps are taken as the allocator's own.
func (t *Tracer) markAllocLib(pps []probePoint, st *syscall.Stat_t) error {
	if len(pps) == 0 || !pps[0].allocLib || t.objs.AllocInos == nil {
		return nil
	}
	one := uint8(1)
	if err := t.objs.AllocInos.Update(st.Ino, one, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("record the allocator library's inode: %w", err)
	}
	if v := t.objs.AllocLibs; v != nil {
		if err := v.Set(uint32(1)); err != nil {
			return fmt.Errorf("turn on the allocator mmap test: %w", err)
		}
	}
	return nil
}
