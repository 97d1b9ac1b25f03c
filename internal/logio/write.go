package logio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/memtrace/memtrace/internal/stackz"
)

// Kind is a log's on-disk form.
type Kind uint8

const (
	Plain Kind = iota // memtrack's text, as is
	Zstd
	Gzip
)

func (k Kind) String() string {
	switch k {
	case Zstd:
		return "zstd"
	case Gzip:
		return "gzip"
	}
	return "plain"
}

// KindOf is the form a log written to path takes: zstd for .zst (and
// .zstd), gzip for .gz, as zstd(1) and gzip(1) name their files. Any other
// name (no suffix, .log, /dev/stdout) stays plain text, memtrack's habit.
func KindOf(path string) Kind {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".zst", ".zstd":
		return Zstd
	case ".gz":
		return Gzip
	}
	return Plain
}

// ZstdWindow is the writer's zstd window, and so what a reader of
// memtrace's own files needs. Its encoder (internal/stackz) is told where
// the stacks' texts repeat and searches only the event lines between them,
// whose best matches are the log's loop a period back: a larger window
// finds nothing more there (docs/measurements.md, "Compressed logs").
const ZstdWindow = 1 << 20

// klauspost's gzip at level 1 is faster than the standard library's and
// smaller.
const gzipLevel = gzip.BestSpeed

type compressor interface {
	io.Writer
	Flush() error
	Close() error
}

// FlushInterval is how soon Create's writer ends a block after a Write:
// the agent's own flush interval. Writes that come closer together (a
// full buffer between two flushes, the LD_PRELOAD converter's idle
// writes, memview's saved stream) share a block, as the ratio needs:
// blocks of 4 KiB make a stack-heavy log 2.4x bigger than blocks of 64 KiB.
const FlushInterval = 100 * time.Millisecond

// Writer compresses a log into an underlying writer. What a Write gave it
// can be decoded from the underlying writer within its interval: a block
// is ended at once when the last one ended at least an interval ago, and
// by a timer otherwise. It is safe for one writer goroutine (the timer's
// flush is serialised with it).
type Writer struct {
	mu  sync.Mutex
	enc compressor
	// out gathers the compressor's output between block ends: the
	// compressor writes each block as it is done, and a stack-heavy
	// log's blocks are small, so that was a write(2) for very little.
	out      *bufio.Writer
	under    io.Closer // closed after the compressor; nil when not ours
	closed   bool
	interval time.Duration
	lastEnd  time.Time
	pending  bool        // written since the last block end
	timer    *time.Timer // ends the pending block
	err      error       // of a timer's flush, for the next call
	ends     int         // blocks ended (tests)
	in       int64       // bytes given to Write: the log's text size
	whole    []byte      // a sparse write's text, for gzip (WriteSparse)
}

// TextBytes is how many bytes of text the writer was given: the size of
// the log once decompressed.
func (z *Writer) TextBytes() int64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.in
}

// NewWriter compresses into w in the form k (not Plain), ending a block
// within interval of each Write (0: at every Write).
func NewWriter(w io.Writer, k Kind, interval time.Duration) (*Writer, error) {
	var enc compressor
	var err error
	out := bufio.NewWriterSize(w, outBuffer)
	switch k {
	case Zstd:
		// Concurrency 1: compress on the caller's goroutine, with no
		// goroutines of its own competing with the traced program.
		// The frame checksum stays, though hashing the text costs
		// the writer CPU: it is how a reader tells a bit flipped in
		// a literal from the log's text (docs/report.md, damage).
		enc, err = stackz.NewEncoder(out, ZstdWindow)
	case Gzip:
		enc, err = gzip.NewWriterLevel(out, gzipLevel)
	default:
		return nil, fmt.Errorf("logio: no compressor for a %s log", k)
	}
	if err != nil {
		return nil, fmt.Errorf("start the %s compressor: %w", k, err)
	}
	return &Writer{enc: enc, out: out, interval: interval}, nil
}

// outBuffer holds the compressed blocks between block ends.
const outBuffer = 64 << 10

// Create wraps w, a log file created for path, in the compressor path's
// suffix names (KindOf), ending blocks within FlushInterval; a plain path
// gets w itself. Closing the result ends the compressed stream and closes
// w.
func Create(w io.WriteCloser, path string) (io.WriteCloser, error) {
	k := KindOf(path)
	if k == Plain {
		return w, nil
	}
	zw, err := NewWriter(w, k, FlushInterval)
	if err != nil {
		return nil, err
	}
	zw.under = w
	return zw, nil
}

