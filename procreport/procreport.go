package procreport

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/memtrace/memtrace/internal/asuser"
	"github.com/memtrace/memtrace/internal/exitreport"
	"github.com/memtrace/memtrace/internal/figures"
	"github.com/memtrace/memtrace/internal/units"
)

// The report's data is the agent's (internal/exitreport): the agent makes
// it without this package, the runner hands it here.
type (
	Report = exitreport.Report
	Entry  = exitreport.Entry
	FD     = exitreport.FD
)

// Write writes dir/<name>.txt and .html and returns their paths. Under
// sudo the directory and the files are created as the user who ran sudo
// (internal/asuser): the directory is theirs to name, so the kernel's rules
// for that user decide what may be written there, and what is made is
// theirs.
func Write(dir string, r *Report) (txt, htm string, err error) {
	err = asuser.Do(func() error {
		txt, htm, err = write(dir, r)
		return err
	})
	return txt, htm, err
}

// Prepare makes dir (as Write does: under sudo as the user who ran sudo)
// and checks that a file can be made in it, before anything is traced: a
// directory that takes no report would otherwise lose every report of the
// run, each with a line on stderr after the program's end.
func Prepare(dir string) error {
	err := asuser.Do(func() error {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		f, err := os.CreateTemp(dir, ".memtrace-probe-*")
		if err != nil {
			return err
		}
		f.Close()
		return os.Remove(f.Name())
	})
	if err != nil {
		return fmt.Errorf("--report-dir %s: %w; give a directory you can write (under sudo: the user who ran sudo)", dir, unwrapPath(err))
	}
	return nil
}

// unwrapPath is a path error's cause: the caller names the directory, and
// the probe file's name means nothing to the user.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func write(dir string, r *Report) (string, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("create report directory %s: %w", dir, err)
	}
	txt := filepath.Join(dir, r.Name()+".txt")
	htm := filepath.Join(dir, r.Name()+".html")
	if err := writeFile(txt, true, func(w io.Writer) { writeText(w, r) }); err != nil {
		return "", "", err
	}
	if err := writeFile(htm, true, func(w io.Writer) { writeHTML(w, r) }); err != nil {
		return "", "", err
	}
	return txt, htm, nil
}

// writeFile writes an output whole, or removes what it wrote
// (asuser.WriteOutput); excl for a name memtrace chose.
func writeFile(path string, excl bool, fn func(io.Writer)) error {
	err := asuser.WriteOutput(path, excl, func(f io.Writer) error {
		w := bufio.NewWriter(f)
		fn(w)
		return w.Flush()
	})
	if err != nil {
		return fmt.Errorf("write report %s: %w", path, unwrapPath(err))
	}
	return nil
}

func writeText(w io.Writer, r *Report) {
	fmt.Fprintf(w, "process: %s\npid: %d\ncmd: %s\nend: %s\n", r.Process, r.PID, r.Cmd, r.End.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "alloc_calls: %d\nalloc_bytes: %d\ncurrent_bytes: %d\npeak_bytes: %d\npeak_us: %d\nleak_blocks: %d\nopen_fds: %d\nsuppressed_blocks: %d\nsuppressed_bytes: %d\n",
		r.AllocCalls, r.AllocBytes, r.Current, r.Peak, r.PeakUS, r.LeakBlocks, len(r.OpenFDs), r.SuppressedBlocks, r.SuppressedBytes)
	fmt.Fprintf(w, "\nPeak snapshot (%s at %.6fs), top %d call stacks live then:\n", units.Bytes(r.Peak), float64(r.PeakUS)/1e6, len(r.PeakTop))
	for i, e := range r.PeakTop {
		fmt.Fprintf(w, "  %2d. %s in %d blocks\n      %s\n", i+1, units.Bytes(e.Bytes), e.Blocks, e.Stack)
	}
	fmt.Fprintf(w, "\nLeaked allocations (live at exit): %s in %d blocks\n", units.Bytes(r.Current), r.LeakBlocks)
	if r.SuppressedBlocks > 0 {
		fmt.Fprintf(w, "  (%s, left out above: system libraries' own)\n", figures.SuppressedLine(int64(r.SuppressedBlocks), r.SuppressedBytes))
	}
	for i, e := range r.Leaks {
		fmt.Fprintf(w, "  %2d. %s in %d blocks\n      %s\n", i+1, units.Bytes(e.Bytes), e.Blocks, e.Stack)
	}
	fmt.Fprintf(w, "\nLeaked file descriptors (open at exit): %d\n", len(r.OpenFDs))
	for _, f := range r.OpenFDs {
		fmt.Fprintf(w, "  fd %d %s (%s) %s\n", f.FD, f.Kind, f.Call, f.Path)
		if f.Stack != "" {
			// Under the descriptor, as an allocation's stack is
			// under its line.
			fmt.Fprintf(w, "      %s\n", f.Stack)
		}
	}
}

