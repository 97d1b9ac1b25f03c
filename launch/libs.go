package launch

import (
	"bufio"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/tracer"
)

// launchLibs lists what PROG's allocations go through: PROG itself when it
// has its own allocator (a static binary), and for a dynamically linked
// program the libraries it will load, asking its dynamic linker (what ldd
// does, without running PROG), plus the system's C++ runtimes so that a
// C++ library dlopen'ed later is covered from its first call. A static
// program loads none of them: probing the system libc for it would only
// hide that nothing was probed.
//
// env is the environment PROG runs with: the linker resolves with its
// LD_PRELOAD and LD_LIBRARY_PATH, not memtrace's, and lists the preloaded
// libraries (LD_PRELOAD, /etc/ld.so.preload) too, where an allocator
// such as jemalloc is often put.
//
// The answers of the last few seconds are remembered by the file's
// identity and the loader's environment: at PROG's exec the launcher asks
// again about the file it listed at the start, while PROG is held, and a
// --follow run's children exec the same programs over and over.
//
// For /proc/PID/exe (an image a traced process just exec'ed) in a chroot
// or a mount namespace of its own, the libraries are found inside the
// process's root instead (tracer.RootLibraries), before the remembered
// answers, which a host file bind-mounted into a container would share.
func launchLibs(path string, env []string) []string {
	if pid, ok := procExePID(path); ok {
		if libs, foreign := tracer.RootLibraries(pid, env); foreign {
			return libs
		}
	}
	key, cacheable := libsKey(path, env)
	if cacheable {
		if own, rest, ok := recentLibs.get(key); ok {
			return withOwn(path, own, rest)
		}
	}
	own, rest := listLibs(path, env)
	if cacheable {
		recentLibs.put(key, own, rest)
	}
	return withOwn(path, own, rest)
}

// procExePID returns PID for a path /proc/PID/exe.
func procExePID(path string) (int, bool) {
	rest, ok := strings.CutPrefix(path, "/proc/")
	if !ok {
		return 0, false
	}
	n, ok := strings.CutSuffix(rest, "/exe")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(n)
	return pid, err == nil && pid > 0
}

// withOwn is launchLibs' answer: path first when it has its own allocator.
func withOwn(path string, own bool, rest []string) []string {
	var libs []string
	if own {
		libs = append(libs, path)
	}
	for _, p := range rest {
		if p != path || !own {
			libs = append(libs, p)
		}
	}
	return libs
}

// libsKey names what launchLibs' answer depends on: the file (its identity
// and version, whatever the path it is reached by, /proc/PID/exe too) and
// the loader's environment.
func libsKey(path string, env []string) (string, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", false
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d\x00%s", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec,
		st.Ctim.Sec, st.Ctim.Nsec, strings.Join(loaderEnv(env), "\x00")), true
}

// recentLibs are launchLibs' answers of the last libsTTL, a few at most: a
// library installed since is seen after that.
var recentLibs libsCache

const (
	libsTTL     = 2 * time.Second
	libsEntries = 8
)

type libsCache struct {
	mu      sync.Mutex
	entries []libsEntry // oldest first
}

type libsEntry struct {
	key  string
	at   time.Time
	own  bool
	rest []string
}

func (c *libsCache) get(key string) (bool, []string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.key == key && time.Since(e.at) < libsTTL {
			return e.own, slices.Clone(e.rest), true
		}
	}
	return false, nil, false
}

func (c *libsCache) put(key string, own bool, rest []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = slices.DeleteFunc(c.entries, func(e libsEntry) bool { return e.key == key || time.Since(e.at) >= libsTTL })
	if len(c.entries) >= libsEntries {
		c.entries = c.entries[1:]
	}
	c.entries = append(c.entries, libsEntry{key: key, at: time.Now(), own: own, rest: slices.Clone(rest)})
}

