package logio

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// FirstLineWait is how long a log that is not a regular file (a FIFO, a
// character device) given by its path may take to send its first log
// line. What a file holds is there at once; a device or FIFO that sends
// nothing like a log in a second is not one, and reading it would wait
// until killed. A log that is still being written is followed with
// memview -f, which waits.
const FirstLineWait = time.Second

// OpenPath opens the log at path for reading with open (os.OpenFile, or
// asuser.OpenFile under sudo). A directory is refused; a FIFO is opened
// without waiting for a writer to open it, so that FirstLineWait bounds
// that wait too.
func OpenPath(path string, open func(string, int, os.FileMode) (*os.File, error)) (*os.File, error) {
	flag := os.O_RDONLY
	if st, err := os.Stat(path); err == nil && st.Mode()&os.ModeNamedPipe != 0 {
		flag |= syscall.O_NONBLOCK
	}
	f, err := open(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("open the log: %w", err)
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("open the log: %s is a directory, give a log file", path)
	}
	return f, nil
}

// AwaitFirstLine gives f, when it is a FIFO or a character device (st is
// its Stat), FirstLineWait to send its first log line: it sets a read
// deadline and returns the function that lifts it, for the reader to
// call when that line came (analysis.StreamOptions.FirstLine). It returns
// nil for other files, and for devices that have no deadlines (/dev/zero:
// those never block).
func AwaitFirstLine(f *os.File, st os.FileInfo) func() {
	if st == nil || st.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) == 0 {
		return nil
	}
	if err := f.SetReadDeadline(time.Now().Add(FirstLineWait)); err != nil {
		return nil
	}
	return func() { f.SetReadDeadline(time.Time{}) }
}

// ErrNoLogLine refuses a FIFO or device that sent no line within
// FirstLineWait.
var ErrNoLogLine = fmt.Errorf("not a log: no memtrace or memtrack line came within %v (memview -f follows a log that is still being written)", FirstLineWait)

// NoLogLine is err in the words of ErrNoLogLine when it is the deadline
// of AwaitFirstLine; lines is how many lines came before it, none a log
// line, which the refusal counts. Other errors pass unchanged. An input
// that ended without a log line is not refused here: it did not make
// anyone wait, and analysis.NotLog says what it held.
func NoLogLine(err error, lines int64) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	if lines == 0 {
		return ErrNoLogLine
	}
	return &noLogLine{lines}
}

type noLogLine struct{ lines int64 }

func (e *noLogLine) Error() string {
	return fmt.Sprintf("not a log: none of the %d lines it sent in its first %v is a memtrace or memtrack line (memview -f follows a log that is still being written)", e.lines, FirstLineWait)
}

func (e *noLogLine) Is(target error) bool { return target == ErrNoLogLine }
