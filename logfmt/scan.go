package logfmt

import (
	"bytes"
	"errors"
	"io"
)

// Meta words memtrace writes after "[memtrace] ". Readers ignore words they
// do not know.
const (
	WordHeader  = "header"  // Header: version= pid= [pids=] comm= cmd= start= mode= ...
	WordLost    = "lost"    // Lost: count= (records lost since the last lost line) total= ts=
	WordThread  = "thread"  // Thread: tid= pid= name= : a thread seen for the first time or renamed
	WordProc    = "proc"    // Proc: event=fork|exec|exit|attach|untraced pid= [ppid=] ts= ...
	WordSummary = "summary" // Summary: events= allocs= frees= lost= duration_us= at the end of a session
	WordStack   = "stack"   // Stack: truncated=1 after the frames of a stack cut short
	WordFD      = "fd"      // FDRecord: fd events
	WordNotice  = "notice"  // msg= : a notice for the user
)

// MaxLine is the longest line a Scanner returns; longer lines are skipped
// and counted, so a corrupt log cannot make a reader hold it all.
const MaxLine = 1 << 20

// Scanner splits a stream into lines without copying them. Unlike
// bufio.Scanner it can be resumed after io.EOF, which follow mode needs: the
// unterminated tail of a growing file is kept until its newline arrives.
type Scanner struct {
	r        io.Reader
	buf      []byte
	start    int
	end      int
	line     []byte
	err      error
	skipping bool

	// Final makes Scan return an unterminated last line at EOF instead of
	// waiting for the rest of it.
	Final bool
	// Overlong counts lines longer than MaxLine that were skipped.
	Overlong int
	// Bytes counts bytes consumed, for progress indicators.
	Bytes int64
}

// NewScanner returns a Scanner over r.
func NewScanner(r io.Reader) *Scanner {
	return &Scanner{r: r, buf: make([]byte, 256<<10), Final: true}
}

// Scan advances to the next line. It returns false at EOF or on a read
// error (see Err); after EOF it may be called again when more input exists.
func (s *Scanner) Scan() bool {
	for {
		if i := bytes.IndexByte(s.buf[s.start:s.end], '\n'); i >= 0 {
			line := s.buf[s.start : s.start+i]
			s.start += i + 1
			s.Bytes += int64(i + 1)
			if s.skipping {
				s.skipping = false
				continue
			}
			s.line = line
			return true
		}
		if done, ok := s.more(); done {
			return ok
		}
	}
}

// ScanLines is Scan by the buffer: it advances to the next run of whole
// lines, every complete line the buffer holds, each with its newline (at
// EOF with Final, an unterminated last line comes alone and without one).
// A reader that splits the run into lines elsewhere (analysis does, on
// its parsing goroutines) then pays the reading goroutine one search per
// buffer instead of one per line. Lines longer than MaxLine are skipped
// and counted as Scan skips them, and calls to Scan and ScanLines may be
// mixed. The run is valid until the next call to either.
func (s *Scanner) ScanLines() bool {
	for {
		if s.skipping {
			if i := bytes.IndexByte(s.buf[s.start:s.end], '\n'); i >= 0 {
				s.start += i + 1
				s.Bytes += int64(i + 1)
				s.skipping = false
				continue
			}
		} else if i := bytes.LastIndexByte(s.buf[s.start:s.end], '\n'); i >= 0 {
			s.line = s.buf[s.start : s.start+i+1]
			s.start += i + 1
			s.Bytes += int64(i + 1)
			return true
		}
		if done, ok := s.more(); done {
			return ok
		}
	}
}

// more reads more input after the buffer was found to hold no (more)
// line. done says that the scan ends here, returning ok: at EOF (with
// Final, the unterminated last line as the current line) or a read error.
func (s *Scanner) more() (done, ok bool) {
	if s.err != nil {
		err := s.err
		if errors.Is(err, io.EOF) {
			s.err = nil
			if s.Final && s.end > s.start {
				s.line = s.buf[s.start:s.end]
				s.Bytes += int64(s.end - s.start)
				s.start = s.end
				if s.skipping {
					s.skipping = false
					return true, false
				}
				return true, true
			}
		}
		return true, false
	}
	// Make room: move the partial line to the front, grow up to
	// MaxLine, and past that drop it and skip to its end.
	if s.start > 0 {
		copy(s.buf, s.buf[s.start:s.end])
		s.end -= s.start
		s.start = 0
	}
	if s.end == len(s.buf) {
		if len(s.buf) < MaxLine {
			nb := make([]byte, 2*len(s.buf))
			copy(nb, s.buf[:s.end])
			s.buf = nb
		} else {
			if !s.skipping {
				s.Overlong++
			}
			s.skipping = true
			s.Bytes += int64(s.end)
			s.end = 0
		}
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.end += n
	if err != nil {
		s.err = err
	} else if n == 0 {
		s.err = io.ErrNoProgress
	}
	return false, false
}

// Line returns the current line, without its newline. It is valid until the
// next call to Scan.
func (s *Scanner) Line() []byte { return s.line }

// Err returns the first read error other than io.EOF.
func (s *Scanner) Err() error {
	if s.err == nil || errors.Is(s.err, io.EOF) {
		return nil
	}
	return s.err
}
