package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/memtrace/memtrace/agent"
	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/internal/stackz"
	"github.com/memtrace/memtrace/internal/viewconn"
)

// output is the log's sink as a run opened it.
type output struct {
	io.WriteCloser
	// failed is the sink of a run that started its program, which
	// remembers its first write error.
	failed *keepGoing
}

// openOutput opens the log sink. For TCP it waits for the first client,
// which is what makes a viewer see a program from its first allocation.
//
// When memtrace started the program (--), the sink's first write error
// ends the log, not the run: the program is traced on to its end (its
// --report-dir files and the --http endpoint go on), memtrace exits with
// its status, and the error is one line at the end (closing). Ending the
// run instead would leave the program running without the parent that
// reports its status.
func openOutput(o *Options, stderr io.Writer) (*output, error) {
	out, err := openSink(o, stderr)
	if err != nil || len(o.Argv) == 0 {
		return out, err
	}
	k := &keepGoing{w: out.WriteCloser, start: time.Now()}
	out.WriteCloser, out.failed = k, k
	return out, nil
}

func openSink(o *Options, stderr io.Writer) (*output, error) {
	switch {
	case o.Listen != "":
		c, err := viewconn.Accept(o.Listen, stderr, interrupted, nil)
		if errors.Is(err, viewconn.ErrInterrupted) {
			return nil, ErrInterrupted
		}
		if err != nil {
			return nil, err
		}
		return &output{WriteCloser: c}, nil
	case o.Output.Kind == OutNone:
		return &output{WriteCloser: nopCloser{io.Discard}}, nil
	case o.Output.Kind == OutStdout:
		// Plain text on memtrace's own stdout (a pipe, most often).
		return &output{WriteCloser: nopCloser{os.Stdout}}, nil
	case o.Output.Kind == OutFile:
		open := o.OpenLog
		if open == nil {
			open = CreateLog
		}
		f, err := open(o.Output.Path)
		if err != nil {
			return nil, err
		}
		if o.DefaultOutput {
			fmt.Fprintf(stderr, "memtrace: writing the log to %s (-o FILE for another name, -o - for stdout)\n", o.Output.Path)
		}
		// FILE.zst and FILE.gz are compressed; the agent's flushes end
		// the compressed blocks (logio).
		w, err := logio.Create(f, o.Output.Path)
		if err != nil {
			f.Close()
			return nil, err
		}
		return &output{WriteCloser: w}, nil
	}
	return &output{WriteCloser: nopCloser{stderr}}, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// keepGoing passes writes on until the first error, then drops them,
// remembering the error and when it came.
type keepGoing struct {
	w     io.WriteCloser
	start time.Time
	mu    sync.Mutex
	err   error
	at    time.Duration
}

func (k *keepGoing) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		if _, err := k.w.Write(p); err != nil {
			k.err, k.at = err, time.Since(k.start)
		}
	}
	return len(p), nil
}

// WriteMarked passes the stacks' marks on to a compressed log's encoder.
func (k *keepGoing) WriteMarked(p []byte, marks []stackz.Mark) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		var err error
		if mw, ok := k.w.(stackz.MarkedWriter); ok {
			err = mw.WriteMarked(p, marks)
		} else {
			_, err = k.w.Write(p)
		}
		if err != nil {
			k.err, k.at = err, time.Since(k.start)
		}
	}
	return nil
}

// WriteMarked passes the stacks' marks on where the output takes them.
func (o *output) WriteMarked(p []byte, marks []stackz.Mark) error {
	if mw, ok := o.WriteCloser.(stackz.MarkedWriter); ok {
		return mw.WriteMarked(p, marks)
	}
	_, err := o.Write(p)
	return err
}

// WriteSparse passes the stacks' texts given apart on to a compressed
// log's encoder, or writes the whole text.
func (k *keepGoing) WriteSparse(p []byte, marks []stackz.Mark) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		if err := writeSparse(k.w, p, marks); err != nil {
			k.err, k.at = err, time.Since(k.start)
		}
	}
	return nil
}

// WriteSparse passes the stacks' texts given apart on where the output
// takes them, and writes the whole text elsewhere.
func (o *output) WriteSparse(p []byte, marks []stackz.Mark) error {
	return writeSparse(o.WriteCloser, p, marks)
}

// TakesSparse: the log's writer takes the texts apart.
func (k *keepGoing) TakesSparse() bool { return takesSparse(k.w) }

// TakesSparse: the log's writer takes the texts apart.
func (o *output) TakesSparse() bool { return takesSparse(o.WriteCloser) }

// Concurrent passes on that the log's writer may use another goroutine.
func (k *keepGoing) Concurrent() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cw, ok := k.w.(stackz.ConcurrentWriter); ok && k.err == nil {
		cw.Concurrent()
	}
}

// Concurrent passes on that the log's writer may use another goroutine.
func (o *output) Concurrent() {
	if cw, ok := o.WriteCloser.(stackz.ConcurrentWriter); ok {
		cw.Concurrent()
	}
}

func takesSparse(w io.Writer) bool {
	sw, ok := w.(stackz.SparseWriter)
	return ok && sw.TakesSparse()
}

func writeSparse(w io.Writer, p []byte, marks []stackz.Mark) error {
	if sw, ok := w.(stackz.SparseWriter); ok {
		return sw.WriteSparse(p, marks)
	}
	whole, err := stackz.Expand(nil, p, marks)
	if err != nil {
		return err
	}
	_, err = w.Write(whole)
	return err
}

func (k *keepGoing) Close() error {
	err := k.w.Close()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil && err != nil {
		k.err, k.at = err, time.Since(k.start)
	}
	return nil
}

// failure is the first write error and when it came, or nil.
func (k *keepGoing) failure() (time.Duration, error) {
	if k == nil {
		return 0, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.at, k.err
}

// closing ends a run that wrote its log: the closing lines, or, where the
// log could not be written, one line that says so instead (the figures
// of an incomplete log would mislead).
func closing(o *Options, out *output, s *agent.Session, stderr io.Writer, since time.Time) {
	if at, err := out.failed.failure(); err != nil {
		hint := "free some space or give another -o"
		if o.Listen != "" {
			hint = "the viewer closed its connection: keep it open to the end"
		}
		fmt.Fprintf(stderr, "memtrace: write log: %v: the log is incomplete, it stops %.1f s into the run (the program was traced to its end and its exit status is memtrace's); %s\n",
			err, at.Seconds(), hint)
		return
	}
	f := s.Figures()
	if !s.InOrder() || f.Lost > 0 {
		// Events written late: the file's reading (sorted by the
		// source, or re-matched) is what the report will say. With
		// lost records too: the report then takes out of the leaks
		// every block a later allocation overlaps (its free was lost),
		// which needs every allocation of the log, not the agent's
		// table of live blocks.
		ClosingFromLog(stderr, o.Output, o.Listen != "", since, &f)
		return
	}
	Closing(stderr, o.Output, o.Listen != "", since, &f)
}
