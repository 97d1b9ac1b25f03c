package launch

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func writeExec(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A script without #! runs through /bin/sh, as a shell runs it; a binary
// file the kernel has no format for is one line and 126; ELF files and #!
// scripts are left as they are.
func TestResolve(t *testing.T) {
	script := writeExec(t, "script", []byte("echo hi\nexit 3\n"))
	argv, st, err := Resolve([]string{script, "a", "b"})
	if err != nil || st != 0 || !slices.Equal(argv, []string{Shell, script, "a", "b"}) {
		t.Fatalf("script without #!: %q %d %v", argv, st, err)
	}
	empty := writeExec(t, "empty", nil)
	if argv, _, err := Resolve([]string{empty}); err != nil || argv[0] != Shell {
		t.Fatalf("empty file: %q %v, want it run by the shell (as bash and execvp do)", argv, err)
	}
	bin := writeExec(t, "bin", []byte("MZ\x90\x00\x03\x00\x00\x00"))
	_, st, err = Resolve([]string{bin})
	if err == nil || st != 126 || !strings.Contains(err.Error(), "exec format error") || strings.Contains(err.Error(), "MZ") {
		t.Fatalf("binary file: %d %v, want 126 and exec format error (without the file's bytes)", st, err)
	}
	for _, keep := range [][]string{{"/bin/sh", "-c", "true"}, {writeExec(t, "sheb", []byte("#!/bin/sh\necho\n"))}, {"/nonexistent/x"}} {
		if argv, st, err := Resolve(keep); err != nil || st != 0 || !slices.Equal(argv, keep) {
			t.Errorf("Resolve(%q) = %q %d %v, want it unchanged", keep, argv, st, err)
		}
	}
}

func TestLooksBinary(t *testing.T) {
	for s, want := range map[string]bool{"": false, "echo hi\n": false, "a\x00b": true, "echo\n\x00": false,
		strings.Repeat("x", 80) + "\x00": false, "\x7fELF\x02\x01\x01\x00": true} {
		if got := looksBinary([]byte(s)); got != want {
			t.Errorf("looksBinary(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestBinfmt(t *testing.T) {
	h, ok := parseBinfmt([]byte("enabled\ninterpreter /usr/bin/qemu-aarch64\nflags: OCF\noffset 0\nmagic 7f454c460201010000000000000000000200b700\nmask ffffffffffffff00fffffffffffffffffeffffff\n"))
	if !ok {
		t.Fatal("qemu-aarch64's handler not read")
	}
	elf := []byte("\x7fELF\x02\x01\x01\x03\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00rest")
	if !h.matches(elf, "/x") || h.matches([]byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00"), "/x") || h.matches(elf[:5], "/x") {
		t.Fatal("magic under mask")
	}
	if _, ok := parseBinfmt([]byte("disabled\noffset 0\nmagic 4d5a\n")); ok {
		t.Fatal("a disabled handler counts")
	}
	jar, ok := parseBinfmt([]byte("enabled\ninterpreter /usr/bin/jexec\nflags: \nextension .jar\n"))
	if !ok || !jar.matches(nil, "/a/b.jar") || jar.matches(nil, "/a/bjar") {
		t.Fatalf("extension handler: %+v %v", jar, ok)
	}
	mz, _ := parseBinfmt([]byte("enabled\noffset 0\nmagic 4d5a\n"))
	if !kernelRuns([]byte("MZ\x90\x00"), "/x.exe", []binfmt{mz}) || kernelRuns([]byte("MZ\x90\x00"), "/x.exe", nil) {
		t.Fatal("a binfmt_misc format is the kernel's")
	}
	// An ELF file for another machine is the kernel's only with a
	// handler (qemu-user's).
	if runtime.GOARCH == "amd64" {
		if kernelRuns(elf, "/x", nil) || !kernelRuns(elf, "/x", []binfmt{h}) {
			t.Fatal("an aarch64 ELF file on x86-64")
		}
		own := []byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00")
		i386 := []byte("\x7fELF\x01\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x03\x00")
		if !kernelRuns(own, "/x", nil) || !kernelRuns(i386, "/x", nil) || !kernelRuns(own[:8], "/x", nil) {
			t.Fatal("an x86-64 or i386 ELF file refused")
		}
	}
	if readBinfmt(t.TempDir()) != nil {
		t.Fatal("handlers from a directory without binfmt_misc's status")
	}
}

// FuzzBinfmt: any handler file is read without a panic, and a handler
// read never matches beyond the bytes given.
func FuzzBinfmt(f *testing.F) {
	f.Add([]byte("enabled\noffset 0\nmagic 7f454c46\nmask ffffffff\n"), []byte("\x7fELF"))
	f.Add([]byte("enabled\nextension .jar\n"), []byte("PK"))
	f.Add([]byte("enabled\noffset 300\nmagic 00\n"), []byte{})
	f.Fuzz(func(t *testing.T, file, head []byte) {
		h, ok := parseBinfmt(file)
		if !ok {
			return
		}
		h.matches(head, "/p/x.jar")
		looksBinary(head)
	})
}
