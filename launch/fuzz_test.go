package launch

import (
	"strings"
	"testing"
)

// FuzzListedLibs: any ld.so output gives absolute paths only, never the
// linker itself, and no panic.
func FuzzListedLibs(f *testing.F) {
	f.Add("\tlinux-vdso.so.1 (0x00007ff4edcdb000)\n\t/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 (0x00007ff4ed800000)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007ff4ed61e000)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007ff4edcdd000)\n")
	f.Add("\tlibgone.so.1 => not found\n")
	f.Add("\tstatically linked\n")
	f.Add("=>\n=> /x\n/\n")
	f.Fuzz(func(t *testing.T, out string) {
		for _, p := range listedLibs(out, "/lib64/ld-linux-x86-64.so.2") {
			if !strings.HasPrefix(p, "/") || p == "/lib64/ld-linux-x86-64.so.2" {
				t.Fatalf("listedLibs(%q) gave %q", out, p)
			}
		}
	})
}
