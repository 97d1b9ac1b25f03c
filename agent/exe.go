package agent

import (
	"path/filepath"
	"strings"
)

// commLen is the most of a name the kernel keeps as a process's comm
// (TASK_COMM_LEN less its NUL).
const commLen = 15

// ExeBeside is the header's exe=: exe, the real file of a process's
// program (the file its stacks name, as perf names a DSO and heaptrack a
// module), when comm, the name it was started by (the kernel takes it
// from the path given to exec, or memtrace from PROG), is not that file's
// name: it was started through a link of another name (Debian's
// redis-server, a link to redis-check-rdb), and the header names both.
// "" when the names agree or exe is unknown.
func ExeBeside(comm, exe string) string {
	if exe == "" || comm == "" {
		return ""
	}
	base := filepath.Base(exe)
	if base == comm || len(comm) == commLen && strings.HasPrefix(base, comm) {
		return ""
	}
	return exe
}
