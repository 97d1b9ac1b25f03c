package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/cli"
)

// TestMakeInstall: make install DESTDIR=… PREFIX=/usr lays out the
// commands, the preload library, the man pages and the completions, and
// the installed memtrace runs and finds its library there (not the copy
// embedded in it).
func TestMakeInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds memtrace, memview and the preload library")
	}
	for _, tool := range []string{"make", "gcc", "install"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	tmp := t.TempDir()
	dest := filepath.Join(tmp, "root")
	// Its own BIN: the worktree's bin/ stays what other tests run.
	cmd := exec.Command("make", "-s", "-C", "../..", "install", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+filepath.Join(tmp, "bin"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	usr := filepath.Join(dest, "usr")
	for path, mode := range map[string]os.FileMode{
		"bin/memtrace":                                  0o755,
		"bin/memview":                                   0o755,
		"lib/memtrace/memtrace-preload.so":              0o644,
		"share/man/man1/memtrace.1":                     0o644,
		"share/man/man1/memview.1":                      0o644,
		"share/man/man1/memtrace-report.1":              0o644,
		"share/bash-completion/completions/memtrace":    0o644,
		"share/bash-completion/completions/memview":     0o644,
		"share/zsh/site-functions/_memtrace":            0o644,
		"share/zsh/site-functions/_memview":             0o644,
		"share/fish/vendor_completions.d/memtrace.fish": 0o644,
		"share/fish/vendor_completions.d/memview.fish":  0o644,
	} {
		st, err := os.Stat(filepath.Join(usr, path))
		if err != nil {
			t.Errorf("not installed: %v", err)
			continue
		}
		if st.Mode().Perm() != mode || st.Size() == 0 {
			t.Errorf("%s: mode %v size %d, want %v", path, st.Mode().Perm(), st.Size(), mode)
		}
	}
	for _, name := range []string{"memtrace.1", "memview.1", "memtrace-report.1"} {
		got, _ := os.ReadFile(filepath.Join(usr, "share/man/man1", name))
		want, _ := os.ReadFile(filepath.Join("../../docs/man", name))
		if string(got) != string(want) {
			t.Errorf("installed %s is not docs/man's", name)
		}
	}
	// The man pages name topic documents by their installed place
	// (cli.DocDir): each is there, as every one of docs/ is.
	docs, _ := filepath.Glob("../../docs/*.md")
	for _, d := range docs {
		if _, err := os.Stat(filepath.Join(usr, cli.DocDir, filepath.Base(d))); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	for _, name := range []string{"memtrace.1", "memview.1", "memtrace-report.1"} {
		page, _ := os.ReadFile(filepath.Join(usr, "share/man/man1", name))
		for _, m := range regexp.MustCompile(`[a-z0-9-]+\.md`).FindAllString(string(page), -1) {
			if _, err := os.Stat(filepath.Join(usr, cli.DocDir, m)); err != nil {
				t.Errorf("%s names %s, not installed: %v", name, m, err)
			}
		}
	}
	mt := filepath.Join(usr, "bin/memtrace")
	out, err := exec.Command(mt, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "memtrace ") {
		t.Fatalf("installed memtrace --version: %q, %v", out, err)
	}
	// The traced grep's own mappings say which library it was given.
	log := filepath.Join(tmp, "x.log")
	run := exec.Command(mt, "--preload", "-o", log, "--", "/bin/grep", "-F", "memtrace-preload.so", "/proc/self/maps")
	run.Env = append(os.Environ(), "MEMTRACE_PRELOAD_LIB=")
	out, err = run.Output()
	lib := filepath.Join(usr, "lib/memtrace/memtrace-preload.so")
	if err != nil || !strings.Contains(string(out), lib) {
		t.Fatalf("installed memtrace --preload: %v; the program's maps name %q, want %s", err, out, lib)
	}
	head, err := os.ReadFile(log)
	if err != nil || !strings.Contains(strings.SplitN(string(head), "\n", 2)[0], "mode=preload") {
		t.Fatalf("log %q, %v", head, err)
	}
}
