package viewer

import (
	"debug/dwarf"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/symbols"
)

// inlineSrc allocates at two lines of a method inlined into main (issue
// 33's leaky.cpp: Cache::put).
const inlineSrc = `#include <cstdlib>
#include <cstring>

struct Cache {
	char *slots[4096];
	int n = 0;
	__attribute__((always_inline)) inline void put(int i)
	{
		char *tmp = (char *)malloc(64 + (i & 7)); // SITE tmp
		memset(tmp, i, 64);
		slots[n++ & 4095] = tmp;
		char *big = (char *)malloc(2432 + (i & 15)); // SITE big
		memset(big, i, 100);
		slots[n++ & 4095] = big;
	}
};

int main()
{
	static Cache c;
	for (int i = 0; i < 4096; i++)
		c.put(i); // SITE call
	return 0;
}
`

// srcLine is the line of inlineSrc that mark is on.
func srcLine(t *testing.T, mark string) int {
	t.Helper()
	for i, l := range strings.Split(inlineSrc, "\n") {
		if strings.Contains(l, mark) {
			return i + 1
		}
	}
	t.Fatalf("no %q in the source", mark)
	return 0
}

// buildInline compiles inlineSrc -O2 -g and returns the binary and, for
// each line wanted, the offset from main of a return address on it (one
// past a line-table row of that line inside main), as a log's frame
// gives it.
func buildInline(t *testing.T, lines ...int) (string, []uint64) {
	t.Helper()
	if _, err := exec.LookPath("g++"); err != nil {
		t.Fatalf("g++ is required for this test (Debian package g++): %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "leaky.cpp")
	if err := os.WriteFile(src, []byte(inlineSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "leaky")
	if out, err := exec.Command("g++", "-O2", "-g", "-fno-builtin", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var lo, hi uint64
	for _, s := range syms {
		if s.Name == "main" {
			lo, hi = s.Value, s.Value+s.Size
		}
	}
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	offs := make([]uint64, len(lines))
	r := d.Reader()
	for {
		cu, err := r.Next()
		if err != nil || cu == nil {
			break
		}
		if cu.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		lr, err := d.LineReader(cu)
		if err != nil || lr == nil {
			continue
		}
		var e dwarf.LineEntry
		for lr.Next(&e) == nil {
			if e.File == nil || filepath.Base(e.File.Name) != "leaky.cpp" || e.Address < lo || e.Address >= hi {
				continue
			}
			for k, l := range lines {
				if e.Line == l && offs[k] == 0 {
					offs[k] = e.Address - lo + 1
				}
			}
		}
	}
	for k, o := range offs {
		if o == 0 {
			t.Fatalf("no code of leaky.cpp:%d in main", lines[k])
		}
	}
	return bin, offs
}

// Issue 33: the groups and the tree name the inlined Cache::put at the
// lines of its two allocations, and main at the line of the call; the two
// call sites, which differ only by their offset in main, read apart.
func TestInlinedFramesInGroupsAndTree(t *testing.T) {
	tmp, big, call := srcLine(t, "SITE tmp"), srcLine(t, "SITE big"), srcLine(t, "SITE call")
	bin, offs := buildInline(t, tmp, big)
	var b []byte
	b = logfmt.AppendMeta(b, logfmt.WordHeader, logfmt.KV{Key: "pid", Value: "9"}, logfmt.KV{Key: "comm", Value: "leaky"}, logfmt.KV{Key: "cmd", Value: bin})
	for k, sz := range []uint64{64, 2432} {
		b = logfmt.AppendAlloc(b, 1, "main", "malloc", uint64(1000*(k+1)), sz, sz, uint64(0x10000*(k+1)))
		b = logfmt.AppendFrame(b, 0, bin, "main", offs[k], 0x400000+offs[k])
	}
	b = logfmt.AppendSummary(b, logfmt.Summary{})

	h := newHarness(t, b, Options{Lines: symbols.NewCache(nil)})
	h.press(tcell.KeyRune, '\\')
	at := func(line int) string { return "leaky.cpp:" + strconv.Itoa(line) }
	mainAt := "main " + at(call)
	// The inlined function's line tells the groups apart: the label
	// stops there.
	h.contains("  Cache::put(…) " + at(tmp) + "  [main]")
	h.contains("  Cache::put(…) " + at(big) + "  [main]")

	// The detail pane, with source lines (L): the inlined function at its
	// line, then main at the line of the call.
	h.press(tcell.KeyRune, 'L')
	h.contains("#0 Cache::put(int) (inlined)")
	h.contains("#0 main ")
	var lines []string
	for _, l := range h.a.stackLines("Stack", h.a.groups[0].Stack) {
		lines = append(lines, strings.TrimSpace(l.s))
	}
	src := filepath.Join(filepath.Dir(bin), "leaky.cpp")
	if got, want := strings.Join(lines[1:], "|"), "#0 Cache::put(int) (inlined)|"+src+":"+strconv.Itoa(big)+"|#0 main|"+src+":"+strconv.Itoa(call); got != want {
		t.Errorf("the detail pane's stack:\n got %s\nwant %s", got, want)
	}

	h.press(tcell.KeyRune, '\\')
	h.press(tcell.KeyRune, 'c')
	h.contains("2.50K 100.0%  ▾ " + mainAt)
	h.contains("2.43K  97.4%      Cache::put(int) " + at(big))
	h.contains("64B   2.6%      Cache::put(int) " + at(tmp))
	h.press(tcell.KeyRune, 'u')
	h.contains("2.43K  97.4%  ▾ Cache::put(int) " + at(big))
	h.contains("64B   2.6%  ▾ Cache::put(int) " + at(tmp))
}
