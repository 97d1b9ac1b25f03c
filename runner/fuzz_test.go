package runner

import (
	"strings"
	"syscall"
	"testing"
)

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

// TestFormatCred: what the shim is given reads back as the credential.
func TestFormatCred(t *testing.T) {
	s := FormatCred(&syscall.Credential{Uid: 1000, Gid: 100, Groups: []uint32{100, 27}})
	uid, gid, groups, err := ParseCred(s)
	if s != "1000:100:100,27" || err != nil || uid != 1000 || gid != 100 || len(groups) != 2 || groups[1] != 27 {
		t.Fatalf("FormatCred gave %q, read back as %d %d %v %v", s, uid, gid, groups, err)
	}
}
