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

// FuzzParseStat: any /proc/PID/stat text is parsed or refused, without a
// panic; a state is one byte after the comm's last parenthesis.
func FuzzParseStat(f *testing.F) {
	f.Add("42 (a) b (c)) S 1 42 42 0 -1 2097216 0 0")
	f.Add("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0")
	f.Add("42 (no close")
	f.Add(")")
	f.Fuzz(func(t *testing.T, s string) {
		st, _, ok := parseStat(s)
		if ok && strings.IndexByte(s[strings.LastIndexByte(s, ')'):], st) < 0 {
			t.Fatalf("parseStat(%q) state %q is not after the comm", s, st)
		}
	})
}
