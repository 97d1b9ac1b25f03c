package report

import (
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/analysis"
)

// Sections: the figures of each process (or of several added up) by site,
// which the rankings are drawn from.

// section is the figures of one process, or of several added up.
type section struct {
	title   string // "pid 4242 app (run.log)", or "all 3 processes"
	pid     int64
	comm    string
	cmd     string
	log     *loaded // nil for a merged section
	proc    int32   // index in log.m.Procs
	total   analysis.CostFigures
	peakTS  uint64 // µs since tracing started; for a merged section, unknown (0)
	runtime uint64 // µs
	// bySite is the figures by site. A site's figures are those of the
	// one stack cost or section they came from, shared and never written
	// through (a log of many distinct stacks has about as many sites, and
	// a copy of each stack's figures was much of the report's peak),
	// until a second one is added: then they are a copy of the section's
	// own (owned).
	bySite map[int32]*analysis.CostFigures
	owned  map[int32]bool
	procs  int // processes added up
	// mmap is total's mappings' share (analysis.ProcCosts.Mmap), heapPeak
	// the malloc family's own peak (summed over processes, as the peak
	// is), at heapPeakTS (one process only); split: they are known (not
	// with --filter-bt-function, whose totals are by stack).
	mmap       analysis.CostFigures
	heapPeak   uint64
	heapPeakTS uint64
	split      bool
	// end is how the run ended (analysis.Model.ProcEnd), "" for a merged
	// section; live: what its live blocks are, and alive that they are
	// not leaks (the process, every process of a merged one, was let go
	// running: still allocated at detach; or the log ends before it did:
	// live at the cut).
	end   string
	live  analysis.Live
	alive bool

	// Per log, not per process: on the first section of each log, and
	// added up in a merged one.
	lost, garbage, unmatched, lines, events int64
	truncated                               int
	stopped                                 []string // why the reading of a log stopped early, one per log
	cutLogs                                 int      // memtrace logs without their summary line
	skippedFrames                           int64
	untraced                                []string              // the log's proc event=untraced lines, as the model words them
	untracedN, notFollowedN                 int64                 // the processes they name, and those not followed (figures.Figures)
	truncs                                  []analysis.Truncation // stacks cut short, by reason

	// Leaked file descriptors (fd.go); fdSeen: the log has descriptor
	// lines; fdOnly: a process with descriptor leaks and no allocation.
	fdLeaks        []fdLeak
	fdSeen, fdOnly bool
}

func newSection() *section { return &section{bySite: map[int32]*analysis.CostFigures{}} }

// logLost is the records lost by the tracer of the section's log (or
// logs): every process of a log is affected, not only the section that
// carries the log's counts.
func (s *section) logLost() int64 {
	if s.lost == 0 && s.log != nil {
		return s.log.m.LostEvents
	}
	return s.lost
}

// add adds c, which must not change while the section is used, to
// site's figures.
func (s *section) add(site int32, c *analysis.CostFigures) {
	f := s.bySite[site]
	if f == nil {
		s.bySite[site] = c
		return
	}
	if !s.owned[site] {
		own := *f
		f = &own
		s.bySite[site] = f
		if s.owned == nil {
			s.owned = map[int32]bool{}
		}
		s.owned[site] = true
	}
	f.Add(c)
}

