package procfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ErrBadMaps is wrapped by the errors of lines that are not maps lines.
var ErrBadMaps = errors.New("malformed /proc/PID/maps line")

// Mapping is one line of /proc/PID/maps:
//
//	7f0c1a2b3000-7f0c1a2d5000 r-xp 00022000 08:01 1311     /usr/lib/x86_64-linux-gnu/libc.so.6
type Mapping struct {
	Start, End   uint64 // [Start, End) in the process's address space
	Perms        Perms
	Offset       uint64 // file offset of Start
	Major, Minor uint32 // the file's device, as the kernel prints it
	Inode        uint64 // 0: no file (anonymous memory, [heap], [vdso]…)
	// Path is the name column exactly as the kernel printed it (see the
	// package comment), relative to the reader's root for a process in
	// the reader's mount namespace and to the process's namespace's
	// root otherwise; "" for anonymous memory.
	Path string
}

// deletedSuffix is what the kernel appends to the name of an unlinked
// file (d_path).
const deletedSuffix = " (deleted)"

// Exec reports whether the mapping is executable.
func (m *Mapping) Exec() bool { return m.Perms.Exec() }

// Deleted reports whether the kernel marked the mapped file unlinked. The
// mark is text: a file really named "x (deleted)" reads the same, which
// is why memtrace opens mapped files through map_files, or by a path
// only where the device and inode match.
func (m *Mapping) Deleted() bool { return strings.HasSuffix(m.Path, deletedSuffix) }

// File is the path less the " (deleted)" mark: the name the file had.
func (m *Mapping) File() string { return strings.TrimSuffix(m.Path, deletedSuffix) }

// FileBacked reports whether the mapping maps a file by a path (not
// anonymous memory, a kernel pseudo mapping such as [vdso], or an
// anon_inode).
func (m *Mapping) FileBacked() bool { return m.Inode != 0 && strings.HasPrefix(m.Path, "/") }

// Perms is the permissions column: [r-][w-][x-][ps].
type Perms [4]byte

func (p Perms) Read() bool   { return p[0] == 'r' }
func (p Perms) Write() bool  { return p[1] == 'w' }
func (p Perms) Exec() bool   { return p[2] == 'x' }
func (p Perms) Shared() bool { return p[3] == 's' }

// String is the column as printed; the 16 possible values are shared
// strings, so that converting every mapping allocates nothing.
func (p Perms) String() string {
	if i, ok := p.index(); ok {
		return permStrings[i]
	}
	return string(p[:])
}

func (p Perms) index() (int, bool) {
	i := 0
	for k, on := range [4]byte{'r', 'w', 'x', 's'} {
		off := byte('-')
		if k == 3 {
			off = 'p'
		}
		switch p[k] {
		case on:
			i |= 1 << k
		case off:
		default:
			return 0, false
		}
	}
	return i, true
}

var permStrings = func() (s [16]string) {
	for i := range s {
		b := []byte("---p")
		for k, on := range "rwxs" {
			if i&(1<<k) != 0 {
				b[k] = byte(on)
			}
		}
		s[i] = string(b)
	}
	return s
}()

// Dir is the /proc directory of process (or thread) pid.
func Dir(pid int) string { return "/proc/" + strconv.Itoa(pid) }

// MapFile is the /proc/PID/map_files link of the mapping [start, end) of
// pid: the mapped file itself, whatever its path, while the mapping
// exists (root only).
func MapFile(pid int, start, end uint64) string {
	return Dir(pid) + "/map_files/" + strconv.FormatUint(start, 16) + "-" + strconv.FormatUint(end, 16)
}

// ReadMaps reads the mappings of process pid. With an error wrapping
// ErrBadMaps, the mappings of every good line are returned too.
func ReadMaps(pid int) ([]Mapping, error) {
	path := Dir(pid) + "/maps"
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ms, err := ParseMaps(f)
	if err != nil {
		return ms, fmt.Errorf("%s: %w", path, err)
	}
	return ms, nil
}

// mapsBufSize holds the longest line the kernel writes (a PATH_MAX path
// and its mark after the columns) many times over, so that a process's
// maps are read in a few read calls; the readers are pooled, as ReadMaps
// runs at every rescan.
const mapsBufSize = 64 << 10

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, mapsBufSize) }}

