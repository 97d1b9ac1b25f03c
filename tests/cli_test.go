package tests

// End-to-end tests of the memtrace command line in eBPF mode: bad input,
// exit status, dropping root under sudo, the TCP server, SIGKILL safety,
// time order and lost-record reporting.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/bpftest"
	"github.com/memtrace/memtrace/logfmt"
)

// buildC compiles a small C program for one test.
func buildC(t *testing.T, name, src string, flags ...string) string {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	args := append([]string{"-O1", "-o", bin, c, "-lpthread"}, flags...)
	if out, err := command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, out)
	}
	os.Chmod(dir, 0o755)
	return bin
}

// memtrace runs bin/memtrace and returns its exit status and stderr.
func memtraceRun(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := command(need(t, "bin/memtrace"), args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.Env = append(os.Environ(), env...)
	err := runCmd(t, cmd, 60*time.Second)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	} else if err != nil {
		t.Fatalf("memtrace %v: %v", args, err)
	}
	return code, so.String(), se.String()
}

// oneLine checks the "one clear line" rule for errors.
func oneLine(t *testing.T, stderr, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], want) || !strings.HasPrefix(lines[0], "memtrace: ") {
		t.Errorf("stderr should be one line containing %q, got:\n%s", want, stderr)
	}
}

func TestCLIBadInput(t *testing.T) {
	requireBPF(t)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown pid", []string{"-p", "999999999"}, 1, "no process with PID 999999999"},
		{"missing program", []string{"--", "/nonexistent/prog"}, 127, "cannot run /nonexistent/prog"},
		{"nothing to trace", nil, 2, "nothing to trace"},
		{"bad pid", []string{"-p", "abc"}, 2, `bad PID "abc"`},
		{"both modes", []string{"-p", "1", "--", "true"}, 2, "not both"},
		{"bad size", []string{"--min-size", "12Q", "--", "true"}, 2, "bad --min-size"},
		{"unknown flag", []string{"--frobnicate", "--", "true"}, 2, "frobnicate"},
		{"empty pid in a list", []string{"-p", "1,,2"}, 2, `bad PID ""`},
		{"kernel thread", []string{"-p", "2"}, 1, "kernel thread"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, se := memtraceRun(t, nil, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, se)
			}
			oneLine(t, se, c.want)
		})
	}
	// Static and Go programs: static_test.go (a static binary is traced
	// through its own malloc now; only a stripped one is refused).
}

const nobody = "65534"

// TestCLIWithoutPrivilege: as an ordinary user eBPF is unavailable; -p says
// so in one line, -- falls back to the LD_PRELOAD library with a notice.
func TestCLIWithoutPrivilege(t *testing.T) {
	requireBPF(t) // needs root to become someone else
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		bpftest.Unavailable(t, "setpriv (util-linux) not installed")
	}
	mt := need(t, "bin/memtrace")
	// t.TempDir's parent is private to root; nobody needs a path it can walk.
	dir, err := os.MkdirTemp("", "memtrace-nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	log := filepath.Join(dir, "log")
	run := func(args ...string) (int, string) {
		cmd := command(setpriv, append([]string{"--reuid=" + nobody, "--regid=" + nobody, "--clear-groups", mt}, args...)...)
		var se bytes.Buffer
		cmd.Stderr = &se
		err := runCmd(t, cmd, 60*time.Second)
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), se.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, se.String()
	}
	code, se := run("-p", "1")
	if code == 0 {
		t.Errorf("attach as nobody succeeded")
	}
	oneLine(t, se, "needs root")
	code, se = run("-o", log, "--", "/bin/ls", "/")
	if code != 0 {
		t.Errorf("fallback run: exit %d, stderr %q", code, se)
	}
	if !strings.Contains(se, "notice:") || !strings.Contains(se, "LD_PRELOAD") {
		t.Errorf("no fallback notice: %q", se)
	}
	if b, err := os.ReadFile(log); err != nil || !bytes.Contains(b, []byte("[memtrack] tid=")) {
		t.Errorf("fallback wrote no log (%v): %q", err, b)
	}
	// --floor is the eBPF probes' baseline: the library refuses it, as
	// the fallback and with --preload alike (a full trace was taken for
	// the floor), in one line and exit 2.
	for _, args := range [][]string{{"--floor", "--", "/bin/true"}, {"--preload", "--floor", "--", "/bin/true"}} {
		code, se = run(args...)
		if code != 2 || strings.Contains(se, "LD_PRELOAD fallback") {
			t.Errorf("%q as nobody: exit %d, stderr %q; want exit 2 and no fallback", args, code, se)
		}
		oneLine(t, se, "--floor measures the eBPF probes")
	}
}

