package analysis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/logfmt"
)

// Metadata: the [memtrace] lines (header, processes, threads, lost
// records, the summary, notices) and what the model says of processes.

// applyMeta dispatches a [memtrace] line to logfmt's typed parser of its
// word. A line whose fields do not parse is a bad line like any other,
// counted and skipped, never applied in part: a half-read process or
// thread would be attributed wrongly. The header is the exception: it
// names the run, and a value that does not parse (a start= in another
// format) is left out and the rest kept. Words this version does not
// know are skipped (later versions may add some).
func (m *Model) applyMeta(word []byte, rest []byte) {
	m.Counts.Meta++
	var err error
	switch string(word) {
	case logfmt.WordHeader:
		// ParseHeader leaves what does not parse at zero.
		h, _ := logfmt.ParseHeader(rest)
		m.applyHeader(&h)
	case logfmt.WordLost:
		var l logfmt.Lost
		if l, err = logfmt.ParseLost(rest); err == nil {
			// total= is the tracer's own count; count= adds up where a
			// line has no total (or one behind what was read).
			if l.Total > 0 && int64(l.Total) >= m.LostEvents {
				m.LostEvents = int64(l.Total)
			} else if l.Count > 0 {
				m.LostEvents += int64(l.Count)
			}
		}
	case logfmt.WordSummary:
		var s logfmt.Summary
		if s, err = logfmt.ParseSummary(rest); err == nil {
			if int64(s.Lost) > m.LostEvents {
				m.LostEvents = int64(s.Lost)
			}
			m.Ended = true
			m.ended.Store(true)
		}
	case logfmt.WordThread:
		var t logfmt.Thread
		if t, err = logfmt.ParseThread(rest); err == nil && t.TID != 0 {
			ti := m.thread(t.TID, []byte(t.Name), m.lastTS)
			if t.PID != 0 {
				m.Threads[ti].Proc = m.proc(t.PID)
			}
		}
	case logfmt.WordProc:
		var p logfmt.Proc
		if p, err = logfmt.ParseProc(rest); err == nil && p.PID != 0 {
			m.applyProc(&p)
		}
	case logfmt.WordFD, logfmt.WordDmabuf, logfmt.WordION:
		m.applyFD(word, rest)
	case logfmt.WordStack:
		var s logfmt.Stack
		// It follows the frames of the event it is about.
		if s, err = logfmt.ParseStack(rest); err == nil && s.Truncated && m.target != noTarget {
			m.openTrunc = m.truncReason(s.Reason)
		}
	case logfmt.WordNotice:
		var n logfmt.Notice
		if n, err = logfmt.ParseNotice(rest); err == nil && n.Msg != "" {
			if len(m.Notices) >= 16 {
				m.Notices = m.Notices[1:]
			}
			m.Notices = append(m.Notices, n.Msg)
		}
	}
	if err != nil {
		m.Counts.Malformed++
	}
}

func (m *Model) applyHeader(h *logfmt.Header) {
	m.Header.Seen = true
	m.ordered = m.Counts.Events == 0
	// No process has pid 0: a header without pid= leaves the one known.
	if h.PID != 0 {
		m.Header.PID = h.PID
		if m.defProc < 0 {
			m.defProc = m.proc(h.PID)
		}
	}
	m.Header.Comm, m.Header.Cmd, m.Header.Exe = h.Comm, h.Cmd, h.Exe
	m.Header.Version, m.Header.Mode = h.Version, h.Mode
	m.Header.Start = ""
	if !h.Start.IsZero() {
		m.Header.Start = h.Start.UTC().Format(logfmt.StartLayout)
	}
	if m.defProc >= 0 {
		p := &m.Procs[m.defProc]
		if p.Comm == "" {
			p.Comm = m.Header.Comm
		}
		if p.Cmd == "" {
			p.Cmd = m.Header.Cmd
		}
	}
}

func (m *Model) applyProc(l *logfmt.Proc) {
	pi := m.proc(l.PID)
	p := &m.Procs[pi]
	// ppid= is left out when 0: no traced process has parent 0.
	if l.PPID != 0 {
		p.PPID = l.PPID
	}
	if l.Comm != "" {
		p.Comm = l.Comm
	}
	if l.Cmd != "" {
		p.Cmd = l.Cmd
	}
	switch l.Event {
	case logfmt.ProcExit:
		p.Exited = true
		p.ExitSignal = l.Signal
		if l.HasStatus {
			p.HasStatus, p.ExitStatus = true, l.Status
		}
	case logfmt.ProcAttach:
		p.Attached = true
	case logfmt.ProcUntraced:
		p.Untraced = l.Reason
		if p.Untraced == "" {
			p.Untraced = "no reason given"
		}
	case logfmt.ProcFork:
		if l.PPID != 0 {
			m.fdFork(pi, m.proc(l.PPID))
		}
	}
}

// Untraced lists the processes the tracer could not probe (their events
// are missing from the log, not zero), in log order.
func (m *Model) Untraced() []int {
	var out []int
	for i := range m.Procs {
		if m.Procs[i].Untraced != "" {
			out = append(out, i)
		}
	}
	return out
}

// NotFollowed counts the untraced processes that are children memtrace
// was not asked to follow (logfmt.ReasonNotFollowed).
func (m *Model) NotFollowed() int {
	n := 0
	for _, p := range m.Untraced() {
		if m.Procs[p].Untraced == logfmt.ReasonNotFollowed {
			n++
		}
	}
	return n
}

// UntracedText is one line naming the untraced processes, at most a few
// of them, "" when every process was traced.
func (m *Model) UntracedText() string {
	ps := m.Untraced()
	if len(ps) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d processes not traced (their allocations are not in the log): ", len(ps))
	for i, p := range ps {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(ps)-3)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", m.ProcLabel(p), m.Procs[p].Untraced)
	}
	return b.String()
}

// ProcLabel names process p for display.
func (m *Model) ProcLabel(p int) string {
	pr := &m.Procs[p]
	s := strconv.FormatInt(pr.PID, 10)
	if pr.Comm != "" {
		s += " " + pr.Comm
	}
	return s
}
