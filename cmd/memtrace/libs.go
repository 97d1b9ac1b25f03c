package main

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// launchLibs lists the libraries PROG will load, asking its dynamic linker
// (what ldd does, without running PROG), plus the system's C++ runtimes so
// that a C++ library dlopen'ed later is covered from its first call.
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
	if interp := elfInterp(path); interp != "" {
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
	for _, dir := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
		for _, name := range []string{"libc.so.6", "libstdc++.so.6", "libc++.so.1"} {
			if p, err := filepath.EvalSymlinks(filepath.Join(dir, name)); err == nil {
				add(p)
			}
		}
	}
	return libs
}

// elfInterp returns PROG's dynamic linker, or "" for a static binary or a
// script.
func elfInterp(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return ""
			}
			return strings.TrimRight(string(b), "\x00")
		}
	}
	return ""
}
