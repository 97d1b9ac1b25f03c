package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/asuser"
)

// Settings are the values a config file or the environment can give.
type Settings struct {
	Track              Track  // track=
	StackDepth         int    // stack_depth= (0: no stacks; at most MaxStackDepth)
	ReportDir          string // report_dir=
	SnapshotIntervalMS int    // snapshot_interval_ms= (0: no periodic snapshots)
	PeakTopN           int    // peak_top_n=
	MinAlloc           uint64 // min_alloc= (bytes; K/M/G suffixes)

	// Origin says, for each key that was given, where: "FILE:LINE" or
	// "MEMTRACE_X". A key absent from Origin was not set, and Merge leaves
	// it to the command line's default.
	Origin map[string]string
}

// Keys, as written in a config file.
const (
	KeyTrack              = "track"
	KeyStackDepth         = "stack_depth"
	KeyReportDir          = "report_dir"
	KeySnapshotIntervalMS = "snapshot_interval_ms"
	KeyPeakTopN           = "peak_top_n"
	KeyMinAlloc           = "min_alloc"
)

// Keys lists every key in the order Format writes them.
var Keys = []string{KeyTrack, KeyStackDepth, KeyReportDir, KeySnapshotIntervalMS, KeyPeakTopN, KeyMinAlloc}

// EnvConfig names the config file when --config is not given.
const EnvConfig = "MEMTRACE_CONFIG"

// EnvName returns the environment variable for a key: MEMTRACE_ and the
// key in capitals.
func EnvName(key string) string { return "MEMTRACE_" + strings.ToUpper(key) }

// Limits on values, chosen so that a typo fails rather than making memtrace
// do something absurd.
const (
	MaxStackDepth = 127 // the kernel's perf_event_max_stack default
	// DefaultStackDepth is memtrace's depth when nothing sets one: stacks
	// are why a heap profiler runs (heaptrack always records them), and
	// this roots the stacks of typical C and C++ programs, whose deepest
	// allocation paths rarely pass it; a shallower stack costs no more.
	DefaultStackDepth = 64
	MaxIntervalMS     = 24 * 60 * 60 * 1000
	MaxPeakTopN       = 1 << 20
	maxConfigSize     = 1 << 20
	maxConfigValues   = 4096
)

// Load reads the config file at path (or, when path is empty, the one that
// MEMTRACE_CONFIG in env names, if any) and then the MEMTRACE_* variables
// in env (a list of KEY=VALUE, as os.Environ returns), which override the
// file. An empty variable counts as unset. The error, if any, is one line
// that names the file and line or the variable.
func Load(path string, env []string) (Settings, error) {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, "MEMTRACE_") && v != "" {
			vars[k] = v
		}
	}
	s := Settings{Origin: map[string]string{}}
	if path == "" {
		path = vars[EnvConfig]
	}
	if path != "" {
		data, err := readFile(path)
		if err != nil {
			return Settings{}, err
		}
		if s, err = Parse(path, data); err != nil {
			return Settings{}, err
		}
	}
	for _, key := range Keys {
		name := EnvName(key)
		v, ok := vars[name]
		if !ok {
			continue
		}
		if err := s.set(key, v); err != nil {
			return Settings{}, fmt.Errorf("environment variable %s=%q: %w; fix or unset it", name, v, err)
		}
		s.Origin[key] = name
	}
	return s, nil
}

