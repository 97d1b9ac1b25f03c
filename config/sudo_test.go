package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/bpftest"
)

// A line like /etc/shadow's first: nothing of it may reach an error.
const shadowLine = "root:$y$j9T$s3cr3tSALT$s3cr3tHASHvalue:19000:0:99999:7:::"

// rootOnly writes a 0600 root file in a directory anyone can walk (the
// parent of t.TempDir is private to root, which would hide the file from
// the user for the wrong reason).
func rootOnly(t *testing.T, body string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "memtrace-config")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "shadow")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sudoAs(t *testing.T, uid string) {
	t.Helper()
	if os.Geteuid() != 0 {
		bpftest.Unavailable(t, "simulating sudo needs root")
	}
	t.Setenv("SUDO_UID", uid)
	t.Setenv("SUDO_GID", uid)
}

// Under sudo the file is opened as the invoking user, so the kernel refuses
// a root-only file and nothing of it is read.
func TestLoadUnderSudoRefusesRootOnlyFile(t *testing.T) {
	p := rootOnly(t, shadowLine+"\ndaemon:*:19000:0:99999:7:::\n")
	sudoAs(t, "65534")
	for _, env := range [][]string{nil, {"MEMTRACE_CONFIG=" + p}} {
		path := p
		if env != nil {
			path = ""
		}
		_, err := Load(path, env)
		want := "cannot read config file " + p + ": permission denied; check the path given with --config or MEMTRACE_CONFIG (under sudo memtrace reads it as the user who ran sudo)"
		if err == nil || err.Error() != want {
			t.Errorf("Load(%q, %v) under sudo: %v\nwant %s", path, env, err, want)
		}
	}
	// Root itself (no sudo) may read it, and the parse error still
	// shows nothing of it.
	t.Setenv("SUDO_UID", "")
	_, err := Load(p, nil)
	if err == nil || err.Error() != "config file "+p+": line 1 is not key=value; write one of track, stack_depth, report_dir, snapshot_interval_ms, peak_top_n, min_alloc as key=value, or start the line with # to comment it out" {
		t.Errorf("as root: %v", err)
	}
}

// A file the user may read is read as the user and parsed as before.
func TestLoadUnderSudoReadsUserFile(t *testing.T) {
	p := rootOnly(t, "stack_depth=9\n")
	sudoAs(t, "65534")
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	s, err := Load(p, nil)
	if err != nil || s.StackDepth != 9 {
		t.Fatalf("user's own 0600 file under sudo: %+v, %v", s, err)
	}
	// A bad SUDO_UID stops memtrace instead of reading as root.
	t.Setenv("SUDO_UID", "someone")
	if _, err := Load(p, nil); err == nil || !strings.Contains(err.Error(), `SUDO_UID="someone" is not a user ID`) {
		t.Errorf("bad SUDO_UID: %v", err)
	}
}

// No error shows a value or a raw line of the file: only the file name,
// the line number and a key (when it is short and spelled like one).
func TestParseErrorsShowNoContent(t *testing.T) {
	cases := []struct{ in, want string }{
		{shadowLine + "\n", "config file f.cfg: line 1 is not key=value"},
		{"password: hunter2\n", "config file f.cfg: line 1 is not key=value"},
		{"token=hunter2\n", `config file f.cfg:1: unknown key "token"; the keys are`},
		{"$6$hunter2=x\n", "config file f.cfg:1: unknown key (not shown: not a short name)"},
		{"hunter2hunter2hunter2hunter2hunter2=x\n", "config file f.cfg:1: unknown key (not shown: not a short name)"},
		{"stack_depth=hunter2\n", "config file f.cfg:1: bad stack_depth value: want a whole number from 0 to 127"},
		{"min_alloc=hunter2\n", "config file f.cfg:1: bad min_alloc value: want a byte count"},
		{"track=malloc,hunter2\n", "config file f.cfg:1: bad track value: want a comma-separated list of malloc,mmap,fd,dmabuf,ion"},
		{"peak_top_n=1\npeak_top_n=hunter2\n", "config file f.cfg:2: peak_top_n is set again (first at f.cfg:1)"},
		{"report_dir=/x/hunter2\x00\n", "config file f.cfg:1: bad report_dir value: a NUL byte in the path"},
	}
	for _, c := range cases {
		_, err := Parse("f.cfg", []byte(c.in))
		if err == nil {
			t.Errorf("%q: no error", c.in)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, c.want) || strings.Contains(msg, "hunter") || strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "$") {
			t.Errorf("%q: error %q; want %q... and no content of the file", c.in, msg, c.want)
		}
	}
}

// notEchoed are bytes that no error text of Parse contains, nor a key it
// may show: if one shows up in an error, the error echoed the file.
const notEchoed = "$!@%^&*~|\\{}[]<>?+`"

func FuzzParseNoEcho(f *testing.F) {
	f.Add([]byte(shadowLine))
	f.Add([]byte("stack_depth=$1\n"))
	f.Add([]byte("track=malloc,$x"))
	f.Add([]byte("$=1"))
	f.Add([]byte("key!=value"))
	f.Add([]byte("min_alloc=1\xff"))
	f.Add([]byte("report_dir=\x00?"))
	f.Add([]byte(memmonExample + "peak_top_n=<script>\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := Parse("fuzz.cfg", data)
		if err == nil {
			return
		}
		for _, c := range []byte(err.Error()) {
			if c < ' ' || c >= 0x7f || strings.IndexByte(notEchoed, c) >= 0 {
				t.Fatalf("error %q shows byte %q of the file", err, c)
			}
		}
	})
}
