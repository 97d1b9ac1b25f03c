package tracer

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/procfs"
)

// Limits of RootLibraries' work on files a container controls.
const (
	rootMaxObjects = 256     // libraries followed, preloads and runtimes included
	rootMaxDirs    = 64      // directories of one search
	ldCacheMax     = 8 << 20 // bytes of /etc/ld.so.cache read; real ones are a few hundred K
)

// RootLibraries lists the files that the dynamic linker of process pid
// will load for the program pid has just exec'ed, when pid sees another
// filesystem than memtrace does (a chroot, a pivot_root'ed container, a
// mount namespace of its own, where a bind mount may put another file
// under a host path): the host's dynamic linker would answer with the
// host's libraries, which pid never maps. The libraries are found inside
// pid's root, as its own dynamic linker finds them (LD_PRELOAD and
// /etc/ld.so.preload, DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH, the root's
// /etc/ld.so.cache, the default directories; what the needed libraries
// need in turn), plus the C and C++ runtimes of the default directories,
// so that a C++ library dlopen'ed later is covered from its first call.
// Nothing of the container's runs: its files are only read.
//
// The paths are ones memtrace opens (host paths for a chroot in
// memtrace's namespace, /proc/PID/root/... otherwise), each checked to
// lead to the file found. ok is false when pid's root and mount namespace
// are memtrace's own: ask the host's dynamic linker then.
func RootLibraries(pid int, env []string) (libs []string, ok bool) {
	proc := procfs.Dir(pid)
	if procfs.SameFS(pid) {
		return nil, false
	}
	rfd, err := unix.Open(proc+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true
	}
	defer unix.Close(rfd)
	exe, err := os.Open(proc + "/exe")
	if err != nil {
		return nil, true
	}
	defer exe.Close()
	r := &rootSearch{proc: proc, rootfd: rfd, seen: map[string]bool{}, env: env}
	if OwnAllocator(proc + "/exe") {
		// A static program (or one with its allocator linked in): its
		// own file is probed, through the link that is that file.
		r.out = append(r.out, proc+"/exe")
	}
	exePath := r.inRoot(exe)
	prog, err := readDynInfo(exe)
	if err != nil || prog.interp == "" {
		// A static program loads nothing; one we cannot read, we
		// cannot follow.
		return r.out, true
	}
	r.class, r.machine = prog.class, prog.machine
	r.exe = prog
	r.exe.path = exePath
	r.cache = r.readCache()
	r.defaults = defaultLibDirs(prog.machine, prog.interp, r)
	interp, _ := r.open(prog.interp)
	var interpID [2]uint64
	if interp != nil {
		interpID = fdID(interp)
		interp.Close()
	}
	// Preloads first, as the dynamic linker loads them.
	var pre []string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "LD_PRELOAD="); ok {
			pre = append(pre, strings.FieldsFunc(v, func(c rune) bool { return c == ' ' || c == ':' })...)
		}
	}
	if b, err := r.readFile("/etc/ld.so.preload", 64<<10); err == nil {
		pre = append(pre, strings.Fields(string(b))...)
	}
	queue := []*dynInfo{}
	add := func(name string, from *dynInfo) {
		if len(r.out) >= rootMaxObjects {
			return
		}
		f, p := r.find(name, from)
		if f == nil {
			return
		}
		defer f.Close()
		id := fdID(f)
		if r.seen[p] {
			return
		}
		r.seen[p] = true
		info, err := readDynInfo(f)
		if err != nil {
			return
		}
		info.path = p
		queue = append(queue, info)
		// glibc's dynamic linker keeps its minimal malloc to itself;
		// musl's is the C library, and is needed as libc.
		if id == interpID && !strings.HasPrefix(name, "libc.") {
			return
		}
		if hp, ok := r.hostPath(f, p); ok {
			r.out = append(r.out, hp)
		}
	}
	for _, name := range pre {
		add(name, prog)
	}
	for _, name := range prog.needed {
		add(name, prog)
	}
	for i := 0; i < len(queue); i++ {
		for _, name := range queue[i].needed {
			add(name, queue[i])
		}
	}
	for _, name := range []string{"libc.so.6", "libstdc++.so.6", "libc++.so.1"} {
		for _, d := range r.defaults {
			if f, p := r.try(path.Join(d, name)); f != nil {
				if !r.seen[p] {
					r.seen[p] = true
					if hp, ok := r.hostPath(f, p); ok && len(r.out) < rootMaxObjects {
						r.out = append(r.out, hp)
					}
				}
				f.Close()
				break
			}
		}
	}
	return r.out, true
}

// rootSearch is one RootLibraries run.
type rootSearch struct {
	proc     string
	rootfd   int
	env      []string
	class    elf.Class
	machine  elf.Machine
	exe      *dynInfo
	cache    map[string][]string
	defaults []string
	seen     map[string]bool
	out      []string
}

// dynInfo is what the search needs of an ELF file.
type dynInfo struct {
	path             string // in the root
	class            elf.Class
	machine          elf.Machine
	interp           string
	needed           []string
	rpath, runpath   []string
	rpathSet, runSet bool
}

