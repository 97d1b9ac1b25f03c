package symbols

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/memtrace/memtrace/internal/procfs"
)

// Fixtures are C/C++ programs compiled into one temporary directory per
// test binary run, each built once and shared by the tests that need it.

const progC = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *saved[64];
static int nsaved;

__attribute__((noinline)) void record(void) {
	nsaved = backtrace(saved, 64);
}

__attribute__((noinline)) void *alloc_site(size_t n) {
	void *p = malloc(n);
	record(); /* MARK:record */
	return p;
}

static __attribute__((noinline)) void *static_site(size_t n) {
	void *p = calloc(1, n);
	record(); /* MARK:static-record */
	return p;
}

static inline __attribute__((always_inline)) void inl_record(void) {
	record(); /* MARK:inl */
}

__attribute__((noinline)) void outer(void) {
	inl_record(); /* MARK:outer-call */
}

static void dump(const char *tag) {
	char **s = backtrace_symbols(saved, nsaved);
	for (int i = 0; i < nsaved; i++)
		printf("%s %d %p %s\n", tag, i, saved[i], s ? s[i] : "?");
	free(s);
}

static void maps(const char *tag) {
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	while (f && fgets(line, sizeof line, f))
		printf("%s %s", tag, line);
	if (f) fclose(f);
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "direct";
	if (!strcmp(mode, "direct")) {
		free(alloc_site(16));
		dump("BT");
	} else if (!strcmp(mode, "static")) {
		free(static_site(16));
		dump("BT");
	} else if (!strcmp(mode, "inline")) {
		outer();
		dump("BT");
	} else if (!strcmp(mode, "dlopen")) {
		void *h = dlopen(argv[2], RTLD_NOW);
		if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
		int (*entry)(void **, int) = (int (*)(void **, int))dlsym(h, "plug_entry");
		nsaved = entry(saved, 64);
		dump("BT");
		maps("MAPS1");
		dlclose(h);
		maps("MAPS2");
		return 0;
	} else if (!strcmp(mode, "wait")) {
		printf("ADDR %p\n", (void *)alloc_site);
		maps("MAPS");
		fflush(stdout);
		char c;
		while (read(0, &c, 1) > 0) {}
		return 0;
	}
	maps("MAPS");
	return 0;
}
`

const plugC = `#include <execinfo.h>
static __attribute__((noinline)) int plug_inner(void **buf, int n) {
	return backtrace(buf, n); /* MARK:plug-bt */
}
__attribute__((noinline)) int plug_entry(void **buf, int n) {
	int r = plug_inner(buf, n); /* MARK:plug-call */
	return r + 0;
}
`

// fixtures holds the built programs; a zero path means "not built".
type fixtureSet struct {
	dir     string
	prog    string // -g -O0 -rdynamic
	plug    string // shared library for dlopen
	progSrc string
	plugSrc string
}

var (
	fxOnce sync.Once
	fx     fixtureSet
	fxErr  error
	fxDir  string
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "symbols-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fxDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

func needTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required for this test (Debian package gcc/g++/binutils): %v", name, err)
	}
	return p
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fixtures(t testing.TB) *fixtureSet {
	t.Helper()
	needTool(t, "gcc")
	fxOnce.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				fxErr = fmt.Errorf("%v", r)
			}
		}()
		f := fixtureSet{dir: filepath.Join(fxDir, "c")}
		os.MkdirAll(f.dir, 0o755)
		f.progSrc = filepath.Join(f.dir, "prog.c")
		f.plugSrc = filepath.Join(f.dir, "plug.c")
		os.WriteFile(f.progSrc, []byte(progC), 0o644)
		os.WriteFile(f.plugSrc, []byte(plugC), 0o644)
		f.prog = filepath.Join(f.dir, "prog")
		f.plug = filepath.Join(f.dir, "libplug.so")
		for _, c := range [][]string{
			{"-g", "-O0", "-rdynamic", "-Wl,--build-id", "-o", f.prog, f.progSrc, "-ldl"},
			{"-g", "-O1", "-shared", "-fPIC", "-Wl,--build-id", "-o", f.plug, f.plugSrc},
		} {
			out, err := exec.Command("gcc", c...).CombinedOutput()
			if err != nil {
				fxErr = fmt.Errorf("gcc %v: %v\n%s", c, err, out)
				return
			}
		}
		fx = f
	})
	if fxErr != nil {
		t.Fatal(fxErr)
	}
	return &fx
}

// markLine returns the 1-based line of "MARK:name" in a source file.
func markLine(t testing.TB, src, name string) int {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "MARK:"+name+" ") {
			return i + 1
		}
	}
	t.Fatalf("no MARK:%s in %s", name, src)
	return 0
}

// btFrame is one backtrace() entry printed by a fixture, with glibc's own
// backtrace_symbols rendering of it as the oracle.
type btFrame struct {
	addr   uint64
	module string
	symbol string
	off    uint64 // from symbol, or from the module base when symbol is ""
}

type progRun struct {
	frames []btFrame
	maps   map[string][]Mapping // by tag
	lines  []string
}

// runProg runs a fixture and parses its BT and MAPS* output.
func runProg(t testing.TB, prog string, args ...string) *progRun {
	t.Helper()
	out := run(t, prog, args...)
	r := &progRun{maps: map[string][]Mapping{}}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		r.lines = append(r.lines, line)
		tag, rest, _ := strings.Cut(line, " ")
		switch {
		case tag == "BT":
			// BT i 0xADDR MODULE(SYMBOL+0xOFF) [0xADDR]
			f := strings.SplitN(rest, " ", 3)
			if len(f) < 3 {
				t.Fatalf("bad BT line %q", line)
			}
			var fr btFrame
			fr.addr, _ = strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
			s := f[2]
			open := strings.LastIndexByte(s, '(')
			cls := strings.LastIndexByte(s, ')')
			if open < 0 || cls < open {
				t.Fatalf("bad backtrace_symbols output %q", s)
			}
			fr.module = s[:open]
			inner := s[open+1 : cls]
			plus := strings.LastIndexByte(inner, '+')
			if plus >= 0 {
				fr.symbol = inner[:plus]
				fr.off, _ = strconv.ParseUint(strings.TrimPrefix(inner[plus+1:], "0x"), 16, 64)
			}
			r.frames = append(r.frames, fr)
		case strings.HasPrefix(tag, "MAPS"):
			pm, err := procfs.ParseMapsLine(rest)
			if err != nil {
				t.Fatalf("fixture printed a maps line we cannot parse: %v", err)
			}
			r.maps[tag] = append(r.maps[tag], ProcMapping(&pm))
		}
	}
	return r
}
