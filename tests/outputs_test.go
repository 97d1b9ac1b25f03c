package tests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/asuser/asusertest"
	"github.com/memtrace/memtrace/internal/bpftest"
)

// outPath is one way memtrace captures: eBPF, --preload, and the fallback
// an ordinary user gets (the LD_PRELOAD library, memtrace not root).
type outPath struct {
	name  string
	flags []string
	user  bool // run as nobody
}

var outPaths = []outPath{{"bpf", nil, false}, {"preload", []string{"--preload"}, false}, {"user", nil, true}}

// runOut runs a command as root, or as nobody (p.user), in dir, and
// returns its exit status and stderr.
func runOut(t *testing.T, p outPath, dir string, env []string, name string, args ...string) (int, string) {
	t.Helper()
	cmd := command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if p.user {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: asusertest.Other, Gid: asusertest.Other}}
	}
	var se bytes.Buffer
	cmd.Stderr = &se
	err := runCmd(t, cmd, 60*time.Second)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), se.String()
	}
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return 0, se.String()
}

// publicDir is a directory every user may enter and write.
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "memtrace-out")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// noPanic checks docs/cli.md's contract for a failure before PROG starts:
// exactly one line, memtrace's, with the documented status; never a Go
// panic or a goroutine dump.
func noPanic(t *testing.T, what string, code int, stderr string, wantCode int, want string) {
	t.Helper()
	if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
		t.Errorf("%s: a Go panic reached the user:\n%s", what, stderr)
		return
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "memtrace: ") || !strings.Contains(lines[0], want) {
		t.Errorf("%s: stderr should be one memtrace line containing %q, got:\n%s", what, want, stderr)
	}
	if code != wantCode {
		t.Errorf("%s: exit %d, want %d (stderr %q)", what, code, wantCode, stderr)
	}
}

// TestEarlyFailures: every failure before the program starts is one line
// and a documented exit status (docs/cli.md, "Exit status") on every path,
// and the program never runs.
func TestEarlyFailures(t *testing.T) {
	requireBPF(t) // root, to run as nobody too
	mt := need(t, "bin/memtrace")
	dir := publicDir(t)
	notExec := filepath.Join(dir, "not-exec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\ntrue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(dir, "a-file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	prog := []string{"--", "/usr/bin/touch", marker}
	with := func(args ...string) []string { return append(args, prog...) }
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"log in a missing directory", with("-o", filepath.Join(dir, "no/such/dir/x.log")), 1, "create log"},
		{"log is a directory", with("-o", dir), 1, "is a directory"},
		{"log under a file", with("-o", filepath.Join(aFile, "x.log")), 1, "not a directory"},
		{"bad --report-dir", with("--report-dir", filepath.Join(aFile, "r")), 2, "--report-dir"},
		{"bad --profile-dir", with("--profile-dir", filepath.Join(aFile, "p")), 2, "--profile-dir"},
		{"PROG missing", []string{"--", filepath.Join(dir, "missing")}, 127, "cannot run"},
		{"PROG not executable", []string{"--", notExec}, 126, "cannot execute"},
		{"-p of no process", []string{"-p", "2147483647"}, 1, ""},
		{"-p not permitted", []string{"-p", "1"}, 1, ""},
	}
	for _, p := range outPaths {
		t.Run(p.name, func(t *testing.T) {
			if p.user {
				v := command(mt, "--version")
				v.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: asusertest.Other, Gid: asusertest.Other}}
				if err := v.Run(); err != nil {
					bpftest.Unavailable(t, "user %d cannot run %s: %v", asusertest.Other, mt, err)
				}
			}
			for _, c := range cases {
				code := c.code
				if p.name == "preload" && strings.HasPrefix(c.name, "-p") {
					code = 2 // --preload starts a program: a usage error
				}
				if p.name == "bpf" && c.name == "-p not permitted" {
					continue // root may attach to init
				}
				got, se := runOut(t, p, dir, nil, mt, append(append([]string{}, p.flags...), c.args...)...)
				noPanic(t, c.name, got, se, code, c.want)
				if _, err := os.Stat(marker); err == nil {
					t.Errorf("%s: the program ran", c.name)
					os.Remove(marker)
				}
			}
		})
	}
}

// TestLogRefusesPlantedLink: as root, -o naming a symlink another user
// planted (to a root-owned file) is refused in one line that names it, on
// both paths, the file behind it untouched and PROG not started; so is a
// link planted under the default name memtrace.PROG.PID.log.zst (memtrace
// is PID 1 in a PID namespace of its own, with its own /proc, so the
// name is known).
func TestLogRefusesPlantedLink(t *testing.T) {
	requireBPF(t)
	mt := need(t, "bin/memtrace")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		bpftest.Unavailable(t, "unshare (util-linux) not installed")
	}
	root := outPath{name: "root"}
	for _, p := range outPaths[:2] {
		t.Run(p.name, func(t *testing.T) {
			link, victim := asusertest.Plant(t, "evil.log")
			marker := filepath.Join(publicDir(t), "ran")
			args := append(append([]string{}, p.flags...), "-o", link, "--", "/usr/bin/touch", marker)
			code, se := runOut(t, root, "/", nil, mt, args...)
			noPanic(t, "-o "+link, code, se, 1, "create log "+link+": is a symbolic link")
			asusertest.Untouched(t, link, victim)
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the program ran")
			}

			dir := asusertest.Dir(t)
			name := filepath.Join(dir, "memtrace.touch.1.log.zst")
			victim = asusertest.PlantAt(t, name)
			args = append(append([]string{"--pid", "--fork", "--mount-proc", mt}, p.flags...), "--", "/usr/bin/touch", marker)
			code, se = runOut(t, root, dir, nil, unshare, args...)
			noPanic(t, "the default name", code, se, 1, "create log memtrace.touch.1.log.zst: file exists")
			asusertest.Untouched(t, name, victim)
		})
	}
}

