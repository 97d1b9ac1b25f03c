//go:build amd64 || arm64

package tracer

import (
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
	"unsafe"

	"github.com/memtrace/memtrace/unwind"
)

// Building a file's unwind table (parsing its .eh_frame) is a large part
// of a start-up's own CPU time, and every run builds the same tables for
// the C library and the loader. cachedTable keeps each table built in the
// user's cache directory, keyed by the file's identity (device, inode,
// size, modification and change times) and memtrace's own executable, so
// that the next run reads the rows instead of building them. A table
// that asked for the file's separate debug file (a library whose
// .eh_frame covers little of its text, such as LLVM's libc++) depends on
// that file too: its entry records what the lookup found (the debug
// file's identity, or none), and a read repeats the lookup, which is
// cheap next to the build, and takes the entry only if it finds the same,
// so that installing or removing the debug file is a miss.
//
// The cache is only used in a directory the effective user owns and no
// one else can write: as root under sudo the user's directory is left
// alone. Anything wrong with an entry (short, another key, a bad
// checksum) is a miss; writing one is best effort.

// tableCacheVersion changes with the entry's layout or the table's.
const tableCacheVersion = 2

// tableCacheDir is the cache's directory ("" for none); tests set it.
var tableCacheDir = func() string {
	if os.Getenv("MEMTRACE_NO_TABLE_CACHE") != "" {
		return ""
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "memtrace", "unwind")
}

// tableKey identifies a file's content as well as stat can.
type tableKey struct {
	Version                  int
	Dev, Ino, Size           uint64
	MtimeNs, CtimeNs         int64
	ExeIno, ExeSize          uint64
	ExeMtimeNs, ExeCtimeNs   int64
	RowSize, ExtSize, Arches int
}

// tableEntry is what an entry holds besides the rows, gob-encoded.
type tableEntry struct {
	Key      tableKey
	Arch     unwind.Arch
	Base     uint64
	Extended []unwind.ExtRule
	Segments []unwind.Segment
	Stats    unwind.Stats
	NRows    int
	Sum      [sha256.Size]byte // of the rows
	// Asked: the build asked for the separate debug file, and Debug is
	// what the lookup found.
	Asked bool
	Debug debugDep
}

// debugDep is a separate debug file lookup's result: Found and the file's
// identity.
type debugDep struct {
	Found            bool
	Dev, Ino, Size   uint64
	MtimeNs, CtimeNs int64
}

// lookupDebug runs the separate debug file lookup sep and closes what it
// opened; ok is false when the file it found cannot be identified.
func lookupDebug(sep func() (io.ReaderAt, int64, func())) (d debugDep, ok bool) {
	r, _, done := sep()
	if done != nil {
		defer done()
	}
	if r == nil {
		return debugDep{}, true
	}
	return debugDepOf(r)
}

// debugDepOf identifies the debug file r, which the lookup opened.
func debugDepOf(r io.ReaderAt) (debugDep, bool) {
	f, isFile := r.(*os.File)
	if !isFile {
		return debugDep{}, false
	}
	var st syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &st) != nil {
		return debugDep{}, false
	}
	return debugDep{Found: true, Dev: uint64(st.Dev), Ino: st.Ino, Size: uint64(st.Size),
		MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano()}, true
}

func statKey(path string) (tableKey, bool) {
	var st, ex syscall.Stat_t
	exe, err := os.Executable()
	if err != nil || syscall.Stat(path, &st) != nil || syscall.Stat(exe, &ex) != nil {
		return tableKey{}, false
	}
	return tableKey{Version: tableCacheVersion, Dev: uint64(st.Dev), Ino: st.Ino, Size: uint64(st.Size),
		MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano(),
		ExeIno: ex.Ino, ExeSize: uint64(ex.Size), ExeMtimeNs: ex.Mtim.Nano(), ExeCtimeNs: ex.Ctim.Nano(),
		RowSize: int(unsafe.Sizeof(unwind.Row{})), ExtSize: int(unsafe.Sizeof(unwind.ExtRule{})), Arches: int(unwind.ArchARM64)}, true
}

// cacheDirOK reports whether dir exists (created if not), is the
// effective user's and is writable by no one else.
func cacheDirOK(dir string) bool {
	// Nothing is created in a directory of another user's (root's
	// cache under sudo -E would be the user's home).
	for p := dir; ; p = filepath.Dir(p) {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err == nil {
			if st.Uid != uint32(os.Geteuid()) {
				return false
			}
			break
		}
		if filepath.Dir(p) == p {
			return false
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return false
	}
	return st.Mode&syscall.S_IFMT == syscall.S_IFDIR && st.Uid == uint32(os.Geteuid()) && st.Mode&0o022 == 0
}

func entryName(dir string, k tableKey) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%+v", k))
	return filepath.Join(dir, fmt.Sprintf("%x", h[:16]))
}

