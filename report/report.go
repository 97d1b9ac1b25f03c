package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/asuser"
	"github.com/memtrace/memtrace/internal/cli"
	"github.com/memtrace/memtrace/internal/ranking"
	"github.com/memtrace/memtrace/symbols"
)

// options are the command line.
type options struct {
	logs       []string
	limit      int
	subLimit   int
	show       []bool // by metric
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

// showsClass reports whether a ranking of allocations of class c is
// shown.
func (o *options) showsClass(c ranking.Class) bool {
	for mt := range numMetrics() {
		if o.show[mt] && mt.desc().Figure.Class() == c {
			return true
		}
	}
	return false
}

// showsPeakFigures reports whether a shown ranking's lines have figures of
// the blocks live at the peak.
func (o *options) showsPeakFigures() bool {
	for mt := range numMetrics() {
		d := mt.desc()
		if o.show[mt] && (d.Figure.Class() == ranking.AtPeak || strings.Contains(d.Head+d.Sub, "{"+ranking.PeakBytes.Name()+"}")) {
			return true
		}
	}
	return false
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
	o.show = make([]bool, numMetrics())
	fs := cli.NewParser(cli.Report)
	for mt := range numMetrics() {
		o.show[mt] = mt.desc().On
		fs.Var(onOff{&o.show[mt]}, mt.desc().Flag)
	}
	var pids, progress, aggregate, prefix string
	fs.Int(&o.limit, "peak-limit")
	fs.Int(&o.subLimit, "sub-peak-limit")
	fs.Var(onOff{&o.merge}, "merge-backtraces")
	fs.Var(onOff{&o.lines}, "resolve")
	fs.Var(onOff{&o.fullStacks}, "full-stacks")
	fs.Var(onOff{&o.shorten}, "shorten-templates")
	var fullNames bool
	fs.Var(onOff{&fullNames}, "full-names")
	fs.Var(listFlag{&o.logs}, "file")
	fs.Var(listFlag{&o.diff}, "diff")
	fs.Var(listFlag{&o.supps}, "suppressions")
	fs.Var(onOff{&o.printSupps}, "print-suppressions")
	fs.Var(onOff{&o.noBuiltin}, "disable-builtin-suppressions")
	fs.String(&o.jsonOut, "json")
	fs.String(&o.folded, "folded")
	fs.String(&o.cost, "cost")
	fs.String(&o.massif, "massif")
	fs.String(&o.pprof, "pprof")
	fs.String(&o.html, "html")
	fs.Float64(&o.massifThreshold, "massif-threshold")
	fs.Int(&o.massifDetailed, "massif-detailed-freq")
	fs.String(&o.filterFn, "filter-bt-function")
	fs.String(&pids, "pid")
	fs.String(&progress, "progress")
	// --aggregate is memtrace's (cmd/memtrace), which takes it before
	// the report sees its command line: here it is only a mistake.
	fs.String(&aggregate, "aggregate")
	fs.String(&prefix, "output-prefix")
	logs, err := fs.Parse(args)
	if err != nil {
		if errors.Is(err, cli.ErrHelp) {
			cli.Help(stdout, cli.Report)
		}
		return nil, err
	}
	o.logs = append(o.logs, logs...)
	if fs.IsSet("aggregate") || fs.IsSet("output-prefix") {
		return nil, usageError{"--aggregate DIR [--output-prefix P] takes no log and no other option (see memtrace report --help)"}
	}
	if fullNames {
		o.shorten = false
	}
	if len(o.logs) == 0 {
		return nil, usageError{"no log given: memtrace report [options] LOG... (see memtrace report --help)"}
	}
	if o.limit < 0 || o.subLimit < 0 {
		return nil, usageError{"-n and -s take a count of 0 or more"}
	}
	if _, ok := costOf(o.cost); !ok {
		return nil, usageError{fmt.Sprintf("bad --cost %q: give %s", o.cost, costNames())}
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
	o, err := parseArgs(args, stdout)
	if errors.Is(err, cli.ErrHelp) {
		return 0
	}
	if errors.Is(err, cli.ErrVersion) {
		cli.PrintVersion(stdout, "memtrace report")
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
	// supSite is the suppression of each site with leaks (nil: none).
	supSite map[int32]*suppression
	cache   *symbols.Cache
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
	// Every site is made: the exports that map allocations to sites
	// again find theirs by stack.
	r.t.compact()
	r.supd, r.supSite = applySuppressions(r.t, r.sups, append(append([]*section(nil), r.secs...), baseSecs...))
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
		// kernel's permission and symlink rules apply; as root, no
		// link another user planted is followed. A failed write
		// leaves no partial file.
		err := asuser.WriteOutput(path, false, func(w io.Writer) error { return writeBuffered(w, write) })
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
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
