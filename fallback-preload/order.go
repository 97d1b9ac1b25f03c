package preload

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/memtrace/memtrace/internal/logio"
	"github.com/memtrace/memtrace/logfmt"
)

// sortLimit bounds the log size SortFile sorts in memory; bigger logs are
// left in per-thread order (readers order by ts, docs/spec.md §2.3).
const sortLimit = 2 << 30

// SortFile rewrites a log written by the library in global time order. The
// library buffers per thread, so a thread's records come in chunks; each
// record (an event with its frame lines) keeps its frames, records with the
// same ts keep their file order, and meta lines without ts= stay after the
// record they followed. Lines that are not log lines are kept in place the
// same way. The rewrite goes through a temporary file and a rename, so the
// log is never half written.
func SortFile(path string) error {
	// Read through one descriptor and copy its owner and mode from it:
	// under sudo the directory is the user's, and a name swapped for a
	// symlink between two steps must not make root copy or chmod a
	// file the user may not read.
	// A log reached through a symbolic link is left as it is (readers
	// order by ts): root would read what the link points at, which
	// the link's owner chose, and the rename would replace the link.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sort the log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("sort the log: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() > sortLimit {
		return nil
	}
	// A compressed log (-o FILE.zst) is sorted decompressed and written
	// back in its form.
	lr, err := logio.Open(f)
	if err != nil {
		return fmt.Errorf("sort the log: %w", err)
	}
	defer lr.Close()
	kind, _ := lr.Kind()
	data, err := io.ReadAll(io.LimitReader(lr, sortLimit+1))
	if err != nil {
		return fmt.Errorf("sort the log: %w", err)
	}
	if int64(len(data)) > sortLimit {
		return nil
	}
	out, sorted := SortLog(data)
	if sorted {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".memtrace-sort-*")
	if err != nil {
		return fmt.Errorf("sort the log (it stays in per-thread order): %w", err)
	}
	var werr error
	if kind == logio.Plain {
		_, werr = tmp.Write(out)
	} else {
		var zw *logio.Writer
		if zw, werr = logio.NewWriter(tmp, kind, 0); werr == nil {
			if _, werr = zw.Write(out); werr == nil {
				werr = zw.Close()
			}
		}
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && werr == nil && os.Geteuid() == 0 && (int(sys.Uid) != os.Geteuid() || int(sys.Gid) != os.Getegid()) {
		// root sorting the log of the user behind sudo: the file
		// that replaces it stays theirs.
		werr = tmp.Chown(int(sys.Uid), int(sys.Gid))
	}
	if werr == nil {
		werr = tmp.Chmod(st.Mode().Perm())
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("sort the log (it stays in per-thread order): %w", werr)
	}
	return nil
}

type record struct {
	ts         uint64
	start, end int
}

// SortLog returns data in time order and whether it already was.
func SortLog(data []byte) ([]byte, bool) {
	var recs []record
	var l logfmt.Line
	var ts uint64
	pos := 0
	inOrder := true
	for pos < len(data) {
		end := bytes.IndexByte(data[pos:], '\n')
		next := len(data)
		if end >= 0 {
			next = pos + end + 1
		}
		line := data[pos:next]
		err := l.Parse(bytes.TrimSuffix(line, []byte("\n")))
		switch {
		case err == nil && (l.Kind == logfmt.KindAlloc || l.Kind == logfmt.KindFree || l.Kind == logfmt.KindExit):
			ts = l.TS
			if len(recs) > 0 && ts < recs[len(recs)-1].ts {
				inOrder = false
			}
			recs = append(recs, record{ts, pos, next})
		case err == nil && l.Kind == logfmt.KindMeta:
			if n, ok := logfmt.MetaTS(l.Rest); ok {
				ts = n
				if len(recs) > 0 && ts < recs[len(recs)-1].ts {
					inOrder = false
				}
			}
			recs = append(recs, record{ts, pos, next})
		case len(recs) == 0:
			recs = append(recs, record{ts, pos, next})
		default:
			// Frames (and anything unreadable) stay with the record
			// before them.
			recs[len(recs)-1].end = next
		}
		pos = next
	}
	if inOrder {
		return data, true
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].ts < recs[j].ts })
	out := make([]byte, 0, len(data))
	for _, r := range recs {
		out = append(out, data[r.start:r.end]...)
	}
	return out, false
}
