package symbols

import "github.com/memtrace/memtrace/internal/procfs"

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

// ProcMapping is a maps line as an address space takes it: the
// " (deleted)" mark of an unlinked file moved into Deleted.
func ProcMapping(pm *procfs.Mapping) Mapping {
	return Mapping{Start: pm.Start, End: pm.End, Perms: pm.Perms.String(), Offset: pm.Offset,
		File: FileID{Major: pm.Major, Minor: pm.Minor, Inode: pm.Inode}, Path: pm.File(), Deleted: pm.Deleted()}
}

// ProcMappings converts a maps snapshot (procfs.ReadMaps).
func ProcMappings(pms []procfs.Mapping) []Mapping {
	out := make([]Mapping, len(pms))
	for i := range pms {
		out[i] = ProcMapping(&pms[i])
	}
	return out
}
