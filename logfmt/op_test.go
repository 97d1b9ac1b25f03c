package logfmt

import "testing"

// TestOpNamesRoundTrip: every op's text parses back to it (the allocator
// APIs' ops included), and the releasing ones are exactly those that free.
func TestOpNamesRoundTrip(t *testing.T) {
	frees := map[string]bool{"free": true, "delete": true, "delete[]": true, "munmap": true,
		"sdallocx": true, "dallocx": true, "tc_free": true, "tc_cfree": true, "tc_delete": true,
		"tc_deletearray": true, "mi_free": true}
	seen := map[string]bool{}
	for o := Op(1); int(o) < NumOps; o++ {
		name := o.String()
		if name == "?" || seen[name] {
			t.Fatalf("op %d has no name of its own (%q)", o, name)
		}
		seen[name] = true
		if got := ParseOp([]byte(name)); got != o {
			t.Errorf("ParseOp(%q) = %d, want %d", name, got, o)
		}
		if o.IsFree() != frees[name] {
			t.Errorf("%s: IsFree = %v", name, o.IsFree())
		}
	}
	for name := range frees {
		if !seen[name] {
			t.Errorf("free op %q is not an op", name)
		}
	}
	// Numbers the preload library's records carry never move.
	if OpPvalloc != 19 || OpMallocx != 20 || OpMiReallocAligned != 47 {
		t.Errorf("op numbers moved: pvalloc %d mallocx %d mi_realloc_aligned %d", OpPvalloc, OpMallocx, OpMiReallocAligned)
	}
	if ParseOp([]byte("je_mallocx")) != OpOther || Op(200).String() != "?" {
		t.Error("unknown op names are not OpOther")
	}
}