// TestExportsRefusePlantedLinks: as root, every file `memtrace report`
// writes (--html, --json, --pprof, --folded, --massif, --aggregate's
// summary), memview's -o and a --sample profile refuse a link another user
// planted, and leave what it points at alone.
func TestExportsRefusePlantedLinks(t *testing.T) {
	requireBPF(t)
	mt, mv := need(t, "bin/memtrace"), need(t, "bin/memview")
	root := outPath{name: "root"}
	dir := publicDir(t)
	log := filepath.Join(dir, "run.log")
	reports := filepath.Join(dir, "reports")
	if code, se := runOut(t, root, dir, nil, mt, "-o", log, "--report-dir", reports, "--", "/bin/ls", "/"); code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	for _, flag := range []string{"--html", "--json", "--pprof", "--folded", "--massif"} {
		link, victim := asusertest.Plant(t, "export")
		code, se := runOut(t, root, dir, nil, mt, "report", flag, link, log)
		if code == 0 || !strings.Contains(se, link) || !strings.Contains(se, "symbolic link") || strings.Count(strings.TrimSpace(se), "\n") != 0 {
			t.Errorf("report %s through a planted link: exit %d, stderr %q", flag, code, se)
		}
		asusertest.Untouched(t, link, victim)
	}

	victim := asusertest.PlantAt(t, filepath.Join(reports, "memtrace_summary.txt"))
	code, se := runOut(t, root, dir, nil, mt, "report", "--aggregate", reports)
	if code == 0 || !strings.Contains(se, "symbolic link") {
		t.Errorf("--aggregate through a planted link: exit %d, stderr %q", code, se)
	}
	asusertest.Untouched(t, filepath.Join(reports, "memtrace_summary.txt"), victim)

	link, victim := asusertest.Plant(t, "saved.log")
	code, se = runOut(t, root, dir, nil, mv, "127.0.0.1:1", "-o", link)
	if code == 0 || !strings.Contains(se, link) {
		t.Errorf("memview -o through a planted link: exit %d, stderr %q", code, se)
	}
	asusertest.Untouched(t, link, victim)

	for _, p := range outPaths[:2] {
		link, victim := asusertest.Plant(t, "heap.pb.gz")
		args := append(append([]string{}, p.flags...), "--sample", "4096", "-o", link, "--", "/bin/ls", "/")
		_, se := runOut(t, root, dir, nil, mt, args...)
		if !strings.Contains(se, fmt.Sprintf("-o %s: write the profile: is a symbolic link", link)) {
			t.Errorf("%s: --sample -o through a planted link: stderr %q", p.name, se)
		}
		asusertest.Untouched(t, link, victim)
	}
}

// fullFS mounts a tmpfs of a few pages under the test's directory and
// fills it, for writes that fail with ENOSPC; dirs are made first (a
// directory takes no page of a tmpfs).
func fullFS(t *testing.T, dirs ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		bpftest.Unavailable(t, "mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "memtrace-full", mnt).CombinedOutput(); err != nil {
		bpftest.Unavailable(t, "mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(mnt, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	f.Close()
	return mnt
}

// TestFullDiskLeavesNoPartialFiles: --report-dir and --profile-dir on a
// full filesystem say so and leave no empty or partial file behind, on
// both paths.
func TestFullDiskLeavesNoPartialFiles(t *testing.T) {
	requireBPF(t)
	mt := need(t, "bin/memtrace")
	root := outPath{name: "root"}
	for _, p := range outPaths[:2] {
		t.Run(p.name, func(t *testing.T) {
			mnt := fullFS(t, "reports", "profiles")
			log := filepath.Join(t.TempDir(), "run.log")
			args := append(append([]string{}, p.flags...), "-o", log, "--report-dir", filepath.Join(mnt, "reports"),
				"--profile-dir", filepath.Join(mnt, "profiles"), "--interval", "100ms", "--", "/bin/sleep", "0.6")
			code, se := runOut(t, root, "/", nil, mt, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, se)
			}
			if !strings.Contains(se, "no space left on device") {
				t.Errorf("no line says the disk is full: %q", se)
			}
			for _, d := range []string{"reports", "profiles"} {
				if ents, _ := os.ReadDir(filepath.Join(mnt, d)); len(ents) != 0 {
					var names []string
					for _, e := range ents {
						names = append(names, e.Name())
					}
					t.Errorf("%s: left on the full disk: %v", d, names)
				}
			}
		})
	}
}