func readDynInfo(f *os.File) (info *dynInfo, err error) {
	defer func() {
		// debug/elf on a crafted file: refuse it, never crash.
		if r := recover(); r != nil {
			info, err = nil, fmt.Errorf("malformed ELF file: %v", r)
		}
	}()
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, err
	}
	info = &dynInfo{class: ef.Class, machine: ef.Machine}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP && p.Filesz < 4096 {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				info.interp = string(bytes.TrimRight(b, "\x00"))
			}
		}
	}
	if ef.Section(".dynamic") == nil && !hasDynamic(ef) {
		return info, nil
	}
	info.needed, _ = ef.DynString(elf.DT_NEEDED)
	if v, err := ef.DynString(elf.DT_RPATH); err == nil && len(v) > 0 {
		info.rpathSet = true
		for _, s := range v {
			info.rpath = append(info.rpath, splitPath(s)...)
		}
	}
	if v, err := ef.DynString(elf.DT_RUNPATH); err == nil && len(v) > 0 {
		info.runSet = true
		for _, s := range v {
			info.runpath = append(info.runpath, splitPath(s)...)
		}
	}
	return info, nil
}

func hasDynamic(ef *elf.File) bool {
	for _, p := range ef.Progs {
		if p.Type == elf.PT_DYNAMIC {
			return true
		}
	}
	return false
}

func splitPath(s string) []string {
	return strings.FieldsFunc(s, func(c rune) bool { return c == ':' || c == ';' })
}

// open opens p inside the root, symlinks resolved there.
func (r *rootSearch) open(p string) (*os.File, error) {
	if !path.IsAbs(p) {
		p = "/" + p
	}
	fd, err := unix.Openat2(r.rootfd, p, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	return f, nil
}

func (r *rootSearch) readFile(p string, max int64) ([]byte, error) {
	f, err := r.open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// try opens p and keeps it when it is an ELF object of the program's
// class and machine (the dynamic linker skips the others and searches
// on), returning it with its canonical path in the root.
func (r *rootSearch) try(p string) (*os.File, string) {
	f, err := r.open(p)
	if err != nil {
		return nil, ""
	}
	var hdr [20]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil || string(hdr[:4]) != elf.ELFMAG ||
		elf.Class(hdr[elf.EI_CLASS]) != r.class {
		f.Close()
		return nil, ""
	}
	var m elf.Machine
	if elf.Data(hdr[elf.EI_DATA]) == elf.ELFDATA2MSB {
		m = elf.Machine(binary.BigEndian.Uint16(hdr[18:]))
	} else {
		m = elf.Machine(binary.LittleEndian.Uint16(hdr[18:]))
	}
	if m != r.machine {
		f.Close()
		return nil, ""
	}
	return f, r.inRoot(f)
}

// inRoot is the path of f inside the root: what the kernel names it by
// for memtrace, less the root's own path when that is a prefix (a chroot
// in memtrace's namespace).
func (r *rootSearch) inRoot(f *os.File) string {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return f.Name()
	}
	if root, err := os.Readlink(r.proc + "/root"); err == nil && root != "/" {
		if rest, ok := strings.CutPrefix(p, root); ok && strings.HasPrefix(rest, "/") {
			return rest
		}
	}
	return p
}

// hostPath is a path by which memtrace's own lookups (the kernel's, when
// it places uprobes) reach f, whose path in the root is p: the kernel's
// name for f where that is a host path (a chroot in memtrace's
// namespace), else p under /proc/PID/root; either only where it leads to
// f itself.
func (r *rootSearch) hostPath(f *os.File, p string) (string, bool) {
	id := fdID(f)
	var cands []string
	if k, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err == nil {
		cands = append(cands, k)
	}
	cands = append(cands, r.proc+"/root"+p)
	for _, c := range cands {
		var st unix.Stat_t
		if unix.Stat(c, &st) == nil && [2]uint64{st.Dev, st.Ino} == id {
			return c, true
		}
	}
	return "", false
}

func fdID(f *os.File) [2]uint64 {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return [2]uint64{}
	}
	return [2]uint64{st.Dev, st.Ino}
}

// find looks a needed name up as the dynamic linker does for object from,
// returning the open file and its path in the root.
func (r *rootSearch) find(name string, from *dynInfo) (*os.File, string) {
	if name == "" || strings.ContainsRune(name, 0) {
		return nil, ""
	}
	if strings.Contains(name, "/") {
		if !path.IsAbs(name) {
			return nil, "" // relative to a working directory we do not know
		}
		return r.try(name)
	}
	var dirs []string
	origin := path.Dir(from.path)
	expand := func(ds []string, o string) {
		for _, d := range ds {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", o), "$ORIGIN", o)
			if path.IsAbs(d) && len(dirs) < rootMaxDirs {
				dirs = append(dirs, d)
			}
		}
	}
	if !from.runSet {
		expand(from.rpath, origin)
		if from != r.exe && !r.exe.runSet {
			expand(r.exe.rpath, path.Dir(r.exe.path))
		}
	}
	for _, kv := range r.env {
		if v, ok := strings.CutPrefix(kv, "LD_LIBRARY_PATH="); ok {
			expand(splitPath(v), origin)
		}
	}
	expand(from.runpath, origin)
	for _, d := range dirs {
		if f, p := r.try(path.Join(d, name)); f != nil {
			return f, p
		}
	}
	for _, p := range r.cache[name] {
		if f, cp := r.try(p); f != nil {
			return f, cp
		}
	}
	for _, d := range r.defaults {
		if f, p := r.try(path.Join(d, name)); f != nil {
			return f, p
		}
	}
	return nil, ""
}

