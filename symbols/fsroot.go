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
	id     dirID  // what the root was when opened
	// nsfd holds the process's mount namespace when it is not ours:
	// the namespace's mounts (a bind mount over a library, a
	// container's whole tree) go when its last process exits, and paths
	// looked up from dirfd after that would find what lies under them.
	nsfd int
}

// dirID tells roots apart: a process that unshared its mount namespace
// has the same root directory as before, on another mount (a copy of
// ours, where a bind mount can hide one of our files behind another).
type dirID struct {
	dev, ino, mnt uint64
}

var hostFS = &fsRoot{dirfd: -1, nsfd: -1}

func openRoot(dir string) (*fsRoot, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening root %s: %w", dir, err)
	}
	id, err := fdDirID(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("opening root %s: %w", dir, err)
	}
	return &fsRoot{dirfd: fd, prefix: dir, id: id, nsfd: holdMountNS(dir)}, nil
}

// holdMountNS opens the mount namespace of the process whose root is dir
// (/proc/PID/root) when it is not memtrace's own, else returns -1.
func holdMountNS(dir string) int {
	ns := filepath.Join(filepath.Dir(dir), "ns", "mnt")
	var their, ours unix.Stat_t
	if unix.Stat(ns, &their) != nil || unix.Stat("/proc/self/ns/mnt", &ours) != nil ||
		their.Dev == ours.Dev && their.Ino == ours.Ino {
		return -1
	}
	fd, err := unix.Open(ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// rootID is the identity of the directory dir names (a /proc/PID/root).
func rootID(dir string) (dirID, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return dirID{}, fmt.Errorf("opening root %s: %w", dir, err)
	}
	defer unix.Close(fd)
	return fdDirID(fd)
}

func fdDirID(fd int) (dirID, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_MNT_ID, &stx); err != nil {
		return dirID{}, fmt.Errorf("statx: %w", err)
	}
	id := dirID{dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), ino: stx.Ino}
	if stx.Mask&unix.STATX_MNT_ID != 0 {
		id.mnt = stx.Mnt_id
	}
	return id, nil
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
	if r.nsfd >= 0 {
		unix.Close(r.nsfd)
		r.nsfd = -1
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
