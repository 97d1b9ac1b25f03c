package preload

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
	"github.com/memtrace/memtrace/runner"
)

// Tests of what the preload path promises beyond the log's layout: calls
// made before the library's constructor, the summary line, detaching while
// the program runs, running as another user, and the TCP viewer.

// buildEarly compiles testdata/early_lib.c (a library whose constructor
// allocates before the preload library is initialised) and a program
// linked against it.
func buildEarly(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	lib := filepath.Join(dir, "libearly.so")
	prog := filepath.Join(dir, "early")
	for _, args := range [][]string{
		{"-O1", "-fno-builtin", "-shared", "-fPIC", "-o", lib, "testdata/early_lib.c"},
		{"-O1", "-fno-builtin", "-o", prog, "testdata/early_main.c", "-L" + dir, "-learly", "-Wl,-rpath," + dir},
	} {
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, out)
		}
	}
	return prog
}

type opEv struct {
	op   string
	size uint64
	ptr  uint64
}

// TestEarlyAllocations: what early_lib's constructor does before the
// library's own constructor runs is logged exactly, in both modes, and the
// block it keeps is freed later with its size.
func TestEarlyAllocations(t *testing.T) {
	lib, _ := build(t)
	prog := buildEarly(t)
	want := []opEv{
		{"malloc", 12345, 0}, {"malloc", 999, 1}, {"free", 999, 1}, {"realloc", 1999, 2}, {"free", 1999, 2},
		{"strdup", 6, 3}, {"free", 6, 3}, {"mmap", 8192, 4}, {"munmap", 8192, 4}, {"free", 12345, 0},
	}
	check := func(t *testing.T, log string) {
		var got []opEv
		forEach(t, log, func(l *logfmt.Line) {
			if l.Kind == logfmt.KindAlloc || l.Kind == logfmt.KindFree {
				got = append(got, opEv{string(l.OpText), l.Size, l.Ptr})
			}
		})
		if len(got) != len(want) {
			t.Fatalf("events %v, want %d like %v", got, len(want), want)
		}
		// want's ptr is an index: equal indexes must be equal pointers.
		ptrs := map[uint64]uint64{}
		for i, w := range want {
			g := got[i]
			if g.op != w.op || g.size != w.size {
				t.Errorf("event %d: %s size=%d, want %s size=%d", i, g.op, g.size, w.op, w.size)
			}
			if p, ok := ptrs[w.ptr]; ok && p != g.ptr {
				t.Errorf("event %d: ptr %#x, want %#x (the block of an earlier event)", i, g.ptr, p)
			}
			ptrs[w.ptr] = g.ptr
		}
	}
	t.Run("text", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "log")
		cmd := exec.Command(prog)
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "MEMTRACK_OUTPUT="+log)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		check(t, log)
	})
	t.Run("binary", func(t *testing.T) {
		t.Setenv(LibEnv, lib)
		log := filepath.Join(t.TempDir(), "log")
		if st, err := Run(context.Background(), Options{Output: runner.ParseOutput(log)}, []string{prog}); err != nil || st != 0 {
			t.Fatalf("status %d, err %v", st, err)
		}
		check(t, log)
	})
}

// summaryOf returns the log's summary fields, failing unless it is the
// last line, is written exactly as logfmt writes it, and its counts are
// those of the log's lines.
func summaryOf(t *testing.T, data []byte) map[string]uint64 {
	t.Helper()
	sc := logfmt.NewScanner(bytes.NewReader(data))
	var l logfmt.Line
	var allocs, frees, last uint64
	var sum map[string]uint64
	for sc.Scan() {
		last++
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("%q: %v", sc.Line(), err)
		}
		switch {
		case sum != nil:
			t.Fatalf("line after the summary: %q", sc.Line())
		case l.Kind == logfmt.KindAlloc:
			allocs++
		case l.Kind == logfmt.KindFree:
			frees++
		case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordSummary:
			kv := logfmt.Fields(l.Rest)
			again := logfmt.AppendMeta(nil, logfmt.WordSummary, kv...)
			if got := strings.TrimSuffix(string(again), "\n"); got != string(sc.Line()) {
				t.Errorf("summary not as logfmt writes it:\n%q\n%q", sc.Line(), got)
			}
			sum = map[string]uint64{}
			for _, k := range []string{"events", "allocs", "frees", "lost", "duration_us"} {
				v, ok := logfmt.Field(kv, k)
				n, err := strconv.ParseUint(v, 10, 64)
				if !ok || err != nil {
					t.Fatalf("summary has no number %s=: %q", k, sc.Line())
				}
				sum[k] = n
			}
		}
	}
	if sum == nil {
		t.Fatalf("no summary line in the log (%d lines)", last)
	}
	if sum["allocs"] != allocs || sum["frees"] != frees {
		t.Errorf("summary allocs=%d frees=%d, the log has %d and %d", sum["allocs"], sum["frees"], allocs, frees)
	}
	if sum["events"] < allocs+frees {
		t.Errorf("summary events=%d < %d alloc and free lines", sum["events"], allocs+frees)
	}
	return sum
}

