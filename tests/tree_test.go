package tests

// Issue 7 end to end in eBPF mode: a process tree followed with --follow,
// snapshots while the target runs, per-process reports and their
// aggregation, descriptor leaks, file mappings, and a bad config file.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/logfmt"
)

const treeSrc = `#include <stdlib.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
	void *volatile a = malloc(1111);
	pid_t c = fork();
	if (c == 0) {
		void *volatile b = malloc(2222);
		free(a); /* the parent's block, inherited */
		pid_t g = fork();
		if (g == 0) {
			void *volatile x = malloc(4444);
			free(x);
			execl(argv[1], argv[1], "exec'd", (char *)0);
			_exit(9);
		}
		waitpid(g, 0, 0);
		free(b);
		_exit(0);
	}
	waitpid(c, 0, 0);
	void *volatile d = malloc(3333);
	free(d);
	printf("%d %d\n", getpid(), c);
	return 0;
}
`

const execdSrc = `#include <stdlib.h>
int main(void) { void *volatile p = malloc(5555); free(p); return 0; }
`

type treeLog struct {
	pidOf  map[int64]int64 // tid -> pid from [memtrace] thread lines
	events []treeEvent
	procs  []map[string]string
}

type treeEvent struct {
	tid       int64
	kind      logfmt.Kind
	size, ptr uint64
}

func readTree(t *testing.T, path string) *treeLog {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tl := &treeLog{pidOf: map[int64]int64{}}
	sc := logfmt.NewScanner(bytes.NewReader(b))
	var l logfmt.Line
	for sc.Scan() {
		if l.Parse(sc.Line()) != nil {
			continue
		}
		switch l.Kind {
		case logfmt.KindAlloc, logfmt.KindFree:
			tl.events = append(tl.events, treeEvent{l.TID, l.Kind, l.Size, l.Ptr})
		case logfmt.KindMeta:
			kv := logfmt.Fields(l.Rest)
			m := map[string]string{}
			for _, f := range kv {
				m[f.Key] = f.Value
			}
			switch string(l.Word) {
			case logfmt.WordThread:
				var tid, pid int64
				fmt.Sscan(m["tid"], &tid)
				fmt.Sscan(m["pid"], &pid)
				tl.pidOf[tid] = pid
			case logfmt.WordProc:
				tl.procs = append(tl.procs, m)
			}
		}
	}
	return tl
}

// TestFollowProcessTree: fork, a grandchild, an exec: every allocation is
// logged once, in the process that made it; without --follow only the
// program's own. Both paths (under --preload the library turns itself off
// in every process that is not memtrace's child: the grandchild's exec
// included).
func TestFollowProcessTree(t *testing.T) {
	tree := buildWith(t, "gcc", "tree", treeSrc, "-O1")
	execd := buildWith(t, "gcc", "execd", execdSrc, "-O1")
	bothPaths(t, func(t *testing.T, pre []string, bpf bool) { followTree(t, pre, tree, execd, bpf) })
}