func TestCLIExitStatus(t *testing.T) {
	requireBPF(t)
	bin := buildC(t, "st", `#include <stdlib.h>
#include <signal.h>
#include <string.h>
int main(int c, char **v){ void *volatile p = malloc(10); free(p);
 if (c > 1 && !strcmp(v[1], "kill")) raise(SIGKILL);
 return c > 1 ? atoi(v[1]) : 0; }`)
	for _, c := range []struct {
		arg  string
		code int
	}{{"7", 7}, {"kill", 128 + 9}} {
		log := filepath.Join(t.TempDir(), "l")
		if code, _, se := memtraceRun(t, nil, "-o", log, "--", bin, c.arg); code != c.code {
			t.Errorf("%s: exit %d, want %d (%s)", c.arg, code, c.code, se)
		}
		bpfLog(t, log)
	}
}

// TestCLISudoRunsAsUser: under sudo, PROG runs as SUDO_UID/SUDO_GID with
// their groups, never as root.
func TestCLISudoRunsAsUser(t *testing.T) {
	requireBPF(t)
	log := filepath.Join(sudoDir(t, 0o777, 0), "l") // a directory the user can write
	code, so, se := memtraceRun(t, []string{"SUDO_UID=" + nobody, "SUDO_GID=" + nobody},
		"-o", log, "--", "/usr/bin/id", "-u")
	if code != 0 || strings.TrimSpace(so) != nobody {
		t.Errorf("id -u under memtrace with SUDO_UID=%s: %q (exit %d, %s)", nobody, so, code, se)
	}
	bpfLog(t, log)
	log = filepath.Join(sudoDir(t, 0o777, 0), "l")
	_, so, _ = memtraceRun(t, []string{"SUDO_UID=" + nobody, "SUDO_GID=" + nobody},
		"-o", log, "--", "/usr/bin/id", "-G")
	if strings.Contains(" "+strings.TrimSpace(so)+" ", " 0 ") {
		t.Errorf("supplementary groups kept root's group: %q", so)
	}
	bpfLog(t, log)
}

const tcpProg = `#include <stdlib.h>
#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>
int main(int c, char **v){
 int fd = open(v[1], O_CREAT|O_WRONLY, 0644); close(fd); /* proves PROG started */
 void *volatile p[3];
 for (int i = 0; i < 3; i++) p[i] = malloc(3000 + i);
 for (int i = 0; i < 3; i++) free(p[i]);
 printf("%p %p %p\n", p[0], p[1], p[2]);
 return 0; }`

