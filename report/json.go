package report

import (
	"encoding/json"
	"io"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/ranking"
)

// The JSON report. Byte and count figures are integers; times are seconds.
// The top level has the figures of all processes added up (calls,
// temporary, peak_bytes, leaked_bytes, leaks) for automation, then the
// summary, the rankings, one object per process, the suppressions and,
// with --diff, the comparison.

type jsonFrame struct {
	Function string `json:"function"`
	Symbol   string `json:"symbol,omitempty"` // the ELF name (mangled): as logged, or looked up
	Module   string `json:"module,omitempty"`
	Offset   uint64 `json:"offset,omitempty"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Inlined  bool   `json:"inlined,omitempty"` // inlined into the next frame (same module and address)
}

type jsonFigs struct {
	Calls          int64 `json:"calls"`
	AllocatedBytes int64 `json:"allocated_bytes"`
	Temporary      int64 `json:"temporary"`
	TemporaryBytes int64 `json:"temporary_bytes"`
	PeakCount      int64 `json:"peak_count"`
	PeakBytes      int64 `json:"peak_bytes"`
	Leaks          int64 `json:"leaks"`
	LeakedBytes    int64 `json:"leaked_bytes"`
	// The figures not among every entry's (ranking.Figure.Entry), each in
	// the entries of a ranking by it alone.
	LargestBytes          *int64 `json:"largest_bytes,omitempty"`
	LargestTemporaryBytes *int64 `json:"largest_temporary_bytes,omitempty"`
	LargestPeakBytes      *int64 `json:"largest_peak_bytes,omitempty"`
	LargestLeakedBytes    *int64 `json:"largest_leaked_bytes,omitempty"`
}

// jsonFigsOf is f as an entry of ranking mt has it.
func jsonFigsOf(f figs, mt metric) jsonFigs {
	j := jsonFigs{f[fCalls], f[fBytes], f[fTemp], f[fTempBytes], f[fPeakCount], f[fPeak], f[fLeaks], f[fLeaked], nil, nil, nil, nil}
	if p := j.own(mt.desc().Figure); p != nil {
		v := f[mt.fig()]
		*p = &v
	}
	return j
}

// own is the field of a figure not among every entry's; nil for those
// (every figure is one or the other: TestJSONHasEveryFigure).
func (j *jsonFigs) own(f ranking.Figure) **int64 {
	switch f {
	case ranking.LargestBytes:
		return &j.LargestBytes
	case ranking.LargestTemporaryBytes:
		return &j.LargestTemporaryBytes
	case ranking.LargestPeakBytes:
		return &j.LargestPeakBytes
	case ranking.LargestLeakedBytes:
		return &j.LargestLeakedBytes
	default:
		return nil
	}
}

type jsonEntry struct {
	jsonFigs
	Op        string      `json:"op,omitempty"`        // for allocations without a call stack
	Stack     []jsonFrame `json:"stack"`               // innermost first
	Truncated []string    `json:"truncated,omitempty"` // why the stack was cut short: the tracer's reasons
}

type jsonDiffEntry struct {
	Delta     jsonFigs    `json:"delta"`
	After     jsonFigs    `json:"after"`
	Before    jsonFigs    `json:"before"`
	Op        string      `json:"op,omitempty"`
	Stack     []jsonFrame `json:"stack"`
	Truncated []string    `json:"truncated,omitempty"`
}

type jsonTruncReason struct {
	Reason string `json:"reason"`
	Stacks int64  `json:"stacks"`
	Events int64  `json:"events"`
}

type jsonTruncated struct {
	Stacks  int64             `json:"stacks"`
	Events  int64             `json:"events"`
	Reasons []jsonTruncReason `json:"reasons"` // most stacks first
}

// jsonRankings are the lists of the rankings shown, by metric, under their
// ranking.Ranking.Key, in the table's order. A ranking not shown is null
// if it is on by default, and left out if not: a report that does not ask
// for a ranking added since reads as before.
type jsonRankings[E any] struct{ lists [][]E }

func (j *jsonRankings[E]) set(mt metric, es []E) {
	if j.lists == nil {
		j.lists = make([][]E, numMetrics())
	}
	j.lists[mt] = es
}

func (j jsonRankings[E]) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for mt := range numMetrics() {
		var list []E
		if int(mt) < len(j.lists) {
			list = j.lists[mt]
		}
		if list == nil && !mt.desc().On {
			continue
		}
		v, err := json.Marshal(list)
		if err != nil {
			return nil, err
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(mt.desc().Key)
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

type jsonSummary struct {
	RuntimeS       float64 `json:"runtime_s"`
	Calls          int64   `json:"calls"`
	CallsPerS      float64 `json:"calls_per_s"`
	Temporary      int64   `json:"temporary"`
	TemporaryPerS  float64 `json:"temporary_per_s"`
	AllocatedBytes int64   `json:"allocated_bytes"`
	PeakBytes      int64   `json:"peak_bytes"`
	PeakTimeS      float64 `json:"peak_time_s"` // when the peak was first reached; 0 for several processes
	PeakIsSum      bool    `json:"peak_is_sum,omitempty"`
	Leaks          int64   `json:"leaks"`
	LeakedBytes    int64   `json:"leaked_bytes"`
	// The peak and the leaks split between the malloc family and
	// mappings (heap_split.go); omitted with --filter-bt-function.
	PeakMallocBytes    *int64        `json:"peak_malloc_bytes,omitempty"` // of peak_bytes: malloc-family blocks live at the peak
	PeakMmapBytes      *int64        `json:"peak_mmap_bytes,omitempty"`   // of peak_bytes: mappings live at the peak
	MallocOwnPeakBytes *int64        `json:"malloc_own_peak_bytes,omitempty"`
	MallocOwnPeakTimeS *float64      `json:"malloc_own_peak_time_s,omitempty"` // 0 for several processes
	MallocLeaks        *int64        `json:"malloc_leaks,omitempty"`
	MallocLeakedBytes  *int64        `json:"malloc_leaked_bytes,omitempty"`
	MmapLeaks          *int64        `json:"mmap_leaks,omitempty"`
	MmapLeakedBytes    *int64        `json:"mmap_leaked_bytes,omitempty"`
	UnknownBlocks      int64         `json:"unknown_blocks"` // not freed in the log, their frees lost: not leaks
	UnknownBytes       int64         `json:"unknown_bytes"`
	LeaksOverstated    bool          `json:"leaks_may_be_overstated"` // records were lost and some leaks remain
	SuppressedLeaks    int64         `json:"suppressed_leaks,omitempty"`
	SuppressedBytes    int64         `json:"suppressed_bytes,omitempty"`
	LostEvents         int64         `json:"lost_events"`
	UnreadableLines    int64         `json:"unreadable_lines"`
	UnmatchedFrees     int64         `json:"unmatched_frees"`
	Lines              int64         `json:"lines"`
	Events             int64         `json:"events"`
	TruncatedGzipped   int           `json:"truncated_gzipped_logs,omitempty"`
	FDLeaks            int           `json:"fd_leaks"`
	TruncatedStacks    jsonTruncated `json:"truncated_stacks"`
	SkippedFrames      int64         `json:"skipped_frames"`         // frame lines past 127 after one event
	Untraced           []string      `json:"untraced_processes"`     // processes the tracer could not probe, one line per log
	RunEnd             string        `json:"run_end,omitempty"`      // how the process's run ended: "exited with status 0", "killed by SIGSEGV", "detached", "interrupted"
	StillAllocated     bool          `json:"still_allocated"`        // leaks and leaked_bytes are not leaks: blocks still allocated at detach, or (live_at_cut) live at the cut
	LiveAtCut          bool          `json:"live_at_cut"`            // the log ends before the process did: leaks are blocks live at the cut
	ReadStopped        []string      `json:"read_stopped,omitempty"` // why a log's reading stopped before its end, and where: the figures cover what came before
}

type jsonProcess struct {
	Title    string                  `json:"title"`
	PID      int64                   `json:"pid"`
	Comm     string                  `json:"comm,omitempty"`
	Cmd      string                  `json:"cmd,omitempty"`
	Log      string                  `json:"log"`
	Summary  jsonSummary             `json:"summary"`
	Rankings jsonRankings[jsonEntry] `json:"rankings"`
	FDLeaks  *jsonFDLeaks            `json:"fd_leaks"`
}

type jsonSuppression struct {
	Pattern     string `json:"pattern"`
	File        string `json:"file"`
	Line        int    `json:"line"`
	Leaks       int64  `json:"leaks"`
	LeakedBytes int64  `json:"leaked_bytes"`
	Stacks      int    `json:"stacks"`
	Builtin     bool   `json:"builtin,omitempty"` // memtrace's list (--disable-builtin-suppressions)
}

type jsonDiff struct {
	Base     []string                    `json:"base"`
	Summary  map[string][3]float64       `json:"summary"` // figure → [after, before, delta]
	Rankings jsonRankings[jsonDiffEntry] `json:"rankings"`
}

type jsonReport struct {
	FormatVersion int      `json:"format_version"`
	Logs          []string `json:"logs"`
	Calls         int64    `json:"calls"`
	Temporary     int64    `json:"temporary"`
	PeakBytes     int64    `json:"peak_bytes"`
	LeakedBytes   int64    `json:"leaked_bytes"`
	Leaks         int64    `json:"leaks"`

	Summary      jsonSummary             `json:"summary"`
	Rankings     jsonRankings[jsonEntry] `json:"rankings"`
	FDLeaks      *jsonFDLeaks            `json:"fd_leaks"`
	Processes    []jsonProcess           `json:"processes"`
	Suppressions []jsonSuppression       `json:"suppressions,omitempty"`
	Diff         *jsonDiff               `json:"diff,omitempty"`
}

func perS(n int64, us uint64) float64 {
	if us == 0 {
		return 0
	}
	return float64(n) / (float64(us) / 1e6)
}

func (r *report) jsonSummaryOf(s *section) jsonSummary {
	t := &s.total
	j := jsonSummary{
		RuntimeS: float64(s.runtime) / 1e6, Calls: t.Calls, CallsPerS: perS(t.Calls, s.runtime),
		Temporary: t.Temporary, TemporaryPerS: perS(t.Temporary, s.runtime), AllocatedBytes: int64(t.Bytes),
		PeakBytes: int64(t.PeakBytes), PeakIsSum: s.procs > 1, Leaks: t.Leaks, LeakedBytes: int64(t.LeakedBytes),
		LostEvents: s.lost, UnreadableLines: s.garbage, UnmatchedFrees: s.unmatched, Lines: s.lines, Events: s.events,
		TruncatedGzipped: s.truncated, FDLeaks: len(s.fdLeaks),
		UnknownBlocks: t.Unknown, UnknownBytes: int64(t.UnknownBytes), LeaksOverstated: s.logLost() > 0 && t.Leaks > 0,
		SkippedFrames: s.skippedFrames, Untraced: append([]string{}, s.untraced...), TruncatedStacks: jsonTruncated{Reasons: []jsonTruncReason{}},
		RunEnd: s.end, StillAllocated: s.alive, LiveAtCut: s.alive && s.live == analysis.LiveCut, ReadStopped: s.stopped,
	}
	for _, tr := range s.truncs {
		j.TruncatedStacks.Stacks += tr.Stacks
		j.TruncatedStacks.Events += tr.Events
		j.TruncatedStacks.Reasons = append(j.TruncatedStacks.Reasons, jsonTruncReason{tr.Reason, tr.Stacks, tr.Events})
	}
	if s.procs <= 1 {
		j.PeakTimeS = float64(s.peakTS) / 1e6
	}
	if s.split {
		h := s.total.Minus(&s.mmap)
		i := func(v int64) *int64 { return &v }
		ts := 0.0
		if s.procs <= 1 {
			ts = float64(s.heapPeakTS) / 1e6
		}
		j.PeakMallocBytes, j.PeakMmapBytes = i(int64(h.PeakBytes)), i(int64(s.mmap.PeakBytes))
		j.MallocOwnPeakBytes, j.MallocOwnPeakTimeS = i(int64(s.heapPeak)), &ts
		j.MallocLeaks, j.MallocLeakedBytes = i(h.Leaks), i(int64(h.LeakedBytes))
		j.MmapLeaks, j.MmapLeakedBytes = i(s.mmap.Leaks), i(int64(s.mmap.LeakedBytes))
	}
	sp := r.supd[s]
	j.SuppressedLeaks, j.SuppressedBytes = sp.leaks, int64(sp.bytes)
	return j
}

func (r *report) jsonStack(st *site) (string, []jsonFrame) {
	frames := make([]jsonFrame, 0, len(st.fr()))
	for k := range st.frames {
		f := &st.frames[k]
		r.resolve(f)
		jf := jsonFrame{Function: f.name, Symbol: f.mangled, Module: f.module, File: f.file, Line: f.line}
		if !f.mixed {
			jf.Offset = f.offset
		}
		if n := len(f.inl); n > 1 {
			for _, c := range f.inl[:n-1] {
				frames = append(frames, jsonFrame{Function: c.name, Module: f.module, Offset: jf.Offset, File: c.file, Line: c.line, Inlined: true})
			}
			jf.File, jf.Line = f.inl[n-1].file, f.inl[n-1].line
		}
		frames = append(frames, jf)
	}
	return st.r().op, frames
}

func (r *report) jsonRankingsOf(s *section) jsonRankings[jsonEntry] {
	var out jsonRankings[jsonEntry]
	es := entriesOf(s)
	for mt := range numMetrics() {
		if !r.opt.show[mt] {
			continue
		}
		list := []jsonEntry{}
		for _, e := range rank(r.t, es, mt, r.opt.limit) {
			st := r.t.sites[e.site]
			op, stack := r.jsonStack(st)
			list = append(list, jsonEntry{jsonFigs: jsonFigsOf(e.f, mt), Op: op, Stack: stack, Truncated: st.r().trunc})
		}
		out.set(mt, list)
	}
	return out
}

func (r *report) writeJSON(w io.Writer) error {
	j := jsonReport{FormatVersion: 1, Processes: []jsonProcess{}}
	for _, l := range r.logs {
		j.Logs = append(j.Logs, l.path)
	}
	t := &r.all.total
	j.Calls, j.Temporary, j.PeakBytes, j.LeakedBytes, j.Leaks = t.Calls, t.Temporary, int64(t.PeakBytes), int64(t.LeakedBytes), t.Leaks
	j.Summary = r.jsonSummaryOf(r.all)
	j.Rankings = r.jsonRankingsOf(r.all)
	j.FDLeaks = jsonFDLeaksOf(r.all)
	for _, s := range r.secs {
		p := jsonProcess{Title: s.title, PID: s.pid, Comm: s.comm, Cmd: s.cmd, Summary: r.jsonSummaryOf(s), FDLeaks: jsonFDLeaksOf(s)}
		if s.log != nil {
			p.Log = s.log.path
		}
		if r.multi() {
			p.Rankings = r.jsonRankingsOf(s)
		} else {
			p.Rankings = j.Rankings
		}
		j.Processes = append(j.Processes, p)
	}
	for _, sp := range r.sups {
		builtin := sp.File == ""
		if builtin && sp.leaks == 0 {
			continue // the built-in list that matched nothing is noise here
		}
		j.Suppressions = append(j.Suppressions, jsonSuppression{sp.Text()[len("leak:"):], sp.File, sp.Line, sp.leaks, int64(sp.bytes), sp.sites, builtin})
	}
	if r.base != nil {
		d := &jsonDiff{Summary: map[string][3]float64{}}
		for _, l := range r.bases {
			d.Base = append(d.Base, l.path)
		}
		a, b := &r.all.total, &r.base.total
		put := func(k string, x, y float64) { d.Summary[k] = [3]float64{x, y, x - y} }
		put("runtime_s", float64(r.all.runtime)/1e6, float64(r.base.runtime)/1e6)
		put("calls", float64(a.Calls), float64(b.Calls))
		put("temporary", float64(a.Temporary), float64(b.Temporary))
		put("allocated_bytes", float64(a.Bytes), float64(b.Bytes))
		put("peak_bytes", float64(a.PeakBytes), float64(b.PeakBytes))
		put("leaked_bytes", float64(a.LeakedBytes), float64(b.LeakedBytes))
		put("leaks", float64(a.Leaks), float64(b.Leaks))
		es := diffEntries(r.all, r.base)
		for mt := range numMetrics() {
			if !r.opt.show[mt] {
				continue
			}
			list := []jsonDiffEntry{}
			for _, e := range rank(r.t, es, mt, r.opt.limit) {
				st := r.t.sites[e.site]
				op, stack := r.jsonStack(st)
				list = append(list, jsonDiffEntry{Delta: jsonFigsOf(e.f, mt), After: jsonFigsOf(figsOf(r.all.bySite[e.site]), mt),
					Before: jsonFigsOf(figsOf(r.base.bySite[e.site]), mt), Op: op, Stack: stack, Truncated: st.r().trunc})
			}
			d.Rankings.set(mt, list)
		}
		j.Diff = d
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(&j)
}
