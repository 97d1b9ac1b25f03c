package launch

import (
	"bufio"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

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
func launchLibs(path string, env []string) []string {
	var libs []string
	seen := map[string]bool{}
	add := func(p string) {
		if p == "" || seen[p] {
			return
		}
		if _, err := os.Stat(p); err == nil {
			seen[p] = true
			libs = append(libs, p)
		}
	}
	if tracer.OwnAllocator(path) {
		add(path)
	}
	interp, isELF := elfInterp(path)
	if isELF && interp == "" {
		return libs
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
	return libs
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
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
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
