package symbols

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// memtrack's T21: 60 levels of template recursion, each level's type
// argument one Box<> deeper, so the names grow long.
const t21CC = `#include <execinfo.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

template <typename T> struct Box { T v; };

static void *frames[128];
static int nframes;

template <int N, typename T> struct Rec {
	__attribute__((noinline)) static void *go(const std::vector<std::string> &names, T *t) {
		void *p = Rec<N - 1, Box<T>>::go(names, nullptr);
		asm volatile("" ::: "memory");
		return p;
	}
};

template <typename T> struct Rec<0, T> {
	__attribute__((noinline)) static void *go(const std::vector<std::string> &names, T *t) {
		void *p = malloc(names.size() + 1);
		nframes = backtrace(frames, 128);
		return p;
	}
};

int main() {
	std::vector<std::string> names{"a"};
	free(Rec<60, int>::go(names, nullptr));
	char **s = backtrace_symbols(frames, nframes);
	for (int i = 0; i < nframes; i++)
		printf("BT %d %p %s\n", i, frames[i], s[i]);
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	while (fgets(line, sizeof line, f))
		printf("MAPS %s", line);
	return 0;
}
`

func cxxfilt(t *testing.T, names []string) []string {
	t.Helper()
	cmd := exec.Command(needTool(t, "c++filt"))
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

var (
	t21Once sync.Once
	t21Bin  string
)

// buildT21 compiles the T21 program once per test run (the benchmarks use
// it too: it has DWARF for many functions and inlined library code).
func buildT21(t testing.TB) string {
	t.Helper()
	needTool(t, "g++")
	t21Once.Do(func() {
		dir := filepath.Join(fxDir, "t21")
		os.MkdirAll(dir, 0o755)
		src := filepath.Join(dir, "t21.cc")
		writeFile(t, src, t21CC)
		bin := filepath.Join(dir, "t21")
		run(t, "g++", "-g", "-O1", "-rdynamic", "-o", bin, src)
		t21Bin = bin
	})
	if t21Bin == "" {
		t.Fatal("building the T21 fixture failed earlier")
	}
	return t21Bin
}

func TestT21TemplateRecursion(t *testing.T) {
	bin := buildT21(t)
	r := runProg(t, bin)
	c := NewCache(nil)
	defer c.Close()
	as := newAS(t, c, r.maps["MAPS"])

	var mangled []string
	for i, bt := range r.frames {
		fr, err := as.Resolve(bt.addr, ReturnAddress)
		if !strings.HasPrefix(bt.symbol, "_ZN3RecIL") {
			continue
		}
		// Same symbol and offset glibc's backtrace_symbols printed.
		if fr.Symbol != bt.symbol || fr.Offset != bt.off {
			t.Errorf("frame %d: %s+%#x (%v), glibc says %s+%#x", i, fr.Symbol, fr.Offset, err, bt.symbol, bt.off)
		}
		mangled = append(mangled, fr.Symbol)
	}
	if len(mangled) != 61 {
		t.Fatalf("found %d Rec<N> frames, want 61 (levels 60..0)", len(mangled))
	}
	want := cxxfilt(t, mangled)
	longest := 0
	for i, m := range mangled {
		got := Demangle(m)
		if got != want[i] {
			t.Errorf("Demangle(%s)\n got %s\nwant %s (c++filt)", m, got, want[i])
		}
		// Frame i is level i: Rec<i, Box<...i times...<int>>>.
		if n := strings.Count(got, "Box<"); n != 2*(60-i) { // in the template argument and in T*
			t.Errorf("frame %d: %d Box<> in %q, want %d", i, n, got, 2*(60-i))
		}
		if !strings.HasPrefix(got, "Rec<"+strconv.Itoa(i)+", ") {
			t.Errorf("frame %d: %q does not start with Rec<%d, ", i, got, i)
		}
		longest = max(longest, len(got))
	}
	if longest < 400 {
		t.Errorf("longest demangled name is %d bytes; the fixture should produce long names", longest)
	}
}

func TestDemangle(t *testing.T) {
	// Unmangled names come back untouched.
	for _, s := range []string{"", "malloc", "main", "_start", "__libc_start_main", "_Znot a name(", "_R", "[vdso]"} {
		if got := Demangle(s); got != s {
			t.Errorf("Demangle(%q) = %q, want it unchanged", s, got)
		}
	}
	// C++ names against c++filt, including PLT and version suffixes.
	names := []string{"_Znwm", "_ZdlPvm", "_ZNSt6vectorIiSaIiEE9push_backERKi", "_ZN9__gnu_cxx13new_allocatorIcE8allocateEmPKv",
		"_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE4sizeEv", "_GLOBAL__sub_I_main"}
	want := cxxfilt(t, names)
	for i, n := range names {
		if got := Demangle(n); got != want[i] {
			t.Errorf("Demangle(%s) = %q, c++filt says %q", n, got, want[i])
		}
	}
	if got := Demangle("_Znwm@plt"); got != "operator new(unsigned long)@plt" {
		t.Errorf("PLT suffix: %q", got)
	}
	if got := Demangle("_ZdlPv@@GLIBCXX_3.4"); got != "operator delete(void*)@@GLIBCXX_3.4" {
		t.Errorf("version suffix: %q", got)
	}
}
