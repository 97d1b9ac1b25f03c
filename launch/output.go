package launch

import (
	"errors"
	"io"
	"os"

	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/internal/viewconn"
)

// openOutput opens the log sink. For TCP it waits for the first client,
// which is what makes a viewer see a program from its first allocation.
func openOutput(o *Options, stderr io.Writer) (io.WriteCloser, error) {
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