func followTree(t *testing.T, pre []string, tree, execd string, bpf bool) {
	log := filepath.Join(t.TempDir(), "log")
	code, so, se := memtraceRun(t, nil, append(pre, "--follow", "-o", log, "--", tree, execd)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	if bpf {
		bpfLog(t, log)
	}
	var parent, child int64
	fmt.Sscan(so, &parent, &child)
	tl := readTree(t, log)
	where := map[uint64][]int64{} // alloc size -> pids that logged it
	for _, e := range tl.events {
		if e.kind == logfmt.KindAlloc {
			where[e.size] = append(where[e.size], tl.pidOf[e.tid])
		}
	}
	one := func(size uint64, want func(int64) bool, who string) {
		t.Helper()
		if ps := where[size]; len(ps) != 1 || !want(ps[0]) {
			t.Errorf("alloc of %d logged in processes %v, want once in %s", size, ps, who)
		}
	}
	one(1111, func(p int64) bool { return p == parent }, "the parent")
	one(3333, func(p int64) bool { return p == parent }, "the parent")
	one(2222, func(p int64) bool { return p == child }, "the child")
	one(4444, func(p int64) bool { return p != parent && p != child && p != 0 }, "the grandchild")
	one(5555, func(p int64) bool { return p != parent && p != child && p != 0 }, "the exec'd grandchild")
	if where[4444] != nil && where[5555] != nil && where[4444][0] != where[5555][0] {
		t.Errorf("the grandchild (%v) and its exec'd image (%v) should share a pid", where[4444], where[5555])
	}
	// The child frees its parent's block, with its size.
	freed := false
	for _, e := range tl.events {
		if e.kind == logfmt.KindFree && e.size == 1111 && tl.pidOf[e.tid] == child {
			freed = true
		}
	}
	if !freed {
		t.Errorf("the child's free of the inherited 1111-byte block is missing or has no size")
	}
	forks, execs, exits := 0, 0, 0
	for _, p := range tl.procs {
		switch p["event"] {
		case "fork":
			forks++
		case "exec":
			execs++
		case "exit":
			exits++
		}
	}
	// The eBPF path logs the launch's exec too; the library's log starts
	// in the program.
	minExecs := 1
	if bpf {
		minExecs = 2
	}
	if forks != 2 || execs < minExecs || exits != 3 {
		t.Errorf("proc lines: %d forks, %d execs, %d exits; want 2, >=%d, 3", forks, execs, exits, minExecs)
	}
	// Without --follow the children stay out of the log, the grandchild's
	// exec'd image too.
	code, so, se = memtraceRun(t, nil, append(pre, "-o", log, "--", tree, execd)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	if bpf {
		bpfLog(t, log)
	}
	fmt.Sscan(so, &parent, &child)
	tl = readTree(t, log)
	mine := 0
	for _, e := range tl.events {
		if p := tl.pidOf[e.tid]; p != parent {
			t.Errorf("without --follow, pid %d's event %+v is in the log", p, e)
			break
		}
		mine++
	}
	if mine == 0 {
		t.Errorf("without --follow, none of the program's own events is in the log")
	}
	// The child is said not to be traced, once, on both paths; the
	// grandchild, the untraced child's own, is not named.
	var said []map[string]string
	for _, p := range tl.procs {
		if p["event"] == "fork" || p["event"] == "exec" && p["pid"] != fmt.Sprint(parent) {
			t.Errorf("without --follow, the log has a proc line %v", p)
		}
		if p["event"] == logfmt.ProcUntraced {
			said = append(said, p)
		}
	}
	if len(said) != 1 || said[0]["pid"] != fmt.Sprint(child) || said[0]["ppid"] != fmt.Sprint(parent) ||
		said[0]["reason"] != logfmt.ReasonNotFollowed {
		t.Errorf("without --follow, untraced lines %v; want one for the child %d of %d, reason %q", said, child, parent, logfmt.ReasonNotFollowed)
	}
	if want := "child processes not traced: 1 "; !strings.Contains(se, want) {
		t.Errorf("the closing lines do not say %q:\n%s", want, se)
	}
}

const slowSrc = `#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
int main(void) {
	int fd = open("/etc/hostname", O_RDONLY); /* leaked */
	void *volatile keep = malloc(7777);      /* leaked */
	/* Until the test has seen a snapshot (bounded: 120 s, the test's own
	   bound on seeing one). */
	const char *stop = getenv("STOP_FILE");
	for (int i = 0; i < 4800 && (!stop || access(stop, F_OK) != 0); i++) { void *volatile p = malloc(100); free(p); usleep(25000); }
	return fd < 0;
}
`

// TestSnapshotsWhileRunning: --interval writes snapshots into the log
// while the target still runs; --report-dir writes the per-process report
// at exit, and report --aggregate merges the directory.
func TestSnapshotsWhileRunning(t *testing.T) {
	requireBPF(t)
	bin := buildWith(t, "gcc", "slow", slowSrc, "-O1", "-fno-omit-frame-pointer")
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	reports := filepath.Join(dir, "reports")
	cmd := command(need(t, "bin/memtrace"), "--track", "malloc,fd", "--stack-depth", "4", "--interval", "100ms",
		"--report-dir", reports, "-o", log, "--", bin)
	var se lockedBuffer
	cmd.Stderr = &se
	stop := filepath.Join(dir, "stop")
	cmd.Env = append(os.Environ(), "STOP_FILE="+stop)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// While the target (pid= in the header) still runs, a snapshot must
	// already be in the file: snapshots are written and flushed as they
	// are taken, not at the end. The target runs until the test has
	// looked (a loaded machine may take seconds to start memtrace, and
	// the bound is only how long a broken memtrace is waited for).
	sawWhileRunning := false
	why := "no snapshot line within 2 minutes"
	for start := time.Now(); time.Since(start) < 2*time.Minute && !sawWhileRunning; {
		time.Sleep(10 * time.Millisecond)
		b, _ := os.ReadFile(log)
		if !bytes.Contains(b, []byte("[memtrace] snapshot pid=")) {
			continue
		}
		var pid int
		if h := grepLines(b, "[memtrace] header "); h != "" {
			fmt.Sscanf(h[strings.Index(h, " pid=")+5:], "%d", &pid)
		}
		// A zombie still answers kill 0: look at its state instead.
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := bytes.LastIndexByte(st, ')'); pid > 0 && i > 0 && i+2 < len(st) && st[i+2] != 'Z' {
			sawWhileRunning = true
		}
		why = fmt.Sprintf("first snapshot seen after %v, target pid %d: %q %v", time.Since(start).Round(time.Millisecond), pid, st, err)
		break
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("memtrace: %v %s", err, se.String())
	}
	if !sawWhileRunning {
		t.Fatalf("no snapshot appeared in the log while the target ran: %s", why)
	}
	b := bpfLog(t, log)
	if !bytes.Contains(b, []byte("[memtrace] snapshot-top ")) || !bytes.Contains(b, []byte("path=/etc/hostname")) {
		t.Errorf("snapshots lack live stacks or open fds:\n%s", grepLines(b, "snapshot"))
	}
	if !bytes.Contains(b, []byte("[memtrace] fd event=leak")) {
		t.Errorf("no fd leak line at exit")
	}
	// With --stack-depth, descriptor lines carry the call stack.
	if open := grepLines(b, "call=openat kind=file path=/etc/hostname"); !strings.Contains(open, "stack=") || !strings.Contains(open, "main") {
		t.Errorf("the open of /etc/hostname has no stack through main: %q", open)
	}
	txts, _ := filepath.Glob(filepath.Join(reports, "slow-*_*.txt"))
	htmls, _ := filepath.Glob(filepath.Join(reports, "slow-*_*.html"))
	if len(txts) != 1 || len(htmls) != 1 {
		t.Fatalf("report dir holds %v %v", txts, htmls)
	}
	rep, _ := os.ReadFile(txts[0])
	for _, want := range []string{"process: slow", "current_bytes: 7777", "open_fds: 1", "/etc/hostname", "main"} {
		if !bytes.Contains(rep, []byte(want)) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	code, so, se2 := memtraceRun(t, nil, "report", "--aggregate", reports)
	if code != 0 || !strings.Contains(so, "1 processes") || !strings.Contains(so, "slow") {
		t.Errorf("aggregate: exit %d\n%s\n%s", code, so, se2)
	}
	if _, err := os.Stat(filepath.Join(reports, "memtrace_summary.html")); err != nil {
		t.Errorf("no summary html: %v", err)
	}
	code, _, se2 = memtraceRun(t, nil, "report", "--aggregate", t.TempDir())
	if code == 0 {
		t.Errorf("aggregating an empty directory succeeded")
	}
	oneLine(t, se2, "no memtrace process reports")
}

func grepLines(b []byte, sub string) string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			out = append(out, sc.Text())
		}
	}
	return strings.Join(out, "\n")
}

