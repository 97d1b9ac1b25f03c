package units

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// heaptrackSizes cross the boundaries where a convention shows: the first
// unit (1000 against 1024), rounding up to the next hundredth, and the
// figures that round to 1000.00 of a unit.
var heaptrackSizes = []uint64{
	1, 999, 1000, 1001, 1024, 1680, 72704, 468732, 999994, 999995, 999999, 1000000, 1000001,
	45230000, 999_999_999, 1_000_000_001, 1_500_000_000,
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// TestBytesMatchHeaptrackPrint: a program leaks one block of each size from
// its own function, heaptrack records it, and the installed heaptrack_print
// must write every size exactly as Bytes does.
func TestBytesMatchHeaptrackPrint(t *testing.T) {
	var tools [3]string
	for k, name := range []string{"heaptrack", "heaptrack_print", "gcc"} {
		p, err := exec.LookPath(name)
		switch {
		case err == nil:
			tools[k] = p
		case os.Getenv("CI") != "":
			t.Fatalf("%s is not installed (make deps installs it)", name)
		default:
			bpftest.Unavailable(t, "%s is not installed (make deps installs it)", name)
		}
	}
	heaptrack, print, cc := tools[0], tools[1], tools[2]
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("#include <stdlib.h>\n")
	for k := range heaptrackSizes {
		fmt.Fprintf(&src, "__attribute__((noinline)) void *leak_%d(size_t n) { void *volatile p = malloc(n); return p; }\n", k)
	}
	src.WriteString("int main(int argc, char **argv) {\n")
	for k := range heaptrackSizes {
		fmt.Fprintf(&src, "\tif (!leak_%d(strtoull(argv[%d], 0, 10))) return 1;\n", k, k+1)
	}
	src.WriteString("\treturn 0;\n}\n")
	c := filepath.Join(dir, "leaks.c")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "leaks")
	run(t, cc, "-O1", "-g", "-o", bin, c)
	args := []string{"-o", filepath.Join(dir, "h"), bin}
	for _, n := range heaptrackSizes {
		args = append(args, fmt.Sprint(n))
	}
	run(t, heaptrack, args...)
	data, _ := filepath.Glob(filepath.Join(dir, "h.*"))
	if len(data) != 1 {
		t.Fatalf("heaptrack wrote %v", data)
	}
	out := run(t, print, "-l", "1", "-p", "0", "-a", "0", "-T", "0", "-n", "1000", data[0])
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(\S+) leaked over 1 calls from\n(leak_\d+)$`).FindAllStringSubmatch(out, -1) {
		got[m[2]] = m[1]
	}
	for k, n := range heaptrackSizes {
		want, ok := got[fmt.Sprintf("leak_%d", k)]
		if !ok {
			t.Errorf("heaptrack_print lists no leak of %d bytes:\n%s", n, out)
			continue
		}
		if b := Bytes(n); b != want {
			t.Errorf("Bytes(%d) = %q, heaptrack_print writes %q", n, b, want)
		}
	}
}
