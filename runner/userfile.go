package runner

import (
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

// CreateLog creates the -o log. Under sudo it is created as the user who
// ran sudo, so the log is theirs and the kernel applies that user's rights
// to the path: a symlink planted in a shared directory, or a directory the
// user may not write, fails as it would without sudo instead of letting
// root overwrite what it points at. As root without sudo, a symlink another
// user could have planted is refused (asuser.Create). It is
// Options.OpenLog's default.
func CreateLog(path string) (*os.File, error) { return createLog(path, asuser.Create) }

// createNewLog creates the log under the name memtrace chose
// (memtrace.PROG.PID.log.zst): only a file that did not exist.
func createNewLog(path string) (*os.File, error) { return createLog(path, asuser.CreateNew) }

func createLog(path string, create func(string) (*os.File, error)) (*os.File, error) {
	_, sudo, err := asuser.Invoker()
	if err != nil {
		return nil, fmt.Errorf("create log %s: %w", path, err)
	}
	// Under sudo these are what the user handed memtrace, but the user
	// may not open /proc/self/fd of a root process, and root must not
	// open them either: that reopens the file with root's rights
	// (-o /dev/stdin < /etc/passwd would truncate it).
	if fd, ok := asuser.OwnDescriptor(path); ok && sudo {
		return dupForWriting(path, fd)
	}
	f, err := create(path)
	if err == nil {
		return f, nil
	}
	hint := "; give a path in a directory you can write"
	switch {
	case errors.Is(err, asuser.ErrForeignLink):
		hint = ""
	case errors.Is(err, fs.ErrExist):
		hint = ": memtrace does not write over a file under a name it chose; remove it or give -o FILE"
	case sudo && errors.Is(err, fs.ErrPermission):
		hint = "; under sudo the log is created as the user who ran sudo: give a path that user can write"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is already in the message
	}
	return nil, fmt.Errorf("create log %s: %w%s", path, err, hint)
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

// SudoUser is the user behind sudo when memtrace runs as root under sudo
// (asuser.Invoker decides, the one place that does): the credential the
// program runs with, with the user's supplementary groups (their primary
// group alone where they have none), and base with that user's HOME, USER
// and LOGNAME. ok is false without sudo.
func SudoUser(base []string) (cred *syscall.Credential, env []string, ok bool, err error) {
	u, ok, err := asuser.Invoker()
	if err != nil || !ok {
		return nil, nil, false, err
	}
	cred = &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID)}
	for _, g := range u.Groups {
		cred.Groups = append(cred.Groups, uint32(g))
	}
	if len(cred.Groups) == 0 {
		cred.Groups = []uint32{uint32(u.GID)}
	}
	return cred, asuser.Env(base, u), true, nil
}

// resolveUser fills what Options says Run fills: the user behind sudo and
// the log's creation as that user.
func (o *Options) resolveUser() error {
	if o.OpenLog == nil {
		o.OpenLog = CreateLog
		if o.DefaultOutput {
			o.OpenLog = createNewLog
		}
	}
	if o.Credential != nil {
		return nil
	}
	base := o.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	cred, env, ok, err := SudoUser(base)
	if err != nil || !ok {
		return err
	}
	o.Credential, o.BaseEnv = cred, env
	return nil
}

// FormatCred is cred as ParseCred reads it, "uid:gid:g1,g2": the eBPF
// path's exec shim gets it in its environment.
func FormatCred(cred *syscall.Credential) string {
	groups := make([]string, 0, len(cred.Groups))
	for _, g := range cred.Groups {
		groups = append(groups, strconv.FormatUint(uint64(g), 10))
	}
	return strconv.FormatUint(uint64(cred.Uid), 10) + ":" + strconv.FormatUint(uint64(cred.Gid), 10) + ":" + strings.Join(groups, ",")
}

// ParseCred reads a FormatCred string: uid, gid and groups.
func ParseCred(cred string) (uid, gid int, groups []int, err error) {
	parts := strings.SplitN(cred, ":", 3)
	if len(parts) != 3 {
		return 0, 0, nil, fmt.Errorf("bad credential %q", cred)
	}
	uid, err1 := strconv.Atoi(parts[0])
	gid, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return 0, 0, nil, fmt.Errorf("bad credential %q", cred)
	}
	for _, g := range strings.Split(parts[2], ",") {
		if n, err := strconv.Atoi(g); err == nil {
			groups = append(groups, n)
		}
	}
	return uid, gid, groups, nil
}