// TestCLITCP: with --port, PROG starts only once a viewer connects, and
// the viewer receives the whole log.
func TestCLITCP(t *testing.T) {
	requireBPF(t)
	bin := buildC(t, "tcp", tcpProg)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	marker := filepath.Join(t.TempDir(), "started")
	cmd := command(need(t, "bin/memtrace"), "--port", fmt.Sprint(port), "--", bin, marker)
	var so, se lockedBuffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var conn net.Conn
	for i := 0; i < 200; i++ {
		var err error
		if conn, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			break
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the program started before a viewer connected")
		}
		time.Sleep(25 * time.Millisecond)
	}
	if conn == nil {
		t.Fatalf("no server on port %d: %s", port, se.String())
	}
	data, _ := io.ReadAll(conn)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("memtrace: %v %s", err, se.String())
	}
	bpftest.RequireModeBPF(t, data)
	if !strings.Contains(se.String(), "waiting for a viewer on 127.0.0.1:") {
		t.Errorf("server should listen on loopback: %q", se.String())
	}
	var ptrs [3]uint64
	if _, err := fmt.Sscanf(so.String(), "%v %v %v", &ptrs[0], &ptrs[1], &ptrs[2]); err != nil {
		t.Fatalf("program output %q: %v", so.String(), err)
	}
	found := 0
	sc := logfmt.NewScanner(bytes.NewReader(data))
	var l logfmt.Line
	header := false
	for sc.Scan() {
		if l.Parse(sc.Line()) != nil {
			continue
		}
		if l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordHeader {
			header = true
		}
		for i, p := range ptrs {
			if l.Kind == logfmt.KindAlloc && l.Ptr == p && l.Size == uint64(3000+i) {
				found++
			}
		}
	}
	if !header || found != 3 {
		t.Errorf("viewer got header=%v and %d of 3 allocations:\n%s", header, found, data)
	}
}

// spinProg allocates until a byte arrives on its stdin (however long
// memtrace takes to attach on a loaded machine), then 200 times more (the
// probes of a killed memtrace gone) and says how many.
const spinProg = `#include <stdlib.h>
#include <stdio.h>
#include <poll.h>
#include <unistd.h>
int main(void){
 long sum = 0, after = -1;
 write(1, "ready\n", 6);
 for (int i = 0; after < 200 && i < 100000; i++) {
  char *volatile p = malloc(100 + (i & 255)); p[0] = 1; sum += p[0]; free(p); usleep(5000);
  struct pollfd pf = { 0, POLLIN, 0 };
  if (after >= 0) after++;
  else if (poll(&pf, 1, 0) == 1) after = 0;
 }
 printf("done %ld\n", after);
 return 0; }`

