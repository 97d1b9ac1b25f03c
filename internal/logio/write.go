package logio

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
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

// ZstdWindow is the writer's zstd window. Measured on stack-heavy logs
// (python3 and sqlite3 with --stack-depth 16, 0.9-1.2 GB), 1 MiB compresses
// as well as 4 or 8 MiB (within 1 %) with less CPU, and it is what a reader
// of memtrace's own files then needs; 256 KiB is 22 % bigger.
const ZstdWindow = 1 << 20

// The levels are chosen for the writer's CPU, which the agent spends on the
// CPU next to the traced program's (see README, "Compressed logs"): zstd's
// fastest level was within 4-12 % of its default level's size on those
// logs, smaller on a log without stacks, and took less CPU; klauspost's
// gzip at level 1 is 2.5x faster than the standard library's and smaller.
const (
	zstdLevel = zstd.SpeedFastest
	gzipLevel = gzip.BestSpeed
)

type compressor interface {
	io.Writer
	Flush() error
	Close() error
}

// Writer compresses a log into an underlying writer, ending a block at
// every Write.
type Writer struct {
	enc    compressor
	under  io.Closer // closed after the compressor; nil when not ours
	closed bool
}

// NewWriter compresses into w in the form k (not Plain).
func NewWriter(w io.Writer, k Kind) (*Writer, error) {
	var enc compressor
	var err error
	switch k {
	case Zstd:
		// Concurrency 1: compress on the caller's goroutine, with no
		// goroutines of its own competing with the traced program.
		enc, err = zstd.NewWriter(w, zstd.WithEncoderLevel(zstdLevel), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(ZstdWindow))
	case Gzip:
		enc, err = gzip.NewWriterLevel(w, gzipLevel)
	default:
		return nil, fmt.Errorf("logio: no compressor for a %s log", k)
	}
	if err != nil {
		return nil, fmt.Errorf("start the %s compressor: %w", k, err)
	}
	return &Writer{enc: enc}, nil
}

// Create wraps w, a log file created for path, in the compressor path's
// suffix names (KindOf); a plain path gets w itself. Closing the result
// ends the compressed stream and closes w.
func Create(w io.WriteCloser, path string) (io.WriteCloser, error) {
	k := KindOf(path)
	if k == Plain {
		return w, nil
	}
	zw, err := NewWriter(w, k)
	if err != nil {
		return nil, err
	}
	zw.under = w
	return zw, nil
}

// Write compresses p and ends the block, so that everything written so far
// can be decoded from the underlying writer when Write returns. Errors are
// the underlying writer's.
func (z *Writer) Write(p []byte) (int, error) {
	if z.closed {
		return 0, errClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := z.enc.Write(p)
	if err != nil {
		return n, err
	}
	return n, z.enc.Flush()
}

// Flush is there for callers that flush their writers: every Write has
// already ended its block.
func (z *Writer) Flush() error {
	if z.closed {
		return errClosed
	}
	return z.enc.Flush()
}

// Close ends the compressed stream (a zstd frame's last block and
// checksum, a gzip trailer) and closes the underlying writer if Create
// made z.
func (z *Writer) Close() error {
	if z.closed {
		return errClosed
	}
	z.closed = true
	err := z.enc.Close()
	if z.under != nil {
		if cerr := z.under.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