func TestSummaryLine(t *testing.T) {
	lib, prog := build(t)
	t.Setenv(LibEnv, lib)
	log := filepath.Join(t.TempDir(), "log")
	start := time.Now()
	if st, err := Run(context.Background(), Options{Output: runner.ParseOutput(log)}, []string{prog, "threads"}); err != nil || st != 0 {
		t.Fatalf("status %d, err %v", st, err)
	}
	took := time.Since(start)
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	sum := summaryOf(t, data)
	// Three threads of 20 malloc+free each, and the EXIT of each.
	if sum["allocs"] < 60 || sum["frees"] < 60 || sum["events"] < 123 || sum["lost"] != 0 {
		t.Errorf("summary %v: want at least 60 allocs and frees, 123 events, none lost", sum)
	}
	if d := time.Duration(sum["duration_us"]) * time.Microsecond; d <= 0 || d > took {
		t.Errorf("duration_us=%d, but Run took %v", sum["duration_us"], took)
	}
}

// startDetach starts "prog detach" under the binary mode and waits for its
// "ready" line.
func startDetach(t *testing.T, lib, prog, log string) (*binLog, *exec.Cmd, io.WriteCloser, *bufio.Reader, Options) {
	t.Helper()
	opts := Options{Output: runner.ParseOutput(log)}
	cmd := exec.Command(prog, "detach")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	b, err := startBinaryLog(t, opts, cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	b.start()
	br := bufio.NewReader(out)
	line := make(chan string, 1)
	go func() { s, _ := br.ReadString('\n'); line <- s }()
	select {
	case s := <-line:
		if s != "ready\n" {
			t.Fatalf("program said %q before ready", s)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no ready line from the program")
	}
	return b, cmd, in, br, opts
}

// TestDetachStopsTheLibrary: after a detach the log ends with its summary,
// and the program's heavy work afterwards (two threads and a forked child)
// runs to the end without writing a record: the region hands out no new
// chunk, and nothing blocks.
func TestDetachStopsTheLibrary(t *testing.T) {
	lib, prog := build(t)
	for i := 0; i < 5; i++ {
		log := filepath.Join(t.TempDir(), "log")
		b, cmd, in, br, opts := startDetach(t, lib, prog, log)
		if err := b.detach(opts); err != nil {
			t.Fatal(err)
		}
		hw := b.reg.load(hHW)
		in.Write([]byte{1})
		done := make(chan error, 1)
		var rest []byte
		go func() {
			rest, _ = io.ReadAll(br) // before Wait, which closes the pipe
			done <- cmd.Wait()
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d: program after the detach: %v", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d: the program blocked after the detach", i)
		}
		if string(rest) != "done\n" {
			t.Fatalf("run %d: program output after ready: %q", i, rest)
		}
		// 1.8 million records would have needed ~220 chunks.
		if now := b.reg.load(hHW); now != hw {
			t.Errorf("run %d: the library took %d chunks after the detach", i, now-hw)
		}
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		sum := summaryOf(t, data)
		var before, after, headers int
		forEach(t, log, func(l *logfmt.Line) {
			switch {
			case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordHeader:
				headers++
			case l.Kind == logfmt.KindAlloc && l.Size == 1111:
				before++
			case l.Kind == logfmt.KindAlloc && l.Size == 7777:
				after++
			case l.Kind == logfmt.KindExit:
				t.Errorf("run %d: EXIT line for a thread still running at the detach", i)
			}
		})
		if headers != 1 {
			t.Errorf("run %d: %d header lines", i, headers)
		}
		if before != 100 || after != 0 {
			t.Errorf("run %d: %d of the 100 allocations before the detach logged, %d after it (summary %v)", i, before, after, sum)
		}
	}
}

// TestRunAsCredential: Run starts the program as Credential's user (with
// exactly its groups), the library loads in that process, and the log is
// created through OpenLog.
func TestRunAsCredential(t *testing.T) {
	if os.Geteuid() != 0 {
		bpftest.Unavailable(t, "needs root to run a program as another user")
	}
	lib, _ := build(t)
	// A directory the other user can walk, for the library.
	dir, err := os.MkdirTemp("", "memtrace-cred-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	pubLib := filepath.Join(dir, LibName)
	data, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubLib, data, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(LibEnv, pubLib)
	u, err := user.LookupId("65534")
	if err != nil {
		bpftest.Unavailable(t, "no user 65534 here")
	}
	gids, err := u.GroupIds()
	if err != nil {
		t.Fatal(err)
	}
	var groups []uint32
	for _, g := range gids {
		n, _ := strconv.ParseUint(g, 10, 32)
		groups = append(groups, uint32(n))
	}
	log := filepath.Join(t.TempDir(), "log")
	var opened []string
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	opts := Options{Output: runner.ParseOutput(log), Stdout: out,
		Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: groups},
		OpenLog: func(p string) (*os.File, error) {
			opened = append(opened, p)
			return os.Create(p)
		}}
	if st, err := Run(context.Background(), opts, []string{"/usr/bin/id"}); err != nil || st != 0 {
		t.Fatalf("status %d, err %v", st, err)
	}
	idOut, _ := os.ReadFile(out.Name())
	uid, gid, gotGroups := parseID(t, string(idOut))
	if uid != "65534" || gid != "65534" || gotGroups != strings.Join(gids, ",") {
		t.Errorf("id printed %q: want uid=65534 gid=65534 groups=%s", idOut, strings.Join(gids, ","))
	}
	if len(opened) != 1 || opened[0] != log {
		t.Errorf("OpenLog called for %v, want once for %s", opened, log)
	}
	var mode string
	var allocs int
	forEach(t, log, func(l *logfmt.Line) {
		if l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordHeader {
			mode, _ = logfmt.Field(logfmt.Fields(l.Rest), "mode")
		}
		if l.Kind == logfmt.KindAlloc {
			allocs++
		}
	})
	if mode != "preload" || allocs == 0 {
		t.Errorf("log header mode=%q, %d allocations: the library did not trace id as the other user", mode, allocs)
	}
}

// parseID reads id's "uid=N(name) gid=N(name) groups=N(name),..." line.
func parseID(t *testing.T, s string) (uid, gid, groups string) {
	t.Helper()
	num := func(v string) string {
		if i := strings.IndexByte(v, '('); i >= 0 {
			return v[:i]
		}
		return v
	}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "uid":
			uid = num(v)
		case "gid":
			gid = num(v)
		case "groups":
			var gs []string
			for _, g := range strings.Split(v, ",") {
				gs = append(gs, num(g))
			}
			groups = strings.Join(gs, ",")
		}
	}
	return uid, gid, groups
}