// TestCLISigkillLeavesTarget: memtrace killed with SIGKILL never harms the
// traced process: the kernel drops the probes and the program finishes.
func TestCLISigkillLeavesTarget(t *testing.T) {
	requireBPF(t)
	bin := buildC(t, "spin", spinProg)
	target := command(bin)
	out, _ := target.StdoutPipe()
	in, _ := target.StdinPipe()
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer target.Process.Kill()
	rd := bufio.NewReader(out)
	if l, _ := rd.ReadString('\n'); l != "ready\n" {
		t.Fatalf("target said %q", l)
	}
	log := filepath.Join(t.TempDir(), "log")
	mt := command(need(t, "bin/memtrace"), "-o", log, "-p", fmt.Sprint(target.Process.Pid))
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	// The target allocates until told to stop: wait until memtrace has
	// logged some of it, then kill memtrace while the probes fire.
	for i := 0; i < 6000; i++ {
		if b, _ := os.ReadFile(log); bytes.Contains(b, []byte("ptr=")) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mt.Process.Signal(syscall.SIGKILL)
	mt.Wait()
	in.Write([]byte{'s'})
	rest, _ := io.ReadAll(rd)
	if err := target.Wait(); err != nil {
		t.Fatalf("target after memtrace's SIGKILL: %v", err)
	}
	if strings.TrimSpace(string(rest)) != "done 200" {
		t.Errorf("target output %q", rest)
	}
	b := bpfLog(t, log)
	if !bytes.Contains(b, []byte("ptr=")) {
		t.Errorf("log before the kill holds no events:\n%s", b)
	}
}

const mtProg = `#include <stdlib.h>
#include <pthread.h>
static void *w(void *a){ for (int i = 0; i < 3000; i++) { void *volatile p = malloc(16 + (i & 63)); free(p); } return 0; }
int main(void){ pthread_t t[4]; for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, w, 0);
 for (int i = 0; i < 4; i++) pthread_join(t[i], 0); return 0; }`

// TestCLITimeOrder: events from several CPUs come out in global time order.
func TestCLITimeOrder(t *testing.T) {
	requireBPF(t)
	bin := buildC(t, "mt", mtProg)
	log := filepath.Join(t.TempDir(), "log")
	if code, _, se := memtraceRun(t, nil, "-o", log, "--", bin); code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	sc := logfmt.NewScanner(bytes.NewReader(bpfLog(t, log)))
	var l logfmt.Line
	var last uint64
	n, threads := 0, map[int64]bool{}
	for sc.Scan() {
		if l.Parse(sc.Line()) != nil || (l.Kind != logfmt.KindAlloc && l.Kind != logfmt.KindFree && l.Kind != logfmt.KindExit) {
			continue
		}
		if l.TS < last {
			t.Fatalf("line %q goes back in time (previous ts %d)", sc.Line(), last)
		}
		last = l.TS
		n++
		threads[l.TID] = true
	}
	if n < 4*6000 || len(threads) < 5 {
		t.Errorf("only %d events from %d threads", n, len(threads))
	}
}

// TestCLILostRecords: a ring buffer too small for the rate loses records,
// and the log and stderr say how many.
//
// What it can hold the log to exactly: every call of the workers (4 x 3000
// malloc, each freed at once) is logged or counted lost. A free is the one
// exception by design: in launch mode the agent leaves out a free of a
// block it never saw (libc's own bookkeeping: the tcache a thread empties
// as it exits), and the free of a block whose malloc was lost is one; so
// the frees are held to the mallocs that were logged.
func TestCLILostRecords(t *testing.T) {
	requireBPF(t)
	bin := buildC(t, "mt", mtProg)
	log := filepath.Join(t.TempDir(), "log")
	code, _, se := memtraceRun(t, nil, "--buffer-size", "4K", "-o", log, "--", bin)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	const calls = 4 * 3000 // of malloc, and as many of free, in the workers
	b := bpfLog(t, log)
	sc := logfmt.NewScanner(bytes.NewReader(b))
	var l logfmt.Line
	var lostLines, summaryLost, events, allocs, frees uint64
	var pid int64
	for sc.Scan() {
		if l.Parse(sc.Line()) != nil {
			continue
		}
		switch {
		case l.Kind == logfmt.KindAlloc || l.Kind == logfmt.KindFree:
			events++
			if l.TID == pid {
				continue // pthread_create's own blocks, in the main thread
			}
			if l.Kind == logfmt.KindAlloc {
				allocs++
			} else {
				frees++
			}
		case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordHeader:
			v, _ := logfmt.Field(logfmt.Fields(l.Rest), "pid")
			fmt.Sscan(v, &pid)
		case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordLost:
			v, _ := logfmt.Field(logfmt.Fields(l.Rest), "count")
			var n uint64
			fmt.Sscan(v, &n)
			lostLines += n
		case l.Kind == logfmt.KindMeta && string(l.Word) == logfmt.WordSummary:
			v, _ := logfmt.Field(logfmt.Fields(l.Rest), "lost")
			fmt.Sscan(v, &summaryLost)
		}
	}
	if pid == 0 {
		t.Fatalf("no pid in the log's header")
	}
	if lostLines == 0 || lostLines != summaryLost {
		t.Errorf("lost lines add up to %d, summary says %d", lostLines, summaryLost)
	}
	if allocs+summaryLost < calls {
		t.Errorf("%d mallocs logged + %d lost < %d made", allocs, summaryLost, calls)
	}
	if frees > allocs || frees+summaryLost < allocs {
		t.Errorf("%d frees logged, %d lost: the %d mallocs logged were freed at once", frees, summaryLost, allocs)
	}
	// Lost counts dropped events (and an exit or exec line at most), not
	// the thread-name records that went with them.
	if events+summaryLost > 2*calls+64 {
		t.Errorf("%d events + %d lost: far more than the %d calls made", events, summaryLost, 2*calls)
	}
	if !strings.Contains(se, "records lost") {
		t.Errorf("stderr does not report the loss: %q", se)
	}
}

// TestCLIHelpAndVersion: GNU style. --help, -h and "memtrace help" print
// the usage on stdout with --long options and exit 0; --version prints the
// version; a program called help still runs with "-- help".
func TestCLIHelpAndVersion(t *testing.T) {
	mt := need(t, "bin/memtrace")
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		cmd := command(mt, args...)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := runCmd(t, cmd, 20*time.Second); err != nil {
			t.Fatalf("memtrace %v: %v (stderr %q)", args, err, se.String())
		}
		out := so.String()
		for _, want := range []string{"usage: memtrace", "--stack-depth N", "-f, --follow", "-o FILE", "-p PID"} {
			if !strings.Contains(out, want) {
				t.Errorf("memtrace %v: the help lacks %q:\n%s", args, want, out)
			}
		}
		if strings.Contains(out, "\n  -stack-depth") || se.Len() != 0 {
			t.Errorf("memtrace %v: Go's -flag style or output on stderr: %q / %q", args, out, se.String())
		}
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, err := command(mt, args...).Output()
		if err != nil || !strings.HasPrefix(string(out), "memtrace ") || len(strings.Fields(string(out))) != 2 {
			t.Errorf("memtrace %v: %q, %v", args, out, err)
		}
	}
	dir := t.TempDir()
	help := filepath.Join(dir, "help")
	if err := os.WriteFile(help, []byte("#!/bin/sh\necho ran-help\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := command(mt, "--preload", "-o", filepath.Join(dir, "log"), "--", help)
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "ran-help") {
		t.Errorf("memtrace -- help (a program called help): %q, %v", out, err)
	}
}

// TestViewerAndReportVersion: memview and memtrace report say their version
// as memtrace does.
func TestViewerAndReportVersion(t *testing.T) {
	for _, c := range []struct {
		bin  string
		args []string
		want string
	}{
		{"bin/memview", []string{"--version"}, "memview "},
		{"bin/memtrace", []string{"report", "--version"}, "memtrace report "},
	} {
		out, err := command(need(t, c.bin), c.args...).Output()
		if err != nil || !strings.HasPrefix(string(out), c.want) || strings.Count(string(out), "\n") != 1 {
			t.Errorf("%s %v: %q, %v", c.bin, c.args, out, err)
		}
		mt, _ := command(need(t, "bin/memtrace"), "--version").Output()
		if v := strings.Fields(string(out)); len(v) == 0 || !strings.HasSuffix(strings.TrimSpace(string(mt)), v[len(v)-1]) {
			t.Errorf("%s %v says %q, memtrace says %q", c.bin, c.args, out, mt)
		}
	}
}

// TestMistypedSubcommand: memtrace reprot x.log, with no program reprot
// in PATH, is one line that names report, exit 127 (a shell's "not
// found"); with a program reprot in PATH, that program is what runs and
// its status is memtrace's (issue 33).
func TestMistypedSubcommand(t *testing.T) {
	requireBPF(t)
	bin := need(t, "bin/memtrace")
	dir := t.TempDir()
	run := func(path string) (int, string) {
		cmd := command(bin, "reprot", "x.log")
		cmd.Dir = dir // the default log goes here
		var se bytes.Buffer
		cmd.Stderr = &se
		cmd.Env = append(os.Environ(), "PATH="+path)
		err := runCmd(t, cmd, 60*time.Second)
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("memtrace reprot: %v", err)
		}
		return cmd.ProcessState.ExitCode(), se.String()
	}
	code, stderr := run("/usr/bin:/bin")
	if code != 127 || stderr != "memtrace: reprot: no such program or subcommand; did you mean 'report'?\n" {
		t.Errorf("no reprot in PATH: exit %d, stderr %q", code, stderr)
	}
	progs := t.TempDir()
	if err := os.WriteFile(filepath.Join(progs, "reprot"), []byte("#!/bin/sh\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(progs, 0o755)
	code, stderr = run(progs + ":/usr/bin:/bin")
	if code != 7 || strings.Contains(stderr, "did you mean") {
		t.Errorf("reprot in PATH: exit %d, want its 7; stderr:\n%s", code, stderr)
	}
}
