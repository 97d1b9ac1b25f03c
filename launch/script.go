package launch

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/internal/asuser"
)

// Shell runs a program file the kernel cannot execute but a shell would:
// a script without a #! line, as execvp(3) and every shell run it.
const Shell = "/bin/sh"

// headSize is how much of PROG is read to tell its format: the kernel's
// binfmt_misc magics sit within the first 128 bytes (BINPRM_BUF_SIZE
// is 256), and bash's own binary-file check reads 80.
const headSize = 256

// Resolve decides how PROG (argv[0]) is started, before anything is: a
// file the kernel executes (an ELF file for this machine, a #! script, a
// format that binfmt_misc has a handler for) as it is; a text file without #! through
// /bin/sh, as a shell would (argv becomes /bin/sh PROG ARGS, so what is
// traced is the shell that runs the script, as with a #!/bin/sh line); any
// other file is refused with one line and exit status 126, a shell's "cannot
// execute". A PROG that cannot be found or read is left to the launchers,
// whose errors say so.
func Resolve(argv []string) ([]string, int, error) {
	if len(argv) == 0 {
		return argv, 0, nil
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return argv, 0, nil
	}
	// As the user behind sudo: a file they may not read is the kernel's
	// to judge at exec, and root's reading says nothing of it to them.
	f, err := asuser.Open(path)
	if err != nil {
		return argv, 0, nil
	}
	head := make([]byte, headSize)
	n, _ := io.ReadFull(f, head)
	f.Close()
	head = head[:n]
	if kernelRuns(head, path, readBinfmt("/proc/sys/fs/binfmt_misc")) {
		return argv, 0, nil
	}
	if looksBinary(head) {
		return nil, 126, fmt.Errorf("cannot execute %s: exec format error: it is neither an executable for this machine nor a script", argv[0])
	}
	return append([]string{Shell, path}, argv[1:]...), 0, nil
}

// kernelRuns says whether execve runs a file that begins with head.
func kernelRuns(head []byte, path string, handlers []binfmt) bool {
	if bytes.HasPrefix(head, []byte("#!")) {
		return true
	}
	if bytes.HasPrefix(head, []byte("\x7fELF")) && nativeELF(head) {
		return true
	}
	for _, h := range handlers {
		if h.matches(head, path) {
			return true
		}
	}
	return false
}

// nativeELF says whether an ELF header's machine is one this kernel runs
// without binfmt_misc: its own, or its 32-bit compat machine (which may be
// configured out: the kernel's word then, at exec). A header too short to
// tell is the kernel's to judge.
func nativeELF(head []byte) bool {
	if len(head) < 20 {
		return true
	}
	var m elf.Machine
	switch head[5] {
	case 1:
		m = elf.Machine(binary.LittleEndian.Uint16(head[18:]))
	case 2:
		m = elf.Machine(binary.BigEndian.Uint16(head[18:]))
	default:
		return true
	}
	switch runtime.GOARCH {
	case "amd64":
		return m == elf.EM_X86_64 || m == elf.EM_386
	case "386":
		return m == elf.EM_386
	case "arm64":
		return m == elf.EM_AARCH64 || m == elf.EM_ARM
	case "arm":
		return m == elf.EM_ARM
	}
	return true
}

// looksBinary is bash's test (check_binary_file): a NUL byte in the first
// line of the first 80 bytes.
func looksBinary(head []byte) bool {
	if len(head) > 80 {
		head = head[:80]
	}
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	return bytes.IndexByte(head, 0) >= 0
}

// binfmt is one enabled binfmt_misc handler: a magic at an offset under a
// mask, or a file-name extension.
type binfmt struct {
	ext         string
	offset      int
	magic, mask []byte
}

func (h binfmt) matches(head []byte, path string) bool {
	if h.ext != "" {
		return strings.TrimPrefix(filepath.Ext(path), ".") == h.ext
	}
	if len(h.magic) == 0 || h.offset < 0 || h.offset+len(h.magic) > len(head) {
		return false
	}
	for i, m := range h.magic {
		b := head[h.offset+i]
		if i < len(h.mask) {
			b &= h.mask[i]
		}
		if b != m {
			return false
		}
	}
	return true
}

// readBinfmt lists the enabled handlers of binfmt_misc mounted at dir
// (none when it is not mounted or is disabled).
func readBinfmt(dir string) []binfmt {
	if st, err := os.ReadFile(filepath.Join(dir, "status")); err != nil || strings.TrimSpace(string(st)) != "enabled" {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []binfmt
	for _, e := range ents {
		if e.Name() == "status" || e.Name() == "register" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if h, ok := parseBinfmt(b); ok {
			out = append(out, h)
		}
	}
	return out
}

// parseBinfmt reads one handler's file (enabled, interpreter, flags,
// offset N, magic HEX, mask HEX, or extension .EXT); ok is false for a
// disabled handler or one it cannot read.
func parseBinfmt(b []byte) (binfmt, bool) {
	var h binfmt
	enabled := false
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch k {
		case "enabled":
			enabled = true
		case "offset":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > headSize {
				return binfmt{}, false
			}
			h.offset = n
		case "magic":
			m, err := hex.DecodeString(v)
			if err != nil {
				return binfmt{}, false
			}
			h.magic = m
		case "mask":
			m, err := hex.DecodeString(v)
			if err != nil {
				return binfmt{}, false
			}
			h.mask = m
		case "extension":
			h.ext = strings.TrimPrefix(v, ".")
		}
	}
	if !enabled || (h.ext == "" && len(h.magic) == 0) {
		return binfmt{}, false
	}
	return h, true
}
