package tests

// End-to-end tests of memtrace's LD_PRELOAD path (memtrace --preload, and
// the automatic fallback where eBPF is unavailable): it drops root under
// sudo, ends its log with the summary line, detaches on SIGINT/SIGTERM
// while the program runs on unharmed, and logs libstdc++'s start-up
// allocation as the eBPF path does.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
)

// preloadLogInfo is what these tests read from a log.
type preloadLogInfo struct {
	mode     string            // the header's mode=
	summary  map[string]string // the summary line's fields, nil if none
	lastMeta string            // the word of the last line when it is a meta line
	allocs   []logEvent
	frees    int
}

func readPreloadLog(t *testing.T, path string) preloadLogInfo {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the log: %v", err)
	}
	var info preloadLogInfo
	sc := logfmt.NewScanner(bytes.NewReader(data))
	var l logfmt.Line
	for sc.Scan() {
		if err := l.Parse(sc.Line()); err != nil {
			t.Fatalf("%s: %v: %q", path, err, sc.Line())
		}
		info.lastMeta = ""
		switch l.Kind {
		case logfmt.KindMeta:
			info.lastMeta = string(l.Word)
			kv := logfmt.Fields(l.Rest)
			switch string(l.Word) {
			case logfmt.WordHeader:
				info.mode, _ = logfmt.Field(kv, "mode")
			case logfmt.WordSummary:
				info.summary = map[string]string{}
				for _, f := range kv {
					info.summary[f.Key] = f.Value
				}
			}
		case logfmt.KindAlloc:
			info.allocs = append(info.allocs, logEvent{kind: l.Kind, tid: l.TID, name: string(l.Name), op: string(l.OpText), size: l.Size, ptr: l.Ptr})
		case logfmt.KindFree:
			info.frees++
		}
	}
	return info
}

// preloadPublicDir is a directory user 65534 can create files in (the
// log is created as the user behind sudo).
func preloadPublicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "memtrace-preload-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPreloadSudoRunsAsUser: under sudo, `memtrace --preload -- PROG` and
// the automatic fallback run PROG as SUDO_UID/SUDO_GID with exactly that
// user's groups, and the log is created as that user.
func TestPreloadSudoRunsAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		bpftest.Unavailable(t, "needs root: memtrace must be root for there to be root to drop")
	}
	u, err := user.LookupId(nobody)
	if err != nil {
		bpftest.Unavailable(t, "no user %s here", nobody)
	}
	gids, err := u.GroupIds()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(gids)
	cases := []struct {
		name  string
		env   []string
		flags []string
	}{
		{"--preload", nil, []string{"--preload"}},
		{"fallback", []string{"MEMTRACE_TEST_NO_BPF=1"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := filepath.Join(preloadPublicDir(t), "log")
			env := append([]string{"SUDO_UID=" + nobody, "SUDO_GID=" + nobody}, c.env...)
			args := append(append(c.flags, "-o", log, "--"), "/usr/bin/id")
			code, so, se := memtraceRun(t, env, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, se)
			}
			if c.name == "fallback" && !strings.Contains(se, "LD_PRELOAD fallback") {
				t.Errorf("no fallback notice: %q", se)
			}
			uid, gid, groups := idFields(so)
			sort.Strings(groups)
			if uid != nobody || gid != nobody || strings.Join(groups, ",") != strings.Join(gids, ",") {
				t.Errorf("PROG ran as %q: want uid=%s gid=%s groups=%s", strings.TrimSpace(so), nobody, nobody, strings.Join(gids, ","))
			}
			info := readPreloadLog(t, log)
			if info.mode != "preload" {
				t.Errorf("log header mode=%q, want preload", info.mode)
			}
			if len(info.allocs) == 0 {
				t.Errorf("the log has no allocation: the library was not loaded into PROG running as %s", nobody)
			}
			st, err := os.Stat(log)
			if err != nil {
				t.Fatal(err)
			}
			if sys := st.Sys().(*syscall.Stat_t); strconv.Itoa(int(sys.Uid)) != nobody {
				t.Errorf("log owned by uid %d, want %s (created as the user behind sudo)", sys.Uid, nobody)
			}
		})
	}
}

