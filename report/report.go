package report

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/asuser"
	"github.com/memtrace/memtrace/internal/cli"
	"github.com/memtrace/memtrace/symbols"
)

const usage = `usage: memtrace report [flags] LOG...
Rank the call stacks of memtrace (or memtrack) logs by allocation calls,
memory live at the peak, leaks and temporary allocations, like
heaptrack_print. Several logs (or a log of several processes) give a section
per process and a merged one. A LOG may be compressed (zstd, gzip); - reads stdin.

rankings (on/off flags take 1/0, true/false, on/off; alone they mean on):
  -a, --print-allocators 0|1   most calls to allocation functions (on)
  -p, --print-peaks 0|1        peak memory consumers: live at the peak (on)
  -l, --print-leaks 0|1        memory leaks (on)
  -T, --print-temporary 0|1    most temporary allocations (on)
  -n, --peak-limit N           entries per ranking (10; 0: all)
  -s, --sub-peak-limit N       call stacks shown under each entry (5)
  -m, --merge-backtraces 0|1   1: one frame per function, so that builds
                               compare; 0 (default): call sites, each named by
                               its innermost inlined function and file:line
  --resolve 0|1                names of unnamed frames and file:line, from the
                               modules the log names (on)
  --full-stacks                stacks go on past main (or a thread's start
                               routine) into the C library's start-up code
  -t, --shorten-templates 0|1  C++ template arguments left out: std::vector<>
                               (on; --full-names is -t 0)
  --pid PID[,PID...]           only these processes
  --filter-bt-function NAME    only stacks with a function containing NAME
comparison and leaks:
  -d, --diff BASE.log          print LOG minus BASE (repeatable)
  --suppressions FILE          leak:PATTERN lines (repeatable)
  --print-suppressions         what each suppression matched
  --disable-builtin-suppressions
                               report what system libraries keep for good
                               (libstdc++'s exception pool, glibc's and the
                               loader's internals) as leaks too
exports (FILE - writes to stdout instead of the text report):
  --json FILE                  figures and rankings for automation
  -F, --folded FILE            folded stacks (flamegraph.pl, speedscope, inferno)
  --cost allocations|temporary|leaked|peak
                               cost of --folded and of the HTML's first flame graph
  -M, --massif FILE            valgrind massif format (ms_print)
  --massif-threshold PERCENT   fold smaller stacks in massif trees (1)
  --massif-detailed-freq N     every Nth massif snapshot detailed (2)
  --pprof FILE                 gzipped profile.proto (go tool pprof)
  --html FILE                  one self-contained HTML page
  --progress auto|1|0          progress line on stderr (auto: on a terminal)
See docs/report.md for the definitions.
`

// options are the command line.
type options struct {
	logs       []string
	limit      int
	subLimit   int
	show       [numMetrics]bool
	diff       []string
	supps      []string
	printSupps bool
	noBuiltin  bool
	jsonOut    string
	folded     string
	massif     string
	pprof      string
	html       string
	cost       string
	merge      bool
	lines      bool
	fullStacks bool // text: stacks past main into start-up code
	shorten    bool // text and HTML labels: template arguments left out
	pids       map[int64]bool
	filterFn   string
	progress   int // -1 auto (stderr is a terminal), 0 never, 1 always

	massifThreshold float64
	massifDetailed  int
}

// onOff is a flag that may stand alone (on) or take 0/1, true/false,
// on/off, yes/no, as heaptrack_print's -a -p -T -l -m do.
type onOff struct{ p *bool }

func (o onOff) String() string {
	if o.p != nil && *o.p {
		return "1"
	}
	return "0"
}

func (o onOff) Set(s string) error {
	v, ok := parseOnOff(s)
	if !ok {
		return fmt.Errorf("want 1 or 0, got %q", s)
	}
	*o.p = v
	return nil
}

func (o onOff) IsBoolFlag() bool { return true }

func parseOnOff(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "1", "true", "on", "yes", "y":
		return true, true
	case "0", "false", "off", "no", "n":
		return false, true
	}
	return false, false
}

// listFlag collects a repeatable flag.
type listFlag struct{ p *[]string }

