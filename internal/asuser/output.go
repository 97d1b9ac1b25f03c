package asuser

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrForeignLink is the refusal of an output path whose last component is
// a symbolic link that root may not follow (see Create).
var ErrForeignLink = errors.New("is a symbolic link that memtrace, running as root, does not follow " +
	"(only root's own links in directories only root can change): remove it or give another path")

// maxLinks bounds a chain of links, as the kernel's own limit does.
const maxLinks = 40

// Create creates or truncates the output file name: the log, a report,
// an export, a profile. Under sudo it is created as the user behind sudo
// (see Do), whose rights the kernel applies. As root without sudo, the
// path's last component is not followed if it is a symbolic link that
// another user could have made or replaced: one owned by someone other
// than root, or in a directory that is not root's or that others may write
// (unless sticky: there only root may remove root's link). Such a path
// fails with ErrForeignLink. A link root may follow is followed, and its
// target judged the same way. memtrace's own descriptors (/dev/stdout,
// /dev/fd/N: OwnDescriptor) are opened as named: the shell that started
// memtrace opened them.
func Create(name string) (*os.File, error) {
	return createOutput(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
}

// CreateNew is Create for a name memtrace chose (memtrace.PROG.PID.log.zst,
// a report's, a temporary file's): the file must not exist, not even as a
// symbolic link (O_EXCL), so nothing planted under the name is written
// through.
func CreateNew(name string) (*os.File, error) {
	return createOutput(name, os.O_RDWR|os.O_CREATE|os.O_EXCL)
}

// WriteOutput writes the output file name whole: created by Create (by
// CreateNew if excl), filled by write, closed. On any failure (a full
// disk, most often) the partial file is removed: a file with half its
// content would read as a complete one.
func WriteOutput(name string, excl bool, write func(io.Writer) error) error {
	create := Create
	if excl {
		create = CreateNew
	}
	f, err := create(name)
	if err != nil {
		return err
	}
	// Only a regular file is removed, and the one written: the name
	// may be a device (/dev/full) or lead to the file through a link.
	st, serr := f.Stat()
	opened := f.Name()
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil && serr == nil && st.Mode().IsRegular() {
		_ = Do(func() error {
			if p, ferr := follow(opened, false); ferr == nil {
				if now, lerr := os.Lstat(p); lerr == nil && os.SameFile(st, now) {
					os.Remove(p)
				}
			}
			return nil
		})
	}
	return err
}

// WriteRenamed is WriteOutput for a file that must be complete once it has
// its name (a profile a collector picks up as soon as it appears): it is
// written as .NAME.tmp beside it, created exclusively, and renamed into
// place; a failure leaves neither. A rename over a symbolic link replaces
// the link, not what it points at.
func WriteRenamed(name string, write func(io.Writer) error) error {
	tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".tmp")
	if err := WriteOutput(tmp, true, write); err != nil {
		return err
	}
	err := Do(func() error {
		err := os.Rename(tmp, name)
		if err != nil {
			os.Remove(tmp)
		}
		return err
	})
	return err
}

func createOutput(name string, flag int) (*os.File, error) {
	var f *os.File
	err := Do(func() error {
		var err error
		f, err = openOutput(name, flag)
		return err
	})
	return f, err
}

// openOutput opens name with the calling thread's credentials. Only root
// needs the link rule: any other user's open is judged by the kernel with
// that user's rights.
func openOutput(name string, flag int) (*os.File, error) {
	if _, own := OwnDescriptor(name); own || unix.Geteuid() != 0 || flag&os.O_EXCL != 0 {
		// O_EXCL follows no link: an existing one is EEXIST.
		return os.OpenFile(name, flag, 0o666)
	}
	target, err := follow(name, true)
	if err != nil {
		return nil, err
	}
	// O_NOFOLLOW: a link put in place of a name checked to be none
	// is refused, not followed.
	f, err := os.OpenFile(target, flag|syscall.O_NOFOLLOW, 0o666)
	if errors.Is(err, syscall.ELOOP) {
		if st, lerr := os.Lstat(target); lerr == nil && st.Mode()&fs.ModeSymlink != 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: ErrForeignLink}
		}
	}
	return f, err
}

// follow follows the symbolic links at the end of name and returns the
// path they lead to. As root (asRoot) only the links root may follow are
// followed; another is ErrForeignLink.
func follow(name string, asRoot bool) (string, error) {
	p := name
	for hops := 0; ; hops++ {
		st, err := os.Lstat(p)
		if err != nil || st.Mode()&fs.ModeSymlink == 0 {
			// Missing (the open creates it), or not a link: the open
			// judges it.
			return p, nil
		}
		if hops == maxLinks {
			return "", &fs.PathError{Op: "open", Path: name, Err: syscall.ELOOP}
		}
		dir := filepath.Dir(p)
		if asRoot && (!rootsOwn(st) || !onlyRootChanges(dir)) {
			return "", &fs.PathError{Op: "open", Path: name, Err: ErrForeignLink}
		}
		t, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(dir, t)
		}
		p = t
	}
}

func rootsOwn(st fs.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && s.Uid == 0
}

// onlyRootChanges says whether no user but root may add, remove or rename
// entries of dir: root's, and writable by root alone or sticky.
func onlyRootChanges(dir string) bool {
	st, err := os.Stat(dir)
	if err != nil || !rootsOwn(st) {
		return false
	}
	return st.Mode().Perm()&0o022 == 0 || st.Mode()&fs.ModeSticky != 0
}

// OwnDescriptor recognises the names of memtrace's own descriptors
// (-o /dev/stdout to pipe the log on) and returns the descriptor.
func OwnDescriptor(path string) (int, bool) {
	switch p := filepath.Clean(path); p {
	case "/dev/stdin":
		return 0, true
	case "/dev/stdout":
		return 1, true
	case "/dev/stderr":
		return 2, true
	default:
		for _, dir := range []string{"/dev/fd/", "/proc/self/fd/"} {
			if n, ok := strings.CutPrefix(p, dir); ok {
				fd, err := strconv.Atoi(n)
				return fd, err == nil && fd >= 0
			}
		}
	}
	return 0, false
}