// Write compresses p. Errors are the underlying writer's (also those of a
// timed block end since the last call).
func (z *Writer) Write(p []byte) (int, error) { return z.write(p, nil) }

// WriteMarked compresses p, whose marks say where stacks' texts are: the
// zstd encoder takes each as a match to its last copy without a search
// (gzip takes p as text).
func (z *Writer) WriteMarked(p []byte, marks []stackz.Mark) error {
	_, err := z.write(p, marks)
	return err
}

// WriteSparse compresses p with the stacks' texts its marks put in it
// (stackz.SparseWriter): the zstd encoder copies each text into its
// history itself; gzip is given the whole text.
func (z *Writer) WriteSparse(p []byte, marks []stackz.Mark) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if err := z.usable(); err != nil {
		return err
	}
	var err error
	if sw, ok := z.enc.(stackz.SparseWriter); ok {
		err = sw.WriteSparse(p, marks)
	} else {
		z.whole, err = stackz.Expand(z.whole[:0], p, marks)
		if err == nil {
			_, err = z.enc.Write(z.whole)
		}
	}
	if errors.Is(err, stackz.ErrSparseMarks) {
		// The caller's mistake: nothing was written.
		return err
	}
	for _, m := range marks {
		z.in += int64(len(m.Text))
	}
	z.in += int64(len(p))
	if err != nil {
		z.err = err
		return err
	}
	return z.pendingEnd()
}

// TakesSparse: a zstd log's encoder takes the texts apart; gzip's would
// be given the whole text.
func (z *Writer) TakesSparse() bool {
	sw, ok := z.enc.(stackz.SparseWriter)
	return ok && sw.TakesSparse()
}

// Concurrent lets the compressor use a goroutine of its own from now on
// (stackz.ConcurrentWriter), where it can.
func (z *Writer) Concurrent() {
	z.mu.Lock()
	defer z.mu.Unlock()
	if cw, ok := z.enc.(stackz.ConcurrentWriter); ok && !z.closed {
		cw.Concurrent()
	}
}

// usable is the error a write gets before it starts, if any.
func (z *Writer) usable() error {
	if z.closed {
		return errClosed
	}
	return z.err
}

func (z *Writer) write(p []byte, marks []stackz.Mark) (int, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if err := z.usable(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := len(p), error(nil)
	if mw, ok := z.enc.(stackz.MarkedWriter); ok && len(marks) > 0 {
		err = mw.WriteMarked(p, marks)
	} else {
		n, err = z.enc.Write(p)
	}
	z.in += int64(n)
	if err != nil {
		z.err = err
		return n, err
	}
	return n, z.pendingEnd()
}

// pendingEnd ends the block now when the last one ended an interval ago,
// and sets the timer otherwise.
func (z *Writer) pendingEnd() error {
	z.pending = true
	now := time.Now()
	if wait := z.interval - now.Sub(z.lastEnd); wait > 0 {
		if z.timer == nil {
			z.timer = time.AfterFunc(wait, z.timedEnd)
		}
		return nil
	}
	return z.endBlock(now)
}

func (z *Writer) endBlock(now time.Time) error {
	if z.timer != nil {
		z.timer.Stop()
		z.timer = nil
	}
	z.pending, z.lastEnd = false, now
	z.ends++
	if err := z.enc.Flush(); err != nil {
		z.err = err
		return err
	}
	if err := z.out.Flush(); err != nil {
		z.err = err
		return err
	}
	return nil
}

func (z *Writer) timedEnd() {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.timer = nil
	if z.closed || !z.pending || z.err != nil {
		return
	}
	// A timer that fired while a Write was ending the block (too late
	// to be stopped) waits its turn here: a block ended less than an
	// interval ago is not ended again, the wait starts over.
	now := time.Now()
	if wait := z.interval - now.Sub(z.lastEnd); wait > 0 {
		z.timer = time.AfterFunc(wait, z.timedEnd)
		return
	}
	_ = z.endBlock(now)
}

// Flush ends the block now.
func (z *Writer) Flush() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.closed {
		return errClosed
	}
	if z.err != nil {
		return z.err
	}
	return z.endBlock(time.Now())
}

// Close ends the compressed stream (a zstd frame's last block and
// checksum, a gzip trailer) and closes the underlying writer if Create
// made z.
func (z *Writer) Close() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.closed {
		return errClosed
	}
	z.closed = true
	if z.timer != nil {
		z.timer.Stop()
		z.timer = nil
	}
	err := z.err
	if cerr := z.enc.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = z.out.Flush()
	}
	if z.under != nil {
		if cerr := z.under.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