func (l listFlag) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l listFlag) Set(s string) error { *l.p = append(*l.p, s); return nil }

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func parseArgs(args []string, stdout io.Writer) (*options, error) {
	o := &options{limit: 10, subLimit: 5, merge: false, lines: true, shorten: true, progress: -1, cost: "allocations",
		massifThreshold: 1, massifDetailed: 2}
	for i := range o.show {
		o.show[i] = true
	}
	fs := flag.NewFlagSet("memtrace report", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in one line, help by hand
	fs.Usage = func() {}
	onOffs := map[string]bool{}
	bo := func(p *bool, help string, names ...string) {
		for _, n := range names {
			fs.Var(onOff{p}, n, help)
			onOffs[n] = true
		}
	}
	str := func(p *string, help string, names ...string) {
		for _, n := range names {
			fs.StringVar(p, n, *p, help)
		}
	}
	var pids, progress string
	fs.IntVar(&o.limit, "n", o.limit, "show `N` entries per ranking (0: all)")
	fs.IntVar(&o.limit, "peak-limit", o.limit, "same as -n")
	fs.IntVar(&o.subLimit, "s", o.subLimit, "show `N` call stacks under each entry (heaptrack's sub-peaks)")
	fs.IntVar(&o.subLimit, "sub-peak-limit", o.subLimit, "same as -s")
	bo(&o.show[byCalls], "ranking by calls to allocation functions (default on)", "a", "print-allocators")
	bo(&o.show[byPeak], "ranking by memory live at the peak (default on)", "p", "print-peaks")
	bo(&o.show[byLeaks], "ranking by leaked memory (default on)", "l", "print-leaks")
	bo(&o.show[byTemporary], "ranking by temporary allocations (default on)", "T", "print-temporary")
	bo(&o.merge, "merge call sites by function, so builds compare (default off: call sites with inlined frames)", "m", "merge-backtraces")
	bo(&o.lines, "look up missing function names and source lines in the logged modules (default on)", "resolve")
	bo(&o.fullStacks, "show stacks past main (or a thread's start routine) into the C library's start-up code", "full-stacks")
	bo(&o.shorten, "leave C++ template arguments out of function names (default on)", "t", "shorten-templates")
	var fullNames bool
	bo(&fullNames, "keep C++ template arguments in function names (same as -t 0)", "full-names")
	fs.Var(listFlag{&o.logs}, "f", "read `LOG` (also given as an argument)")
	fs.Var(listFlag{&o.logs}, "file", "same as -f")
	fs.Var(listFlag{&o.diff}, "d", "compare with `BASE.log`: print LOG minus BASE (repeatable: bases add up)")
	fs.Var(listFlag{&o.diff}, "diff", "same as -d")
	fs.Var(listFlag{&o.supps}, "suppressions", "leak suppressions `FILE` (leak:PATTERN lines; repeatable)")
	bo(&o.printSupps, "list what each suppression matched and the bytes suppressed", "print-suppressions")
	bo(&o.noBuiltin, "do not apply the built-in suppressions", "disable-builtin-suppressions")
	str(&o.jsonOut, "write JSON to `FILE` (- for stdout)", "json")
	str(&o.folded, "write folded stacks (flamegraph.pl, speedscope, inferno) to `FILE`", "folded", "F", "print-flamegraph")
	str(&o.cost, "cost of --folded and the HTML flamegraph: `allocations|temporary|leaked|peak`", "cost", "flamegraph-cost-type")
	str(&o.massif, "write a massif file (ms_print) to `FILE`", "massif", "M", "print-massif")
	str(&o.pprof, "write a gzipped pprof profile to `FILE`", "pprof")
	str(&o.html, "write one self-contained HTML report to `FILE`", "html")
	fs.Float64Var(&o.massifThreshold, "massif-threshold", o.massifThreshold, "massif: fold stacks below `PERCENT` of the snapshot")
	fs.IntVar(&o.massifDetailed, "massif-detailed-freq", o.massifDetailed, "massif: every `N`th snapshot is detailed (0: none but the peak)")
	str(&o.filterFn, "only allocations whose stack has a function containing `NAME`", "filter-bt-function")
	str(&pids, "only processes `PID[,PID...]`", "pid")
	str(&progress, "progress line on stderr: `auto|1|0` (auto: when stderr is a terminal)", "progress")

	// Flags and logs may come in any order; "--" ends the flags.
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				io.WriteString(stdout, usage)
				return nil, err
			}
			return nil, usageError{strings.TrimSpace(err.Error()) + " (see memtrace report -h)"}
		}
		left := fs.Args()
		if len(left) == 0 {
			break
		}
		used := len(rest) - len(left)
		if used > 0 && rest[used-1] == "--" {
			o.logs = append(o.logs, left...)
			break
		}
		// heaptrack_print's "-l 1": a value after an on/off flag.
		if used > 0 {
			prev := strings.TrimLeft(rest[used-1], "-")
			if onOffs[prev] {
				if v, ok := parseOnOff(left[0]); ok {
					fs.Set(prev, strconv.FormatBool(v))
					rest = left[1:]
					continue
				}
			}
		}
		o.logs = append(o.logs, left[0])
		rest = left[1:]
	}
	if fullNames {
		o.shorten = false
	}
	if len(o.logs) == 0 {
		return nil, usageError{"no log given: memtrace report [flags] LOG... (see memtrace report -h)"}
	}
	if o.limit < 0 || o.subLimit < 0 {
		return nil, usageError{"-n and -s take a count of 0 or more"}
	}
	if _, ok := costOf(o.cost); !ok {
		return nil, usageError{fmt.Sprintf("bad --cost %q: give allocations, temporary, leaked or peak", o.cost)}
	}
	if o.massifThreshold < 0 || o.massifThreshold > 100 || o.massifDetailed < 0 {
		return nil, usageError{"--massif-threshold takes 0 to 100, --massif-detailed-freq 0 or more"}
	}
	for _, p := range strings.Split(pids, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return nil, usageError{fmt.Sprintf("bad --pid %q: give process IDs separated by commas", p)}
		}
		if o.pids == nil {
			o.pids = map[int64]bool{}
		}
		o.pids[n] = true
	}
	switch progress {
	case "", "auto":
	default:
		v, ok := parseOnOff(progress)
		if !ok {
			return nil, usageError{fmt.Sprintf("bad --progress %q: give auto, 1 or 0", progress)}
		}
		o.progress = 0
		if v {
			o.progress = 1
		}
	}
	outs := map[string]string{}
	for flag, path := range map[string]string{"--json": o.jsonOut, "--folded": o.folded, "--massif": o.massif, "--pprof": o.pprof, "--html": o.html} {
		if path == "" || path == "-" {
			continue
		}
		if other, ok := outs[path]; ok {
			return nil, usageError{fmt.Sprintf("%s and %s both write %s", other, flag, path)}
		}
		outs[path] = flag
	}
	return o, nil
}

