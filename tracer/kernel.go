//go:build amd64 || arm64

package tracer

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
)

// MinKernel is the oldest Linux whose BPF has every helper memtrace's
// programs call; docs/kernels.md says which kernels the matrix runs.
const MinKernel = "5.17"

// kernelHelpers are the helpers memtrace's programs call that came late,
// oldest first, with the release that brought each: a kernel without one
// refuses every program, and the first it lacks is the one to name.
var kernelHelpers = []struct {
	fn    asm.BuiltinFunc
	name  string
	since string
}{
	{asm.FnGetCurrentTaskBtf, "bpf_get_current_task_btf", "5.11"},
	{asm.FnGetAttachCookie, "bpf_get_attach_cookie", "5.15"},
	{asm.FnTaskPtRegs, "bpf_task_pt_regs", "5.15"},
	{asm.FnLoop, "bpf_loop", "5.17"},
	{asm.FnFindVma, "bpf_find_vma", "5.17"},
}

var kernelLimitOnce = sync.OnceValue(probeKernelLimit)

// kernelLimit says what this kernel lacks that memtrace's eBPF path
// needs, as an error wrapping ErrUnavailable, or nil. It asks the kernel
// (a tiny program per helper, once per process) rather than trusting the
// release number, which backports make meaningless.
func kernelLimit() error { return kernelLimitOnce() }

func probeKernelLimit() error {
	for _, h := range kernelHelpers {
		err := features.HaveProgramHelper(ebpf.Kprobe, h.fn)
		if errors.Is(err, ebpf.ErrNotSupported) {
			return fmt.Errorf("%w: this kernel (%s) lacks the BPF helper %s (Linux %s): memtrace's eBPF path needs Linux %s or later", ErrUnavailable, kernelVersion(), h.name, h.since, MinKernel)
		}
		// Another error (no permission, a seccomp filter) is the loader's
		// to report, with its own words.
	}
	return nil
}
