package symbols

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// FileID identifies a mapped file independently of its path: the device and
// inode as /proc/PID/maps reports them. Two mappings with the same FileID
// map the same file even when they are seen through different mount
// namespaces or after the path was unlinked or replaced.
type FileID struct {
	Major, Minor uint32
	Inode        uint64
}

// Zero reports whether the ID is unknown (anonymous mapping, or a mapping
// added without device/inode information).
func (id FileID) Zero() bool { return id.Inode == 0 }

// Mapping is one line of /proc/PID/maps (or an equivalent mmap event).
type Mapping struct {
	Start, End uint64 // [Start, End) in the process's address space
	Perms      string // "r-xp" etc.
	Offset     uint64 // file offset of Start
	File       FileID
	// Path is the pathname column as the kernel printed it, relative to the
	// process's root directory. Pseudo paths such as "[heap]" or "[vdso]"
	// are kept; Deleted is set and the " (deleted)" suffix removed when the
	// file was unlinked.
	Path    string
	Deleted bool
}

// Exec reports whether the mapping is executable.
func (m *Mapping) Exec() bool { return len(m.Perms) >= 3 && m.Perms[2] == 'x' }

// FileBacked reports whether the mapping maps a regular file (not anonymous
// memory or a kernel pseudo mapping such as [vdso]).
func (m *Mapping) FileBacked() bool {
	return m.Path != "" && m.Path[0] == '/' && !m.File.Zero()
}

// maxMapsLine bounds one maps line; the kernel limits paths to PATH_MAX, so
// anything longer is not a maps file.
const maxMapsLine = 8192

// ParseMaps reads a whole /proc/PID/maps file. It stops at the first
// malformed line and returns the mappings read so far with an error
// wrapping ErrBadMaps.
func ParseMaps(r io.Reader) ([]Mapping, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxMapsLine)
	var out []Mapping
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := ParseMapsLine(string(line))
		if err != nil {
			return out, fmt.Errorf("maps line %d: %w", n, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("reading maps after line %d: %w (%w)", n, ErrBadMaps, err)
	}
	return out, nil
}

// ParseMapsLine parses one line of /proc/PID/maps:
//
//	7f0c1a2b3000-7f0c1a2d5000 r-xp 00022000 08:01 1311 /usr/lib/x86_64-linux-gnu/libc.so.6
func ParseMapsLine(line string) (Mapping, error) {
	var m Mapping
	bad := func(what string) (Mapping, error) {
		return Mapping{}, fmt.Errorf("%w: bad %s in %q", ErrBadMaps, what, clip(line, 120))
	}
	rest := line
	field := func() string {
		rest = strings.TrimLeft(rest, " \t")
		i := strings.IndexAny(rest, " \t")
		var f string
		if i < 0 {
			f, rest = rest, ""
		} else {
			f, rest = rest[:i], rest[i:]
		}
		return f
	}
	addr := field()
	dash := strings.IndexByte(addr, '-')
	if dash < 0 {
		return bad("address range")
	}
	var err error
	if m.Start, err = strconv.ParseUint(addr[:dash], 16, 64); err != nil {
		return bad("start address")
	}
	if m.End, err = strconv.ParseUint(addr[dash+1:], 16, 64); err != nil || m.End <= m.Start {
		return bad("end address")
	}
	m.Perms = field()
	if len(m.Perms) != 4 {
		return bad("permissions")
	}
	if m.Offset, err = strconv.ParseUint(field(), 16, 64); err != nil {
		return bad("offset")
	}
	dev := field()
	colon := strings.IndexByte(dev, ':')
	if colon < 0 {
		return bad("device")
	}
	maj, err1 := strconv.ParseUint(dev[:colon], 16, 32)
	mnr, err2 := strconv.ParseUint(dev[colon+1:], 16, 32)
	if err1 != nil || err2 != nil {
		return bad("device")
	}
	m.File.Major, m.File.Minor = uint32(maj), uint32(mnr)
	if m.File.Inode, err = strconv.ParseUint(field(), 10, 64); err != nil {
		return bad("inode")
	}
	// The path is everything after the inode column's padding and may
	// itself contain spaces.
	p := strings.TrimLeft(rest, " \t")
	if strings.HasSuffix(p, " (deleted)") {
		p = strings.TrimSuffix(p, " (deleted)")
		m.Deleted = true
	}
	m.Path = p
	return m, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
