package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/ranking"
	"github.com/memtrace/memtrace/internal/units"
)

// fdLeak is one leaked file descriptor of a section (docs/fd.md): open
// when its process exited, or at the end of the log.
type fdLeak struct {
	pid    int64
	thread string // name of the thread that opened it, when known
	d      analysis.Descriptor
}

// fdLeaksOf lists process proc's leaked descriptors in model m.
func fdLeaksOf(m *analysis.Model, proc int32) []fdLeak {
	var out []fdLeak
	for _, i := range m.FDLeaks(proc) {
		d := m.Descriptors()[i]
		name := ""
		if d.Thread != analysis.NoThread && int(d.Thread) < len(m.Threads) {
			name = m.Threads[d.Thread].Name
		}
		out = append(out, fdLeak{pid: d.PID, thread: name, d: d})
	}
	return out
}

// addFDSections gives each section of log l its process's leaked
// descriptors, and a section of its own to a process that leaked
// descriptors but made no allocation (traced with --track fd alone, or a
// child that only handled descriptors), so that no leak goes unreported.
func addFDSections(l *loaded, out []*section, pids map[int64]bool) []*section {
	m := l.m
	seen := len(m.Descriptors()) > 0
	if !seen {
		return out
	}
	has := map[int32]bool{}
	for _, s := range out {
		s.fdSeen = true
		s.fdLeaks = fdLeaksOf(m, s.proc)
		has[s.proc] = true
	}
	for p := range m.Procs {
		pr := &m.Procs[p]
		if has[int32(p)] || (len(pids) > 0 && !pids[pr.PID]) {
			continue
		}
		leaks := fdLeaksOf(m, int32(p))
		if len(leaks) == 0 {
			continue
		}
		s := newSection()
		s.log, s.proc, s.pid, s.comm, s.cmd, s.procs = l, int32(p), pr.PID, pr.Comm, pr.Cmd, 1
		if s.comm == "" && pr.PID == m.Header.PID {
			s.comm, s.cmd = m.Header.Comm, m.Header.Cmd
		}
		s.title = procTitle(s.pid, s.comm, l.name)
		s.fdSeen, s.fdOnly, s.fdLeaks = true, true, leaks
		out = append(out, s)
	}
	return out
}

// fdLeakText describes a leaked descriptor in one line: number, kind,
// call, what it points to, when and by whom it was opened.
func fdLeakText(f *fdLeak, withPID bool) string {
	var b strings.Builder
	if withPID {
		b.WriteString("pid " + strconv.FormatInt(f.pid, 10) + " ")
	}
	d := &f.d
	fmt.Fprintf(&b, "fd %d %s (%s)", d.FD, d.Kind, d.Call)
	if d.Path != "" {
		b.WriteString(" " + d.Path)
	}
	if d.Size > 0 {
		b.WriteString(" buffer " + units.Bytes(d.Size))
		if d.Heap != "" {
			b.WriteString(" heap " + d.Heap)
		}
	}
	b.WriteString(" opened at " + secs(d.TS) + " by thread " + strconv.FormatInt(d.TID, 10))
	if f.thread != "" {
		b.WriteString(" (" + f.thread + ")")
	}
	if d.Inherited {
		b.WriteString(", inherited at fork")
	}
	return b.String()
}

// writeFDLeaks writes the LEAKED FILE DESCRIPTORS list of s (-n entries).
func (r *report) writeFDLeaks(w io.Writer, s *section) {
	if len(s.fdLeaks) == 0 || !r.opt.showsClass(ranking.Leaked) {
		return
	}
	fmt.Fprintln(w, "LEAKED FILE DESCRIPTORS")
	withPID := s.procs > 1
	n := len(s.fdLeaks)
	if r.opt.limit > 0 {
		n = min(n, r.opt.limit)
	}
	for k := range n {
		fmt.Fprintln(w, fdLeakText(&s.fdLeaks[k], withPID))
	}
	if n < len(s.fdLeaks) {
		fmt.Fprintf(w, "and %d more\n", len(s.fdLeaks)-n)
	}
	fmt.Fprintln(w)
}

// fdSummaryLine is the summary's line, for logs that track descriptors.
func fdSummaryLine(s *section) string {
	if !s.fdSeen {
		return ""
	}
	return fmt.Sprintf("file descriptors leaked: %d", len(s.fdLeaks))
}

type jsonFD struct {
	PID         int64   `json:"pid"`
	FD          int64   `json:"fd"`
	Kind        string  `json:"kind"`
	Call        string  `json:"call"`
	Path        string  `json:"path,omitempty"`
	OpenedS     float64 `json:"opened_s"`
	TID         int64   `json:"tid"`
	Thread      string  `json:"thread,omitempty"`
	Cloexec     bool    `json:"cloexec,omitempty"`
	BufferBytes uint64  `json:"buffer_bytes,omitempty"`
	Heap        string  `json:"heap,omitempty"`
	Inherited   bool    `json:"inherited,omitempty"`
	AtExit      bool    `json:"listed_at_exit,omitempty"` // the tracer's own fd event=leak line
}

// jsonFDLeaks is "fd_leaks": how many, and all of them (no -n limit:
// automation wants the whole list).
type jsonFDLeaks struct {
	Count       int      `json:"count"`
	Descriptors []jsonFD `json:"descriptors"`
}

func jsonFDLeaksOf(s *section) *jsonFDLeaks {
	j := &jsonFDLeaks{Count: len(s.fdLeaks), Descriptors: []jsonFD{}}
	for _, f := range s.fdLeaks {
		d := &f.d
		j.Descriptors = append(j.Descriptors, jsonFD{PID: f.pid, FD: d.FD, Kind: d.Kind, Call: d.Call, Path: d.Path,
			OpenedS: float64(d.TS) / 1e6, TID: d.TID, Thread: f.thread, Cloexec: d.Cloexec, BufferBytes: d.Size,
			Heap: d.Heap, Inherited: d.Inherited, AtExit: d.TracerLeak})
	}
	return j
}

// htmlFDLeaks is the HTML page's table of leaked descriptors.
func (r *report) htmlFDLeaks(w io.Writer) {
	s := r.all
	if len(s.fdLeaks) == 0 {
		return
	}
	fmt.Fprintf(w, "<section id=\"fd-leaks\"><h2>Leaked file descriptors (%d)</h2>\n", len(s.fdLeaks))
	fmt.Fprintln(w, `<table class="grid"><tr><th>pid</th><th>fd</th><th>kind</th><th>call</th><th>path</th><th>opened</th><th>thread</th></tr>`)
	for _, f := range s.fdLeaks {
		d := &f.d
		path := d.Path
		if d.Size > 0 {
			path = strings.TrimSpace(path + " buffer " + units.Bytes(d.Size) + " " + d.Heap)
		}
		th := strconv.FormatInt(d.TID, 10)
		if f.thread != "" {
			th += " " + f.thread
		}
		fmt.Fprintf(w, "<tr><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
			f.pid, d.FD, esc(d.Kind), esc(d.Call), esc(path), esc(secs(d.TS)), esc(th))
	}
	fmt.Fprintln(w, "</table></section>")
}
