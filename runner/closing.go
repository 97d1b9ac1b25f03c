package runner

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/memtrace/memtrace/internal/units"
	"github.com/memtrace/memtrace/report"
)

// closingMaxLog bounds the log text that the closing lines read back:
// reading takes about a second per 500 MB, which a user who pressed Ctrl-C
// should not wait for. A compressed log counts by its text (a 14 MB .zst
// of 32-frame stacks is 1.7 GB of it, and its read-back was seconds).
const closingMaxLog = 512 << 20

// coarseTick bounds how far a file's modification time may lag the clock
// it is compared with (the kernel's tick, at its slowest HZ).
const coarseTick = 10 * time.Millisecond

// Closing writes memtrace's closing lines on w, as heaptrack ends a run:
// the log's calls, peak, leaked (or still allocated) bytes and lost
// events, where the log is and the commands that open it. The figures are
// the report's own (report.LogFigures reads the finished log as `memtrace
// report` does), so the two never disagree. output is the -o file: ""
// (the log went to stderr: said once), NoLog, or a path; served: the log
// went to a viewer on a port instead. A file not written since the run
// began (the run failed before opening it) is an older log: not described.
// text is the size of a compressed log's text when the caller knows it
// (0: the file's size stands for it).
func Closing(w io.Writer, output string, served bool, since time.Time, text int64) {
	switch {
	case served || output == NoLog:
		return
	case output == "" || output == "/dev/stderr":
		fmt.Fprintln(w, "memtrace: the log is on stderr, above: with -o FILE memview FILE and memtrace report FILE open it")
		return
	case output == "/dev/stdout" || output == "-":
		fmt.Fprintln(w, "memtrace: the log went to stdout: memview FILE and memtrace report FILE open it once saved")
		return
	}
	st, err := os.Stat(output)
	// A file's times come from the kernel's coarse clock, which may be
	// a tick behind time.Now: a log written at once after since can
	// look older by that much.
	if err != nil || !st.Mode().IsRegular() || st.ModTime().Before(since.Add(-coarseTick)) {
		return
	}
	q := shellQuote(output)
	if text < st.Size() {
		text = st.Size()
	}
	if text > closingMaxLog {
		fmt.Fprintf(w, "memtrace: the log is %s (%s); to investigate it run:\n  memview %s\n  memtrace report %s\n", output, units.Bytes(uint64(st.Size())), q, q)
		return
	}
	f, err := report.LogFigures(output, io.Discard)
	if err != nil {
		return
	}
	fmt.Fprintln(w, ClosingLines(f, output))
}

// ClosingLines is the closing text for a log at path with figures f.
func ClosingLines(f report.Figures, path string) string {
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
		fmt.Fprintf(&b, "\tsuppressed leaks: %d (system libraries' own)\n", f.Suppressed)
	}
	fmt.Fprintf(&b, "\tlost events: %d\n", f.Lost)
	if f.Caveat != "" {
		fmt.Fprintf(&b, "\t(%s)\n", f.Caveat)
	}
	q := shellQuote(path)
	fmt.Fprintf(&b, "memtrace finished: the log is %s; to investigate it run:\n  memview %s\n  memtrace report %s", path, q, q)
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