// listLibs does launchLibs' work: whether PROG has its own allocator, and
// the other files, each once.
func listLibs(path string, env []string) (bool, []string) {
	var libs []string
	seen := map[string]bool{path: true}
	add := func(p string) {
		if p == "" || seen[p] {
			return
		}
		if _, err := os.Stat(p); err == nil {
			seen[p] = true
			libs = append(libs, p)
		}
	}
	own := tracer.OwnAllocator(path)
	if !own {
		delete(seen, path)
	}
	interp, isELF := elfInterp(path)
	if isELF && interp == "" {
		return own, libs
	}
	if interp != "" {
		cmd := exec.Command(interp, "--list", path)
		cmd.Env = loaderEnv(env)
		out, _ := cmd.Output()
		for _, lib := range listedLibs(string(out), interp) {
			add(lib)
		}
	}
	// Also for a script: its interpreter is dynamically linked.
	for _, dir := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
		for _, name := range []string{"libc.so.6", "libstdc++.so.6", "libc++.so.1"} {
			if p, err := filepath.EvalSymlinks(filepath.Join(dir, name)); err == nil {
				add(p)
			}
		}
	}
	return own, libs
}

// loaderEnv is what of PROG's environment the dynamic linker is run with
// to list its libraries: only what decides which files it maps. memtrace
// runs it with its own rights (root), and other variables would make it
// run code of PROG's choosing (LD_AUDIT's modules, the IFUNC resolvers
// that LD_BIND_NOW and LD_WARN's relocation runs).
func loaderEnv(env []string) []string {
	out := []string{}
	for _, kv := range env {
		if strings.HasPrefix(kv, "LD_PRELOAD=") || strings.HasPrefix(kv, "LD_LIBRARY_PATH=") {
			out = append(out, kv)
		}
	}
	return out
}

// listedLibs reads `ld.so --list` output: the libraries found by name
// ("libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)") and those
// preloaded by path ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
// (0x...)"), but not the dynamic linker itself, which is listed the same
// way and whose minimal malloc is its own, and not the vDSO.
func listedLibs(out, interp string) []string {
	self := interp
	if p, err := filepath.EvalSymlinks(interp); err == nil {
		self = p
	}
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[1] == "=>":
			if strings.HasPrefix(f[2], "/") {
				libs = append(libs, f[2])
			}
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			p := f[0]
			if r, err := filepath.EvalSymlinks(p); err == nil {
				p = r
			}
			if p != self {
				libs = append(libs, f[0])
			}
		}
	}
	return libs
}

// procEnviron is the environment of process pid (its current image's), or
// none when it cannot be read.
func procEnviron(pid int) []string {
	env, _ := procfs.ReadEnviron(pid)
	return env
}

// elfInterp returns PROG's dynamic linker, "" for a static binary, and
// whether PROG is an ELF file at all (a script is not).
func elfInterp(path string) (string, bool) {
	f, err := elf.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return "", true
			}
			return strings.TrimRight(string(b), "\x00"), true
		}
	}
	return "", true
}

// untraceable says in one line why a program gave memtrace nothing to
// probe; what names it (PROG, or the process), exe is its file, and
// launch offers the LD_PRELOAD fallback where that could work (not for a
// static or Go program, which load no preloaded library).
func untraceable(what, exe string, launch bool) error {
	if _, err := buildinfo.ReadFile(exe); err == nil {
		return fmt.Errorf("%s is a Go program: its allocator is Go's own, not malloc: memtrace cannot trace it", what)
	}
	if interp, isELF := elfInterp(exe); isELF && interp == "" {
		if f, err := elf.Open(exe); err == nil {
			stripped := f.Section(".symtab") == nil
			f.Close()
			if stripped {
				return fmt.Errorf("%s is statically linked and stripped: its malloc has no symbol to probe: memtrace cannot trace it; trace a build that is not stripped", what)
			}
		}
		return fmt.Errorf("%s is statically linked and has no malloc or operator new of its own: memtrace has nothing to probe in it", what)
	}
	hint := ""
	if launch {
		hint = "; try --preload"
	}
	return fmt.Errorf("%s links no library with allocation functions: memtrace traces programs that use libc's malloc, libstdc++ or a malloc library%s", what, hint)
}

// untraceableProcess is untraceable for a process given with -p.
func untraceableProcess(pid int) error {
	exe := "/proc/" + strconv.Itoa(pid) + "/exe"
	what := "process " + strconv.Itoa(pid)
	if p, err := os.Readlink(exe); err == nil {
		what += " (" + p + ")"
	}
	return untraceable(what, exe, false)
}
