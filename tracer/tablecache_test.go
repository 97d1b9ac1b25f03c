//go:build amd64 || arm64

package tracer

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/memtrace/memtrace/unwind"
	"github.com/memtrace/memtrace/unwind/unwindtest"
)

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Skipf("no %s: %v", from, err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// sameTable compares two tables as the tracer uses them (nil and empty
// slices alike).
func sameTable(t *testing.T, got, want *unwind.Table) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatalf("table %v, want %v", got, want)
	}
	if got.Arch != want.Arch || got.Base != want.Base || !reflect.DeepEqual(got.Rows, want.Rows) ||
		len(got.Extended) != len(want.Extended) || (len(want.Extended) > 0 && !reflect.DeepEqual(got.Extended, want.Extended)) ||
		!reflect.DeepEqual(got.Segments, want.Segments) || got.Stats.Rows != want.Stats.Rows || got.Stats.EhFrameFDEs != want.Stats.EhFrameFDEs {
		t.Fatalf("cached table differs from the built one: %d rows %d ext base %#x, want %d rows %d ext base %#x",
			len(got.Rows), len(got.Extended), got.Base, len(want.Rows), len(want.Extended), want.Base)
	}
}

// TestTableCache: the second build of a file's table is read from the
// cache and equals the built one; a changed file, or an entry damaged on
// disk, is a miss that builds again; a directory others can write is
// not used.
func TestTableCache(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	useTableCache(t, cache)
	bin := filepath.Join(dir, "true")
	copyFile(t, "/bin/true", bin)
	want, err := unwind.BuildTableFile(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cachedTable(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameTable(t, got, want)
	k, ok := statKey(bin)
	if !ok {
		t.Fatal("no key")
	}
	name := entryName(cache, k)
	hit := readEntry(name, k, nil)
	if hit == nil {
		t.Fatal("the first build left no entry")
	}
	sameTable(t, hit, want)
	got, err = cachedTable(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameTable(t, got, want)

	// Damaged rows: a miss, then rebuilt and rewritten.
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-3] ^= 0xff
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if readEntry(name, k, nil) != nil {
		t.Fatal("a damaged entry was read")
	}
	if got, err = cachedTable(bin, nil); err != nil {
		t.Fatal(err)
	}
	sameTable(t, got, want)
	if readEntry(name, k, nil) == nil {
		t.Fatal("the damaged entry was not rewritten")
	}
	// Truncated: a miss.
	if err := os.WriteFile(name, b[:20], 0o600); err != nil {
		t.Fatal(err)
	}
	if readEntry(name, k, nil) != nil {
		t.Fatal("a truncated entry was read")
	}

	// Another file at the same path: another key, its own table.
	copyFile(t, "/bin/ls", bin)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	k2, _ := statKey(bin)
	if k2 == k {
		t.Fatal("a changed file kept its key")
	}
	want2, err := unwind.BuildTableFile(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = cachedTable(bin, nil); err != nil {
		t.Fatal(err)
	}
	sameTable(t, got, want2)

	// A cache directory others can write is not used.
	if err := os.Chmod(cache, 0o777); err != nil {
		t.Fatal(err)
	}
	if cacheDirOK(cache) {
		t.Fatal("a world-writable cache directory was used")
	}
	// Nor is one to be made in another user's directory.
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 12345, 12345); err != nil {
		t.Skipf("chown: %v", err)
	}
	if cacheDirOK(filepath.Join(other, ".cache", "memtrace")) {
		t.Fatal("a cache directory was made in another user's directory")
	}
	if _, err := os.Stat(filepath.Join(other, ".cache")); err == nil {
		t.Fatal("a directory was created in another user's directory")
	}
}

// TestTableCacheTrim: the cache keeps the most recently used entries
// within its bound and removes the oldest.
func TestTableCacheTrim(t *testing.T) {
	dir := t.TempDir()
	base := time.Now().Add(-time.Hour)
	for i := range 5 {
		p := filepath.Join(dir, fmt.Sprint("e", i))
		if err := os.WriteFile(p, make([]byte, 1000), 0o600); err != nil {
			t.Fatal(err)
		}
		at := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	trimCache(dir, 2500)
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if !reflect.DeepEqual(left, []string{"e3", "e4"}) {
		t.Fatalf("left %v after trimming to 2500 bytes, want the two newest, e3 e4", left)
	}
}

// TestTableCacheSeparateDebug: a table built with the file's separate
// debug file is kept with what the lookup found, read back while the
// lookup finds the same, and rebuilt when the debug file comes or goes.
func TestTableCacheSeparateDebug(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	useTableCache(t, cache)
	bin, dbg := unwindtest.SeparateDebugOnly(t, dir)
	away := filepath.Join(dir, "away")
	sep := func() (io.ReaderAt, int64, func()) {
		f, err := os.Open(dbg)
		if err != nil {
			return nil, 0, nil
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return f, st.Size(), func() { f.Close() }
	}
	opts := &unwind.Options{SeparateDebug: sep}
	with, err := unwind.BuildTableFile(bin, opts)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := unwind.BuildTableFile(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !with.Stats.SeparateDebug || with.Stats.Rows <= plain.Stats.Rows {
		t.Fatalf("the fixture: separate %v, %d rows with the debug file, %d without", with.Stats.SeparateDebug, with.Stats.Rows, plain.Stats.Rows)
	}
	k, ok := statKey(bin)
	if !ok {
		t.Fatal("no key")
	}
	name := entryName(cache, k)
	check := func(what string, want *unwind.Table) {
		t.Helper()
		got, err := cachedTable(bin, opts)
		if err != nil {
			t.Fatal(err)
		}
		sameTable(t, got, want)
		hit := readEntry(name, k, sep)
		if hit == nil {
			t.Fatalf("%s: no entry read back", what)
		}
		sameTable(t, hit, want)
		if readEntry(name, k, nil) != nil {
			t.Fatalf("%s: an entry that asked for the debug file was read without the lookup", what)
		}
	}
	check("with the debug file", with)
	// Gone: the entry built with it is a miss; the table without it is kept.
	if err := os.Rename(dbg, away); err != nil {
		t.Fatal(err)
	}
	if readEntry(name, k, sep) != nil {
		t.Fatal("the entry built with the debug file was read after it was removed")
	}
	check("without the debug file", plain)
	// Back (another inode): a miss again.
	b, err := os.ReadFile(away)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dbg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if readEntry(name, k, sep) != nil {
		t.Fatal("the entry built without the debug file was read after it was installed")
	}
	check("with the debug file again", with)
}

// useTableCache points the table cache at dir for the test's length.
func useTableCache(t *testing.T, dir string) {
	t.Helper()
	old := tableCacheDir
	tableCacheDir = func() string { return dir }
	t.Cleanup(func() { tableCacheDir = old })
}
