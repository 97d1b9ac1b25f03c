package runner

import (
	"fmt"
	"io"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/procreport"
)

// NewSession is the Session of a run with options o writing to out: the
// options' filters and stacks, --report-dir's files (their errors on
// stderr), --interval's and --report-dir's figures, -o none, and obs (the
// live model, or nil) told every event. configure, when not nil, adds
// what only the source knows (its clock, its callbacks) before the
// Session is made.
func NewSession(o *Options, out io.Writer, stderr io.Writer, obs agent.Observer, configure func(*agent.Config)) *agent.Session {
	c := agent.Config{Out: out, MinSize: o.MinSize, TrackThreads: o.TrackThreads, StackDepth: o.StackDepth,
		NoFreeStacks: o.NoFreeStacks, NoText: o.Output.Kind == OutNone && o.Listen == "", Track: o.Track, MmapFiles: o.MmapFiles,
		Reports: o.ReportDir != "" || o.Interval > 0, PeakTopN: o.PeakTopN, Interval: o.Interval}
	if obs != nil {
		// A nil observer in the interface would not be nil.
		c.Observer = obs
	}
	if configure != nil {
		configure(&c)
	}
	s := agent.New(c)
	if dir := o.ReportDir; dir != "" {
		verbose := o.Verbose
		s.OnProcessReport = func(r *agent.ProcessReport) {
			txt, _, err := procreport.Write(dir, r)
			if err != nil {
				fmt.Fprintf(stderr, "memtrace: %v\n", err)
			} else if verbose {
				fmt.Fprintf(stderr, "memtrace: wrote %s\n", txt)
			}
		}
	}
	return s
}
