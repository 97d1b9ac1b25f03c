package symbols

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func mustLookupAt(t *testing.T, as *AddressSpace, addr, at uint64) Location {
	t.Helper()
	loc, ok := as.LookupAt(addr, at)
	if !ok {
		t.Fatalf("LookupAt(%#x, %d): nothing", addr, at)
	}
	return loc
}

func TestAddressSpaceOverlapAndHistory(t *testing.T) {
	as, _ := NewAddressSpace(NewCache(nil), 0)
	// Non-executable file mappings: recorded without opening any file.
	a := Mapping{Start: 0x1000, End: 0x4000, Perms: "r--p", Offset: 0x100, File: FileID{8, 1, 11}, Path: "/a"}
	b := Mapping{Start: 0x2000, End: 0x3000, Perms: "r--p", Offset: 0, File: FileID{8, 1, 22}, Path: "/b"}
	as.AddMapping(a, 1)
	as.AddMapping(b, 5)

	if l := mustLookupAt(t, as, 0x2500, 9); l.Mapping.Path != "/b" {
		t.Errorf("after b: %s", l.Mapping.Path)
	}
	if l := mustLookupAt(t, as, 0x2500, 3); l.Mapping.Path != "/a" || l.ModuleOffset != 0x1600 {
		t.Errorf("before b: %s %#x, want /a 0x1600", l.Mapping.Path, l.ModuleOffset)
	}
	// The parts of a outside b are still current, with their file offsets.
	if l := mustLookupAt(t, as, 0x1800, 9); l.Mapping.Path != "/a" || l.ModuleOffset != 0x900 {
		t.Errorf("left of b: %s %#x", l.Mapping.Path, l.ModuleOffset)
	}
	if l := mustLookupAt(t, as, 0x3800, 9); l.Mapping.Path != "/a" || l.ModuleOffset != 0x2900 {
		t.Errorf("right of b: %s %#x, want /a 0x2900", l.Mapping.Path, l.ModuleOffset)
	}

	// A snapshot that no longer lists b (munmap, dlclose) keeps it.
	as.AddSnapshot([]Mapping{{Start: 0x1000, End: 0x2000, Perms: "r--p", Offset: 0x100, File: FileID{8, 1, 11}, Path: "/a"}}, 7)
	if l := mustLookupAt(t, as, 0x2500, 8); l.Mapping.Path != "/b" {
		t.Errorf("after b vanished from maps: %s", l.Mapping.Path)
	}
	// Re-adding what is already known changes nothing.
	n := len(as.old)
	as.AddMapping(b, 8)
	if len(as.old) != n {
		t.Errorf("re-adding an identical mapping superseded something (%d -> %d)", n, len(as.old))
	}

	// exec: the old image answers for earlier times, the new one after.
	as.Exec(10)
	c := Mapping{Start: 0x2000, End: 0x5000, Perms: "r--p", File: FileID{8, 1, 33}, Path: "/c"}
	as.AddMapping(c, 11)
	if l := mustLookupAt(t, as, 0x2500, 12); l.Mapping.Path != "/c" {
		t.Errorf("after exec: %s", l.Mapping.Path)
	}
	if l := mustLookupAt(t, as, 0x2500, 6); l.Mapping.Path != "/b" {
		t.Errorf("before exec: %s", l.Mapping.Path)
	}
	if l := mustLookupAt(t, as, 0x1500, 9); l.Mapping.Path != "/a" {
		t.Errorf("old image before exec: %s", l.Mapping.Path)
	}
	if _, ok := as.Lookup(0x9000); ok {
		t.Error("address never mapped resolved")
	}
}

// Two processes (and two paths) mapping the same build share one module.
func TestCacheSharesModules(t *testing.T) {
	f := fixtures(t)
	dir := t.TempDir()
	cp := filepath.Join(dir, "prog-copy")
	data, _ := os.ReadFile(f.prog)
	writeFile(t, cp, string(data))
	c := NewCache(nil)
	defer c.Close()
	var mods []*Module
	for i, p := range []string{f.prog, f.prog, cp} {
		st, _ := os.Stat(p)
		_ = st
		mf, _ := os.Open(p)
		id, _, _, _ := fileIDOf(mf)
		mf.Close()
		as, _ := NewAddressSpace(c, 0)
		base := uint64(0x10000000 * (i + 1))
		if err := as.AddMapping(Mapping{Start: base, End: base + 0x10000, Perms: "r-xp", File: id, Path: p}, 1); err != nil {
			t.Fatal(err)
		}
		loc, _ := as.Lookup(base)
		if loc.Module == nil {
			t.Fatalf("%s: no module", p)
		}
		mods = append(mods, loc.Module)
	}
	if c.Len() != 1 || mods[0] != mods[1] || mods[1] != mods[2] {
		t.Fatalf("cache holds %d modules; same build should share one", c.Len())
	}
}

func TestNewAddressSpaceBadPID(t *testing.T) {
	_, err := NewAddressSpace(NewCache(nil), 1<<30)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("nonexistent pid: %v", err)
	}
}

// The agent resolves from several goroutines while mappings keep arriving;
// every goroutine must see the same answers as a single-threaded pass.
func TestConcurrentResolve(t *testing.T) {
	f := fixtures(t)
	r := runProg(t, f.prog, "inline")
	ref := newAS(t, NewCache(nil), r.maps["MAPS"])
	var want []Frame
	for _, bt := range r.frames {
		fr, _ := ref.Resolve(bt.addr, ReturnAddress|WithSource)
		want = append(want, fr)
	}
	c := NewCache(nil)
	defer c.Close()
	as := newAS(t, c, nil)
	as.AddSnapshot(r.maps["MAPS"], 1)
	errc := make(chan string, 8)
	for g := 0; g < 8; g++ {
		go func(g int) {
			for it := 0; it < 20; it++ {
				if g == 0 {
					// Unrelated mappings arriving meanwhile.
					as.AddMapping(Mapping{Start: uint64(0x1000 * (it + 1)), End: uint64(0x1000 * (it + 2)), Perms: "rw-p"}, uint64(2+it))
				}
				for i, bt := range r.frames {
					fr, _ := as.Resolve(bt.addr, ReturnAddress|WithSource)
					if fr.Symbol != want[i].Symbol || fr.Line != want[i].Line || len(fr.Source) != len(want[i].Source) {
						errc <- fmt.Sprintf("goroutine %d frame %d: %+v, want %+v", g, i, fr, want[i])
						return
					}
				}
			}
			errc <- ""
		}(g)
	}
	for g := 0; g < 8; g++ {
		if e := <-errc; e != "" {
			t.Error(e)
		}
	}
}
