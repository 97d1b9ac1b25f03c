package symbols

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/procfs"
)

// Fuzz targets for everything that parses untrusted bytes. `go test` runs
// their seeds; scripts/fuzz-symbols.sh fuzzes each for a while.

var sentinels = []error{ErrNotELF, ErrMalformed, ErrNoSymbols, ErrNoDebugInfo, ErrNotFound, ErrTooLarge, ErrBadMaps}

func checkSentinel(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("%s: error wraps no sentinel: %v", what, err)
}

var fuzzLimits = Limits{MaxSection: 4 << 20, MaxMiniDebugInfo: 4 << 20, MaxSymbols: 1 << 16}

// memModule builds a Module over bytes, with the debug-file search turned
// off (a fuzzed debuglink must not make the test read the disk).
func memModule(data []byte) (*Module, error) {
	c := NewCache(&Options{DebugDirs: []string{}, Limits: fuzzLimits})
	e, err := openELF(bytes.NewReader(data), int64(len(data)), c.opts.Limits)
	if err != nil {
		return nil, err
	}
	m := &Module{path: "mem", cache: c, elf: e, root: hostFS, size: int64(len(data))}
	m.dbgOnce.Do(func() {})
	func() {
		defer guard("build ID", &err)
		m.buildID = e.buildID()
		m.loads = e.loads()
	}()
	return m, err
}

// fuzzSeeds returns small real ELF files: a -g C program, its stripped
// build, a shared library and the debug-only file.
var fuzzSeedCache [][]byte

func fuzzSeeds(f *testing.F) [][]byte {
	if fuzzSeedCache != nil {
		return fuzzSeedCache
	}
	dir := f.TempDir()
	src := filepath.Join(dir, "s.c")
	os.WriteFile(src, []byte(hiddenC+"\nstatic inline __attribute__((always_inline)) int inl(int x) { return x + 1; }\nint use(int x) { return inl(x) * 2; }\n"), 0o644)
	var out [][]byte
	build := func(name string, args ...string) {
		p := filepath.Join(dir, name)
		cmd := exec.Command("gcc", append(args, "-o", p, src)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			f.Fatalf("gcc: %v\n%s", err, b)
		}
		b, _ := os.ReadFile(p)
		out = append(out, b)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		f.Fatal("gcc is required to build fuzz seeds")
	}
	build("g0", "-g", "-O0")
	build("g2", "-g", "-O2", "-gdwarf-4")
	build("so", "-g", "-O1", "-shared", "-fPIC", "-Wl,-z,now")
	build("s", "-O1", "-s")
	fuzzSeedCache = out
	return out
}

func FuzzELFSymbols(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, uint64(0x1139))
	}
	f.Add([]byte("\x7fELF"), uint64(0))
	f.Add([]byte("not elf"), uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, addr uint64) {
		m, err := memModule(data)
		if err != nil {
			checkSentinel(t, "open", err)
			return
		}
		_, err = m.symbols()
		checkSentinel(t, "symbols", err)
		name, off, err := m.Symbol(addr)
		checkSentinel(t, "Symbol", err)
		if err == nil {
			if v, err := m.SymbolValue(name); err != nil || v+off != addr {
				// A name can be shared by several addresses (local
				// statics in different files); the value is one of them.
				if err != nil {
					t.Fatalf("SymbolValue(%q) after Symbol found it: %v", name, err)
				}
			}
		}
		for _, l := range m.loads {
			_ = m.VAddr(l.off)
		}
		m.elf.debugLink()
	})
}

func FuzzDWARFLine(f *testing.F) {
	for _, s := range fuzzSeeds(f)[:3] {
		// Seed with addresses inside the code so the line path runs.
		m, err := memModule(s)
		if err != nil {
			f.Fatal(err)
		}
		t, _ := m.symbols()
		for i := 0; t != nil && i < len(t.syms); i += max(1, len(t.syms)/4) {
			f.Add(s, t.syms[i].addr+1)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, pc uint64) {
		m, err := memModule(data)
		if err != nil {
			checkSentinel(t, "open", err)
			return
		}
		for _, a := range []uint64{pc, pc + 1, pc + 16} {
			fr, err := m.Source(a)
			checkSentinel(t, "Source", err)
			if err == nil && len(fr) == 0 {
				t.Fatal("Source returned no frames and no error")
			}
		}
		_, err = m.Resolve(pc, WithSource|ReturnAddress)
		checkSentinel(t, "Resolve", err)
	})
}

func FuzzParseMaps(f *testing.F) {
	raw, _ := os.ReadFile("/proc/self/maps")
	f.Add(string(raw))
	f.Add("00400000-00401000 r-xp 00000000 fd:1a 99 /tmp/dir with spaces/p (deleted)\n")
	f.Add("1000-2000 rw-p 0 00:00 0\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		pms, err := procfs.ParseMaps(strings.NewReader(s))
		checkSentinel(t, "ParseMaps", err)
		ms := ProcMappings(pms)
		for _, m := range ms {
			if m.End <= m.Start || len(m.Perms) != 4 {
				t.Fatalf("accepted an impossible mapping %+v", m)
			}
			// What we parsed prints back to a line that converts the same.
			line := fmt.Sprintf("%x-%x %s %x %x:%x %d %s", m.Start, m.End, m.Perms, m.Offset, m.File.Major, m.File.Minor, m.File.Inode, m.Path)
			if m.Deleted {
				line += " (deleted)"
			}
			pm, err := procfs.ParseMapsLine(line)
			if m2 := ProcMapping(&pm); err != nil || m2 != m {
				t.Fatalf("round trip of %+v via %q: %+v, %v", m, line, m2, err)
			}
		}
		// The address space must take whatever the parser accepted.
		as, _ := NewAddressSpace(NewCache(nil), 0)
		for i := range ms {
			ms[i].Perms = "r--p" // no file opening from fuzzed paths
		}
		as.AddSnapshot(ms, 1)
		for _, m := range ms {
			if _, ok := as.Lookup(m.Start); !ok {
				t.Fatalf("mapping %+v added but not found", m)
			}
		}
	})
}
