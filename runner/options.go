package runner

import (
	"os"
	"syscall"
	"time"

	"github.com/memtrace/memtrace/config"
)

// Selecting says whether --comm, --cgroup or --all chose the processes.
func (o *Options) Selecting() bool { return o.All || len(o.Comms) > 0 || len(o.Cgroups) > 0 }

// DefaultMaxProcs is --max-procs' default (docs/fleet.md, "Bounds").
const DefaultMaxProcs = 256

// Options is what memtrace's command line asks of a run, for either
// source. Fields under "eBPF only" and "LD_PRELOAD only" are read by that
// source alone; the others mean the same on both paths.
type Options struct {
	// Argv is the program to start (-- PROG ARGS); PIDs the processes to
	// attach to (-p, eBPF only). Exactly one of them is set.
	Argv []string
	PIDs []int
	// Output is -o (ParseOutput); Listen, if set (ADDR:PORT), serves
	// the log to one viewer instead, and the program starts once it has
	// connected.
	Output Output
	Listen string
	// DefaultOutput: Output is the name memtrace chose (no -o), which it
	// says once the file is open, as heaptrack does.
	DefaultOutput bool
	// HTTP serves the live heap (/debug/pprof/heap, /metrics) on this
	// address (a port alone: loopback); ProfileDir writes a heap profile
	// there every Interval (a minute without one).
	HTTP       string
	ProfileDir string

	// Sample is --sample: the mean bytes between sampled allocations
	// (0: every one); the outputs are then profiles only (docs/sampling.md).
	Sample       uint64
	MinSize      uint64
	StackDepth   int
	StackThreads []string
	TrackThreads []string
	NoFreeStacks bool // frees carry no stack
	Track        config.Track
	MmapFiles    bool
	// ReportDir gets a report file per process as it exits (procreport);
	// Interval writes a snapshot into the log this often; PeakTopN stacks
	// go into each.
	ReportDir string
	Interval  time.Duration
	PeakTopN  int
	Verbose   bool

	// Stdin, Stdout and Stderr are the program's (nil: memtrace's own).
	Stdin, Stdout, Stderr *os.File
	// Credential runs the program as that user, BaseEnv is the
	// program's environment (nil: memtrace's own), OpenLog creates the
	// -o file. Run fills them where they are nil: under sudo the user
	// behind it, with that user's HOME, USER and LOGNAME, never root;
	// the log created as that user (CreateLog).
	Credential *syscall.Credential
	BaseEnv    []string
	OpenLog    func(path string) (*os.File, error) `json:"-"`

	// Follow traces forked children and what they exec, on both paths
	// (without it the LD_PRELOAD library, inherited, turns itself off in
	// them). eBPF only (launch): StackUnwind is "dwarf" or "fp"; RingBytes
	// the ring buffer's size; Floor attaches empty probes (a benchmark
	// baseline); NoMulti keeps classic uprobe links.
	Follow bool
	// Comms, Cgroups and All select processes instead of PIDs (--comm,
	// --cgroup, --all; docs/fleet.md): each running one that matches is
	// attached to, each that execs into a match is traced from its exec,
	// until Ctrl-C or SIGTERM. MaxProcs bounds the processes traced at
	// once; one more is left alone and counted.
	// MaxSamples bounds the kernel side's live sampled blocks (0: the
	// tracer's default), eBPF only.
	MaxSamples int
	// MaxProcSamples bounds each process's live sampled blocks in the
	// kernel side (0: only MaxSamples does).
	MaxProcSamples int
	Comms          []string
	Cgroups        []string
	All            bool
	MaxProcs       int
	StackUnwind    string
	RingBytes      int
	Floor          bool
	NoMulti        bool

	// LD_PRELOAD only (fallback-preload). BufferSize is the library's
	// per-thread buffer in text mode (0: its default; negative: every
	// event at once under a lock); SharedMemory the region its records go
	// through (0: the default), which bounds how far the program may run
	// ahead of the reader; Unordered leaves a file log that had to take
	// records late in the order they came; Text has the library format and
	// write the log itself (its drop-in mode: no Session, so none of the
	// options above that need one).
	BufferSize   int
	SharedMemory int
	Unordered    bool
	Text         bool
}