func writeHTML(w io.Writer, r *Report) {
	e := html.EscapeString
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>memtrace: %s %d</title>\n%s\n", e(r.Process), r.PID, style)
	fmt.Fprintf(w, "<h1>%s (pid %d)</h1><p><code>%s</code></p>\n", e(r.Process), r.PID, e(r.Cmd))
	fmt.Fprintf(w, "<table><tr><th>allocation calls</th><td>%d</td></tr><tr><th>bytes allocated</th><td>%s</td></tr>"+
		"<tr><th>peak</th><td>%s at %.6f s</td></tr><tr><th>leaked</th><td>%s in %d blocks</td></tr><tr><th>open fds at exit</th><td>%d</td></tr></table>\n",
		r.AllocCalls, units.Bytes(r.AllocBytes), units.Bytes(r.Peak), float64(r.PeakUS)/1e6, units.Bytes(r.Current), r.LeakBlocks, len(r.OpenFDs))
	table := func(title string, es []Entry) {
		fmt.Fprintf(w, "<h2>%s</h2><table><tr><th>#</th><th>bytes</th><th>blocks</th><th>call stack</th></tr>\n", title)
		for i, x := range es {
			fmt.Fprintf(w, "<tr><td>%d</td><td>%s</td><td>%d</td><td><code>%s</code></td></tr>\n", i+1, units.Bytes(x.Bytes), x.Blocks, e(x.Stack))
		}
		fmt.Fprint(w, "</table>\n")
	}
	table("Live at the peak", r.PeakTop)
	table("Leaked (live at exit)", r.Leaks)
	fmt.Fprint(w, "<h2>Open file descriptors at exit</h2><table><tr><th>fd</th><th>kind</th><th>call</th><th>path</th><th>call stack</th></tr>\n")
	for _, f := range r.OpenFDs {
		fmt.Fprintf(w, "<tr><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td><code>%s</code></td></tr>\n", f.FD, e(f.Kind), e(f.Call), e(f.Path), e(f.Stack))
	}
	fmt.Fprint(w, "</table>\n")
}

const style = `<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}code{font-size:90%}</style>`

// Summary is one report read back.
type Summary struct {
	File                                          string
	Process                                       string
	PID                                           uint32
	AllocCalls, AllocBytes, Current, Peak, Blocks uint64
	OpenFDs                                       uint64
}

// ErrNoReports means a directory holds no report to aggregate.
var ErrNoReports = errors.New("no memtrace process reports")

// Read parses the key: value head of a report file, opened as the user
// behind sudo, if any.
func Read(path string) (Summary, error) {
	f, err := asuser.Open(path)
	if err != nil {
		return Summary{}, err
	}
	defer f.Close()
	s := Summary{File: filepath.Base(path)}
	sc := bufio.NewScanner(f)
	seen := 0
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			break
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		switch k {
		case "process":
			s.Process = v
		case "pid":
			s.PID = uint32(n)
		case "alloc_calls":
			s.AllocCalls = n
		case "alloc_bytes":
			s.AllocBytes = n
		case "current_bytes":
			s.Current = n
		case "peak_bytes":
			s.Peak = n
		case "leak_blocks":
			s.Blocks = n
		case "open_fds":
			s.OpenFDs = n
		default:
			continue
		}
		seen++
	}
	if seen < 8 || s.Process == "" {
		return s, fmt.Errorf("%s is not a memtrace process report", path)
	}
	return s, nil
}