// readFile opens the file as the user behind sudo, if any: run as root, a
// path on memtrace's command line must not reach what that user cannot
// read (/etc/shadow); the kernel refuses it, not a check of our own.
// Only a regular file is read (and /dev/null, the usual way to say "no
// config"): a FIFO would block the run until someone writes it, a device
// may never end. What the path names is looked at before it is opened,
// so that no device is opened at all, and the opened file again, opened
// without waiting for a FIFO's writer, in case the path changed between.
func readFile(path string) ([]byte, error) {
	var st fs.FileInfo
	err := asuser.Do(func() error {
		var err error
		st, err = os.Stat(path)
		return err
	})
	var f *os.File
	if err == nil {
		if err := notRegular(path, st); err != nil {
			return nil, err
		}
		f, err = asuser.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		hint := ""
		if _, sudo, _ := asuser.Invoker(); sudo && errors.Is(err, fs.ErrPermission) {
			hint = " (under sudo memtrace reads it as the user who ran sudo)"
		}
		return nil, fmt.Errorf("cannot read config file %s: %w; check the path given with --config or %s%s", path, unwrapPath(err), EnvConfig, hint)
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("cannot read config file %s: %w; check the path given with --config or %s", path, unwrapPath(err), EnvConfig)
	}
	if err := notRegular(path, st); err != nil {
		return nil, err
	}
	buf := make([]byte, maxConfigSize+1)
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil {
			break
		}
		if m == 0 {
			break
		}
	}
	if n > maxConfigSize {
		return nil, fmt.Errorf("config file %s is larger than %d bytes; give the path of a key=value file", path, maxConfigSize)
	}
	return buf[:n], nil
}

// notRegular refuses a config path that names anything but a regular
// file or /dev/null.
func notRegular(path string, st fs.FileInfo) error {
	m := st.Mode()
	if m.IsRegular() || isDevNull(st) {
		return nil
	}
	what := "not a regular file"
	switch {
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a FIFO, not a regular file"
	case m&fs.ModeSocket != 0:
		what = "a socket, not a regular file"
	case m&fs.ModeDevice != 0:
		what = "a device, not a regular file"
	}
	return fmt.Errorf("config file %s is %s; give the path of a key=value file", path, what)
}

// isDevNull reports whether st is the null character device (1, 3).
func isDevNull(st fs.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && st.Mode()&fs.ModeCharDevice != 0 && unix.Major(uint64(sys.Rdev)) == 1 && unix.Minor(uint64(sys.Rdev)) == 3
}

// unwrapPath drops the *PathError's repetition of the path.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Parse reads config file text: one key=value per line, blank lines and
// lines whose first non-blank character is '#' ignored, spaces around keys
// and values ignored. name is used in errors.
func Parse(name string, data []byte) (Settings, error) {
	s := Settings{Origin: map[string]string{}}
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if lineNo == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")) // a BOM from a Windows editor
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		where := name + ":" + strconv.Itoa(lineNo)
		// Errors name the file, the line and at most a key: the
		// file may be one the user was never meant to read, or hold
		// secrets next to the typo, so no value and no raw line is
		// ever echoed.
		k, v, ok := bytes.Cut(line, []byte("="))
		if !ok {
			return Settings{}, fmt.Errorf("config file %s: line %d is not key=value; write one of %s as key=value, or start the line with # to comment it out",
				name, lineNo, strings.Join(Keys, ", "))
		}
		key := string(bytes.TrimSpace(k))
		val := string(bytes.TrimSpace(v))
		if !known(key) {
			shown := "unknown key (not shown: not a short name)"
			if keyLike(key) {
				shown = fmt.Sprintf("unknown key %q", key)
			}
			return Settings{}, fmt.Errorf("config file %s: %s; the keys are %s", where, shown, strings.Join(Keys, ", "))
		}
		if prev, dup := s.Origin[key]; dup {
			return Settings{}, fmt.Errorf("config file %s: %s is set again (first at %s); keep one of the two lines", where, key, prev)
		}
		if err := s.set(key, val); err != nil {
			if key == KeyTrack {
				// ParseTrack's message quotes the word it rejects.
				err = errors.New("want a comma-separated list of " + TrackWords)
			}
			return Settings{}, fmt.Errorf("config file %s: bad %s value: %w; fix the value", where, key, err)
		}
		s.Origin[key] = where
	}
	return s, nil
}

// maxShownKey bounds an unknown key echoed in an error: long enough for a
// typo of any real key, too short to carry much of a secret.
const maxShownKey = 32

