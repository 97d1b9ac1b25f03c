package analysis

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/memtrace/memtrace/logfmt"
)

// HasLogLine reports whether any line was read as a log line: an event, a
// frame, an EXIT or a [memtrace] line. Lines that start like log lines but
// cannot be read do not count: a file of them is no more a log than random
// bytes are.
func (c Counts) HasLogLine() bool { return c.Events+c.Frames+c.Meta+c.Exits > 0 }

// EmptyLogHint is the one line that explains a log that gave no
// allocation: name is empty, has no allocation or free line at all (not a
// memtrace or memtrack log, most likely), or only frees. memview and the
// report say it in the same words.
func EmptyLogHint(name string, lines, events int64) string {
	switch {
	case lines == 0:
		return name + " is empty: no allocation to report"
	case events == 0:
		return fmt.Sprintf("no allocation in %s: %d lines read, none of them an allocation or free (is it a memtrace or memtrack log?)", name, lines)
	}
	return fmt.Sprintf("no allocation in %s: %d lines read, %d frees", name, lines, events)
}

// Sniff reads r until its first log line, or to its end when it has none,
// and counts the lines read. memview checks a file with it before it opens
// the screen: a file without a single log line gets one line and an exit
// status, not an empty viewer. It only parses; it builds no model. An
// input with no log line in its first MaxPrelude bytes is not read on:
// ErrNotLog.
func Sniff(r io.Reader) (Counts, error) {
	var c Counts
	sc := logfmt.NewScanner(&preludeGuard{r: r})
	var l logfmt.Line
	for sc.Scan() {
		c.Lines++
		if sc.Bytes > MaxPrelude {
			return c, ErrNotLog
		}
		err := l.Parse(sc.Line())
		switch {
		case err != nil:
			c.Malformed++
			continue
		case l.Kind == logfmt.KindOther:
			c.Other++
			continue
		case l.Kind == logfmt.KindAlloc || l.Kind == logfmt.KindFree:
			c.Events++
		case l.Kind == logfmt.KindFrame:
			c.Frames++
		case l.Kind == logfmt.KindExit:
			c.Exits++
		default:
			c.Meta++
		}
		return c, nil
	}
	c.Overlong = int64(sc.Overlong)
	if err := sc.Err(); errors.Is(err, ErrNotLog) {
		return c, err
	} else if err != nil {
		return c, fmt.Errorf("read the log: %w", err)
	}
	return c, nil
}

// Prelude reads r up to its first line that starts as a log line does,
// and returns every byte it read (its caller reads them again, then the
// rest of r): a viewer checks that an input which is not a file is a log
// before it opens the screen. An input with no such line in its first
// MaxPrelude bytes is refused with ErrNotLog; one that ends without it
// returns what it sent, found false.
func Prelude(r io.Reader) (read []byte, found bool, err error) {
	var buf bytes.Buffer
	g := &preludeGuard{r: io.TeeReader(r, &buf)}
	sc := logfmt.NewScanner(g)
	for sc.Scan() {
		if logPrefixed(sc.Line()) {
			return buf.Bytes(), true, nil
		}
		if sc.Bytes > MaxPrelude {
			return nil, false, ErrNotLog
		}
	}
	if err := sc.Err(); errors.Is(err, ErrNotLog) {
		return nil, false, err
	} else if err != nil {
		return buf.Bytes(), false, fmt.Errorf("read the log: %w", err)
	}
	return buf.Bytes(), false, nil
}

// NotLog is the readers' one line for an input that is not a log: what
// memview and the report refuse, in the same words, with exit status 1.
// An input is a log when a log line (HasLogLine: an event, a frame, an
// EXIT or a [memtrace] line) comes within its first MaxPrelude bytes;
// c counts what was read of it. The line names the file and counts its
// lines, and never quotes them: the file may be anything.
func NotLog(name string, c Counts) error {
	if c.Lines == 0 {
		return &notLog{fmt.Sprintf("%s is empty: not a memtrace or memtrack log", name)}
	}
	return &notLog{fmt.Sprintf("%s is not a memtrace or memtrack log: none of its %d lines read is a log line", name, c.Lines)}
}

type notLog struct{ msg string }

func (e *notLog) Error() string        { return e.msg }
func (e *notLog) Is(target error) bool { return target == ErrNotLog }
