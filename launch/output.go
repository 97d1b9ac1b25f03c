package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/internal/viewconn"
)

// openOutput opens the log sink. For TCP it waits for the first client,
// which is what makes a viewer see a program from its first allocation.
//
// In launch mode the sink's first write error ends the log, not the run:
// the program is traced on to its end (its --report-dir files and the
// --http endpoint go on), memtrace exits with its status, and the error
// is one line at the end (logFailure). Ending the run instead would leave
// the program running without the parent that reports its status.
func openOutput(o *Options, stderr io.Writer) (io.WriteCloser, error) {
	w, err := openSink(o, stderr)
	if err != nil || len(o.Argv) == 0 {
		return w, err
	}
	k := &keepGoing{w: w, start: time.Now()}
	o.logFailed = k
	return k, nil
}

func openSink(o *Options, stderr io.Writer) (io.WriteCloser, error) {
	switch {
	case o.Listen != "":
		return acceptViewer(o.Listen, stderr)
	case o.Output == NoLog:
		return nopCloser{io.Discard}, nil
	case o.Output != "":
		f, err := CreateLog(o.Output)
		if err != nil {
			return nil, err
		}
		// FILE.zst and FILE.gz are compressed; the agent's flushes end
		// the compressed blocks (logio).
		w, err := logio.Create(f, o.Output)
		if err != nil {
			f.Close()
			return nil, err
		}
		if z, ok := w.(*logio.Writer); ok {
			o.compressed = z
		}
		return w, nil
	}
	return nopCloser{os.Stderr}, nil
}

// acceptViewer waits for the first viewer, or for Ctrl-C.
func acceptViewer(addr string, stderr io.Writer) (io.WriteCloser, error) {
	c, err := viewconn.Accept(addr, stderr, interrupted, nil)
	if errors.Is(err, viewconn.ErrInterrupted) {
		return nil, interruptError{}
	}
	return c, err
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
func closing(o *Options, stderr io.Writer, since time.Time) {
	if at, err := o.logFailed.failure(); err != nil {
		hint := "free some space or give another -o"
		if o.Listen != "" {
			hint = "the viewer closed its connection: keep it open to the end"
		}
		fmt.Fprintf(stderr, "memtrace: write log: %v: the log is incomplete, it stops %.1f s into the run (the program was traced to its end and its exit status is memtrace's); %s\n",
			err, at.Seconds(), hint)
		return
	}
	var text int64
	if o.compressed != nil {
		text = o.compressed.TextBytes()
	}
	Closing(stderr, o.Output, o.Listen != "", since, text)
}
