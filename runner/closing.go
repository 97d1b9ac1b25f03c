package runner

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/memtrace/memtrace/internal/figures"
	"github.com/memtrace/memtrace/internal/units"
	"github.com/memtrace/memtrace/report"
)

// coarseTick bounds how far a file's modification time may lag the clock
// it is compared with (the kernel's tick, at its slowest HZ).
const coarseTick = 10 * time.Millisecond

// CheckEnv is the test hook (docs/closing.md): set to 1, a run that wrote
// its log to a file reads it back after its closing lines, as `memtrace
// report` would, and exits with CheckStatus and one line if a figure
// differs from the closing lines'.
const CheckEnv = "MEMTRACE_TEST_CLOSING_CHECK"

// CheckStatus is the exit status of a failed closing check.
const CheckStatus = 70

// Closing writes memtrace's closing lines on w, as heaptrack ends a run:
// the log's calls, peak, leaked (or still allocated) bytes, suppressed
// leaks and lost events, then where the log is and the commands that open
// it (f nil: only where the log is). f is what the agent counted as it wrote the log (agent.Session's
// Figures: the report's own figures of that log, without reading it
// back), so every run gets them: a log on stderr or stdout, -o none and a
// log served to a viewer too. output is -o; served: the log went to a
// viewer on a port instead. A file
// not written since the run began (the run failed before opening it) is
// an older log: nothing is said.
func Closing(w io.Writer, output Output, served bool, since time.Time, f *figures.Figures) {
	var where string
	switch {
	case served:
		where = "memtrace finished: the log went to the viewer"
	case output.Kind == OutNone:
		where = "memtrace finished: no log was written (-o none)"
	case output.Kind == OutStderr:
		where = "memtrace finished: the log is on stderr, above: with -o FILE memview FILE and memtrace report FILE open it"
	case output.Kind == OutStdout:
		where = "memtrace finished: the log went to stdout: memview FILE and memtrace report FILE open it once saved"
	default:
		if !written(output.Path, since) {
			return
		}
		q := shellQuote(output.Path)
		where = fmt.Sprintf("memtrace finished: the log is %s; to investigate it run:\n  memview %s\n  memtrace report %s", output.Path, q, q)
	}
	if f == nil {
		fmt.Fprintln(w, where)
		return
	}
	fmt.Fprintln(w, statsLines(*f)+where)
	if os.Getenv(CheckEnv) == "1" && !served && output.Kind == OutFile && written(output.Path, since) {
		if msg := CheckClosing(*f, output.Path); msg != "" {
			fmt.Fprintln(w, msg)
			os.Exit(CheckStatus)
		}
	}
}

// ClosingFromLog is Closing for a log whose figures only its file can
// give: one no agent wrote (the preload library's text mode writes it
// itself), or one whose events were written out of time order
// (agent.Session.InOrder), which the report reads otherwise. The figures
// are read back from the file, as `memtrace report` reads it; a log not in
// a file (or not readable) gets fp, the agent's figures (nil without an
// agent: only where the log went).
func ClosingFromLog(w io.Writer, output Output, served bool, since time.Time, fp *figures.Figures) {
	if served || output.Kind != OutFile || !written(output.Path, since) {
		Closing(w, output, served, since, fp)
		return
	}
	f, err := report.LogFigures(output.Path, io.Discard)
	if err != nil {
		Closing(w, output, served, since, fp)
		return
	}
	Closing(w, output, served, since, &f)
}

// CheckClosing reads the log at path back as `memtrace report` does and
// returns one line naming the first figure that differs from f, or "".
func CheckClosing(f figures.Figures, path string) string {
	r, err := report.LogFigures(path, io.Discard)
	if err != nil {
		return fmt.Sprintf("memtrace: closing check: read %s back: %v", path, err)
	}
	if d := figures.Diff(f, r); d != "" {
		return fmt.Sprintf("memtrace: closing check: the closing lines and memtrace report %s disagree: %s (closing lines against report)", path, d)
	}
	return ""
}

// written reports whether output is a regular file written since the run
// began. A file's times come from the kernel's coarse clock, which may be
// a tick behind time.Now: a log written at once after since can look
// older by that much.
func written(output string, since time.Time) bool {
	st, err := os.Stat(output)
	return err == nil && st.Mode().IsRegular() && !st.ModTime().Before(since.Add(-coarseTick))
}

// ClosingLines is the closing text for a log at path with figures f.
func ClosingLines(f report.Figures, path string) string {
	q := shellQuote(path)
	return statsLines(f) + fmt.Sprintf("memtrace finished: the log is %s; to investigate it run:\n  memview %s\n  memtrace report %s", path, q, q)
}

// statsLines is the figures' part of the closing text, heaptrack's
// summary in the report's words.
func statsLines(f report.Figures) string {
	var b strings.Builder
	b.WriteString("memtrace stats:\n")
	if f.End != "" {
		fmt.Fprintf(&b, "\trun: %s\n", f.End)
	}
	fmt.Fprintf(&b, "\tcalls to allocation functions: %d\n", f.Calls)
	fmt.Fprintf(&b, "\tpeak heap memory consumption: %s\n", units.Bytes(f.PeakBytes))
	if f.StillAllocated {
		fmt.Fprintf(&b, "\t%s: %s (%d blocks)\n", f.LiveWords, units.Bytes(f.LeakedBytes), f.Leaks)
	} else {
		fmt.Fprintf(&b, "\ttotal memory leaked: %s (%d leaks)\n", units.Bytes(f.LeakedBytes), f.Leaks)
	}
	if f.Suppressed > 0 {
		fmt.Fprintf(&b, "\tsuppressed leaks: %s (%d leaks)\n", units.Bytes(f.SuppressedBytes), f.Suppressed)
	}
	fmt.Fprintf(&b, "\tlost events: %d\n", f.Lost)
	switch {
	case f.Untraced == 0:
	case f.NotFollowed == f.Untraced:
		fmt.Fprintf(&b, "\tchild processes not traced: %d (their allocations are not in the log; --follow traces them)\n", f.Untraced)
	default:
		fmt.Fprintf(&b, "\tprocesses not traced: %d (their allocations are not in the log; memtrace report says why)\n", f.Untraced)
	}
	if f.Caveat != "" {
		fmt.Fprintf(&b, "\t(%s)\n", f.Caveat)
	}
	return b.String()
}

// shellQuote quotes a path for a shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:,@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