// idFields reads id's "uid=N(name) gid=N(name) groups=N(name),..." output.
func idFields(s string) (uid, gid string, groups []string) {
	num := func(v string) string {
		n, _, _ := strings.Cut(v, "(")
		return n
	}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "uid":
			uid = num(v)
		case "gid":
			gid = num(v)
		case "groups":
			for _, g := range strings.Split(v, ",") {
				groups = append(groups, num(g))
			}
		}
	}
	return uid, gid, groups
}

// TestPreloadSummary: the preload path's log ends with the summary line,
// whose counts are those of the log.
func TestPreloadSummary(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	code, _, se := memtraceRun(t, nil, "--preload", "-o", log, "--", need(t, "tests/progs/build/threads"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	info := readPreloadLog(t, log)
	checkPreloadSummary(t, info)
	if info.summary["lost"] != "0" {
		t.Errorf("summary lost=%s, want 0", info.summary["lost"])
	}
}

func checkPreloadSummary(t *testing.T, info preloadLogInfo) {
	t.Helper()
	if info.mode != "preload" {
		t.Errorf("log header mode=%q, want preload", info.mode)
	}
	if info.summary == nil || info.lastMeta != logfmt.WordSummary {
		t.Fatalf("the log does not end with a [memtrace] summary line")
	}
	for _, k := range []string{"events", "allocs", "frees", "lost", "duration_us"} {
		if _, err := strconv.ParseUint(info.summary[k], 10, 64); err != nil {
			t.Errorf("summary %s=%q is not a count", k, info.summary[k])
		}
	}
	if info.summary["allocs"] != strconv.Itoa(len(info.allocs)) || info.summary["frees"] != strconv.Itoa(info.frees) {
		t.Errorf("summary allocs=%s frees=%s, the log has %d and %d", info.summary["allocs"], info.summary["frees"], len(info.allocs), info.frees)
	}
}

const detachProg = `#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static void *churn(void *arg) {
	for (int i = 0; i < 200000; i++) { void *volatile p = malloc(7777); free(p); }
	return arg;
}
static void put(const char *path, const char *s) {
	char tmp[4096]; snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w"); fputs(s, f); fclose(f); rename(tmp, path);
}
int main(int argc, char **argv) {
	for (int i = 0; i < 100; i++) { void *volatile p = malloc(1111); free(p); }
	char pid[32]; snprintf(pid, sizeof pid, "%d\n", (int)getpid());
	put(argv[1], pid);
	/* Wait (at most 60 s) until the test says memtrace is gone. */
	for (int i = 0; i < 60000 && access(argv[2], F_OK) != 0; i++) {
		struct timespec ts = {0, 1000000}; nanosleep(&ts, NULL);
	}
	pthread_t t; pthread_create(&t, NULL, churn, NULL);
	pid_t c = fork();
	if (c == 0) { churn(NULL); _exit(0); }
	churn(NULL);
	pthread_join(t, NULL);
	int st = 0;
	if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st)) return 5;
	printf("done\n"); fflush(stdout);
	put(argv[3], "done\n");
	return 0;
}
`

// TestPreloadCtrlCDetaches: SIGINT or SIGTERM to memtrace (its PID only,
// not the program's) ends the log with its summary and memtrace with
// 128+N as on the eBPF path (130 for SIGINT, 143 for SIGTERM),
// and the program keeps running: its work afterwards, in two threads and
// a forked child, finishes with the right output after memtrace is gone
// and is not logged. Ten rounds: a hang would be intermittent.
func TestPreloadCtrlCDetaches(t *testing.T) {
	prog := buildC(t, "detach", detachProg)
	mt := need(t, "bin/memtrace")
	for round := range rounds(10, 2) {
		sig := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}[round%2]
		dir := t.TempDir()
		ready, goFile, done := filepath.Join(dir, "ready"), filepath.Join(dir, "go"), filepath.Join(dir, "done")
		log := filepath.Join(dir, "log")
		out, err := os.Create(filepath.Join(dir, "stdout"))
		if err != nil {
			t.Fatal(err)
		}
		// Files, not pipes: the program shares memtrace's stdout and
		// stderr, and a pipe would make Wait wait for the program.
		se, err := os.Create(filepath.Join(dir, "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		stderrText := func() string { b, _ := os.ReadFile(se.Name()); return string(b) }
		cmd := command(mt, "--preload", "-o", log, "--", prog, ready, goFile, done)
		cmd.Stdout, cmd.Stderr = out, se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		// However the round ends, the program is let go: it never
		// outlives the test waiting.
		release := func() { os.WriteFile(goFile, nil, 0o644) }
		if err := preloadWaitFile(ready, 20*time.Second); err != nil {
			release()
			cmd.Process.Kill()
			t.Fatalf("round %d: the program never got going: %v\n%s", round, err, stderrText())
		}
		if err := syscall.Kill(cmd.Process.Pid, sig); err != nil {
			t.Fatal(err)
		}
		var werr error
		select {
		case werr = <-exited:
		case <-time.After(15 * time.Second):
			release()
			<-exited
			t.Fatalf("round %d: memtrace did not detach on %v: it waited for the program\n%s", round, sig, stderrText())
		}
		var ee *exec.ExitError
		if !errors.As(werr, &ee) || ee.ExitCode() != 128+int(sig) {
			release()
			t.Fatalf("round %d: memtrace after %v: %v, want exit %d\n%s", round, sig, werr, 128+int(sig), stderrText())
		}
		if !strings.Contains(stderrText(), "detached") {
			t.Errorf("round %d: no detach notice: %q", round, stderrText())
		}
		info := readPreloadLog(t, log)
		checkPreloadSummary(t, info)
		var before, after int
		for _, a := range info.allocs {
			switch a.size {
			case 1111:
				before++
			case 7777:
				after++
			}
		}
		if before != 100 || after != 0 {
			t.Errorf("round %d: %d of the 100 allocations before the signal logged, %d made after it", round, before, after)
		}
		// Now the program does its heavy part with memtrace gone.
		release()
		if err := preloadWaitFile(done, 60*time.Second); err != nil {
			t.Fatalf("round %d: the program did not finish after memtrace left: %v", round, err)
		}
		pidB, _ := os.ReadFile(ready)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(pidB)))
		for deadline := time.Now().Add(10 * time.Second); pid > 0 && preloadRunning(pid); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the program (pid %d) still runs after saying done", round, pid)
			}
		}
		out.Close()
		se.Close()
		if b, _ := os.ReadFile(out.Name()); string(b) != "done\n" {
			t.Errorf("round %d: program output %q, want done", round, b)
		}
	}
}