// keyLike says whether an unknown key may be named in an error: short, and
// spelled like a key, so that a line of another kind of file (a password
// hash, a token) is never shown.
func keyLike(key string) bool {
	if key == "" || len(key) > maxShownKey {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func known(key string) bool {
	for _, k := range Keys {
		if k == key {
			return true
		}
	}
	return false
}

func (s *Settings) set(key, val string) error {
	var err error
	switch key {
	case KeyTrack:
		s.Track, err = ParseTrack(val)
	case KeyStackDepth:
		s.StackDepth, err = parseInt(val, MaxStackDepth)
	case KeyReportDir:
		if val == "" {
			return errors.New("empty directory")
		}
		if strings.ContainsRune(val, 0) {
			return errors.New("a NUL byte in the path")
		}
		s.ReportDir = val
	case KeySnapshotIntervalMS:
		s.SnapshotIntervalMS, err = parseInt(val, MaxIntervalMS)
	case KeyPeakTopN:
		s.PeakTopN, err = parseInt(val, MaxPeakTopN)
	case KeyMinAlloc:
		s.MinAlloc, err = ParseSize(val)
	default:
		err = fmt.Errorf("unknown key %q", key)
	}
	return err
}

func parseInt(s string, max int) (int, error) {
	v, err := strconv.ParseUint(s, 10, 31)
	if err != nil || int(v) > max {
		return 0, fmt.Errorf("want a whole number from 0 to %d", max)
	}
	return int(v), nil
}

// ParseSize reads a byte count with an optional K, M or G suffix (powers
// of 1024).
func ParseSize(s string) (uint64, error) {
	mul := uint64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mul, s = 1<<10, s[:n-1]
		case 'm', 'M':
			mul, s = 1<<20, s[:n-1]
		case 'g', 'G':
			mul, s = 1<<30, s[:n-1]
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > (1<<63)/mul {
		return 0, errors.New("want a byte count such as 128, 4K or 1M")
	}
	return v * mul, nil
}

// Format writes s as a config file that Parse reads back to the same
// values; with only set, just the keys in s.Origin.
func (s Settings) Format(only bool) []byte {
	var b []byte
	for _, key := range Keys {
		if _, ok := s.Origin[key]; only && !ok {
			continue
		}
		b = append(b, key...)
		b = append(b, '=')
		switch key {
		case KeyTrack:
			b = append(b, s.Track.String()...)
		case KeyStackDepth:
			b = strconv.AppendInt(b, int64(s.StackDepth), 10)
		case KeyReportDir:
			b = append(b, s.ReportDir...)
		case KeySnapshotIntervalMS:
			b = strconv.AppendInt(b, int64(s.SnapshotIntervalMS), 10)
		case KeyPeakTopN:
			b = strconv.AppendInt(b, int64(s.PeakTopN), 10)
		case KeyMinAlloc:
			b = strconv.AppendUint(b, s.MinAlloc, 10)
		}
		b = append(b, '\n')
	}
	return b
}

// Merge combines the settings from Load with those from the command line:
// for each key, the flag's value if set[key] says the flag was given,
// else the file's or environment's if either gave the key, else the flag's
// (its default). set is keyed by config key; flag spellings with '-'
// ("stack-depth") are accepted too. The result's Origin names "flag" for
// keys the command line gave.
func Merge(fileAndEnv, flags Settings, set map[string]bool) Settings {
	given := map[string]bool{}
	for k, v := range set {
		if v {
			given[strings.ReplaceAll(strings.TrimLeft(k, "-"), "-", "_")] = true
		}
	}
	out := flags
	out.Origin = map[string]string{}
	for _, key := range Keys {
		from := &flags
		if given[key] {
			out.Origin[key] = "flag"
		} else if o, ok := fileAndEnv.Origin[key]; ok {
			from = &fileAndEnv
			out.Origin[key] = o
		}
		switch key {
		case KeyTrack:
			out.Track = from.Track
		case KeyStackDepth:
			out.StackDepth = from.StackDepth
		case KeyReportDir:
			out.ReportDir = from.ReportDir
		case KeySnapshotIntervalMS:
			out.SnapshotIntervalMS = from.SnapshotIntervalMS
		case KeyPeakTopN:
			out.PeakTopN = from.PeakTopN
		case KeyMinAlloc:
			out.MinAlloc = from.MinAlloc
		}
	}
	return out
}
