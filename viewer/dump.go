package viewer

import (
	"bufio"
	"fmt"
	"io"

	"github.com/memtrace/memtrace/analysis"
)

// WriteThreadTable writes memview's per-thread table (memview
// --dump-threads): one row per thread with allocated, freed, live and
// leaked bytes, then the totals, the built-in suppressions applied.
func WriteThreadTable(out io.Writer, m *analysis.Model) error {
	return WriteThreadTableWith(out, m, analysis.BuiltinSuppressions())
}

// WriteThreadTableWith is WriteThreadTable with the suppressions sups (nil:
// none). The Leaks column leaves out what they suppress and the blocks
// whose frees were lost, as the report's leaks and the viewer's do, so
// the three agree on one log; the lines under the table say what its
// figures miss.
func WriteThreadTableWith(out io.Writer, m *analysis.Model, sups []*analysis.Suppression) error {
	supN, supB := m.ThreadSuppressedLeaks(sups)
	var sn int64
	var sb uint64
	w := bufio.NewWriter(out)
	fmt.Fprintf(w, "%-16s %8s %10s %14s %10s %14s %14s %10s %14s\n", "Thread", "TID", "Allocs", "Allocated", "Frees", "Freed", "Net(live)", "Leaks", "Leaked")
	var ta, tf, tl int64
	var ba, bf, bn, bl uint64
	for _, i := range m.ThreadOrder(analysis.ThreadByTID, false, -1) {
		t := &m.Threads[i]
		ln, lb, lsn, lsb := threadLeaks(m, i, supN, supB)
		sn, sb = sn+lsn, analysis.SatAdd(sb, lsb)
		fmt.Fprintf(w, "%-16s %8d %10d %14d %10d %14d %14d %10d %14d\n", t.Name, t.TID, t.Allocs, t.AllocBytes, t.Frees, t.FreedBytes, t.LiveBytes, ln, lb)
		ta += t.Allocs
		tf += t.Frees
		tl += ln
		ba = analysis.SatAdd(ba, t.AllocBytes)
		bf = analysis.SatAdd(bf, t.FreedBytes)
		bn = analysis.SatAdd(bn, t.LiveBytes)
		bl = analysis.SatAdd(bl, lb)
	}
	fmt.Fprintf(w, "%-16s %8s %10d %14d %10d %14d %14d %10d %14d\n", "TOTAL", "", ta, ba, tf, bf, bn, tl, bl)
	c := m.Counts
	fmt.Fprintf(w, "\n%d lines, %d events, %d frames; %d unmatched frees", c.Lines, c.Events, c.Frames, c.UnmatchedFrees)
	if m.LostEvents > 0 {
		fmt.Fprintf(w, "; %d events LOST by the tracer (every figure above misses them)", m.LostEvents)
	}
	if g := c.Garbage(); g > 0 {
		fmt.Fprintf(w, "; %d unreadable lines skipped", g)
	}
	fmt.Fprintln(w)
	if n, b := m.Unknown(); n > 0 {
		fmt.Fprintf(w, "%d blocks, %d bytes: unknown (records lost): their memory was allocated again, so their frees were lost; not counted as leaks\n", n, b)
	}
	if sn > 0 {
		fmt.Fprintf(w, "%s: system libraries' own, not in the Leaks column; --disable-builtin-suppressions counts them\n", analysis.SuppressedLine(sn, sb))
	}
	if m.Done && m.StillAllocated(-1) {
		fmt.Fprintf(w, "the Leaks and Leaked columns are blocks %s, not leaks: %s\n", m.LiveOf(-1).Words(), liveWhy[m.LiveOf(-1)])
	}
	if m.LostEvents > 0 && tl > 0 { // the leaks shown, the suppressed left out
		fmt.Fprintf(w, "leaks may be overstated: a leak may be a block whose free was among the %d lost records\n", m.LostEvents)
	}
	writeFDLeaks(w, m)
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write thread table: %w", err)
	}
	return nil
}

// liveWhy says why blocks are not leaks, after analysis.Live's words.
var liveWhy = map[analysis.Live]string{
	analysis.LiveDetached: "the process had not exited",
	analysis.LiveCut:      "the log ends before the process did",
}

// writeFDLeaks lists the leaked descriptors (--track fd), when there are any.
func writeFDLeaks(w io.Writer, m *analysis.Model) {
	ids := m.FDLeaks(-1)
	if len(ids) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d file descriptors leaked (open at exit or at the end of the log):\n", len(ids))
	fmt.Fprintf(w, "%8s %5s %-8s %-12s %8s %12s  %s\n", "PID", "FD", "Kind", "Call", "TID", "Opened(us)", "Path")
	for _, i := range ids {
		d := &m.Descriptors()[i]
		path := d.Path
		if d.Size > 0 {
			path = fmt.Sprintf("%s buffer %d bytes %s", d.Kind, d.Size, d.Heap)
		}
		fmt.Fprintf(w, "%8d %5d %-8s %-12s %8d %12d  %s\n", d.PID, d.FD, d.Kind, d.Call, d.TID, d.TS, path)
	}
}