func preloadWaitFile(path string, limit time.Duration) error {
	for deadline := time.Now().Add(limit); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %v", filepath.Base(path), limit)
		}
	}
}

// preloadRunning reports whether pid is alive and not a zombie.
func preloadRunning(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// TestPreloadLogsStartupPool: libstdc++ allocates its emergency exception
// pool before the preload library's constructor runs. The eBPF path logs
// that malloc; the preload path (memtrace --preload, and the library used
// alone) must log it too, exactly once, as the first allocation of the
// program's main thread.
func TestPreloadLogsStartupPool(t *testing.T) {
	requireBPF(t)
	prog := need(t, "tests/progs/build/cxx")
	lib := need(t, "bin/memtrace-preload.so")
	dir := t.TempDir()
	logs := map[string]string{}
	for _, mode := range []string{"bpf", "preload", "ldpreload"} {
		log := filepath.Join(dir, mode+".log")
		logs[mode] = log
		env := []string{"MEMTRACE_TRUTH=" + filepath.Join(dir, mode+".truth")}
		switch mode {
		case "bpf":
			if code, _, se := memtraceRun(t, env, "-o", log, "--", prog); code != 0 {
				t.Fatalf("memtrace: exit %d: %s", code, se)
			}
		case "preload":
			if code, _, se := memtraceRun(t, env, "--preload", "-o", log, "--", prog); code != 0 {
				t.Fatalf("memtrace --preload: exit %d: %s", code, se)
			}
		case "ldpreload":
			cmd := command(prog)
			cmd.Env = append(os.Environ(), append(env, "LD_PRELOAD="+lib, "MEMTRACK_OUTPUT="+log)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("LD_PRELOAD run: %v\n%s", err, out)
			}
		}
	}
	ebpf := readPreloadLog(t, logs["bpf"])
	if ebpf.mode != "bpf" {
		t.Fatalf("eBPF log header mode=%q, want bpf", ebpf.mode)
	}
	if len(ebpf.allocs) == 0 || ebpf.allocs[0].op != "malloc" {
		t.Fatalf("eBPF log: the first allocation is not libstdc++'s pool malloc: %v", ebpf.allocs)
	}
	pool := ebpf.allocs[0].size
	if pool < 1024 {
		t.Fatalf("eBPF log: first allocation malloc(%d) is too small for libstdc++'s pool", pool)
	}
	count := func(info preloadLogInfo) int {
		n := 0
		for _, a := range info.allocs {
			if a.op == "malloc" && a.size == pool {
				n++
			}
		}
		return n
	}
	if n := count(ebpf); n != 1 {
		t.Fatalf("eBPF log has %d malloc(%d), want 1", n, pool)
	}
	for _, mode := range []string{"preload", "ldpreload"} {
		info := readPreloadLog(t, logs[mode])
		if info.mode != "preload" {
			t.Errorf("%s: header mode=%q, want preload", mode, info.mode)
		}
		if n := count(info); n != 1 {
			t.Errorf("%s: %d malloc(%d) in the log, the eBPF log has 1", mode, n, pool)
			continue
		}
		first := info.allocs[0]
		if first.op != "malloc" || first.size != pool || first.name != ebpf.allocs[0].name {
			t.Errorf("%s: first allocation %s, want malloc size=%d by thread %q as in the eBPF log", mode, &first, pool, ebpf.allocs[0].name)
		}
	}
}

// TestPreloadForkWhileWalking: a fork while other threads take stacks
// leaves no child waiting for ever. The library asked the loader
// (dl_iterate_phdr) at every stack, and glibc's fork does not reset the
// lock that takes in the child: a child of progs/forkstress (four threads
// allocating without pause, 100 forks, each child allocating once) hung
// within its first 30 forks in 3 runs of 3 before the fork handlers held
// those calls back. Both of the library's modes: memtrace --preload's
// binary records and the drop-in text log. The program gives each child
// 20 s and exits 2 naming the one that hung. The parent must not hang
// either: its fork drains the text mode's writer FIFO, which must wake the
// threads waiting for room in it (ldpreload-4k).
func TestPreloadForkWhileWalking(t *testing.T) {
	prog := need(t, "tests/progs/build/forkstress")
	lib := need(t, "bin/memtrace-preload.so")
	// Rounds: the hang came in 3 of 3 runs under memtrace --preload and
	// 2 of 3 in the text mode, which takes a fraction of the time.
	// ldpreload-4k: the text mode's 4 KiB buffers fill the writer's FIFO
	// at once, so that the allocating threads wait for its slots while
	// the fork drains it. A drain that did not wake them left the program
	// hung at its join in about half the rounds (once in hundreds with
	// the default buffers, as CI met it).
	for mode, rounds := range map[string]int{"preload": 2, "ldpreload": 5, "ldpreload-4k": 5} {
		t.Run(mode, func(t *testing.T) {
			if testing.Short() && mode == "preload" {
				t.Skip("memtrace --preload's rounds take seconds each: make test runs them; the text mode's, here, share the code")
			}
			if testing.Short() {
				// make check runs each loop that hunts a race once
				// (docs/development.md); make test's five.
				rounds = 1
			}
			for r := 0; r < rounds; r++ {
				log := filepath.Join(t.TempDir(), "fork.log")
				var out []byte
				var err error
				if mode == "preload" {
					var code int
					var se string
					// The log is not what this checks: the churning
					// threads write GBs of it as fast as the machine
					// goes, which made a round disk-bound (over a
					// minute in CI). /dev/null keeps every stack walk
					// and conversion, without the disk.
					code, _, se = memtraceRun(t, nil, "--preload", "--stack-depth", "16", "-o", "/dev/null", "--", prog)
					if code != 0 {
						t.Fatalf("round %d: memtrace --preload: exit %d: %s", r, code, se)
					}
					continue
				}
				cmd := command(prog)
				cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "MEMTRACK_OUTPUT="+log, "MEMTRACK_STACK_DEPTH=16")
				if mode == "ldpreload-4k" {
					cmd.Env = append(cmd.Env, "MEMTRACK_BUFFER_SIZE=4096")
				}
				// A round takes seconds even under CI's load; one that
				// hangs is dumped (gdb's frames of every thread) well
				// before the command's own limit.
				if out, err = runWatched(cmd, 2*time.Minute); err != nil {
					t.Fatalf("round %d: LD_PRELOAD run: %v\n%s", r, err, out)
				}
			}
		})
	}
}
