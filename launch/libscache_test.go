package launch

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLaunchLibsRemembered: an answer is reused for the same file reached
// by another path (as /proc/PID/exe reaches PROG at its exec), with that
// path where the program itself is listed, and not once the file changed
// or its time is up.
func TestLaunchLibsRemembered(t *testing.T) {
	static := gccBuild(t, mallocSrc, "-static")
	dyn := gccBuild(t, mallocSrc)
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	alias := filepath.Join(dir, "alias")
	copyFile := func(from string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		// A new file, not rewritten in place: another inode, as an
		// install makes.
		tmp := prog + ".new"
		if err := os.WriteFile(tmp, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, prog); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(static)
	if err := os.Symlink(prog, alias); err != nil {
		t.Fatal(err)
	}
	if got := launchLibs(prog, nil); !slices.Equal(got, []string{prog}) {
		t.Fatalf("static program: %v, want only the program", got)
	}
	if got := launchLibs(alias, nil); !slices.Equal(got, []string{alias}) {
		t.Errorf("the same file by another path: %v, want only that path", got)
	}
	copyFile(dyn)
	got := launchLibs(alias, nil)
	if slices.Contains(got, alias) || !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(filepath.Base(p), "libc.so") }) {
		t.Errorf("after the file was replaced by a dynamic program: %v, want its libc and not the program", got)
	}
	// An answer older than libsTTL is not used.
	key, ok := libsKey(prog, nil)
	if !ok {
		t.Fatal("no key for an existing file")
	}
	recentLibs.put(key, true, nil)
	recentLibs.mu.Lock()
	for i := range recentLibs.entries {
		if recentLibs.entries[i].key == key {
			recentLibs.entries[i].at = time.Now().Add(-libsTTL)
		}
	}
	recentLibs.mu.Unlock()
	if got := launchLibs(prog, nil); slices.Contains(got, prog) {
		t.Errorf("an expired answer was used: %v", got)
	}
	if _, ok := libsKey(filepath.Join(dir, "missing"), nil); ok {
		t.Error("a missing file has a key")
	}
}
