package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/memtrace/memtrace/config"
	preload "github.com/memtrace/memtrace/fallback-preload"
	"github.com/memtrace/memtrace/internal/cli"
	"github.com/memtrace/memtrace/internal/prof"
	"github.com/memtrace/memtrace/launch"
	"github.com/memtrace/memtrace/live"
	"github.com/memtrace/memtrace/procreport"
	"github.com/memtrace/memtrace/runner"
)

type options struct {
	output       string
	port         int
	listen       string
	minSize      uint64
	sample       uint64
	stackDepth   int
	stackThreads []string
	noFreeStacks bool
	trackThreads []string
	pids         []int
	preload      bool
	follow       bool
	track        config.Track
	mmapFiles    bool
	reportDir    string
	interval     time.Duration
	peakTopN     int
	ringBytes    int
	floor        bool
	noMulti      bool
	stackUnwind  string
	verbose      bool
	http         string
	profileDir   string
	argv         []string
}

// usageError is bad input on the command line: one line, exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// The re-exec entry points must be here, in the executable's own main and
// init: memtrace re-executes itself (os.Executable) as the exec shim and as
// the watchdog, and only main sees os.Args before anything else runs. The
// shim's probes are bound to its thread-group leader task, so PROG must be
// exec'd from the main thread: runtime.LockOSThread in an init function
// keeps main there (a package's init elsewhere would lock it in every
// program that imports the package).
func init() {
	if len(os.Args) > 1 && os.Args[1] == launch.ShimArg {
		runtime.LockOSThread()
	}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == launch.ShimArg {
		launch.RunShim()
		return
	}
	if len(os.Args) > 1 && os.Args[1] == launch.WatchdogArg {
		launch.RunWatchdog()
		return
	}
	os.Exit(prof.Do(func() int { return realMain(os.Args[1:], os.Stderr) }))
}

// run traces o: through the LD_PRELOAD library with --preload, else with
// eBPF, which falls back to the library where eBPF is unavailable.
func run(o *options, stderr io.Writer) (int, error) {
	if o.reportDir != "" {
		if err := procreport.Prepare(o.reportDir); err != nil {
			return 2, err
		}
	}
	if len(o.argv) > 0 {
		argv, status, err := launch.Resolve(o.argv)
		if err != nil {
			return status, err
		}
		o.argv = argv
	}
	ro := runner.Options{Argv: o.argv, PIDs: o.pids, Output: o.output, Listen: o.listen, HTTP: o.http, ProfileDir: o.profileDir,
		MinSize: o.minSize, Sample: o.sample, StackDepth: o.stackDepth, StackThreads: o.stackThreads, TrackThreads: o.trackThreads,
		NoFreeStacks: o.noFreeStacks, Track: o.track, MmapFiles: o.mmapFiles, ReportDir: o.reportDir,
		Interval: o.interval, PeakTopN: o.peakTopN, Verbose: o.verbose,
		Follow: o.follow, StackUnwind: o.stackUnwind, RingBytes: o.ringBytes, Floor: o.floor, NoMulti: o.noMulti}
	// The library forwards the program's own signals itself and finishes
	// the log after it exits; a cancelled context would kill it.
	preloaded := preload.NewSource(context.Background())
	if o.preload {
		return runner.Run(ro, stderr, preloaded, nil)
	}
	return runner.Run(ro, stderr, launch.New(), preloaded)
}

