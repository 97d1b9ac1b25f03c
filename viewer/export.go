package viewer

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/memtrace/memtrace/internal/asuser"
)

// export writes the visible records (or groups, in group mode) to path.
func (a *App) export(path string) {
	if path == "" {
		a.message = "export cancelled: no file name"
		return
	}
	if _, err := os.Stat(path); err == nil {
		// Never overwrite what the user has without asking.
		a.startPrompt(path+" exists; overwrite? (y/N)", "", func(a *App, s string) {
			if s == "y" || s == "Y" || s == "yes" {
				a.writeAndReport(path)
			} else {
				a.message = "export cancelled: " + path + " kept"
			}
		})
		return
	}
	a.writeAndReport(path)
}

func (a *App) writeAndReport(path string) {
	n, err := a.writeExport(path)
	if err != nil {
		a.message = err.Error()
		return
	}
	a.message = "exported " + strconv.Itoa(n) + " rows to " + path
}

// writeExport writes the file as the user behind sudo; as root, through
// no symbolic link another user planted; a failed write leaves none
// (asuser.WriteOutput).
func (a *App) writeExport(path string) (int, error) {
	n := 0
	err := asuser.WriteOutput(path, false, func(f io.Writer) error {
		var err error
		n, err = a.exportTo(f)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	return n, nil
}

func (a *App) exportTo(f io.Writer) (int, error) {
	w := bufio.NewWriter(f)
	m := a.M
	fmt.Fprintf(w, "# memview export of %s: filter %s, thread %s, sort %s", a.opt.Source, a.q.Status, a.threadLabel(), a.sortLabel())
	if a.q.Search != "" {
		fmt.Fprintf(w, ", search %q", a.q.Search)
	}
	fmt.Fprintln(w)
	n := 0
	if a.groupMode {
		fmt.Fprintf(w, "%-3s %10s %12s %14s %12s  %s\n", "", "count", "total", "rate/s", "growth", "stack")
		for k := range a.groups {
			g := &a.groups[k]
			mono := ""
			if g.Monotonic {
				mono = "▲"
			}
			rate := "-"
			if r, ok := g.MeaningfulRate(); ok {
				rate = strconv.FormatFloat(r, 'f', 0, 64)
			}
			fmt.Fprintf(w, "%-3s %10d %12d %14s %12d  [%s]\n", mono, g.Count, g.Total, rate, g.Growth, a.groupThreadsLabel(g, 1<<20))
			for i, f := range m.Frames(g.Stack) {
				fmt.Fprintf(w, "      #%-2d %s  %s+0x%x\n", i, m.FrameName(f), m.Frame(f).Module, m.Frame(f).Offset)
			}
			n++
		}
	} else {
		fmt.Fprintf(w, "%-4s %-18s %-10s %12s %12s  %s\n", "St.", "pointer", "op", "time", "size", "thread / first frame")
		for _, i := range a.sel {
			_, tag := a.rowStyle(i)
			fmt.Fprintf(w, "%-4s %-18s %-10s %12s %12d  %s  %s\n", tag, Ptr(m.Ptr[i]), m.OpName(m.Op[i]), Dur(m.TS[i]-m.MinTS), m.Size[i], m.Threads[m.Thread[i]].Name, a.firstFrame(m.Stack[i]))
			n++
		}
	}
	return n, w.Flush()
}
