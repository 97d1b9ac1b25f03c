// Package procfs is memtrace's one reader of /proc/PID: the mappings
// (maps), the process's state and parentage (stat, status), its name
// (comm), its command line and environment, its cgroup (and the container
// that names), whether it sees memtrace's own filesystem (root and mount
// namespace), and memtrace's own PID namespace, whose ids every pid
// memtrace handles is in (PIDNamespace). The symbolizer,
// the eBPF tracer's unwinder and probe placement, the agent, the live heap
// model and the runner all read /proc through it, so that the kernel's
// formats are parsed in one place, by one grammar, tested and fuzzed once.
//
// The parsers take the kernel's text as it is:
//
//   - A maps path is kept exactly as the kernel prints it: spaces inside
//     and at its end, pseudo names ("[vdso]", "[anon:NAME]",
//     "anon_inode:…"), the " (deleted)" suffix of an unlinked file (see
//     Mapping.Deleted and Mapping.File), and the kernel's "\012" for a
//     newline in a name. Only the padding before it is dropped: no path
//     the kernel prints starts with a space.
//   - A comm may hold any byte but NUL: spaces, parentheses, even a
//     newline. stat is split at the last ')', comm is the file less its
//     final newline, status's Name is unescaped ("\n", "\\", and the
//     octal escapes older kernels wrote).
//   - Numbers are checked for overflow; a malformed maps line is skipped
//     and reported (ErrBadMaps, with its line number, never its text),
//     and the mappings of every other line are still returned.
//
// Why not github.com/prometheus/procfs (already in the module graph
// through client_golang): its maps parser splits lines with strings.Fields
// and joins the path back with single spaces (a path with two spaces, or
// one at its end, is another path), parses the offset as a signed number,
// stops at the first line it does not take, and allocates a pointer per
// mapping on a path that memtrace runs at every dlopen and rescan.
package procfs
