package symbols

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/memtrace/memtrace/internal/bpftest"
)

const hiddenC = `#include <stdio.h>
#include <stdlib.h>
static __attribute__((noinline)) int hidden_helper(int x) {
	int y = x * 3;
	y += 1; /* MARK:hidden */
	return y;
}
int main(int c, char **v) {
	printf("%d\n", hidden_helper(c));
	void *p = malloc(3);
	free(p);
	return 0;
}
`

type strippedSet struct {
	dir, src, full, stripped, debug, buildID string
}

// buildStripped compiles hiddenC with -g and splits it the way distributions
// do: a stripped binary plus a --only-keep-debug file.
func buildStripped(t *testing.T) *strippedSet {
	t.Helper()
	needTool(t, "gcc")
	needTool(t, "objcopy")
	needTool(t, "strip")
	s := &strippedSet{dir: t.TempDir()}
	s.src = filepath.Join(s.dir, "hidden.c")
	writeFile(t, s.src, hiddenC)
	s.full = filepath.Join(s.dir, "full")
	s.stripped = filepath.Join(s.dir, "bin", "hidden")
	s.debug = filepath.Join(s.dir, "hidden.debug")
	os.MkdirAll(filepath.Dir(s.stripped), 0o755)
	run(t, "gcc", "-g", "-O0", "-Wl,--build-id", "-o", s.full, s.src)
	run(t, "objcopy", "--only-keep-debug", s.full, s.debug)
	run(t, "strip", "--strip-debug", "--strip-unneeded", "-o", s.stripped, s.full)
	out := run(t, "readelf", "-n", s.full)
	m := regexp.MustCompile(`Build ID: ([0-9a-f]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no build ID in readelf -n output:\n%s", out)
	}
	s.buildID = m[1]
	return s
}

// hiddenAddr is the address of the static function according to nm on the
// unstripped build.
func hiddenAddr(t *testing.T, full string) uint64 {
	t.Helper()
	for _, l := range strings.Split(run(t, "nm", full), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[2] == "hidden_helper" {
			v, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatal("nm: no hidden_helper")
	return 0
}

func checkHidden(t *testing.T, c *Cache, s *strippedSet, bin, wantDebug string, wantSource bool) {
	t.Helper()
	m, err := c.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	if m.BuildID() != s.buildID {
		t.Errorf("build ID %q, readelf says %q", m.BuildID(), s.buildID)
	}
	addr := hiddenAddr(t, s.full)
	// The instruction for the MARK line lies inside the function body; the
	// line table of the full build (checked by addr2line) is the oracle.
	pc := addr + 8
	fr, err := m.Resolve(pc, WithSource)
	if fr.Symbol != "hidden_helper" || fr.Offset != 8 {
		t.Fatalf("%s: %#x resolved to %q+%#x (%v), want hidden_helper+0x8", bin, pc, fr.Symbol, fr.Offset, err)
	}
	if got := m.DebugFile(); got != wantDebug {
		t.Errorf("debug file %q, want %q", got, wantDebug)
	}
	if !wantSource {
		if !errors.Is(err, ErrNoDebugInfo) || fr.File != "" {
			t.Fatalf("expected no source without DWARF, got %s:%d, %v", fr.File, fr.Line, err)
		}
		return
	}
	a2l := strings.TrimSpace(run(t, "addr2line", "-e", s.full, strconv.FormatUint(pc, 16)))
	file, line, _ := strings.Cut(a2l, ":")
	line, _, _ = strings.Cut(line, " ")
	if err != nil || fr.File != file || strconv.Itoa(fr.Line) != line {
		t.Fatalf("source %s:%d (%v), addr2line on the full build says %s", fr.File, fr.Line, err, a2l)
	}
}

func TestStrippedWithDebuglink(t *testing.T) {
	s := buildStripped(t)
	// The stripped binary alone knows nothing of the static function.
	c0 := NewCache(&Options{DebugDirs: []string{t.TempDir()}})
	m0, err := c0.Open(s.stripped)
	if err != nil {
		t.Fatal(err)
	}
	if name, _, _ := m0.Symbol(hiddenAddr(t, s.full) + 8); name == "hidden_helper" {
		t.Fatal("stripped binary resolved a static function without any debug file")
	}
	c0.Close()

	linked := filepath.Join(s.dir, "linked", "hidden")
	os.MkdirAll(filepath.Dir(linked), 0o755)
	run(t, "objcopy", "--add-gnu-debuglink="+s.debug, s.stripped, linked)
	dbgName := filepath.Base(s.debug)
	data, _ := os.ReadFile(s.debug)

	debugRoot := t.TempDir()
	places := map[string]string{
		"beside":       filepath.Join(filepath.Dir(linked), dbgName),
		"dot-debug":    filepath.Join(filepath.Dir(linked), ".debug", dbgName),
		"global-debug": filepath.Join(debugRoot, filepath.Dir(linked), dbgName),
	}
	for name, p := range places {
		t.Run(name, func(t *testing.T) {
			os.MkdirAll(filepath.Dir(p), 0o755)
			writeFile(t, p, string(data))
			defer os.Remove(p)
			c := NewCache(&Options{DebugDirs: []string{debugRoot}})
			defer c.Close()
			checkHidden(t, c, s, linked, p, true)
		})
	}
	t.Run("crc-mismatch", func(t *testing.T) {
		p := places["beside"]
		writeFile(t, p, string(data)+"x") // still a valid ELF, wrong CRC
		defer os.Remove(p)
		c := NewCache(&Options{DebugDirs: []string{debugRoot}})
		defer c.Close()
		m, err := c.Open(linked)
		if err != nil {
			t.Fatal(err)
		}
		if name, _, _ := m.Symbol(hiddenAddr(t, s.full) + 8); name == "hidden_helper" || m.DebugFile() != "" {
			t.Fatalf("a debug file with the wrong CRC was used: %q", m.DebugFile())
		}
	})
}

func TestStrippedWithBuildIDDir(t *testing.T) {
	s := buildStripped(t)
	root := t.TempDir()
	p := filepath.Join(root, ".build-id", s.buildID[:2], s.buildID[2:]+".debug")
	os.MkdirAll(filepath.Dir(p), 0o755)
	data, _ := os.ReadFile(s.debug)
	writeFile(t, p, string(data))
	c := NewCache(&Options{DebugDirs: []string{filepath.Join(root, "missing"), root}})
	defer c.Close()
	checkHidden(t, c, s, s.stripped, p, true)

	// A file at the build-id path whose own build ID differs is refused.
	other := t.TempDir()
	q := filepath.Join(other, ".build-id", s.buildID[:2], s.buildID[2:]+".debug")
	os.MkdirAll(filepath.Dir(q), 0o755)
	exe, _ := os.ReadFile(fixtures(t).prog)
	writeFile(t, q, string(exe))
	c2 := NewCache(&Options{DebugDirs: []string{other}})
	defer c2.Close()
	m, _ := c2.Open(s.stripped)
	if m.DebugFile() != "" {
		t.Fatalf("debug file with another build ID was used: %s", m.DebugFile())
	}
}

// MiniDebugInfo: a .gnu_debugdata section holding an xz-compressed ELF with
// the function symbols (as Fedora builds ship), and no DWARF.
func TestMiniDebugInfo(t *testing.T) {
	s := buildStripped(t)
	keep := filepath.Join(s.dir, "keep")
	writeFile(t, keep, "hidden_helper\nmain\n")
	mini := filepath.Join(s.dir, "mini")
	run(t, "objcopy", "-S", "--remove-section", ".comment", "--keep-symbols="+keep, s.debug, mini)
	raw, _ := os.ReadFile(mini)
	var zb bytes.Buffer
	w, err := xz.NewWriter(&zb)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(raw)
	w.Close()
	xzf := filepath.Join(s.dir, "mini.xz")
	writeFile(t, xzf, zb.String())
	bin := filepath.Join(s.dir, "minibin")
	run(t, "objcopy", "--add-section", ".gnu_debugdata="+xzf, s.stripped, bin)
	c := NewCache(&Options{DebugDirs: []string{t.TempDir()}})
	defer c.Close()
	checkHidden(t, c, s, bin, "", false)

	// A corrupt payload is reported, and the .dynsym symbols still work.
	zb.Bytes()[len(zb.Bytes())/2] ^= 0xff
	writeFile(t, xzf, zb.String())
	bad := filepath.Join(s.dir, "badmini")
	run(t, "objcopy", "--add-section", ".gnu_debugdata="+xzf, s.stripped, bad)
	// A fresh cache: the shared one would hand back the good module, which
	// has the same build ID.
	c2 := NewCache(&Options{DebugDirs: []string{t.TempDir()}})
	defer c2.Close()
	m, err := c2.Open(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.symbols(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("corrupt .gnu_debugdata: %v, want ErrMalformed", err)
	}
	if _, err := m.SymbolValue("malloc@plt"); err != nil {
		t.Fatalf("PLT symbols lost with a corrupt .gnu_debugdata: %v", err)
	}
}

var pltLabel = regexp.MustCompile(`(?m)^([0-9a-f]+) <([^>@]+)@plt>:`)

// Every PLT stub objdump names must get the same name from us, across the
// lazy, -z now, IBT (.plt.sec) and AArch64 layouts.
func TestPLTStubsMatchObjdump(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "p.c")
	writeFile(t, src, hiddenC)
	type variant struct {
		name, cc, objdump string
		flags             []string
	}
	vs := []variant{
		{"lazy", "gcc", "objdump", nil},
		{"now", "gcc", "objdump", []string{"-Wl,-z,now"}},
		{"ibt", "gcc", "objdump", []string{"-fcf-protection=full", "-Wl,-z,ibtplt"}},
		{"shared", "gcc", "objdump", []string{"-shared", "-fPIC"}},
		{"aarch64", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objdump", nil},
	}
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			if _, err := exec.LookPath(v.cc); err != nil {
				if v.name == "aarch64" {
					bpftest.Unavailable(t, "aarch64 cross compiler not installed (gcc-aarch64-linux-gnu)")
				}
				t.Fatal(err)
			}
			needTool(t, v.objdump)
			out := filepath.Join(dir, v.name)
			run(t, v.cc, append(append([]string{"-O0"}, v.flags...), "-o", out, src)...)
			labels := pltLabel.FindAllStringSubmatch(run(t, v.objdump, "-d", out), -1)
			if len(labels) < 2 {
				t.Fatalf("objdump shows %d PLT stubs; fixture should have malloc, free and printf", len(labels))
			}
			c := NewCache(nil)
			defer c.Close()
			m, err := c.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range labels {
				addr, _ := strconv.ParseUint(l[1], 16, 64)
				for _, d := range []uint64{0, 4} {
					name, off, err := m.Symbol(addr + d)
					if name != l[2]+"@plt" || off != d {
						t.Errorf("%#x: %s+%#x (%v), objdump says %s@plt+%#x", addr+d, name, off, err, l[2], d)
					}
				}
				if v, err := m.SymbolValue(l[2] + "@plt"); err != nil || v != addr {
					t.Errorf("SymbolValue(%s@plt) = %#x, %v; want %#x", l[2], v, err, addr)
				}
			}
		})
	}
}
