package symbols

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// fsRoot opens paths as a process sees them. For a process in a container
// the root is an O_PATH descriptor of /proc/PID/root, opened once when the
// address space is created: it stays valid after the process exits, and
// openat2(RESOLVE_IN_ROOT) resolves absolute symlinks inside the
// container's tree instead of the host's.
type fsRoot struct {
	mu     sync.Mutex
	dirfd  int    // -1: host root
	prefix string // fallback when openat2 is unavailable
}

var hostFS = &fsRoot{dirfd: -1}

func openRoot(dir string) (*fsRoot, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening root %s: %w", dir, err)
	}
	return &fsRoot{dirfd: fd, prefix: dir}, nil
}

func (r *fsRoot) isHost() bool { return r == nil || (r.dirfd < 0 && r.prefix == "") }

func (r *fsRoot) open(path string) (*os.File, error) {
	if r.isHost() {
		return os.Open(path)
	}
	r.mu.Lock()
	fd := r.dirfd
	r.mu.Unlock()
	if fd >= 0 {
		nfd, err := unix.Openat2(fd, path, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err == nil {
			return os.NewFile(uintptr(nfd), path), nil
		}
		if !errors.Is(err, unix.ENOSYS) {
			return nil, &os.PathError{Op: "open", Path: filepath.Join(r.prefix, path), Err: err}
		}
	}
	return os.Open(filepath.Join(r.prefix, path))
}

func (r *fsRoot) close() {
	if r == nil || r == hostFS {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dirfd >= 0 {
		unix.Close(r.dirfd)
		r.dirfd = -1
	}
}

func fileIDOf(f *os.File) (FileID, int64, int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return FileID{}, 0, 0, err
	}
	return FileID{Major: unix.Major(uint64(st.Dev)), Minor: unix.Minor(uint64(st.Dev)), Inode: st.Ino},
		st.Size, st.Mtim.Nano(), nil
}
