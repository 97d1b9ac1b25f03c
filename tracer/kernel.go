//go:build amd64 || arm64

package tracer

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
)

type kernelHelper struct {
	fn    asm.BuiltinFunc
	name  string
	since string
}

// fullHelpers are the helpers only the default build calls, oldest first:
// a kernel without one of them gets the compat build.
var fullHelpers = []kernelHelper{
	{asm.FnGetCurrentTaskBtf, "bpf_get_current_task_btf", "5.11"},
	{asm.FnGetAttachCookie, "bpf_get_attach_cookie", "5.15"},
	{asm.FnTaskPtRegs, "bpf_task_pt_regs", "5.15"},
	{asm.FnLoop, "bpf_loop", "5.17"},
	{asm.FnFindVma, "bpf_find_vma", "5.17"},
}

// compatHelpers are those both builds call that came late: a kernel
// without one of them refuses every program.
var compatHelpers = []kernelHelper{
	{asm.FnGetNsCurrentPidTgid, "bpf_get_ns_current_pid_tgid", "5.7"},
	{asm.FnRingbufReserve, "bpf_ringbuf_reserve", "5.8"},
}

// kernelSupport is what the kernel's BPF can run: compat (with the
// helper it lacks, for the notice) or the default build, or an error
// wrapping ErrUnavailable.
type kernelSupport struct {
	compat  bool
	lacking string // why: the first helper of fullHelpers the kernel lacks, or the variable
}

var kernelLimitOnce = sync.OnceValues(probeKernelLimit)

// kernelLimit says which build of the programs this kernel runs, or what
// it lacks that memtrace's eBPF path needs, as an error wrapping
// ErrUnavailable. It asks the kernel (a tiny program per helper, once per
// process) rather than trusting the release number, which backports make
// meaningless. MEMTRACE_BPF_COMPAT=1 takes the compat build on any kernel
// (the tests run it on the newest kernels too).
func kernelLimit() (kernelSupport, error) { return kernelLimitOnce() }

func probeKernelLimit() (kernelSupport, error) {
	if h, ok := firstMissing(compatHelpers); ok {
		return kernelSupport{}, fmt.Errorf("%w: this kernel (%s) lacks the BPF helper %s (Linux %s): memtrace's eBPF path needs Linux %s or later", ErrUnavailable, kernelVersion(), h.name, h.since, MinKernel)
	}
	var ks kernelSupport
	if h, ok := firstMissing(fullHelpers); ok {
		ks = kernelSupport{compat: true, lacking: fmt.Sprintf("this kernel (%s) lacks the BPF helper %s (Linux %s)", kernelVersion(), h.name, h.since)}
	}
	if os.Getenv("MEMTRACE_BPF_COMPAT") == "1" && !ks.compat {
		ks = kernelSupport{compat: true, lacking: "MEMTRACE_BPF_COMPAT=1"}
	}
	return ks, nil
}

// KernelNeedsCompat reports whether this kernel lacks a helper the
// default build of the programs calls, so that memtrace loads the compat
// build (MEMTRACE_BPF_COMPAT aside).
func KernelNeedsCompat() bool {
	_, ok := firstMissing(fullHelpers)
	return ok
}

// firstMissing is the first of hs the kernel lacks. Another error of the
// probe (no permission, a seccomp filter) is the loader's to report, with
// its own words.
func firstMissing(hs []kernelHelper) (kernelHelper, bool) {
	for _, h := range hs {
		if errors.Is(features.HaveProgramHelper(ebpf.Kprobe, h.fn), ebpf.ErrNotSupported) {
			return h, true
		}
	}
	return kernelHelper{}, false
}
