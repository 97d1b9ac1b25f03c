package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ErrBadStat is wrapped by the errors of stat and status files that are
// not what the kernel writes.
var ErrBadStat = errors.New("malformed /proc/PID/stat or status")

// Stat is what memtrace uses of /proc/PID/stat.
type Stat struct {
	PID   int
	Comm  string // the comm as is: spaces, parentheses and all
	State byte   // R, S, D, Z, T, t, X, I…
	PPID  int
	PGRP  int
	// Flags are the task's PF_* flags (PF_KTHREAD: a kernel thread).
	Flags      uint64
	NumThreads int64
	// StartTime is when the process started, in clock ticks since boot:
	// with PID it names a process, a reused PID being another one.
	StartTime uint64
}

// PFKthread is PF_KTHREAD in Stat.Flags (include/linux/sched.h).
const PFKthread = 0x00200000

// Gone reports whether the process has exited (a zombie waiting for its
// parent, or dead).
func (s *Stat) Gone() bool { return s.State == 'Z' || s.State == 'X' }

// Stopped reports whether the process is stopped (SIGSTOP, or traced).
func (s *Stat) Stopped() bool { return s.State == 'T' || s.State == 't' }

// maxSmall bounds the reads of stat, status and comm, which the kernel
// keeps to a page or two.
const maxSmall = 16 << 10

// ReadStat reads /proc/PID/stat.
func ReadStat(pid int) (Stat, error) {
	path := Dir(pid) + "/stat"
	b, err := readSmall(path)
	if err != nil {
		return Stat{}, err
	}
	st, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// ParseStat parses a stat line: "pid (comm) state ppid pgrp session
// tty_nr tpgid flags … num_threads itrealvalue starttime …". The comm
// ends at the line's last ')', as no later field has one.
func ParseStat(b []byte) (Stat, error) {
	var st Stat
	open := bytes.IndexByte(b, '(')
	cls := bytes.LastIndexByte(b, ')')
	if open < 1 || cls < open || b[open-1] != ' ' {
		return st, fmt.Errorf("%w: no (comm)", ErrBadStat)
	}
	pid, err := strconv.Atoi(string(b[:open-1]))
	if err != nil || pid <= 0 {
		return st, fmt.Errorf("%w: bad pid", ErrBadStat)
	}
	st.PID, st.Comm = pid, string(b[open+1:cls])
	// Indexes of the fields after the comm, from state (field 3).
	const (
		fState, fPPID, fPGRP, fFlags, fThreads, fStart = 0, 1, 2, 6, 17, 19
	)
	f := bytes.Fields(b[cls+1:])
	if len(f) <= fStart {
		return st, fmt.Errorf("%w: %d fields after the comm, want at least %d", ErrBadStat, len(f), fStart+1)
	}
	if len(f[fState]) != 1 {
		return st, fmt.Errorf("%w: bad state", ErrBadStat)
	}
	st.State = f[fState][0]
	var errs [5]error
	st.PPID, errs[0] = strconv.Atoi(string(f[fPPID]))
	st.PGRP, errs[1] = strconv.Atoi(string(f[fPGRP]))
	st.Flags, errs[2] = strconv.ParseUint(string(f[fFlags]), 10, 64)
	st.NumThreads, errs[3] = strconv.ParseInt(string(f[fThreads]), 10, 64)
	st.StartTime, errs[4] = strconv.ParseUint(string(f[fStart]), 10, 64)
	for i, e := range errs {
		if e != nil {
			return Stat{}, fmt.Errorf("%w: bad %s", ErrBadStat, [...]string{"ppid", "pgrp", "flags", "num_threads", "starttime"}[i])
		}
	}
	return st, nil
}

// ReadComm reads /proc/PID/comm: the name exactly, less the newline the
// kernel ends it with.
func ReadComm(pid int) (string, error) {
	b, err := readSmall(Dir(pid) + "/comm")
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(b, []byte{'\n'})), nil
}