// ParseMaps reads a maps file. A line that is not a maps line (or one too
// long to be one) is skipped; the error then names the first such line
// and how many there were, and wraps ErrBadMaps.
func ParseMaps(r io.Reader) ([]Mapping, error) {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	var out []Mapping
	var prev string
	n, bad, firstBad := 0, 0, 0
	var firstErr error
	for {
		line, err := br.ReadSlice('\n')
		long := false
		for errors.Is(err, bufio.ErrBufferFull) {
			long = true
			_, err = br.ReadSlice('\n')
		}
		if len(line) > 0 {
			n++
			line = trimNewline(line)
			var m Mapping
			perr := errLong
			if !long {
				m, perr = parseLine(line, prev)
			}
			switch {
			case perr == nil:
				prev = m.Path
				out = append(out, m)
			case !long && blank(line):
			default:
				if bad == 0 {
					firstBad, firstErr = n, perr
				}
				bad++
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, fmt.Errorf("read after line %d: %w", n, err)
		}
	}
	switch {
	case bad == 1:
		return out, fmt.Errorf("line %d: %w", firstBad, firstErr)
	case bad > 1:
		return out, fmt.Errorf("line %d and %d more: %w", firstBad, bad-1, firstErr)
	}
	return out, nil
}

var errLong = fmt.Errorf("%w: longer than %d bytes", ErrBadMaps, mapsBufSize)

// ParseMapsLine parses one maps line (without its newline).
func ParseMapsLine(line string) (Mapping, error) {
	return parseLine([]byte(line), "")
}

func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}

func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// parseLine parses "start-end perms offset major:minor inode[ path]".
// prev is the previous line's path: a file's mappings follow each other,
// and reusing its string saves an allocation per line.
func parseLine(b []byte, prev string) (Mapping, error) {
	var m Mapping
	bad := func(what string) (Mapping, error) {
		return Mapping{}, fmt.Errorf("%w: bad %s", ErrBadMaps, what)
	}
	i := skip(b, 0)
	var ok bool
	if m.Start, i, ok = hexNum(b, i, 64); !ok || i >= len(b) || b[i] != '-' {
		return bad("address range")
	}
	if m.End, i, ok = hexNum(b, i+1, 64); !ok || m.End <= m.Start {
		return bad("end address")
	}
	if i, ok = sep(b, i); !ok || i+4 > len(b) || (i+4 < len(b) && !isBlank(b[i+4])) {
		return bad("permissions")
	}
	copy(m.Perms[:], b[i:i+4])
	if _, ok := m.Perms.index(); !ok {
		return bad("permissions")
	}
	i += 4
	if i, ok = sep(b, i); !ok {
		return bad("offset")
	}
	if m.Offset, i, ok = hexNum(b, i, 64); !ok {
		return bad("offset")
	}
	var v uint64
	if i, ok = sep(b, i); !ok {
		return bad("device")
	}
	if v, i, ok = hexNum(b, i, 32); !ok || i >= len(b) || b[i] != ':' {
		return bad("device")
	}
	m.Major = uint32(v)
	if v, i, ok = hexNum(b, i+1, 32); !ok {
		return bad("device")
	}
	m.Minor = uint32(v)
	if i, ok = sep(b, i); !ok {
		return bad("inode")
	}
	if m.Inode, i, ok = decNum(b, i); !ok {
		return bad("inode")
	}
	if i == len(b) {
		return m, nil
	}
	if !isBlank(b[i]) {
		return bad("inode")
	}
	// The name is everything after the padding, its own spaces included.
	p := b[skip(b, i):]
	if string(p) == prev {
		m.Path = prev
	} else {
		m.Path = string(p)
	}
	return m, nil
}

// sep skips the blanks between two columns: at least one.
func sep(b []byte, i int) (int, bool) {
	j := skip(b, i)
	return j, j > i && j < len(b)
}

func skip(b []byte, i int) int {
	for i < len(b) && isBlank(b[i]) {
		i++
	}
	return i
}

// hexNum parses the hex digits at b[i:] into a number of at most bits
// bits; it ends at the first other byte.
func hexNum(b []byte, i, bits int) (uint64, int, bool) {
	var v uint64
	start := i
	for ; i < len(b); i++ {
		c := b[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return v, i, i > start
		}
		if v>>(bits-4) != 0 {
			return 0, i, false
		}
		v = v<<4 | uint64(d)
	}
	return v, i, i > start
}

// decNum parses a decimal uint64 at b[i:] and must end at a blank or the
// line's end.
func decNum(b []byte, i int) (uint64, int, bool) {
	var v uint64
	start := i
	for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if v > (1<<64-1-d)/10 {
			return 0, i, false
		}
		v = v*10 + d
	}
	return v, i, i > start
}
