package analysis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/logfmt"
)

// Metadata: the [memtrace] lines (header, processes, threads, lost
// records, the summary, notices) and what the model says of processes.

func (m *Model) applyMeta(word []byte, rest []byte) {
	m.Counts.Meta++
	kv := logfmt.Fields(rest)
	get := func(k string) string { v, _ := logfmt.Field(kv, k); return v }
	num := func(k string) (int64, bool) {
		v, ok := logfmt.Field(kv, k)
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	switch string(word) {
	case logfmt.WordHeader:
		m.Header.Seen = true
		m.ordered = m.Counts.Events == 0
		if pid, ok := num("pid"); ok {
			m.Header.PID = pid
			if m.defProc < 0 {
				m.defProc = m.proc(pid)
			}
		}
		m.Header.Comm, m.Header.Cmd = get("comm"), get("cmd")
		m.Header.Version, m.Header.Start, m.Header.Mode = get("version"), get("start"), get("mode")
		if m.defProc >= 0 {
			p := &m.Procs[m.defProc]
			if p.Comm == "" {
				p.Comm = m.Header.Comm
			}
			if p.Cmd == "" {
				p.Cmd = m.Header.Cmd
			}
		}
	case logfmt.WordLost:
		if tot, ok := num("total"); ok && tot >= m.LostEvents {
			m.LostEvents = tot
		} else if c, ok := num("count"); ok && c > 0 {
			m.LostEvents += c
		}
	case logfmt.WordSummary:
		if l, ok := num("lost"); ok && l > m.LostEvents {
			m.LostEvents = l
		}
		m.Ended = true
		m.ended.Store(true)
	case logfmt.WordThread:
		tid, ok := num("tid")
		if !ok {
			return
		}
		pid, hasPID := num("pid")
		name := get("name")
		ti := m.thread(tid, []byte(name), m.lastTS)
		if hasPID {
			pi := m.proc(pid)
			m.Threads[ti].Proc = pi
		}
	case logfmt.WordProc:
		pid, ok := num("pid")
		if !ok {
			return
		}
		pi := m.proc(pid)
		p := &m.Procs[pi]
		if pp, ok := num("ppid"); ok {
			p.PPID = pp
		}
		if c := get("comm"); c != "" {
			p.Comm = c
		}
		if c := get("cmd"); c != "" {
			p.Cmd = c
		}
		switch get("event") {
		case "exit":
			p.Exited = true
			p.ExitSignal = get("signal")
			if v, ok := num("status"); ok && v >= 0 && v <= 255 {
				p.HasStatus, p.ExitStatus = true, int(v)
			}
		case "attach":
			p.Attached = true
		case "untraced":
			p.Untraced = get("reason")
			if p.Untraced == "" {
				p.Untraced = "no reason given"
			}
		case "fork":
			if pp, ok := num("ppid"); ok {
				m.fdFork(pi, m.proc(pp))
			}
		}
	case logfmt.WordFD, logfmt.WordDmabuf, logfmt.WordION:
		m.applyFD(word, rest)
	case logfmt.WordStack:
		// It follows the frames of the event it is about.
		if v, _ := logfmt.Field(kv, "truncated"); v == "1" && m.target != noTarget {
			m.openTrunc = m.truncReason(get("reason"))
		}
	case logfmt.WordNotice:
		if msg := get("msg"); msg != "" {
			if len(m.Notices) >= 16 {
				m.Notices = m.Notices[1:]
			}
			m.Notices = append(m.Notices, msg)
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
