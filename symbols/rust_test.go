package symbols

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/bpftest"
)

const rustSrc = `mod deep {
    #[inline(never)]
    pub fn leaf(v: &mut Vec<u64>) -> usize { v.push(7); v.len() } // MARK:leaf 
    pub struct Holder<T>(pub T);
    impl<T: Clone> Holder<T> {
        #[inline(never)]
        pub fn get(&self) -> T { self.0.clone() }
    }
}
fn main() {
    let mut v = Vec::new();
    let n = deep::leaf(&mut v);
    let h = deep::Holder(n as u32);
    println!("{}", h.get());
}
`

var rustHash = regexp.MustCompile(`::h[0-9a-f]{16}$|\[[0-9a-f]+\]`)

// Rust symbols, legacy (_ZN...17h<hash>E) and v0 (_R...) mangling: found by
// address, demangled like binutils' c++filt does, with source lines.
func TestRustSymbols(t *testing.T) {
	rustc, err := exec.LookPath("rustc")
	if err != nil {
		bpftest.Unavailable(t, "rustc not installed (make deps installs it)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "rtest.rs")
	writeFile(t, src, rustSrc)
	for _, mangling := range []string{"legacy", "v0"} {
		t.Run(mangling, func(t *testing.T) {
			bin := filepath.Join(dir, "rtest_"+mangling)
			cmd := exec.Command(rustc, "-g", "-C", "opt-level=1", "-Z", "unstable-options",
				"-C", "symbol-mangling-version="+mangling, "-o", bin, src)
			// legacy needs -Z unstable-options on current stable rustc.
			cmd.Env = append(os.Environ(), "RUSTC_BOOTSTRAP=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("rustc: %v\n%s", err, out)
			}
			var names []string
			var addrs []uint64
			for _, l := range strings.Split(run(t, "nm", bin), "\n") {
				f := strings.Fields(l)
				if len(f) == 3 && (f[1] == "t" || f[1] == "T") && strings.Contains(f[2], "5rtest") && strings.Contains(f[2], "4deep") {
					a, _ := strconv.ParseUint(f[0], 16, 64)
					names, addrs = append(names, f[2]), append(addrs, a)
				}
			}
			if len(names) != 2 {
				t.Fatalf("nm found %d rtest::deep functions (%v), want 2", len(names), names)
			}
			want := cxxfilt(t, names)
			c := NewCache(nil)
			defer c.Close()
			m, err := c.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			sawLeaf := false
			for i, name := range names {
				fr, err := m.Resolve(addrs[i], WithSource)
				if fr.Symbol != name || fr.Offset != 0 {
					t.Errorf("%#x: %s+%#x (%v), nm says %s", addrs[i], fr.Symbol, fr.Offset, err, name)
				}
				// We print names like rustfilt: without the legacy
				// "::h<hash>" suffix or v0 crate disambiguators "[hash]".
				got := Demangle(name)
				w := rustHash.ReplaceAllString(want[i], "")
				if got != w || w == want[i] {
					t.Errorf("Demangle(%s) = %q, c++filt says %q (without hashes: %q)", name, got, want[i], w)
				}
				if strings.Contains(got, "::deep::leaf") {
					sawLeaf = true
					if fr.File != src || fr.Line != markLine(t, src, "leaf") {
						t.Errorf("leaf source %s:%d (%v), want %s:%d", fr.File, fr.Line, err, src, markLine(t, src, "leaf"))
					}
				}
			}
			if !sawLeaf {
				t.Fatalf("no demangled name contains ::deep::leaf: %v", names)
			}
		})
	}
}
