package asusertest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// Other is the user who plants the links: nobody.
const Other = 65534

// Precious is what a victim file holds.
const Precious = "precious\n"

// NeedRoot skips a test that plants as another user when not root.
func NeedRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		bpftest.Unavailable(t, "planting another user's symlink needs root")
	}
}

// Dir is a directory that Other owns and may write, as a user's home
// directory is, reachable by everyone.
func Dir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "memtrace-planted")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, Other, Other); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Victim is a root-owned 0600 file holding Precious, in a directory only
// root may write.
func Victim(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(p, []byte(Precious), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// PlantAt makes path a symbolic link owned by Other to a new Victim and
// returns the victim.
func PlantAt(t *testing.T, path string) string {
	t.Helper()
	victim := Victim(t)
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, Other, Other); err != nil {
		t.Fatal(err)
	}
	return victim
}

// Plant is PlantAt name in a new Dir: it returns the link and the victim.
func Plant(t *testing.T, name string) (link, victim string) {
	t.Helper()
	link = filepath.Join(Dir(t), name)
	return link, PlantAt(t, link)
}

// Untouched fails the test if victim no longer holds Precious, is no
// longer root's or its mode changed, and if link is no longer a link
// (a refused output leaves the name as it was).
func Untouched(t *testing.T, link, victim string) {
	t.Helper()
	b, err := os.ReadFile(victim)
	if err != nil || string(b) != Precious {
		t.Errorf("%s, behind the link %s, now holds %q (%v)", victim, link, b, err)
	}
	if st, err := os.Stat(victim); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode changed: %v %v", victim, st.Mode(), err)
	}
	if link != "" {
		if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer the planted link (%v)", link, err)
		}
	}
}