// TestSortFileKeepsOwner: root sorting a user's log (memtrace under sudo)
// leaves a file that is still the user's, with its mode.
func TestSortFileKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		bpftest.Unavailable(t, "needs root to own a file as another user")
	}
	var b []byte
	b = logfmt.AppendAlloc(b, 1, "a", "malloc", 9, 1, 1, 0x10)
	b = logfmt.AppendAlloc(b, 2, "b", "malloc", 3, 1, 1, 0x20)
	p := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(p, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := SortFile(p); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if sys.Uid != 65534 || sys.Gid != 65534 || st.Mode().Perm() != 0o640 {
		t.Errorf("sorted log is %d:%d %v, want 65534:65534 -rw-r-----", sys.Uid, sys.Gid, st.Mode().Perm())
	}
	if got, _ := os.ReadFile(p); !bytes.HasPrefix(got, logfmt.AppendAlloc(nil, 2, "b", "malloc", 3, 1, 1, 0x20)) {
		t.Errorf("not sorted: %q", got)
	}
}

// TestSortFileLeavesLinks: a log name that is a symbolic link (another
// user's, swapped in after the run) is not sorted: root neither reads what
// it points at nor replaces the link.
func TestSortFileLeavesLinks(t *testing.T) {
	var b []byte
	b = logfmt.AppendAlloc(b, 1, "a", "malloc", 9, 1, 1, 0x10)
	b = logfmt.AppendAlloc(b, 2, "b", "malloc", 3, 1, 1, 0x20)
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, b, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "log")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := SortFile(link); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced (%v)", err)
	}
	if got, _ := os.ReadFile(target); !bytes.Equal(got, b) {
		t.Errorf("the file behind the link was rewritten: %q", got)
	}
}

