package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
)

// term is the real memview in a detached tmux session of fixed size, on
// a private tmux server.
type term struct {
	t    *testing.T
	sock string
	sess string
}

var termN int

func newTerm(t *testing.T, cmdline string) *term {
	t.Helper()
	if testing.Short() {
		t.Skip("drives memview in tmux, polling its screen: make test runs it")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		bpftest.Unavailable(t, "tmux not installed (make deps installs it)")
	}
	termN++
	tm := &term{t: t, sock: fmt.Sprintf("memview-test-%d", os.Getpid()), sess: fmt.Sprintf("s%d", termN)}
	// TERM inside is one that tcell knows without a terminfo database.
	// The private server exits with its last session: a session started
	// just then meets a server on its way out, and is started again.
	args := []string{"-L", tm.sock, "-f", "/dev/null", "new-session", "-d", "-e", "TERM=xterm-256color", "-s", tm.sess, "-x", "140", "-y", "40", cmdline}
	for try := 0; ; try++ {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err == nil {
			break
		}
		if try == 4 || !strings.Contains(string(out), "server exited unexpectedly") {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() {
		exec.Command("tmux", "-L", tm.sock, "kill-session", "-t", tm.sess).Run()
	})
	return tm
}

func (tm *term) tmux(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tm.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// screen returns a settled capture: tcell writes a frame as many terminal
// writes and tmux can be captured between them (a header of the new frame
// over the list of the old one), so it waits for two equal captures.
func (tm *term) screen() string {
	s := tm.tmux("capture-pane", "-p", "-t", tm.sess)
	for range 10 {
		time.Sleep(15 * time.Millisecond)
		again := tm.tmux("capture-pane", "-p", "-t", tm.sess)
		if again == s {
			break
		}
		s = again
	}
	return s
}

func (tm *term) send(keys ...string) {
	tm.tmux(append([]string{"send-keys", "-t", tm.sess}, keys...)...)
}

// waitFor polls the screen until it contains all of want.
func (tm *term) waitFor(want ...string) string {
	tm.t.Helper()
	var s string
	for i := 0; i < 200; i++ {
		s = tm.screen()
		ok := true
		for _, w := range want {
			if !strings.Contains(s, w) {
				ok = false
			}
		}
		if ok {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	tm.t.Fatalf("screen never showed %q:\n%s", want, s)
	return ""
}

func (tm *term) waitUntil(what string, ok func(string) bool) {
	tm.t.Helper()
	var s string
	for i := 0; i < 200; i++ {
		if s = tm.screen(); ok(s) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tm.t.Fatalf("screen never showed %s:\n%s", what, s)
}

func (tm *term) waitGone() {
	tm.t.Helper()
	for i := 0; i < 100; i++ {
		if exec.Command("tmux", "-L", tm.sock, "has-session", "-t", tm.sess).Run() != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tm.t.Fatalf("memview did not quit:\n%s", tm.screen())
}

func TestTmuxFile(t *testing.T) {
	p := writeTemp(t, "s.log", sampleLog())
	tm := newTerm(t, bin+" "+p)
	tm.waitFor("✕ DONE", "4 allocs", "4 shown", "pid 4321 ./sample", "Lost: 3", "Leaks: ≤2  (400B)")
	tm.send("f")
	tm.waitFor("Filter: Leaks", "2 shown")
	// tmux may capture a frame half drawn: wait for the settled screen.
	tm.waitUntil("no freed record under the Leaks filter", func(s string) bool {
		return !strings.Contains(s, "│[F]") && strings.Contains(s, "[L] 0x1000") && strings.Contains(s, "[L] 0x3000")
	})
	tm.send("\\")
	tm.waitFor("Call site", "sample::leak()")
	tm.send("?")
	tm.waitFor("memview keys", "delta mode")
	tm.send("Escape")
	// tcell reads ESC followed at once by a key as Alt-key: wait for the
	// help to close first.
	for i := 0; i < 100 && strings.Contains(tm.screen(), "memview keys"); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	tm.send("/", "worker", "Enter")
	tm.waitFor("Search: worker")
	tm.send("q")
	tm.waitGone()
}

func TestTmuxFollowFile(t *testing.T) {
	p := writeTemp(t, "live.log", sampleLog()[:0])
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tm := newTerm(t, bin+" -f "+p)
	tm.waitFor("● LIVE", "0 allocs", "Follow: ON")
	var b []byte
	for i := 0; i < 50; i++ {
		b = logfmt.AppendAlloc(b, 7, "grower", "malloc", uint64(100+i), 64, uint64(64*(i+1)), uint64(0x9000+i*0x40))
	}
	f.Write(b)
	tm.waitFor("50 allocs", "0x9c40", "grower")
	// An appended half line waits for its end.
	line := logfmt.AppendAlloc(nil, 7, "grower", "malloc", 200, 64, 0, 0xabc000)
	f.Write(line[:30])
	time.Sleep(400 * time.Millisecond)
	f.Write(line[30:])
	tm.waitFor("51 allocs", "0xabc000")
	if strings.Contains(tm.screen(), "Skipped") {
		t.Fatalf("a line split across reads was counted as bad:\n%s", tm.screen())
	}
	tm.send("q")
	tm.waitGone()
}

func TestTmuxStdin(t *testing.T) {
	p := writeTemp(t, "s.log", sampleLog())
	tm := newTerm(t, "cat "+p+" | "+bin+" -f -")
	tm.waitFor("✕ DONE", "stdin", "4 allocs", "Leaks: ≤2")
	tm.send("Escape")
	tm.waitGone()
}

func TestTmuxTCPSave(t *testing.T) {
	data := sampleLog()
	cut := append(append([]byte(nil), data...), "[memtrack] tid=1      (main           ) mall"...) // ends mid-line
	addr := serveOnce(t, cut, 300*time.Millisecond)
	save := filepath.Join(t.TempDir(), "save.log")
	tm := newTerm(t, bin+" "+addr+" -o "+save)
	tm.waitFor("✕ DONE", "4 allocs", "Lost: 3")
	tm.send("q")
	tm.waitGone()
	got, err := os.ReadFile(save)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(data) {
		t.Fatalf("saved log differs from the complete lines streamed:\n%q", got)
	}
	// The saved log replays.
	out, _, code := runBin(t, "--dump-threads", save)
	if code != 0 || !strings.Contains(out, "TOTAL") {
		t.Fatalf("replay: %d\n%s", code, out)
	}
}

func TestTmuxConnectRefused(t *testing.T) {
	save := filepath.Join(t.TempDir(), "never.log")
	tm := newTerm(t, "sh -c '"+bin+" 127.0.0.1:1 -o "+save+"; echo rc=$?; sleep 30'")
	s := tm.waitFor("rc=1")
	if !strings.Contains(s, "memview: connect to 127.0.0.1:1") {
		t.Fatalf("no clear error:\n%s", s)
	}
	if _, err := os.Stat(save); err == nil {
		t.Fatal("a failed connection left an empty saved log behind")
	}
}
