package procfs

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// procRead matches a string literal that ends in a /proc/PID file this
// package reads: any other package naming one reads /proc by itself.
var procRead = regexp.MustCompile(`"[^" ]*/(maps|smaps|stat|status|comm|cmdline|environ|cgroup)"`)

// TestOneReader: no non-test Go file of the module outside this package
// names a /proc file this package reads (writing one's own comm is not
// reading).
func TestOneReader(t *testing.T) {
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
		if d.IsDir() {
			if p == self || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if procRead.MatchString(line) && !strings.Contains(line, "WriteFile(") {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s:%d reads /proc itself: use internal/procfs\n\t%s", rel, n, strings.TrimSpace(line))
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
