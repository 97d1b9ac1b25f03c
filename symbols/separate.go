package symbols

import (
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/unwind"
)

// SeparateDebugFile opens the separate debug file of the ELF file at path
// (found as the symbolizer finds it: build ID, then debuglink with its CRC,
// in the default debug directories) for a reader of its other sections,
// such as the unwinder's .debug_frame. It returns the file, its size and a
// function that closes them; a nil reader when there is none. Where path
// names the file by identity only (/proc/PID/map_files/...), a debuglink
// is looked for beside the path the file is mapped by: the next of paths.
func SeparateDebugFile(paths ...string) (io.ReaderAt, int64, func()) {
	for _, p := range paths {
		if r, size, done := separateDebugFile(p); r != nil {
			return r, size, done
		}
	}
	return nil, 0, nil
}

func separateDebugFile(path string) (io.ReaderAt, int64, func()) {
	c := NewCache(nil)
	m, err := c.Open(path)
	if err != nil {
		c.Close()
		return nil, 0, nil
	}
	d := m.debugFile()
	if d == nil || d.file == nil {
		c.Close()
		return nil, 0, nil
	}
	// A descriptor of its own: the cache closes the module's.
	fd, err := unix.FcntlInt(d.file.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	c.Close()
	if err != nil {
		return nil, 0, nil
	}
	f := os.NewFile(uintptr(fd), d.path)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, nil
	}
	return f, st.Size(), func() { f.Close() }
}

// UnwindOptions are the unwind table options for the ELF file at path, on
// both paths (the BPF walker's tables and the preload library's): a binary
// whose CFI was stripped into its separate debug file unwinds through that
// file's .debug_frame, as it is named through that file's symbols.
// paths are as SeparateDebugFile's.
func UnwindOptions(paths ...string) *unwind.Options {
	return &unwind.Options{SeparateDebug: func() (io.ReaderAt, int64, func()) {
		return SeparateDebugFile(paths...)
	}}
}
