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
func launchLibs(path string) []string {
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
		out, _ := exec.Command(interp, "--list", path).Output()
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)"
			f := strings.Fields(sc.Text())
			for i, s := range f {
				if s == "=>" && i+1 < len(f) && strings.HasPrefix(f[i+1], "/") {
					add(f[i+1])
				}
			}
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
