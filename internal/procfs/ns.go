package procfs

import "golang.org/x/sys/unix"

// SameMountNS reports whether process pid is in memtrace's mount
// namespace; false when either cannot be read.
func SameMountNS(pid int) bool {
	var a, b unix.Stat_t
	return unix.Stat(Dir(pid)+"/ns/mnt", &a) == nil && unix.Stat("/proc/self/ns/mnt", &b) == nil &&
		a.Ino == b.Ino && a.Dev == b.Dev
}

// SameFS reports whether process pid sees memtrace's filesystem: the
// same mount namespace, and the same root directory on the same mount.
// Then a path in its maps names, for memtrace, the file the process
// mapped. A process that unshared its mount namespace has "/" for its
// root link as memtrace does, but a bind mount in its copy of the mounts
// can put another file under a host path; a chroot'ed one has another
// root directory. False when anything cannot be read.
func SameFS(pid int) bool {
	if !SameMountNS(pid) {
		return false
	}
	var ra, rb unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, Dir(pid)+"/root", 0, unix.STATX_INO|unix.STATX_MNT_ID, &ra) != nil ||
		unix.Statx(unix.AT_FDCWD, "/", 0, unix.STATX_INO|unix.STATX_MNT_ID, &rb) != nil {
		return false
	}
	return ra.Ino == rb.Ino && ra.Dev_major == rb.Dev_major && ra.Dev_minor == rb.Dev_minor && ra.Mnt_id == rb.Mnt_id
}
