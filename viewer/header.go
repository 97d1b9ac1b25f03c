package viewer

import (
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/analysis"
)

// This file draws nothing: it decides what memview's title and header say,
// from the model and the input's state, so that the rules are tested
// without a screen. render.go puts the result on it.

// State is the input's state in the title.
type State uint8

const (
	StateLoading State = iota // a file still being read
	StateLive                 // the input may grow (-f, stdin, TCP)
	StateDone                 // the input ended, or the tracer wrote its summary
)

func (s State) String() string {
	return [...]string{"◌ LOADING", "● LIVE", "✕ DONE"}[s]
}

// Header is what the title and the header row report about the log.
type Header struct {
	State   State
	Allocs  int
	Lost    int64 // records the tracer lost
	Skipped int64 // unreadable lines
	// SkippedFrames are frame lines past logfmt.MaxFrames of one event.
	SkippedFrames int64

	Leaks     int64
	LeakBytes uint64
	// LeaksOverstated: records were lost, so a leak may be a block whose
	// free was lost ("Leaks: ≤N").
	LeaksOverstated bool
	// StillAllocated: the log says the process(es) shown were let go
	// running (a -p detach, a Ctrl-C), so Leaks are blocks still
	// allocated at detach, not leaks, as the report words it.
	StillAllocated bool
	// Live says which: still allocated at detach, or live at the cut
	// (the log ends before the process did).
	Live analysis.Live
	// Suppressed are leaks the built-in suppressions hide (system
	// libraries' start-up blocks), not in Leaks, as in the report.
	Suppressed      int64
	SuppressedBytes uint64
	// Unknown are blocks whose frees were lost (analysis.StatusUnknown).
	Unknown      int64
	UnknownBytes uint64

	Truncated                []analysis.Truncation // stacks cut short, by reason
	TruncStacks, TruncEvents int64

	// Untraced names the processes the tracer could not probe.
	Untraced string

	// Hint is set when nothing read so far is a log line: the report's
	// words (analysis.EmptyLogHint), shown in the list pane; the title
	// has ShortHint.
	Hint  string
	lines int64
}

// ShortHint is the title's form of Hint.
func (h *Header) ShortHint() string {
	if h.Hint == "" {
		return ""
	}
	return strconv.FormatInt(h.lines, 10) + " lines, no log line (is it a memtrace or memtrack log?)"
}

// header computes the Header; the caller holds a.Mu.
func (a *App) header() Header {
	m := a.M
	h := Header{Allocs: m.Len(), Lost: m.LostEvents, Skipped: m.Counts.Garbage(), SkippedFrames: m.Counts.SkippedFrames}
	switch {
	case a.ended || m.Done && !a.opt.Live:
		h.State = StateDone
	case a.opt.Live && m.Ended:
		// The summary is the tracer's last line: nothing more will come.
		h.State = StateDone
	case a.opt.Live:
		h.State = StateLive
	}
	supN, supB := a.suppressed()
	h.Leaks, h.LeakBytes, h.Suppressed, h.SuppressedBytes = leaksOf(m, supN, supB)
	// Of the leaks shown, the suppressed ones left out, as the report
	// says it: with every leak suppressed there is nothing to overstate.
	h.LeaksOverstated = m.LostEvents > 0 && h.Leaks > 0
	h.Live = a.liveOf(a.q.Proc)
	h.StillAllocated = h.Live != analysis.LiveLeaked
	if n := len(m.Untraced()); n > 0 {
		h.Untraced = "Untraced: " + strconv.Itoa(n)
	}
	h.Unknown, h.UnknownBytes = m.Unknown()
	h.Truncated = m.Truncations()
	h.TruncStacks, h.TruncEvents = analysis.TruncatedTotal(h.Truncated)
	if c := m.Counts; !c.HasLogLine() && c.Lines > 0 {
		h.Hint, h.lines = analysis.EmptyLogHint(a.opt.Source, c.Lines, c.Events), c.Lines
	}
	return h
}

// HeaderInfo is the Header as the screen shows it now.
func (a *App) HeaderInfo() Header {
	a.Mu.Lock()
	defer a.Mu.Unlock()
	return a.header()
}

// LeaksText is the header row's leak figure: "Leaks: 3  (1.5 KB)", with ≤
// when lost records may have made some of them ("Still allocated at
// detach: 3  (1.5 KB)" for a process let go running).
func (h *Header) LeaksText() string {
	le := ""
	if h.LeaksOverstated {
		le = "≤"
	}
	word := "Leaks: "
	if h.StillAllocated {
		word = h.LiveTitle() + ": "
	}
	s := word + le + strconv.FormatInt(h.Leaks, 10) + "  (" + Bytes(h.LeakBytes) + ")"
	if t := h.SuppressedText(); t != "" {
		s += "  " + t
	}
	return s
}

// LiveTitle names the blocks that the Leaks filter shows: "Leaks", or,
// when they are not leaks, "Still allocated at detach" or "Live at the
// cut", the report's words.
func (h *Header) LiveTitle() string {
	if !h.StillAllocated {
		return "Leaks"
	}
	w := h.Live.Words()
	return strings.ToUpper(w[:1]) + w[1:]
}

// UnknownText is "Unknown: 270  (8.4 KB) records lost", "" when none.
func (h *Header) UnknownText() string {
	if h.Unknown == 0 {
		return ""
	}
	return "Unknown: " + strconv.FormatInt(h.Unknown, 10) + "  (" + Bytes(h.UnknownBytes) + ") records lost"
}

// SkippedText is "Skipped: 3 bad lines, 40 frames", "" when nothing was.
func (h *Header) SkippedText() string {
	var parts []string
	if h.Skipped > 0 {
		parts = append(parts, strconv.FormatInt(h.Skipped, 10)+" bad lines")
	}
	if h.SkippedFrames > 0 {
		parts = append(parts, strconv.FormatInt(h.SkippedFrames, 10)+" frames")
	}
	if len(parts) == 0 {
		return ""
	}
	return "Skipped: " + strings.Join(parts, ", ")
}

// TruncatedText is "Truncated: 3 stacks/40 events (fp 2/30, depth 1/10)",
// "" when no stack was cut.
func (h *Header) TruncatedText() string {
	if h.TruncEvents == 0 {
		return ""
	}
	var parts []string
	for _, t := range h.Truncated {
		parts = append(parts, t.Reason+" "+strconv.FormatInt(t.Stacks, 10)+"/"+strconv.FormatInt(t.Events, 10))
	}
	return "Truncated: " + strconv.FormatInt(h.TruncStacks, 10) + " stacks/" + strconv.FormatInt(h.TruncEvents, 10) + " events (" + strings.Join(parts, ", ") + ")"
}