// sectionsOf makes a section per process of log l (of the wanted pids).
// With filterFn, only stacks with a function whose name contains it count,
// and the process's totals are theirs.
func sectionsOf(l *loaded, t *siteTable, pids map[int64]bool, filterFn string) []*section {
	m := l.m
	if l.sites == nil {
		l.sites = t.forModel(m)
	}
	ms := l.sites
	var out []*section
	for i := range l.costs.Procs {
		pc := &l.costs.Procs[i]
		pr := &m.Procs[pc.Proc]
		if len(pids) > 0 && !pids[pr.PID] {
			continue
		}
		s := newSection()
		s.log, s.proc, s.pid, s.comm, s.cmd, s.procs = l, pc.Proc, pr.PID, pr.Comm, pr.Cmd, 1
		if s.comm == "" && pc.Proc == 0 {
			s.comm, s.cmd = m.Header.Comm, m.Header.Cmd
		}
		s.title = procTitle(s.pid, s.comm, l.name)
		s.end, s.live = m.ProcEnd(int(pc.Proc))
		s.alive = s.live != analysis.LiveLeaked
		s.total = pc.CostFigures
		s.peakTS = pc.PeakTS
		s.mmap, s.heapPeak, s.heapPeakTS, s.split = pc.Mmap, pc.HeapPeak, pc.HeapPeakTS, filterFn == ""
		// Runtime counts from the start of tracing (time stamps are µs
		// since then) for a log's first process, from its first event
		// for a process that came later (a fork).
		start := uint64(0)
		if i > 0 {
			start = pc.FirstTS
		}
		s.runtime = pc.LastTS - min(start, pc.LastTS)
		if filterFn != "" {
			s.total = analysis.CostFigures{}
		}
		for k := range pc.Stacks {
			sc := &pc.Stacks[k]
			id := t.site(m, ms, sc)
			if filterFn != "" {
				if !t.hasFunction(id, filterFn) {
					continue
				}
				s.total.Add(&sc.CostFigures)
			}
			s.add(id, &sc.CostFigures)
		}
		out = append(out, s)
	}
	out = addFDSections(l, out, pids)
	if len(out) == 0 && len(pids) == 0 {
		// A log without a single allocation still gets its section, so
		// that the report says what was read.
		s := newSection()
		s.log, s.comm, s.cmd = l, m.Header.Comm, m.Header.Cmd
		s.pid = m.Header.PID
		s.title = procTitle(s.pid, s.comm, l.name)
		out = append(out, s)
	}
	if len(out) > 0 {
		c := m.Counts
		f := out[0]
		f.lost, f.garbage, f.unmatched, f.lines, f.events = m.LostEvents, c.Garbage(), c.UnmatchedFrees, c.Lines, c.Events
		f.skippedFrames, f.truncs = c.SkippedFrames, m.Truncations()
		if u := m.UntracedText(); u != "" {
			f.untraced = []string{u}
		}
		f.untracedN, f.notFollowedN = int64(len(m.Untraced())), int64(m.NotFollowed())
		if l.truncated {
			f.truncated = 1
		}
		if l.stop != nil {
			f.stopped = []string{l.name + ": " + l.stop.Error()}
		}
		if m.Cut() {
			f.cutLogs = 1
		}
	}
	return out
}

// mergeLive is what the live blocks of two sections added up are: leaks
// when either holds leaks, else live at the cut when either log was cut.
func mergeLive(a, b analysis.Live) analysis.Live {
	if a == analysis.LiveLeaked || b == analysis.LiveLeaked {
		return analysis.LiveLeaked
	}
	return max(a, b)
}

func procTitle(pid int64, comm, log string) string {
	var b strings.Builder
	if pid > 0 {
		b.WriteString("pid ")
		b.WriteString(strconv.FormatInt(pid, 10))
		b.WriteByte(' ')
	}
	if comm != "" {
		b.WriteString(comm)
		b.WriteByte(' ')
	}
	b.WriteString("(" + log + ")")
	return b.String()
}

// merge adds sections up. The peak of several processes is the sum of
// their own peaks (they need not peak together, and logs of separate runs
// share no clock); the runtime is the longest.
func merge(title string, secs []*section) *section {
	out := newSection()
	out.title = title
	out.alive = len(secs) > 0
	out.split = len(secs) > 0
	if len(secs) == 1 {
		// Nothing is added to a section once merged: the one section's
		// figures by site are the merged ones, not copied (a log of many
		// distinct stacks has as many sites).
		out.bySite = secs[0].bySite
	}
	for i, s := range secs {
		out.alive = out.alive && s.alive
		if i == 0 {
			out.live = s.live
		} else {
			out.live = mergeLive(out.live, s.live)
		}
		out.total.Add(&s.total)
		out.mmap.Add(&s.mmap)
		out.heapPeak = analysis.SatAdd(out.heapPeak, s.heapPeak)
		out.split = out.split && s.split
		out.runtime = max(out.runtime, s.runtime)
		out.procs += s.procs
		if len(secs) > 1 {
			for id, c := range s.bySite {
				out.add(id, c)
			}
		}
		out.lost += s.lost
		out.garbage += s.garbage
		out.unmatched += s.unmatched
		out.lines += s.lines
		out.events += s.events
		out.truncated += s.truncated
		out.stopped = append(out.stopped, s.stopped...)
		out.cutLogs += s.cutLogs
		out.skippedFrames += s.skippedFrames
		out.untraced = append(out.untraced, s.untraced...)
		out.untracedN += s.untracedN
		out.notFollowedN += s.notFollowedN
		out.truncs = addTruncations(out.truncs, s.truncs)
		out.fdLeaks = append(out.fdLeaks, s.fdLeaks...)
		out.fdSeen = out.fdSeen || s.fdSeen
	}
	if len(secs) == 1 {
		only := secs[0]
		out.title, out.pid, out.comm, out.cmd, out.log, out.peakTS = only.title, only.pid, only.comm, only.cmd, only.log, only.peakTS
		out.end = only.end
		out.heapPeakTS = only.heapPeakTS
	}
	return out
}
