package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/asuser"
)

// CreateLog creates the -o log. Under sudo it is created as the user who
// ran sudo, so the log is theirs and the kernel applies that user's rights
// to the path: a symlink planted in a shared directory, or a directory the
// user may not write, fails as it would without sudo instead of letting
// root overwrite what it points at. It has the shape of
// preload.Options.OpenLog so the LD_PRELOAD path can use it too.
func CreateLog(path string) (*os.File, error) {
	_, sudo, err := asuser.Invoker()
	if err != nil {
		return nil, fmt.Errorf("create log %s: %w", path, err)
	}
	if fd, ok := ownDescriptor(path); ok && sudo {
		return dupForWriting(path, fd)
	}
	f, err := asuser.Create(path)
	if err == nil {
		return f, nil
	}
	hint := "give a path in a directory you can write"
	if sudo && errors.Is(err, fs.ErrPermission) {
		hint = "under sudo the log is created as the user who ran sudo: give a path that user can write"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is already in the message
	}
	return nil, fmt.Errorf("create log %s: %w; %s", path, err, hint)
}

// ownDescriptor recognises the names of memtrace's own descriptors
// (-o /dev/stdout to pipe the log on). Under sudo these are what the user
// handed memtrace, but the user may not open /proc/self/fd of a root
// process, and root must not open them either: that reopens the file with
// root's rights (-o /dev/stdin < /etc/passwd would truncate it).
func ownDescriptor(path string) (int, bool) {
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

// dupForWriting uses a descriptor memtrace was given, as the shell opened
// it, if it is open for writing.
func dupForWriting(path string, fd int) (*os.File, error) {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return nil, fmt.Errorf("create log %s: descriptor %d is not open: %w", path, fd, err)
	}
	if acc := fl & unix.O_ACCMODE; acc != unix.O_WRONLY && acc != unix.O_RDWR {
		return nil, fmt.Errorf("create log %s: descriptor %d is not open for writing; under sudo memtrace writes to it as given, without reopening it", path, fd)
	}
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, fmt.Errorf("create log %s: duplicate descriptor %d: %w", path, fd, err)
	}
	return os.NewFile(uintptr(nfd), path), nil
}
