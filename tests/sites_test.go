package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// sitesSrc allocates from an inlined method at two lines and from an
// inlined function (issue 15 item 1's Cache::put and leak_some), built with
// -O2 -g: the physical frame is store::fill, the lines are the inlined
// code's. The libstdc++ it links allocates its emergency exception pool at
// start-up (item 2's built-in suppression).
const sitesSrc = `#include <cstdio>
#include <cstdlib>
#include <cstring>

static void *sink[4096];
static int nsink;

struct Cache {
	char *slots[64];
	__attribute__((always_inline)) inline void put(int i)
	{
		char *small = (char *)malloc(32 + (i & 7)); // SITE small
		memset(small, i, 32);
		__asm__ volatile("" ::"r"(small) : "memory");
		free(small);
		if (i & 1)
			return;
		char *big = new char[200 + (i & 15)]; // SITE big
		memset(big, i, 200);
		delete[] slots[i & 63];
		slots[i & 63] = big;
	}
};

__attribute__((always_inline)) static inline void leak_some(int i)
{
	char *p = (char *)malloc(96); // SITE leak
	memset(p, i, 96);
	sink[nsink++ & 4095] = p;
}

namespace store {
__attribute__((noinline)) void fill(Cache &c, int n)
{
	for (int i = 0; i < n; i++) {
		c.put(i);
		if (i % 11 == 0)
			leak_some(i); // SITE call-leak
	}
}
} // namespace store

int main()
{
	static Cache c;
	store::fill(c, 1100);
	for (auto &s : c.slots)
		delete[] s;
	printf("%d\n", nsink);
	return 0;
}
`

// buildSites compiles sitesSrc with g++ -O2 -g and returns the binary and
// its source file.
func buildSites(t *testing.T) (bin, src string) {
	t.Helper()
	dir := t.TempDir()
	src = filepath.Join(dir, "app.cc")
	if err := os.WriteFile(src, []byte(sitesSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "app")
	if out, err := command("g++", "-O2", "-g", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	os.Chmod(dir, 0o755)
	return bin, src
}

// sitesLine is the line of sitesSrc holding mark.
func sitesLine(t *testing.T, mark string) int {
	t.Helper()
	for i, l := range strings.Split(sitesSrc, "\n") {
		if strings.Contains(l, mark) {
			return i + 1
		}
	}
	t.Fatalf("no %q in the source", mark)
	return 0
}

// rankedSite is one entry of a heaptrack_print-style ranking: its figure
// line and the innermost function of its first frame with file:line.
type rankedSite struct {
	head     string // "1100 calls to allocation functions with 0B peak consumption from"
	function string
	at       string // file:line, "" without one
	chain    []string
}

// rankedSites reads the entries of the ranking titled title from a
// heaptrack_print (or memtrace report) text: each entry's figure line, then
// its first frame's functions with "at FILE:LINE", until the stacks under it.
func rankedSites(text, title string) []rankedSite {
	var out []rankedSite
	lines := strings.Split(text, "\n")
	in, blank := false, false
	var cur *rankedSite
	for _, l := range lines {
		prevBlank := blank
		blank = l == ""
		switch {
		case l == title:
			in = true
			continue
		case !in:
			continue
		case blank && prevBlank:
			return out // a ranking ends with an empty line after its last entry's
		case strings.HasSuffix(l, " from"):
			out = append(out, rankedSite{head: l})
			cur = &out[len(out)-1]
			continue
		case strings.HasSuffix(l, " from:") || l == "":
			cur = nil
			continue
		}
		if cur == nil || strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "  at ") && !strings.HasPrefix(l, "  in ") {
			continue
		}
		switch {
		case strings.HasPrefix(l, "  at "):
			if cur.at == "" {
				cur.at = strings.TrimPrefix(l, "  at ")
			}
			cur.chain[len(cur.chain)-1] += " at " + strings.TrimPrefix(strings.TrimPrefix(l, "  at "), "./")
		case strings.HasPrefix(l, "  in "):
		default:
			if cur.function == "" {
				cur.function = l
			}
			cur.chain = append(cur.chain, l)
		}
	}
	return out
}

// TestCallSitesMatchHeaptrack traces the -O2 C++ program with eBPF and
// checks that memtrace report's default ranking names call sites as
// heaptrack does: the innermost inlined function at its line, with the
// physical frame beneath; then compares the top call sites, their figures
// and file:line with heaptrack_print's on the same program.
func TestCallSitesMatchHeaptrack(t *testing.T) {
	requireBPF(t)
	bin, src := buildSites(t)
	log := filepath.Join(t.TempDir(), "app.log")
	if code, _, se := memtraceRun(t, nil, "--stack-depth", "16", "-o", log, "--", bin); code != 0 {
		t.Fatalf("memtrace exit %d: %s", code, se)
	}
	bpfLog(t, log)
	code, out, se := memtraceRun(t, nil, "report", "-n", "3", "-s", "1", "-p", "0", "-l", "0", "-T", "0", log)
	if code != 0 {
		t.Fatalf("report exit %d: %s", code, se)
	}
	got := rankedSites(out, "MOST CALLS TO ALLOCATION FUNCTIONS")
	want := []struct {
		calls    int
		function string
		mark     string
		caller   string
	}{
		{1100, "Cache::put(int)", "SITE small", "store::fill(Cache&, int) at " + src + ":" + strconv.Itoa(sitesLine(t, "c.put(i);"))},
		{550, "Cache::put(int)", "SITE big", "store::fill(Cache&, int) at " + src + ":" + strconv.Itoa(sitesLine(t, "c.put(i);"))},
		{100, "leak_some", "SITE leak", "store::fill(Cache&, int) at " + src + ":" + strconv.Itoa(sitesLine(t, "SITE call-leak"))},
	}
	if len(got) != len(want) {
		t.Fatalf("want %d entries, got %+v\n%s", len(want), got, out)
	}
	for i, w := range want {
		g := got[i]
		at := src + ":" + strconv.Itoa(sitesLine(t, w.mark))
		if !strings.HasPrefix(g.head, fmt.Sprintf("%d calls to allocation functions", w.calls)) || g.function != w.function || g.at != at {
			t.Errorf("entry %d: got %q %s at %s, want %d calls from %s at %s\n%s", i, g.head, g.function, g.at, w.calls, w.function, at, out)
		}
		if len(g.chain) != 2 || g.chain[1] != w.caller {
			t.Errorf("entry %d: frame chain %q, want the physical frame %q beneath\n%s", i, g.chain, w.caller, out)
		}
	}

	// heaptrack_print on the same program ranks the same sites.
	ht, err := exec.LookPath("heaptrack")
	if err != nil {
		bpftest.Unavailable(t, "heaptrack is not installed (make deps installs it)")
		return
	}
	dir := t.TempDir()
	cmd := command(ht, "-o", filepath.Join(dir, "ht"), bin)
	if b, err := runWaitOutput(cmd, 60*time.Second); err != nil {
		t.Fatalf("heaptrack: %v\n%s", err, b)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "ht*"))
	if len(files) != 1 {
		t.Fatalf("heaptrack wrote %v", files)
	}
	hp := command("heaptrack_print", "-n", "3", "-s", "1", "-p", "0", "-a", "1", "-T", "0", "-l", "0", files[0])
	hout, err := runWaitOutput(hp, 60*time.Second)
	if err != nil {
		t.Fatalf("heaptrack_print: %v\n%s", err, hout)
	}
	hs := rankedSites(string(hout), "MOST CALLS TO ALLOCATION FUNCTIONS")
	if len(hs) != len(got) {
		t.Fatalf("heaptrack_print ranks %d entries, memtrace %d\n%s\n%s", len(hs), len(got), hout, out)
	}
	for i := range hs {
		if hs[i].head != got[i].head || hs[i].function != got[i].function || hs[i].at != got[i].at || strings.Join(hs[i].chain, "|") != strings.Join(got[i].chain, "|") {
			t.Errorf("entry %d: heaptrack_print %+v, memtrace %+v", i, hs[i], got[i])
		}
	}
	if t.Failed() {
		t.Logf("heaptrack_print:\n%s\nmemtrace report:\n%s", hout, out)
	}
}