// readCache reads the root's /etc/ld.so.cache; none, or one we cannot
// read, is an empty one (the default directories still apply).
func (r *rootSearch) readCache() map[string][]string {
	b, err := r.readFile("/etc/ld.so.cache", ldCacheMax)
	if err != nil {
		return nil
	}
	ents, _ := parseLdCache(b)
	m := map[string][]string{}
	for _, e := range ents {
		m[e.name] = append(m[e.name], e.path)
	}
	return m
}

// defaultLibDirs are the directories a dynamic linker searches last: the
// Debian multiarch ones and the classic ones for glibc, musl's own list
// (/etc/ld-musl-ARCH.path, else its built-in one).
func defaultLibDirs(m elf.Machine, interp string, r *rootSearch) []string {
	if base := path.Base(interp); strings.HasPrefix(base, "ld-musl-") {
		arch := strings.TrimSuffix(strings.TrimPrefix(base, "ld-musl-"), ".so.1")
		if b, err := r.readFile("/etc/ld-musl-"+arch+".path", 64<<10); err == nil {
			var ds []string
			for _, d := range strings.FieldsFunc(string(b), func(c rune) bool { return c == ':' || c == '\n' }) {
				if d = strings.TrimSpace(d); path.IsAbs(d) && len(ds) < rootMaxDirs {
					ds = append(ds, d)
				}
			}
			return ds
		}
		return []string{"/lib", "/usr/local/lib", "/usr/lib"}
	}
	triplet := map[elf.Machine]string{elf.EM_X86_64: "x86_64-linux-gnu", elf.EM_AARCH64: "aarch64-linux-gnu",
		elf.EM_386: "i386-linux-gnu", elf.EM_ARM: "arm-linux-gnueabihf"}[m]
	var ds []string
	if triplet != "" {
		ds = append(ds, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	return append(ds, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// ldCacheEntry is one library of an ld.so.cache.
type ldCacheEntry struct {
	flags      int32
	name, path string
}

// The new cache format (glibc 2.32 and later write only it; older ones
// write it after the old one): "glibc-ld.so.cache1.1", the entry count,
// the string table's size, then 24-byte entries whose strings are
// offsets from the header's start.
const (
	ldCacheMagicNew = "glibc-ld.so.cache1.1"
	ldCacheMagicOld = "ld.so-1.7.0"
	ldCacheHdrNew   = 48
	ldCacheEntNew   = 24
	ldCacheHdrOld   = 16
	ldCacheEntOld   = 12
)

var errLdCache = errors.New("not a readable ld.so.cache (new format)")

// parseLdCache reads the entries of an ld.so.cache in the new format,
// found at its start or after an old-format part. Bad offsets end the
// read; the entries read before are returned with the error.
func parseLdCache(b []byte) ([]ldCacheEntry, error) {
	base := 0
	if bytes.HasPrefix(b, []byte(ldCacheMagicOld)) {
		if len(b) < ldCacheHdrOld {
			return nil, errLdCache
		}
		n := uint64(binary.LittleEndian.Uint32(b[12:]))
		off := (12 + 4 + n*ldCacheEntOld + 7) &^ 7
		if off > uint64(len(b)) {
			return nil, errLdCache
		}
		base = int(off)
	}
	c := b[base:]
	if len(c) < ldCacheHdrNew || !bytes.HasPrefix(c, []byte(ldCacheMagicNew)) {
		return nil, errLdCache
	}
	n := uint64(binary.LittleEndian.Uint32(c[20:]))
	if n > uint64(len(c)-ldCacheHdrNew)/ldCacheEntNew {
		return nil, fmt.Errorf("%w: %d entries do not fit", errLdCache, n)
	}
	str := func(off uint32) (string, bool) {
		if uint64(off) >= uint64(len(c)) {
			return "", false
		}
		s := c[off:]
		i := bytes.IndexByte(s, 0)
		if i <= 0 {
			return "", false
		}
		return string(s[:i]), true
	}
	out := make([]ldCacheEntry, 0, n)
	for i := uint64(0); i < n; i++ {
		e := c[ldCacheHdrNew+i*ldCacheEntNew:]
		name, ok1 := str(binary.LittleEndian.Uint32(e[4:]))
		p, ok2 := str(binary.LittleEndian.Uint32(e[8:]))
		if !ok1 || !ok2 {
			return out, fmt.Errorf("%w: entry %d has a bad string offset", errLdCache, i)
		}
		out = append(out, ldCacheEntry{flags: int32(binary.LittleEndian.Uint32(e[0:])), name: name, path: p})
	}
	return out, nil
}