// ReadExe reads /proc/PID/exe: the real file of the process's program,
// its links resolved, as the kernel maps it (and as maps names it).
func ReadExe(pid int) (string, error) { return os.Readlink(Dir(pid) + "/exe") }

// Status is what memtrace uses of /proc/PID/status.
type Status struct {
	Name  string // the comm, unescaped
	State byte
	Tgid  int // the thread group (process) of a thread
	PPID  int
	// UID is the effective user id (-1 when the file has no Uid line).
	UID int
	// CapEff and CapPrm are the effective and permitted capability
	// sets; CapsKnown false when the file has neither.
	CapEff, CapPrm uint64
	CapsKnown      bool
}

// ReadStatus reads /proc/PID/status; pid may be any thread's id.
func ReadStatus(pid int) (Status, error) {
	path := Dir(pid) + "/status"
	b, err := readSmall(path)
	if err != nil {
		return Status{}, err
	}
	st, err := ParseStatus(b)
	if err != nil {
		return Status{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// ParseStatus parses the "Key:\tvalue" lines of a status file; Name and
// Tgid must be there.
func ParseStatus(b []byte) (Status, error) {
	st := Status{UID: -1}
	var name, tgid, eff, prm bool
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		// Name's value is the comm: only the tab after the colon is
		// the format's; the comm's own blanks are kept.
		switch string(k) {
		case "Name":
			st.Name, name = unescapeName(bytes.TrimPrefix(v, []byte{'\t'})), true
		case "State":
			if v = bytes.TrimSpace(v); len(v) == 0 {
				return Status{}, fmt.Errorf("%w: bad State", ErrBadStat)
			}
			st.State = v[0]
		case "Uid":
			// real, effective, saved, filesystem
			if f := bytes.Fields(v); len(f) > 1 {
				if n, err := strconv.Atoi(string(f[1])); err == nil {
					st.UID = n
				}
			}
		case "CapEff", "CapPrm":
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
			if err != nil {
				continue
			}
			if k[3] == 'E' {
				st.CapEff, eff = n, true
			} else {
				st.CapPrm, prm = n, true
			}
		case "Tgid", "PPid":
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil || n < 0 {
				return Status{}, fmt.Errorf("%w: bad %s", ErrBadStat, k)
			}
			if k[0] == 'T' {
				st.Tgid, tgid = n, true
			} else {
				st.PPID = n
			}
		}
	}
	if !name || !tgid {
		return Status{}, fmt.Errorf("%w: no Name or Tgid", ErrBadStat)
	}
	st.CapsKnown = eff && prm
	return st, nil
}

// unescapeName undoes status's escaping of the comm: "\n" and "\\" (and
// the octal "\ooo" of kernels before 5.13); any other backslash is kept.
func unescapeName(v []byte) string {
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v)
	}
	var sb strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' || i+1 == len(v) {
			sb.WriteByte(c)
			continue
		}
		switch n := v[i+1]; {
		case n == 'n':
			sb.WriteByte('\n')
			i++
		case n == '\\':
			sb.WriteByte('\\')
			i++
		case i+3 < len(v) && isOctal(n) && isOctal(v[i+2]) && isOctal(v[i+3]) && n <= '3':
			sb.WriteByte((n-'0')<<6 | (v[i+2]-'0')<<3 | (v[i+3] - '0'))
			i += 3
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }

// ReadCmdline is the argument list of process pid (none for a kernel
// thread or a zombie).
func ReadCmdline(pid int) ([]string, error) { return readList(Dir(pid) + "/cmdline") }

// ReadEnviron is the environment of process pid's current image.
func ReadEnviron(pid int) ([]string, error) { return readList(Dir(pid) + "/environ") }

// maxList bounds cmdline and environ: the kernel's limit on an exec's
// arguments and environment together is a quarter of the stack limit,
// so a few MiB in practice.
const maxList = 16 << 20

// readList reads a NUL-separated list. A process may overwrite its
// argument area (setproctitle): a last string without its NUL is kept.
func readList(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxList))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), nil
}

// readSmall reads a file of the kernel's that fits a page or two.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSmall))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}
