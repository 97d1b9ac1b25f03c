package asuser

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// creates matches the os calls that create a file by name.
var creates = regexp.MustCompile(`\bos\.(Create|WriteFile|CreateTemp)\(|\bos\.OpenFile\(.*O_CREATE`)

// notOutputs are the files that create something that is not an output
// of memtrace's: generators run at build time, test helpers, the preload
// library's cache and the unwind tables' cache (the effective user's own,
// never the user's behind sudo) in their private directories, the synthetic-log tool of the
// benchmarks; and the lines that do: a temporary file made exclusively
// (a sorted log's, in place of the log; the probe of --report-dir, removed
// at once) and a write to /proc.
var notOutputs = map[string]bool{
	"internal/cli/gendocs/main.go":                     true,
	"fallback-preload/internal/mtabi/mtabigen/main.go": true,
	"internal/ops/opsgen/main.go":                      true,
	"internal/proctest/proctest.go":                    true,
	"unwind/unwindtest/unwindtest.go":                  true,
	"internal/asuser/asusertest/plant.go":              true,
	"fallback-preload/preload.go":                      true,
	"tracer/tablecache.go":                             true,
	"cmd/memtrace-genlog/main.go":                      true,
}

var notOutputLines = regexp.MustCompile(`os\.CreateTemp\((filepath\.Dir\(path\), "\.memtrace-sort-|dir, "\.memtrace-probe-)|"/proc/`)

// TestOneCreator: an output file is created through this package (Create,
// CreateNew, WriteOutput, WriteRenamed) and nowhere else, so that no output
// follows a planted link as root or leaves a partial file (docs/cli.md,
// "Output files").
func TestOneCreator(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skip("not in the module's tree")
	}
	self, _ := filepath.Abs(".")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "tests" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || filepath.Dir(p) == self || notOutputs[rel] {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			if line := sc.Text(); creates.MatchString(line) && !notOutputLines.MatchString(line) {
				t.Errorf("%s:%d creates a file itself: use internal/asuser's Create, CreateNew, WriteOutput or WriteRenamed\n\t%s", rel, n, strings.TrimSpace(line))
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
