package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/memtrace/memtrace/config"
	preload "github.com/memtrace/memtrace/fallback-preload"
	"github.com/memtrace/memtrace/internal/cli"
	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/internal/prof"
	"github.com/memtrace/memtrace/launch"
	"github.com/memtrace/memtrace/live"
	"github.com/memtrace/memtrace/procreport"
	"github.com/memtrace/memtrace/runner"
)

type options struct {
	output         string        // -o as given
	out            runner.Output // -o parsed, once, by parseArgs
	port           int
	listen         string
	minSize        uint64
	sample         uint64
	stackDepth     int
	stackThreads   []string
	noFreeStacks   bool
	trackThreads   []string
	pids           []int
	preload        bool
	follow         bool
	track          config.Track
	mmapFiles      bool
	reportDir      string
	interval       time.Duration
	peakTopN       int
	ringBytes      int
	floor          bool
	noMulti        bool
	stackUnwind    string
	comms          []string
	cgroups        []string
	all            bool
	maxProcs       int
	maxSamples     int
	maxProcSamples int
	verbose        bool
	http           string
	profileDir     string
	argv           []string
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
	defaultOut := o.output == "" && o.listen == "" && !o.floor
	switch {
	case defaultOut:
		o.out = runner.FileOutput(defaultOutput(o))
	case o.output == "" && o.floor:
		// The floor writes nothing: no file to leave behind.
		o.out = runner.Output{Kind: runner.OutNone}
	}
	ro := o.runnerOptions(defaultOut)
	// The library forwards the program's own signals itself and finishes
	// the log after it exits; a cancelled context would kill it.
	preloaded := preload.NewSource(context.Background())
	if o.preload {
		return runner.Run(ro, stderr, preloaded, nil)
	}
	return runner.Run(ro, stderr, launch.New(), preloaded)
}

// runnerOptions are the runner's options for o. --buffer-size is the one
// buffer between the program and memtrace on either path: the eBPF ring,
// or the LD_PRELOAD library's shared region (the fallback's too).
func (o *options) runnerOptions(defaultOut bool) runner.Options {
	return runner.Options{Argv: o.argv, PIDs: o.pids, Output: o.out, DefaultOutput: defaultOut, Listen: o.listen, HTTP: o.http, ProfileDir: o.profileDir,
		MinSize: o.minSize, Sample: o.sample, StackDepth: o.stackDepth, StackThreads: o.stackThreads, TrackThreads: o.trackThreads,
		NoFreeStacks: o.noFreeStacks, Track: o.track, MmapFiles: o.mmapFiles, ReportDir: o.reportDir,
		Interval: o.interval, PeakTopN: o.peakTopN, Verbose: o.verbose,
		Follow: o.follow, StackUnwind: o.stackUnwind, RingBytes: o.ringBytes, Floor: o.floor, NoMulti: o.noMulti, SharedMemory: o.ringBytes,
		Comms: o.comms, Cgroups: o.cgroups, All: o.all, MaxProcs: o.maxProcs, MaxSamples: o.maxSamples, MaxProcSamples: o.maxProcSamples}
}