// Main runs `memtrace report ARGS...`: the text report goes to stdout
// unless an export is written there ("-"); messages go to stderr. It
// returns the exit status: 0, 1 for an error, 2 for a bad command line.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		cli.PrintVersion(stdout, "memtrace report")
		return 0
	}
	o, err := parseArgs(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "memtrace report: %v\n", err)
		return 2
	}
	if err := run(o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "memtrace report: %v\n", err)
		return 1
	}
	return 0
}

// report is everything the writers need.
type report struct {
	opt   *options
	t     *siteTable
	logs  []*loaded
	secs  []*section // one per process
	all   *section   // secs added up (secs[0] itself when there is one)
	base  *section   // with --diff: the bases added up
	bases []*loaded
	sups  []*suppression
	supd  map[*section]suppressed
	cache *symbols.Cache
}

func (r *report) multi() bool { return len(r.secs) > 1 }

func run(o *options, stdout, stderr io.Writer) error {
	defer lowGC()()
	r, err := build(o, stderr)
	if r != nil && r.cache != nil {
		defer r.cache.Close()
	}
	if err != nil {
		return err
	}
	if err := r.write(stdout); err != nil {
		return err
	}
	return r.stopErr()
}

// lowGC keeps the collector at the model's reading GOGC
// (analysis.ReaderGCPercent) for the report's passes as well, a lower one
// the user set kept, and returns what restores the old one. The passes
// over a large model build site tables of strings that are garbage soon
// after: at GOGC 100 the heap stood at twice the live data.
func lowGC() func() {
	old := debug.SetGCPercent(analysis.ReaderGCPercent)
	if old < analysis.ReaderGCPercent {
		debug.SetGCPercent(old)
	}
	return func() { debug.SetGCPercent(old) }
}

