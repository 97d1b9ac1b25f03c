package cli

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestManPagesRender: groff reads each page without a warning, and the
// page lists every option of its table.
func TestManPagesRender(t *testing.T) {
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("no groff")
	}
	for _, c := range Commands {
		page := filepath.Join("..", "..", "docs", "man", c.ManName+".1")
		cmd := exec.Command("groff", "-man", "-Tascii", "-P-cbou", "-ww", page)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 {
			t.Errorf("groff %s: %v %s", page, err, stderr.String())
			continue
		}
		text := string(out)
		for _, f := range c.visible() {
			for _, s := range f.Spellings() {
				if !strings.Contains(text, s) {
					t.Errorf("%s: no %s", page, s)
				}
			}
		}
	}
}

// TestBashCompletion: the generated bash completion completes options,
// the report's, and a value from its list, as bash runs it.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := filepath.Join("..", "..", "completions")
	for _, c := range []struct {
		file  string
		words []string
		want  string
	}{
		{"memtrace.bash", []string{"memtrace", "--stack-d"}, "--stack-depth"},
		{"memtrace.bash", []string{"memtrace", "--stack-unwind", ""}, "dwarf fp"},
		{"memtrace.bash", []string{"memtrace", "rep"}, "report"},
		{"memtrace.bash", []string{"memtrace", "report", "--print-le"}, "--print-leaks"},
		{"memtrace.bash", []string{"memtrace", "report", "--cost", "te"}, "temporary"},
		{"memtrace.bash", []string{"memtrace", "-o", "x", "--track", "mm"}, "mmap"},
		{"memview.bash", []string{"memview", "--dump-t"}, "--dump-threads"},
	} {
		script := ". " + filepath.Join(dir, c.file) + "\nCOMP_WORDS=("
		for _, w := range c.words {
			script += "'" + w + "' "
		}
		script += ")\nCOMP_CWORD=" + strconv.Itoa(len(c.words)-1) + "\n" + funcName(map[string]*Command{"memtrace.bash": Memtrace, "memview.bash": Memview}[c.file]) +
			"\necho \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command(bash, "--norc", "-c", script).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s %q: %q, %v; want %q", c.file, c.words, got, err, c.want)
		}
	}
}

// TestZshFishCompletion: zsh reads the zsh files; fish reads its files
// and completes an option and a value from its list.
func TestZshFishCompletion(t *testing.T) {
	dir := filepath.Join("..", "..", "completions")
	if zsh, err := exec.LookPath("zsh"); err == nil {
		for _, f := range []string{"_memtrace", "_memview"} {
			if out, err := exec.Command(zsh, "-n", filepath.Join(dir, f)).CombinedOutput(); err != nil {
				t.Errorf("zsh -n %s: %v %s", f, err, out)
			}
		}
	}
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Skip("no fish")
	}
	for _, c := range []struct{ file, line, want string }{
		{"memtrace.fish", "memtrace --stack-d", "--stack-depth\tcapture N call-stack frames per event"},
		{"memtrace.fish", "memtrace report --print-le", "--print-leaks\tmemory leaks"},
		{"memtrace.fish", "memtrace --stack-unwind ", "dwarf\t"},
		{"memview.fish", "memview --dump", "--dump-threads\t"},
	} {
		out, err := exec.Command(fish, "--no-config", "-c", "source "+filepath.Join(dir, c.file)+"; complete -C'"+c.line+"'").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), c.want) {
			t.Errorf("fish %q: %q, %v; want %q", c.line, out, err, c.want)
		}
	}
}