// TestMmapFiles: file mappings are left out unless --mmap-files, on both
// paths (under --preload the flag once never reached the library, and
// nothing was logged).
func TestMmapFiles(t *testing.T) {
	src := `#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
int main(void) { int fd = open("/etc/hostname", O_RDONLY);
	void *p = mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, 0); munmap(p, 4096); close(fd); return p == MAP_FAILED; }`
	bin := buildWith(t, "gcc", "fmap", src, "-O1")
	for _, mode := range []string{"bpf", "preload"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "bpf" {
				requireBPF(t)
			}
			for _, files := range []bool{false, true} {
				log := filepath.Join(t.TempDir(), "log")
				args := []string{"-o", log}
				if mode == "preload" {
					args = append(args, "--preload")
				}
				if files {
					args = append(args, "--mmap-files")
				}
				if code, _, se := memtraceRun(t, nil, append(args, "--", bin)...); code != 0 {
					t.Fatalf("exit %d: %s", code, se)
				}
				if m := logMode(t, log); m != mode {
					t.Fatalf("the log says mode=%s, want %s", m, mode)
				}
				tl := readTree(t, log)
				n := 0
				for _, e := range tl.events {
					if e.size == 4096 {
						n++
					}
				}
				if want := map[bool]int{false: 0, true: 2}[files]; n != want {
					t.Errorf("--mmap-files=%v: %d mmap/munmap lines of 4096 bytes, want %d", files, n, want)
				}
			}
		})
	}
}

// TestBadConfig: one clear line naming the file and line, exit 2.
func TestBadConfig(t *testing.T) {
	requireBPF(t)
	cfg := filepath.Join(t.TempDir(), "memtrace.cfg")
	os.WriteFile(cfg, []byte("track=malloc\nstack_depth=abc\n"), 0o644)
	code, _, se := memtraceRun(t, nil, "--config", cfg, "--", "/bin/true")
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	oneLine(t, se, cfg+":2")
	code, _, se = memtraceRun(t, []string{"MEMTRACE_TRACK=malloc,gpu"}, "--", "/bin/true")
	if code != 2 {
		t.Errorf("bad MEMTRACE_TRACK: exit %d, want 2", code)
	}
	oneLine(t, se, "gpu")
	// A good file is used, and a flag beats it.
	os.WriteFile(cfg, []byte("# comment\nmin_alloc=1K\n"), 0o644)
	bin := buildWith(t, "gcc", "sizes", "#include <stdlib.h>\nint main(void){void *volatile a=malloc(100),*volatile b=malloc(5000);free(a);free(b);return 0;}\n", "-O1")
	for _, c := range []struct {
		args []string
		want map[uint64]bool
	}{
		{[]string{"--config", cfg}, map[uint64]bool{5000: true}},
		{[]string{"--config", cfg, "--min-size", "0"}, map[uint64]bool{100: true, 5000: true}},
	} {
		log := filepath.Join(t.TempDir(), "log")
		if code, _, se := memtraceRun(t, nil, append(append(c.args, "-o", log, "--"), bin)...); code != 0 {
			t.Fatalf("exit %d: %s", code, se)
		}
		bpfLog(t, log)
		got := map[uint64]bool{}
		for _, e := range readTree(t, log).events {
			if e.kind == logfmt.KindAlloc && (e.size == 100 || e.size == 5000) {
				got[e.size] = true
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%v: allocations %v, want %v", c.args, got, c.want)
		}
	}
}