// Aggregate merges every report in dir into dir/<prefix>.txt and .html
// (mem_monitor's aggregator) and returns the summaries it read. Files that
// are not reports, or may not be read, are skipped and named in skipped
// (the latter with " (permission denied)"). Under sudo all of it,
// listing the directory included, is done as the user who ran sudo.
func Aggregate(dir, prefix string) (sums []Summary, skipped []string, err error) {
	err = asuser.Do(func() error {
		sums, skipped, err = aggregate(dir, prefix)
		return err
	})
	return sums, skipped, err
}

func aggregate(dir, prefix string) (sums []Summary, skipped []string, err error) {
	// Not filepath.Glob: it takes a directory it cannot read for an
	// empty one, and the user would be told there are no reports.
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read report directory %s: %w", dir, unwrapPath(err))
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".txt") || name == prefix+".txt" {
			continue
		}
		s, err := Read(filepath.Join(dir, name))
		if err != nil {
			// A report it may not read is named with the cause: it
			// is not "not a report".
			if errors.Is(err, fs.ErrPermission) {
				name += " (permission denied)"
			}
			skipped = append(skipped, name)
			continue
		}
		sums = append(sums, s)
	}
	if len(sums) == 0 {
		return nil, skipped, fmt.Errorf("%s: %w: run memtrace with --report-dir %s first", dir, ErrNoReports, dir)
	}
	sort.Slice(sums, func(i, j int) bool { return sums[i].Peak > sums[j].Peak })
	var tot Summary
	for _, s := range sums {
		tot.AllocCalls += s.AllocCalls
		tot.AllocBytes += s.AllocBytes
		tot.Current += s.Current
		tot.Peak += s.Peak
		tot.Blocks += s.Blocks
		tot.OpenFDs += s.OpenFDs
	}
	err = writeFile(filepath.Join(dir, prefix+".txt"), false, func(w io.Writer) {
		fmt.Fprintf(w, "%d processes: %d allocation calls, %s allocated, peaks add up to %s, %s leaked in %d blocks, %d fds left open\n\n",
			len(sums), tot.AllocCalls, units.Bytes(tot.AllocBytes), units.Bytes(tot.Peak), units.Bytes(tot.Current), tot.Blocks, tot.OpenFDs)
		fmt.Fprintf(w, "%-24s %8s %12s %12s %12s %8s  %s\n", "process", "pid", "calls", "peak", "leaked", "fds", "report")
		for _, s := range sums {
			fmt.Fprintf(w, "%-24s %8d %12d %12s %12s %8d  %s\n", s.Process, s.PID, s.AllocCalls, units.Bytes(s.Peak), units.Bytes(s.Current), s.OpenFDs, s.File)
		}
	})
	if err != nil {
		return sums, skipped, err
	}
	err = writeFile(filepath.Join(dir, prefix+".html"), false, func(w io.Writer) {
		fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>memtrace summary</title>\n%s\n<h1>%d processes</h1>\n", style, len(sums))
		fmt.Fprintf(w, "<p>%d allocation calls, %s allocated, peaks add up to %s, %s leaked in %d blocks, %d fds left open</p>\n",
			tot.AllocCalls, units.Bytes(tot.AllocBytes), units.Bytes(tot.Peak), units.Bytes(tot.Current), tot.Blocks, tot.OpenFDs)
		fmt.Fprint(w, "<table><tr><th>process</th><th>pid</th><th>calls</th><th>peak</th><th>leaked</th><th>fds</th><th>report</th></tr>\n")
		for _, s := range sums {
			link := strings.TrimSuffix(s.File, ".txt") + ".html"
			fmt.Fprintf(w, "<tr><td>%s</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%d</td><td><a href=\"%s\">%s</a></td></tr>\n",
				html.EscapeString(s.Process), s.PID, s.AllocCalls, units.Bytes(s.Peak), units.Bytes(s.Current), s.OpenFDs, html.EscapeString(link), html.EscapeString(link))
		}
		fmt.Fprint(w, "</table>\n")
	})
	return sums, skipped, err
}