// runWaitOutput runs cmd with a time limit and returns its output.
func runWaitOutput(cmd *exec.Cmd, limit time.Duration) ([]byte, error) {
	var b lockedBuffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	err := runWait(cmd, limit)
	return []byte(b.String()), err
}

// TestBuiltinSuppressionsOnCxx traces the C++ program with eBPF: its
// biggest leak is libstdc++'s emergency exception pool (72.7K, allocated by
// libstdc++'s constructor under _dl_init), which the built-in suppressions
// hide and count; --disable-builtin-suppressions brings it back on top.
func TestBuiltinSuppressionsOnCxx(t *testing.T) {
	requireBPF(t)
	bin, src := buildSites(t)
	log := filepath.Join(t.TempDir(), "app.log")
	if code, _, se := memtraceRun(t, nil, "--stack-depth", "16", "-o", log, "--", bin); code != 0 {
		t.Fatalf("memtrace exit %d: %s", code, se)
	}
	bpfLog(t, log)
	leaks := func(args ...string) (string, []rankedSite) {
		t.Helper()
		code, out, se := memtraceRun(t, nil, append([]string{"report", "-a", "0", "-p", "0", "-T", "0", "-s", "1", log}, args...)...)
		if code != 0 {
			t.Fatalf("report exit %d: %s", code, se)
		}
		return out, rankedSites(out, "MEMORY LEAKS")
	}
	out, ls := leaks("--print-suppressions")
	leakAt := src + ":" + strconv.Itoa(sitesLine(t, "SITE leak"))
	if len(ls) == 0 || ls[0].function != "leak_some" || ls[0].at != leakAt || !strings.HasPrefix(ls[0].head, "9.60K leaked over 100 calls") {
		t.Fatalf("top leak %+v, want leak_some at %s, 9.60K over 100 calls\n%s", ls, leakAt, out)
	}
	for _, l := range ls {
		if strings.Contains(l.function, "libstdc++") {
			t.Errorf("libstdc++'s pool still ranked: %+v\n%s", l, out)
		}
	}
	if !strings.Contains(out, "suppressed leaks: 72.70K (1 leaks)\n") {
		t.Errorf("no count of the suppressed pool\n%s", out)
	}
	if !strings.Contains(out, "leak:_dl_init (allocated in libstdc++.so*)  (built-in: libstdc++'s emergency exception pool") ||
		!strings.Contains(out, "matched 1 leaks, 72.70K, in 1 call stacks") {
		t.Errorf("--print-suppressions does not show the built-in match\n%s", out)
	}
	out, ls = leaks("--disable-builtin-suppressions")
	if len(ls) == 0 || !strings.HasPrefix(ls[0].function, "libstdc++.so") || !strings.HasPrefix(ls[0].head, "72.70K leaked over 1 calls") {
		t.Fatalf("without the built-in list the pool should lead: %+v\n%s", ls, out)
	}
	if strings.Contains(out, "suppressed leaks:") {
		t.Errorf("suppressed count without suppressions\n%s", out)
	}
}