func realMain(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "report" {
		return runReport(args[1:], stderr)
	}
	if len(args) == 1 {
		// memtrace help: help, not a program called help. A program
		// of that name runs with "-- help".
		switch args[0] {
		case "help":
			args = []string{"--help"}
		case "version", "--version", "-version":
			cli.PrintVersion(os.Stdout, "memtrace")
			return 0
		}
	}
	opts, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return 2
	}
	status, err := run(opts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		if status == 0 {
			status = 1
		}
	}
	return status
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseArgs(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("memtrace", flag.ContinueOnError)
	// The flag package's own messages would make a bad flag cost several
	// lines; errors are reported in one, usage only on -h.
	fs.SetOutput(io.Discard)
	stdout := io.Writer(os.Stdout)
	usage := func() {
		fmt.Fprint(stdout, `usage: memtrace [options] -- PROG [ARGS...]    trace PROG from its first allocation
       memtrace [options] -p PID[,PID...]       attach to running processes
       memtrace --preload [options] -- PROG     LD_PRELOAD fallback (no BPF, no root)
       memtrace report [options] LOG...         heaptrack_print-style reports (memtrace report --help)
       memtrace --version
options:
`)
		cli.Usage(stdout, fs)
	}
	fs.Usage = func() {}
	var pids, stackThreads, trackThreads, minSize, bufSize, track, configPath, sample string
	var interval time.Duration
	fs.StringVar(&o.output, "o", "", "write the log to `FILE` (default stderr; none: no log, with --http or --profile-dir)")
	fs.StringVar(&o.http, "http", "", "serve the live heap on `ADDR:PORT` (a port alone: 127.0.0.1): /debug/pprof/heap, /metrics")
	fs.StringVar(&o.profileDir, "profile-dir", "", "write a heap profile (heap-<time>.pb.gz) into `DIR` every --interval (default 1m)")
	fs.IntVar(&o.port, "port", 0, "serve the log over TCP on 127.0.0.1:`PORT`; in -- mode PROG starts once a client connects")
	fs.StringVar(&o.listen, "listen", "", "serve the log over TCP on `ADDR:PORT`")
	fs.StringVar(&minSize, "min-size", "0", "do not log allocations smaller than `N` bytes (K/M suffixes)")
	fs.StringVar(&sample, "sample", "", "sample one allocation per `BYTES` on average (K/M suffixes): a heap profile cheap enough to leave on (-o FILE.pb.gz, --http, --profile-dir)")
	fs.IntVar(&o.stackDepth, "stack-depth", 0, "capture `N` call-stack frames per event (1-127)")
	fs.StringVar(&stackThreads, "stack-threads", "", "capture stacks only in threads whose name contains one of `a,b`")
	fs.BoolVar(&o.noFreeStacks, "no-free-stacks", false, "frees carry no stack: with --stack-depth only allocations walk theirs")
	fs.StringVar(&trackThreads, "track-threads", "", "log only threads whose name contains one of `a,b`")
	fs.StringVar(&pids, "p", "", "attach to `PID[,PID...]`")
	fs.BoolVar(&o.preload, "preload", false, "use the LD_PRELOAD library instead of eBPF")
	fs.BoolVar(&o.follow, "follow", false, "also trace the processes the targets fork, and the programs they exec")
	fs.BoolVar(&o.follow, "f", false, "short for --follow")
	fs.StringVar(&bufSize, "buffer-size", "", "ring buffer `SIZE` (power of two, K/M suffixes; default 32M)")
	fs.BoolVar(&o.floor, "floor", false, "benchmark baseline: attach empty probes on the same points, log nothing")
	fs.BoolVar(&o.noMulti, "no-uprobe-multi", false, "use classic uprobe links even where uprobe_multi exists")
	fs.StringVar(&o.stackUnwind, "stack-unwind", "dwarf", "walk stacks with the files' unwind tables (`dwarf`) or with frame pointers only (fp)")
	fs.BoolVar(&o.verbose, "v", false, "say where each probe went")
	fs.StringVar(&track, "track", "malloc,mmap", "what to trace: `LIST` of malloc, mmap, fd, dmabuf, ion")
	fs.BoolVar(&o.mmapFiles, "mmap-files", false, "log file-backed mmaps too")
	fs.StringVar(&configPath, "config", "", "read settings from `FILE` (mem_monitor's keys; flags over MEMTRACE_* variables over the file)")
	fs.StringVar(&o.reportDir, "report-dir", "", "write <process>_<timestamp>.txt and .html per process into `DIR` as each exits")
	fs.DurationVar(&interval, "interval", 0, "write a snapshot (current, peak, top live stacks, open fds) into the log every `DURATION`")
	fs.IntVar(&o.peakTopN, "peak-top-n", 10, "call stacks in snapshots and per-process reports")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return nil, err
		}
		return nil, usageError{strings.TrimSpace(err.Error()) + " (see memtrace -h)"}
	}
	o.argv = fs.Args()
	var err error
	// An empty value given on purpose is a mistake (an unset shell
	// variable, most often): taken as the default it would put the log
	// on stderr or lose the reports without a word.
	fs.Visit(func(f *flag.Flag) {
		if err != nil || f.Value.String() != "" {
			return
		}
		switch f.Name {
		case "o":
			err = usageError{`-o "": give a file name (the log goes to stderr without -o; -o none writes none)`}
		case "report-dir", "profile-dir":
			err = usageError{fmt.Sprintf(`--%s "": give a directory`, f.Name)}
		case "http", "listen":
			err = usageError{fmt.Sprintf(`--%s "": give ADDR:PORT`, f.Name)}
		}
	})
	if err != nil {
		return nil, err
	}
	if o.minSize, err = config.ParseSize(strings.TrimSpace(minSize)); err != nil {
		return nil, usageError{fmt.Sprintf("bad --min-size %q: %v", minSize, err)}
	}
	if o.sample, err = config.ParseSize(strings.TrimSpace(sample)); sample != "" && (err != nil || o.sample == 0 || o.sample > 1<<30) {
		return nil, usageError{fmt.Sprintf("bad --sample %q: give 1 to 1G bytes (K/M suffixes)", sample)}
	}
	if o.track, err = config.ParseTrack(track); err != nil {
		return nil, usageError{fmt.Sprintf("bad --track: %v", err)}
	}
	if interval < 0 || (interval > 0 && interval < time.Millisecond) {
		return nil, usageError{fmt.Sprintf("bad --interval %v: give 1ms or more", interval)}
	}
	// Flags over MEMTRACE_* variables over the config file.
	loaded, err := config.Load(configPath, os.Environ())
	if err != nil {
		return nil, usageError{err.Error()}
	}
	flagKeys := map[string]string{"track": config.KeyTrack, "stack-depth": config.KeyStackDepth, "report-dir": config.KeyReportDir,
		"interval": config.KeySnapshotIntervalMS, "peak-top-n": config.KeyPeakTopN, "min-size": config.KeyMinAlloc}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		if k, ok := flagKeys[f.Name]; ok {
			set[k] = true
		}
	})
	merged := config.Merge(loaded, config.Settings{Track: o.track, StackDepth: o.stackDepth, ReportDir: o.reportDir,
		SnapshotIntervalMS: int(interval / time.Millisecond), PeakTopN: o.peakTopN, MinAlloc: o.minSize}, set)
	o.track, o.stackDepth, o.reportDir = merged.Track, merged.StackDepth, merged.ReportDir
	o.interval = time.Duration(merged.SnapshotIntervalMS) * time.Millisecond
	o.peakTopN, o.minSize = merged.PeakTopN, merged.MinAlloc
	if o.peakTopN <= 0 {
		return nil, usageError{fmt.Sprintf("bad --peak-top-n %d: give 1 or more", o.peakTopN)}
	}
	if bufSize != "" {
		n, err := config.ParseSize(strings.TrimSpace(bufSize))
		if err != nil || n < 4096 || n&(n-1) != 0 || n > 1<<30 {
			return nil, usageError{fmt.Sprintf("bad --buffer-size %q: give a power of two between 4K and 1G", bufSize)}
		}
		o.ringBytes = int(n)
	}
	for _, p := range strings.Split(pids, ",") {
		if pids == "" {
			break
		}
		p = strings.TrimSpace(p)
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return nil, usageError{fmt.Sprintf("bad PID %q: give positive process IDs separated by commas", p)}
		}
		o.pids = append(o.pids, n)
	}
	o.stackThreads = splitList(stackThreads)
	o.trackThreads = splitList(trackThreads)
	if o.stackDepth < 0 || o.stackDepth > 127 {
		return nil, usageError{fmt.Sprintf("bad --stack-depth %d: give 1 to 127 (0 turns stacks off)", o.stackDepth)}
	}
	if o.stackUnwind != "dwarf" && o.stackUnwind != "fp" {
		return nil, usageError{fmt.Sprintf("bad --stack-unwind %q: give dwarf or fp", o.stackUnwind)}
	}
	if o.port < 0 || o.port > 65535 {
		return nil, usageError{fmt.Sprintf("bad --port %d: give 1 to 65535", o.port)}
	}
	if o.port != 0 && o.listen != "" {
		return nil, usageError{"give --port or --listen, not both"}
	}
	if o.port != 0 {
		o.listen = "127.0.0.1:" + strconv.Itoa(o.port)
	}
	if o.http != "" {
		if _, err := live.ListenAddr(o.http); err != nil {
			return nil, usageError{err.Error()}
		}
	}
	switch {
	case o.output == runner.NoLog && o.http == "" && o.profileDir == "":
		return nil, usageError{"-o none writes no log: give --http ADDR or --profile-dir DIR to see the heap (a file named none: -o ./none)"}
	case len(o.pids) > 0 && len(o.argv) > 0:
		return nil, usageError{"give either -p PID or -- PROG, not both"}
	case len(o.pids) == 0 && len(o.argv) == 0:
		return nil, usageError{"nothing to trace: give -- PROG ARGS or -p PID (see memtrace -h)"}
	case o.preload && len(o.pids) > 0:
		return nil, usageError{"--preload starts a program (-- PROG); it cannot attach to a running process"}
	}
	return o, nil
}
