package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memtrace/memtrace/analysis"
	"github.com/memtrace/memtrace/internal/asuser"
	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/symbols"
)

// loaded is one log read into the model.
type loaded struct {
	path  string // as given ("-" for stdin)
	name  string // for display
	m     *analysis.Model
	costs *analysis.Costs
	sites *modelSites // its stacks' sites
	// truncated: a compressed log whose stream was cut short.
	truncated bool
	// stop is why the log's reading stopped before its end (a cut or
	// damaged compressed stream, a read error): the model holds what came
	// before, the report shows it and exits 1.
	stop error
}

// loadLog reads one log to its end. A truncated or garbled log is not an
// error (the model counts what it skipped); a file that cannot be opened or
// read is. progress, when not nil, receives the bytes read so far and the
// size when known.
func loadLog(path string, progress func(read, size int64)) (*loaded, error) {
	var r io.Reader
	var size int64
	var firstLine func()
	name := path
	if path == "-" {
		r, name = os.Stdin, "stdin"
	} else {
		f, err := logio.OpenPath(path, asuser.OpenFile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("open the log: %w", err)
		}
		if st.Mode().IsRegular() {
			size = st.Size()
		}
		firstLine = logio.AwaitFirstLine(f, st)
		r = f
	}
	// A compressed log (memtrace -o run.log.zst, or gzip run.log) is read
	// as is, decompressed as it streams.
	lr, err := logio.Open(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, logio.NoLogLine(err, 0))
	}
	defer lr.Close()
	kind, _ := lr.Kind()
	if f, ok := r.(*os.File); ok && kind == logio.Plain && size > 0 {
		// Keep the *os.File, so that the loader sees its size and reads
		// without a copy: seek back over the bytes the sniffing read.
		if _, err := f.Seek(0, io.SeekStart); err == nil {
			r = f
		} else {
			r = lr
		}
	} else {
		r = lr
	}
	if kind != logio.Plain {
		// The size on disk says little of what it holds.
		size = 0
	}
	m := analysis.New()
	m.Demangle = symbols.Demangle
	opts := analysis.StreamOptions{SizeHint: size, FirstLine: firstLine}
	done := make(chan struct{})
	var wg sync.WaitGroup
	if progress != nil {
		var n atomic.Int64
		opts.Progress = &n
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					progress(n.Load(), size)
				}
			}
		}()
	}
	err = m.Stream(r, opts)
	close(done)
	wg.Wait()
	l := &loaded{path: path, name: displayName(name), m: m}
	if err != nil && (errors.Is(err, analysis.ErrNotLog) || !m.Counts.HasLogLine()) {
		// Not a log, or nothing of one came before the reading stopped
		// (a FIFO that sent no log line in time): one line, no report.
		return nil, fmt.Errorf("read %s: %w", path, logio.NoLogLine(err, m.Counts.Lines))
	}
	if !m.Counts.HasLogLine() {
		// An input read to its end without a log line (a source file, an
		// empty one, a FIFO that ended): memview refuses it in the same
		// words.
		return nil, analysis.NotLog(displayName(name), m.Counts)
	}
	if errors.Is(err, logio.ErrTruncated) {
		// A cut compressed stream (a killed memtrace -o FILE.zst) ends
		// the log like a truncated file, and the report says so.
		l.truncated = true
	}
	if err != nil {
		l.stop = err
	}
	l.costs = m.ReportCosts()
	return l, nil
}

func displayName(path string) string {
	if path == "stdin" {
		return path
	}
	return filepath.Base(path)
}

// progressLine returns a progress callback that rewrites one line on w.
func progressLine(w io.Writer, name string) (func(read, size int64), func()) {
	shown := false
	update := func(read, size int64) {
		s := "\rmemtrace report: reading " + name + ": " + strconv.FormatInt(read>>20, 10) + " MB"
		if size > 0 {
			s += " of " + strconv.FormatInt(size>>20, 10) + " MB (" + strconv.FormatInt(min(read*100/size, 100), 10) + "%)"
		}
		io.WriteString(w, s+"\x1b[K")
		shown = true
	}
	clear := func() {
		if shown {
			io.WriteString(w, "\r\x1b[K")
		}
	}
	return update, clear
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
