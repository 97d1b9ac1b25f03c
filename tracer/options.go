package tracer

import (
	"errors"
	"time"
)

// Options configure a Tracer.
type Options struct {
	// RingBytes is the ring buffer size (a power of two, at least a page);
	// 0 means DefaultRingBytes.
	RingBytes int
	// WakeupBytes: records are submitted without waking the reader until
	// this much is pending; the reader also polls every PollInterval.
	WakeupBytes int
	// Floor attaches empty programs on the same probe points and reads
	// nothing: the baseline that benchmarks compare against.
	Floor bool
	// NoMulti forces classic uprobe links even where uprobe_multi exists;
	// NoSession uprobe_multi entry and return links even where session
	// links exist.
	NoMulti   bool
	NoSession bool
	// StackDepth is how many user frames each event carries (0: none,
	// at most 127); StackThreads limits stacks to threads whose name
	// contains one of these substrings (at most 8, each under 16 bytes).
	StackDepth   int
	StackThreads []string
	// NoFreeStacks: frees carry no stack (only allocations walk).
	NoFreeStacks bool
	// StackUnwind is how stacks are walked: "dwarf" (the default) with
	// the files' .eh_frame tables, which needs no frame pointers, or
	// "fp", the kernel's frame-pointer walk only.
	StackUnwind string
	// UnwindRows sizes the shared table of unwind rows (8 bytes each,
	// allocated at load); 0 means DefaultUnwindRows.
	UnwindRows int
	// Logf, if set, receives verbose notes (each unwind table's size and
	// build time).
	Logf func(format string, args ...any)
	// Follow traces the processes the targets fork, holding each child
	// (SIGSTOP before its first instruction) until its probes exist.
	Follow bool
	// HoldExec stops a target that execs until the agent has read the
	// new image (SIGCONT); memtrace uses it when it started the program.
	HoldExec bool
	// CheckInternalFrees makes the kernel side recognise libc's direct
	// internal calls to free (the tcache emptied at thread exit) by
	// reading the call site: one user-memory read per free. Attaching needs
	// it, since a free of a block the agent never saw may then be the
	// program's; a launched program's agent knows every block and drops
	// frees of unknown ones itself, which is cheaper.
	CheckInternalFrees bool
	// SampleRate, when not 0, is --sample: the mean bytes between
	// sampled allocations (docs/sampling.md). Only samples are sent,
	// with their stacks, and only their frees; the blocks live in the
	// sampled map, SampleBlocks entries (0: DefaultSampleBlocks).
	SampleRate   uint64
	SampleBlocks int
	// SampleProcBlocks bounds the live samples of each process (0: only
	// SampleBlocks bounds them): one process cannot fill the table that
	// every traced process shares (--max-proc-samples).
	SampleProcBlocks int
	// Select makes a process that execs a target when it matches
	// (--comm, --cgroup, --all): held at its exec until the agent has
	// probed it, as a --follow child is. Filtered in BPF at each exec on
	// the host; nothing else of an unselected process is touched.
	Select Selector
}

// Selector is what processes --comm, --cgroup and --all ask for.
type Selector struct {
	All   bool
	Comms []string // each 1 to 15 bytes, as the kernel keeps a comm
	// Cgroups are cgroup v2 directories: a process in one of them or
	// below matches.
	Cgroups []Cgroup
}

// Cgroup is a cgroup v2 directory by its id (its inode in cgroupfs) and
// its level (0: the root), which bpf_get_current_ancestor_cgroup_id takes.
type Cgroup struct {
	ID    uint64
	Level int
}

// Any says whether the selector selects anything.
func (s Selector) Any() bool { return s.All || len(s.Comms) > 0 || len(s.Cgroups) > 0 }

// MaxSelectComms and MaxSelectCgroups are the kernel side's room
// (select_comms, select_cgroups in bpf/mt_state.h).
const (
	MaxSelectComms   = 64
	MaxSelectCgroups = 8
)

// DefaultSampleBlocks bounds the live sampled blocks the kernel side
// holds (the map is not preallocated: its memory is that of the samples
// live, some 100 bytes each): at a rate of 512K that is 512 GiB of live
// heap, at --sample 1 a million blocks.
const DefaultSampleBlocks = 1 << 20

// MaxSampleRate keeps the fixed-point draw (bpf/mt_sample.h) exact.
const MaxSampleRate = 1 << 30

// DefaultRingBytes holds about 30 ms of events at the fastest rate a single
// thread can produce under uprobes, so a reader that is briefly descheduled
// loses nothing.
const DefaultRingBytes = 32 << 20

// PollInterval bounds how long an event waits in the ring buffer when
// wake-ups are batched.
const PollInterval = 20 * time.Millisecond

// ErrUnavailable wraps every failure that means BPF cannot be used here
// (no permission, no BTF, a kernel without the needed features).
var ErrUnavailable = errors.New("eBPF tracing unavailable")

// ProgramStat is how often one BPF program ran and for how long in all.
type ProgramStat struct {
	Name    string
	Runs    uint64
	Runtime time.Duration
}

// MinKernel is the oldest Linux memtrace's eBPF path loads on: the ring
// buffer came in 5.8. Kernels before FullKernel load the compat build of
// the programs (bpf/mt_compat.h); docs/kernels.md says what it costs and
// which kernels the matrix runs.
const (
	MinKernel  = "5.8"
	FullKernel = "5.17"
)