// TestCachedLibraryReachable: the directory the embedded library is
// written to lets other users through (the program may run as the user
// behind sudo), also when an older run made it 0700, and is still
// writable only by its owner.
func TestCachedLibraryReachable(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := filepath.Join(tmp, "memtrace-"+strconv.Itoa(os.Getuid()))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := writeCached([]byte("not really a library"))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	fst, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if dst.Mode().Perm() != 0o711 || fst.Mode().Perm() != 0o755 || filepath.Dir(p) != dir {
		t.Errorf("library %s %v in %s %v: want -rwxr-xr-x in drwx--x--x", p, fst.Mode().Perm(), dir, dst.Mode().Perm())
	}
}

// TestBinaryTCP: with a port, Run waits for the viewer before it starts
// the program and streams the converted log, summary included; a viewer
// that leaves early lets the program run to its end, with its status, and
// is one line at the end (as on the eBPF path: the log ends, not the run).
func TestBinaryTCP(t *testing.T) {
	lib, prog := build(t)
	t.Setenv(LibEnv, lib)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for _, leaveEarly := range []bool{false, true} {
		mode := map[bool]string{false: "threads", true: "spam"}[leaveEarly]
		marker := filepath.Join(t.TempDir(), "started")
		out, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			st  int
			err error
		}
		res := make(chan result, 1)
		go func() {
			// The marker proves when the program ran: the shell
			// creates it, then execs the program.
			st, err := Run(context.Background(), Options{Listen: "127.0.0.1:" + strconv.Itoa(port), Stdout: out, Stderr: out},
				[]string{"/bin/sh", "-c", fmt.Sprintf("touch %s && exec %s %s", marker, prog, mode)})
			res <- result{st, err}
		}()
		var c net.Conn
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if c, err = net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil || time.Now().After(deadline) {
				break
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the program started before a viewer connected")
			}
		}
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		if leaveEarly {
			br := bufio.NewReader(c)
			for i := 0; i < 20; i++ {
				if _, err := br.ReadString('\n'); err != nil {
					t.Fatal(err)
				}
			}
			c.Close()
		} else {
			data, err := io.ReadAll(c)
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			sum := summaryOf(t, data)
			if sum["allocs"] < 60 {
				t.Errorf("summary over TCP %v: want at least 60 allocs", sum)
			}
		}
		select {
		case r := <-res:
			if r.st != 0 {
				t.Errorf("leaveEarly=%v: status %d, err %v", leaveEarly, r.st, r.err)
			}
			if r.err != nil {
				t.Errorf("leaveEarly=%v: err %v", leaveEarly, r.err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("leaveEarly=%v: Run did not return", leaveEarly)
		}
		got, _ := os.ReadFile(out.Name())
		if leaveEarly && !strings.Contains(string(got), "done\n") {
			t.Errorf("the program did not run to its end after the viewer left: %q", got)
		}
		if incomplete := strings.Count(string(got), "the viewer closed its connection"); incomplete != map[bool]int{false: 0, true: 1}[leaveEarly] {
			t.Errorf("leaveEarly=%v: %d lines saying the viewer left: %q", leaveEarly, incomplete, got)
		}
		out.Close()
	}
}

// FuzzLibEnvListen: whatever --listen holds, the library's environment
// either says no or names a port in range, the same in both variables.
func FuzzLibEnvListen(f *testing.F) {
	for _, s := range []string{"", "127.0.0.1:4242", "[::1]:80", ":9", "0.0.0.0", "[::]", "host:x", "a:b:c", "[::1", "1.2.3.4:70000", "[]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, listen string) {
		env, err := libEnv(Options{Listen: listen})
		if err != nil || listen == "" {
			return
		}
		var addr, port string
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "MEMTRACE_LISTEN="); ok {
				addr = v
			}
			if v, ok := strings.CutPrefix(kv, "MEMTRACK_PORT="); ok {
				port = v
			}
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || !strings.HasSuffix(addr, ":"+port) {
			t.Fatalf("Listen %q: MEMTRACE_LISTEN=%q MEMTRACK_PORT=%q", listen, addr, port)
		}
	})
}
