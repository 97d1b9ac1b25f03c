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

// FuzzParseCred: any credential string is parsed or refused, without a
// panic, and a parsed one gives back its own numbers.
func FuzzParseCred(f *testing.F) {
	f.Add("1000:1000:1000,27,100")
	f.Add("0:0:")
	f.Add("x:1:2")
	f.Add("1:2")
	f.Fuzz(func(t *testing.T, cred string) {
		uid, gid, groups, err := ParseCred(cred)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "bad credential") {
				t.Fatalf("ParseCred(%q): %v", cred, err)
			}
			return
		}
		if len(groups) > strings.Count(cred, ",")+1 || uid < 0 && !strings.HasPrefix(cred, "-") || gid < 0 && !strings.Contains(cred, ":-") {
			t.Fatalf("ParseCred(%q) = %d %d %v", cred, uid, gid, groups)
		}
	})
}