// defaultOutput is the log's name when -o gives none, heaptrack's
// heaptrack.PROG.PID in the current directory: memtrace.PROG.PID.log.zst,
// PID being memtrace's own (as heaptrack's) when it starts PROG, the
// first target's with -p. A sampled run's is its profile,
// memtrace.PROG.PID.pb.gz.
func defaultOutput(o *options) string {
	prog, pid := "", os.Getpid()
	if len(o.argv) > 0 {
		prog = filepath.Base(o.argv[0])
	} else if len(o.pids) > 0 {
		pid = o.pids[0]
		prog, _ = procfs.ReadComm(pid)
	}
	prog = strings.Map(func(r rune) rune {
		if r == '/' || r < ' ' || r == 0x7f || r == ' ' {
			return '_'
		}
		return r
	}, prog)
	if prog == "" || prog == "." || prog == ".." {
		prog = "prog"
	}
	ext := ".log.zst"
	if o.sample > 0 {
		ext = runner.ProfileSuffix
	}
	return fmt.Sprintf("memtrace.%s.%d%s", prog, pid, ext)
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
	if errors.Is(err, cli.ErrHelp) {
		return 0
	}
	if errors.Is(err, cli.ErrVersion) {
		cli.PrintVersion(os.Stdout, "memtrace")
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return 2
	}
	if word := mistypedWord(args, opts.argv, exec.LookPath); word != "" {
		fmt.Fprintf(stderr, "memtrace: %s: no such program or subcommand; did you mean '%s'?\n", opts.argv[0], word)
		return exitNotFound
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

// exitNotFound is a shell's "command not found", as for any PROG that is
// not found: a script that checks for 127 still sees it.
const exitNotFound = 127

// mistypedWord is the word of memtrace's own (report, help, version) that
// the first argument was likely meant to be, when that argument is PROG
// (no option before it, no "--"), names no file (no slash) and no program
// of that name is found in PATH: memtrace reprot x.log. A program that is
// found runs, whatever its name.
func mistypedWord(args, argv []string, lookPath func(string) (string, error)) string {
	if len(args) == 0 || len(argv) == 0 || args[0] != argv[0] || strings.ContainsRune(argv[0], '/') {
		return ""
	}
	if _, err := lookPath(argv[0]); !errors.Is(err, exec.ErrNotFound) {
		return ""
	}
	return cli.SuggestWord(argv[0], cli.MemtraceWords)
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
	o := &options{peakTopN: 10, stackUnwind: "dwarf", stackDepth: config.DefaultStackDepth, maxProcs: runner.DefaultMaxProcs}
	fs := cli.NewParser(cli.Memtrace)
	r := rawFlags{track: "malloc,mmap", minSize: "0"}
	defineFlags(fs, o, &r)
	argv, err := fs.Parse(args)
	if err != nil {
		if errors.Is(err, cli.ErrHelp) {
			cli.Help(os.Stdout, cli.Memtrace)
		}
		return nil, err
	}
	o.argv = argv
	if err := checkEmptyValues(fs); err != nil {
		return nil, err
	}
	if err := o.applySettings(fs, &r); err != nil {
		return nil, err
	}
	if err := o.applyLimits(fs, &r); err != nil {
		return nil, err
	}
	o.out = runner.ParseOutput(o.output)
	if err := checkSelectors(o); err != nil {
		return nil, err
	}
	selecting := o.all || len(o.comms) > 0 || len(o.cgroups) > 0
	switch {
	case o.out.Kind == runner.OutNone && o.http == "" && o.profileDir == "":
		return nil, usageError{"-o none writes no log: give --http ADDR or --profile-dir DIR to see the heap (a file named none: -o ./none)"}
	case len(o.pids) > 0 && len(o.argv) > 0:
		return nil, usageError{"give either -p PID or -- PROG, not both"}
	case len(o.pids) == 0 && len(o.argv) == 0 && !selecting:
		return nil, usageError{"nothing to trace: give -- PROG ARGS or -p PID (see memtrace -h)"}
	case o.preload && len(o.pids) > 0:
		return nil, usageError{"--preload starts a program (-- PROG); it cannot attach to a running process"}
	// How the eBPF tracer works: with --preload they would be ignored. The
	// automatic fallback takes them (its notice says the library runs);
	// --floor, which no library run can stand for, the library itself
	// refuses (fallback-preload, Source.Start), for both.
	case o.preload && o.noMulti:
		return nil, usageError{"--no-uprobe-multi picks the eBPF probes' links, and --preload has none: leave it out"}
	case o.preload && o.stackUnwind == "fp":
		return nil, usageError{"--stack-unwind fp is the eBPF walk's: --preload walks stacks with the files' unwind tables (docs/preload.md, \"Stacks\"); leave it out"}
	}
	return o, nil
}

// rawFlags are the flags whose text is parsed after the command line, once
// the config file and the environment are known.
type rawFlags struct {
	pids, stackThreads, trackThreads, minSize, bufSize, configPath, sample, track string
	interval                                                                      time.Duration
}

func defineFlags(fs *cli.Parser, o *options, r *rawFlags) {
	fs.String(&o.output, "o")
	fs.String(&o.http, "http")
	fs.String(&o.profileDir, "profile-dir")
	fs.Int(&o.port, "port")
	fs.String(&o.listen, "listen")
	fs.String(&r.minSize, "min-size")
	fs.String(&r.sample, "sample")
	fs.Int(&o.stackDepth, "stack-depth")
	fs.String(&r.stackThreads, "stack-threads")
	fs.Bool(&o.noFreeStacks, "no-free-stacks")
	fs.String(&r.trackThreads, "track-threads")
	fs.String(&r.pids, "p")
	fs.Var((*listFlag)(&o.comms), "comm")
	fs.Var((*listFlag)(&o.cgroups), "cgroup")
	fs.Bool(&o.all, "all")
	fs.Int(&o.maxProcs, "max-procs")
	fs.Int(&o.maxSamples, "max-samples")
	fs.Int(&o.maxProcSamples, "max-proc-samples")
	fs.Bool(&o.preload, "preload")
	fs.Bool(&o.follow, "follow")
	fs.String(&r.bufSize, "buffer-size")
	fs.Bool(&o.floor, "floor")
	fs.Bool(&o.noMulti, "no-uprobe-multi")
	fs.String(&o.stackUnwind, "stack-unwind")
	fs.Bool(&o.verbose, "v")
	fs.String(&r.track, "track")
	fs.Bool(&o.mmapFiles, "mmap-files")
	fs.String(&r.configPath, "config")
	fs.String(&o.reportDir, "report-dir")
	fs.Duration(&r.interval, "interval")
	fs.Int(&o.peakTopN, "peak-top-n")
}

func checkEmptyValues(fs *cli.Parser) error {
	var err error
	// An empty value given on purpose is a mistake (an unset shell
	// variable, most often): taken as the default it would put the log
	// on stderr or lose the reports without a word.
	fs.Visit(func(name, value string) {
		if err != nil || value != "" {
			return
		}
		switch name {
		case "o":
			err = usageError{`-o "": give a file name (the log goes to stderr without -o; -o none writes none)`}
		case "report-dir", "profile-dir":
			err = usageError{fmt.Sprintf(`--%s "": give a directory`, name)}
		case "http", "listen":
			err = usageError{fmt.Sprintf(`--%s "": give ADDR:PORT`, name)}
		}
	})
	return err
}

// applySettings parses the sizes and durations and layers flags over
// MEMTRACE_* variables over the config file.
func (o *options) applySettings(fs *cli.Parser, r *rawFlags) error {
	var err error
	minSize, sample, track, interval, configPath := r.minSize, r.sample, r.track, r.interval, r.configPath
	if o.minSize, err = config.ParseSize(strings.TrimSpace(minSize)); err != nil {
		return usageError{fmt.Sprintf("bad --min-size %q: %v", minSize, err)}
	}
	if o.sample, err = config.ParseSize(strings.TrimSpace(sample)); sample != "" && (err != nil || o.sample == 0 || o.sample > 1<<30) {
		return usageError{fmt.Sprintf("bad --sample %q: give 1 to 1G bytes (K/M suffixes)", sample)}
	}
	if o.track, err = config.ParseTrack(track); err != nil {
		return usageError{fmt.Sprintf("bad --track: %v", err)}
	}
	if interval < 0 || (interval > 0 && interval < time.Millisecond) {
		return usageError{fmt.Sprintf("bad --interval %v: give 1ms or more", interval)}
	}
	// Flags over MEMTRACE_* variables over the config file.
	loaded, err := config.Load(configPath, os.Environ())
	if err != nil {
		return usageError{err.Error()}
	}
	flagKeys := map[string]string{"track": config.KeyTrack, "stack-depth": config.KeyStackDepth, "report-dir": config.KeyReportDir,
		"interval": config.KeySnapshotIntervalMS, "peak-top-n": config.KeyPeakTopN, "min-size": config.KeyMinAlloc}
	set := map[string]bool{}
	fs.Visit(func(name, _ string) {
		if k, ok := flagKeys[name]; ok {
			set[k] = true
		}
	})
	merged := config.Merge(loaded, config.Settings{Track: o.track, StackDepth: o.stackDepth, ReportDir: o.reportDir,
		SnapshotIntervalMS: int(interval / time.Millisecond), PeakTopN: o.peakTopN, MinAlloc: o.minSize}, set)
	o.track, o.stackDepth, o.reportDir = merged.Track, merged.StackDepth, merged.ReportDir
	// --floor measures the traps alone: stacks only when asked for.
	if _, given := merged.Origin[config.KeyStackDepth]; o.floor && !given {
		o.stackDepth = 0
	}
	o.interval = time.Duration(merged.SnapshotIntervalMS) * time.Millisecond
	o.peakTopN, o.minSize = merged.PeakTopN, merged.MinAlloc
	if o.peakTopN <= 0 {
		return usageError{fmt.Sprintf("bad --peak-top-n %d: give 1 or more", o.peakTopN)}
	}
	return nil
}

// applyLimits checks the numbers and lists against what memtrace can take.
func (o *options) applyLimits(fs *cli.Parser, r *rawFlags) error {
	bufSize, pids, stackThreads, trackThreads := r.bufSize, r.pids, r.stackThreads, r.trackThreads
	if bufSize != "" {
		n, err := config.ParseSize(strings.TrimSpace(bufSize))
		if err != nil || n < 4096 || n&(n-1) != 0 || n > 1<<30 {
			return usageError{fmt.Sprintf("bad --buffer-size %q: give a power of two between 4K and 1G", bufSize)}
		}
		o.ringBytes = int(n)
	}
	if bufSize == "" && o.sample > 0 && (o.all || len(o.comms) > 0 || len(o.cgroups) > 0) {
		// A sampled fleet sends few records: the 32 MiB ring of a full
		// trace would be most of memtrace's resident memory (its pages
		// are mapped into memtrace), for nothing (docs/fleet.md, "Cost").
		o.ringBytes = fleetSampleRing
	}
	for _, p := range strings.Split(pids, ",") {
		if pids == "" {
			break
		}
		p = strings.TrimSpace(p)
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return usageError{fmt.Sprintf("bad PID %q: give positive process IDs separated by commas", p)}
		}
		o.pids = append(o.pids, n)
	}
	o.stackThreads = splitList(stackThreads)
	o.trackThreads = splitList(trackThreads)
	if o.stackDepth < 0 || o.stackDepth > 127 {
		return usageError{fmt.Sprintf("bad --stack-depth %d: give 1 to 127 (0 turns stacks off)", o.stackDepth)}
	}
	if o.stackUnwind != "dwarf" && o.stackUnwind != "fp" {
		return usageError{fmt.Sprintf("bad --stack-unwind %q: give dwarf or fp", o.stackUnwind)}
	}
	if o.port < 0 || o.port > 65535 {
		return usageError{fmt.Sprintf("bad --port %d: give 1 to 65535", o.port)}
	}
	if o.port != 0 && o.listen != "" {
		return usageError{"give --port or --listen, not both"}
	}
	if o.port != 0 {
		o.listen = "127.0.0.1:" + strconv.Itoa(o.port)
	}
	if o.http != "" {
		if _, err := live.ListenAddr(o.http); err != nil {
			return usageError{err.Error()}
		}
	}
	switch {
	case fs.IsSet("max-samples") && o.sample == 0:
		return usageError{"--max-samples bounds --sample's table: give it with --sample BYTES"}
	case fs.IsSet("max-samples") && (o.maxSamples < 1 || o.maxSamples > 1<<26):
		return usageError{fmt.Sprintf("bad --max-samples %d: give 1 to %d", o.maxSamples, 1<<26)}
	case fs.IsSet("max-proc-samples") && o.sample == 0:
		return usageError{"--max-proc-samples bounds each process's share of --sample's table: give it with --sample BYTES"}
	case fs.IsSet("max-proc-samples") && (o.maxProcSamples < 1 || o.maxProcSamples > 1<<26):
		return usageError{fmt.Sprintf("bad --max-proc-samples %d: give 1 to %d", o.maxProcSamples, 1<<26)}
	}
	return nil
}

// maxProcsLimit is the kernel side's room for targets (bpf/mt_state.h's
// targets map).
const maxProcsLimit = 4096

// fleetSampleRing is the ring buffer of a --sample run with --comm,
// --cgroup or --all when --buffer-size gives none.
const fleetSampleRing = 4 << 20

// listFlag is a repeatable option's values, in order.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// checkSelectors checks --comm, --cgroup, --all and --max-procs: what they
// may be given with, and their values (docs/fleet.md, "Choices").
func checkSelectors(o *options) error {
	n := 0
	for _, set := range []bool{len(o.pids) > 0, len(o.argv) > 0, o.all || len(o.comms) > 0 || len(o.cgroups) > 0} {
		if set {
			n++
		}
	}
	if o.maxProcs < 1 || o.maxProcs > maxProcsLimit {
		return usageError{fmt.Sprintf("bad --max-procs %d: give 1 to %d", o.maxProcs, maxProcsLimit)}
	}
	if !o.all && len(o.comms) == 0 && len(o.cgroups) == 0 {
		return nil
	}
	for _, c := range o.comms {
		switch {
		case c == "" || strings.ContainsRune(c, '/'):
			return usageError{fmt.Sprintf("bad --comm %q: give a process name as ps -o comm shows it (no path)", c)}
		case len(c) > 15:
			return usageError{fmt.Sprintf("bad --comm %q: the kernel keeps 15 bytes of a name: give --comm %q", c, c[:15])}
		}
	}
	for _, c := range o.cgroups {
		if c == "" {
			return usageError{`--cgroup "": give a cgroup v2 directory`}
		}
	}
	const why = "--comm, --cgroup and --all write profiles, not a log (every event of many processes in one log is not a heap anyone reads): " +
		"give -o none with --http ADDR or --profile-dir DIR, or --sample BYTES with -o FILE.pb.gz"
	switch {
	case n > 1:
		return usageError{"give one of -p PID, -- PROG, or --comm/--cgroup/--all"}
	case o.all && (len(o.comms) > 0 || len(o.cgroups) > 0):
		return usageError{"--all selects every process already: give it without --comm and --cgroup"}
	case len(o.comms) > 64:
		return usageError{fmt.Sprintf("%d --comm names: at most 64", len(o.comms))}
	case len(o.cgroups) > 8:
		return usageError{fmt.Sprintf("%d --cgroup paths: at most 8", len(o.cgroups))}
	case o.preload:
		return usageError{"--preload starts a program (-- PROG); --comm, --cgroup and --all need eBPF"}
	case o.floor:
		return usageError{"--floor measures one program's probes: give it with -p or -- PROG, not --comm, --cgroup or --all"}
	case o.listen != "" || o.reportDir != "":
		return usageError{why}
	case o.out.Kind == runner.OutNone:
		return nil
	case o.sample > 0 && strings.HasSuffix(o.out.File(), runner.ProfileSuffix):
		return nil
	}
	return usageError{why}
}