// stopErr is the error of the first log whose reading stopped before its
// end, once the report of what came before it is written: exit status 1.
func (r *report) stopErr() error {
	for _, l := range append(append([]*loaded(nil), r.logs...), r.bases...) {
		if l.stop != nil {
			return fmt.Errorf("read %s: %w; the report covers what was read before", l.path, l.stop)
		}
	}
	return nil
}

// build reads the logs and computes every section; the caller closes
// r.cache.
func build(o *options, stderr io.Writer) (*report, error) {
	r := &report{opt: o}
	if o.lines {
		r.cache = symbols.NewCache(nil)
	}
	r.t = newSiteTable(o.merge, r.cache)
	sups, err := readSuppressions(o.supps, stderr)
	if err != nil {
		return r, err
	}
	r.sups = append(sups, builtinSuppressions(o.noBuiltin)...)
	showProgress := o.progress == 1 || (o.progress < 0 && isTerminal(stderr))
	load := func(paths []string) ([]*loaded, []*section, error) {
		var logs []*loaded
		var secs []*section
		for _, p := range paths {
			var prog func(int64, int64)
			clear := func() {}
			if showProgress {
				prog, clear = progressLine(stderr, displayName(p))
			}
			l, err := loadLog(p, prog)
			clear()
			if err != nil {
				return nil, nil, err
			}
			logs = append(logs, l)
			secs = append(secs, sectionsOf(l, r.t, o.pids, o.filterFn)...)
			if o.pprof == "" {
				// Only the pprof export reads the costs by stack again
				// once the sections have them by site: a log of many
				// distinct stacks need not hold both.
				for i := range l.costs.Procs {
					l.costs.Procs[i].Stacks = nil
				}
			}
		}
		return logs, secs, nil
	}
	if r.logs, r.secs, err = load(o.logs); err != nil {
		return r, err
	}
	if len(r.secs) == 0 {
		return r, fmt.Errorf("no process in %s has the PID given with --pid", strings.Join(o.logs, ", "))
	}
	var baseSecs []*section
	if len(o.diff) > 0 {
		if r.bases, baseSecs, err = load(o.diff); err != nil {
			return r, err
		}
	}
	r.supd = applySuppressions(r.t, r.sups, append(append([]*section(nil), r.secs...), baseSecs...))
	r.all = merge(fmt.Sprintf("all %d processes", len(r.secs)), r.secs)
	if len(r.secs) == 1 {
		r.supd[r.all] = r.supd[r.secs[0]]
	} else {
		var s suppressed
		for _, sec := range r.secs {
			s.leaks += r.supd[sec].leaks
			s.bytes += r.supd[sec].bytes
		}
		r.supd[r.all] = s
	}
	if len(baseSecs) > 0 {
		r.base = merge("base", baseSecs)
	}
	return r, nil
}

// write writes the exports and the text report.
func (r *report) write(stdout io.Writer) error {
	o := r.opt
	textToStdout := true
	writeOut := func(path string, write func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		if path == "-" {
			textToStdout = false
			return writeBuffered(stdout, write)
		}
		// Under sudo, as the user: the file is theirs, and the
		// kernel's permission and symlink rules apply.
		f, err := asuser.Create(path)
		if err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
		if err := writeBuffered(f, write); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer) error
	}{
		{o.jsonOut, r.writeJSON},
		{o.folded, r.writeFolded},
		{o.massif, r.writeMassif},
		{o.pprof, r.writePprof},
		{o.html, r.writeHTML},
	} {
		if err := writeOut(out.path, out.write); err != nil {
			return err
		}
	}
	if textToStdout {
		return writeBuffered(stdout, r.writeText)
	}
	return nil
}

func writeBuffered(w io.Writer, write func(io.Writer) error) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := write(bw); err != nil {
		return err
	}
	return bw.Flush()
}