// cachedTable is unwind.BuildTableFile(path, opts) through the cache.
func cachedTable(path string, opts *unwind.Options) (*unwind.Table, error) {
	dir := tableCacheDir()
	if dir == "" {
		return unwind.BuildTableFile(path, opts)
	}
	k, ok := statKey(path)
	if !ok || !cacheDirOK(dir) {
		return unwind.BuildTableFile(path, opts)
	}
	name := entryName(dir, k)
	o := unwind.Options{}
	if opts != nil {
		o = *opts
	}
	sep := o.SeparateDebug
	if t := readEntry(name, k, sep); t != nil {
		return t, nil
	}
	// Whether the build asked for the separate debug file, and what the
	// lookup found: the entry depends on it.
	asked, depOK := false, true
	var dep debugDep
	if sep != nil {
		o.SeparateDebug = func() (io.ReaderAt, int64, func()) {
			asked = true
			r, size, done := sep()
			if r != nil {
				dep, depOK = debugDepOf(r)
			}
			return r, size, done
		}
	}
	t, err := unwind.BuildTableFile(path, &o)
	if err != nil || !depOK {
		return t, err
	}
	// The file must not have changed while it was read.
	if k2, ok := statKey(path); ok && k2 == k {
		writeEntry(dir, name, k, t, asked, dep)
	}
	return t, nil
}

func rowBytes(rows []unwind.Row) []byte {
	if len(rows) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&rows[0])), len(rows)*int(unsafe.Sizeof(rows[0])))
}

func writeEntry(dir, name string, k tableKey, t *unwind.Table, asked bool, dep debugDep) {
	rb := rowBytes(t.Rows)
	e := tableEntry{Key: k, Arch: t.Arch, Base: t.Base, Extended: t.Extended, Segments: t.Segments, Stats: t.Stats,
		NRows: len(t.Rows), Sum: sha256.Sum256(rb), Asked: asked, Debug: dep}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&e); err != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return
	}
	var n [8]byte
	for i, v := 0, uint64(buf.Len()); i < 8; i++ {
		n[i] = byte(v >> (8 * i))
	}
	_, err1 := f.Write(n[:])
	_, err2 := f.Write(buf.Bytes())
	_, err3 := f.Write(rb)
	err4 := f.Close()
	if errors.Join(err1, err2, err3, err4) != nil || os.Rename(f.Name(), name) != nil {
		os.Remove(f.Name())
		return
	}
	trimCache(dir, tableCacheMaxBytes)
}

// tableCacheMaxBytes bounds the cache: every program a test suite builds
// is a new file, so the entries would otherwise only grow.
const tableCacheMaxBytes = 64 << 20

// trimCache removes the least recently used entries of dir (a hit
// touches its entry) until they take at most max bytes.
func trimCache(dir string, max int64) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type entry struct {
		name string
		size int64
		at   time.Time
	}
	var es []entry
	var total int64
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			es = append(es, entry{e.Name(), info.Size(), info.ModTime()})
			total += info.Size()
		}
	}
	if total <= max {
		return
	}
	sort.Slice(es, func(i, j int) bool { return es[i].at.Before(es[j].at) })
	for _, e := range es {
		if total <= max {
			break
		}
		if os.Remove(filepath.Join(dir, e.name)) == nil {
			total -= e.size
		}
	}
}

// readEntry is the table of entry name if it holds key k, else nil.
// readEntry reads entry name if it holds key k's table; sep is the table's
// separate debug file lookup (nil for none), repeated for an entry that
// asked for it.
func readEntry(name string, k tableKey, sep func() (io.ReaderAt, int64, func())) *unwind.Table {
	b, err := os.ReadFile(name)
	if err != nil || len(b) < 8 {
		return nil
	}
	var n uint64
	for i := 7; i >= 0; i-- {
		n = n<<8 | uint64(b[i])
	}
	if n > uint64(len(b)-8) {
		return nil
	}
	var e tableEntry
	if gob.NewDecoder(bytes.NewReader(b[8:8+n])).Decode(&e) != nil || e.Key != k {
		return nil
	}
	rb := b[8+n:]
	size := int(unsafe.Sizeof(unwind.Row{}))
	if e.NRows < 0 || len(rb) != e.NRows*size || sha256.Sum256(rb) != e.Sum {
		return nil
	}
	if e.Asked {
		if sep == nil {
			return nil
		}
		if d, ok := lookupDebug(sep); !ok || d != e.Debug {
			return nil
		}
	}
	rows := make([]unwind.Row, e.NRows)
	copy(rowBytes(rows), rb)
	now := time.Now()
	os.Chtimes(name, now, now) // used: the last to go when the cache is trimmed
	return &unwind.Table{Arch: e.Arch, Base: e.Base, Rows: rows, Extended: e.Extended, Segments: e.Segments, Stats: e.Stats}
}
